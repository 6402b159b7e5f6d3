/* watchdog.c: instructions that a live server holds far beyond what they take. A server
 * that answers heartbeats but never finishes its work (hostile, buggy, or wedged) would
 * hold its instructions, and the client's stream, for ever: an instruction out for more
 * than LT_OVERDUE_FACTOR times what the server's whole backlog should take at the best
 * speed its chain has shown anywhere, and at least LT_OVERDUE_MIN_BEATS heartbeats, is
 * cancelled there and placed again (or its task recomputed when its output was already
 * named to successors on that server), and the server is suspect: it gets one instruction
 * at a time until it finishes one. A late completion of it is then a stray: dropped,
 * its outputs released. Chains that never completed anywhere have no expected time and are
 * left alone. Dispatcher thread only. */
#include <stdio.h>

#include <lithium/error.h>
#include "log.h"
#include "sched_internal.h"

#define LT_OVERDUE_FACTOR    50.0
#define LT_OVERDUE_MIN_BEATS 5

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

/* take_back cancels r on its server and puts it back for placement. */
static void take_back(lt_sched_t *s, lt_instr_rec_t *r, int64_t held_ms) {
  size_t idx = (size_t)r->conn;
  lt_conn_t *c = &s->srv[idx].conn;
  lt__log(LT_LOG_WARN, "server %s held instruction %llu for %lld ms: running it elsewhere",
          c->endpoint, (unsigned long long)r->seq, (long long)held_ms);
  lt__sched_cancel(s, idx, &r->seq, 1);
  lt__sched_take_off(s, r);
  lt__sched_cancel_answered(s, r, LT_ELOST); /* a migration's cancel will not be answered */
  s->srv[idx].slot.suspect = 1;
  s->overdue++;
  char why[96];
  snprintf(why, sizeof why, "held for %lld ms", (long long)held_ms);
  lt__sched_lost(s, r, c->endpoint, why, 1);
}

void lt__sched_overdue(lt_sched_t *s, int64_t now_ms) {
  lt_instr_rec_t *r, *tmp;
  HASH_ITER(hh, s->inflight, r, tmp) {
    if (!lt__sched_alive(s, (size_t)r->conn)) continue;
    int64_t lim = limit_ms(s, r);
    if (lim >= 0 && now_ms - r->sent_ms > lim) take_back(s, r, now_ms - r->sent_ms);
  }
}
