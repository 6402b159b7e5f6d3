/* links.c: the dispatcher's sessions with its servers (DESIGN.md 7a, "links"): greeting
 * (hello, and again after a session ended: in place when it never welcomed, else in a new
 * entry of the server table, its successor), welcomes, refusals, heartbeats and round-trip
 * pings, the throttle's window, the connection monitor and a spawned server's exit, draining
 * and retiring a removed server. A server found dead here is only marked
 * (lt__server_mark_dead); the loop's reap phase calls lt__link_close once. It never touches
 * records or jobs. May call: the server table, pacing, the policies' hooks, the failure
 * accounting (a drain's cancels, the settle of an ended session at its successor's welcome),
 * the connection, module shipping, the trace. Dispatcher thread only.
 *
 * A server that welcomes and then never sends anything (hostile, or wedged right after its
 * welcome) is found by the one failure detector there is, 3 missed heartbeats (a healthy
 * server answers every ping at once, and is pinged at its welcome and at least once a
 * heartbeat period). Such a session is mute: a new session with its host, welcomed at once
 * as after any other session's end, would draw new work into another silent session, cycle
 * after cycle, each one costing the tasks a try. So the host of a mute session is on
 * probation: greeted again after the usual backoff (doubling, at most RETRY_MAX_MS), but
 * its new session takes no work until it has spoken after its welcome (the answer to the
 * welcome's ping; lt__server_takes). A server that was only paused or slow at that moment
 * (SIGSTOP, a swapping host) takes work again as soon as it answers, and a silent one costs
 * no task a try, only a greeting per backoff. With no other server to take it, the work
 * fails LT_ENOSERVER after connect_timeout_ms as always. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lithium/error.h>
#include "log.h"
#include "sched_failures.h"
#include "sched_links.h"
#include "sched_loop.h"
#include "sched_servers.h"
#include "vec.h"

#define RETRY_FIRST_MS 100  /* the first wait before greeting a server again */
#define RETRY_MAX_MS   2000 /* the longest */
/* A connection closed during its handshake, with no reason given, is a refusal only this
 * many times in a row: once or twice it is a server that died or restarted meanwhile (a
 * supervised worker that crashed), which the next connection finds again; a wrong server key
 * closes every handshake the same way, and is a refusal within a few of libzmq's reconnects
 * (100 ms apart). */
#define LT_HANDSHAKE_TRIES 3

void lt__links_free(lt_sched_t *s) {
  for (size_t i = 0; i < s->npeers; i++) {
    free(s->peers[i]);
    free(s->eps[i]);
  }
  free(s->peers);
  free(s->eps);
  free(s->keys);
  s->peers = s->eps = NULL;
  s->keys = NULL;
  s->npeers = 0;
}

/* grow_table makes room for one more entry in the server table. */
static int grow_table(lt_sched_t *s) {
  if (s->nsrv < s->capsrv) return LT_OK;
  size_t old = s->capsrv, cap = old ? old * 2 : 8;
  if (LT_VEC_RESIZE(s->srv, old, cap) != LT_OK) return LT_ENOMEM;
  s->capsrv = cap;
  return LT_OK;
}

/* start_answered counts an initial host out of lt_eval_start's wait, once. */
static void start_answered(lt_sched_t *s, size_t idx, int ready) {
  lt_slot_t *sl = &s->srv[idx].slot;
  if (sl->answered) return;
  sl->answered = 1;
  lt__stats_publish(s); /* lt_eval_start may return now: its stats show this answer */
  s->door->host_answered(s->ev, ready);
}

/* count_auth counts an initial host that failed authentication, so that lt_eval_start
 * says LT_EAUTH rather than LT_ENOSERVER when no server is left. */
static void count_auth(lt_sched_t *s, size_t idx) {
  if (s->srv[idx].slot.answered) return;
  s->door->host_auth_failed(s->ev);
}

/* auth_failed ends server idx's session for a failed security handshake or a refused
 * hello: not retried (a key does not get better by waiting), named in the stats. */
