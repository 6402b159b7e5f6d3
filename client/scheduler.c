/* scheduler.c: the dispatcher thread's loop. It owns the ZeroMQ context and one
 * connection per server; each turn it takes new tasks and hosts, reads every message that
 * arrived, runs heartbeats and dispatches (dispatch.c); jobs.c applies completions. Object
 * ids are named by the client ({client id, instruction seq}), so every output has its
 * reference when it is dispatched. Dispatcher thread only, except the stats lock. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lithium/error.h>
#include "buf.h"
#include "log.h"
#include "sched_internal.h"
#include "scheduler.h"
#include "json.h"

int64_t lt__sched_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t lt__sched_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int lt__sched_new(lt_sched_t **out, lt_eval_t *ev) {
  lt_sched_t *s = calloc(1, sizeof *s);
  if (s == NULL) return LT_ENOMEM;
  s->ev = ev;
  /* Lookahead admits the thread window per server until the server's first completion
   * tells its speed (a slow one given more at once would hold it all); pacing adds the
   * depth that covers the round trip from then on. Plain Lithium keeps one. */
  s->window = ev->opts.lookahead ? ev->opts.max_threads : 1;
  s->next_seq = (uint64_t)LT_MAX_PARTS + 1;
  lt__codec_limits_default(&s->limits);
  pthread_mutex_init(&s->stats_mu, NULL);
  s->zctx = zmq_ctx_new();
  if (s->zctx == NULL) {
    lt__sched_free(s);
    return LT_EIO;
  }
  int rc = ev->opts.trace != NULL ? lt__trace_open(&s->trace, ev->opts.trace) : LT_OK;
  if (rc != LT_OK) {
    lt__sched_free(s);
    return rc;
  }
  *out = s;
  return LT_OK;
}

void lt__sched_free(lt_sched_t *s) {
  if (s == NULL) return;
  lt__trace_close(s->trace);
  if (s->zctx != NULL) zmq_ctx_term(s->zctx);
  pthread_mutex_destroy(&s->stats_mu);
  for (size_t i = 0; i < s->capconns && s->relq != NULL; i++)
    free(s->relq[i].ids);
  free(s->relq);
  free(s->admitted);
  free(s->pace);
  free(s->conns);
  free(s);
}

/* ---- connections ------------------------------------------------------------------ */

static void open_new_hosts(lt_sched_t *s) {
  lt_eval_t *ev = s->ev;
  pthread_mutex_lock(&ev->mu);
  while (s->nconns < ev->nhosts) {
    if (s->nconns == s->capconns) {
      size_t cap = s->capconns ? s->capconns * 2 : 8;
      lt_conn_t *c = realloc(s->conns, cap * sizeof *c);
      if (c != NULL) s->conns = c;
      relq_t *q = realloc(s->relq, cap * sizeof *q);
      if (q != NULL) s->relq = q;
      uint32_t *a = realloc(s->admitted, cap * sizeof *a);
      if (a != NULL) s->admitted = a;
      pace_t *pc = realloc(s->pace, cap * sizeof *pc);
      if (pc != NULL) s->pace = pc;
      if (c == NULL || q == NULL || a == NULL || pc == NULL) break;
      memset(q + s->capconns, 0, (cap - s->capconns) * sizeof *q);
      memset(a + s->capconns, 0, (cap - s->capconns) * sizeof *a);
      s->capconns = cap;
    }
    lt_conn_t *c = &s->conns[s->nconns];
    lt__pace_init(&s->pace[s->nconns], s->window, &ev->opts, lt__sched_now_ms());
    const char *ep = ev->hosts[s->nconns];
    s->nconns++;
    int rc = lt__conn_open(c, s->zctx, ep, ev->client_id, ev->opts.lazy ? ev->opts.inline_max : 0,
                           ev->tmpl->kernels, ev->tmpl->nkernels, lt__sched_now_ms());
    if (rc != LT_OK) {
      lt__log(LT_LOG_WARN, "server %s: cannot open (%s)", ep, lt_strerror(rc));
      c->state = LT_CONN_DEAD;
      if (c->endpoint == NULL) c->endpoint = strdup(ep);
      if (s->nconns <= s->initial) ev->start_waiting--;
      pthread_cond_broadcast(&ev->cv_start);
    }
  }
  pthread_mutex_unlock(&ev->mu);
}

/* start_answered counts an initial host out of lt_eval_start's wait. */
static void start_answered(lt_sched_t *s, size_t idx, int ready) {
  if (idx >= s->initial) return;
  lt_eval_t *ev = s->ev;
  pthread_mutex_lock(&ev->mu);
  ev->start_waiting--;
  ev->start_ready += ready;
  pthread_cond_broadcast(&ev->cv_start);
  pthread_mutex_unlock(&ev->mu);
}

