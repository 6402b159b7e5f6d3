/* net_zmq.c: the ZeroMQ transport of a connection (conn.h, lt__net_zmq): a DEALER socket
 * per server and an inproc PAIR monitor of its TCP connection, so that a server that goes
 * away is noticed at once, not after missed heartbeats. Knows nothing of messages but their
 * parts. Dispatcher thread only. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <lithium/error.h>
#include "conn.h"
#include "log.h"

/* open_monitor watches the TCP connection of c->sock through an inproc PAIR socket. */
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

static int zopen(void *zctx, lt_conn_t *c, const char *endpoint, const lt_conn_auth_t *auth) {
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
  return LT_OK;
}

/* A signal to the process (a spawned server's SIGCHLD, the user's timers) may interrupt a
 * send or a receive (EINTR): it is made again, never taken for a broken connection. */

/* send_part sends one part without waiting, again when a signal interrupted it. */
static int send_part(lt_conn_t *c, zmq_msg_t *part, int more) {
  int rc;
  while ((rc = zmq_msg_send(part, c->sock, ZMQ_DONTWAIT | more)) < 0 && errno == EINTR)
    continue;
  return rc;
}

static int zsend(lt_conn_t *c, zmq_msg_t *parts, size_t n) {
  int rc = LT_OK;
  for (size_t i = 0; i < n; i++) {
    int more = i + 1 < n ? ZMQ_SNDMORE : 0;
    /* A DEALER takes all parts of a message or none: once the first part went, the rest go. */
    if (rc == LT_OK && send_part(c, &parts[i], more) >= 0) continue;
    if (rc == LT_OK) rc = errno == EAGAIN ? LT_EAGAIN : LT_EIO;
    zmq_msg_close(&parts[i]);
  }
  return rc;
}

static int zrecv(lt_conn_t *c, zmq_msg_t *part, int first, int *more) {
  int rc;
  while ((rc = zmq_msg_recv(part, c->sock, first ? ZMQ_DONTWAIT : 0)) < 0 && errno == EINTR)
    continue;
  if (rc < 0) return errno == EAGAIN ? LT_EAGAIN : LT_EIO;
  *more = zmq_msg_more(part);
  return LT_OK;
}

static int zreadable(lt_conn_t *c) {
  int events = 0;
  size_t len = sizeof events;
  return c->sock != NULL && zmq_getsockopt(c->sock, ZMQ_EVENTS, &events, &len) == 0 &&
         (events & ZMQ_POLLIN);
}

static lt_conn_event_t zmonitor(lt_conn_t *c) {
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
      if (c->cut) { /* the end of the connection whose handshake closed: already said */
        c->cut = 0;
        break;
      }
      return LT_CONN_EV_DISCONNECTED;
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
      c->cut = 1;
      return LT_CONN_EV_HANDSHAKE_LOST;
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

/* zclose stops the socket's monitor before closing our end of it, then the socket. The
 * order matters: libzmq sends monitor events from its I/O thread with blocking sends, so an
 * event for a monitor whose reader is gone (a reconnect attempt, a disconnect while the
 * socket closes) would hang that thread, and with it every connection of the context
 * (libzmq issue 3575). */
static void zclose(lt_conn_t *c, int linger_ms) {
  if (c->mon != NULL) {
    if (c->sock != NULL) zmq_socket_monitor(c->sock, NULL, 0);
    zmq_close(c->mon);
    c->mon = NULL;
  }
  if (c->sock == NULL) return;
  if (linger_ms > 0) zmq_setsockopt(c->sock, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
  zmq_close(c->sock);
  c->sock = NULL;
}

const lt_net_ops_t lt__net_zmq = {
    .open = zopen,
    .send = zsend,
    .recv = zrecv,
    .readable = zreadable,
    .monitor = zmonitor,
    .close = zclose,
};
