/* eval.c: the public evaluator API: life cycle, options, hosts, local servers, task
 * submission with backpressure, the ordered or unordered result stream and futures. The
 * tasks run in a backend on its own thread (the dispatcher, scheduler.c, or the sequential
 * evaluator, local.c), which reaches this state only through backend.h; the two meet
 * under ev->mu. The only file that knows struct lt_eval. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "clock.h"
#include "buf.h"
#include "curve.h"
#include "eval.h"
#include "future.h"
#include "hosts.h"
#include "log.h"
#include "oid.h"
#include "queue.h"
#include "replayq.h"
#include "ship.h"
#include "json.h"
#include "strbuf.h"
#include "lasterr.h"
#include "spawn.h"
#include "sreduce.h"
#include "spin.h"
#include "vec.h"

static int add_host(void *ud, const char *host);
static int stats_text(void *self, char **json);

/* The task numbers of the stream reduce's combines, apart from the submission indices. */
#define LT_COMBINE_SEQ (UINT64_C(1) << 63)

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

void lt__task_free(lt_task_t *t) {
  if (t == NULL) return;
  lt__value_unref(t->input);
  lt__value_unref(t->input2);
  lt_buf_free(t->result);
  free(t);
}

/* wake wakes the backend; a wake already pending is not repeated. Any thread. */
static void wake(lt_eval_t *ev) {
  if (atomic_exchange(&ev->wake_pending, 1)) return;
  uint64_t one = 1;
  ssize_t n = write(ev->wake_fd, &one, sizeof one);
  (void)n; /* an eventfd only fails when its counter would overflow: it is awake then */
}

static void door_woken(lt_eval_t *ev) {
  uint64_t junk;
  ssize_t n = read(ev->wake_fd, &junk, sizeof junk);
  (void)n; /* non-blocking: nothing to read is fine */
  atomic_store(&ev->wake_pending, 0);
  /* The wake that followed a lone result: how long the reader took to submit again. */
  if (ev->lone_at_us != 0) lt__spin_waited(&ev->turn, (double)(lt__clock_us() - ev->lone_at_us));
  ev->lone_at_us = 0;
}

/* journaled tells whether a result is worth keeping: a value, or a kernel's own failure
 * (the same input fails the same way); never a loss to the runtime or the network. */
static int journaled(const lt_buf_t *b) {
  int err = lt_buf_error(b);
  return err == LT_OK || err == LT_EKERNEL;
}

/* sync makes the results journaled so far durable, once per batch of results; under
 * ev->mu. */
static void sync_journal(lt_eval_t *ev) {
  if (ev->journal != NULL && lt__journal_sync(ev->journal) != LT_OK)
    lt__log(LT_LOG_ERROR, "journal %s: cannot sync: %s", ev->opts.journal, strerror(errno));
}

/* wake_readers wakes the threads in lt_eval_next's wait, noting when (spin.h). */
static void wake_readers(lt_eval_t *ev) {
  atomic_store(&ev->woke_at_us, lt__clock_us());
  pthread_cond_broadcast(&ev->cv_result);
}

/* stream_put puts result `b` (taken) of `t` (taken) in the result stream and wakes the
 * reader it is for; under ev->mu. */
static void stream_put(lt_eval_t *ev, lt_task_t *t, lt_buf_t *b) {
  t->result = b;
  t->arrival = ev->arrivals++;
  atomic_fetch_add(&ev->puts, 1);
  if (ev->opts.ordered) {
    HASH_ADD(hh, ev->ordered, stream_seq, sizeof t->stream_seq, t);
  } else {
    LT_QUEUE_PUSH(ev->ready_head, ev->ready_tail, t, next);
  }
  /* In order, only the result the reader waits for can wake it. */
  if (ev->result_waiters > 0 && (!ev->opts.ordered || t->stream_seq == ev->next_out)) {
    if (ev->delivering)
      ev->readers_to_wake = true;
    else
      wake_readers(ev);
  }
}

/* sreduce_end puts the stream reduce's one result in the stream once it is made (or `b`,
 * taken, a failure of the reduce itself, at once); under ev->mu. */
static void sreduce_end(lt_eval_t *ev, lt_buf_t *fail) {
  lt_buf_t *b = fail != NULL ? fail : lt__sreduce_take(ev->sreduce, ev->closed);
  if (b == NULL || ev->sreduce_done) {
    lt_buf_free(b);
    return;
  }
  lt_task_t *t = calloc(1, sizeof *t);
  if (t == NULL) {
    lt_buf_free(b);
    lt__log(LT_LOG_ERROR, "out of memory delivering the stream's reduced result");
    return;
  }
  ev->sreduce_done = 1;
  uint64_t parts = lt__sreduce_parts(ev->sreduce);
  t->seq = parts > 0 ? parts - 1 : 0; /* it names the last task it reduced */
  lt__buf_set_task(b, t->seq);
  stream_put(ev, t, b); /* stream_seq 0: the stream's one result */
}

/* named_failure returns failure `b` (taken) with its task named in its message: the
 * stream's one result says which of its tasks failed. */
static lt_buf_t *named_failure(lt_buf_t *b, uint64_t seq) {
  char msg[1024]; /* a kernel's message is at most 512 bytes and a name */
  snprintf(msg, sizeof msg, "task %llu: %s", (unsigned long long)seq, b->errmsg);
  lt_buf_t *named = lt__buf_fail(b->err, msg);
  if (named == NULL) return b;
  lt_buf_free(b);
  return named;
}

/* sreduce_arrive gives result `b` (taken) of `t` (taken: a task of the program, or a
 * combine) to the stream reduce and queues the combines it can run now; under ev->mu. */
static void sreduce_arrive(lt_eval_t *ev, lt_task_t *t, lt_buf_t *b) {
  lt_task_t *head = NULL, *tail = NULL;
  uint64_t seg = t->combine ? t->seg : t->seq;
  if (!t->combine && b != NULL && b->err != LT_OK) b = named_failure(b, t->seq);
  int rc = ev->sreduce_done ? LT_OK : lt__sreduce_arrive(ev->sreduce, seg, b, &head, &tail);
  if (ev->sreduce_done) lt_buf_free(b);
  lt__task_free(t);
  while (head != NULL) { /* combines go first: they hold the stream's result back */
    lt_task_t *c = head;
    head = c->next;
    c->next = NULL;
    c->seq = LT_COMBINE_SEQ | ev->combines_out++; /* a task number of its own */
    LT_QUEUE_PUSH_FRONT(ev->intake_head, ev->intake_tail, c, next);
  }
  if (tail != NULL) wake(ev);
  if (rc != LT_OK)
    sreduce_end(ev, lt__buf_fail(rc, "the stream's reduce failed: out of memory"));
  else
    sreduce_end(ev, NULL);
}

/* finish delivers the result `b` (taken) of `t` (taken) to its future, the stream or the
 * stream's reduce and wakes readers; under ev->mu. */
