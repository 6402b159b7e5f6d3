/* pace.c: how much work one server gets (sched_internal.h, pace_t), from what it reports.
 *  - The thread window (throttle, DESIGN.md 7 and seed 003 5.3): how many instructions run at
 *    once on the server, kept between min_threads and max_threads. Every LT_CONTROL_MS it
 *    compares the completions per active thread of the last period with the best seen: when
 *    they fall (the server is saturated, or something else takes its CPU) the window
 *    shrinks; while the server fills its window and keeps up, it grows. Every change is
 *    recorded. Servers enforce the window (execute.max_active).
 *  - The lookahead depth on top: enough queued at the server to cover the round trip, about
 *    window x RTT / service time (Little's law), so a server never idles waiting for the
 *    client and tiny tasks are not held to window / RTT.
 * Pure arithmetic over the reports; dispatcher thread. */
#include "sched_internal.h"

#define SMOOTH 0.2  /* weight of a new RTT or service-time sample */
#define FORGET 0.97 /* the best rate per thread fades by this each period */
#define FALL   0.8  /* a rate per thread below FALL x best shrinks the window */

static void recompute(pace_t *p) {
  if (p->rtt_us <= 0 || p->svc_us <= 0) return;
  double want = (double)p->threads * p->rtt_us / p->svc_us;
  uint32_t depth = want >= LT_MAX_DEPTH ? LT_MAX_DEPTH : (uint32_t)want + 1; /* rounded up */
  p->cap = p->threads + depth;
}

static void record(pace_t *p, int64_t t_ms) {
  uint32_t i = p->changes % LT_HISTORY;
  p->hist_ms[i] = t_ms;
  p->hist_w[i] = p->threads;
  p->changes++;
}

void lt__pace_init(pace_t *p, uint32_t window, const lt_options_t *o, int64_t now_ms) {
  *p = (pace_t){0};
  p->threads = o->max_threads;
  p->cap = window;
  p->period_ms = now_ms;
}

void lt__pace_rtt(pace_t *p, double rtt_us) {
  p->rtt_us = p->rtt_us > 0 ? (1 - SMOOTH) * p->rtt_us + SMOOTH * rtt_us : rtt_us;
  recompute(p);
}

void lt__pace_service(pace_t *p, double svc_us) {
  if (svc_us < 1) svc_us = 1; /* a clock tick: empty kernels still cost a dispatch */
  p->svc_us = p->svc_us > 0 ? (1 - SMOOTH) * p->svc_us + SMOOTH * svc_us : svc_us;
  p->done++;
  recompute(p);
}

void lt__pace_load(pace_t *p, const lt_load_t *load) {
  p->active_sum += load->active;
  p->active_n++;
}

/* lt__pace_control ends a control period when one is due and moves the window by one
 * thread at most; returns 1 when the window changed. */
int lt__pace_control(pace_t *p, const lt_options_t *o, int64_t now_ms, int64_t t0_ms) {
  int64_t dt = now_ms - p->period_ms;
  if (dt < LT_CONTROL_MS) return 0;
  double active = p->active_n > 0 ? p->active_sum / p->active_n : 0;
  uint32_t done = p->done;
  p->period_ms = now_ms;
  p->done = 0;
  p->active_sum = 0;
  p->active_n = 0;
  if (!o->throttle || done < 4 || active < 0.5) return 0; /* too little to judge */
  double per_thread = (double)done * 1000.0 / (double)dt / active;
  p->best_per_thread *= FORGET;
  uint32_t w = p->threads;
  if (per_thread > p->best_per_thread) {
    p->best_per_thread = per_thread;
    if (active >= w - 0.5 && w < o->max_threads) w++; /* it keeps up with a full window */
  } else if (per_thread < FALL * p->best_per_thread) {
    if (w > o->min_threads) w--; /* each thread does less: saturated, or CPU taken */
  } else if (active >= w - 0.5 && w < o->max_threads) {
    w++;
  }
  if (w == p->threads) return 0;
  p->threads = w;
  recompute(p);
  record(p, now_ms - t0_ms);
  return 1;
}

/* lt__pace_finish_us estimates when a new instruction would finish on this server with
 * `admitted` already there: they drain `threads` at a time at the measured service time.
 * Servers without a sample yet look fast, so they get work and a sample. */
double lt__pace_finish_us(const pace_t *p, uint32_t admitted) {
  double svc = p->svc_us > 0 ? p->svc_us : 1;
  return ((double)admitted + 1) * svc / (double)(p->threads ? p->threads : 1);
}
