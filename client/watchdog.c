/* watchdog.c: the watchdog policy: instructions that a live server holds far beyond what
 * they take. A server that answers heartbeats but never finishes its work (hostile, buggy,
 * or wedged) would hold its instructions, and the client's stream, for ever: an instruction
 * out for more than LT_OVERDUE_FACTOR times what the server's whole backlog should take at
 * the best speed its chain has shown anywhere, and at least LT_OVERDUE_MIN_BEATS heartbeats,
 * is taken back (cancelled there and placed again, or its task recomputed when its output
 * was already named to successors on that server), and the server is suspect: it is
 * limited to one instruction at a time until it finishes one. A late completion of it is
 * then a stray: dropped, its outputs released. Chains that never completed anywhere have no
 * expected time and are left alone, and so is everything on a server whose latest load
 * report shows it computing (at least LT_WORKING_CPU cores: ten times what an idle or wedged
 * server spends on its heartbeats, a tenth of what a spinning kernel got with four times as
 * many busy threads as cores): a wedged or hostile server burns no CPU for us, while one that
 * inputs of very different sizes keep busy does (a kernel that spins for ever is for
 * task_timeout, the deadline policy). State: whether each server is suspect, and the
 * instructions it took back (stat `overdue`, with the deadline policy's). Dispatcher thread
 * only. */
#include <stdio.h>

#include "policy_view.h"

#define LT_OVERDUE_FACTOR    50.0
#define LT_OVERDUE_MIN_BEATS 5
#define LT_WORKING_CPU       0.01 /* cores: a server using this much is computing */

typedef struct watch_srv {
  int suspect;
} watch_srv_t;

typedef struct watch_state {
  uint64_t overdue; /* instructions taken back */
} watch_state_t;

/* limit_ms returns how long r may stay out on its server before it is overdue, or -1 when
 * nothing is known to judge by. */
static int64_t limit_ms(const lt_sched_t *s, const lt_instr_rec_t *r) {
  double known = lt__pace_known_us(s, r->stages);
  if (known <= 0) return -1;
  size_t i = (size_t)r->conn;
  double parallel = lt__pace_parallel(&s->srv[i].pace);
  if (parallel < 1) parallel = 1;
  double drain_us = known * (1.0 + (double)s->srv[i].conn.inflight / parallel);
  int64_t ms = (int64_t)(LT_OVERDUE_FACTOR * drain_us / 1000.0);
  int64_t floor_ms = (int64_t)LT_OVERDUE_MIN_BEATS * s->opts->heartbeat_ms;
  return ms > floor_ms ? ms : floor_ms;
}

static void suspect(lt_policy_t *p, size_t idx, int on) {
  watch_srv_t *w = lt__policy_server(p, idx);
  if (w->suspect == on) return;
  w->suspect = on;
  lt__policy_ask(p, &(lt_req_t){.kind = LT_REQ_LIMIT, .server = idx, .n = on ? 1 : LT_NO_LIMIT});
}

static void on_tick(lt_policy_t *p, int64_t now_ms) {
  const lt_sched_t *s = p->s;
  lt_instr_rec_t *r, *tmp;
  HASH_ITER(hh, s->inflight, r, tmp) {
    if (r->state == LT_IR_DROPPED || !lt__server_alive(s, (size_t)r->conn)) continue;
    if (s->srv[r->conn].pace.load_cpu >= LT_WORKING_CPU) continue;
    int64_t lim = limit_ms(s, r);
    if (lim < 0 || now_ms - r->sent_ms <= lim) continue;
    lt_req_t q = {.kind = LT_REQ_TAKE_BACK, .seq = r->seq};
    snprintf(q.msg, sizeof q.msg, "held instruction %llu for %lld ms", (unsigned long long)r->seq,
             (long long)(now_ms - r->sent_ms));
    lt__policy_ask(p, &q);
    suspect(p, (size_t)r->conn, 1);
  }
}

/* A completion from a suspect server lifts its limit. */
static void on_end(lt_policy_t *p, const lt_instr_rec_t *r, size_t idx, lt_end_t why,
                   const lt_completion_t *cp) {
  (void)r;
  (void)why;
  if (cp != NULL) suspect(p, idx, 0);
}

static void on_server_ready(lt_policy_t *p, size_t idx, const lt_msg_t *welcome) {
  (void)welcome;
  ((watch_srv_t *)lt__policy_server(p, idx))->suspect = 0;
}

/* An instruction taken back. */
static void on_applied(lt_policy_t *p, const lt_req_t *q) {
  if (q->kind == LT_REQ_TAKE_BACK) ((watch_state_t *)p->state)->overdue++;
}

static size_t stats(const lt_policy_t *p, size_t idx, lt_stat_t *out) {
  if (idx != SIZE_MAX) return 0;
  out[0] = (lt_stat_t){"overdue", 0, ((const watch_state_t *)p->state)->overdue};
  return 1;
}

const lt_policy_ops_t lt__policy_watchdog = {
    .name = "watchdog",
    .state_size = sizeof(watch_state_t),
    .server_size = sizeof(watch_srv_t),
    .on_server_ready = on_server_ready,
    .on_end = on_end,
    .on_tick = on_tick,
    .on_applied = on_applied,
    .stats = stats,
};
