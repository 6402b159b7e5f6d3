/* server.c: lithium-server's life cycle and message dispatch. Sets up the loop, the ROUTER
 * socket, store, modules and workers; decodes every message (replying LT_MSG_ERROR to what
 * cannot be decoded or is not allowed), handles the session-level messages itself and hands
 * EXECUTE and CANCEL to task.c, FETCH to fetch.c (links to peer servers are peer.c); drops
 * idle sessions; and shuts down on SIGINT/SIGTERM once running kernels are done. Loop
 * thread only. */
#include "server.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <lithium/error.h>
#include "calibrate.h"
#include "fetch.h"
#include "log.h"
#include "oid.h"
#include "peer.h"
#include "session.h"
#include "task.h"

#define SNDHWM          100000
#define CLOSE_LINGER_MS 1000

/* ---------------------------------------------------------------------------------------
 * Strings and sending. */

void lt__utf8_sanitize(char *s) {
  unsigned char *p = (unsigned char *)s;
  while (*p) {
    unsigned c = *p;
    int n = 0;
    unsigned min = 0;
    if (c >= 0x20 && c < 0x7f) {
      p++;
      continue;
    }
    if ((c & 0xe0) == 0xc0)
      n = 1, c &= 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0)
      n = 2, c &= 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0)
      n = 3, c &= 0x07, min = 0x10000;
    bool ok = n > 0;
    for (int i = 1; ok && i <= n; i++) {
      if ((p[i] & 0xc0) != 0x80)
        ok = false;
      else
        c = (c << 6) | (p[i] & 0x3f);
    }
    if (ok && (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))) ok = false;
    if (!ok) {
      *p++ = '?'; /* a control character or a bad byte */
      continue;
    }
    p += n + 1;
  }
}

static void free_hdr(void *data, void *hint) {
  (void)hint;
  free(data);
}

int lt__server_send(lt_server_t *srv, const void *rid, size_t rid_len, lt_msg_t *msg,
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
    lt_value_t *v = lt__value_ref(vals[i]);
    if (zmq_msg_init_data(&parts[n], v->data, v->len, lt__value_zmq_free, v) != 0) {
      lt__value_unref(v);
      goto nomem;
    }
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
  lt__server_send(srv, rid, rid_len, &m, NULL, 0);
}

/* ---------------------------------------------------------------------------------------
 * Sessions. */

void lt__server_drop_session(lt_server_t *srv, lt_session_t *s, const char *why) {
  lt__fetch_drop_session(srv, s, LT_OK);
  lt__task_drop_session(srv, s);
  lt__session_flush(srv, s);
  size_t n = lt__store_release_client(srv->store, s->client_id);
  lt__log(LT_LOG_INFO, "session '%s' (client %016llx) ended: %s; %zu values released", s->name,
          (unsigned long long)s->client_id, why, n);
  lt__session_free(srv, s);
}

