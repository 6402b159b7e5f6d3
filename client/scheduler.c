/* scheduler.c: the dispatcher thread's loop (DESIGN.md 7a, "loop"). It owns the ZeroMQ
 * context and the server table, and runs each turn in fixed phases: take intake (new tasks
 * and hosts), read what the servers sent (session messages to links.c, completions and
 * values to jobs.c and fetch.c), reap the servers marked dead, run the policies' hooks and
 * apply their requests (requests.c), dispatch (dispatch.c), the tick (links' heartbeats,
 * the policies' on_tick), flush releases, publish stats, deliver results. Nothing below
 * calls back into the loop. Object ids are named by the client ({client id, instruction
 * seq}), so every output has its reference when it is dispatched. The loop also serves the
 * stats socket (stats_socket.h), after each turn. Dispatcher thread only, except the stats
 * lock. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "log.h"
#include "sched_failures.h"
#include "sched_jobs.h"
#include "sched_links.h"
#include "sched_loop.h"
#include "sched_records.h"
#include "sched_servers.h"
#include "scheduler.h"
#include "vec.h"

static void sched_free(void *self);

/* sched_new creates the dispatcher state for the evaluator of `env`. Evaluator thread. */
static int sched_new(void **out, const lt_backend_env_t *env) {
  lt_sched_t *s = calloc(1, sizeof *s);
  if (s == NULL) return LT_ENOMEM;
  const lt_options_t *o = env->opts;
  s->ev = env->ev;
  s->door = env->door;
  s->opts = o;
  s->tmpl = env->tmpl;
  s->tmpl_recurs = lt__template_recurs(env->tmpl);
  s->client_id = env->client_id;
  s->secret = env->secret;
  s->wake_fd = env->wake_fd;
  s->initial = env->initial_hosts;
  s->statsock = env->statsock;
  /* Lookahead admits the thread window per server until the server's first completion
   * tells its speed (a slow one given more at once would hold it all); pacing adds the
   * depth that covers the round trip from then on. Plain Lithium keeps one. */
  s->first_cap = o->lookahead ? o->max_threads : 1;
  s->placement = lt__placement_of(o);
  s->next_seq = (uint64_t)LT_MAX_PARTS + 1;
  lt__codec_limits_default(&s->limits);
  lt__stats_init(&s->stats);
  s->pace_memo = calloc(1, sizeof *s->pace_memo); /* none: pace.c looks everything up */
  if (env->net != NULL) {
    s->net = *env->net;
  } else {
    s->zctx = zmq_ctx_new();
    if (s->zctx == NULL) {
      sched_free(s);
      return LT_EIO;
    }
    s->net = (lt_net_t){&lt__net_zmq, s->zctx};
  }
  int rc = lt__policies_init(s);
  if (rc == LT_OK && o->trace != NULL) rc = lt__trace_open(&s->trace, o->trace);
  if (rc == LT_OK)
    rc = lt__ship_new(&s->ship, o->modules, s->tmpl->kernels, s->tmpl->nkernels, o->ship_modules);
  if (rc != LT_OK) {
    sched_free(s);
    return rc;
  }
  *out = s;
  return LT_OK;
}

/* sched_free frees the state after the thread was joined; accepts NULL. */
static void sched_free(void *self) {
  lt_sched_t *s = self;
  if (s == NULL) return;
  lt__trace_close(s->trace);
  lt__sched_fetches_free(s);
  lt__ship_free(s->ship);
  if (s->zctx != NULL) zmq_ctx_term(s->zctx);
  lt__stats_free(&s->stats);
  free(s->pace_memo);
  lt__policies_free(s);
  for (size_t i = 0; i < s->capsrv && s->srv != NULL; i++) {
    free(s->srv[i].relq.ids);
    lt__fail_forget(s, i);
  }
  free(s->srv);
  lt__links_free(s);
  lt__sched_pools_clear(s);
  free(s);
}

/* ---- reading ---------------------------------------------------------------------- */

static void on_message(lt_sched_t *s, size_t idx, const lt_msg_t *m) {
  lt__trace_message(s->trace, s, idx, m);
  if (lt__link_on_message(s, idx, m)) return;
  if (m->type == LT_MSG_VALUE) {
    lt__sched_on_value(s, idx, m);
    return;
  }
  char why[160];
  if (!lt__done_check(s, idx, m, why, sizeof why)) {
    lt__server_misbehaved(s, idx, why); /* none of its reports is taken */
    return;
  }
  for (uint32_t i = 0; i < m->u.done.ncompl && !lt__server_gone(s, idx); i++)
    lt__sched_on_completion(s, idx, &m->u.done.compl [i], m);
}

/* read_server reads what one server sent, at most READ_BUDGET messages a turn so that one
 * busy server cannot keep the loop from the others (zmq_poll reports the rest next turn). */
