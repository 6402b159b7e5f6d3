/* deadline.c: the deadline timer (see deadline.h). It asks the executor which jobs run now
 * and task.c what each one's deadline means; it owns only the timer and the way out of a
 * process whose threads are stuck for good. */
#include "deadline.h"

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
  lt__crashlog_leaving();
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

void lt__deadline_start(lt_server_t *srv) {
  uv_timer_init(&srv->loop, &srv->deadline_timer);
  srv->deadline_timer.data = srv;
  uv_timer_start(&srv->deadline_timer, on_tick, LT_DEADLINE_TICK_MS, LT_DEADLINE_TICK_MS);
  srv->deadline_started = true;
}

void lt__deadline_close(lt_server_t *srv) {
  if (!srv->deadline_started) return;
  uv_close((uv_handle_t *)&srv->deadline_timer, NULL);
  srv->deadline_started = false;
}
