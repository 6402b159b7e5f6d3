/* own_cost.c: the dispatcher's CPU per hand-off (own_cost.h), from its thread's CPU clock.
 * Dispatcher thread only. */
#include "own_cost.h"

#include "clock.h"

/* A span gives a sample once it holds this many hand-offs: one alone is mostly the clock's
 * own cost and a loop turn's fixed part. A count, not a time. */
#define SPAN_HANDOFFS 16
#define SMOOTH        0.2 /* weight of a new sample */
#define SIDES         4.0 /* hand-offs per instruction: its send and completion, on both sides */

static int64_t thread_cpu_ns(void) {
  return lt__clock_thread_cpu_us() * 1000; /* the simulator's virtual one in a simulation */
}

void lt__own_cost_look(lt_own_cost_t *c, uint64_t handoffs) {
  int64_t now = thread_cpu_ns();
  if (now < 0) return;
  uint64_t n = handoffs - c->handoffs;
  if (n > 0 && n < SPAN_HANDOFFS && c->cpu_ns > 0) return; /* the span goes on */
  if (n >= SPAN_HANDOFFS && c->cpu_ns > 0 && now > c->cpu_ns) {
    double sample = (double)(now - c->cpu_ns) / 1000.0 / (double)n;
    c->per_us = c->per_us > 0 ? (1 - SMOOTH) * c->per_us + SMOOTH * sample : sample;
  }
  c->cpu_ns = now;
  c->handoffs = handoffs;
}

double lt__own_cost_instr_us(const lt_own_cost_t *c, double prior_us) {
  return c->per_us > 0 ? SIDES * c->per_us : prior_us;
}
