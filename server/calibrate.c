/* calibrate.c: the start-up speed calibration (see calibrate.h): a splitmix64-style integer
 * mixing loop, deterministic and free of memory traffic, timed with CLOCK_MONOTONIC. Any
 * thread; nothing shared. */
#include "calibrate.h"

#include <time.h>
#include "clock.h"

#define RUNS 3

uint64_t lt__calibrate_work(uint64_t iters) {
  uint64_t x = 0x9e3779b97f4a7c15ull, acc = 0;
  for (uint64_t i = 0; i < iters; i++) {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x ^ acc;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    acc += z ^ (z >> 31);
  }
  return acc;
}

double lt__calibrate_speed(double slowdown, double *measured_us) {
  volatile uint64_t sink = 0;
  uint64_t best = UINT64_MAX;
  for (int r = 0; r < RUNS; r++) {
    uint64_t t0 = (uint64_t)lt__clock_ns();
    sink = sink + lt__calibrate_work(LT_CALIBRATE_ITERS);
    uint64_t dt = (uint64_t)lt__clock_ns() - t0;
    if (dt < best) best = dt;
  }
  if (best == 0) best = 1;
  double us = (double)best / 1000.0 * (slowdown > 1.0 ? slowdown : 1.0);
  if (measured_us != NULL) *measured_us = us;
  return LT_CALIBRATE_REF_US / us;
}
