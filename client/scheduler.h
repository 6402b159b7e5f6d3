/* scheduler.h: the dispatcher thread of an evaluator. It owns the ZeroMQ context and the
 * server connections, turns submitted tasks into graph instances, dispatches fireable
 * instructions (batched per server), handles completions, heartbeats and server loss, in
 * plain mode (the original Lithium) or with lookahead and lazy binding. Its files:
 * scheduler.c, instr.c, jobs.c, dispatch.c, placement.c, binding.c, pace.c, migrate.c,
 * backup.c, watchdog.c, crash.c, trace.c (sched_internal.h). */
#ifndef LT_SCHEDULER_H
#define LT_SCHEDULER_H

#include "backend.h"

typedef struct lt_sched lt_sched_t;

/* The dispatcher is the backend lt__sched_backend (backend.h): create, run (the thread),
 * stats_json, destroy. */

#endif
