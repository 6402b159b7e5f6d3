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
#include "vec.h"

static void sched_free(void *self);

/* sched_new creates the dispatcher state for the evaluator of `env`. Evaluator thread. */
static int sched_new(void **out, const lt_backend_env_t *env) {
  lt_sched_t *s = calloc(1, sizeof *s);
  if (s == NULL) return LT_ENOMEM;
  const lt_options_t *o = env->opts;
  s->ev = env->ev;
  s->opts = o;
  s->tmpl = env->tmpl;
  s->client_id = env->client_id;
  s->secret = env->secret;
  s->wake_fd = env->wake_fd;
  s->initial = env->initial_hosts;
  /* Lookahead admits the thread window per server until the server's first completion
   * tells its speed (a slow one given more at once would hold it all); pacing adds the
   * depth that covers the round trip from then on. Plain Lithium keeps one. */
  s->first_cap = o->lookahead ? o->max_threads : 1;
  s->placement = lt__placement_of(o);
  s->next_seq = (uint64_t)LT_MAX_PARTS + 1;
  lt__codec_limits_default(&s->limits);
  lt__stats_init(&s->stats);
  s->zctx = zmq_ctx_new();
  if (s->zctx == NULL) {
    sched_free(s);
    return LT_EIO;
  }
  int rc = o->trace != NULL ? lt__trace_open(&s->trace, o->trace) : LT_OK;
  if (rc == LT_OK)
    rc = lt__ship_new(&s->ship, o->modules, s->tmpl->kernels, s->tmpl->nkernels, o->ship_modules);
  if (rc != LT_OK) {
    sched_free(s);
    return rc;
  }
  *out = s;
  return LT_OK;
}

/* free_peers frees the list of the session's servers announced to each server. */
static void free_peers(lt_sched_t *s) {
  for (size_t i = 0; i < s->npeers; i++) {
    free(s->peers[i]);
    free(s->eps[i]);
  }
  free(s->peers);
  free(s->eps);
  free(s->keys);
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
  for (size_t i = 0; i < s->capconns && s->relq != NULL; i++)
    free(s->relq[i].ids);
  free(s->relq);
  free(s->slots);
  free(s->admitted);
  free(s->pace);
  free(s->conns);
  free_peers(s);
  free(s);
}

/* ---- connections ------------------------------------------------------------------ */

#define RETRY_FIRST_MS 100  /* the first wait before greeting a server again */
#define RETRY_MAX_MS   2000 /* the longest */

int lt__sched_takes(const lt_sched_t *s, size_t idx) {
  return s->conns[idx].state == LT_CONN_READY;
}

int lt__sched_alive(const lt_sched_t *s, size_t idx) {
  return s->conns[idx].state == LT_CONN_READY || s->conns[idx].state == LT_CONN_STOPPING;
}

int lt__sched_cancel(lt_sched_t *s, size_t idx, uint64_t *seqs, uint32_t n) {
  if (n == 0 || !lt__sched_alive(s, idx)) return LT_OK;
  lt_msg_t m = {.type = LT_MSG_CANCEL};
  m.u.cancel.seqs = seqs;
  m.u.cancel.nseqs = n;
  return lt__conn_send(&s->conns[idx], &m, NULL, lt__clock_ms());
}

/* grow_slots makes room for one more connection in every per-connection array. */
static int grow_slots(lt_sched_t *s) {
  if (s->nconns < s->capconns) return LT_OK;
  size_t old = s->capconns, cap = old ? old * 2 : 8;
  if (LT_VEC_RESIZE(s->conns, old, cap) != LT_OK || LT_VEC_RESIZE(s->relq, old, cap) != LT_OK ||
      LT_VEC_RESIZE(s->admitted, old, cap) != LT_OK || LT_VEC_RESIZE(s->pace, old, cap) != LT_OK ||
      LT_VEC_RESIZE(s->slots, old, cap) != LT_OK)
    return LT_ENOMEM;
  s->capconns = cap;
  return LT_OK;
}

/* start_answered counts an initial host out of lt_eval_start's wait, once. */
static void start_answered(lt_sched_t *s, size_t idx, int ready) {
  lt_slot_t *sl = &s->slots[idx];
  if (sl->answered) return;
  sl->answered = 1;
  lt__stats_publish(s); /* lt_eval_start may return now: its stats show this answer */
  lt__eval_host_answered(s->ev, ready);
}

