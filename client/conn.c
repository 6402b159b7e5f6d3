/* conn.c: one DEALER link to a server. Encodes with the codec, sends header + payload
 * frames as one multipart message, receives whole multipart messages. Knows nothing of
 * instructions or scheduling. Dispatcher thread only. */
#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "conn.h"
#include "log.h"
#include "value.h"
#include "vec.h"

/* free_header is the zmq_free_fn of an encoded header. */
static void free_header(void *data, void *hint) {
  (void)hint;
  free(data);
}

/* open_monitor watches the TCP connection of c->sock through an inproc PAIR socket, so
 * that a server that goes away is noticed at once, not after missed heartbeats. */
static int open_monitor(lt_conn_t *c, void *zctx) {
  static atomic_uint next = 0;
  char addr[64];
  snprintf(addr, sizeof addr, "inproc://lt-monitor-%u", atomic_fetch_add(&next, 1));
  int events = ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CONNECT_DELAYED |
               ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
  if (zmq_socket_monitor(c->sock, addr, events) != 0) return LT_EIO;
  c->mon = zmq_socket(zctx, ZMQ_PAIR);
  if (c->mon == NULL) {
    zmq_socket_monitor(c->sock, NULL, 0); /* no reader: see close_monitor */
    return LT_EIO;
  }
  int zero = 0;
  zmq_setsockopt(c->mon, ZMQ_LINGER, &zero, sizeof zero);
  return zmq_connect(c->mon, addr) == 0 ? LT_OK : LT_EIO;
}

int lt__conn_program(lt_conn_t *c, char *const *kernels, uint32_t nkernels,
                     const char *const *peers, uint32_t npeers, int64_t now_ms) {
  lt_msg_t prog = {.type = LT_MSG_PROGRAM};
  prog.u.program.nkernels = nkernels;
  prog.u.program.kernels = (const char **)kernels;
  prog.u.program.npeers = npeers;
  prog.u.program.peers = (const char **)peers;
  return lt__conn_send(c, &prog, NULL, now_ms);
}

