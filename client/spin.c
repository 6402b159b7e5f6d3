/* spin.c: spin budgets from measured waits and wake-ups (spin.h). Pure arithmetic: it reads
 * no clock and touches nothing shared. Any thread, one caller per lt_spin_t at a time. */
#include "spin.h"

/* Weight of a new sample: a few waits make the figure, one odd one does not. */
#define SMOOTH 0.25

double lt__spin_smooth(double ewma, double sample) {
  if (sample < 0) sample = 0;
  return ewma > 0 ? (1 - SMOOTH) * ewma + SMOOTH * sample : sample;
}

void lt__spin_waited(lt_spin_t *sp, double us) {
  sp->wait_us = lt__spin_smooth(sp->wait_us, us);
}

int64_t lt__spin_budget(const lt_spin_t *sp, double wake_us) {
  if (wake_us <= 0 || sp->wait_us <= 0) return 0;
  double most = LT_SPIN_WAKES * wake_us;
  if (sp->wait_us > most) return 0;
  double want = 2 * sp->wait_us;
  return (int64_t)(want < most ? want : most) + 1;
}
