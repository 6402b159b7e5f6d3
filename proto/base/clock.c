/* clock.c: the monotonic, wall and thread CPU clocks (see clock.h). Reads clocks only.
 * Any thread. */
#include "clock.h"

static struct timespec now(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return ts;
}

int64_t lt__clock_ms(void) {
  struct timespec ts = now(CLOCK_MONOTONIC);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t lt__clock_us(void) {
  struct timespec ts = now(CLOCK_MONOTONIC);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t lt__clock_ns(void) {
  struct timespec ts = now(CLOCK_MONOTONIC);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t lt__clock_thread_cpu_us(void) {
  struct timespec ts = now(CLOCK_THREAD_CPUTIME_ID);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

struct timespec lt__clock_wall(void) {
  return now(CLOCK_REALTIME);
}

struct timespec lt__clock_deadline(int ms) {
  struct timespec ts = now(CLOCK_MONOTONIC);
  if (ms <= 0) return ts;
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}