static void finish(lt_eval_t *ev, lt_task_t *t, lt_buf_t *b) {
  if (t->combine) { /* a combine of the stream reduce, not a task of the user's */
    ev->combines++;
    sreduce_arrive(ev, t, b);
    return;
  }
  lt__buf_set_task(b, t->seq); /* every result, also a failure or a replay, names its task */
  ev->pending--;
  ev->completed++;
  if (b != NULL && lt_buf_error(b) != LT_OK) ev->failed++;
  if (ev->journal != NULL && !t->replayed && b != NULL && journaled(b) &&
      lt__journal_append(ev->journal, t->digest, b) != LT_OK)
    lt__log(LT_LOG_ERROR, "journal %s: cannot append: %s", ev->opts.journal, strerror(errno));
  /* Submitters blocked on a full window wake once it has drained by an eighth, not at
   * every result. */
  uint64_t low = ev->opts.max_pending - (ev->opts.max_pending + 7) / 8;
  if (ev->space_waiters > 0 && ev->pending <= low) pthread_cond_broadcast(&ev->cv_space);
  if (t->future != NULL) {
    lt__future_resolve(t->future, b);
    lt__task_free(t);
    return;
  }
  if (ev->sreduce != NULL) {
    sreduce_arrive(ev, t, b);
    return;
  }
  stream_put(ev, t, b);
}

uint64_t lt__eval_client_id(const lt_eval_t *ev) {
  return ev->client_id;
}

/* ---- the backend's door (backend.h) ---------------------------------------------------- */

static lt_task_t *door_take(lt_eval_t *ev, size_t max) {
  lt_task_t *head = NULL, *tail = NULL, *t;
  pthread_mutex_lock(&ev->mu);
  /* Nothing goes out before lt_eval_start has found every kernel, nor after it failed. */
  if (ev->state != LT_EVAL_STARTED) max = 0;
  for (size_t n = 0; n < max && ev->intake_head != NULL; n++) {
    LT_QUEUE_POP(ev->intake_head, ev->intake_tail, t, next);
    LT_QUEUE_PUSH(head, tail, t, next);
  }
  pthread_mutex_unlock(&ev->mu);
  return head;
}

static void door_deliver(lt_eval_t *ev, lt_task_t *done, int sync) {
  /* A finished task's inputs are not needed any more. They go before the lock is taken: the
   * free callback of an input given with lt_eval_submit_owned is the user's code. */
  for (lt_task_t *t = done; t != NULL; t = t->next) {
    lt__value_unref(t->input);
    lt__value_unref(t->input2);
    t->input = t->input2 = NULL;
  }
  pthread_mutex_lock(&ev->mu);
  ev->delivering = true;
  for (lt_task_t *t = done, *next; t != NULL; t = next) {
    next = t->next;
    t->next = NULL;
    lt_buf_t *b = t->result;
    t->result = NULL;
    finish(ev, t, b);
  }
  if (sync == LT_EVAL_SYNC_NOW || ev->intake_head == NULL) sync_journal(ev);
  bool wake = ev->readers_to_wake;
  /* Nothing else out: the backend may wait for the reader's next task without keeping any
   * other work waiting. */
  bool lone = wake && ev->pending == 0;
  ev->delivering = ev->readers_to_wake = false;
  pthread_mutex_unlock(&ev->mu);
  /* ev outlives its dispatcher, which calls this: the condition variable is still there. */
  if (wake) wake_readers(ev);
  ev->reader_woken = lone;
  if (lone) ev->lone_at_us = lt__clock_us();
}

static int door_await_wake(lt_eval_t *ev) {
  if (!ev->reader_woken) return 0;
  ev->reader_woken = false;
  int64_t budget = lt__spin_budget(&ev->turn, atomic_load(&ev->wake_us));
  if (budget == 0) return 0;
  int64_t until = lt__clock_us() + budget;
  while (!atomic_load(&ev->wake_pending)) {
    if (lt__clock_us() >= until) return 0;
    sched_yield();
  }
  return 1;
}

static int door_stopping(lt_eval_t *ev) {
  pthread_mutex_lock(&ev->mu);
  int stop = ev->stop;
  pthread_mutex_unlock(&ev->mu);
  return stop;
}

static int door_input_closed(lt_eval_t *ev) {
  pthread_mutex_lock(&ev->mu);
  int closed = ev->closed && ev->intake_head == NULL;
  pthread_mutex_unlock(&ev->mu);
  return closed;
}

static void door_hosts_free(lt_host_t *hosts, size_t n) {
  for (size_t i = 0; hosts != NULL && i < n; i++)
    free(hosts[i].endpoint);
  free(hosts);
}

static long door_hosts(lt_eval_t *ev, lt_host_t **out) {
  pthread_mutex_lock(&ev->mu);
  size_t n = ev->nhosts;
  lt_host_t *h = calloc(n ? n : 1, sizeof *h);
  for (size_t i = 0; h != NULL && i < n; i++) {
    h[i].fd = ev->host_fds[i];
    h[i].gone = ev->host_gone[i];
    memcpy(h[i].key, ev->host_keys[i], sizeof h[i].key);
    if ((h[i].endpoint = strdup(ev->hosts[i])) == NULL) {
      door_hosts_free(h, i);
      h = NULL;
    }
  }
  pthread_mutex_unlock(&ev->mu);
  *out = h;
  return h != NULL ? (long)n : LT_ENOMEM;
}

static int door_poll_hosts(lt_eval_t *ev, int64_t now_ms) {
  return ev->hosts_watch != NULL && lt__hosts_watch_poll(ev->hosts_watch, add_host, ev, now_ms) > 0;
}

static void door_host_answered(lt_eval_t *ev, int ready) {
  pthread_mutex_lock(&ev->mu);
  ev->start_waiting--;
  ev->start_ready += ready;
  pthread_cond_broadcast(&ev->cv_start);
  pthread_mutex_unlock(&ev->mu);
}

static void door_host_lacks(lt_eval_t *ev, const char *endpoint, const char *modules) {
  pthread_mutex_lock(&ev->mu);
  if (ev->state == LT_EVAL_NEW) {
    ev->start_lacking++;
    lt__strbuf_printf(&ev->start_lacks, "%s\t%s\n", endpoint, modules);
  }
  pthread_mutex_unlock(&ev->mu);
}

static void door_host_auth_failed(lt_eval_t *ev) {
  pthread_mutex_lock(&ev->mu);
  ev->start_auth++;
  pthread_mutex_unlock(&ev->mu);
}

/* The door a backend reaches the evaluator through (backend.h). */
static const lt_eval_door_t door = {
    .take = door_take,
    .deliver = door_deliver,
    .woken = door_woken,
    .await_wake = door_await_wake,
    .stopping = door_stopping,
    .input_closed = door_input_closed,
    .hosts = door_hosts,
    .hosts_free = door_hosts_free,
    .poll_hosts = door_poll_hosts,
    .host_answered = door_host_answered,
    .host_lacks = door_host_lacks,
    .host_auth_failed = door_host_auth_failed,
};

/* ---- the public API ---------------------------------------------------------------------- */

/* fail makes `rc` the failure of the current call on `ev` (NULL: a call without one): its
 * message, which names the call and the argument, goes to the thread's lt_last_error and to
 * ev's lt_eval_error, so that no older text survives it. Not under ev->mu. Returns rc. */
