/* eval_state.h: the evaluator's state (struct lt_eval), shared by the four files of the
 * evaluator and by nothing else: eval.c (life cycle, start, stats, the backend's door),
 * eval_intake.c (submission, backpressure, the journal's replays, the backend's intake),
 * eval_results.c (finished tasks to futures, the ordered or unordered stream and the stream's
 * reduce; lt_eval_next) and eval_hosts.c (hosts added, removed, spawned, read from the hosts
 * option, and what they answered at start). A backend reaches this state only through the
 * door (backend.h). Everything under `mu` is guarded by it; the rest says which thread owns it.
 * Any thread, as each call says. */
#ifndef LT_EVAL_STATE_H
#define LT_EVAL_STATE_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#include "backend.h"
#include "eval.h"
#include "lasterr.h"
#include "reorder.h"
#include "replayq.h"
#include "spawn.h"
#include "spin.h"
#include "sreduce.h"
#include "strbuf.h"

typedef enum lt_eval_state { LT_EVAL_NEW = 0, LT_EVAL_STARTED, LT_EVAL_FAILED } lt_eval_state_t;

struct lt_eval {
  lt_skel_t *program;
  lt_template_t *tmpl;
  lt_options_t opts;
  uint64_t client_id;
  uint64_t secret; /* random per evaluation, told only to its servers (hello), never logged:
                      proves a later hello is ours and lets our servers fetch from each other */

  lt_proc_t *procs; /* spawned servers (evaluator thread only) */
  size_t nprocs, capprocs;

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
  lt_reorder_t ordered;  /* finished stream results by stream_seq (ordered=on) */
  lt_task_t *ready_head; /* finished stream results (ordered=off) */
  lt_task_t *ready_tail;
  uint64_t next_task;
  uint64_t next_stream;
  uint64_t next_out;
  uint64_t pending;     /* submitted, not yet computed */
  uint64_t stream_left; /* stream tasks not yet returned by lt_eval_next */
  uint64_t submitted;
  uint64_t completed;
  uint64_t failed;         /* of those, failures */
  int start_waiting;       /* initial hosts that have neither welcomed nor died */
  int start_ready;         /* initial hosts that welcomed */
  int start_auth;          /* initial hosts that refused our authentication (or we theirs) */
  int start_lacking;       /* initial hosts that welcomed without a module of the program */
  lt_strbuf_t start_lacks; /* theirs: "ENDPOINT\tm1,m2\n" a host */

  int wake_fd;             /* eventfd: wakes the dispatcher */
  atomic_int wake_pending; /* a wake was written and not yet consumed */
  int result_waiters;      /* threads in lt_eval_next's wait (under mu) */
  /* door_deliver wakes lt_eval_next's readers after it lets go of mu, not under it: a reader
   * woken under it would run into the held lock and sleep again (under mu). */
  bool delivering;
  bool readers_to_wake;
  bool reader_woken; /* the last door_deliver woke a reader, none left pending (backend thread) */
  atomic_uint puts;  /* results put in the stream so far (stream_put), read without mu */
  /* Spins (spin.h): a reader's wait for a lone task's result (under mu), and the backend's
   * wait, after it woke such a reader, for the reader's next task (backend thread), from
   * when it woke it (lone_at_us, 0: none). Their budgets scale with the wake-up of a
   * sleeping reader as measured (wake_us): from the broadcast (woke_at_us) to its return. */
  lt_spin_t lone;
  lt_spin_t turn;
  int64_t lone_at_us;
  _Atomic(double) wake_us;
  atomic_llong woke_at_us;
  int space_waiters; /* threads in lt_eval_submit's wait (under mu) */
  bool idle_warned;  /* lt_eval_next warned of a wait on an open, idle stream (under mu) */
  pthread_t thread;
  int thread_started;
  lt_journal_t *journal;           /* journal=FILE, opened at the first submit or start */
  lt_replayq_t replays;            /* journaled results in the stream, read when their turn comes */
  uint64_t replayed;               /* results taken from the journal */
  uint64_t arrivals;               /* results that joined the stream (their order when unordered) */
  const lt_backend_ops_t *backend; /* the dispatcher (lt_eval_start) or the sequential
                                      evaluator (lt_eval_run_local); NULL before */
  void *be;                        /* its state */
  struct lt_hosts_watch *hosts_watch; /* hosts=DIR: new announcements join (dispatcher) */
  lt_sreduce_t *sreduce;   /* a program that reduces its stream: its one result's making */
  int sreduce_done;        /* that result went to the stream */
  uint64_t combines;       /* combines of the stream reduce run */
  uint64_t combines_out;   /* combines handed to the backend */
  lt_statsock_t *statsock; /* stats_socket=PATH: served by the dispatcher, closed after it */
};