static void handle_hello(lt_server_t *srv, lt_session_t *s, const void *rid, size_t rid_len,
                         const lt_msg_t *m) {
  if (m->u.hello.version != LT_PROTO_VERSION) {
    lt__server_send_error(srv, rid, rid_len, LT_EVERSION,
                          "protocol version %u not supported (this server speaks %d)",
                          m->u.hello.version, LT_PROTO_VERSION);
    return;
  }
  if (s != NULL) lt__server_drop_session(srv, s, "a new hello on the same connection");
  /* A client that greets again on a new connection (it declared this server dead and
   * opened a fresh DEALER) replaces its old session: dropped now, the old one releases the
   * client's values before the new one has any; dropped later (idle), it would release the
   * new session's. Peer servers are exempt: their sessions hold no values of their own, and
   * one server may reach this one under two endpoint spellings. */
  if (!lt__peer_name(m->u.hello.name)) {
    lt_session_t *o, *tmp;
    HASH_ITER(hh, srv->sessions, o, tmp) {
      if (o->client_id == m->u.hello.client_id && !lt__peer_session(o))
        lt__server_drop_session(srv, o, "replaced by a new connection of the same client");
    }
  }
  int rc = lt__session_new(srv, &s, rid, rid_len, m->u.hello.client_id, m->u.hello.name);
  if (rc == LT_OK) s->inline_max = m->u.hello.inline_max;
  if (rc != LT_OK) {
    lt__server_send_error(srv, rid, rid_len, rc, "cannot open a session: %s", lt_strerror(rc));
    return;
  }
  lt__log(LT_LOG_INFO, "session '%s' (client %016llx) opened", s->name,
          (unsigned long long)s->client_id);
  lt_msg_t w;
  memset(&w, 0, sizeof w);
  w.type = LT_MSG_WELCOME;
  w.u.welcome.version = LT_PROTO_VERSION;
  w.u.welcome.server_id = srv->server_id;
  w.u.welcome.cores = srv->cores;
  w.u.welcome.threads = srv->threads;
  w.u.welcome.speed = srv->speed;
  w.u.welcome.now_us = lt__executor_now_us();
  w.u.welcome.max_frame = srv->max_frame;
  w.u.welcome.incarnation = srv->incarnation;
  lt__server_send(srv, rid, rid_len, &w, NULL, 0);
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

static void dispatch(lt_server_t *srv, const void *rid, size_t rid_len, const lt_msg_t *m,
                     zmq_msg_t *payloads) {
  lt_session_t *s = lt__session_find(srv, rid, rid_len);
  if (m->type == LT_MSG_HELLO) {
    handle_hello(srv, s, rid, rid_len, m);
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
    if (s == NULL) {
      lt__server_send_error(srv, rid, rid_len, LT_ESTATE, "send hello first (got %s)",
                            lt__msg_type_name(m->type));
      return;
    }
    s->last_seen = uv_now(&srv->loop);
    break;
  default:
    lt__server_send_error(srv, rid, rid_len, LT_EPROTO, "unexpected %s message",
                          lt__msg_type_name(m->type));
    return;
  }
  int rc;
  switch (m->type) {
  case LT_MSG_PROGRAM:
    rc = lt__session_program(srv, s, (const char *const *)m->u.program.kernels,
                             m->u.program.nkernels);
    if (rc != LT_OK)
      lt__server_send_error(srv, rid, rid_len, rc, "cannot load the program: %s", lt_strerror(rc));
    break;
  case LT_MSG_EXECUTE:
    lt__task_execute(srv, s, m, payloads);
    break;
  case LT_MSG_FETCH:
    lt__fetch_handle(srv, s, m->u.fetch.id, m->u.fetch.release);
    break;
  case LT_MSG_RELEASE:
    for (uint32_t i = 0; i < m->u.release.nids; i++)
      lt__store_release(srv->store, m->u.release.ids[i]);
    break;
  case LT_MSG_CANCEL:
    lt__task_cancel(srv, s, m->u.cancel.seqs, m->u.cancel.nseqs);
    break;
  case LT_MSG_HEARTBEAT: {
    lt_msg_t h;
    memset(&h, 0, sizeof h);
    h.type = LT_MSG_HEARTBEAT;
    h.u.heartbeat.seq = m->u.heartbeat.seq;
    h.u.heartbeat.now_us = lt__executor_now_us();
    lt__server_send(srv, rid, rid_len, &h, NULL, 0);
    break;
  }
  case LT_MSG_BYE:
    lt__server_drop_session(srv, s, "bye");
    break;
  case LT_MSG_LOST:
    handle_lost(srv, s, m);
    break;
  default:
    break;
  }
}

/* on_message is the socket callback: [routing id][header][payload...]. */
static void on_message(lt_zuv_t *z, zmq_msg_t *parts, size_t n, bool truncated) {
  lt_server_t *srv = z->data;
  if (srv->closing || n == 0) return;
  const void *rid = zmq_msg_data(&parts[0]);
  size_t rid_len = zmq_msg_size(&parts[0]);
  if (rid_len == 0 || rid_len > 255) return; /* not from a ROUTER peer: nobody to answer */
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
      dispatch(srv, rid, rid_len, &m, parts + 2);
      lt__msg_clear(&m);
    }
  }
  lt__server_settle(srv);
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
  if (srv->zuv_started) lt__zuv_close(&srv->zuv, NULL);
  uv_close((uv_handle_t *)&srv->sigint, NULL);
  uv_close((uv_handle_t *)&srv->sigterm, NULL);
  uv_close((uv_handle_t *)&srv->idle_timer, NULL);
  uv_close((uv_handle_t *)&srv->load_timer, NULL);
  lt__executor_free(srv->ex);
  srv->ex = NULL;
}

