/* clock.c: the monotonic (or a simulator's virtual), wall and thread CPU clocks (see
 * clock.h). Reads clocks only.
 * Any thread. */
#include "clock.h"

/* The simulator's clock, or NULL: the monotonic one (lt__clock_virtual). */
static int64_t (*virtual_us)(void);

void lt__clock_virtual(int64_t (*now_us)(void)) {
  virtual_us = now_us;
}

/* The simulator's CPU clock, or NULL: the thread's (lt__clock_virtual_cpu). */
static int64_t (*virtual_cpu_us)(void);

void lt__clock_virtual_cpu(int64_t (*cpu_us)(void)) {
  virtual_cpu_us = cpu_us;
}

static struct timespec now(clockid_t id) {
  struct timespec ts;
  if (virtual_us != NULL && id == CLOCK_MONOTONIC) {
    int64_t us = virtual_us();
    ts.tv_sec = (time_t)(us / 1000000);
    ts.tv_nsec = (long)(us % 1000000) * 1000L;
    return ts;
  }
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
  if (virtual_cpu_us != NULL) return virtual_cpu_us();
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
