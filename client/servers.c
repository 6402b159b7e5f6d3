/* servers.c: the server table's answers (DESIGN.md 7a, "servers"). Whether a server is
 * alive, takes work, has room, is idle, or takes an instruction's frames is asked here and
 * only here; a server found dead in the middle of something (a send that failed, a message
 * that ends its session) is only marked, and the loop's reap phase ends its session once
 * per turn (scheduler.c, reap), never re-entrantly. It owns the entries' `gone`, `final`,
 * `why` and `limit` fields; it never touches records, jobs or policies' state. Dispatcher
 * thread only. */
#include <stdio.h>

#include <lithium/error.h>
#include "log.h"
#include "placement.h"
#include "sched_servers.h"
#include "vec.h"

int lt__server_alive(const lt_sched_t *s, size_t i) {
  const lt_server_t *v = &s->srv[i];
  return !v->gone && (v->conn.state == LT_CONN_READY || v->conn.state == LT_CONN_STOPPING);
}

int lt__server_takes(const lt_sched_t *s, size_t i) {
  const lt_server_t *v = &s->srv[i];
  return !v->gone && !v->slot.lacks && !v->slot.probation && v->conn.state == LT_CONN_READY &&
         lt__server_cap(s, i) > 0;
}

int lt__servers_takers(const lt_sched_t *s, int greeting) {
  int n = 0;
  for (size_t i = 0; i < s->nsrv; i++)
    n += lt__server_takes(s, i) || (greeting && s->srv[i].conn.state == LT_CONN_HELLO);
  return n;
}

int lt__server_held(const lt_sched_t *s, size_t i) {
  const lt_server_t *v = &s->srv[i];
  return !v->gone && !v->slot.lacks && !v->slot.probation && !v->slot.removed &&
         v->conn.state == LT_CONN_READY && v->pace.cap > 0 && lt__server_cap(s, i) == 0;
}

uint32_t lt__server_cap(const lt_sched_t *s, size_t i) {
  const lt_server_t *v = &s->srv[i];
  uint32_t cap = v->pace.cap;
  for (size_t k = 0; k < LT_POLICY_MAX; k++)
    if (v->limit[k] < cap) cap = v->limit[k];
  return cap;
}

/* limited tells whether some policy limits server i. */
static int limited(const lt_sched_t *s, size_t i) {
  for (size_t k = 0; k < LT_POLICY_MAX; k++)
    if (s->srv[i].limit[k] != LT_NO_LIMIT) return 1;
  return 0;
}

int lt__server_has_room(const lt_sched_t *s, size_t i) {
  /* Instructions parked there for inputs (a combine waiting for its parts, a successor for
   * its producer) hold no thread: they do not fill the room lookahead keeps for work. */
  uint32_t admitted = s->srv[i].admitted, parked = s->srv[i].pace.parked;
  admitted -= parked < admitted ? parked : admitted;
  return admitted < lt__server_cap(s, i);
}

double lt__server_left_us(const lt_sched_t *s, size_t i, int64_t now_ms) {
  double running = 0, elapsed_us = 0, cap_us = 0;
  /* The running ones lead the server's list (instr.c marks them from its head), so the walk
   * stops at the first that waits: O(window), not O(what lookahead queued). */
  for (const lt_instr_rec_t *r = s->srv[i].slot.out; r != NULL && r->run_ms >= 0; r = r->out_next) {
    if (r->run_ms > now_ms) continue;
    running++;
    elapsed_us += (double)(now_ms - r->run_ms) * 1000.0;
    cap_us += 0.9 * r->cost_us;
  }
  double done = running > 0 ? elapsed_us / running : 0;
  if (done > cap_us) done = cap_us;
  double left = lt__pace_backlog_us(s, i) - done;
  return left > 0 ? left : 0;
}

int lt__server_idle(const lt_sched_t *s, size_t i) {
  return lt__server_takes(s, i) && !limited(s, i) && s->srv[i].admitted == 0 &&
         s->srv[i].conn.inflight == 0;
}

