/* backend.h: the door between the evaluator (eval.c and its parts, eval_state.h) and the backend
 * that runs its tasks: the distributed dispatcher (scheduler.c and its files) or the sequential
 * evaluator (local.c). The evaluator owns the task stream (intake, results, backpressure, journal),
 * the hosts and the options; a backend runs on a thread of its own, takes tasks, hands
 * finished ones back and reports how the servers answered. It sees the evaluator only as
 * the opaque handle in its lt_backend_env_t and through the calls below; no file but
 * the evaluator's (eval.c, eval_intake.c, eval_results.c, eval_hosts.c) reaches into struct
 * lt_eval.
 *
 *   eval.c -> backend: create, run (the thread body), stats_json, destroy (lt_backend_ops_t)
 *   backend -> eval.c: take tasks, deliver results, wait for or consume a wake, whether to
 *                      stop, whether the input is over, the hosts, host answers, through
 *                      the table of calls the environment carries (lt_eval_door_t) */
#ifndef LT_BACKEND_H
#define LT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "eval.h"
#include "json.h"
#include "options.h"
#include "stats_socket.h"
#include "template.h"

typedef struct lt_eval_door lt_eval_door_t;

/* What a backend is given at creation; everything is borrowed and outlives the backend. */
typedef struct lt_backend_env {
  lt_eval_t *ev;              /* the evaluator, for the door's calls only */
  const lt_eval_door_t *door; /* the evaluator's calls (below) */
  const lt_options_t *opts;   /* fixed from start on */
  const lt_template_t *tmpl;  /* the compiled program */
  uint64_t client_id;         /* names the objects of this evaluation */
  uint64_t secret;            /* told only to our servers (hello) */
  int wake_fd;                /* readable when the evaluator woke the backend */
  size_t initial_hosts;       /* hosts known at start: each answers lt_eval_start once */
  const lt_net_t *net;        /* the dispatcher's transport (conn.h); NULL: ZeroMQ */
  lt_statsock_t *statsock;    /* stats_socket: served by the dispatcher's loop, or NULL */
} lt_backend_env_t;

/* The operations a backend implements. */
typedef struct lt_backend_ops {
  /* create makes the backend's state in *out. Evaluator thread. */
  int (*create)(void **out, const lt_backend_env_t *env);
  /* run is the backend thread's body (a pthread start routine, arg: the state); it returns
   * once the door's `stopping` says so. */
  void *(*run)(void *self);
  /* stats_json appends the backend's counters to the open JSON object. Any thread. */
  void (*stats_json)(void *self, lt_json_t *j);
  /* destroy frees the state after the thread was joined; accepts NULL. */
  void (*destroy)(void *self);
} lt_backend_ops_t;

extern const lt_backend_ops_t lt__sched_backend; /* scheduler.c */
extern const lt_backend_ops_t lt__local_backend; /* local.c */

/* ---- what eval.c offers a backend (lt_eval_door_t); backend thread unless said ---------- */

enum { LT_EVAL_SYNC_NOW, LT_EVAL_SYNC_IDLE };

/* One host of the evaluation, as `hosts` copies it. */
typedef struct lt_host {
  char *endpoint;
  char key[41]; /* the server public key its host string carried, or "" */
  int fd;       /* stdout of its spawned server process (EOF: it exited), or -1 */
  int gone;     /* lt_eval_remove_host was called for it */
} lt_host_t;

/* The door: the evaluator's calls a backend may make, each given the opaque `ev` of its
 * environment. A table rather than functions, so that the backends do not depend on eval.c
 * (no circle: eval.c -> backend ops, backend -> this table). */
struct lt_eval_door {
  /* take takes up to `max` submitted tasks, oldest first, as a list linked by `next`, or
   * NULL when none waits. The caller owns them until it delivers them. */
  lt_task_t *(*take)(lt_eval_t *ev, size_t max);
  /* deliver hands back finished tasks (a list linked by `next`, each with its `result` set;
   * all taken) to their futures or the stream, under one lock, after dropping the inputs
   * they still hold (outside the lock). The journal is made durable after them when `sync`
   * is LT_EVAL_SYNC_NOW, or, with LT_EVAL_SYNC_IDLE, only when no submitted task is waiting
   * (a batch is over). */
  void (*deliver)(lt_eval_t *ev, lt_task_t *done, int sync);
  /* woken consumes the pending wake; a backend calls it before it looks at the intake, so
   * that anything submitted after that look wakes it again. */
  void (*woken)(lt_eval_t *ev);
  /* await_wake, when the last `deliver` woke a reader blocked for a result and left no
   * task pending (the reader may well submit the next one at once), waits for a wake,
   * yielding the CPU between looks, for as long as such a reader usually takes to submit
   * again while that is short against a thread's wake-up (both measured, spin.h), and tells
   * whether one came; else it returns 0 at once. A backend about to sleep calls it first, to
   * spare the submitter's wake-up of a sleeping backend. */
  int (*await_wake)(lt_eval_t *ev);
  /* stopping tells whether lt_eval_free asked the backend to end. */
  int (*stopping)(lt_eval_t *ev);
  /* input_closed tells whether no task can arrive any more: closed, intake empty. */
  int (*input_closed)(lt_eval_t *ev);
  /* hosts copies every host added so far, once each, in the order added, into *out (the
   * caller frees it with hosts_free) and returns how many; LT_ENOMEM. */
  long (*hosts)(lt_eval_t *ev, lt_host_t **out);
  void (*hosts_free)(lt_host_t *hosts, size_t n);
  /* poll_hosts adds the servers that announced in the `hosts` directory since the last look
   * (at most every LT_HOSTS_WATCH_MS); 1 when it read any. Not under ev's lock. */
  int (*poll_hosts)(lt_eval_t *ev, int64_t now_ms);
  /* host_answered counts an initial host out of lt_eval_start's wait: `ready` when it
   * welcomed us. host_auth_failed notes, first, that it failed authentication, so that a
   * start with no server left says LT_EAUTH. */
  void (*host_answered)(lt_eval_t *ev, int ready);
  /* host_lacks tells, before its host_answered, that an initial host welcomed us without
   * a copy of the program's `modules` (comma-separated) that it will not be sent either:
   * it gets no work, and lt_eval_start fails naming them when no server has them all. */
  void (*host_lacks)(lt_eval_t *ev, const char *endpoint, const char *modules);
  void (*host_auth_failed)(lt_eval_t *ev);
};

#endif