/* count_auth counts an initial host that failed authentication, so that lt_eval_start
 * says LT_EAUTH rather than LT_ENOSERVER when no server is left. */
static void count_auth(lt_sched_t *s, size_t idx) {
  if (s->slots[idx].answered) return;
  lt__eval_host_auth_failed(s->ev);
}

/* auth_failed ends slot idx's connection for a failed security handshake or a refused
 * hello: not retried (a key does not get better by waiting), named in the stats. */
static void auth_failed(lt_sched_t *s, size_t idx, const char *detail) {
  lt__log(LT_LOG_ERROR, "server %s: authentication failed: %s", s->conns[idx].endpoint, detail);
  count_auth(s, idx);
  lt__sched_conn_dead(s, idx, "auth refused");
  s->slots[idx].retry_at_ms = 0;
}

/* greet opens slot idx's connection to its server and says hello. */
static void greet(lt_sched_t *s, size_t idx) {
  const lt_options_t *o = s->opts;
  lt_conn_t *c = &s->conns[idx];
  lt_slot_t *sl = &s->slots[idx];
  const char *ep = s->eps[sl->host];
  lt__pace_init(&s->pace[idx], s->first_cap, o, lt__clock_ms());
  s->admitted[idx] = 0;
  sl->idle_ms = lt__clock_ms();
  s->relq[idx].n = 0;
  const char *key = sl->host < s->npeers ? s->keys[sl->host] : "";
  lt_conn_auth_t auth = {.secret = s->secret,
                         .peers = (const char *const *)s->peers,
                         .npeers = (uint32_t)s->npeers,
                         .pub = o->curve_pub,
                         .sec = o->curve_sec,
                         .server = key};
  lt_conn_program_t prog = {.kernels = s->tmpl->kernels, .nkernels = s->tmpl->nkernels};
  lt__ship_modules(s->ship, &prog.modules, &prog.nmodules);
  int rc = lt__conn_open(c, s->zctx, ep, s->client_id, lt__binding(s, NULL).inline_max, &prog,
                         &auth, lt__clock_ms());
  if (rc != LT_OK) {
    if (rc == LT_EAUTH) count_auth(s, idx);
    lt__log(LT_LOG_WARN, "server %s: cannot open (%s)", ep, lt_strerror(rc));
    lt__conn_shut(c);
    c->state = LT_CONN_DEAD;
    if (c->endpoint == NULL) c->endpoint = strdup(ep);
    snprintf(sl->why, sizeof sl->why, "%s", rc == LT_EAUTH ? "auth refused" : "cannot connect: ");
    if (rc != LT_EAUTH)
      snprintf(sl->why + strlen(sl->why), sizeof sl->why - strlen(sl->why), "%s", lt_strerror(rc));
    sl->retry_at_ms = 0; /* a bad endpoint does not get better */
    start_answered(s, idx, 0);
  }
}

/* add_slot adds a connection to host `host` and greets the server; -1 without memory. */
static long add_slot(lt_sched_t *s, size_t host, int watch_fd) {
  if (grow_slots(s) != LT_OK) return -1;
  size_t idx = s->nconns;
  memset(&s->conns[idx], 0, sizeof s->conns[idx]);
  s->conns[idx].state = LT_CONN_DEAD;
  s->slots[idx] = (lt_slot_t){
      .host = host, .watch_fd = watch_fd, .successor = -1, .predecessor = -1, .sessions = 1};
  s->slots[idx].answered = host >= s->initial; /* only initial hosts hold up the start */
  s->nconns++;
  greet(s, idx);
  return (long)idx;
}

/* update_peers rebuilds the list of the session's servers from `hosts` (n of them):
 * "ENDPOINT KEY" or "ENDPOINT" for each, and each one's key. LT_ENOMEM keeps the old one. */
