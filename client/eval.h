/* eval.h: the evaluator behind lithium.h (eval.c and its parts): options, hosts, spawned servers,
 * and the user-facing side of the task stream (intake queue, finished results, backpressure), all
 * under one mutex (lt_eval_t.mu) shared by user threads and the backend's thread. Its state is
 * private to the evaluator's files (eval_state.h); backends reach it through backend.h, the hosts
 * option's reader (hosts.c) through the callback eval_hosts.c gives it. This header holds what they
 * share: the task record.
 *
 * Lock order of the client, outermost first; a thread holding one may take only those
 * below it:
 *   1. lt_eval_t.mu          user threads, and the backend's thread inside the calls of
 *                            backend.h (the evaluator takes it; a backend never holds it)
 *   2. lt_future_t.mu        lt__future_resolve, called under ev->mu (lt__eval_finish)
 *   3. lt_future_any_t.mu    a thread in lt_future_wait_any, woken under a future's mu
 * and, apart, a leaf: the dispatcher's stats snapshot lock (lt_stats_snap_t.mu, sched_stats.c),
 * held only to copy the snapshot in (dispatcher) or format it out (lt_eval_stats_json,
 * after dropping ev->mu), never with another lock.
 * No lock is held across a blocking call to the network: sends are ZMQ_DONTWAIT. */
#ifndef LT_EVAL_H
#define LT_EVAL_H

#include <stdint.h>
#include <lithium.h>

#include "journal.h"
#include "value.h"

/* A submitted task. A backend reads seq and input, sets result and links finished tasks by
 * `next` (backend.h); the rest is the evaluator's. */
typedef struct lt_task {
  uint64_t seq;        /* submission index (lt_buf_task), also the graph instance's name */
  uint64_t stream_seq; /* position in the result stream (tasks without future) */
  lt_value_t *input;
  lt_value_t *input2;  /* a combine of a stream reduce (sreduce.h): its right input, `input`
                          its left; NULL for a task of the program */
  int combine;         /* a combine of a stream reduce, not a task of the user's */
  uint64_t seg;        /* a combine: the segment its result stands for */
  lt_future_t *future; /* NULL: the result goes to the stream */
  lt_buf_t *result;
  lt_digest_t digest;   /* of the input, when there is a journal */
  int replayed;         /* its result came from the journal: not written to it again */
  uint64_t arrival;     /* when it joined the result stream (unordered order) */
  struct lt_task *next; /* intake queue or unordered ready list */
} lt_task_t;

/* lt__eval_add_host adds `endpoint` (once: an endpoint already there is not added again)
 * with the stdout `fd` of its spawned process, or -1. Any thread. */
int lt__eval_add_host(lt_eval_t *ev, const char *endpoint, int fd);

/* lt__eval_client_id returns the id that names this evaluation's objects. Any thread. */
uint64_t lt__eval_client_id(const lt_eval_t *ev);

/* lt__task_free frees a task record; accepts NULL. */
void lt__task_free(lt_task_t *t);

#endif
