/* eval.c: the public evaluator's life cycle (eval_state.h): lt_eval_new, options, starting
 * the dispatcher (lt_eval_start: the hosts option, a check of the kernels, the stats socket,
 * the wait for the first welcome) or the sequential evaluator (lt_eval_run_local), the stats,
 * lt_eval_free, and the door a backend reaches the evaluator through, whose calls live with
 * their concern: eval_intake.c, eval_results.c, eval_hosts.c. The tasks run in a backend on
 * its own thread (the dispatcher, scheduler.c, or the sequential evaluator, local.c); the two
 * meet under ev->mu. Only the evaluator's four files know struct lt_eval. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>

#include "clock.h"
#include "buf.h"
#include "eval_state.h"
#include "future.h"
#include "hosts.h"
#include "json.h"
#include "log.h"
#include "oid.h"
#include "ship.h"

static int stats_text(void *self, char **json);

uint64_t lt__eval_client_id(const lt_eval_t *ev) {
  return ev->client_id;
}

/* The door a backend reaches the evaluator through (backend.h). */
static const lt_eval_door_t door = {
    .take = lt__eval_door_take,
    .deliver = lt__eval_door_deliver,
    .woken = lt__eval_door_woken,
    .await_wake = lt__eval_door_await_wake,
    .stopping = lt__eval_door_stopping,
    .input_closed = lt__eval_door_input_closed,
    .hosts = lt__eval_door_hosts,
    .hosts_free = lt__eval_door_hosts_free,
    .poll_hosts = lt__eval_door_poll_hosts,
    .host_answered = lt__eval_door_host_answered,
    .host_lacks = lt__eval_door_host_lacks,
    .host_auth_failed = lt__eval_door_host_auth_failed,
};

/* ---- the public API ---------------------------------------------------------------------- */

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
    return lt__eval_fail(NULL, LT_ENOMEM, "lt_eval_new: out of memory");
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
               : lt__eval_fail(
                     NULL, LT_EINVAL,
                     "lt_eval_new: program is no valid skeleton tree (not made by the builders "
                     "or lt_skel_parse, or changed since)");
  if (rc == LT_OK && lt__skel_reduces(program) && (rc = lt__sreduce_new(&ev->sreduce)) != LT_OK)
    lt__eval_fail(NULL, rc, "lt_eval_new: out of memory");
  if (rc == LT_OK && (rc = lt__options_from_env(&ev->opts)) != LT_OK) {
    lt__eval_fail(NULL, rc, "lt_eval_new: the environment: %s", ev->opts.error);
    lt__log(LT_LOG_ERROR, "%s", ev->opts.error); /* the evaluator is gone: say it here */
  }
  if (rc == LT_OK) {
    ev->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ev->wake_fd < 0)
      rc = lt__eval_fail(NULL, LT_EIO, "lt_eval_new: cannot make an eventfd: %s", strerror(errno));
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
    return lt__eval_fail(ev, LT_ESTATE, "option '%.200s' set after start",
                         key != NULL ? key : "(null)");
  return lt__options_set(&ev->opts, key, value);
}

LT_API const char *lt_eval_error(const lt_eval_t *ev) {
  return ev != NULL ? ev->opts.error : "";
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
    rc = lt__eval_fail(
        ev, LT_ENOKERNEL,
        "lt_eval_start: %d kernel(s) of the program are not in their module, nothing was "
        "sent:%s (looked in modules=%s; lithium check EXPR --modules DIR checks a "
        "program)",
        m.n, text != NULL ? text : "", ev->opts.modules);
    lt__log(LT_LOG_ERROR, "%s", lt_last_error());
  } else if (rc < 0) {
    rc = lt__eval_fail(ev, rc, "lt_eval_start: cannot check the kernels in modules=%s: %s",
                       ev->opts.modules, lt_strerror(rc));
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
  if (rc != LT_OK) return lt__eval_fail(ev, rc, "lt_eval_start: option stats_socket: %s", err);
  return LT_OK;
}