__attribute__((format(printf, 3, 4))) static int fail(lt_eval_t *ev, int rc, const char *fmt, ...) {
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

/* NO_SERVER_HINT is what to do when an evaluator has no server to start with. */
#define NO_SERVER_HINT                                                                             \
  "add one with lt_eval_add_host (\"tcp://HOST:PORT\"), start local ones with "                    \
  "lt_eval_spawn_local, or set option hosts (a hosts file or an announce directory; "              \
  "LITHIUM_HOSTS in the environment); lt_eval_run_local runs without servers"

LT_API int lt_eval_new(lt_eval_t **out, lt_skel_t *program) {
  if (out == NULL) {
    lt_skel_free(program);
    return lt__fail_null("lt_eval_new", "out", 0);
  }
  *out = NULL;
  if (program == NULL) return lt__fail_null("lt_eval_new", "program", 0);
  lt_eval_t *ev = calloc(1, sizeof *ev);
  if (ev == NULL) {
    lt_skel_free(program);
    return fail(NULL, LT_ENOMEM, "lt_eval_new: out of memory");
  }
  ev->program = program;
  ev->wake_fd = -1;
  lt__options_init(&ev->opts);
  pthread_mutex_init(&ev->mu, NULL);
  pthread_cond_init(&ev->cv_space, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&ev->cv_start, &attr);
  pthread_cond_init(&ev->cv_result, &attr);
  pthread_condattr_destroy(&attr);
  int rc = lt__skel_valid(program)
               ? LT_OK
               : fail(NULL, LT_EINVAL,
                      "lt_eval_new: program is no valid skeleton tree (not made by the builders "
                      "or lt_skel_parse, or changed since)");
  if (rc == LT_OK && lt__skel_reduces(program) && (rc = lt__sreduce_new(&ev->sreduce)) != LT_OK)
    fail(NULL, rc, "lt_eval_new: out of memory");
  if (rc == LT_OK && (rc = lt__options_from_env(&ev->opts)) != LT_OK) {
    fail(NULL, rc, "lt_eval_new: the environment: %s", ev->opts.error);
    lt__log(LT_LOG_ERROR, "%s", ev->opts.error); /* the evaluator is gone: say it here */
  }
  if (rc == LT_OK) {
    ev->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ev->wake_fd < 0)
      rc = fail(NULL, LT_EIO, "lt_eval_new: cannot make an eventfd: %s", strerror(errno));
  }
  if (rc != LT_OK) {
    lt_eval_free(ev);
    return rc;
  }
  ev->client_id = lt__oid_client_random();
  ev->secret = lt__oid_client_random();
  *out = ev;
  return LT_OK;
}

LT_API int lt_eval_set(lt_eval_t *ev, const char *key, const char *value) {
  if (ev == NULL) return lt__fail_null("lt_eval_set", "ev", 0);
  if (ev->state != LT_EVAL_NEW)
    return fail(ev, LT_ESTATE, "option '%.200s' set after start", key != NULL ? key : "(null)");
  return lt__options_set(&ev->opts, key, value);
}

LT_API const char *lt_eval_error(const lt_eval_t *ev) {
  return ev != NULL ? ev->opts.error : "";
}

/* grow_hosts makes room for one more host; under ev->mu. */
static int grow_hosts(lt_eval_t *ev) {
  if (ev->nhosts < ev->caphosts) return LT_OK;
  size_t old = ev->caphosts, cap = old ? old * 2 : 8;
  if (LT_VEC_RESIZE(ev->hosts, old, cap) != LT_OK ||
      LT_VEC_RESIZE(ev->host_fds, old, cap) != LT_OK ||
      LT_VEC_RESIZE(ev->host_gone, old, cap) != LT_OK ||
      LT_VEC_RESIZE(ev->host_keys, old, cap) != LT_OK)
    return LT_ENOMEM;
  ev->caphosts = cap;
  return LT_OK;
}

int lt__eval_add_host(lt_eval_t *ev, const char *host, int fd) {
  /* A host string is "ENDPOINT [Z85 server public key]"; one endpoint is one server. */
  char endpoint[LT_HOST_EP_MAX + 1], key[LT_Z85_KEY_LEN + 1];
  if (ev == NULL || host == NULL)
    return lt__fail_null("lt_eval_add_host", ev == NULL ? "ev" : "endpoint", 0);
  if (lt__host_parse(host, endpoint, key) != LT_OK) {
    lt__log(LT_LOG_ERROR, "bad host '%.300s': expected 'tcp://HOST:PORT [Z85 server key]'", host);
    return fail(ev, LT_EINVAL,
                "lt_eval_add_host: endpoint '%.300s' is malformed: expected 'tcp://HOST:PORT' "
                "and an optional CURVE server key (%d Z85 characters)",
                host, LT_Z85_KEY_LEN);
  }
  char *copy = strdup(endpoint);
  if (copy == NULL) return fail(ev, LT_ENOMEM, "lt_eval_add_host: out of memory");
  pthread_mutex_lock(&ev->mu);
  for (size_t i = 0; i < ev->nhosts; i++) {
    if (strcmp(ev->hosts[i], endpoint) == 0) {
      /* The same endpoint twice is one server. */
      if (fd >= 0 && ev->host_fds[i] < 0) ev->host_fds[i] = fd;
      if (key[0] != '\0' && ev->host_keys[i][0] == '\0') memcpy(ev->host_keys[i], key, sizeof key);
      pthread_mutex_unlock(&ev->mu);
      free(copy);
      return LT_OK;
    }
  }
  if (grow_hosts(ev) != LT_OK) {
    pthread_mutex_unlock(&ev->mu);
    free(copy);
    return fail(ev, LT_ENOMEM, "lt_eval_add_host: out of memory");
  }
  ev->host_fds[ev->nhosts] = fd;
  ev->host_gone[ev->nhosts] = 0;
  memcpy(ev->host_keys[ev->nhosts], key, sizeof key);
  ev->hosts[ev->nhosts++] = copy;
  int started = ev->state == LT_EVAL_STARTED;
  pthread_mutex_unlock(&ev->mu);
  if (started) wake(ev);
  return LT_OK;
}

/* add_host adds a server read from a hosts file or an announce directory (lt_host_add_fn). */
static int add_host(void *ud, const char *host) {
  return lt__eval_add_host(ud, host, -1);
}

LT_API int lt_eval_add_host(lt_eval_t *ev, const char *endpoint) {
  return lt__eval_add_host(ev, endpoint, -1);
}

LT_API int lt_eval_remove_host(lt_eval_t *ev, const char *host) {
  char endpoint[LT_HOST_EP_MAX + 1], key[LT_Z85_KEY_LEN + 1];
  if (ev == NULL || host == NULL)
    return lt__fail_null("lt_eval_remove_host", ev == NULL ? "ev" : "endpoint", 0);
  if (lt__host_parse(host, endpoint, key) != LT_OK)
    return fail(ev, LT_EINVAL,
                "lt_eval_remove_host: endpoint '%.300s' is malformed: expected "
                "'tcp://HOST:PORT'",
                host);
  pthread_mutex_lock(&ev->mu);
  int rc = LT_ENOENT;
  for (size_t i = 0; i < ev->nhosts; i++) {
    if (strcmp(ev->hosts[i], endpoint) == 0 && !ev->host_gone[i]) {
      ev->host_gone[i] = 1;
      rc = LT_OK;
    }
  }
  int started = ev->state == LT_EVAL_STARTED;
  pthread_mutex_unlock(&ev->mu);
  if (rc != LT_OK)
    return fail(ev, rc,
                "lt_eval_remove_host: endpoint '%s' was never added to this evaluator, or was "
                "removed already",
                endpoint);
  if (started) wake(ev);
  return rc;
}

/* own_prefix_server finds the lithium-server installed beside the code that runs this
 * function: liblithium.so in LIBDIR gives LIBDIR/<LT_LIBDIR_TO_BINDIR>/lithium-server, a
 * program linked with the objects (the `lithium` tool in BINDIR) gives the one next to it.
 * Writes the path into `path` and returns 1 when such a program exists. */
