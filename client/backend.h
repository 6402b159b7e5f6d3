/* backend.h: the door between the evaluator (eval.c) and the backend that runs its tasks:
 * the distributed dispatcher (scheduler.c and its files) or the sequential evaluator
 * (local.c). The evaluator owns the task stream (intake, results, backpressure, journal),
 * the hosts and the options; a backend runs on a thread of its own, takes tasks, hands
 * finished ones back and reports how the servers answered. It sees the evaluator only as
 * the opaque handle in its lt_backend_env_t and through the calls below; no file but
 * eval.c reaches into struct lt_eval.
 *
 *   eval.c -> backend: create, run (the thread body), stats_json, destroy (lt_backend_ops_t)
 *   backend -> eval.c: take tasks, deliver results, wait for or consume a wake, whether to
 *                      stop, whether the input is over, the hosts, host answers */
#ifndef LT_BACKEND_H
#define LT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "eval.h"
#include "json.h"
#include "options.h"
#include "template.h"

/* What a backend is given at creation; everything is borrowed and outlives the backend. */
typedef struct lt_backend_env {
  lt_eval_t *ev;             /* the evaluator, for the calls below only */
  const lt_options_t *opts;  /* fixed from start on */
  const lt_template_t *tmpl; /* the compiled program */
  uint64_t client_id;        /* names the objects of this evaluation */
  uint64_t secret;           /* told only to our servers (hello) */
  int wake_fd;               /* readable when the evaluator woke the backend */
  size_t initial_hosts;      /* hosts known at start: each answers lt_eval_start once */
} lt_backend_env_t;

/* The operations a backend implements. */
typedef struct lt_backend_ops {
  /* create makes the backend's state in *out. Evaluator thread. */
  int (*create)(void **out, const lt_backend_env_t *env);
  /* run is the backend thread's body (a pthread start routine, arg: the state); it returns
   * once lt__eval_stopping says so. */
  void *(*run)(void *self);
  /* stats_json appends the backend's counters to the open JSON object. Any thread. */
  void (*stats_json)(void *self, lt_json_t *j);
  /* destroy frees the state after the thread was joined; accepts NULL. */
  void (*destroy)(void *self);
} lt_backend_ops_t;

extern const lt_backend_ops_t lt__sched_backend; /* scheduler.c */
extern const lt_backend_ops_t lt__local_backend; /* local.c */

/* ---- what eval.c offers a backend; backend thread unless said ---------------------------- */

/* lt__eval_take takes up to `max` submitted tasks, oldest first, as a list linked by
 * `next`, or NULL when none waits. The caller owns them until it delivers them. */
lt_task_t *lt__eval_take(lt_eval_t *ev, size_t max);

/* lt__eval_deliver hands back finished tasks (a list linked by `next`, each with its
 * `result` set; all taken) to their futures or the stream, under one lock, after dropping
 * the inputs they still hold (outside the lock). The journal is
 * made durable after them when `sync` is LT_EVAL_SYNC_NOW, or, with LT_EVAL_SYNC_IDLE,
 * only when no submitted task is waiting (a batch is over). */
enum { LT_EVAL_SYNC_NOW, LT_EVAL_SYNC_IDLE };
void lt__eval_deliver(lt_eval_t *ev, lt_task_t *done, int sync);

/* lt__eval_woken consumes the pending wake; a backend calls it before it looks at the
 * intake, so that anything submitted after that look wakes it again. */
void lt__eval_woken(lt_eval_t *ev);

/* lt__eval_stopping tells whether lt_eval_free asked the backend to end. */
int lt__eval_stopping(lt_eval_t *ev);

/* lt__eval_input_closed tells whether no task can arrive any more: closed, intake empty. */
int lt__eval_input_closed(lt_eval_t *ev);

/* One host of the evaluation, as lt__eval_hosts copies it. */
typedef struct lt_host {
  char *endpoint;
  char key[41]; /* the server public key its host string carried, or "" */
  int fd;       /* stdout of its spawned server process (EOF: it exited), or -1 */
  int gone;     /* lt_eval_remove_host was called for it */
} lt_host_t;

/* lt__eval_hosts copies every host added so far, once each, in the order added, into
 * *out (the caller frees it with lt__eval_hosts_free) and returns how many; LT_ENOMEM. */
long lt__eval_hosts(lt_eval_t *ev, lt_host_t **out);
void lt__eval_hosts_free(lt_host_t *hosts, size_t n);

/* lt__eval_poll_hosts adds the servers that announced in the `hosts` directory since the
 * last look (at most every LT_HOSTS_WATCH_MS); 1 when it read any. Not under ev's lock. */
int lt__eval_poll_hosts(lt_eval_t *ev, int64_t now_ms);

/* lt__eval_host_answered counts an initial host out of lt_eval_start's wait: `ready` when
 * it welcomed us. lt__eval_host_auth_failed notes, first, that it failed authentication,
 * so that a start with no server left says LT_EAUTH. */
void lt__eval_host_answered(lt_eval_t *ev, int ready);
void lt__eval_host_auth_failed(lt_eval_t *ev);

#endif