#define READ_BUDGET 256
static void read_server(lt_sched_t *s, size_t idx) {
  for (int budget = READ_BUDGET; budget > 0 && !lt__server_gone(s, idx); budget--) {
    lt_conn_t *c = &s->srv[idx].conn;
    if (c->sock == NULL) return;
    int rc = lt__conn_recv(c, &s->rx, &s->limits, lt__clock_ms());
    if (rc == LT_EAGAIN) return;
    if (rc == LT_EPROTO) { /* a shape the protocol forbids: the server, not the client */
      lt__server_misbehaved(s, idx, "a malformed message");
      return;
    }
    if (rc != LT_OK) {
      lt__log(LT_LOG_WARN, "server %s: dropped a malformed message (%s)", c->endpoint,
              lt_strerror(rc));
      if (rc == LT_EIO) return;
      continue;
    }
    on_message(s, idx, &s->rx.msg);
    lt__rx_clear(&s->rx);
  }
}

/* ---- reaping ---------------------------------------------------------------------- */

/* reap_one ends the session of server idx, marked dead: its link closes, and when the
 * session had been welcomed its records end as lost (placed again, or their tasks
 * recomputed or failed), results being fetched from it are recomputed, and tasks elsewhere
 * waiting for one of its values are recomputed now rather than at their fetch timeout. */
static void reap_one(lt_sched_t *s, size_t idx) {
  lt__policies_server_lost(s, idx);
  if (!lt__link_close(s, idx)) return;
  lt__entry_ended(s, idx);
  lt__sched_fetches_lost(s, idx);
  const char *ep = s->srv[idx].conn.endpoint, *why = s->srv[idx].slot.why;
  lt_instr_rec_t *r;
  while ((r = s->srv[idx].slot.out) != NULL)
    lt__sched_end(s, r, LT_END_LOST, NULL, NULL, LT_ELOST, why[0] ? why : ep);
  lt_instr_rec_t *tmp;
  HASH_ITER(hh, s->inflight, r, tmp) {
    if (lt__rec_stale(r)) continue;
    for (uint32_t i = 0; i < r->nins; i++) {
      if (r->ins[i].value == NULL && lt__holder(s, &r->ins[i]) == (int32_t)idx) {
        lt__sched_restart_lost(s, r->job, (long)idx, "a value it needed was on a server that died");
        break;
      }
    }
  }
}

/* reap ends the sessions of the servers marked dead since the last reap. */
static void reap(lt_sched_t *s) {
  for (size_t i = 0; i < s->nsrv; i++)
    if (s->srv[i].gone) reap_one(s, i);
}

/* fail_unplaceable fails queued instructions when no server has been able to take work
 * for connect_timeout_ms (a restarting server gets that long to come back). */
static void fail_unplaceable(lt_sched_t *s) {
  if (s->fire_head == NULL || lt__servers_takers(s, 0) > 0) {
    s->none_since = 0;
    return;
  }
  int64_t now = lt__clock_ms();
  if (s->none_since == 0) s->none_since = now;
  if (now - s->none_since < (int64_t)s->opts->connect_timeout_ms) return;
  lt_instr_rec_t *r;
  while ((r = s->fire_head) != NULL)
    lt__sched_end(s, r, LT_END_ABORTED, NULL, NULL, LT_ENOSERVER, "no live server to run the task");
}

/* ---- the loop --------------------------------------------------------------------- */

static void shutdown_all(lt_sched_t *s) {
  lt__sched_fail_all(s, LT_ECANCELED, "evaluator freed");
  lt__sched_deliver(s);
  lt__links_close_all(s);
  s->nsrv = 0;
  lt__stats_publish(s);
  lt__rx_free(&s->rx);
}

/* poll_items fills items[] (wake fd, then each server's socket, its monitor and its
 * spawned process's stdout) and returns how many there are. */
static size_t poll_items(lt_sched_t *s, zmq_pollitem_t *items) {
  items[0] = (zmq_pollitem_t){.fd = s->wake_fd, .events = ZMQ_POLLIN};
  size_t n = s->nsrv;
  for (size_t i = 0; i < n; i++) {
    lt_conn_t *c = &s->srv[i].conn;
    zmq_pollitem_t none = {.fd = -1};
    items[1 + i] =
        c->sock != NULL ? (zmq_pollitem_t){.socket = c->sock, .events = ZMQ_POLLIN} : none;
    items[1 + n + i] =
        c->mon != NULL ? (zmq_pollitem_t){.socket = c->mon, .events = ZMQ_POLLIN} : none;
    int fd = s->srv[i].slot.watch_fd;
    items[1 + 2 * n + i] = fd >= 0 ? (zmq_pollitem_t){.fd = fd, .events = ZMQ_POLLIN} : none;
  }
  return 1 + 3 * n;
}

/* run_policies runs the policies' hooks of this turn and applies what they ask. */
static void run_policies(lt_sched_t *s, int64_t now, int ticked) {
  if (ticked || s->freed) {
    /* A window that grew, or a completion, lets more of what is out run. */
    for (size_t i = 0; i < s->nsrv; i++)
      lt__sched_mark_running(s, i, now);
  }
  if (s->freed) lt__policies_idle(s, now);
  if (ticked) lt__policies_tick(s, now);
  s->freed = 0;
  lt__sched_apply_requests(s);
  reap(s);
}