uint64_t lt__server_frame_need(const lt_sched_t *s, const lt_fire_t *fi, int i) {
  uint64_t need = 0;
  for (uint32_t k = 0; k < fi->ninputs; k++) {
    const lt_token_t *t = &fi->inputs[k];
    uint64_t n = t->value != NULL ? t->value->len : lt__holder(s, t) != i ? t->size : 0;
    if (n > need) need = n;
  }
  return need;
}

int lt__server_fits(const lt_sched_t *s, size_t i, const lt_fire_t *fi) {
  uint64_t lim = s->srv[i].conn.max_frame;
  return lim == 0 || lt__server_frame_need(s, fi, (int)i) <= lim;
}

uint64_t lt__server_least_frame(const lt_sched_t *s) {
  uint64_t least = UINT64_MAX;
  for (size_t i = 0; i < s->nsrv; i++)
    if (lt__server_takes(s, i) && s->srv[i].conn.max_frame > 0 && s->srv[i].conn.max_frame < least)
      least = s->srv[i].conn.max_frame;
  return least;
}

void lt__server_mark_dead(lt_sched_t *s, size_t i, const char *why, int final) {
  lt_server_t *v = &s->srv[i];
  if (v->conn.state == LT_CONN_DEAD) return;
  if (!v->gone) snprintf(v->why, sizeof v->why, "%s", why);
  v->gone = 1;
  v->final |= final;
}

void lt__server_misbehaved(lt_sched_t *s, size_t i, const char *why) {
  if (lt__server_gone(s, i)) return;
  /* Dead for the evaluation rather than quarantined: a server that reports what it was not
   * given cannot be trusted with work or values again (quarantine would hand it work after
   * its cool-down, to be held until the deadline once more); the others take its work. */
  char msg[sizeof s->srv[i].why];
  snprintf(msg, sizeof msg, "protocol error: %s", why);
  lt__log(LT_LOG_WARN, "server %s: %s: no more work for it in this evaluation",
          s->srv[i].conn.endpoint, msg);
  s->protocol_errors++;
  lt__server_mark_dead(s, i, msg, 1);
}

int lt__server_gone(const lt_sched_t *s, size_t i) {
  return s->srv[i].gone || s->srv[i].conn.state == LT_CONN_DEAD;
}

void lt__server_limit(lt_sched_t *s, size_t i, size_t policy, uint32_t n) {
  s->srv[i].limit[policy] = n;
}

void lt__server_release(lt_sched_t *s, int i, lt_oid_t id) {
  if (i < 0 || (size_t)i >= s->nsrv || lt__server_gone(s, (size_t)i)) return;
  if (id.client != s->client_id) {
    /* Values of another session are never ours to release: a bug of the caller. */
    lt__log(LT_LOG_ERROR, "bug: release of id %016llx:%llu of another session refused",
            (unsigned long long)id.client, (unsigned long long)id.seq);
    return;
  }
  lt_relq_t *q = &s->srv[i].relq;
  if (LT_VEC_RESERVE(q->ids, q->cap, (size_t)q->n + 1) != LT_OK)
    return; /* the session's end releases it */
  q->ids[q->n++] = id;
}

void lt__servers_flush_releases(lt_sched_t *s) {
  for (size_t i = 0; i < s->nsrv; i++) {
    lt_relq_t *q = &s->srv[i].relq;
    if (q->n == 0) continue;
    if (!lt__server_gone(s, i)) {
      lt_msg_t m = {.type = LT_MSG_RELEASE};
      m.u.release.ids = q->ids;
      m.u.release.nids = q->n;
      int rc = lt__conn_send(&s->srv[i].conn, &m, NULL, lt__clock_ms());
      if (rc != LT_OK) lt__server_mark_dead(s, i, lt_strerror(rc), 0);
    }
    q->n = 0;
  }
}
