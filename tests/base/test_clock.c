/* tests/base/test_clock.c: the clock (proto/base/clock.h): the monotonic clock in its three
 * units agrees with itself and never goes back, deadlines land where they are asked to, and
 * the wall and thread CPU clocks answer. */
#include <criterion/criterion.h>

#include <time.h>

#include "clock.h"

Test(clock, monotonic_units_agree) {
  int64_t ms = lt__clock_ms();
  int64_t us = lt__clock_us();
  int64_t ns = lt__clock_ns();
  int64_t ms2 = lt__clock_ms();
  cr_assert(us / 1000 >= ms && us / 1000 <= ms2, "us %lld vs ms %lld..%lld", (long long)us,
            (long long)ms, (long long)ms2);
  cr_assert(ns / 1000 >= us);
}

Test(clock, monotonic_never_goes_back) {
  int64_t prev = lt__clock_us();
  for (int i = 0; i < 10000; i++) {
    int64_t now = lt__clock_us();
    cr_assert_geq(now, prev);
    prev = now;
  }
}

Test(clock, sleep_is_seen) {
  int64_t t0 = lt__clock_ms();
  struct timespec pause = {0, 20 * 1000000L};
  nanosleep(&pause, NULL);
  cr_assert_geq(lt__clock_ms() - t0, 20);
}

static int64_t ts_ns(struct timespec ts) {
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

Test(clock, deadline) {
  int64_t before = lt__clock_ns();
  struct timespec d = lt__clock_deadline(1500);
  int64_t after = lt__clock_ns();
  cr_assert(d.tv_nsec >= 0 && d.tv_nsec < 1000000000L);
  cr_assert_geq(ts_ns(d), before + 1500000000LL);
  cr_assert_leq(ts_ns(d), after + 1500000000LL);
  struct timespec z = lt__clock_deadline(0), n = lt__clock_deadline(-5);
  cr_assert_leq(ts_ns(z), lt__clock_ns());
  cr_assert_leq(ts_ns(n), lt__clock_ns());
  cr_assert_geq(ts_ns(n), after);
}

Test(clock, wall_and_cpu) {
  struct timespec w = lt__clock_wall();
  cr_assert_gt(w.tv_sec, 1600000000); /* after September 2020 */
  int64_t c0 = lt__clock_thread_cpu_us();
  volatile uint64_t x = 0;
  for (uint64_t i = 0; i < 20000000; i++)
    x += i;
  cr_assert_gt(x, 0); /* read: clang warns of a volatile only ever written */
  cr_assert_gt(lt__clock_thread_cpu_us(), c0);
}
