/* deadline.h: time limits of lithium-server. A timer on the loop thread (every 100 ms)
 * fails an instruction that has run longer than its session's execute.timeout_ms with
 * LT_ETIMEDOUT (its worker thread stays stuck in the kernel; the late result is dropped),
 * recycles the worker process when such a kernel overran by more than a second (exit status
 * LT_EXIT_RECYCLE: the supervisor restarts it), and bounds a graceful stop: a stop that
 * still waits for kernels after LT_STOP_MAX_MS exits anyway. No kernel runs on the loop thread
 * (executor.h), so nothing but our own code can hold this timer up. Loop thread only. */
#ifndef LT_DEADLINE_H
#define LT_DEADLINE_H

#include "server.h"

#define LT_DEADLINE_TICK_MS    100
#define LT_DEADLINE_RECYCLE_MS 1000
#define LT_STOP_MAX_MS         10000

/* lt__deadline_start starts the timer. */
void lt__deadline_start(lt_server_t *srv);

/* lt__deadline_close closes it (part of closing the server's handles). */
void lt__deadline_close(lt_server_t *srv);

#endif
