/* calibrate.h: lithium-server's speed estimate for `welcome` (DESIGN.md 7): a short fixed
 * CPU workload timed at start-up, scaled by the --slowdown emulation, against a reference
 * time so that a typical core is about 1.0. Any thread; the loop thread calls it once,
 * before READY. */
#ifndef LT_CALIBRATE_H
#define LT_CALIBRATE_H

#include <stdint.h>

/* Iterations of the workload and its time on the reference core (about 3.5 ms). */
#define LT_CALIBRATE_ITERS  800000u
#define LT_CALIBRATE_REF_US 3500.0

/* lt__calibrate_work runs the fixed workload for `iters` iterations and returns a value
 * that depends on every one of them (so that it cannot be optimised away). */
uint64_t lt__calibrate_work(uint64_t iters);

/* lt__calibrate_speed times the workload (best of 3 runs), multiplies the time by
 * `slowdown` (>= 1; as the executor stretches a kernel that took t to slowdown * t) and
 * returns LT_CALIBRATE_REF_US / that time: > 1 is faster than the reference core. The
 * scaled time in microseconds goes into *measured_us when not NULL. */
double lt__calibrate_speed(double slowdown, double *measured_us);

#endif
