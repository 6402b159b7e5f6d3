/* server.c: lithium-server's life cycle and message dispatch. Sets up the loop, the ROUTER
 * socket, store, modules and workers; decodes every message (replying LT_MSG_ERROR to what
 * cannot be decoded or is not allowed), handles the session-level messages itself and hands
 * EXECUTE and CANCEL to task.c, FETCH to fetch.c (links to peer servers are peer.c); drops
 * idle sessions; and shuts down on SIGINT/SIGTERM once running kernels are done. The
 * handlers send and settle through the hooks it installs in lt_server_t (send, settle):
 * none of them calls up into this file. Loop thread only. */
#include "server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <lithium/error.h>
#include "bufpool.h"
#include "calibrate.h"
#include "conns.h"
#include "cpus.h"
#include "crashlog.h"
#include "deadline.h"
#include "curve.h"
#include "fetch.h"
#include "log.h"
#include "oid.h"
#include "peer.h"
#include "quota.h"
#include "safefile.h"
#include "session.h"
#include "shipped.h"
#include "shm.h"
#include "task.h"

static void server_settle(lt_server_t *srv);

#define SNDHWM         100000
#define ROUTER_RID_LEN 5 /* the ROUTER's own routing ids: 0x00 and a 32-bit counter */
/* A connection that has not completed its ZMTP handshake (CURVE and ZAP included) this long
 * is closed: a bare TCP connection holds a descriptor 5 s, not libzmq's default 30 s. */
#define HANDSHAKE_MS    5000
#define CLOSE_LINGER_MS 1000

/* ---------------------------------------------------------------------------------------
 * Strings and sending. */

static void free_hdr(void *data, void *hint) {
  (void)hint;
  free(data);
}

static int server_send(lt_server_t *srv, const void *rid, size_t rid_len, lt_msg_t *msg,
                       lt_value_t *const *vals, uint32_t nvals) {
  lt_bytes_t fstack[8];
  zmq_msg_t pstack[10];
  lt_bytes_t *f = nvals <= 8 ? fstack : malloc(nvals * sizeof *f);
  zmq_msg_t *parts = nvals <= 8 ? pstack : malloc((nvals + 2) * sizeof *parts);
  int rc = LT_ENOMEM;
  if (f == NULL || parts == NULL) goto out;
  for (uint32_t i = 0; i < nvals; i++)
    f[i] = (lt_bytes_t){vals[i]->data, vals[i]->len};
  msg->has_load = true;
  lt__load_fill(srv, &msg->load);
  msg->nframes = nvals;
  msg->frames = nvals ? f : NULL;
  void *hdr;
  size_t hlen;
  if ((rc = lt__msg_encode(msg, &hdr, &hlen)) != LT_OK) {
    lt__log(LT_LOG_ERROR, "cannot encode a %s message: %s", lt__msg_type_name(msg->type),
            lt_strerror(rc));
    goto out;
  }
  size_t n = 0;
  if (zmq_msg_init_size(&parts[n], rid_len) != 0) {
    free(hdr);
    goto nomem;
  }
  memcpy(zmq_msg_data(&parts[n++]), rid, rid_len);
  if (zmq_msg_init_data(&parts[n], hdr, hlen, free_hdr, NULL) != 0) {
    free(hdr);
    goto nomem;
  }
  n++;
  for (uint32_t i = 0; i < nvals; i++, n++) {
    if (lt__value_msg_init(&parts[n], vals[i]) != 0) goto nomem;
  }
  rc = lt__zuv_send(&srv->zuv, parts, n);
  goto out;
nomem:
  for (size_t i = 0; i < n; i++)
    zmq_msg_close(&parts[i]);
  lt__log(LT_LOG_ERROR, "out of memory sending a %s message", lt__msg_type_name(msg->type));
  rc = LT_ENOMEM;
out:
  if (f != fstack) free(f);
  if (parts != pstack) free(parts);
  msg->frames = NULL;
  msg->nframes = 0;
  return rc;
}

