/* deadline.c: the deadline timer (see deadline.h). It asks the executor which jobs run now
 * and task.c what each one's deadline means; it owns only the timer and the way out of a
 * process whose threads are stuck for good. */
#include "deadline.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include "clock.h"
#include "conns.h"
#include "crashlog.h"
#include "log.h"
#include "task.h"

/* leave ends the worker process now, whatever its threads are doing: running kernels never
 * return, so nothing may wait for them. Sent messages get a moment to leave. */
static void leave(lt_server_t *srv, int code) {
  if (srv->router != NULL) {
    lt__conns_leave(srv);
    int linger = 500;
    zmq_setsockopt(srv->router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(srv->router);
    srv->router = NULL;
    /* The ZAP thread's socket must close too, or the context's end waits for ever. */
    lt__zap_stop(srv->zap);
    srv->zap = NULL;
    zmq_ctx_term(srv->zctx);
  }
  fflush(NULL);
  _exit(code);
}

static void on_tick(uv_timer_t *h) {
  lt_server_t *srv = h->data;
  if (srv->closing || srv->ex == NULL) return;
  uint64_t now = lt__executor_now_us();
  if (srv->stopping) {
    if (srv->stop_at_us == 0) {
      srv->stop_at_us = now;
    } else if (now - srv->stop_at_us > (uint64_t)LT_STOP_MAX_MS * 1000u) {
      lt__log(LT_LOG_WARN, "still %u instructions on the executor %d s after the stop: exiting",
              srv->inexec, LT_STOP_MAX_MS / 1000);
      leave(srv, 1);
    }
  }
  lt_job_running_t runs[LT_SRV_MAX_THREADS];
  uint32_t n = lt__executor_running(srv->ex, runs, LT_SRV_MAX_THREADS);
  bool recycle = false;
  for (uint32_t i = 0; i < n; i++)
    if (lt__task_deadline(srv, &runs[i], now, LT_DEADLINE_RECYCLE_MS)) recycle = true;
  srv->settle(srv);
  if (recycle) {
    lt__log(LT_LOG_WARN,
            "a kernel overran its deadline by more than %d ms: recycling the "
            "worker process%s",
            LT_DEADLINE_RECYCLE_MS, lt__crashlog_attached() ? "" : " (exit status 75)");
    leave(srv, LT_EXIT_RECYCLE);
  }
}

/* The sentinel: the thread that watches the loop thread for a kernel stuck on it. */
struct lt_sentinel {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* on CLOCK_MONOTONIC */
  bool stop;
  lt_executor_t *ex;
};

/* sentinel_main looks every tick at what the loop thread runs; a kernel there for
 * LT_INLINE_STUCK_MS ends the process as leave() would, without its sockets: they belong to
 * the stuck thread. */
static void *sentinel_main(void *arg) {
  struct lt_sentinel *st = arg;
  pthread_mutex_lock(&st->mu);
  while (!st->stop) {
    struct timespec until = lt__clock_deadline(LT_DEADLINE_TICK_MS);
    pthread_cond_timedwait(&st->cv, &st->mu, &until);
    uint64_t since = lt__executor_inline_since(st->ex);
    if (since == 0 || lt__executor_now_us() - since <= (uint64_t)LT_INLINE_STUCK_MS * 1000u)
      continue;
    lt__log(LT_LOG_WARN,
            "a kernel has held the loop thread for more than %d ms: recycling the worker "
            "process%s",
            LT_INLINE_STUCK_MS, lt__crashlog_attached() ? "" : " (exit status 75)");
    fflush(NULL);
    _exit(LT_EXIT_RECYCLE);
  }
  pthread_mutex_unlock(&st->mu);
  return NULL;
}

/* sentinel_start starts the sentinel over executor ex; NULL (and a logged error) when it
 * cannot: the server then runs without it, as before inline runs. */
static struct lt_sentinel *sentinel_start(lt_executor_t *ex) {
  struct lt_sentinel *st = calloc(1, sizeof *st);
  if (st == NULL) return NULL;
  st->ex = ex;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&st->cv, &attr);
  pthread_condattr_destroy(&attr);
  pthread_mutex_init(&st->mu, NULL);
  if (pthread_create(&st->thread, NULL, sentinel_main, st) != 0) {
    lt__log(LT_LOG_ERROR, "cannot start the loop thread's sentinel");
    pthread_cond_destroy(&st->cv);
    pthread_mutex_destroy(&st->mu);
    free(st);
    return NULL;
  }
  return st;
}

static void sentinel_stop(struct lt_sentinel *st) {
  if (st == NULL) return;
  pthread_mutex_lock(&st->mu);
  st->stop = true;
  pthread_cond_signal(&st->cv);
  pthread_mutex_unlock(&st->mu);
  pthread_join(st->thread, NULL);
  pthread_cond_destroy(&st->cv);
  pthread_mutex_destroy(&st->mu);
  free(st);
}

void lt__deadline_start(lt_server_t *srv) {
  uv_timer_init(&srv->loop, &srv->deadline_timer);
  srv->deadline_timer.data = srv;
  uv_timer_start(&srv->deadline_timer, on_tick, LT_DEADLINE_TICK_MS, LT_DEADLINE_TICK_MS);
  srv->deadline_started = true;
  srv->sentinel = sentinel_start(srv->ex);
}

void lt__deadline_close(lt_server_t *srv) {
  if (!srv->deadline_started) return;
  sentinel_stop(srv->sentinel);
  srv->sentinel = NULL;
  uv_close((uv_handle_t *)&srv->deadline_timer, NULL);
  srv->deadline_started = false;
}