static int update_peers(lt_sched_t *s, const lt_host_t *hosts, size_t n) {
  char **peers = calloc(n ? n : 1, sizeof *peers);
  char **eps = calloc(n ? n : 1, sizeof *eps);
  char(*keys)[41] = calloc(n ? n : 1, sizeof *keys);
  int rc = peers != NULL && keys != NULL && eps != NULL ? LT_OK : LT_ENOMEM;
  for (size_t i = 0; rc == LT_OK && i < n; i++) {
    const char *k = hosts[i].key[0] != '\0' ? hosts[i].key : s->opts->curve_server;
    snprintf(keys[i], sizeof keys[i], "%s", k);
    size_t len = strlen(hosts[i].endpoint) + strlen(k) + 2;
    if ((peers[i] = malloc(len)) == NULL || (eps[i] = strdup(hosts[i].endpoint)) == NULL) {
      rc = LT_ENOMEM;
      break;
    }
    snprintf(peers[i], len, "%s%s%s", hosts[i].endpoint, k[0] ? " " : "", k);
  }
  if (rc != LT_OK) {
    for (size_t i = 0; peers != NULL && eps != NULL && i < n; i++) {
      free(peers[i]);
      free(eps[i]);
    }
    free(peers);
    free(eps);
    free(keys);
    return rc;
  }
  free_peers(s);
  s->peers = peers;
  s->eps = eps;
  s->keys = keys;
  s->npeers = n;
  return LT_OK;
}

/* open_new_hosts greets the hosts added since the last call. Every server is told the
 * session's servers first (the holders its instructions may name): the new ones in their
 * greeting, the others in a PROGRAM sent before any instruction that names a new one. */
static void open_new_hosts(lt_sched_t *s) {
  lt_host_t *hosts = NULL;
  long n = lt__eval_hosts(s->ev, &hosts);
  if (n < 0) return;
  for (size_t i = 0; i < s->nconns; i++)
    if (hosts[s->slots[i].host].gone && !s->slots[i].draining) s->slots[i].draining = 1;
  if (update_peers(s, hosts, (size_t)n) != LT_OK) {
    lt__eval_hosts_free(hosts, (size_t)n);
    return;
  }
  /* A greeting that fails at once reports to lt_eval_start, which takes the evaluator's
   * lock: lt__eval_hosts has let go of it. */
  size_t old = s->nconns;
  while (s->hosts_seen < (size_t)n) {
    if (add_slot(s, s->hosts_seen, hosts[s->hosts_seen].fd) < 0) break;
    s->hosts_seen++;
  }
  lt__eval_hosts_free(hosts, (size_t)n);
  for (size_t i = 0; i < old; i++) {
    lt_conn_t *c = &s->conns[i];
    if (c->state == LT_CONN_DEAD) continue;
    lt__conn_program(c, s->tmpl->kernels, s->tmpl->nkernels, (const char *const *)s->peers,
                     (uint32_t)s->npeers, lt__clock_ms());
  }
}

/* drain moves work off a removed server: it takes no new work, its queued instructions are
 * cancelled (they come back ECANCELED and are placed elsewhere; running ones finish), and
 * once nothing is out there its session ends for good (bye). */
static void drain(lt_sched_t *s, size_t idx, int64_t now) {
  lt_conn_t *c = &s->conns[idx];
  lt_slot_t *sl = &s->slots[idx];
  if (c->state == LT_CONN_DEAD || c->state == LT_CONN_HELLO) {
    if (c->state == LT_CONN_HELLO) lt__conn_shut(c);
    c->state = LT_CONN_DEAD;
    snprintf(sl->why, sizeof sl->why, "removed");
    sl->retry_at_ms = 0;
    start_answered(s, idx, 0);
    return;
  }
  if (sl->draining == 1) {
    lt__log(LT_LOG_INFO, "server %s: draining (%u instructions out)", c->endpoint, c->inflight);
    c->state = LT_CONN_STOPPING;
    uint64_t *seqs = calloc(c->inflight ? c->inflight : 1, sizeof *seqs);
    uint32_t n = 0;
    lt_instr_rec_t *r, *tmp;
    HASH_ITER(hh, s->inflight, r, tmp) {
      if (r->conn == (int)idx && seqs != NULL && n < c->inflight) seqs[n++] = r->seq;
    }
    lt__sched_cancel(s, idx, seqs, n);
    free(seqs);
    /* The server shows it in `lithium status` while the running instructions finish. */
    lt_msg_t hb = {.type = LT_MSG_HEARTBEAT};
    hb.u.heartbeat.draining = true;
    lt__conn_send(c, &hb, NULL, now);
    sl->draining = 2;
  }
  if (c->inflight > 0) return;
  lt_msg_t bye = {.type = LT_MSG_BYE};
  lt__conn_send(c, &bye, NULL, now);
  lt__sched_conn_dead(s, idx, "removed");
  s->slots[idx].retry_at_ms = 0;
}

/* tell_lost tells every other live server that `endpoint` is gone: their instructions
 * waiting for its values fail at once and are recomputed, instead of waiting for a fetch
 * timeout. */
