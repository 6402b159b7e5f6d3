/* own_cost.h: the dispatcher's own CPU per hand-off (an instruction sent or a completion
 * taken), measured on its thread as it runs, so that what depends on it (grain=auto's group
 * size, dispatch.c) follows the machine it runs on instead of a figure of another one.
 * Dispatcher thread only. */
#ifndef LT_OWN_COST_H
#define LT_OWN_COST_H

#include <stdint.h>

typedef struct lt_own_cost {
  int64_t cpu_ns;    /* the thread's CPU time at the start of the current span */
  uint64_t handoffs; /* hand-offs counted at its start */
  double per_us;     /* EWMA of the CPU per hand-off; 0 before the first span */
} lt_own_cost_t;

/* lt__own_cost_look is called once a loop turn with the hand-offs made so far: a span with
 * enough of them gives a sample; a turn that made none starts the span again, so that idle
 * turns (polling) are not charged to the work. */
void lt__own_cost_look(lt_own_cost_t *c, uint64_t handoffs);

/* lt__own_cost_instr_us estimates what one instruction costs besides its kernel, client and
 * server together: two hand-offs here (its send and its completion) and as many mirrored on
 * the server (decode, queue, encode). `prior_us` before anything was measured. */
double lt__own_cost_instr_us(const lt_own_cost_t *c, double prior_us);

#endif
