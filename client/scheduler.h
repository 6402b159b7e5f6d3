/* scheduler.h: the dispatcher thread of an evaluator. It owns the ZeroMQ context and the
 * server connections, turns submitted tasks into graph instances, dispatches fireable
 * instructions (batched per server), handles completions, heartbeats and server loss, in
 * plain mode (the original Lithium) or with lookahead and lazy binding. Its state is
 * sched_state.h; its core's calls are in one header per owner (sched_records.h,
 * sched_jobs.h, sched_servers.h, sched_links.h, sched_loop.h); its policies and placement
 * see it through policy_view.h (docs/architecture.md, "The dispatcher"). */
#ifndef LT_SCHEDULER_H
#define LT_SCHEDULER_H

#include "backend.h"

typedef struct lt_sched lt_sched_t;

/* The dispatcher is the backend lt__sched_backend (backend.h): create, run (the thread),
 * stats_json, destroy. */

#endif