static void tell_lost(lt_sched_t *s, size_t idx) {
  const char *holders[1] = {s->conns[idx].endpoint};
  lt_msg_t m = {.type = LT_MSG_LOST};
  m.u.lost.nholders = 1;
  m.u.lost.holders = holders;
  for (size_t i = 0; i < s->nconns; i++) {
    lt_conn_t *c = &s->conns[i];
    if (i != idx && lt__sched_alive(s, i)) lt__conn_send(c, &m, NULL, lt__clock_ms());
  }
}

/* why_unanswered says why a server never welcomed us, from what its connection showed. */
static const char *why_unanswered(const lt_conn_t *c) {
  if (c->connected) return "no welcome";
  if (c->refused) return "refused";
  if (c->unresolvable) return "unresolvable";
  return "no answer";
}

/* lt__sched_conn_dead marks a server dead and hands its instructions to jobs.c, which
 * re-queues them elsewhere or fails their tasks. The server is greeted again later: a
 * restarted one is used again, as a new session. */
void lt__sched_conn_dead(lt_sched_t *s, size_t idx, const char *why) {
  lt_conn_t *c = &s->conns[idx];
  lt_slot_t *sl = &s->slots[idx];
  if (c->state == LT_CONN_DEAD) return;
  int was_hello = c->state == LT_CONN_HELLO;
  snprintf(sl->why, sizeof sl->why, "%s", why);
  sl->backoff_ms = sl->backoff_ms ? sl->backoff_ms * 2 : RETRY_FIRST_MS;
  if (sl->backoff_ms > RETRY_MAX_MS) sl->backoff_ms = RETRY_MAX_MS;
  sl->retry_at_ms = lt__clock_ms() + (was_hello ? sl->backoff_ms : 0);
  if (was_hello && sl->sessions > 1) {
    /* A greeting again that found nobody yet: quiet, it goes on. */
    lt__log(LT_LOG_DEBUG, "server %s: %s", c->endpoint, why);
  } else if (sl->draining) {
    lt__log(LT_LOG_INFO, "server %s: drained, its session ended", c->endpoint);
  } else {
    lt__log(LT_LOG_WARN, "server %s is %s: %s", c->endpoint, was_hello ? "unreachable" : "dead",
            why);
  }
  lt__trace_server_lost(s->trace, s, idx, why);
  c->state = LT_CONN_DEAD;
  /* A dead link is closed at once: nothing more is read from it or sent to it. */
  lt__conn_shut(c);
  s->relq[idx].n = 0;
  if (was_hello) {
    start_answered(s, idx, 0);
    return;
  }
  tell_lost(s, idx);
  lt__sched_fetches_lost(s, idx);
  lt_instr_rec_t *r, *tmp;
  HASH_ITER(hh, s->inflight, r, tmp) {
    if (r->conn != (int)idx) continue;
    lt__sched_take_off(s, r);
    lt__sched_cancel_answered(s, r, LT_ELOST);
    lt__sched_note_lost(s, idx, r);
    lt__sched_lost(s, r, c->endpoint, why, 1);
  }
  /* Instructions elsewhere that wait for a value of the dead server would wait for their
   * server's fetch timeout: their tasks are recomputed now. */
  HASH_ITER(hh, s->inflight, r, tmp) {
    if (lt__sched_stale(r)) continue;
    for (uint32_t i = 0; i < r->nins; i++) {
      if (r->ins[i].value == NULL && r->ins[i].holder == (int32_t)idx) {
        lt__sched_restart_lost(s, r->job, (long)idx, "a value it needed was on a server that died");
        break;
      }
    }
  }
}

/* greet_again greets a dead server again once its wait is over: in place when it never
 * welcomed this slot, else in a new slot (values of the old session are lost for good). */
static void greet_again(lt_sched_t *s, size_t idx, int64_t now) {
  lt_slot_t *sl = &s->slots[idx];
  if (s->conns[idx].state != LT_CONN_DEAD || sl->retry_at_ms == 0 || now < sl->retry_at_ms ||
      sl->draining)
    return;
  sl->retry_at_ms = 0;
  if (!sl->was_ready) {
    uint32_t backoff = sl->backoff_ms, sessions = sl->sessions;
    lt__conn_close(&s->conns[idx]);
    greet(s, idx);
    sl->backoff_ms = backoff;
    sl->sessions = sessions;
    return;
  }
  long next = add_slot(s, sl->host, sl->watch_fd);
  sl = &s->slots[idx]; /* add_slot may move the array */
  if (next < 0) {
    sl->retry_at_ms = now + RETRY_MAX_MS;
    return;
  }
  sl->successor = next;
  sl->watch_fd = -1;
  s->slots[next].predecessor = (long)idx;
  memcpy(s->slots[next].why, sl->why, sizeof sl->why);
  s->slots[next].sessions = sl->sessions + 1;
  s->slots[next].answered = 1;
}

