/* pace.c: the window of one server under lookahead (sched_internal.h, pace_t): max_threads
 * instructions running plus enough queued at the server to cover the round trip, by
 * Little's law about max_threads x RTT / service time more (DESIGN.md 7). Tiny tasks get a
 * deep queue, so throughput is not capped at max_threads / RTT; long tasks get about one
 * spare, so work is not hoarded by one server. Pure arithmetic; dispatcher thread. */
#include "sched_internal.h"

#define SMOOTH 0.2 /* weight of a new sample */

static void recompute(pace_t *p, const lt_options_t *o) {
  if (p->rtt_us <= 0 || p->svc_us <= 0) return;
  double want = (double)o->max_threads * p->rtt_us / p->svc_us;
  uint32_t depth = want >= LT_MAX_DEPTH ? LT_MAX_DEPTH : (uint32_t)want + 1; /* rounded up */
  p->cap = o->max_threads + depth;
}

void lt__pace_init(pace_t *p, uint32_t window) {
  p->rtt_us = p->svc_us = 0;
  p->last_ping_ms = 0;
  p->cap = window;
}

void lt__pace_rtt(pace_t *p, double rtt_us, const lt_options_t *o) {
  p->rtt_us = p->rtt_us > 0 ? (1 - SMOOTH) * p->rtt_us + SMOOTH * rtt_us : rtt_us;
  recompute(p, o);
}

void lt__pace_service(pace_t *p, double svc_us, const lt_options_t *o) {
  if (svc_us < 1) svc_us = 1; /* a clock tick: empty kernels still cost a dispatch */
  p->svc_us = p->svc_us > 0 ? (1 - SMOOTH) * p->svc_us + SMOOTH * svc_us : svc_us;
  recompute(p, o);
}