static int own_prefix_server(char *path, size_t len) {
  Dl_info info;
  char self[PATH_MAX];
  const char *where = NULL;
  if (dladdr((void *)&lt_eval_spawn_local, &info) != 0 && info.dli_fname != NULL &&
      info.dli_fname[0] != '\0' && strcmp(info.dli_fname, program_invocation_name) != 0 &&
      realpath(info.dli_fname, self) != NULL) {
    where = self; /* the shared library */
  } else {
    /* The main program: glibc names it by argv[0], which need not be a path. */
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 0;
    self[n] = '\0';
    where = self;
  }
  char *slash = strrchr(where, '/');
  if (slash == NULL) return 0;
  *slash = '\0';
  static const char *const rel[] = {LT_LIBDIR_TO_BINDIR, "."};
  for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
    if ((size_t)snprintf(path, len, "%s/%s/lithium-server", where, rel[i]) < len &&
        access(path, X_OK) == 0)
      return 1;
  }
  return 0;
}

/* server_program is the `server` option, else the lithium-server of the library's own
 * prefix, else the one of the configured install prefix. Writes into `buf`. */
static const char *server_program(const lt_eval_t *ev, char *buf, size_t len) {
  if (ev->opts.server != NULL) return ev->opts.server;
  if (own_prefix_server(buf, len)) return buf;
  return LT_DEFAULT_SERVER;
}

LT_API int lt_eval_spawn_local(lt_eval_t *ev, int nservers) {
  if (ev == NULL) return lt__fail_null("lt_eval_spawn_local", "ev", 0);
  if (nservers <= 0 || nservers > 256)
    return fail(ev, LT_EINVAL, "lt_eval_spawn_local: nservers %d is out of range (1 to 256)",
                nservers);
  if (LT_VEC_RESERVE(ev->procs, ev->capprocs, ev->nprocs + (size_t)nservers) != LT_OK)
    return fail(ev, LT_ENOMEM, "lt_eval_spawn_local: out of memory");
  for (int i = 0; i < nservers; i++) {
    lt_proc_t *p = &ev->procs[ev->nprocs];
    char name[32], err[256], buf[PATH_MAX];
    snprintf(name, sizeof name, "local-%zu", ev->nprocs);
    const char *program = server_program(ev, buf, sizeof buf);
    int rc = lt__proc_spawn(p, program, ev->opts.modules, ev->opts.server_threads, name, NULL,
                            (int)ev->opts.connect_timeout_ms * 2, err, sizeof err);
    if (rc != LT_OK) {
      lt__log(LT_LOG_ERROR, "cannot start %s: %s", program, err);
      return fail(ev, rc,
                  "lt_eval_spawn_local: cannot start server %d of %d (%s, option server; "
                  "modules=%s): %s",
                  i + 1, nservers, program, ev->opts.modules ? ev->opts.modules : "not set", err);
    }
    ev->nprocs++;
    rc = lt__eval_add_host(ev, p->endpoint, p->out_fd);
    if (rc != LT_OK) return rc;
  }
  return LT_OK;
}

/* journal_header returns the journal header text of this run (caller frees): the program's
 * canonical expression and the SHA-256 of the local copy of each module it uses, found in
 * the `modules` directory the way the servers and the sequential evaluator find them (the
 * hashes module shipping compares with the servers' welcomes). NULL on out of memory. */
static char *journal_header(lt_eval_t *ev) {
  char *program = lt_skel_format(ev->program);
  lt_template_t *tmpl = NULL;
  lt_ship_t *sh = NULL;
  char *text = NULL;
  if (program != NULL && lt__template_compile(&tmpl, ev->program, ev->opts.normal_form) == LT_OK &&
      lt__ship_new(&sh, ev->opts.modules, tmpl->kernels, tmpl->nkernels, 0) == LT_OK) {
    const char *const *names;
    uint32_t n;
    lt__ship_modules(sh, &names, &n);
    const char **shas = calloc(n ? n : 1, sizeof *shas);
    for (uint32_t i = 0; shas != NULL && i < n; i++) {
      shas[i] = lt__ship_sha256(sh, i);
      if (shas[i][0] == '\0')
        lt__log(LT_LOG_WARN,
                "journal %s: module '%s' has no local copy (modules=%s): a rebuild of it "
                "cannot be told from the journal",
                ev->opts.journal, names[i], ev->opts.modules ? ev->opts.modules : "not set");
    }
    if (shas != NULL) text = lt__jheader_text(program, names, shas, n);
    free(shas);
  }
  lt__ship_free(sh);
  lt__template_free(tmpl);
  free(program);
  return text;
}

/* open_journal opens the journal (journal=FILE) once; with ev->mu held. */
static int open_journal(lt_eval_t *ev) {
  if (ev->opts.journal == NULL || ev->journal != NULL) return LT_OK;
  char *header = journal_header(ev);
  if (header == NULL) return lt__fail(LT_ENOMEM, "option journal: out of memory");
  char err[1024];
  int rc = lt__journal_open(&ev->journal, ev->opts.journal, header, ev->opts.journal_mismatch, err,
                            sizeof err);
  free(header);
  if (rc != LT_OK) {
    lt__log(LT_LOG_ERROR, "%s", err);
    /* Under ev->mu: the thread's text now, ev's by the caller (journal_failed). */
    lt__fail(rc, "option journal '%s': %s", ev->opts.journal, err);
  }
  return rc;
}

/* use_hosts_option adds the servers of the `hosts` option: a hosts file, or an announce
 * directory, which the dispatcher then keeps watching. An announce directory that is still
 * empty is waited for up to connect_timeout_ms: under a batch system the servers may be
 * starting at the same time as the client. */
static int use_hosts_option(lt_eval_t *ev) {
  const char *path = ev->opts.hosts;
  char err[512] = "";
  int dir = lt__hosts_is_dir(path);
  int n = lt__hosts_load(add_host, ev, path, err, sizeof err);
  if (n >= 0 && dir) {
    int64_t t0 = lt__clock_ms();
    for (;;) {
      pthread_mutex_lock(&ev->mu);
      size_t have = ev->nhosts;
      pthread_mutex_unlock(&ev->mu);
      int64_t ms = lt__clock_ms() - t0;
      if (have > 0 || ms >= (int64_t)ev->opts.connect_timeout_ms || n < 0) break;
      struct timespec pause = {0, 100 * 1000000L};
      nanosleep(&pause, NULL);
      n = lt__hosts_load(add_host, ev, path, err, sizeof err);
    }
    if (n >= 0 && ev->hosts_watch == NULL) n = lt__hosts_watch_new(&ev->hosts_watch, path);
  }
  if (n < 0) {
    lt__log(LT_LOG_ERROR, "hosts: %s", err[0] != '\0' ? err : lt_strerror(n));
    return fail(ev, n, "lt_eval_start: option hosts '%s': %s", path,
                err[0] != '\0' ? err : lt_strerror(n));
  }
  return LT_OK;
}

/* kernels_of appends to `b` the program's kernels of module `mod` (`n` bytes), quoted. */
static void kernels_of(const lt_eval_t *ev, lt_strbuf_t *b, const char *mod, size_t n) {
  int first = 1;
  for (uint32_t i = 0; i < ev->tmpl->nkernels; i++) {
    const char *k = ev->tmpl->kernels[i];
    if (strncmp(k, mod, n) != 0 || k[n] != ':') continue;
    lt__strbuf_printf(b, "%s'%s'", first ? "" : ", ", k);
    first = 0;
  }
}

/* modules_missing fails lt_eval_start once, with LT_ENOMODULE, when every initial host that
 * welcomed us lacks a module of the program: it names each host, each module it lacks and
 * the kernels that need it. Nothing was sent: the dispatcher takes no task before start. */