/* lt__sched_conn_dead marks a server dead and hands its instructions to jobs.c, which
 * re-queues them elsewhere or fails their tasks. */
void lt__sched_conn_dead(lt_sched_t *s, size_t idx, const char *why) {
  lt_conn_t *c = &s->conns[idx];
  if (c->state == LT_CONN_DEAD) return;
  lt__trace_server_lost(s->trace, s, idx, why);
  int was_hello = c->state == LT_CONN_HELLO;
  lt__log(LT_LOG_WARN, "server %s is dead: %s", c->endpoint, why);
  c->state = LT_CONN_DEAD;
  /* A dead link is closed at once: nothing more is read from it or sent to it. */
  if (c->sock != NULL) zmq_close(c->sock);
  c->sock = NULL;
  s->relq[idx].n = 0;
  if (was_hello) start_answered(s, idx, 0);
  instr_rec_t *r, *tmp;
  HASH_ITER(hh, s->inflight, r, tmp) {
    if (r->conn != (int)idx) continue;
    HASH_DEL(s->inflight, r);
    c->inflight--;
    lt__sched_unadmit(s, r, idx);
    lt__sched_cancel_answered(s, r, LT_ELOST);
    lt__sched_lost(s, r, c->endpoint, why);
  }
  /* Instructions elsewhere that wait for a value of the dead server would wait for their
   * server's fetch timeout: their tasks are recomputed now. */
  HASH_ITER(hh, s->inflight, r, tmp) {
    if (lt__sched_stale(r)) continue;
    for (uint32_t i = 0; i < r->nins; i++) {
      if (r->ins[i].value == NULL && r->ins[i].holder == (int32_t)idx) {
        lt__sched_restart(s, r->job, "a value it needed was on a server that died");
        break;
      }
    }
  }
}

static int live_servers(const lt_sched_t *s) {
  int n = 0;
  for (size_t i = 0; i < s->nconns; i++)
    n += s->conns[i].state != LT_CONN_DEAD;
  return n;
}

static void on_message(lt_sched_t *s, size_t idx, const lt_msg_t *m) {
  lt_conn_t *c = &s->conns[idx];
  lt__trace_message(s->trace, s, idx, m);
  if (m->has_load) {
    c->load = m->load;
    lt__pace_load(&s->pace[idx], &m->load);
  }
  switch (m->type) {
  case LT_MSG_WELCOME:
    if (c->state != LT_CONN_HELLO) break;
    if (m->u.welcome.version != LT_PROTO_VERSION) {
      lt__sched_conn_dead(s, idx, "protocol version mismatch");
      break;
    }
    free(c->server_id);
    c->server_id = strdup(m->u.welcome.server_id);
    c->threads = m->u.welcome.threads;
    c->speed = m->u.welcome.speed;
    s->pace[idx].workers = c->threads;
    if (m->u.welcome.cores > 0) s->pace[idx].cores = m->u.welcome.cores;
    c->state = LT_CONN_READY;
    lt__log(LT_LOG_INFO, "server %s (%s) ready, %u threads", c->endpoint, m->u.welcome.server_id,
            c->threads);
    start_answered(s, idx, 1);
    break;
  case LT_MSG_DONE:
    for (uint32_t i = 0; i < m->u.done.ncompl; i++)
      lt__sched_on_completion(s, idx, &m->u.done.compl [i], m);
    break;
  case LT_MSG_ERROR:
    lt__log(LT_LOG_WARN, "server %s refused a message: %s (%s)", c->endpoint, m->u.error.message,
            lt_strerror(m->u.error.code));
    if (c->state == LT_CONN_HELLO) lt__sched_conn_dead(s, idx, m->u.error.message);
    break;
  case LT_MSG_HEARTBEAT:
    if (m->u.heartbeat.seq != 0 && s->ev->opts.lookahead) {
      int64_t rtt = lt__sched_now_us() - (int64_t)m->u.heartbeat.seq;
      if (rtt > 0 && rtt < 10 * 1000000) lt__pace_rtt(&s->pace[idx], (double)rtt);
    }
    break;
  default:
    lt__log(LT_LOG_DEBUG, "server %s: unexpected %s", c->endpoint, lt__msg_type_name(m->type));
    break;
  }
}

/* drain_conn reads what one server sent, at most DRAIN_BUDGET messages a turn so that one
 * busy server cannot keep the loop from the others (zmq_poll reports the rest next turn). */