static int live_servers(const lt_sched_t *s) {
  int n = 0;
  for (size_t i = 0; i < s->nconns; i++)
    n += lt__sched_takes(s, i);
  return n;
}

static void on_welcome(lt_sched_t *s, size_t idx, const lt_msg_t *m) {
  lt_conn_t *c = &s->conns[idx];
  lt_slot_t *sl = &s->slots[idx];
  if (m->u.welcome.version != LT_PROTO_VERSION) {
    lt__sched_conn_dead(s, idx, "protocol version mismatch");
    sl->retry_at_ms = 0;
    return;
  }
  free(c->server_id);
  c->server_id = strdup(m->u.welcome.server_id);
  c->threads = m->u.welcome.threads;
  c->speed = m->u.welcome.speed;
  c->incarnation = m->u.welcome.incarnation;
  c->max_frame = m->u.welcome.max_frame;
  s->pace[idx].workers = c->threads;
  if (m->u.welcome.cores > 0) s->pace[idx].cores = m->u.welcome.cores;
  /* Modules go before any instruction: the session takes work from now on. */
  lt__ship_welcome(s->ship, c, m, lt__clock_ms());
  c->state = LT_CONN_READY;
  sl->was_ready = 1;
  sl->backoff_ms = 0;
  sl->why[0] = '\0';
  lt__log(sl->sessions > 1 ? LT_LOG_WARN : LT_LOG_INFO, "server %s (%s) ready%s, %u threads",
          c->endpoint, m->u.welcome.server_id, sl->sessions > 1 ? " again" : "", c->threads);
  start_answered(s, idx, 1);
  lt__sched_crash_report(s, idx, m);
}

static void on_error(lt_sched_t *s, size_t idx, const lt_msg_t *m) {
  lt_conn_t *c = &s->conns[idx];
  lt__log(LT_LOG_WARN, "server %s refused a message: %s (%s)", c->endpoint, m->u.error.message,
          lt_strerror(m->u.error.code));
  char why[160];
  if (c->state == LT_CONN_HELLO && m->u.error.code == LT_EAUTH) {
    auth_failed(s, idx, m->u.error.message);
    return;
  }
  if (c->state == LT_CONN_HELLO) {
    lt__sched_conn_dead(s, idx, m->u.error.message);
    if (m->u.error.code == LT_EVERSION) s->slots[idx].retry_at_ms = 0;
    return;
  }
  /* In a session, a refusal means the server has lost our session (it restarted, or dropped
   * us while we were paused) or refused an execute: the instructions we think it holds may
   * be gone. The session ends now; its work goes elsewhere and the server is greeted again. */
  snprintf(why, sizeof why, "%s: %s",
           m->u.error.code == LT_ESTATE ? "it lost our session" : "it refused a message",
           m->u.error.message);
  lt__sched_conn_dead(s, idx, why);
}