LT_API int lt_eval_start(lt_eval_t *ev) {
  if (ev == NULL) return lt__fail_null("lt_eval_start", "ev", 0);
  pthread_mutex_lock(&ev->mu);
  int jrc = ev->state == LT_EVAL_NEW ? lt__eval_open_journal(ev) : LT_OK;
  pthread_mutex_unlock(&ev->mu);
  if (jrc != LT_OK) return lt__eval_fail(ev, jrc, "lt_eval_start: %s", lt_last_error());
  pthread_mutex_lock(&ev->mu);
  int state = ev->state;
  size_t nhosts = ev->nhosts;
  pthread_mutex_unlock(&ev->mu);
  if (state != LT_EVAL_NEW)
    return lt__eval_fail(ev, LT_ESTATE, "lt_eval_start: ev was started already%s",
                         state == LT_EVAL_FAILED ? " and failed: make a new evaluator" : "");
  if (ev->opts.hosts != NULL) {
    int rc = lt__eval_use_hosts(ev);
    if (rc != LT_OK) return rc;
    pthread_mutex_lock(&ev->mu);
    nhosts = ev->nhosts;
    pthread_mutex_unlock(&ev->mu);
  }
  if (nhosts == 0)
    return lt__eval_fail(ev, LT_ENOSERVER,
                         "lt_eval_start: no server to start with: " NO_SERVER_HINT
                         ". Nothing started: tasks submitted wait for a later lt_eval_start");
  if (lt__options_check(&ev->opts) != LT_OK)
    return lt__eval_fail(ev, LT_EINVAL, "%s", ev->opts.error); /* as lt_eval_set says it */
  lt__template_free(ev->tmpl);
  int rc = lt__template_compile(&ev->tmpl, ev->program, ev->opts.normal_form);
  if (rc != LT_OK)
    return lt__eval_fail(ev, rc, "lt_eval_start: cannot compile the program: %s", lt_strerror(rc));

  rc = local_kernels_check(ev);
  if (rc != LT_OK) return rc;
  rc = open_stats_socket(ev);
  if (rc != LT_OK) return rc;

  rc = start_backend(ev, &lt__sched_backend);
  if (rc != LT_OK)
    return lt__eval_fail(ev, rc, "lt_eval_start: cannot start the dispatcher: %s", lt_strerror(rc));
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
  if (ready > 0 && complete <= 0) return lt__eval_modules_missing(ev);
  if (ready == 0 && auth > 0) {
    lt__log(LT_LOG_ERROR, "no server accepted us: authentication failed (see above)");
    return lt__eval_fail(
        ev, LT_EAUTH,
        "lt_eval_start: none of the %zu servers accepted us: authentication failed "
        "(the log names each; see options curve_key and curve_server)",
        nhosts);
  }
  if (ready == 0) {
    lt__log(LT_LOG_ERROR, "no server answered");
    return lt__eval_fail(
        ev, LT_ENOSERVER,
        "lt_eval_start: none of the %zu servers answered within connect_timeout_ms "
        "(%u ms): are they running (lithium status ENDPOINT)? Else " NO_SERVER_HINT,
        nhosts, (unsigned)ev->opts.connect_timeout_ms);
  }
  lt__eval_wake(ev); /* tasks submitted before start */
  return LT_OK;
}

LT_API int lt_eval_run_local(lt_eval_t *ev) {
  if (ev == NULL) return lt__fail_null("lt_eval_run_local", "ev", 0);
  if (ev->state != LT_EVAL_NEW)
    return lt__eval_fail(ev, LT_ESTATE, "lt_eval_run_local: ev was started already");
  pthread_mutex_lock(&ev->mu);
  int jrc = lt__eval_open_journal(ev);
  pthread_mutex_unlock(&ev->mu);
  if (jrc != LT_OK) return lt__eval_fail(ev, jrc, "lt_eval_run_local: %s", lt_last_error());
  lt__template_free(ev->tmpl);
  int rc = lt__template_compile(&ev->tmpl, ev->program, ev->opts.normal_form);
  if (rc != LT_OK)
    return lt__eval_fail(ev, rc, "lt_eval_run_local: cannot compile the program: %s",
                         lt_strerror(rc));
  if (ev->opts.stats_socket != NULL)
    lt__log(LT_LOG_WARN, "option stats_socket: lt_eval_run_local does not serve it (the "
                         "dispatcher of lt_eval_start does)");
  rc = start_backend(ev, &lt__local_backend);
  if (rc == LT_EINVAL)
    return lt__eval_fail(ev, rc,
                         "lt_eval_run_local: option modules '%s' is not a readable directory (the "
                         "kernels' modules are loaded from it)",
                         ev->opts.modules != NULL ? ev->opts.modules : "");
  if (rc != LT_OK)
    return lt__eval_fail(ev, rc, "lt_eval_run_local: cannot start the sequential evaluator: %s",
                         lt_strerror(rc));
  pthread_mutex_lock(&ev->mu);
  ev->state = LT_EVAL_STARTED;
  pthread_mutex_unlock(&ev->mu);
  lt__eval_wake(ev); /* tasks submitted before */
  return LT_OK;
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
    return lt__eval_fail(ev, LT_ENOMEM, "lt_eval_stats_json: out of memory");
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
    lt__eval_wake(ev);
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
  lt_task_t *t;
  while ((t = lt__reorder_pop(&ev->ordered)) != NULL)
    lt__task_free(t);
  lt__reorder_free(&ev->ordered);
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