/* lt__eval_wake wakes the backend; a wake already pending is not repeated. Any thread. */
static inline void lt__eval_wake(lt_eval_t *ev) {
  if (atomic_exchange(&ev->wake_pending, 1)) return;
  uint64_t one = 1;
  ssize_t n = write(ev->wake_fd, &one, sizeof one);
  (void)n; /* an eventfd only fails when its counter would overflow: it is awake then */
}

/* lt__eval_fail makes `rc` the failure of the current call on `ev` (NULL: a call without
 * one): its message, which names the call and the argument, goes to the thread's
 * lt_last_error and to ev's lt_eval_error, so that no older text survives it. Not under
 * ev->mu. Returns rc. */
__attribute__((format(printf, 3, 4))) static inline int lt__eval_fail(lt_eval_t *ev, int rc,
                                                                      const char *fmt, ...) {
  char text[LT_LASTERR_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  lt__fail(rc, "%s", text);
  if (ev != NULL) {
    pthread_mutex_lock(&ev->mu);
    snprintf(ev->opts.error, sizeof ev->opts.error, "%s", text);
    pthread_mutex_unlock(&ev->mu);
  }
  return rc;
}

/* eval_intake.c */
/* lt__eval_open_journal opens the journal (journal=FILE) once; with ev->mu held. */
int lt__eval_open_journal(lt_eval_t *ev);
/* The backend's door, its intake side (backend.h: take, woken, stopping, input_closed). */
lt_task_t *lt__eval_door_take(lt_eval_t *ev, size_t max);
void lt__eval_door_woken(lt_eval_t *ev);
int lt__eval_door_stopping(lt_eval_t *ev);
int lt__eval_door_input_closed(lt_eval_t *ev);

/* eval_results.c */
/* lt__eval_finish delivers the result `b` (taken) of `t` (taken) to its future, the stream or
 * the stream's reduce and wakes readers; under ev->mu. */
void lt__eval_finish(lt_eval_t *ev, lt_task_t *t, lt_buf_t *b);
/* lt__eval_wake_readers wakes the threads in lt_eval_next's wait, noting when (spin.h). */
void lt__eval_wake_readers(lt_eval_t *ev);
/* lt__eval_sreduce_end puts the stream reduce's one result in the stream once it is made (or
 * `fail`, taken, a failure of the reduce itself, at once); under ev->mu. */
void lt__eval_sreduce_end(lt_eval_t *ev, lt_buf_t *fail);
/* The backend's door, its results side (backend.h: deliver, await_wake). */
void lt__eval_door_deliver(lt_eval_t *ev, lt_task_t *done, int sync);
int lt__eval_door_await_wake(lt_eval_t *ev);

/* eval_hosts.c */
/* lt__eval_use_hosts adds the servers of the `hosts` option (a hosts file, or an announce
 * directory the dispatcher then keeps watching); fails lt_eval_start otherwise. */
int lt__eval_use_hosts(lt_eval_t *ev);
/* lt__eval_modules_missing fails lt_eval_start (LT_ENOMODULE) for the initial hosts that
 * welcomed us without a module of the program, naming each. */
int lt__eval_modules_missing(lt_eval_t *ev);
/* The backend's door, its hosts side (backend.h: hosts, hosts_free, poll_hosts,
 * host_answered, host_lacks, host_auth_failed). */
long lt__eval_door_hosts(lt_eval_t *ev, lt_host_t **out);
void lt__eval_door_hosts_free(lt_host_t *hosts, size_t n);
int lt__eval_door_poll_hosts(lt_eval_t *ev, int64_t now_ms);
void lt__eval_door_host_answered(lt_eval_t *ev, int ready);
void lt__eval_door_host_lacks(lt_eval_t *ev, const char *endpoint, const char *modules);
void lt__eval_door_host_auth_failed(lt_eval_t *ev);

#endif