static int modules_missing(lt_eval_t *ev) {
  lt_strbuf_t b = {0};
  pthread_mutex_lock(&ev->mu);
  char *lacks = lt__strbuf_take(&ev->start_lacks);
  pthread_mutex_unlock(&ev->mu);
  lt__strbuf_printf(&b, "lt_eval_start: no server has every module of the program, nothing "
                        "was sent:");
  for (char *line = lacks, *next; line != NULL && *line != '\0'; line = next) {
    next = strchr(line, '\n');
    if (next != NULL) *next++ = '\0';
    char *mods = strchr(line, '\t');
    if (mods == NULL) continue;
    *mods++ = '\0';
    lt__strbuf_printf(&b, " server %s has no module", line);
    for (char *m = mods; *m != '\0';) {
      size_t n = strcspn(m, ",");
      lt__strbuf_printf(&b, " '%.*s' (for ", (int)n, m);
      kernels_of(ev, &b, m, n);
      lt__strbuf_puts(&b, ")");
      m += n;
      if (*m == ',') m++;
      if (*m != '\0') lt__strbuf_puts(&b, ",");
    }
    lt__strbuf_puts(&b, ";");
  }
  free(lacks);
  lt__strbuf_printf(&b,
                    " looked in each server's module directories (lithium-server --modules)%s%s. "
                    "Check the names (lithium check EXPR --modules DIR), or install the modules "
                    "on the servers, or send them: ship_modules=on with a local copy in option "
                    "modules and servers started with --accept-modules",
                    ev->opts.modules != NULL ? " and in modules=" : "",
                    ev->opts.modules != NULL ? ev->opts.modules : "");
  char *text = lt__strbuf_take(&b);
  int rc = fail(ev, LT_ENOMODULE, "%s", text != NULL ? text : "lt_eval_start: unknown module");
  lt__log(LT_LOG_ERROR, "%s", lt_last_error());
  free(text);
  return rc;
}

/* What local_kernels_check found: the kernels whose module has no such function. */
typedef struct kernel_misses {
  lt_strbuf_t text;
  int n;
} kernel_misses_t;

static void kernel_missed(void *ud, const char *kernel, int err, const char *msg) {
  kernel_misses_t *m = ud;
  if (err != LT_ENOKERNEL) return; /* a module with no local copy is the servers' to judge */
  lt__strbuf_printf(&m->text, "%s kernel '%s': %s", m->n++ ? ";" : "", kernel, msg);
}

/* local_kernels_check fails lt_eval_start at once, before any server is asked, with
 * LT_ENOKERNEL when the local copy of a module of the program (option modules) has no
 * function a kernel names, e.g. a typo in "mandelk:rwo": each such kernel is named, with
 * where it looked (as `lithium check --modules` does). */
static int local_kernels_check(lt_eval_t *ev) {
  if (ev->opts.modules == NULL || !lt__hosts_is_dir(ev->opts.modules)) return LT_OK;
  kernel_misses_t m = {0};
  int rc = lt_skel_check_kernels(ev->program, ev->opts.modules, kernel_missed, &m);
  char *text = lt__strbuf_take(&m.text);
  if (rc >= 0 && m.n > 0) {
    pthread_mutex_lock(&ev->mu);
    ev->state = LT_EVAL_FAILED; /* the program cannot run: submits are refused */
    pthread_mutex_unlock(&ev->mu);
    rc = fail(ev, LT_ENOKERNEL,
              "lt_eval_start: %d kernel(s) of the program are not in their module, nothing was "
              "sent:%s (looked in modules=%s; lithium check EXPR --modules DIR checks a "
              "program)",
              m.n, text != NULL ? text : "", ev->opts.modules);
    lt__log(LT_LOG_ERROR, "%s", lt_last_error());
  } else if (rc < 0) {
    rc = fail(ev, rc, "lt_eval_start: cannot check the kernels in modules=%s: %s", ev->opts.modules,
              lt_strerror(rc));
  } else {
    rc = LT_OK;
  }
  free(text);
  return rc;
}

/* start_backend creates `ops`'s backend and starts its thread; the initial hosts (those
 * added so far) each answer once before lt_eval_start returns. */
static int start_backend(lt_eval_t *ev, const lt_backend_ops_t *ops) {
  pthread_mutex_lock(&ev->mu);
  ev->start_waiting = (int)ev->nhosts;
  ev->start_ready = 0;
  ev->start_auth = 0;
  ev->start_lacking = 0;
  lt_backend_env_t env = {.ev = ev,
                          .door = &door,
                          .opts = &ev->opts,
                          .tmpl = ev->tmpl,
                          .client_id = ev->client_id,
                          .secret = ev->secret,
                          .wake_fd = ev->wake_fd,
                          .initial_hosts = ev->nhosts,
                          .statsock = ev->statsock};
  pthread_mutex_unlock(&ev->mu);
  int rc = ops->create(&ev->be, &env);
  if (rc != LT_OK) return rc;
  ev->backend = ops;
  if (pthread_create(&ev->thread, NULL, ops->run, ev->be) != 0) {
    ops->destroy(ev->be);
    ev->be = NULL;
    ev->backend = NULL;
    return LT_ENOMEM;
  }
  ev->thread_started = 1;
  return LT_OK;
}

/* open_stats_socket opens the stats_socket option's socket, if any; a failure is the
 * start's, with the reason in lt_eval_error. */
static int open_stats_socket(lt_eval_t *ev) {
  if (ev->opts.stats_socket == NULL || ev->statsock != NULL) return LT_OK;
  char err[512];
  int rc = lt__statsock_open(&ev->statsock, ev->opts.stats_socket, stats_text, ev, err, sizeof err);
  if (rc != LT_OK) return fail(ev, rc, "lt_eval_start: option stats_socket: %s", err);
  return LT_OK;
}