#define DRAIN_BUDGET 256
static void drain_conn(lt_sched_t *s, size_t idx) {
  for (int budget = DRAIN_BUDGET; budget > 0; budget--) {
    lt_conn_t *c = &s->conns[idx];
    if (c->sock == NULL) return;
    int rc = lt__conn_recv(c, &s->rx, &s->limits, lt__sched_now_ms());
    if (rc == LT_EAGAIN) return;
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

/* fail_unplaceable fails queued instructions when no server is left to run them. */
static void fail_unplaceable(lt_sched_t *s) {
  if (s->fire_head == NULL || live_servers(s) > 0) return;
  instr_rec_t *r;
  while ((r = lt__sched_pop_fireable(s)) != NULL) {
    lt__sched_job_fail(s, r->job, LT_ENOSERVER, "no live server to run the task");
    lt__sched_rec_done(s, r);
  }
}

/* ---- heartbeats ------------------------------------------------------------------- */

static void tick(lt_sched_t *s, int64_t now) {
  const lt_options_t *o = &s->ev->opts;
  for (size_t i = 0; i < s->nconns; i++) {
    lt_conn_t *c = &s->conns[i];
    if (c->state == LT_CONN_HELLO && now - c->opened_ms > (int64_t)o->connect_timeout_ms) {
      lt__sched_conn_dead(s, i, "no welcome in time");
    } else if (c->state == LT_CONN_READY) {
      if (lt__pace_control(&s->pace[i], o, now, s->t0_ms) && o->throttle) {
        /* The server learns its window at once, not with its next work: an EXECUTE with no
         * instruction carries it. */
        lt_msg_t w = {.type = LT_MSG_EXECUTE};
        w.u.execute.max_active = s->pace[i].threads;
        int rc = lt__conn_send(c, &w, NULL, now);
        if (rc != LT_OK) {
          lt__sched_conn_dead(s, i, lt_strerror(rc));
          continue;
        }
      }
      /* Messages waiting unread mean the server is alive and this loop was late. */
      int events = 0;
      size_t len = sizeof events;
      if (zmq_getsockopt(c->sock, ZMQ_EVENTS, &events, &len) == 0 && (events & ZMQ_POLLIN))
        c->last_recv_ms = now;
      if (now - c->last_recv_ms > 3 * (int64_t)o->heartbeat_ms) {
        lt__sched_conn_dead(s, i, "missed 3 heartbeats");
      } else if (now - c->last_send_ms >= (int64_t)o->heartbeat_ms ||
                 now - c->last_recv_ms >= (int64_t)o->heartbeat_ms ||
                 (o->lookahead && now - s->pace[i].last_ping_ms >= LT_PING_MS)) {
        /* The ping carries its send time: the answer measures the round trip. */
        lt_msg_t hb = {.type = LT_MSG_HEARTBEAT};
        hb.u.heartbeat.seq = (uint64_t)lt__sched_now_us();
        s->pace[i].last_ping_ms = now;
        lt__conn_send(c, &hb, NULL, now);
      }
    }
  }
}

/* ---- the loop --------------------------------------------------------------------- */

static int should_stop(lt_sched_t *s) {
  pthread_mutex_lock(&s->ev->mu);
  int stop = s->ev->stop;
  pthread_mutex_unlock(&s->ev->mu);
  return stop;
}

static void shutdown_all(lt_sched_t *s) {
  lt__sched_fail_all(s, LT_ECANCELED, "evaluator freed");
  lt__sched_deliver(s);
  pthread_mutex_lock(&s->stats_mu);
  for (size_t i = 0; i < s->nconns; i++)
    lt__conn_close(&s->conns[i]);
  s->nconns = 0;
  pthread_mutex_unlock(&s->stats_mu);
  lt__rx_free(&s->rx);
}

void *lt__sched_main(void *arg) {
  lt_sched_t *s = arg;
  lt_eval_t *ev = s->ev;
  pthread_mutex_lock(&ev->mu);
  s->initial = ev->nhosts;
  pthread_mutex_unlock(&ev->mu);
  pthread_mutex_lock(&s->stats_mu);
  open_new_hosts(s);
  pthread_mutex_unlock(&s->stats_mu);
  s->t0_ms = lt__sched_now_ms();
  s->next_tick = s->t0_ms + LT_PING_MS; /* pings and the throttle start at once */

  zmq_pollitem_t *items = NULL;
  size_t capitems = 0;
  for (;;) {
    if (capitems < s->nconns + 1) {
      capitems = (s->nconns + 1) * 2;
      zmq_pollitem_t *n = realloc(items, capitems * sizeof *items);
      if (n == NULL) break;
      items = n;
    }
    items[0] = (zmq_pollitem_t){.fd = ev->wake_fd, .events = ZMQ_POLLIN};
    size_t npolled = s->nconns;
    for (size_t i = 0; i < npolled; i++) {
      lt_conn_t *c = &s->conns[i];
      if (c->sock != NULL)
        items[i + 1] = (zmq_pollitem_t){.socket = c->sock, .events = ZMQ_POLLIN};
      else
        items[i + 1] = (zmq_pollitem_t){.fd = -1};
    }
    long timeout = (long)(s->next_tick - lt__sched_now_ms());
    if (timeout < 0) timeout = 0;
    int n = zmq_poll(items, (int)npolled + 1, timeout);
    if (n < 0 && errno != EINTR) {
      lt__log(LT_LOG_ERROR, "dispatcher: zmq_poll: %s", zmq_strerror(errno));
      break;
    }
    pthread_mutex_lock(&s->stats_mu);
    if (n > 0 && (items[0].revents & ZMQ_POLLIN)) {
      lt__eval_woken(ev);
      open_new_hosts(s);
      lt__sched_take_intake(s);
    }
    for (size_t i = 0; n > 0 && i < npolled; i++)
      if (items[i + 1].revents & ZMQ_POLLIN) drain_conn(s, i);
    int64_t now = lt__sched_now_ms();
    if (now >= s->next_tick) {
      tick(s, now);
      int64_t period = ev->opts.heartbeat_ms / 4 + 1;
      s->next_tick = now + (period < LT_PING_MS ? period : LT_PING_MS);
    }
    lt__sched_dispatch(s);
    lt__sched_migrate(s);
    fail_unplaceable(s);
    lt__sched_flush_releases(s);
    lt__sched_deliver(s);
    lt__trace_turn(s->trace, s);
    pthread_mutex_unlock(&s->stats_mu);
    if (should_stop(s)) break;
  }
  free(items);
  shutdown_all(s);
  return NULL;
}

/* ---- stats ------------------------------------------------------------------------ */

int lt__sched_stats_json(lt_sched_t *s, lt_json_t *j) {
  pthread_mutex_lock(&s->stats_mu);
  uint64_t to = 0, from = 0;
  for (size_t i = 0; i < s->nconns; i++) {
    to += s->conns[i].bytes_out;
    from += s->conns[i].bytes_in;
  }
  lt__json_u64(j, "instructions", s->instructions);
  const lt_options_t *o = &s->ev->opts;
  lt__json_u64(j, "bytes_to_servers", to);
  lt__json_u64(j, "bytes_from_servers", from);
  lt__json_u64(j, "retries", s->retries);
  lt__json_u64(j, "migrations", s->migrations);
  lt__json_u64(j, "migrated", s->migrated);
  lt__json_str(j, "mode",
               o->lookahead && o->lazy     ? "optimized"
               : !o->lookahead && !o->lazy ? "plain"
                                           : "custom");
  lt__json_bool(j, "lookahead", o->lookahead);
  lt__json_bool(j, "lazy", o->lazy);
  lt__json_array_open(j, "servers");
  for (size_t i = 0; i < s->nconns; i++) {
    const lt_conn_t *c = &s->conns[i];
    lt__json_object_open(j, NULL);
    lt__json_str(j, "endpoint", c->endpoint);
    lt__json_str(j, "server_id", c->server_id != NULL ? c->server_id : "");
    lt__json_bool(j, "alive", c->state != LT_CONN_DEAD);
    lt__json_u64(j, "completed", c->completed);
    lt__json_u64(j, "executed", c->load.completed); /* by the server, for every client */
    lt__json_u64(j, "inflight", c->inflight);
    lt__json_u64(j, "active_threads", c->load.active);
    lt__json_u64(j, "threads", c->threads);
    const pace_t *pc = &s->pace[i];
    lt__json_u64(j, "window", pc->threads);
    lt__json_u64(j, "admit", pc->cap);
    lt__json_u64(j, "window_changes", pc->changes);
    lt__json_array_open(j, "window_history"); /* [ms since start, window], the latest last */
    uint32_t kept = pc->changes < LT_HISTORY ? pc->changes : LT_HISTORY;
    for (uint32_t k = pc->changes - kept; k < pc->changes; k++) {
      lt__json_array_open(j, NULL);
      lt__json_u64(j, NULL, (uint64_t)pc->hist_ms[k % LT_HISTORY]);
      lt__json_u64(j, NULL, pc->hist_w[k % LT_HISTORY]);
      lt__json_array_close(j);
    }
    lt__json_array_close(j);
    lt__json_double(j, "rtt_us", s->pace[i].rtt_us);
    lt__json_double(j, "service_us", s->pace[i].svc_us);
    lt__json_double(j, "cores", s->pace[i].cores); /* the CPU it gets, learnt */
    lt__json_double(j, "speed", c->speed);
    lt__json_u64(j, "bytes_to", c->bytes_out);
    lt__json_u64(j, "bytes_from", c->bytes_in);
    lt__json_u64(j, "bytes_peer_in", c->load.peer_in);
    lt__json_u64(j, "bytes_peer_out", c->load.peer_out);
    lt__json_u64(j, "values_held", c->load.values_held);
    lt__json_object_close(j);
  }
  lt__json_array_close(j);
  pthread_mutex_unlock(&s->stats_mu);
  return LT_OK;
}
