/* scheduler.h: the dispatcher thread of an evaluator. It owns the ZeroMQ context and the
 * server connections, turns submitted tasks into graph instances, dispatches fireable
 * instructions (batched per server), handles completions, heartbeats and server loss, in
 * plain mode (the original Lithium) or with lookahead and lazy binding. Its files:
 * scheduler.c, jobs.c, dispatch.c, placement.c, binding.c, pace.c (sched_internal.h). */
#ifndef LT_SCHEDULER_H
#define LT_SCHEDULER_H

#include <pthread.h>
#include "conn.h"
#include "eval.h"
#include "json.h"

typedef struct lt_sched lt_sched_t;

/* lt__sched_new creates the dispatcher state for `ev`. Evaluator thread. */
int lt__sched_new(lt_sched_t **out, lt_eval_t *ev);

/* lt__sched_main is the dispatcher thread's body (pthread start routine; arg is the
 * lt_sched_t). It runs until ev->stop is set and the dispatcher is woken. */
void *lt__sched_main(void *arg);

/* lt__sched_free frees the state after the thread was joined; accepts NULL. */
void lt__sched_free(lt_sched_t *s);

/* lt__sched_stats_json appends the dispatcher's counters and the per-server array to the
 * open JSON object `j`. Any thread (takes the scheduler's stats lock). */
int lt__sched_stats_json(lt_sched_t *s, lt_json_t *j);

#endif
