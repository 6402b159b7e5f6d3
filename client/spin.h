/* spin.h: how long a waiting thread of the evaluator looks for what it waits for, awake and
 * yielding the CPU, before it sleeps: a budget from what the run measured, not a constant
 * of one machine. Spinning saves the waker a wake-up of the sleeper; it pays while the wait
 * is short against that wake-up, and a slower machine, whose waits and wake-ups are both
 * longer, gets the same benefit. The caller serialises the calls on one lt_spin_t. */
#ifndef LT_SPIN_H
#define LT_SPIN_H

#include <stdint.h>

/* A spin pays while the wait it covers is at most this many wake-ups long: the latency it
 * saves (one wake-up) is then at least 1/LT_SPIN_WAKES of the wait. A ratio of two figures
 * measured in the run, so the same on any machine. */
#define LT_SPIN_WAKES 20.0

/* One kind of wait: the smoothed length of those measured so far. */
typedef struct lt_spin {
  double wait_us; /* EWMA of the waits; 0 before the first */
} lt_spin_t;

/* lt__spin_waited records that a wait of this kind lasted `us`. */
void lt__spin_waited(lt_spin_t *sp, double us);

/* lt__spin_budget returns how long, in µs, the next wait of this kind should spin before it
 * sleeps, given the measured wake-up of a sleeping thread `wake_us` (0: not measured): twice
 * the usual wait, while that is short against a wake-up; 0 (sleep at once, and so measure)
 * before either is known or when the waits are long. */
int64_t lt__spin_budget(const lt_spin_t *sp, double wake_us);

/* lt__spin_smooth folds a new sample into an EWMA of such figures (0: none yet). */
double lt__spin_smooth(double ewma, double sample);

#endif
