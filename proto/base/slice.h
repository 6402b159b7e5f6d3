/* slice.h: a short time slice for the threads that move messages (a server's loop, the
 * client's dispatcher, ZeroMQ's I/O threads). Linux's EEVDF scheduler (6.12 and later) lets a
 * thread ask for a shorter slice than the default few milliseconds: on wake-up it then runs
 * before CPU-bound threads that started their slice earlier, instead of waiting for them, at
 * no cost to their share of the CPU. Elsewhere the request is refused or ignored and nothing
 * changes. Any thread. */
#ifndef LT_SLICE_H
#define LT_SLICE_H

#include <sys/types.h>

/* LT_SLICE_US is the slice asked for: the least the kernel takes. */
#define LT_SLICE_US 100

/* lt__slice_wanted tells whether short slices are wanted: yes, unless the environment
 * variable LT_SHORT_SLICE is "off" (to compare runs with and without them). */
int lt__slice_wanted(void);

/* lt__slice_short asks for a short slice for thread `tid` of this process (0: the calling
 * thread). 0 when the kernel took it, else an errno value (ENOSYS, EINVAL on kernels without
 * custom slices: the thread keeps the default). */
int lt__slice_short(pid_t tid);

/* lt__slice_short_named asks for a short slice for every thread of this process whose name
 * starts with `prefix` (e.g. "ZMQbg/IO", the I/O threads ZeroMQ names itself); returns how
 * many took it. */
int lt__slice_short_named(const char *prefix);

/* lt__slice_of returns the slice of thread `tid` (0: the calling thread) in microseconds, or
 * -1 when the kernel does not say. */
long lt__slice_of(pid_t tid);

#endif
