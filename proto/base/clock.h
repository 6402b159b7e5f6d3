/* clock.h: the one clock of Lithium-C. Durations and deadlines come from CLOCK_MONOTONIC in
 * ms, us or ns, or from a virtual clock that a simulator installs (lt__clock_virtual); the wall
 * clock is for log stamps and seeds only; the thread CPU clock is for the executor's accounting.
 * Any thread. */
#ifndef LT_CLOCK_H
#define LT_CLOCK_H

#include <stdint.h>
#include <time.h>

/* lt__clock_ms returns the monotonic clock in milliseconds. */
int64_t lt__clock_ms(void);

/* lt__clock_us returns the monotonic clock in microseconds. */
int64_t lt__clock_us(void);

/* lt__clock_ns returns the monotonic clock in nanoseconds. */
int64_t lt__clock_ns(void);

/* lt__clock_virtual makes lt__clock_ms, _us and _ns (and lt__clock_deadline) read `now_us`
 * instead of CLOCK_MONOTONIC, in microseconds; NULL puts the monotonic clock back. The
 * door of STYLE 24 for time: the simulator (tests/sim) runs the dispatcher on its virtual
 * clock. Process-wide: call it before any thread reads the clock, and only in a process
 * that runs nothing real (the simulator). */
void lt__clock_virtual(int64_t (*now_us)(void));

/* lt__clock_virtual_cpu makes lt__clock_thread_cpu_us read `cpu_us` instead of the thread's
 * CPU clock; NULL puts it back. The simulator's, as lt__clock_virtual: a run's CPU time must
 * come from the run (what the dispatcher handled), not from the machine, for a seed to
 * replay exactly. */
void lt__clock_virtual_cpu(int64_t (*cpu_us)(void));

/* lt__clock_thread_cpu_us returns the CPU time of the calling thread in microseconds. */
int64_t lt__clock_thread_cpu_us(void);

/* lt__clock_wall returns the wall clock (CLOCK_REALTIME). */
struct timespec lt__clock_wall(void);

/* lt__clock_deadline returns the monotonic time `ms` from now (now when ms <= 0), for
 * pthread_cond_timedwait on a condition variable set to CLOCK_MONOTONIC. */
struct timespec lt__clock_deadline(int ms);

#endif