void lt__server_send_error(lt_server_t *srv, const void *rid, size_t rid_len, int code,
                           const char *fmt, ...) {
  char text[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  lt__utf8_sanitize(text);
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_ERROR;
  m.u.error.code = code;
  m.u.error.message = text;
  server_send(srv, rid, rid_len, &m, NULL, 0);
}

/* ---------------------------------------------------------------------------------------
 * Sessions. */

void lt__server_drop_session(lt_server_t *srv, lt_session_t *s, const char *why) {
  lt__fetch_drop_session(srv, s, LT_OK);
  lt__shm_session_gone(srv, s);
  lt__task_drop_session(srv, s);
  lt__session_flush(srv, s);
  /* A peer link's client id names no values: its fetched copies belong to the sessions
   * they were fetched for. */
  size_t n = lt__peer_session(s) ? 0 : lt__store_release_client(srv->store, s->client_id);
  char cid[12];
  lt__log(LT_LOG_INFO, "session '%s' (client %s) ended: %s; %zu values released", s->name,
          lt__short_id(s->client_id, cid), why, n);
  lt__conns_unbound(srv, s->fd, s->conn);
  lt__session_free(srv, s);
  lt__quota_trim(srv);
}

/* claim decides whether a hello may use its client id while another connection's session
 * `o` has it. The id is bound to the first connection that said hello with it; another
 * connection may take it over only by proving it is the same client: the same secret (a
 * random number the client never shows anyone but its own servers) and, under CURVE, the
 * same public key. A client that greets again on a new connection (it declared this server
 * dead) proves both; a stranger that learnt the id proves neither. Two peer links of one
 * server (one server may reach this one under two endpoint spellings) share id and secret
 * and coexist; a client session is replaced, so that the old one releases the client's
 * values now, before the new one has any. */
static int claim(lt_server_t *srv, const lt_session_t *o, const lt_msg_t *m, const char *key,
                 bool *replace) {
  (void)srv;
  *replace = false;
  if (o->secret != m->u.hello.secret || strcmp(o->key, key) != 0) return LT_EAUTH;
  *replace = !lt__peer_session(o);
  return LT_OK;
}

/* A welcome states the server's copy of at most this many of the hello's modules. */
#define WELCOME_MAX_MODULES 1024

/* welcome_modules states in welcome `w` the copy of each module the hello `m` names that
 * this server would run: the SHA-256 of the one loaded, else of the file it would load, ""
 * when it has none (or the name is not a module name). The entries and their hex digits
 * live in one allocation, w->u.welcome.modules; without memory the welcome states none. */
static void welcome_modules(lt_server_t *srv, const lt_msg_t *m, lt_msg_t *w) {
  uint32_t n = m->u.hello.nmodules;
  if (n > WELCOME_MAX_MODULES) n = WELCOME_MAX_MODULES;
  if (n == 0) return;
  lt_module_info_t *v = malloc(n * (sizeof *v + LT_SHA256_HEX));
  if (v == NULL) return;
  char(*hex)[LT_SHA256_HEX] = (void *)(v + n);
  for (uint32_t i = 0; i < n; i++) {
    const char *name = m->u.hello.modules[i];
    hex[i][0] = '\0';
    if (lt__module_name_valid(name)) lt__modules_sha256(srv->mods, name, hex[i]);
    v[i] = (lt_module_info_t){name, hex[i]};
  }
  w->u.welcome.modules = v;
  w->u.welcome.nmodules = n;
}

static void handle_hello(lt_server_t *srv, lt_session_t *s, const void *rid, size_t rid_len,
                         const lt_msg_t *m, uint64_t conn, const char *key) {
  if (m->u.hello.version != LT_PROTO_VERSION) {
    lt__server_send_error(srv, rid, rid_len, LT_EVERSION,
                          "protocol version %u not supported (this server speaks %d)",
                          m->u.hello.version, LT_PROTO_VERSION);
    return;
  }
  if (s != NULL) lt__server_drop_session(srv, s, "a new hello on the same connection");
  char cid[12];
  lt_session_t *o, *tmp;
  bool peer = lt__peer_name(m->u.hello.name);
  HASH_ITER(hh, srv->sessions, o, tmp) {
    /* Peer links and client sessions live apart: a peer link holds no values and reads
     * only with a session's secret, so a "peer" hello with a client's id neither keeps that
     * client out nor gets anything of its. */
    if (o->client_id != m->u.hello.client_id || lt__peer_session(o) != peer) continue;
    bool replace;
    if (claim(srv, o, m, key, &replace) != LT_OK) {
      lt__log_limited(LT_LOG_WARN,
                      "refused a hello for client %s%s%s: the id is in use by another "
                      "connection that this one cannot prove to be",
                      lt__short_id(m->u.hello.client_id, cid), key[0] ? " from key " : "", key);
      lt__server_send_error(srv, rid, rid_len, LT_EAUTH,
                            "client id in use by another connection (a new session needs the "
                            "secret and the key of the old one)");
      return;
    }
    if (replace) lt__server_drop_session(srv, o, "replaced by a new connection of the same client");
  }
  if (!lt__quota_session_ok(srv)) {
    lt__server_send_error(srv, rid, rid_len, LT_EAGAIN, "server full: %u sessions (--max-sessions)",
                          lt__quota_max_sessions(srv));
    return;
  }
  int rc = lt__session_new(srv, &s, rid, rid_len, m->u.hello.client_id, m->u.hello.name);
  if (rc == LT_OK) {
    s->inline_max = m->u.hello.inline_max;
    s->secret = m->u.hello.secret;
    s->conn = conn;
    snprintf(s->key, sizeof s->key, "%s", key);
  }
  if (rc != LT_OK) {
    lt__server_send_error(srv, rid, rid_len, rc, "cannot open a session: %s", lt_strerror(rc));
    return;
  }
  lt__log(LT_LOG_INFO, "session '%s' (client %s%s%.8s) opened", s->name,
          lt__short_id(s->client_id, cid), key[0] ? ", key " : "", key);
  lt_msg_t w;
  memset(&w, 0, sizeof w);
  w.type = LT_MSG_WELCOME;
  w.u.welcome.version = LT_PROTO_VERSION;
  w.u.welcome.server_id = srv->server_id;
  w.u.welcome.cores = srv->cores;
  w.u.welcome.threads = srv->threads;
  w.u.welcome.speed = srv->speed;
  w.u.welcome.cpus = srv->cpus;
  w.u.welcome.now_us = lt__executor_now_us();
  w.u.welcome.max_frame = srv->max_frame;
  w.u.welcome.incarnation = srv->incarnation;
  lt__crashlog_take(s->client_id, &w.u.welcome.crash_signal, &w.u.welcome.crashed_incarnation,
                    &w.u.welcome.crash_culprit, &w.u.welcome.crashed, &w.u.welcome.ncrashed);
  w.u.welcome.accept_modules = srv->shipstore != NULL;
  /* Only a peer server may learn the unix socket: a client never fetches by memfd. */
  w.u.welcome.same_host = lt__peer_name(m->u.hello.name) ? lt__shm_same_host(srv) : "";
  welcome_modules(srv, m, &w);
  server_send(srv, rid, rid_len, &w, NULL, 0);
  free(w.u.welcome.crashed);
  free(w.u.welcome.modules);
}

/* handle_lost fails what this server waits for from holders the client found dead; an
 * endpoint that could not be a holder costs the sender an error reply, the others are
 * still handled. */
static void handle_lost(lt_server_t *srv, lt_session_t *s, const lt_msg_t *m) {
  for (uint32_t i = 0; i < m->u.lost.nholders; i++) {
    const char *ep = m->u.lost.holders[i];
    if (!lt__peer_endpoint_ok(ep)) {
      lt__server_send_error(srv, s->rid, s->rid_len, LT_EINVAL,
                            "lost: holder '%.64s' is not a tcp:// endpoint of at most %d bytes", ep,
                            LT_PEER_EP_MAX);
      continue;
    }
    if (lt__peer_remote(srv, ep)) lt__peer_lost(srv, s->client_id, ep);
  }
}

/* may_touch tells whether session `s` may read or release value `id`: its own session's
 * values (the client half of the id is its client id), or, for a peer server, the values
 * of a live session whose secret it presents: the client gave it to its servers only. */
static bool may_touch(lt_server_t *srv, const lt_session_t *s, lt_oid_t id, uint64_t secret) {
  if (!lt__peer_session(s)) return id.client == s->client_id;
  const lt_session_t *o = lt__session_by_client(srv, id.client);
  return o != NULL && secret != 0 && o->secret == secret;
}

/* refuse_fetch answers a fetch of `id` with `status` and `text`, no value. */
static void refuse_fetch(lt_server_t *srv, lt_session_t *s, lt_oid_t id, int status,
                         const char *text) {
  lt_msg_t v;
  memset(&v, 0, sizeof v);
  v.type = LT_MSG_VALUE;
  v.u.value.id = id;
  v.u.value.status = status;
  v.u.value.errmsg = text;
  v.u.value.frame = -1;
  server_send(srv, s->rid, s->rid_len, &v, NULL, 0);
}

static void handle_fetch(lt_server_t *srv, lt_session_t *s, const lt_msg_t *m) {
  lt_oid_t id = m->u.fetch.id;
  char cid[12];
  /* A peer's fetch of a value of a client with no session here: this server has none of its
   * values (it restarted on its endpoint, or the session ended), so the value is lost, as
   * with a server that died, and the reader's task starts again from its input. Nothing is
   * said of any other client. */
  if (lt__peer_session(s) && lt__session_by_client(srv, id.client) == NULL) {
    char text[160];
    snprintf(text, sizeof text,
             "no session of client %s on this server (it restarted, or the session ended): "
             "its values are lost",
             lt__short_id(id.client, cid));
    refuse_fetch(srv, s, id, LT_ELOST, text);
    return;
  }
  if (!may_touch(srv, s, id, m->u.fetch.secret)) {
    lt__log_limited(LT_LOG_WARN,
                    "session '%s': refused a fetch of a value of client %s (not its own)", s->name,
                    lt__short_id(id.client, cid));
    refuse_fetch(srv, s, id, LT_EAUTH, "not a value of this session");
    return;
  }
  lt__fetch_handle(srv, s, id, m->u.fetch.release, m->u.fetch.max_frame, m->u.fetch.shm);
}

static void handle_release(lt_server_t *srv, lt_session_t *s, const lt_msg_t *m) {
  uint32_t refused = 0;
  for (uint32_t i = 0; i < m->u.release.nids; i++) {
    if (may_touch(srv, s, m->u.release.ids[i], m->u.release.secret))
      lt__store_release(srv->store, m->u.release.ids[i]);
    else
      refused++;
  }
  if (refused == 0) return;
  char mine[12], theirs[12];
  uint64_t other = 0;
  for (uint32_t i = 0; i < m->u.release.nids && other == 0; i++)
    if (!may_touch(srv, s, m->u.release.ids[i], m->u.release.secret))
      other = m->u.release.ids[i].client;
  lt__log_limited(LT_LOG_WARN,
                  "session '%s' (client %s): refused the release of %u values not its own "
                  "(client %s)",
                  s->name, lt__short_id(s->client_id, mine), refused, lt__short_id(other, theirs));
  /* A peer link takes an error for the end of the link: it gets none for a release. */
  if (!lt__peer_session(s))
    lt__server_send_error(srv, s->rid, s->rid_len, LT_EAUTH,
                          "release: %u ids are not values of this session", refused);
}

static void handle_program(lt_server_t *srv, lt_session_t *s, const lt_msg_t *m) {
  int rc =
      lt__session_program(srv, s, (const char *const *)m->u.program.kernels, m->u.program.nkernels);
  if (rc != LT_OK) {
    lt__server_send_error(srv, s->rid, s->rid_len, rc, "cannot load the program: %s",
                          lt_strerror(rc));
    return;
  }
  if (m->u.program.npeers > LT_SESSION_MAX_PEERS) {
    lt__server_send_error(srv, s->rid, s->rid_len, LT_EQUOTA,
                          "program: %u peers; a session names at most %d servers",
                          m->u.program.npeers, LT_SESSION_MAX_PEERS);
    return;
  }
  rc = lt__session_peers(s, m->u.program.peers, m->u.program.npeers);
  if (rc != LT_OK)
    lt__server_send_error(srv, s->rid, s->rid_len, rc,
                          "program: a peer is not 'tcp://ENDPOINT [Z85 key]': %s", lt_strerror(rc));
}

/* module_refusal says why a MODULE cannot be loaded before its bytes are looked at, or
 * returns NULL: no store, no bytes, over the session's quota, too many modules. */
static const char *module_refusal(lt_server_t *srv, const lt_session_t *s, const lt_msg_t *m,
                                  char *why, size_t len) {
  uint64_t size = m->u.module.size, quota = lt__quota_max_bytes(srv);
  const lt_session_module_t *old = lt__session_shipped(s, m->u.module.name);
  uint64_t held = s->shipped_bytes - (old != NULL && old->mod != NULL ? old->size : 0);
  if (srv->shipstore == NULL)
    snprintf(why, len, "this server does not accept shipped modules (no --accept-modules)");
  else if (m->u.module.frame < 0 && size > srv->max_frame)
    snprintf(why, len, "%llu bytes, over this server's frame limit of %llu bytes (--max-frame)",
             (unsigned long long)size, (unsigned long long)srv->max_frame);
  else if (m->u.module.frame < 0)
    snprintf(why, len, "its bytes were not sent");
  else if (size > quota || held + size > quota)
    snprintf(why, len,
             "%llu bytes, over the session's quota of %llu bytes (--max-session-bytes; %llu held "
             "by modules shipped before)",
             (unsigned long long)size, (unsigned long long)quota, (unsigned long long)held);
  else if (old == NULL && s->nshipped >= LT_SESSION_MAX_SHIPPED)
    snprintf(why, len, "the session has shipped %d modules already", LT_SESSION_MAX_SHIPPED);
  else
    return NULL;
  return why;
}

/* handle_module loads a module the session's client shipped, for that session only, or
 * records why it is refused: the instructions naming it then fail with the reason. There is
 * no answer (an error would end the client's session). A name that is no module name costs
 * the sender the message. */
static void handle_module(lt_server_t *srv, lt_session_t *s, const lt_msg_t *m) {
  const char *name = m->u.module.name;
  if (!lt__module_name_valid(name)) {
    lt__server_send_error(srv, s->rid, s->rid_len, LT_EINVAL,
                          "module: '%.64s' is not a module name", name);
    return;
  }
  char why[600], err[700];
  lt_shipped_t *mod = NULL;
  int rc = LT_ENOMODULE;
  if (module_refusal(srv, s, m, why, sizeof why) == NULL) {
    const lt_bytes_t *f = &m->frames[m->u.module.frame];
    rc = lt__shipstore_load(srv->shipstore, name, m->u.module.sha256, f->data, f->len, &mod, why,
                            sizeof why);
  }
  if (rc == LT_OK) {
    lt__log(LT_LOG_INFO, "session '%s': module '%s' (sha256 %.16s..., %llu bytes) loaded for it",
            s->name, name, m->u.module.sha256, (unsigned long long)m->u.module.size);
    err[0] = '\0';
  } else {
    snprintf(err, sizeof err, "shipped module '%s' refused: %s", name, why);
    lt__log(LT_LOG_WARN, "session '%s': %s", s->name, err);
  }
  rc = lt__session_ship(srv, s, name, m->u.module.size, mod, rc == LT_OK ? LT_OK : LT_ENOMODULE,
                        rc == LT_OK ? NULL : err);
  if (rc != LT_OK)
    lt__server_send_error(srv, s->rid, s->rid_len, rc, "module '%s': %s", name, lt_strerror(rc));
}

/* peer_may tells whether a peer link may send a message of `type`. A peer server only
 * fetches values (and releases the copies it asked to be released): it never runs
 * instructions, so it can never make a value (a "peer" that could would plant values in the
 * id space of a client yet to come, owned by no session). */
static bool peer_may(lt_msg_type_t type) {
  return type == LT_MSG_FETCH || type == LT_MSG_RELEASE || type == LT_MSG_HEARTBEAT ||
         type == LT_MSG_BYE;
}

static void refuse_peer(lt_server_t *srv, lt_session_t *s, lt_msg_type_t type) {
  lt__log_limited(LT_LOG_WARN, "session '%s': refused %s from a peer link (peers only fetch)",
                  s->name, lt__msg_type_name(type));
  lt__server_send_error(srv, s->rid, s->rid_len, LT_EAUTH,
                        "a peer link may only fetch and release values (got %s)",
                        lt__msg_type_name(type));
}

/* dispatch hands message `m` of connection `conn` (with CURVE, of key `key`) to its
 * handler. A session is bound to the connection that said hello, and under CURVE to its
 * key too: a routing id is never a credential. A session found by the routing id of
 * another connection is one whose connection is gone (libzmq gives a routing id to a new
 * connection only once the old one has left): it is dropped, and the message is a new
 * connection's. */
static void dispatch(lt_server_t *srv, const void *rid, size_t rid_len, const lt_msg_t *m,
                     zmq_msg_t *payloads, uint64_t conn, const char *key) {
  lt_session_t *s = lt__session_find(srv, rid, rid_len);
  if (s != NULL && (s->conn != conn || strcmp(s->key, key) != 0)) {
    lt__server_drop_session(srv, s, "its connection is gone (another one has its routing id)");
    s = NULL;
  }
  if (m->type == LT_MSG_HELLO) {
    handle_hello(srv, s, rid, rid_len, m, conn, key);
    return;
  }
  if (m->type == LT_MSG_STATUS) {
    lt__status_reply(srv, rid, rid_len);
    return;
  }
  switch (m->type) {
  case LT_MSG_PROGRAM:
  case LT_MSG_EXECUTE:
  case LT_MSG_FETCH:
  case LT_MSG_RELEASE:
  case LT_MSG_CANCEL:
  case LT_MSG_HEARTBEAT:
  case LT_MSG_BYE:
  case LT_MSG_LOST:
  case LT_MSG_MODULE:
    if (s == NULL) {
      lt__server_send_error(srv, rid, rid_len, LT_ESTATE, "send hello first (got %s)",
                            lt__msg_type_name(m->type));
      return;
    }
    s->last_seen = uv_now(&srv->loop);
    if (lt__peer_session(s) && !peer_may(m->type)) {
      refuse_peer(srv, s, m->type);
      return;
    }
    break;
  default:
    lt__server_send_error(srv, rid, rid_len, LT_EPROTO, "unexpected %s message",
                          lt__msg_type_name(m->type));
    return;
  }
  switch (m->type) {
  case LT_MSG_PROGRAM:
    handle_program(srv, s, m);
    break;
  case LT_MSG_EXECUTE:
    lt__task_execute(srv, s, m, payloads);
    break;
  case LT_MSG_FETCH:
    handle_fetch(srv, s, m);
    break;
  case LT_MSG_RELEASE:
    handle_release(srv, s, m);
    break;
  case LT_MSG_CANCEL:
    lt__task_cancel(srv, s, m->u.cancel.seqs, m->u.cancel.nseqs);
    break;
  case LT_MSG_HEARTBEAT: {
    if (m->u.heartbeat.draining && !s->draining) {
      char cid[12];
      s->draining = true;
      lt__log(LT_LOG_INFO, "session '%s' (client %s): its client drains this server", s->name,
              lt__short_id(s->client_id, cid));
    }
    lt_msg_t h;
    memset(&h, 0, sizeof h);
    h.type = LT_MSG_HEARTBEAT;
    h.u.heartbeat.seq = m->u.heartbeat.seq;
    h.u.heartbeat.now_us = lt__executor_now_us();
    h.u.heartbeat.dones = s->dones_sent;
    server_send(srv, rid, rid_len, &h, NULL, 0);
    if (lt__peer_session(s)) lt__fetch_still_pending(srv, s);
    break;
  }
  case LT_MSG_BYE:
    lt__server_drop_session(srv, s, "bye");
    break;
  case LT_MSG_LOST:
    handle_lost(srv, s, m);
    break;
  case LT_MSG_MODULE:
    handle_module(srv, s, m);
    break;
  default:
    break;
  }
}

/* mark_bound tells the connection table whether the connection numbered `conn` that sent
 * `hdr` has a live session now (conns.h): one that has none is cut after a while. A session
 * whose connection the table holds as bound was told already: nothing to look up. Until the
 * table knows the connection (its accept event may come after the first messages, on a
 * loaded machine), every message of the session tells it again. */
static void mark_bound(lt_server_t *srv, const void *rid, size_t rid_len, zmq_msg_t *hdr,
                       uint64_t conn) {
  lt_session_t *s = lt__session_find(srv, rid, rid_len);
  bool bound = s != NULL && s->conn == conn;
  if (bound && s->fd >= 0) return;
  int fd = zmq_msg_get(hdr, ZMQ_SRCFD);
  if (lt__conns_seen(srv, fd, conn, bound) && bound) s->fd = fd;
}

/* on_message is the socket callback: [routing id][header][payload...]. */
static void on_message(lt_zuv_t *z, zmq_msg_t *parts, size_t n, bool truncated) {
  lt_server_t *srv = z->data;
  if (srv->closing || n == 0) return;
  const void *rid = zmq_msg_data(&parts[0]);
  size_t rid_len = zmq_msg_size(&parts[0]);
  if (rid_len == 0 || rid_len > 255) return; /* not from a ROUTER peer: nobody to answer */
  /* Routing ids the ROUTER makes are a zero byte and a 32-bit counter; one of another shape
   * was chosen by the peer (ZMQ_ROUTING_ID) and is refused. One of that shape may be chosen
   * too (libzmq's "Identity" property cannot tell: its value is a C string, empty for a
   * zero first byte), but sessions are bound to their connections (zap.h), so a routing
   * id is never a credential. A message without a connection number did not pass the ZAP
   * handler: nothing vouches for it. */
  uint64_t conn = n >= 2 ? lt__zap_conn(&parts[1]) : 0;
  if (((const unsigned char *)rid)[0] != 0 || rid_len != ROUTER_RID_LEN) {
    lt__server_send_error(srv, rid, rid_len, LT_EAUTH, "connections may not choose a routing id");
    server_settle(srv);
    return;
  }
  if (n >= 2 && conn == 0) {
    lt__server_send_error(srv, rid, rid_len, LT_EAUTH, "connection not named by the ZAP handler");
    server_settle(srv);
    return;
  }
  if (truncated) {
    lt__log(LT_LOG_DEBUG, "dropped a message of more than %u payload frames", srv->lim.max_frames);
    lt__server_send_error(srv, rid, rid_len, LT_ETOOBIG, "message has more than %u payload frames",
                          srv->lim.max_frames);
  } else if (n < 2) {
    lt__server_send_error(srv, rid, rid_len, LT_EPROTO, "empty message");
  } else {
    for (size_t i = 1; i < n; i++)
      srv->frames[i - 1] = (lt_bytes_t){zmq_msg_data(&parts[i]), zmq_msg_size(&parts[i])};
    lt_msg_t m;
    int rc = lt__msg_decode(&m, srv->frames, n - 1, &srv->lim);
    if (rc != LT_OK) {
      lt__log(LT_LOG_DEBUG, "refused a message of %zu frames: %s", n - 1, lt_strerror(rc));
      lt__server_send_error(srv, rid, rid_len, rc, "cannot decode the message: %s",
                            lt_strerror(rc));
    } else {
      /* Under CURVE the ZAP handler made the client's public key the User-Id of every
       * message of the connection. */
      const char *key = srv->curve ? zmq_msg_gets(&parts[1], "User-Id") : NULL;
      dispatch(srv, rid, rid_len, &m, parts + 2, conn, key != NULL ? key : "");
      lt__msg_clear(&m);
      mark_bound(srv, rid, rid_len, &parts[1], conn);
    }
  }
  server_settle(srv);
}

/* ---------------------------------------------------------------------------------------
 * Settling, idle sessions, shutdown. */

static void close_handles(lt_server_t *srv) {
  if (srv->closing) return;
  srv->closing = true;
  lt_session_t *s, *tmp;
  HASH_ITER(hh, srv->sessions, s, tmp) lt__server_drop_session(srv, s, "server shutting down");
  lt__task_run_failq(srv);
  lt__peer_close_all(srv);
  lt__fetch_close(srv);
  lt__shm_close(srv);
  lt__conns_close(srv);
  if (srv->zuv_started) lt__zuv_close(&srv->zuv, NULL);
  uv_close((uv_handle_t *)&srv->sigint, NULL);
  uv_close((uv_handle_t *)&srv->sigterm, NULL);
  uv_close((uv_handle_t *)&srv->sigusr1, NULL);
  uv_close((uv_handle_t *)&srv->sighup, NULL);
  uv_close((uv_handle_t *)&srv->idle_timer, NULL);
  uv_close((uv_handle_t *)&srv->load_timer, NULL);
  lt__deadline_close(srv);
  lt__executor_free(srv->ex);
  srv->ex = NULL;
}

static void server_settle(lt_server_t *srv) {
  lt__fetch_retry(srv);
  lt__task_run_failq(srv);
  while (srv->dirty != NULL)
    lt__session_flush(srv, srv->dirty);
  if (srv->stopping && !srv->closing && srv->inexec == 0 && srv->failq == NULL) {
    lt__log(LT_LOG_INFO, "nothing running: closing");
    close_handles(srv);
  }
}

static void on_idle_check(uv_timer_t *h) {
  lt_server_t *srv = h->data;
  uint64_t now = uv_now(&srv->loop);
  lt_session_t *s, *tmp;
  HASH_ITER(hh, srv->sessions, s, tmp) {
    if (now - s->last_seen >= srv->idle_ms) {
      char why[64];
      snprintf(why, sizeof why, "silent for %llu ms", (unsigned long long)(now - s->last_seen));
      lt__server_drop_session(srv, s, why);
    }
  }
  server_settle(srv);
}

static void on_signal(uv_signal_t *h, int signum) {
  lt_server_t *srv = h->data;
  if (srv->stopping) {
    /* A signal to the whole process group (a terminal's Ctrl-C, Slurm's scancel) reaches
     * the worker twice, directly and forwarded by its supervisor: only a repeat a second
     * later is someone insisting. */
    if (uv_now(&srv->loop) - srv->stop_ms < 1000) return;
    lt__log(LT_LOG_WARN, "signal %d again: exiting without waiting for running kernels", signum);
    lt__crashlog_leaving();
    _exit(1);
  }
  srv->stop_ms = uv_now(&srv->loop);
  lt__log(LT_LOG_INFO, "signal %d: shutting down (%u instructions on the executor)", signum,
          srv->inexec);
  srv->stopping = true;
  /* Tell every session at once, before anything else goes out, that this server takes no
   * more work: a heartbeat with seq 0 whose load report says stopping (as will every later
   * message). */
  lt_session_t *s, *tmp;
  HASH_ITER(hh, srv->sessions, s, tmp) {
    lt_msg_t hb;
    memset(&hb, 0, sizeof hb);
    hb.type = LT_MSG_HEARTBEAT;
    hb.u.heartbeat.now_us = lt__executor_now_us();
    hb.u.heartbeat.dones = s->dones_sent;
    server_send(srv, s->rid, s->rid_len, &hb, NULL, 0);
  }
  lt__task_shutdown(srv);
  HASH_ITER(hh, srv->sessions, s, tmp) lt__fetch_drop_session(srv, s, LT_ESHUTDOWN);
  server_settle(srv);
}

/* ---------------------------------------------------------------------------------------
 * Set-up and tear-down. */

static bool is_loopback(const char *ep) {
  if (strncmp(ep, "ipc://", 6) == 0 || strncmp(ep, "inproc://", 9) == 0) return true;
  if (strncmp(ep, "tcp://", 6) != 0) return false;
  const char *h = ep + 6;
  return strncmp(h, "127.", 4) == 0 || strncmp(h, "[::1]:", 6) == 0 ||
         strncmp(h, "localhost:", 10) == 0 || strncmp(h, "[::ffff:127.", 12) == 0;
}

static int bind_socket(lt_server_t *srv, const lt_srv_args_t *a, char *err, size_t errlen) {
  /* --max-frame bounds every frame, the header too: ZeroMQ drops a peer that exceeds it
   * before anything is allocated for the frame. */
  int64_t maxmsg = (int64_t)a->max_frame;
  int hwm = SNDHWM, off = 0, on = 1, handshake = HANDSHAKE_MS;
  if (srv->curve && (zmq_setsockopt(srv->router, ZMQ_CURVE_SERVER, &on, sizeof on) != 0 ||
                     zmq_setsockopt(srv->router, ZMQ_CURVE_SECRETKEY, srv->curve_sec, 40) != 0)) {
    snprintf(err, errlen, "cannot set up CURVE: %s", zmq_strerror(zmq_errno()));
    return LT_EIO;
  }
  /* A ZAP domain makes libzmq ask the ZAP handler about every connection, under the NULL
   * mechanism too: that is how connections get their numbers (zap.h). */
  if (zmq_setsockopt(srv->router, ZMQ_ZAP_DOMAIN, "lithium", 7) != 0) {
    snprintf(err, errlen, "cannot set the ZAP domain: %s", zmq_strerror(zmq_errno()));
    return LT_EIO;
  }
  if (zmq_setsockopt(srv->router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) != 0 ||
      zmq_setsockopt(srv->router, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0 ||
      zmq_setsockopt(srv->router, ZMQ_ROUTER_MANDATORY, &off, sizeof off) != 0 ||
      zmq_setsockopt(srv->router, ZMQ_HANDSHAKE_IVL, &handshake, sizeof handshake) != 0 ||
      (strchr(a->listen, '[') != NULL &&
       zmq_setsockopt(srv->router, ZMQ_IPV6, &on, sizeof on) != 0)) {
    snprintf(err, errlen, "cannot configure the socket: %s", zmq_strerror(zmq_errno()));
    return LT_EIO;
  }
  /* ZeroMQ binds interface names, not host names: "localhost" would be looked up as an
   * interface. */
  char ep[300];
  if (strncmp(a->listen, "tcp://localhost:", 16) == 0)
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%s", a->listen + 16);
  else
    snprintf(ep, sizeof ep, "%s", a->listen);
  if (zmq_bind(srv->router, ep) != 0) {
    int e = zmq_errno();
    snprintf(err, errlen, "cannot bind %s: %s", a->listen, zmq_strerror(e));
    return e == EINVAL || e == EPROTONOSUPPORT || e == ENOCOMPATPROTO || e == ENODEV ? LT_EINVAL
                                                                                     : LT_EIO;
  }
  size_t len = sizeof srv->endpoint;
  if (zmq_getsockopt(srv->router, ZMQ_LAST_ENDPOINT, srv->endpoint, &len) != 0) {
    snprintf(err, errlen, "ZMQ_LAST_ENDPOINT: %s", zmq_strerror(zmq_errno()));
    return LT_EIO;
  }
  if (!is_loopback(srv->endpoint) && !srv->curve) {
    fprintf(stderr,
            "lithium-server: WARNING: listening on %s, which is not a loopback address, "
            "without CURVE (--insecure): anyone who can reach it can run the kernels of its "
            "modules\n",
            srv->endpoint);
  }
  return LT_OK;
}

/* check_modules refuses a module directory (or one above it), or a file in it, that others
 * could write, and a module that is a symbolic link: a library dropped there would run its
 * constructor inside the server. Each load checks its file again (lt__modules_set_checked). */
static int check_modules(const char *dir, char *err, size_t errlen) {
  char why[600];
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return LT_OK; /* lt__modules_add_dir says it */
  if (lt__safe_dir(dfd, why, sizeof why) != LT_OK) {
    snprintf(err, errlen,
             "--modules %s: %s: refused, since a library dropped there would run inside the "
             "server (fix the permissions, or --allow-unsafe-modules)",
             dir, why);
    close(dfd);
    return LT_EAUTH;
  }
  DIR *d = fdopendir(dfd);
  if (d == NULL) {
    close(dfd);
    return LT_OK;
  }
  struct dirent *e;
  int rc = LT_OK;
  while (rc == LT_OK && (e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    struct stat sb;
    const char *bad;
    if (n < 3 || strcmp(e->d_name + n - 3, ".so") != 0 ||
        fstatat(dfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
      continue;
    if (S_ISLNK(sb.st_mode))
      bad = "a symbolic link (modules are opened without following links)";
    else if ((bad = lt__safe_stat_why(&sb, 0)) == NULL)
      continue;
    snprintf(err, errlen,
             "--modules %s: module %s is %s (mode %03o): refused (fix it, or "
             "--allow-unsafe-modules)",
             dir, e->d_name, bad, (unsigned)(sb.st_mode & 0777));
    rc = LT_EAUTH;
  }
  closedir(d);
  return rc;
}

/* setup_curve loads the key pair and starts the ZAP handler (--curve-key), or checks that
 * a listen without one is on loopback (or --insecure). LT_EAUTH when the server must not
 * start, with the reason in err. */
static int setup_curve(lt_server_t *srv, const lt_srv_args_t *a, char *err, size_t errlen) {
  if (a->curve_key == NULL) {
    if (!is_loopback(a->listen) && !a->insecure) {
      snprintf(err, errlen,
               "refusing to listen on %s, which is not a loopback address, without "
               "authentication: give --curve-key FILE (and --allow FILE; see lithium keygen), "
               "or --insecure to run open to anyone who can reach it",
               a->listen);
      return LT_EAUTH;
    }
    /* Without CURVE the ZAP handler still names every connection (zap.h). */
    return lt__zap_start(&srv->zap, srv->zctx, NULL, NULL, err, errlen) == LT_OK ? LT_OK : LT_EIO;
  }
  if (!zmq_has("curve")) {
    snprintf(err, errlen, "--curve-key: this libzmq has no CURVE support");
    return LT_EAUTH;
  }
  int rc = lt__curve_load_keypair(a->curve_key, srv->curve_pub, srv->curve_sec, err, errlen);
  if (rc != LT_OK) return LT_EAUTH;
  srv->curve = true;
  if ((rc = lt__zap_start(&srv->zap, srv->zctx, srv->curve_pub, a->allow, err, errlen)) != LT_OK)
    return LT_EAUTH;
  return LT_OK;
}

/* setup_shipping opens the store of shipped modules (--accept-modules): only under CURVE,
 * or on a loopback listen, since whoever may ship runs code of their own in the server
 * (--insecure does not stretch that far). LT_EAUTH or LT_EINVAL with the reason in err. */
static int setup_shipping(lt_server_t *srv, const lt_srv_args_t *a, char *err, size_t errlen) {
  if (a->accept_modules == NULL) return LT_OK;
  if (!srv->curve && !is_loopback(a->listen)) {
    snprintf(err, errlen,
             "refusing --accept-modules on %s, which is not a loopback address, without "
             "--curve-key: anyone who can reach it could run code of their own in the server "
             "(--insecure does not cover shipped modules)",
             a->listen);
    return LT_EAUTH;
  }
  return lt__shipstore_open(&srv->shipstore, a->accept_modules, err, errlen);
}

static void on_sighup(uv_signal_t *h, int signum) {
  (void)signum;
  lt_server_t *srv = h->data;
  char err[512];
  if (!srv->curve) {
    lt__log(LT_LOG_INFO, "SIGHUP: no --allow file to re-read");
  } else if (lt__zap_reload(srv->zap, err, sizeof err) != LT_OK) {
    lt__log(LT_LOG_WARN, "SIGHUP: %s; the previous list stays", err);
  }
}

int lt__server_new(lt_server_t **out, const lt_srv_args_t *a, char *err, size_t errlen) {
  *out = NULL;
  err[0] = '\0';
  lt_server_t *srv = calloc(1, sizeof *srv);
  if (srv != NULL) {
    srv->send = server_send;
    srv->settle = server_settle;
  }
  if (srv == NULL) return LT_ENOMEM;
  int rc = uv_loop_init(&srv->loop);
  if (rc != 0) {
    snprintf(err, errlen, "uv_loop_init: %s", uv_strerror(rc));
    free(srv);
    return LT_EIO;
  }
  uv_signal_init(&srv->loop, &srv->sigint);
  uv_signal_init(&srv->loop, &srv->sigterm);
  uv_signal_init(&srv->loop, &srv->sigusr1);
  uv_signal_init(&srv->loop, &srv->sighup);
  srv->sighup.data = srv;
  uv_timer_init(&srv->loop, &srv->idle_timer);
  uv_timer_init(&srv->loop, &srv->load_timer);
  srv->sigint.data = srv->sigterm.data = srv->sigusr1.data = srv->idle_timer.data =
      srv->load_timer.data = srv;
  lt__peer_init(srv, a->fetch_ms, a->max_peers);
  lt__fetch_init(srv);
  srv->no_shm = a->no_shm;
  lt__shm_start(srv);

  lt__codec_limits_default(&srv->lim);
  srv->lim.max_frame = (size_t)a->max_frame;
  if (srv->lim.max_header > srv->lim.max_frame) srv->lim.max_header = srv->lim.max_frame;
  srv->threads = (uint32_t)a->threads;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  srv->cores = cores > 0 ? (uint32_t)cores : 1;
  srv->cpus = lt__cpus_allowed();
  srv->idle_ms = a->idle_ms;
  srv->max_frame = a->max_frame;
  /* getrandom(2), never 0: a client tells a restarted server on the same endpoint from the
   * one it knew by this number. */
  srv->incarnation = lt__oid_client_random();
  srv->start_us = lt__executor_now_us();
  if (a->name != NULL) {
    snprintf(srv->server_id, sizeof srv->server_id, "%s", a->name);
  } else {
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    snprintf(srv->server_id, sizeof srv->server_id, "%s:%ld", host, (long)getpid());
  }
  lt__utf8_sanitize(srv->server_id);

  rc = LT_ENOMEM;
  srv->frames = calloc((size_t)srv->lim.max_frames + 1, sizeof *srv->frames);
  if (srv->frames == NULL || lt__store_new(&srv->store) != LT_OK ||
      lt__modules_new(&srv->mods) != LT_OK) {
    snprintf(err, errlen, "out of memory");
    goto fail;
  }
  if ((rc = lt__quota_new(srv, a)) != LT_OK) {
    snprintf(err, errlen, "out of memory");
    goto fail;
  }
  lt__modules_set_checked(srv->mods, !a->unsafe_modules);
  for (size_t i = 0; i < a->nmodules && !a->unsafe_modules; i++)
    if ((rc = check_modules(a->modules[i], err, errlen)) != LT_OK) goto fail;
  for (size_t i = 0; i < a->nmodules; i++) {
    if ((rc = lt__modules_add_dir(srv->mods, a->modules[i])) != LT_OK) {
      snprintf(err, errlen, "--modules %s: %s", a->modules[i],
               rc == LT_EINVAL ? "not a readable directory" : lt_strerror(rc));
      goto fail;
    }
  }
  if ((srv->zctx = zmq_ctx_new()) == NULL ||
      (srv->router = zmq_socket(srv->zctx, ZMQ_ROUTER)) == NULL) {
    snprintf(err, errlen, "cannot create the ZeroMQ socket: %s", zmq_strerror(zmq_errno()));
    rc = LT_EIO;
    goto fail;
  }
  if ((rc = setup_curve(srv, a, err, errlen)) != LT_OK) goto fail;
  if ((rc = setup_shipping(srv, a, err, errlen)) != LT_OK) goto fail;
  if ((rc = lt__conns_start(srv, err, errlen)) != LT_OK) goto fail;
  if ((rc = bind_socket(srv, a, err, errlen)) != LT_OK) goto fail;
  lt__bufpool_configure(a->pool_bytes); /* before any kernel makes an output */
  if ((rc = lt__executor_new(&srv->ex, &srv->loop, a->threads, a->slowdown, lt__task_on_done,
                             srv)) != LT_OK) {
    snprintf(err, errlen, "cannot start %d worker threads: %s", a->threads, lt_strerror(rc));
    goto fail;
  }
  if ((rc = lt__zuv_start(&srv->zuv, &srv->loop, srv->router, (size_t)srv->lim.max_frames + 2,
                          on_message, srv)) != LT_OK) {
    snprintf(err, errlen, "cannot watch the socket: %s", lt_strerror(rc));
    goto fail;
  }
  srv->zuv_started = true;
  lt__deadline_start(srv);
  uv_signal_start(&srv->sigint, on_signal, SIGINT);
  uv_signal_start(&srv->sigterm, on_signal, SIGTERM);
  uv_signal_start(&srv->sigusr1, on_signal, SIGUSR1); /* drain and exit */
  uv_signal_start(&srv->sighup, on_sighup, SIGHUP);
  if (srv->idle_ms > 0) {
    uint64_t every = srv->idle_ms / 4;
    if (every > 1000) every = 1000;
    if (every < 10) every = 10;
    uv_timer_start(&srv->idle_timer, on_idle_check, every, every);
  }
  lt__load_start(srv);
  lt__log_set_name(srv->server_id);
  lt__log(LT_LOG_INFO, "listening on %s with %u worker threads", srv->endpoint, srv->threads);
  if (a->speed > 0.0) {
    srv->speed = a->speed;
    lt__log(LT_LOG_INFO, "speed %.3f (set by --speed)", srv->speed);
  } else {
    double us;
    srv->speed = lt__calibrate_speed(a->slowdown, &us);
    lt__log(LT_LOG_INFO, "speed %.3f (calibration: %.0f us against %.0f us, slowdown %g)",
            srv->speed, us, LT_CALIBRATE_REF_US, a->slowdown);
  }
  *out = srv;
  return LT_OK;
fail:
  lt__server_free(srv);
  return rc;
}

const char *lt__server_endpoint(const lt_server_t *srv) {
  return srv->endpoint;
}

int lt__server_run(lt_server_t *srv) {
  uv_run(&srv->loop, UV_RUN_DEFAULT);
  return srv->exit_code;
}

void lt__server_free(lt_server_t *srv) {
  if (srv == NULL) return;
  close_handles(srv);
  uv_run(&srv->loop, UV_RUN_DEFAULT); /* runs the close callbacks */
  if (srv->router != NULL) {
    int linger = CLOSE_LINGER_MS;
    zmq_setsockopt(srv->router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(srv->router);
  }
  lt__zap_stop(srv->zap);
  explicit_bzero(srv->curve_sec, sizeof srv->curve_sec);
  if (srv->zctx != NULL) zmq_ctx_term(srv->zctx);
  lt__quota_free(srv);
  lt__store_free(srv->store);
  lt__modules_free(srv->mods);
  lt__shipstore_free(srv->shipstore);
  free(srv->frames);
  free(srv->subq);
  int rc = uv_loop_close(&srv->loop);
  if (rc != 0) lt__log(LT_LOG_ERROR, "uv_loop_close: %s", uv_strerror(rc));
  free(srv);
}
