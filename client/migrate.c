/* migrate.c: end-of-stream migration (issue "throttling and heterogeneity"). Once the input
 * is closed and nothing waits for placement, a server with free threads may take work queued
 * but not started on a slower one: the client cancels the newest instructions there, and
 * only an ECANCELED completion — the server's confirmation that the instruction never ran
 * and never will — puts one back for placement. An instruction that had started completes
 * as usual, so nothing runs twice. Only instructions whose inputs the client holds move
 * (a farm's tasks), and one round of cancels is out at a time. Dispatcher thread only. */
#include <stdlib.h>

#include <lithium/error.h>
#include "log.h"
#include "sched_internal.h"

#define MIGRATE_GAIN 1.5 /* move only when the queue to drain is this much longer than a task */

/* idle_threads returns the threads of the window of server i that have no instruction. */
static uint32_t idle_threads(const lt_sched_t *s, size_t i) {
  if (s->srv[i].conn.state != LT_CONN_READY) return 0;
  uint32_t t = (uint32_t)lt__pace_parallel(&s->srv[i].pace);
  return s->srv[i].admitted < t ? t - s->srv[i].admitted : 0;
}

/* movable tells whether r may run elsewhere after a confirmed cancel: every input is held
 * by the client, and nothing was dispatched that names its output on this server. */
static int movable(const lt_instr_rec_t *r) {
  if (r->state != LT_IR_OUT || r->chained || (r->moved && !r->final) || lt__sched_stale(r) ||
      r->twin != NULL)
    return 0;
  for (uint32_t i = 0; i < r->nins; i++)
    if (r->ins[i].value == NULL) return 0;
  return 1;
}

/* slowest returns the server whose queued work (beyond its running window) would take
 * longest to drain, or -1 when none has any. */
static int slowest(const lt_sched_t *s, double *drain_us) {
  int worst = -1;
  for (size_t i = 0; i < s->nsrv; i++) {
    const lt_pace_t *p = &s->srv[i].pace;
    if (s->srv[i].conn.state != LT_CONN_READY || s->srv[i].admitted <= lt__pace_parallel(p))
      continue;
    double d = lt__pace_backlog_us(s, i);
    if (worst < 0 || d > *drain_us) {
      worst = (int)i;
      *drain_us = d;
    }
  }
  return worst;
}

/* newest collects up to `want` movable records of server `from`, newest (largest seq, so
 * furthest back in its queue) first; returns how many. */
static uint32_t newest(lt_sched_t *s, int from, lt_instr_rec_t **out, uint32_t want) {
  uint32_t n = 0;
  lt_instr_rec_t *r, *tmp;
  HASH_ITER(hh, s->inflight, r, tmp) {
    if (r->conn != from || !movable(r)) continue;
    if (n < want) {
      out[n++] = r;
    } else {
      uint32_t min = 0;
      for (uint32_t k = 1; k < n; k++)
        if (out[k]->seq < out[min]->seq) min = k;
      if (r->seq > out[min]->seq) out[min] = r;
    }
  }
  return n;
}

void lt__sched_migrate(lt_sched_t *s) {
  const lt_options_t *o = s->opts;
  if (!o->migrate || !o->lookahead || o->placement != LT_PLACE_EFT || s->cancels_out > 0 ||
      s->fire_head != NULL)
    return;
  uint32_t idle = 0;
  double fast_us = -1; /* the cheapest estimate among the idle servers */
  for (size_t i = 0; i < s->nsrv; i++) {
    uint32_t t = idle_threads(s, i);
    if (t == 0) continue;
    idle += t;
    double c = s->srv[i].pace.svc_us > 0 ? s->srv[i].pace.svc_us : 1;
    if (fast_us < 0 || c < fast_us) fast_us = c;
  }
  double drain_us = 0;
  int from = idle > 0 ? slowest(s, &drain_us) : -1;
  if (from < 0 || drain_us < MIGRATE_GAIN * fast_us || !lt__eval_input_closed(s->ev)) return;
  uint32_t queued = s->srv[from].admitted - (uint32_t)lt__pace_parallel(&s->srv[from].pace);
  uint32_t want = idle < queued ? idle : queued;
  lt_instr_rec_t **pick = calloc(want, sizeof *pick);
  uint64_t *seqs = calloc(want, sizeof *seqs);
  uint32_t n = pick != NULL && seqs != NULL ? newest(s, from, pick, want) : 0;
  for (uint32_t k = 0; k < n; k++) {
    lt__rec_to(pick[k], LT_IR_MIGRATING);
    seqs[k] = pick[k]->seq;
  }
  if (n > 0) {
    int rc = lt__sched_cancel(s, (size_t)from, seqs, n);
    if (rc != LT_OK) {
      lt__sched_conn_dead(s, (size_t)from, lt_strerror(rc));
    } else {
      s->cancels_out += n;
      s->migrations += n;
      lt__log(LT_LOG_DEBUG, "cancelling %u queued instruction%s on %s (from %llu) to move them", n,
              n == 1 ? "" : "s", s->srv[from].conn.endpoint, (unsigned long long)seqs[0]);
    }
  }
  free(pick);
  free(seqs);
}

int lt__sched_cancel_answered(lt_sched_t *s, lt_instr_rec_t *r, int status) {
  if (r->state != LT_IR_MIGRATING) return 0;
  s->cancels_out--;
  lt__log(LT_LOG_DEBUG, "instruction %llu: its migration's cancel settled: %s",
          (unsigned long long)r->seq,
          status == LT_ECANCELED ? "it never ran there" : lt_strerror(status));
  /* It had started: its result stands. Or it got a copy while the cancel was on its way:
   * back out, so that settling the twins (backup.c) leaves the copy alone, as for any of
   * them that never ran. */
  if (status != LT_ECANCELED || r->twin != NULL) {
    lt__rec_to(r, LT_IR_OUT);
    return 0;
  }
  s->migrated++;
  lt__sched_push_fireable(s, r, 1);
  return 1;
}
