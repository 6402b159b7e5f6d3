/* eval.h: the evaluator behind lithium.h: options, hosts, spawned servers, and the
 * user-facing side of the task stream (intake queue, finished results, backpressure), all
 * under one mutex shared by user threads and the dispatcher thread (scheduler.c).
 *
 * Lock order of the client, outermost first; a thread holding one may take only those
 * below it:
 *   1. lt_sched_t.stats_mu   the dispatcher holds it for a turn (scheduler.c);
 *                            lt_eval_stats_json takes it after dropping ev->mu
 *   2. lt_eval_t.mu          user threads, the dispatcher (open_new_hosts, intake,
 *                            delivery), the sequential evaluator's thread (local.c)
 *   3. lt_future_t.mu        lt__future_resolve, called under ev->mu (lt__eval_finish)
 *   4. lt_future_any_t.mu    a thread in lt_future_wait_any, woken under a future's mu
 * No lock is held across a blocking call to the network: sends are ZMQ_DONTWAIT. */
#ifndef LT_EVAL_H
#define LT_EVAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <uthash.h>
#include <lithium.h>

#include "journal.h"
#include "options.h"
#include "spawn.h"
#include "template.h"
#include "value.h"

typedef struct lt_task {
  uint64_t seq;        /* submission index (lt_buf_task), also the graph instance's name */
  uint64_t stream_seq; /* position in the result stream (tasks without future) */
  lt_value_t *input;
  lt_future_t *future; /* NULL: the result goes to the stream */
  lt_buf_t *result;
  lt_digest_t digest;   /* of the input, when there is a journal */
  int replayed;         /* its result came from the journal: not written to it again */
  struct lt_task *next; /* intake queue or unordered ready list */
  UT_hash_handle hh;    /* ordered results, keyed by stream_seq */
} lt_task_t;

typedef enum lt_eval_state { LT_EVAL_NEW = 0, LT_EVAL_STARTED, LT_EVAL_FAILED } lt_eval_state_t;

struct lt_eval {
  lt_skel_t *program;
  lt_template_t *tmpl;
  lt_options_t opts;
  uint64_t client_id;
  uint64_t secret; /* random per evaluation, told only to its servers (hello), never logged:
                      proves a later hello is ours and lets our servers fetch from each other */

  lt_proc_t *procs; /* spawned servers (evaluator thread only) */
  size_t nprocs;

  pthread_mutex_t mu; /* guards everything below */
  pthread_cond_t cv_result;
  pthread_cond_t cv_space;
  pthread_cond_t cv_start;
  lt_eval_state_t state;
  char **hosts;          /* every endpoint added, once each; the dispatcher opens the new ones */
  char (*host_keys)[41]; /* per host: the server public key its host string carried, or "" */
  int *host_fds; /* per host: stdout of its spawned server process (EOF: it exited), or -1 */
  unsigned char *host_gone; /* per host: lt_eval_remove_host was called for it */
  size_t nhosts;
  size_t caphosts;
  int closed;
  int stop;
  lt_task_t *intake_head; /* submitted, not yet taken by the dispatcher */
  lt_task_t *intake_tail;
  lt_task_t *ordered;    /* finished stream results by stream_seq (ordered=on) */
  lt_task_t *ready_head; /* finished stream results (ordered=off) */
  lt_task_t *ready_tail;
  uint64_t next_task;
  uint64_t next_stream;
  uint64_t next_out;
  uint64_t pending;     /* submitted, not yet computed */
  uint64_t stream_left; /* stream tasks not yet returned by lt_eval_next */
  uint64_t submitted;
  uint64_t completed;
  int start_waiting; /* initial hosts that have neither welcomed nor died */
  int start_ready;   /* initial hosts that welcomed */
  int start_auth;    /* initial hosts that refused our authentication (or we theirs) */

  int wake_fd;             /* eventfd: wakes the dispatcher */
  atomic_int wake_pending; /* a wake was written and not yet consumed */
  int result_waiters;      /* threads in lt_eval_next's wait (under mu) */
  int space_waiters;       /* threads in lt_eval_submit's wait (under mu) */
  pthread_t thread;
  int thread_started;
  lt_journal_t *journal;              /* journal=FILE, opened at the first submit or start */
  struct lt_sched *sched;             /* servers (lt_eval_start) */
  struct lt_local *local;             /* or the sequential evaluator (lt_eval_run_local) */
  struct lt_hosts_watch *hosts_watch; /* hosts=DIR: new announcements join (dispatcher) */
};

/* lt__eval_wake wakes the dispatcher; a wake already pending is not repeated. Any thread. */
void lt__eval_wake(lt_eval_t *ev);

/* lt__eval_woken consumes the pending wake; the dispatcher calls it before it looks at the
 * intake, so that anything submitted after that look wakes it again. */
void lt__eval_woken(lt_eval_t *ev);

/* lt__eval_finish delivers the result `b` (taken) of `task` (taken) to its future or the
 * stream and wakes readers. Dispatcher thread, with ev->mu held. */
void lt__eval_finish(lt_eval_t *ev, lt_task_t *task, lt_buf_t *b);

/* lt__eval_add_host adds `endpoint` (once: an endpoint already there is not added again)
 * with the stdout `fd` of its spawned process, or -1. Any thread. */
int lt__eval_add_host(lt_eval_t *ev, const char *endpoint, int fd);

/* lt__eval_sync makes the results journaled so far durable, once per batch of results.
 * With ev->mu held. */
void lt__eval_sync(lt_eval_t *ev);

/* lt__task_free frees a task record; accepts NULL. */
void lt__task_free(lt_task_t *t);

#endif