int lt__conn_open(lt_conn_t *c, void *zctx, const char *endpoint, uint64_t client_id,
                  uint64_t inline_max, const lt_conn_program_t *prog, const lt_conn_auth_t *auth,
                  int64_t now_ms) {
  memset(c, 0, sizeof *c);
  c->endpoint = strdup(endpoint);
  if (c->endpoint == NULL) return LT_ENOMEM;
  c->sock = zmq_socket(zctx, ZMQ_DEALER);
  if (c->sock == NULL) return LT_EIO;
  int zero = 0, hwm = 0;
  zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(c->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
  zmq_setsockopt(c->sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
  if (auth->server[0] != '\0') {
    /* A server with a key is spoken to under CURVE only, and only with our own key pair:
     * without one the connection could not authenticate. */
    if (auth->sec[0] == '\0') {
      lt__log(LT_LOG_ERROR, "server %s has a CURVE key but this client has none (curve_key)",
              endpoint);
      return LT_EAUTH;
    }
    if (zmq_setsockopt(c->sock, ZMQ_CURVE_SERVERKEY, auth->server, 40) != 0 ||
        zmq_setsockopt(c->sock, ZMQ_CURVE_PUBLICKEY, auth->pub, 40) != 0 ||
        zmq_setsockopt(c->sock, ZMQ_CURVE_SECRETKEY, auth->sec, 40) != 0)
      return LT_EAUTH;
  }
  if (open_monitor(c, zctx) != LT_OK) return LT_EIO;
  if (zmq_connect(c->sock, endpoint) != 0) {
    lt__log(LT_LOG_ERROR, "cannot connect to %s: %s", endpoint, zmq_strerror(errno));
    return LT_EINVAL;
  }
  c->opened_ms = c->last_recv_ms = now_ms;
  c->state = LT_CONN_HELLO;

  lt_msg_t hello = {.type = LT_MSG_HELLO};
  hello.u.hello.version = LT_PROTO_VERSION;
  hello.u.hello.client_id = client_id;
  hello.u.hello.name = "lithium-client";
  hello.u.hello.inline_max = inline_max;
  hello.u.hello.secret = auth->secret;
  hello.u.hello.modules = (const char **)prog->modules;
  hello.u.hello.nmodules = prog->nmodules;
  int rc = lt__conn_send(c, &hello, NULL, now_ms);
  if (rc != LT_OK) return rc;
  return lt__conn_program(c, prog->kernels, prog->nkernels, auth->peers, auth->npeers, now_ms);
}

/* build_parts makes the parts of `m`: the encoded header `hdr` (taken) and its payload
 * frames, values as lt__value_msg_init makes them (a large one without a copy, holding a
 * reference until ZeroMQ is done with it), other frames copied. All or nothing: on LT_ENOMEM no
 * part is left open. */
static int build_parts(zmq_msg_t *parts, void *hdr, size_t hdrlen, const lt_msg_t *m,
                       lt_value_t *const *values) {
  if (zmq_msg_init_data(&parts[0], hdr, hdrlen, free_header, NULL) != 0) {
    free(hdr);
    return LT_ENOMEM;
  }
  for (uint32_t i = 0; i < m->nframes; i++) {
    zmq_msg_t *part = &parts[i + 1];
    int rc;
    if (values != NULL && values[i] != NULL) {
      rc = lt__value_msg_init(part, values[i]);
    } else {
      rc = zmq_msg_init_size(part, m->frames[i].len);
      if (rc == 0 && m->frames[i].len > 0)
        memcpy(zmq_msg_data(part), m->frames[i].data, m->frames[i].len);
    }
    if (rc != 0) {
      for (uint32_t k = 0; k <= i; k++)
        zmq_msg_close(&parts[k]);
      return LT_ENOMEM;
    }
  }
  return LT_OK;
}

/* send_parts sends parts[0..n) as one message; every part is sent or closed. */
static int send_parts(lt_conn_t *c, zmq_msg_t *parts, size_t n) {
  int rc = LT_OK;
  for (size_t i = 0; i < n; i++) {
    size_t len = zmq_msg_size(&parts[i]);
    int more = i + 1 < n ? ZMQ_SNDMORE : 0;
    /* A DEALER takes all parts of a message or none: once the first part went, the rest go. */
    if (rc == LT_OK && zmq_msg_send(&parts[i], c->sock, ZMQ_DONTWAIT | more) >= 0) {
      c->bytes_out += len;
      continue;
    }
    if (rc == LT_OK) rc = errno == EAGAIN ? LT_EAGAIN : LT_EIO;
    zmq_msg_close(&parts[i]);
  }
  return rc;
}

int lt__conn_send(lt_conn_t *c, const lt_msg_t *m, lt_value_t *const *values, int64_t now_ms) {
  void *hdr;
  size_t hdrlen;
  int rc = lt__msg_encode(m, &hdr, &hdrlen);
  if (rc != LT_OK) return rc;
  size_t n = (size_t)m->nframes + 1;
  zmq_msg_t stack[8];
  zmq_msg_t *parts = n <= sizeof stack / sizeof stack[0] ? stack : malloc(n * sizeof *parts);
  if (parts == NULL) {
    free(hdr);
    return LT_ENOMEM;
  }
  rc = build_parts(parts, hdr, hdrlen, m, values);
  if (rc == LT_OK) rc = send_parts(c, parts, n);
  if (parts != stack) free(parts);
  if (rc == LT_OK) c->last_send_ms = now_ms;
  return rc;
}

/* drop_rest discards the remaining parts of a multipart message. */
static void drop_rest(lt_conn_t *c) {
  int more = 1;
  size_t sz = sizeof more;
  while (zmq_getsockopt(c->sock, ZMQ_RCVMORE, &more, &sz) == 0 && more) {
    zmq_msg_t part;
    zmq_msg_init(&part);
    if (zmq_msg_recv(&part, c->sock, 0) >= 0) c->bytes_in += zmq_msg_size(&part);
    zmq_msg_close(&part);
  }
}

int lt__conn_recv(lt_conn_t *c, lt_rx_t *rx, const lt_codec_limits_t *lim, int64_t now_ms) {
  rx->nparts = 0;
  for (;;) {
    if (rx->nparts == rx->cap) {
      size_t cap = rx->cap ? rx->cap * 2 : 8;
      if (cap > (size_t)lim->max_frames + 1) cap = (size_t)lim->max_frames + 1;
      if (cap == rx->cap) {
        drop_rest(c);
        lt__rx_clear(rx);
        return LT_ETOOBIG;
      }
      /* zmq_msg_t may hold small data inline, so parts move with zmq_msg_move. */
      zmq_msg_t *parts = malloc(cap * sizeof *parts);
      if (LT_VEC_RESIZE(rx->frames, rx->cap, cap) != LT_OK || parts == NULL) {
        free(parts);
        drop_rest(c);
        lt__rx_clear(rx);
        return LT_ENOMEM;
      }
      for (size_t i = 0; i < rx->nparts; i++) {
        zmq_msg_init(&parts[i]);
        zmq_msg_move(&parts[i], &rx->parts[i]);
        zmq_msg_close(&rx->parts[i]);
      }
      free(rx->parts);
      rx->parts = parts;
      rx->cap = cap;
    }
    zmq_msg_t *part = &rx->parts[rx->nparts];
    zmq_msg_init(part);
    int flags = rx->nparts == 0 ? ZMQ_DONTWAIT : 0;
    if (zmq_msg_recv(part, c->sock, flags) < 0) {
      zmq_msg_close(part);
      int err = errno;
      lt__rx_clear(rx);
      return err == EAGAIN ? LT_EAGAIN : LT_EIO;
    }
    c->bytes_in += zmq_msg_size(part);
    rx->nparts++;
    if (!zmq_msg_more(part)) break;
  }
  c->last_recv_ms = now_ms;
  for (size_t i = 0; i < rx->nparts; i++) {
    rx->frames[i].data = zmq_msg_data(&rx->parts[i]);
    rx->frames[i].len = zmq_msg_size(&rx->parts[i]);
  }
  int rc = lt__msg_decode(&rx->msg, rx->frames, rx->nparts, lim);
  if (rc != LT_OK) {
    lt__rx_clear(rx);
    return rc;
  }
  return LT_OK;
}

lt_conn_event_t lt__conn_monitor(lt_conn_t *c) {
  for (;;) {
    if (c->mon == NULL) return LT_CONN_EV_NONE;
    zmq_msg_t ev, addr;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, c->mon, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&ev);
      return LT_CONN_EV_NONE;
    }
    /* An event is two frames: 16-bit event and 32-bit value, then the endpoint. */
    uint16_t code = 0;
    if (zmq_msg_size(&ev) >= sizeof code) memcpy(&code, zmq_msg_data(&ev), sizeof code);
    int more = zmq_msg_more(&ev);
    zmq_msg_close(&ev);
    if (more) {
      zmq_msg_init(&addr);
      zmq_msg_recv(&addr, c->mon, 0);
      zmq_msg_close(&addr);
    }
    switch (code) {
    case ZMQ_EVENT_CONNECTED:
      c->connected = 1;
      return LT_CONN_EV_CONNECTED;
    case ZMQ_EVENT_DISCONNECTED:
      return LT_CONN_EV_DISCONNECTED;
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
      return LT_CONN_EV_AUTH_FAILED;
    case ZMQ_EVENT_CONNECT_DELAYED:
      c->tried = 1; /* the name resolved and a connect is under way */
      break;
    case ZMQ_EVENT_CONNECT_RETRIED:
      if (c->tried)
        c->refused = 1;
      else
        c->unresolvable = 1;
      break;
    default:
      break;
    }
  }
}

