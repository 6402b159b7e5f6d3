/* busy.h: the busy kernel of the METG benchmark, shared by the `bench` module's bench:busy
 * (benchk.c) and bench_metg's pool of plain threads (metg.c), so that both sides spin the
 * same code. It holds no state; any thread may call it. */
#ifndef LT_BENCH_BUSY_H
#define LT_BENCH_BUSY_H

#include <stdint.h>
#include <time.h>

/* Steps of the generator between two looks at the clock: about 30 ns, against about 0.3 µs
 * for the look itself, so that a 3 µs spin ends within a step of its length. */
#define BENCH_BUSY_STEPS 32

/* bench_busy_cpu_us returns this thread's CPU time in microseconds, or -1 when it cannot be
 * read. */
static inline double bench_busy_cpu_us(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return -1;
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* bench_busy_spin runs a xorshift generator seeded by `seed` until the calling thread has
 * used `us` microseconds of CPU time (CLOCK_THREAD_CPUTIME_ID: time the thread is preempted
 * does not count, so a spin is the same work however busy the machine is) and returns the
 * sum of the numbers, which depends on every step so that the loop stays. Returns 0 without
 * spinning when the clock cannot be read. */
static inline uint64_t bench_busy_spin(double us, uint64_t seed) {
  uint64_t x = seed ^ 0x9e3779b97f4a7c15u, sum = 0; /* xorshift must not start at 0 */
  if (x == 0) x = 1;
  double start = bench_busy_cpu_us(), now = start;
  if (start < 0) return 0;
  while (now - start < us) {
    for (int i = 0; i < BENCH_BUSY_STEPS; i++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      sum += x;
    }
    now = bench_busy_cpu_us();
    if (now < 0) break;
  }
  return sum;
}

#endif