void lt__server_settle(lt_server_t *srv) {
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
  lt__server_settle(srv);
}

static void on_signal(uv_signal_t *h, int signum) {
  lt_server_t *srv = h->data;
  if (srv->stopping) {
    lt__log(LT_LOG_WARN, "signal %d again: exiting without waiting for running kernels", signum);
    _exit(1);
  }
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
    lt__server_send(srv, s->rid, s->rid_len, &hb, NULL, 0);
  }
  lt__task_shutdown(srv);
  HASH_ITER(hh, srv->sessions, s, tmp) lt__fetch_drop_session(srv, s, LT_ESHUTDOWN);
  lt__server_settle(srv);
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
  int hwm = SNDHWM, off = 0, on = 1;
  if (zmq_setsockopt(srv->router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) != 0 ||
      zmq_setsockopt(srv->router, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0 ||
      zmq_setsockopt(srv->router, ZMQ_ROUTER_MANDATORY, &off, sizeof off) != 0 ||
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
  if (!is_loopback(srv->endpoint)) {
    fprintf(stderr,
            "lithium-server: WARNING: listening on %s, which is not a loopback address, "
            "without authentication (no CURVE yet): anyone who can reach it can run the "
            "kernels of its modules\n",
            srv->endpoint);
  }
  return LT_OK;
}

int lt__server_new(lt_server_t **out, const lt_srv_args_t *a, char *err, size_t errlen) {
  *out = NULL;
  err[0] = '\0';
  lt_server_t *srv = calloc(1, sizeof *srv);
  if (srv == NULL) return LT_ENOMEM;
  int rc = uv_loop_init(&srv->loop);
  if (rc != 0) {
    snprintf(err, errlen, "uv_loop_init: %s", uv_strerror(rc));
    free(srv);
    return LT_EIO;
  }
  uv_signal_init(&srv->loop, &srv->sigint);
  uv_signal_init(&srv->loop, &srv->sigterm);
  uv_timer_init(&srv->loop, &srv->idle_timer);
  uv_timer_init(&srv->loop, &srv->load_timer);
  srv->sigint.data = srv->sigterm.data = srv->idle_timer.data = srv->load_timer.data = srv;
  lt__peer_init(srv, a->fetch_ms, a->max_peers);
  lt__fetch_init(srv);

  lt__codec_limits_default(&srv->lim);
  srv->lim.max_frame = (size_t)a->max_frame;
  if (srv->lim.max_header > srv->lim.max_frame) srv->lim.max_header = srv->lim.max_frame;
  srv->threads = (uint32_t)a->threads;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  srv->cores = cores > 0 ? (uint32_t)cores : 1;
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
  if ((rc = bind_socket(srv, a, err, errlen)) != LT_OK) goto fail;
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
  uv_signal_start(&srv->sigint, on_signal, SIGINT);
  uv_signal_start(&srv->sigterm, on_signal, SIGTERM);
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
  if (srv->zctx != NULL) zmq_ctx_term(srv->zctx);
  lt__store_free(srv->store);
  lt__modules_free(srv->mods);
  free(srv->frames);
  int rc = uv_loop_close(&srv->loop);
  if (rc != 0) lt__log(LT_LOG_ERROR, "uv_loop_close: %s", uv_strerror(rc));
  free(srv);
}