LT_API int lt_eval_start(lt_eval_t *ev) {
  if (ev == NULL) return lt__fail_null("lt_eval_start", "ev", 0);
  pthread_mutex_lock(&ev->mu);
  int jrc = ev->state == LT_EVAL_NEW ? open_journal(ev) : LT_OK;
  pthread_mutex_unlock(&ev->mu);
  if (jrc != LT_OK) return fail(ev, jrc, "lt_eval_start: %s", lt_last_error());
  pthread_mutex_lock(&ev->mu);
  int state = ev->state;
  size_t nhosts = ev->nhosts;
  pthread_mutex_unlock(&ev->mu);
  if (state != LT_EVAL_NEW)
    return fail(ev, LT_ESTATE, "lt_eval_start: ev was started already%s",
                state == LT_EVAL_FAILED ? " and failed: make a new evaluator" : "");
  if (ev->opts.hosts != NULL) {
    int rc = use_hosts_option(ev);
    if (rc != LT_OK) return rc;
    pthread_mutex_lock(&ev->mu);
    nhosts = ev->nhosts;
    pthread_mutex_unlock(&ev->mu);
  }
  if (nhosts == 0)
    return fail(ev, LT_ENOSERVER,
                "lt_eval_start: no server to start with: " NO_SERVER_HINT
                ". Nothing started: tasks submitted wait for a later lt_eval_start");
  if (lt__options_check(&ev->opts) != LT_OK)
    return fail(ev, LT_EINVAL, "%s", ev->opts.error); /* as lt_eval_set says it */
  lt__template_free(ev->tmpl);
  int rc = lt__template_compile(&ev->tmpl, ev->program, ev->opts.normal_form);
  if (rc != LT_OK)
    return fail(ev, rc, "lt_eval_start: cannot compile the program: %s", lt_strerror(rc));

  rc = local_kernels_check(ev);
  if (rc != LT_OK) return rc;
  rc = open_stats_socket(ev);
  if (rc != LT_OK) return rc;

  rc = start_backend(ev, &lt__sched_backend);
  if (rc != LT_OK)
    return fail(ev, rc, "lt_eval_start: cannot start the dispatcher: %s", lt_strerror(rc));
  ev->thread_started = 1;

  /* Wait until one initial host that has every module of the program welcomed us, or every
   * one was given up on: the others join when they answer. */
  pthread_mutex_lock(&ev->mu);
  while (ev->start_waiting > 0 && ev->start_ready - ev->start_lacking <= 0)
    pthread_cond_wait(&ev->cv_start, &ev->mu);
  int ready = ev->start_ready, auth = ev->start_auth;
  int complete = ready - ev->start_lacking;
  ev->state = complete > 0 ? LT_EVAL_STARTED : LT_EVAL_FAILED;
  pthread_mutex_unlock(&ev->mu);
  if (ready > 0 && complete <= 0) return modules_missing(ev);
  if (ready == 0 && auth > 0) {
    lt__log(LT_LOG_ERROR, "no server accepted us: authentication failed (see above)");
    return fail(ev, LT_EAUTH,
                "lt_eval_start: none of the %zu servers accepted us: authentication failed "
                "(the log names each; see options curve_key and curve_server)",
                nhosts);
  }
  if (ready == 0) {
    lt__log(LT_LOG_ERROR, "no server answered");
    return fail(ev, LT_ENOSERVER,
                "lt_eval_start: none of the %zu servers answered within connect_timeout_ms "
                "(%u ms): are they running (lithium status ENDPOINT)? Else " NO_SERVER_HINT,
                nhosts, (unsigned)ev->opts.connect_timeout_ms);
  }
  wake(ev); /* tasks submitted before start */
  return LT_OK;
}

LT_API int lt_eval_run_local(lt_eval_t *ev) {
  if (ev == NULL) return lt__fail_null("lt_eval_run_local", "ev", 0);
  if (ev->state != LT_EVAL_NEW)
    return fail(ev, LT_ESTATE, "lt_eval_run_local: ev was started already");
  pthread_mutex_lock(&ev->mu);
  int jrc = open_journal(ev);
  pthread_mutex_unlock(&ev->mu);
  if (jrc != LT_OK) return fail(ev, jrc, "lt_eval_run_local: %s", lt_last_error());
  lt__template_free(ev->tmpl);
  int rc = lt__template_compile(&ev->tmpl, ev->program, ev->opts.normal_form);
  if (rc != LT_OK)
    return fail(ev, rc, "lt_eval_run_local: cannot compile the program: %s", lt_strerror(rc));
  if (ev->opts.stats_socket != NULL)
    lt__log(LT_LOG_WARN, "option stats_socket: lt_eval_run_local does not serve it (the "
                         "dispatcher of lt_eval_start does)");
  rc = start_backend(ev, &lt__local_backend);
  if (rc == LT_EINVAL)
    return fail(ev, rc,
                "lt_eval_run_local: option modules '%s' is not a readable directory (the "
                "kernels' modules are loaded from it)",
                ev->opts.modules != NULL ? ev->opts.modules : "");
  if (rc != LT_OK)
    return fail(ev, rc, "lt_eval_run_local: cannot start the sequential evaluator: %s",
                lt_strerror(rc));
  pthread_mutex_lock(&ev->mu);
  ev->state = LT_EVAL_STARTED;
  pthread_mutex_unlock(&ev->mu);
  wake(ev); /* tasks submitted before */
  return LT_OK;
}

/* replay gives task `t` the result journaled for its input, if there is one: 1 when it did
 * (`t` is taken), 0 when `t` is to be computed. A result for the stream only takes its
 * place there, to be read when lt_eval_next reaches it; a future or the stream's reduce
 * gets it read now (and a record that cannot be read is computed again). Under ev->mu. */
static int replay(lt_eval_t *ev, lt_task_t *t) {
  uint64_t off;
  if (!lt__journal_find(ev->journal, t->digest, &off)) return 0;
  if (t->future == NULL && ev->sreduce == NULL) {
    lt_replay_t r = {t->stream_seq, t->seq, off, ev->arrivals};
    if (lt__replayq_push(&ev->replays, r) != LT_OK) return 0;
    ev->arrivals++;
    ev->replayed++;
    ev->submitted++;
    ev->completed++;
    if (ev->result_waiters > 0 && (!ev->opts.ordered || t->stream_seq == ev->next_out))
      wake_readers(ev);
    t->input = NULL; /* submit drops it, outside ev->mu */
    lt__task_free(t);
    return 1;
  }
  char err[512];
  lt_buf_t *done = NULL;
  if (lt__journal_read(ev->journal, off, &done, err, sizeof err) != LT_OK) {
    lt__log(LT_LOG_WARN, "%s; computed again", err);
    return 0;
  }
  t->replayed = 1;
  t->input = NULL;
  ev->replayed++;
  ev->pending++;
  ev->submitted++;
  finish(ev, t, done);
  return 1;
}

/* submit adds the task of `input` (taken: one reference, dropped also on failure, outside
 * ev->mu since its free callback is the user's code) to the stream, or to *out: the body of
 * lt_eval_submit and lt_eval_submit_owned. */
static int submit(lt_eval_t *ev, lt_value_t *input, lt_future_t **out) {
  if (out != NULL && ev->sreduce != NULL) { /* one result: lt_eval_next */
    lt__value_unref(input);
    return fail(ev, LT_EINVAL,
                "lt_eval_submit: out must be NULL: this program reduces its stream to one "
                "result, read with lt_eval_next");
  }
  lt_task_t *t = calloc(1, sizeof *t);
  if (t == NULL) {
    lt__value_unref(input);
    return fail(ev, LT_ENOMEM, "lt_eval_submit: out of memory");
  }
  t->input = input;
  if (out != NULL && (t->future = lt__future_new()) == NULL) {
    lt__task_free(t);
    return fail(ev, LT_ENOMEM, "lt_eval_submit: out of memory");
  }
  if (ev->opts.journal != NULL) t->digest = lt__digest(input->data, input->len);
  pthread_mutex_lock(&ev->mu);
  int rc = LT_OK;
  if (ev->closed || ev->state == LT_EVAL_FAILED) rc = ev->closed ? LT_ECLOSED : LT_ESTATE;
  int jrc = rc == LT_OK ? (rc = open_journal(ev)) : LT_OK;
  /* Before start nothing can finish, so nothing blocks: Lithium's submit-all-then-parDo
   * pattern must work. */
  while (rc == LT_OK && ev->state == LT_EVAL_STARTED && ev->pending >= ev->opts.max_pending) {
    if (ev->opts.nonblocking) {
      rc = LT_EAGAIN;
      break;
    }
    ev->space_waiters++;
    pthread_cond_wait(&ev->cv_space, &ev->mu);
    ev->space_waiters--;
    if (ev->closed) rc = LT_ECLOSED;
  }
  if (rc != LT_OK) {
    pthread_mutex_unlock(&ev->mu);
    if (t->future != NULL) {
      lt_future_release(t->future); /* both references: nobody else saw it */
      lt_future_release(t->future);
    }
    t->future = NULL;
    lt__task_free(t);
    if (jrc != LT_OK) return fail(ev, rc, "lt_eval_submit: %s", lt_last_error());
    return fail(ev, rc, "lt_eval_submit: %s",
                rc == LT_ECLOSED ? "the stream of ev is closed (lt_eval_close was called)"
                : rc == LT_EAGAIN
                    ? "max_pending tasks are unfinished (option nonblocking is on): read "
                      "results, then submit again"
                    : "ev failed to start: make a new evaluator");
  }
  if (ev->sreduce != NULL && (rc = lt__sreduce_add(ev->sreduce)) != LT_OK) {
    pthread_mutex_unlock(&ev->mu);
    lt__task_free(t);
    return fail(ev, rc, "lt_eval_submit: out of memory");
  }
  t->seq = ev->next_task++;
  if (ev->sreduce != NULL) {
    ev->stream_left = 1; /* the reduced result, once */
  } else if (t->future == NULL) {
    t->stream_seq = ev->next_stream++;
    ev->stream_left++;
  }
  lt_future_t *future = t->future; /* replay may free t */
  if (ev->journal != NULL && replay(ev, t)) {
    /* Done in an earlier run: its result comes from the journal, in its place; its input
     * is not needed. */
    if (out != NULL) *out = future;
    pthread_mutex_unlock(&ev->mu);
    lt__value_unref(input);
    return LT_OK;
  }
  LT_QUEUE_PUSH(ev->intake_head, ev->intake_tail, t, next);
  ev->pending++;
  ev->submitted++;
  int started = ev->state == LT_EVAL_STARTED;
  if (out != NULL) *out = t->future;
  pthread_mutex_unlock(&ev->mu);
  if (started) wake(ev);
  return LT_OK;
}