static void auth_failed(lt_sched_t *s, size_t idx, const char *detail) {
  lt__log(LT_LOG_ERROR, "server %s: authentication failed: %s", s->srv[idx].conn.endpoint, detail);
  count_auth(s, idx);
  lt__server_mark_dead(s, idx, "auth refused", 1);
}

/* handshake_lost counts a connection of server idx that closed during its handshake. libzmq
 * connects again by itself (its reconnect interval) and our hello, still queued, goes once a
 * handshake completes, so nothing is torn down and lt_eval_start goes on waiting for the
 * host; LT_HANDSHAKE_TRIES such closes in a row without a welcome are a refusal. */
static void handshake_lost(lt_sched_t *s, size_t idx) {
  lt_slot_t *sl = &s->srv[idx].slot;
  if (++sl->handshakes_lost < LT_HANDSHAKE_TRIES) {
    lt__log(LT_LOG_INFO, "server %s: the connection closed during the handshake; trying again",
            s->srv[idx].conn.endpoint);
    return;
  }
  char why[160];
  snprintf(why, sizeof why,
           "the connection closed during the handshake %u times in a row (a wrong server key, "
           "or CURVE on one side only)",
           sl->handshakes_lost);
  auth_failed(s, idx, why);
}

/* greet opens server idx's connection and says hello. */
static void greet(lt_sched_t *s, size_t idx) {
  const lt_options_t *o = s->opts;
  lt_server_t *v = &s->srv[idx];
  lt_conn_t *c = &v->conn;
  lt_slot_t *sl = &v->slot;
  const char *ep = s->eps[sl->host];
  lt__pace_init(&v->pace, s->first_cap, o, lt__clock_ms());
  v->admitted = 0;
  v->gone = v->final = 0;
  sl->idle_ms = lt__clock_ms();
  v->relq.n = 0;
  const char *key = sl->host < s->npeers ? s->keys[sl->host] : "";
  lt_conn_auth_t auth = {.secret = s->secret,
                         .peers = (const char *const *)s->peers,
                         .npeers = (uint32_t)s->npeers,
                         .pub = o->curve_pub,
                         .sec = o->curve_sec,
                         .server = key};
  lt_conn_program_t prog = {.kernels = s->tmpl->kernels, .nkernels = s->tmpl->nkernels};
  lt__ship_modules(s->ship, &prog.modules, &prog.nmodules);
  int rc = lt__conn_open(c, &s->net, ep, s->client_id, lt__binding(s, NULL).inline_max, &prog,
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

/* new_entry appends a zeroed entry to the server table, with its policies' blobs; -1
 * without memory. */
static long new_entry(lt_sched_t *s) {
  if (grow_table(s) != LT_OK) return -1;
  size_t idx = s->nsrv;
  memset(&s->srv[idx], 0, sizeof s->srv[idx]);
  if (lt__policies_server_new(s, idx) != LT_OK) {
    lt__policies_server_free(s, idx);
    return -1;
  }
  s->nsrv++;
  return (long)idx;
}

/* add_entry gives host `host` a new session in a free entry (entries.c) or a new one, and
 * greets the server; -1 without memory. */
static long add_entry(lt_sched_t *s, size_t host, int watch_fd) {
  long idx = lt__entry_reuse(s);
  if (idx < 0 && (idx = new_entry(s)) < 0) return -1;
  s->srv[idx].sid = lt__entry_sid(s);
  s->srv[idx].conn.state = LT_CONN_DEAD;
  s->srv[idx].slot = (lt_slot_t){
      .host = host, .watch_fd = watch_fd, .successor = -1, .predecessor = -1, .sessions = 1};
  s->srv[idx].slot.answered = host >= s->initial; /* only initial hosts hold up the start */
  greet(s, (size_t)idx);
  return idx;
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
  lt__links_free(s);
  s->peers = peers;
  s->eps = eps;
  s->keys = keys;
  s->npeers = n;
  return LT_OK;
}

void lt__links_open_new(lt_sched_t *s) {
  lt_host_t *hosts = NULL;
  long n = s->door->hosts(s->ev, &hosts);
  if (n < 0) return;
  for (size_t i = 0; i < s->nsrv; i++)
    if (s->srv[i].sid != 0 && hosts[s->srv[i].slot.host].gone) s->srv[i].slot.removed = 1;
  if (update_peers(s, hosts, (size_t)n) != LT_OK) {
    s->door->hosts_free(hosts, (size_t)n);
    return;
  }
  /* Every server is told the session's servers first (the holders its instructions may
   * name): the new ones in their greeting, the others in a PROGRAM sent before any
   * instruction that names a new one. A greeting that fails at once reports to
   * lt_eval_start, which takes the evaluator's lock: the door's `hosts` call has let go of it. */
  uint32_t before = s->next_sid; /* sessions given after it are greeted with the new list */
  while (s->hosts_seen < (size_t)n) {
    if (add_entry(s, s->hosts_seen, hosts[s->hosts_seen].fd) < 0) break;
    s->hosts_seen++;
  }
  s->door->hosts_free(hosts, (size_t)n);
  for (size_t i = 0; i < s->nsrv; i++) {
    lt_conn_t *c = &s->srv[i].conn;
    if (lt__server_gone(s, i) || s->srv[i].sid - before - 1 < s->next_sid - before) continue;
    int rc = lt__conn_program(c, s->tmpl->kernels, s->tmpl->nkernels, (const char *const *)s->peers,
                              (uint32_t)s->npeers, lt__clock_ms());
    if (rc != LT_OK) lt__server_mark_dead(s, i, lt_strerror(rc), 0);
  }
}

void lt__link_drain(lt_sched_t *s, size_t idx) {
  lt_conn_t *c = &s->srv[idx].conn;
  lt_slot_t *sl = &s->srv[idx].slot;
  if (c->state == LT_CONN_DEAD) { /* nothing there: it is only not greeted again */
    snprintf(sl->why, sizeof sl->why, "removed");
    sl->retry_at_ms = 0;
    start_answered(s, idx, 0);
    return;
  }
  if (c->state == LT_CONN_HELLO) {
    lt__server_mark_dead(s, idx, "removed", 1);
    return;
  }
  lt__log(LT_LOG_INFO, "server %s: draining (%u instructions out)", c->endpoint, c->inflight);
  c->state = LT_CONN_STOPPING;
  lt__fail_cancel_server(s, idx);
  /* The server shows it in `lithium status` while the running instructions finish. */
  lt_msg_t hb = {.type = LT_MSG_HEARTBEAT};
  hb.u.heartbeat.draining = true;
  lt__conn_send(c, &hb, NULL, lt__clock_ms());
}

void lt__link_retire(lt_sched_t *s, size_t idx) {
  lt_conn_t *c = &s->srv[idx].conn;
  if (c->state != LT_CONN_DEAD && c->state != LT_CONN_HELLO) {
    lt_msg_t bye = {.type = LT_MSG_BYE};
    lt__conn_send(c, &bye, NULL, lt__clock_ms());
  }
  lt__server_mark_dead(s, idx, "removed", 1);
}

/* tell_lost tells every other live server that `endpoint` is gone: their instructions
 * waiting for its values fail at once and are recomputed, instead of waiting for a fetch
 * timeout. */
static void tell_lost(lt_sched_t *s, size_t idx) {
  const char *holders[1] = {s->srv[idx].conn.endpoint};
  lt_msg_t m = {.type = LT_MSG_LOST};
  m.u.lost.nholders = 1;
  m.u.lost.holders = holders;
  for (size_t i = 0; i < s->nsrv; i++)
    if (i != idx && lt__server_alive(s, i))
      lt__conn_send(&s->srv[i].conn, &m, NULL, lt__clock_ms());
}

/* why_unanswered says why a server never welcomed us, from what its connection showed. */
static const char *why_unanswered(const lt_conn_t *c) {
  if (c->connected) return "no welcome";
  if (c->refused) return "refused";
  if (c->unresolvable) return "unresolvable";
  return "no answer";
}

int lt__link_close(lt_sched_t *s, size_t idx) {
  lt_server_t *v = &s->srv[idx];
  lt_conn_t *c = &v->conn;
  lt_slot_t *sl = &v->slot;
  if (c->state == LT_CONN_DEAD) return 0;
  const char *why = v->why;
  int was_hello = c->state == LT_CONN_HELLO;
  snprintf(sl->why, sizeof sl->why, "%s", why);
  sl->backoff_ms = sl->backoff_ms ? sl->backoff_ms * 2 : RETRY_FIRST_MS;
  if (sl->backoff_ms > RETRY_MAX_MS) sl->backoff_ms = RETRY_MAX_MS;
  sl->retry_at_ms = v->final ? 0 : lt__clock_ms() + (was_hello ? sl->backoff_ms : 0);
  if (sl->mute && !v->final && !sl->removed) {
    sl->probation = 1;
    sl->retry_at_ms = lt__clock_ms() + sl->backoff_ms;
    lt__log(LT_LOG_WARN,
            "server %s sent nothing after its welcome: greeted again in %u ms, no work "
            "until it answers",
            c->endpoint, sl->backoff_ms);
  }
  if (was_hello && sl->sessions > 1) {
    /* A greeting again that found nobody yet: quiet, it goes on. */
    lt__log(LT_LOG_DEBUG, "server %s: %s", c->endpoint, why);
  } else if (sl->removed) {
    lt__log(LT_LOG_INFO, "server %s: drained, its session ended", c->endpoint);
  } else {
    lt__log(LT_LOG_WARN, "server %s is %s: %s", c->endpoint, was_hello ? "unreachable" : "dead",
            why);
  }
  lt__trace_server_lost(s->trace, s, idx, why);
  c->state = LT_CONN_DEAD;
  v->gone = 0;
  /* A dead link is closed at once: nothing more is read from it or sent to it. */
  lt__conn_shut(c);
  v->relq.n = 0;
  if (was_hello) {
    start_answered(s, idx, 0);
    return 0;
  }
  tell_lost(s, idx);
  return 1;
}

/* greet_again greets a dead server again once its wait is over: in place when it never
 * welcomed this entry, else in a new entry (values of the old session are lost for good). */
static void greet_again(lt_sched_t *s, size_t idx, int64_t now) {
  lt_slot_t *sl = &s->srv[idx].slot;
  if (s->srv[idx].conn.state != LT_CONN_DEAD || sl->retry_at_ms == 0 || now < sl->retry_at_ms ||
      sl->removed)
    return;
  sl->retry_at_ms = 0;
  if (!sl->was_ready) {
    uint32_t backoff = sl->backoff_ms, sessions = sl->sessions;
    lt__conn_close(&s->srv[idx].conn);
    greet(s, idx);
    sl->backoff_ms = backoff;
    sl->sessions = sessions;
    return;
  }
  long next = add_entry(s, sl->host, sl->watch_fd);
  sl = &s->srv[idx].slot; /* add_entry may move the table */
  if (next < 0) {
    sl->retry_at_ms = now + RETRY_MAX_MS;
    return;
  }
  sl->successor = next;
  sl->watch_fd = -1;
  s->srv[next].slot.predecessor = (long)idx;
  memcpy(s->srv[next].slot.why, sl->why, sizeof sl->why);
  s->srv[next].slot.sessions = sl->sessions + 1;
  s->srv[next].slot.probation = sl->probation;
  s->srv[next].slot.answered = 1;
}

static void ping(lt_sched_t *s, size_t i, int64_t now);

/* lacking keeps work off server idx when its welcome `m` lacks a module of the program that
 * it will not be sent (one warning a server), and tells lt_eval_start of an initial host. */
static void lacking(lt_sched_t *s, size_t idx, const lt_msg_t *m) {
  lt_slot_t *sl = &s->srv[idx].slot;
  char names[1024];
  sl->lacks = lt__ship_lacking(s->ship, m, names, sizeof names) > 0;
  if (!sl->lacks) return;
  if (!sl->answered) s->door->host_lacks(s->ev, s->srv[idx].conn.endpoint, names);
  if (sl->lacks_warned) return;
  sl->lacks_warned = 1;
  lt__log(LT_LOG_WARN,
          "server %s has no copy of module(s) %s of the program (in its --modules "
          "directories) and will not be sent one (option ship_modules, lithium-server "
          "--accept-modules): it gets no work of this evaluation",
          s->srv[idx].conn.endpoint, names);
}

static void on_welcome(lt_sched_t *s, size_t idx, const lt_msg_t *m) {
  lt_conn_t *c = &s->srv[idx].conn;
  lt_slot_t *sl = &s->srv[idx].slot;
  if (m->u.welcome.version != LT_PROTO_VERSION) {
    lt__server_mark_dead(s, idx, "protocol version mismatch", 1);
    return;
  }
  free(c->server_id);
  c->server_id = strdup(m->u.welcome.server_id);
  c->threads = m->u.welcome.threads;
  c->speed = m->u.welcome.speed;
  c->incarnation = m->u.welcome.incarnation;
  c->max_frame = m->u.welcome.max_frame;
  s->srv[idx].pace.workers = c->threads;
  lt__pace_welcome(&s->srv[idx].pace, m->u.welcome.cores, m->u.welcome.cpus);
  /* Modules go before any instruction: the session takes work from now on. */
  lt__ship_welcome(s->ship, c, m, lt__clock_ms());
  lacking(s, idx, m);
  c->state = LT_CONN_READY;
  sl->was_ready = 1;
  sl->dones_in = 0; /* the server numbers this session's dones from 1 */
  sl->handshakes_lost = 0;
  sl->backoff_ms = 0;
  sl->why[0] = '\0';
  lt__log(sl->sessions > 1 ? LT_LOG_WARN : LT_LOG_INFO, "server %s (%s) ready%s, %u threads",
          c->endpoint, m->u.welcome.server_id, sl->sessions > 1 ? " again" : "", c->threads);
  start_answered(s, idx, 1);
  lt__policies_server_ready(s, idx, m);
  lt__fail_session_ended(s, idx, m); /* after the policies heard: they read its losses */
  /* The round trip is measured from the start: lookahead's depth never rests on a guess
   * once the first completion paces the server (LT_RTT_GUESS_US is for the meantime). */
  if (s->opts->lookahead) ping(s, idx, lt__clock_ms());
}

static void on_error(lt_sched_t *s, size_t idx, const lt_msg_t *m) {
  lt_conn_t *c = &s->srv[idx].conn;
  lt__log(LT_LOG_WARN, "server %s refused a message: %s (%s)", c->endpoint, m->u.error.message,
          lt_strerror(m->u.error.code));
  if (c->state == LT_CONN_HELLO && m->u.error.code == LT_EAUTH) {
    auth_failed(s, idx, m->u.error.message);
    return;
  }
  if (c->state == LT_CONN_HELLO) {
    lt__server_mark_dead(s, idx, m->u.error.message, m->u.error.code == LT_EVERSION);
    return;
  }
  /* In a session, a refusal means the server has lost our session (it restarted, or dropped
   * us while we were paused) or refused an execute: the instructions we think it holds may
   * be gone. The session ends now; its work goes elsewhere and the server is greeted again. */
  char why[160];
  snprintf(why, sizeof why, "%s: %s",
           m->u.error.code == LT_ESTATE ? "it lost our session" : "it refused a message",
           m->u.error.message);
  lt__server_mark_dead(s, idx, why, 0);
}

/* dones_lost tells how many dones of server idx's session message m shows lost on the way,
 * and counts the done it is: the messages of a session arrive in order, so a done numbered
 * past the next one, or a heartbeat answer counting more dones than arrived, means that
 * some never will (a send the server failed, or a message dropped between). Dones before
 * the welcome, and unnumbered ones (an older server), are not counted. */
static uint64_t dones_lost(lt_sched_t *s, size_t idx, const lt_msg_t *m) {
  lt_slot_t *sl = &s->srv[idx].slot;
  if (s->srv[idx].conn.state == LT_CONN_HELLO || lt__server_gone(s, idx)) return 0;
  if (m->type == LT_MSG_HEARTBEAT)
    return m->u.heartbeat.dones > sl->dones_in ? m->u.heartbeat.dones - sl->dones_in : 0;
  if (m->type != LT_MSG_DONE || m->u.done.batch == 0) return 0;
  uint64_t lost = m->u.done.batch > sl->dones_in + 1 ? m->u.done.batch - sl->dones_in - 1 : 0;
  if (m->u.done.batch > sl->dones_in) sl->dones_in = m->u.done.batch;
  return lost;
}

/* dones_missing ends server idx's session when message m shows dones of it lost: what they
 * completed would never be known, and its work would wait for ever. The work goes elsewhere
 * and the server is greeted again (a new session numbers its dones anew). Returns 1 if so. */
static int dones_missing(lt_sched_t *s, size_t idx, const lt_msg_t *m) {
  uint64_t lost = dones_lost(s, idx, m);
  if (lost == 0) return 0;
  s->lost_dones += lost;
  char why[96];
  snprintf(why, sizeof why, "%" PRIu64 " of its done messages never arrived", lost);
  lt__log(LT_LOG_WARN, "server %s: %s: its session ends, its work goes again",
          s->srv[idx].conn.endpoint, why);
  lt__server_mark_dead(s, idx, why, 0);
  return 1;
}

int lt__link_on_message(lt_sched_t *s, size_t idx, const lt_msg_t *m) {
  lt_conn_t *c = &s->srv[idx].conn;
  lt_slot_t *sl = &s->srv[idx].slot;
  if (c->state != LT_CONN_HELLO && !sl->spoke) { /* a session that speaks after its welcome */
    sl->spoke = 1;
    sl->probation = 0;
  }
  if (m->has_load) {
    if (c->incarnation != 0 && m->load.incarnation != 0 && m->load.incarnation != c->incarnation) {
      /* Another process answers on this endpoint: our session died with the old one. */
      lt__server_mark_dead(s, idx, "the server restarted (new incarnation)", 0);
      return 1;
    }
    c->load = m->load;
    lt__pace_load(&s->srv[idx].pace, &m->load);
    if (m->load.stopping && c->state == LT_CONN_READY && !s->srv[idx].slot.removed) {
      lt__log(LT_LOG_INFO, "server %s is stopping: no new work goes there", c->endpoint);
      c->state = LT_CONN_STOPPING;
    }
  }
  if (dones_missing(s, idx, m)) return 1;
  switch (m->type) {
  case LT_MSG_WELCOME:
    if (c->state == LT_CONN_HELLO) on_welcome(s, idx, m);
    return 1;
  case LT_MSG_ERROR:
    on_error(s, idx, m);
    return 1;
  case LT_MSG_HEARTBEAT:
    if (m->u.heartbeat.seq != 0 && s->opts->lookahead) {
      int64_t rtt = lt__clock_us() - (int64_t)m->u.heartbeat.seq;
      if (rtt > 0 && rtt < 10 * 1000000) {
        lt__pace_rtt(&s->srv[idx].pace, (double)rtt);
        lt__pace_noise(&s->srv[idx].pace, (double)rtt, lt__clock_ms());
      }
    }
    return 1;
  case LT_MSG_DONE:
  case LT_MSG_VALUE:
    return 0;
  default:
    lt__log(LT_LOG_DEBUG, "server %s: unexpected %s", c->endpoint, lt__msg_type_name(m->type));
    return 1;
  }
}

void lt__link_watch(lt_sched_t *s, size_t idx) {
  lt_conn_event_t ev;
  while (!lt__server_gone(s, idx) &&
         (ev = lt__conn_monitor(&s->srv[idx].conn)) != LT_CONN_EV_NONE) {
    if (ev == LT_CONN_EV_DISCONNECTED) lt__server_mark_dead(s, idx, "connection lost", 0);
    if (ev == LT_CONN_EV_AUTH_FAILED)
      auth_failed(s, idx,
                  "the CURVE handshake failed (a key the server does not allow, a wrong "
                  "server key, or CURVE on one side only)");
    if (ev == LT_CONN_EV_HANDSHAKE_LOST) handshake_lost(s, idx);
  }
}

void lt__link_watch_child(lt_sched_t *s, size_t idx) {
  lt_slot_t *sl = &s->srv[idx].slot;
  char buf[256];
  ssize_t n = read(sl->watch_fd, buf, sizeof buf);
  if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) return;
  sl->watch_fd = -1;
  /* Nobody restarts a spawned server. */
  lt__server_mark_dead(s, idx, "the server process exited", 1);
}

/* send_window tells server i its window at once, in an EXECUTE with no instruction. */
static int send_window(lt_sched_t *s, size_t i, int64_t now) {
  lt_msg_t w = {.type = LT_MSG_EXECUTE};
  w.u.execute.max_active = s->srv[i].pace.window;
  w.u.execute.timeout_ms = s->opts->task_timeout_ms;
  return lt__conn_send(&s->srv[i].conn, &w, NULL, now);
}

/* ping sends server i a heartbeat that carries its send time: the answer, which the
 * server's loop sends at once, measures the round trip (lookahead's depth, pace.c). */
static void ping(lt_sched_t *s, size_t i, int64_t now) {
  lt_msg_t hb = {.type = LT_MSG_HEARTBEAT};
  hb.u.heartbeat.seq = (uint64_t)lt__clock_us();
  s->srv[i].pace.last_ping_ms = now;
  lt__conn_send(&s->srv[i].conn, &hb, NULL, now);
}

/* beat keeps server i's session: the throttle's window, missed heartbeats, pings. */
static void beat(lt_sched_t *s, size_t i, int64_t now) {
  const lt_options_t *o = s->opts;
  lt_server_t *v = &s->srv[i];
  lt_conn_t *c = &v->conn;
  if (lt__pace_control(&v->pace, o, now, s->t0_ms) && o->throttle) {
    int rc = send_window(s, i, now);
    if (rc != LT_OK) {
      lt__server_mark_dead(s, i, lt_strerror(rc), 0);
      return;
    }
  }
  /* Messages waiting unread mean the server is alive and this loop was late. */
  if (lt__conn_readable(c)) c->last_recv_ms = now;
  if (now - c->last_recv_ms > 3 * (int64_t)o->heartbeat_ms) {
    v->slot.mute = !v->slot.spoke;
    lt__server_mark_dead(s, i, v->slot.mute ? "silent since its welcome" : "missed 3 heartbeats",
                         0);
  } else if (now - c->last_send_ms >= (int64_t)o->heartbeat_ms ||
             now - c->last_recv_ms >= (int64_t)o->heartbeat_ms ||
             (o->lookahead && now - v->pace.last_ping_ms >= LT_PING_MS)) {
    ping(s, i, now);
  }
}

void lt__links_tick(lt_sched_t *s, int64_t now) {
  const lt_options_t *o = s->opts;
  for (size_t i = 0; i < s->nsrv; i++) {
    greet_again(s, i, now); /* may add an entry: the table may move */
    lt_conn_t *c = &s->srv[i].conn;
    if (lt__server_gone(s, i)) continue;
    if (c->state == LT_CONN_HELLO && now - c->opened_ms > (int64_t)o->connect_timeout_ms)
      lt__server_mark_dead(s, i, why_unanswered(c), 0);
    else if (lt__server_alive(s, i))
      beat(s, i, now);
  }
}

void lt__links_close_all(lt_sched_t *s) {
  for (size_t i = 0; i < s->nsrv; i++)
    lt__conn_close(&s->srv[i].conn);
}