/* close_monitor stops the socket's monitor before closing our end of it. The order matters:
 * libzmq sends monitor events from its I/O thread with blocking sends, so an event for a
 * monitor whose reader is gone (a reconnect attempt, a disconnect while the socket closes)
 * would hang that thread, and with it every connection of the context (libzmq issue 3575). */
static void close_monitor(lt_conn_t *c) {
  if (c->mon == NULL) return;
  if (c->sock != NULL) zmq_socket_monitor(c->sock, NULL, 0);
  zmq_close(c->mon);
  c->mon = NULL;
}

void lt__conn_shut(lt_conn_t *c) {
  close_monitor(c);
  if (c->sock != NULL) zmq_close(c->sock);
  c->sock = NULL;
}

lt_value_t *lt__rx_value(lt_rx_t *rx, const lt_bytes_t *frame) {
  size_t part = (size_t)(frame - rx->frames); /* rx->msg.frames is rx->frames + 1 */
  assert(frame >= rx->frames && part > 0 && part < rx->nparts);
  /* The part stays whole for the message's other readers: zmq_msg_copy shares a large
   * message's bytes (a reference count), and the value takes the shared copy. */
  zmq_msg_t share;
  zmq_msg_init(&share);
  lt_value_t *v = zmq_msg_copy(&share, &rx->parts[part]) == 0 ? lt__value_from_msg(&share) : NULL;
  zmq_msg_close(&share);
  return v;
}

void lt__rx_clear(lt_rx_t *rx) {
  lt__msg_clear(&rx->msg);
  for (size_t i = 0; i < rx->nparts; i++)
    zmq_msg_close(&rx->parts[i]);
  rx->nparts = 0;
}

void lt__rx_free(lt_rx_t *rx) {
  lt__rx_clear(rx);
  free(rx->parts);
  free(rx->frames);
  memset(rx, 0, sizeof *rx);
}

void lt__conn_close(lt_conn_t *c) {
  close_monitor(c);
  if (c->sock != NULL) {
    if (c->state != LT_CONN_DEAD) {
      lt_msg_t bye = {.type = LT_MSG_BYE};
      lt__conn_send(c, &bye, NULL, 0);
      /* Give the bye a moment to leave; linger is otherwise 0 so a dead server never
       * holds up the close. */
      int linger = 200;
      zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
    }
    zmq_close(c->sock);
  }
  free(c->endpoint);
  free(c->server_id);
  memset(c, 0, sizeof *c);
}