LT_API int lt_eval_submit(lt_eval_t *ev, const void *data, size_t len, lt_future_t **out) {
  if (out != NULL) *out = NULL;
  if (ev == NULL) return lt__fail_null("lt_eval_submit", "ev", 0);
  if (data == NULL && len > 0)
    return fail(ev, LT_EINVAL, "lt_eval_submit: data is NULL with len %zu (NULL needs len 0)", len);
  lt_value_t *input = lt__value_copy(data, len);
  return input != NULL ? submit(ev, input, out)
                       : fail(ev, LT_ENOMEM, "lt_eval_submit: out of memory for %zu bytes", len);
}

LT_API int lt_eval_submit_owned(lt_eval_t *ev, void *data, size_t len,
                                void (*free_fn)(void *data, void *hint), void *hint,
                                lt_future_t **out) {
  if (out != NULL) *out = NULL;
  if (ev == NULL || (data == NULL && len > 0)) {
    if (free_fn != NULL) free_fn(data, hint); /* taken, also on failure */
    if (ev == NULL) return lt__fail_null("lt_eval_submit_owned", "ev", 0);
    return fail(ev, LT_EINVAL, "lt_eval_submit_owned: data is NULL with len %zu (NULL needs len 0)",
                len);
  }
  lt_value_t *input = lt__value_user(data, len, free_fn, hint);
  return input != NULL ? submit(ev, input, out)
                       : fail(ev, LT_ENOMEM, "lt_eval_submit_owned: out of memory");
}

LT_API int lt_eval_close(lt_eval_t *ev) {
  if (ev == NULL) return lt__fail_null("lt_eval_close", "ev", 0);
  pthread_mutex_lock(&ev->mu);
  ev->closed = 1;
  if (ev->sreduce != NULL) sreduce_end(ev, NULL); /* every result may be in already */
  pthread_cond_broadcast(&ev->cv_result);
  pthread_cond_broadcast(&ev->cv_space);
  pthread_mutex_unlock(&ev->mu);
  wake(ev); /* end of stream: work may move (migrate.c) */
  return LT_OK;
}

/* take_result removes the next stream result: a task with its result into *t, or a
 * journaled one into *r; 0 if it is not there yet. Replayed results wait in ev->replays in
 * stream order, so the next one is there when it heads that queue. */
static int take_result(lt_eval_t *ev, lt_task_t **t, lt_replay_t *r) {
  *t = NULL;
  const lt_replay_t *head = lt__replayq_head(&ev->replays);
  if (ev->opts.ordered) {
    if (head != NULL && head->stream_seq == ev->next_out) {
      ev->next_out++;
      return lt__replayq_pop(&ev->replays, r);
    }
    HASH_FIND(hh, ev->ordered, &ev->next_out, sizeof ev->next_out, *t);
    if (*t == NULL) return 0;
    HASH_DEL(ev->ordered, *t);
    ev->next_out++;
    return 1;
  }
  if (head != NULL && (ev->ready_head == NULL || head->arrival < ev->ready_head->arrival))
    return lt__replayq_pop(&ev->replays, r);
  LT_QUEUE_POP(ev->ready_head, ev->ready_tail, *t, next);
  return *t != NULL;
}

/* read_replay reads back the journaled result `r` for lt_eval_next, outside ev->mu: a record
 * that cannot be read any more is an LT_EIO failure of its task. */
static lt_buf_t *read_replay(lt_eval_t *ev, const lt_replay_t *r) {
  char err[512];
  lt_buf_t *b = NULL;
  int rc = lt__journal_read(ev->journal, r->off, &b, err, sizeof err);
  if (rc != LT_OK) b = lt__buf_fail(rc, rc == LT_EIO ? err : NULL);
  lt__buf_set_task(b, r->seq);
  return b;
}

/* spin_for_result looks for a new result in the stream without ev->mu, yielding the CPU
 * between looks, for the budget of a lone task's wait (spin.h), when the reader waits for a
 * lone task: a reader that sleeps must be woken. The caller looks at the stream again, under
 * ev->mu, whatever it saw: a result put or the input closed between its last look and the
 * lock woke nobody, since no reader was waiting then. Called and returns under ev->mu. */
static void spin_for_result(lt_eval_t *ev) {
  if (ev->pending != 1) return;
  int64_t budget = lt__spin_budget(&ev->lone, atomic_load(&ev->wake_us));
  if (budget == 0) return;
  unsigned seen = atomic_load(&ev->puts);
  pthread_mutex_unlock(&ev->mu);
  int64_t end = lt__clock_us() + budget;
  while (atomic_load(&ev->puts) == seen && lt__clock_us() < end)
    sched_yield();
  pthread_mutex_lock(&ev->mu);
}

/* woke_up notes how long a reader that slept from `slept_us` took to return after the
 * broadcast that woke it, if one came meanwhile (under ev->mu). */
static void woke_up(lt_eval_t *ev, int64_t slept_us) {
  int64_t at = atomic_load(&ev->woke_at_us);
  if (at < slept_us) return;
  atomic_store(&ev->wake_us,
               lt__spin_smooth(atomic_load(&ev->wake_us), (double)(lt__clock_us() - at)));
}

LT_API int lt_eval_next(lt_eval_t *ev, lt_buf_t **out) {
  return lt_eval_next_timeout(ev, -1, out);
}