void lt__sched_start(lt_sched_t *s) {
  lt__links_open_new(s);
  s->t0_ms = lt__clock_ms();
  s->next_tick = s->t0_ms + LT_PING_MS; /* pings and the throttle start at once */
}

int lt__sched_turn(lt_sched_t *s, const lt_turn_in_t *in) {
  lt_eval_t *ev = s->ev;
  /* Intake: new tasks and hosts. */
  if (in->woken) {
    s->door->woken(ev);
    lt__links_open_new(s);
    lt__sched_take_intake(s);
  }
  /* Read: session messages, completions, values; monitors and spawned servers. */
  const zmq_pollitem_t *it = in->items;
  size_t np = it != NULL ? in->npolled : s->nsrv;
  for (size_t i = 0; i < np; i++) {
    if (it == NULL || (it[1 + i].revents & ZMQ_POLLIN)) read_server(s, i);
    if (it == NULL || (it[1 + np + i].revents & ZMQ_POLLIN)) lt__link_watch(s, i);
    if (it != NULL && (it[1 + 2 * np + i].revents & (ZMQ_POLLIN | ZMQ_POLLERR)))
      lt__link_watch_child(s, i);
  }
  int64_t now = lt__clock_ms();
  lt__sched_fetch_results(s); /* tasks that ended on a value left on a server */
  /* What the policies asked while messages were read (a welcome's crash report, a
   * quarantine's limit) holds before anything is dispatched. */
  lt__sched_apply_requests(s);
  /* hosts=DIR: servers that announced since the last look join now. */
  if (s->door->poll_hosts(ev, now)) lt__links_open_new(s);
  /* Reap what was found dead, then the tick: heartbeats and greetings. */
  reap(s);
  int ticked = now >= s->next_tick;
  if (ticked) {
    lt__links_tick(s, now);
    int64_t period = s->opts->heartbeat_ms / 4 + 1;
    s->next_tick = now + (period < LT_PING_MS ? period : LT_PING_MS);
    reap(s);
    lt__entries_reclaim(s); /* sessions that ended, once nothing refers to them */
  }
  /* Dispatch, then the policies (they see this turn's dispatch and completions). */
  lt__sched_dispatch(s);
  reap(s);
  run_policies(s, now, ticked);
  fail_unplaceable(s);
  lt__servers_flush_releases(s);
  reap(s);
  /* Published before the results go: a reader that saw a result sees its counts. */
  lt__stats_publish(s);
  lt__sched_deliver(s);
  lt__trace_turn(s->trace, s);
  return s->door->stopping(ev);
}

void lt__sched_stop(lt_sched_t *s) {
  shutdown_all(s);
}

/* sched_main is the dispatcher thread's body (arg: the lt_sched_t); it runs until the
 * evaluator stops it and wakes it: a wait in zmq_poll, then a turn. */
static void *sched_main(void *arg) {
  lt_sched_t *s = arg;
  lt__sched_start(s);
  zmq_pollitem_t *items = NULL;
  size_t capitems = 0;
  for (;;) {
    if (LT_VEC_RESERVE(items, capitems, 3 * s->nsrv + 1 + LT_STATSOCK_ITEMS) != LT_OK) break;
    size_t npolled = s->nsrv;
    size_t nitems = poll_items(s, items);
    zmq_pollitem_t *stats_items = items + nitems;
    if (s->statsock != NULL) {
      lt__statsock_items(s->statsock, stats_items);
      nitems += LT_STATSOCK_ITEMS;
    }
    long timeout = (long)(s->next_tick - lt__clock_ms());
    if (timeout < 0 || s->door->await_wake(s->ev)) timeout = 0;
    int n = zmq_poll(items, (int)nitems, timeout);
    if (n < 0 && errno != EINTR) {
      lt__log(LT_LOG_ERROR, "dispatcher: zmq_poll: %s", zmq_strerror(errno));
      break;
    }
    if (n < 0) n = 0;
    for (size_t i = 0; n == 0 && i < nitems; i++)
      items[i].revents = 0;
    lt_turn_in_t in = {
        .woken = n > 0 && (items[0].revents & ZMQ_POLLIN), .items = items, .npolled = npolled};
    if (lt__sched_turn(s, &in)) break;
    /* Readers of the stats get the snapshot this turn published, without a wait. */
    if (s->statsock != NULL) lt__statsock_serve(s->statsock, stats_items, lt__clock_ms());
  }
  free(items);
  lt__sched_stop(s);
  return NULL;
}

const lt_backend_ops_t lt__sched_backend = {
    .create = sched_new,
    .run = sched_main,
    .stats_json = lt__sched_stats_json,
    .destroy = sched_free,
};