static void on_message(lt_sched_t *s, size_t idx, const lt_msg_t *m) {
  lt_conn_t *c = &s->conns[idx];
  lt__trace_message(s->trace, s, idx, m);
  if (m->has_load) {
    if (c->incarnation != 0 && m->load.incarnation != 0 && m->load.incarnation != c->incarnation) {
      /* Another process answers on this endpoint: our session died with the old one. */
      lt__sched_conn_dead(s, idx, "the server restarted (new incarnation)");
      return;
    }
    c->load = m->load;
    lt__pace_load(&s->pace[idx], &m->load);
    if (m->load.stopping && c->state == LT_CONN_READY && !s->slots[idx].draining) {
      lt__log(LT_LOG_INFO, "server %s is stopping: no new work goes there", c->endpoint);
      c->state = LT_CONN_STOPPING;
    }
  }
  switch (m->type) {
  case LT_MSG_WELCOME:
    if (c->state == LT_CONN_HELLO) on_welcome(s, idx, m);
    break;
  case LT_MSG_DONE:
    for (uint32_t i = 0; i < m->u.done.ncompl && c->state != LT_CONN_DEAD; i++)
      lt__sched_on_completion(s, idx, &m->u.done.compl [i], m);
    break;
  case LT_MSG_ERROR:
    on_error(s, idx, m);
    break;
  case LT_MSG_VALUE:
    lt__sched_on_value(s, idx, m);
    break;
  case LT_MSG_HEARTBEAT:
    if (m->u.heartbeat.seq != 0 && s->opts->lookahead) {
      int64_t rtt = lt__clock_us() - (int64_t)m->u.heartbeat.seq;
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
    int rc = lt__conn_recv(c, &s->rx, &s->limits, lt__clock_ms());
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

/* watch_conn reads what the connection's monitor saw: a connection that went down ends
 * the session now, not after missed heartbeats. */
static void watch_conn(lt_sched_t *s, size_t idx) {
  lt_conn_event_t ev;
  while ((ev = lt__conn_monitor(&s->conns[idx])) != LT_CONN_EV_NONE) {
    if (ev == LT_CONN_EV_DISCONNECTED) {
      lt__sched_conn_dead(s, idx, "connection lost");
      return;
    }
    if (ev == LT_CONN_EV_AUTH_FAILED) {
      auth_failed(s, idx,
                  "the CURVE handshake failed (a key the server does not allow, a wrong "
                  "server key, or CURVE on one side only)");
      return;
    }
  }
}

/* watch_child notices that a spawned server exited (its stdout reached end of file). */
static void watch_child(lt_sched_t *s, size_t idx) {
  lt_slot_t *sl = &s->slots[idx];
  char buf[256];
  ssize_t n = read(sl->watch_fd, buf, sizeof buf);
  if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) return;
  sl->watch_fd = -1;
  lt__sched_conn_dead(s, idx, "the server process exited");
  s->slots[idx].retry_at_ms = 0; /* nobody restarts a spawned server */
}

/* fail_unplaceable fails queued instructions when no server has been able to take work
 * for connect_timeout_ms (a restarting server gets that long to come back). */
static void fail_unplaceable(lt_sched_t *s) {
  if (s->fire_head == NULL || live_servers(s) > 0) {
    s->none_since = 0;
    return;
  }
  int64_t now = lt__clock_ms();
  if (s->none_since == 0) s->none_since = now;
  if (now - s->none_since < (int64_t)s->opts->connect_timeout_ms) return;
  lt_instr_rec_t *r;
  while ((r = lt__sched_pop_fireable(s)) != NULL) {
    lt__sched_job_fail(s, r->job, LT_ENOSERVER, "no live server to run the task");
    lt__sched_rec_done(s, r);
  }
}

/* ---- heartbeats ------------------------------------------------------------------- */

/* send_window tells server i its window at once, in an EXECUTE with no instruction. */
static int send_window(lt_sched_t *s, size_t i, int64_t now) {
  lt_msg_t w = {.type = LT_MSG_EXECUTE};
  w.u.execute.max_active = s->pace[i].window;
  w.u.execute.timeout_ms = s->opts->task_timeout_ms;
  return lt__conn_send(&s->conns[i], &w, NULL, now);
}

static void tick(lt_sched_t *s, int64_t now) {
  const lt_options_t *o = s->opts;
  for (size_t i = 0; i < s->nconns; i++) {
    if (s->slots[i].draining) {
      if (s->conns[i].state != LT_CONN_DEAD || s->slots[i].retry_at_ms != 0) drain(s, i, now);
      if (s->conns[i].state == LT_CONN_DEAD) continue;
    }
    greet_again(s, i, now); /* may add a slot: conns may move */
    lt_conn_t *c = &s->conns[i];
    if (c->state == LT_CONN_HELLO && now - c->opened_ms > (int64_t)o->connect_timeout_ms) {
      lt__sched_conn_dead(s, i, why_unanswered(c));
    } else if (lt__sched_alive(s, i)) {
      if (lt__pace_control(&s->pace[i], o, now, s->t0_ms) && o->throttle) {
        int rc = send_window(s, i, now);
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
        hb.u.heartbeat.seq = (uint64_t)lt__clock_us();
        s->pace[i].last_ping_ms = now;
        lt__conn_send(c, &hb, NULL, now);
      }
    }
  }
  lt__sched_overdue(s, now);
  lt__sched_backup(s, now);
}

/* ---- the loop --------------------------------------------------------------------- */

static void shutdown_all(lt_sched_t *s) {
  lt__sched_fail_all(s, LT_ECANCELED, "evaluator freed");
  lt__sched_deliver(s);
  for (size_t i = 0; i < s->nconns; i++) {
    lt__conn_close(&s->conns[i]);
    lt__sched_forget_lost(s, i);
  }
  s->nconns = 0;
  lt__stats_publish(s);
  lt__rx_free(&s->rx);
}

/* poll_items fills items[] (wake fd, then each connection's socket, its monitor and its
 * spawned process's stdout) and returns how many there are. */
static size_t poll_items(lt_sched_t *s, zmq_pollitem_t *items) {
  items[0] = (zmq_pollitem_t){.fd = s->wake_fd, .events = ZMQ_POLLIN};
  size_t n = s->nconns;
  for (size_t i = 0; i < n; i++) {
    lt_conn_t *c = &s->conns[i];
    zmq_pollitem_t none = {.fd = -1};
    items[1 + i] =
        c->sock != NULL ? (zmq_pollitem_t){.socket = c->sock, .events = ZMQ_POLLIN} : none;
    items[1 + n + i] =
        c->mon != NULL ? (zmq_pollitem_t){.socket = c->mon, .events = ZMQ_POLLIN} : none;
    int fd = s->slots[i].watch_fd;
    items[1 + 2 * n + i] = fd >= 0 ? (zmq_pollitem_t){.fd = fd, .events = ZMQ_POLLIN} : none;
  }
  return 1 + 3 * n;
}

/* sched_main is the dispatcher thread's body (arg: the lt_sched_t); it runs until the
 * evaluator stops it and wakes it. */
static void *sched_main(void *arg) {
  lt_sched_t *s = arg;
  lt_eval_t *ev = s->ev;
  open_new_hosts(s);
  s->t0_ms = lt__clock_ms();
  s->next_tick = s->t0_ms + LT_PING_MS; /* pings and the throttle start at once */

  zmq_pollitem_t *items = NULL;
  size_t capitems = 0;
  for (;;) {
    if (LT_VEC_RESERVE(items, capitems, 3 * s->nconns + 1) != LT_OK) break;
    size_t npolled = s->nconns;
    size_t nitems = poll_items(s, items);
    long timeout = (long)(s->next_tick - lt__clock_ms());
    if (timeout < 0) timeout = 0;
    int n = zmq_poll(items, (int)nitems, timeout);
    if (n < 0 && errno != EINTR) {
      lt__log(LT_LOG_ERROR, "dispatcher: zmq_poll: %s", zmq_strerror(errno));
      break;
    }
    if (n > 0 && (items[0].revents & ZMQ_POLLIN)) {
      lt__eval_woken(ev);
      open_new_hosts(s);
      lt__sched_take_intake(s);
    }
    for (size_t i = 0; n > 0 && i < npolled; i++) {
      if (items[1 + i].revents & ZMQ_POLLIN) drain_conn(s, i);
      if (items[1 + npolled + i].revents & ZMQ_POLLIN) watch_conn(s, i);
      if (items[1 + 2 * npolled + i].revents & (ZMQ_POLLIN | ZMQ_POLLERR)) watch_child(s, i);
    }
    int64_t now = lt__clock_ms();
    /* hosts=DIR: servers that announced since the last look join now. */
    if (lt__eval_poll_hosts(ev, now)) open_new_hosts(s);
    if (now >= s->next_tick) {
      tick(s, now);
      int64_t period = s->opts->heartbeat_ms / 4 + 1;
      s->next_tick = now + (period < LT_PING_MS ? period : LT_PING_MS);
    }
    lt__sched_dispatch(s);
    lt__sched_migrate(s);
    if (s->went_idle) lt__sched_backup(s, now); /* a server ran out of work: copies now */
    fail_unplaceable(s);
    lt__sched_flush_releases(s);
    /* Published before the results go: a reader that saw a result sees its counts. */
    lt__stats_publish(s);
    lt__sched_deliver(s);
    lt__trace_turn(s->trace, s);
    if (lt__eval_stopping(s->ev)) break;
  }
  free(items);
  shutdown_all(s);
  return NULL;
}

const lt_backend_ops_t lt__sched_backend = {
    .create = sched_new,
    .run = sched_main,
    .stats_json = lt__sched_stats_json,
    .destroy = sched_free,
};