LT_API int lt_eval_next_timeout(lt_eval_t *ev, int timeout_ms, lt_buf_t **out) {
  if (ev == NULL || out == NULL) return lt__fail_null("lt_eval_next", ev == NULL ? "ev" : "out", 0);
  *out = NULL;
  struct timespec until = lt__clock_deadline(timeout_ms);
  pthread_mutex_lock(&ev->mu);
  lt_task_t *t;
  lt_replay_t r;
  int rc = LT_OK, got;
  int64_t wait0 = 0; /* when a wait for a lone task's result began, 0: none */
  bool spun = false;
  while (!(got = take_result(ev, &t, &r))) {
    if (ev->stream_left == 0 && ev->closed) {
      rc = LT_ECLOSED;
      break;
    }
    if (ev->state != LT_EVAL_STARTED) {
      rc = LT_ESTATE; /* nothing could ever arrive */
      break;
    }
    if (timeout_ms == 0) {
      rc = LT_ETIMEDOUT;
      break;
    }
    if (!spun) {
      spun = true;
      if (ev->pending == 1) wait0 = lt__clock_us();
      spin_for_result(ev);
      continue; /* look again under the lock before sleeping */
    }
    /* A wait on a stream not closed with nothing pending may be for ever (a forgotten
     * lt_eval_close): it wakes after idle_warn_ms to say so, once. */
    bool idle = !ev->closed && ev->pending == 0 && !ev->idle_warned && ev->opts.idle_warn_ms > 0;
    struct timespec idle_until = lt__clock_deadline((int)ev->opts.idle_warn_ms);
    bool idle_first =
        idle && (timeout_ms < 0 || idle_until.tv_sec < until.tv_sec ||
                 (idle_until.tv_sec == until.tv_sec && idle_until.tv_nsec < until.tv_nsec));
    ev->result_waiters++;
    int64_t slept = lt__clock_us();
    int w = idle_first       ? pthread_cond_timedwait(&ev->cv_result, &ev->mu, &idle_until)
            : timeout_ms < 0 ? pthread_cond_wait(&ev->cv_result, &ev->mu)
                             : pthread_cond_timedwait(&ev->cv_result, &ev->mu, &until);
    ev->result_waiters--;
    woke_up(ev, slept);
    if (idle_first && w == ETIMEDOUT) {
      if (!ev->closed && ev->pending == 0 && !ev->idle_warned) {
        ev->idle_warned = true;
        lt__log(LT_LOG_WARN,
                "lt_eval_next has waited %u ms on a stream that is not closed, with no task "
                "pending: no result can come until more is submitted; call lt_eval_close "
                "after the last lt_eval_submit (this warning comes once; option "
                "idle_warn_ms)",
                (unsigned)ev->opts.idle_warn_ms);
      }
      if ((got = take_result(ev, &t, &r))) break;
      continue;
    }
    if (w == ETIMEDOUT && !(got = take_result(ev, &t, &r))) {
      rc = LT_ETIMEDOUT;
      break;
    }
    if (got) break;
  }
  if (got) ev->stream_left--;
  if (got && wait0 != 0) lt__spin_waited(&ev->lone, (double)(lt__clock_us() - wait0));
  pthread_mutex_unlock(&ev->mu);
  if (got && t == NULL) *out = read_replay(ev, &r);
  if (t != NULL) {
    *out = t->result;
    t->result = NULL;
    lt__task_free(t);
  }
  if (rc == LT_ECLOSED)
    fail(ev, rc, "lt_eval_next: the stream is closed and every result was read");
  else if (rc == LT_ESTATE)
    fail(ev, rc,
         "lt_eval_next: ev is not started (lt_eval_start or lt_eval_run_local), or its "
         "start failed: no result can come");
  else if (rc == LT_ETIMEDOUT)
    fail(ev, rc, "lt_eval_next_timeout: no result within timeout_ms %d", timeout_ms);
  return rc;
}

/* stats_text writes the stats' text into *json (the caller frees it): the evaluator's counts
 * under ev->mu, then the backend's latest published snapshot under its own lock. LT_OK or
 * LT_ENOMEM. Any thread holding no lock (the stats socket calls it on the dispatcher's). */
static int stats_text(void *self, char **json) {
  lt_eval_t *ev = self;
  lt_json_t j = {0};
  lt__json_object_open(&j, NULL);
  pthread_mutex_lock(&ev->mu);
  lt__json_u64(&j, "tasks_submitted", ev->submitted);
  lt__json_u64(&j, "tasks_completed", ev->completed);
  lt__json_u64(&j, "tasks_failed", ev->failed);
  if (ev->sreduce != NULL) lt__json_u64(&j, "combines", ev->combines);
  lt__json_u64(&j, "tasks_pending", ev->pending);
  lt__json_bool(&j, "input_closed", ev->closed);
  lt__json_u64(&j, "journal_replayed", ev->replayed);
  pthread_mutex_unlock(&ev->mu);
  if (ev->be != NULL) {
    ev->backend->stats_json(ev->be, &j);
  } else {
    lt__json_u64(&j, "instructions", 0);
    lt__json_u64(&j, "bytes_to_servers", 0);
    lt__json_u64(&j, "bytes_from_servers", 0);
    lt__json_u64(&j, "retries", 0);
    lt__json_array_open(&j, "servers");
    lt__json_array_close(&j);
  }
  lt__json_object_close(&j);
  *json = lt__json_take(&j);
  return *json != NULL ? LT_OK : LT_ENOMEM;
}

LT_API int lt_eval_stats_json(lt_eval_t *ev, char **json) {
  if (ev == NULL || json == NULL)
    return lt__fail_null("lt_eval_stats_json", ev == NULL ? "ev" : "json", 0);
  if (stats_text(ev, json) != LT_OK)
    return fail(ev, LT_ENOMEM, "lt_eval_stats_json: out of memory");
  return LT_OK;
}

static void free_task_list(lt_task_t *t) {
  while (t != NULL) {
    lt_task_t *next = t->next;
    if (t->future != NULL) {
      lt_buf_t *b = lt__buf_fail(LT_ECANCELED, NULL);
      lt__buf_set_task(b, t->seq);
      lt__future_resolve(t->future, b);
    }
    t->future = NULL;
    lt__task_free(t);
    t = next;
  }
}

LT_API void lt_eval_free(lt_eval_t *ev) {
  if (ev == NULL) return;
  if (ev->thread_started) {
    pthread_mutex_lock(&ev->mu);
    ev->stop = 1;
    pthread_mutex_unlock(&ev->mu);
    wake(ev);
    pthread_join(ev->thread, NULL);
  }
  if (ev->backend != NULL) ev->backend->destroy(ev->be);
  lt__statsock_close(ev->statsock); /* its server, the dispatcher, was joined */
  lt__hosts_watch_free(ev->hosts_watch);
  for (size_t i = 0; i < ev->nprocs; i++)
    lt__proc_stop(&ev->procs[i], 5000);
  free(ev->procs);
  free_task_list(ev->intake_head);
  free_task_list(ev->ready_head);
  lt_task_t *t, *tmp;
  HASH_ITER(hh, ev->ordered, t, tmp) {
    HASH_DEL(ev->ordered, t);
    lt__task_free(t);
  }
  for (size_t i = 0; i < ev->nhosts; i++)
    free(ev->hosts[i]);
  free(ev->hosts);
  free(ev->host_fds);
  free(ev->host_gone);
  free(ev->host_keys);
  if (ev->wake_fd >= 0) close(ev->wake_fd);
  lt__replayq_clear(&ev->replays);
  lt__journal_close(ev->journal);
  lt__sreduce_free(ev->sreduce);
  lt__template_free(ev->tmpl);
  lt_skel_free(ev->program);
  free(lt__strbuf_take(&ev->start_lacks));
  lt__options_clear(&ev->opts);
  pthread_mutex_destroy(&ev->mu);
  pthread_cond_destroy(&ev->cv_result);
  pthread_cond_destroy(&ev->cv_space);
  pthread_cond_destroy(&ev->cv_start);
  free(ev);
}
