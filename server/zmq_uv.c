/* zmq_uv.c: one ZeroMQ socket on a libuv loop (see zmq_uv.h). ZMQ_FD only signals that
 * the socket's state may have changed (edge-triggered), so every poll callback drains while
 * ZMQ_EVENTS has ZMQ_POLLIN, and every send schedules another drain through an idle
 * handle. Draining stops after a budget of messages per loop turn so that timers and
 * completions are not starved; the idle handle continues it. Loop thread only. */
#include "zmq_uv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <lithium/error.h>
#include "log.h"

/* Messages handled per drain before yielding to the rest of the loop. */
#define DRAIN_BUDGET 256

static void drain(lt_zuv_t *z);
static void on_idle(uv_idle_t *h);

/* readable tells whether a message waits. A signal (a child's SIGCHLD, the supervisor's)
 * may interrupt the look (EINTR): it is made again, since ZMQ_FD is edge-triggered and a
 * drain that stopped there would leave the waiting messages unread until the next one
 * arrives. */
static bool readable(lt_zuv_t *z) {
  int ev = 0;
  size_t len = sizeof ev;
  int rc;
  while ((rc = zmq_getsockopt(z->sock, ZMQ_EVENTS, &ev, &len)) != 0 && zmq_errno() == EINTR)
    len = sizeof ev;
  if (rc != 0) {
    if (zmq_errno() != ETERM) lt__log(LT_LOG_ERROR, "ZMQ_EVENTS: %s", zmq_strerror(zmq_errno()));
    return false;
  }
  return (ev & ZMQ_POLLIN) != 0;
}

/* recv_part receives part m without waiting; a signal's interruption (EINTR) is retried, for
 * the reason given at readable. Returns zmq_msg_recv's result. */
static int recv_part(lt_zuv_t *z, zmq_msg_t *m) {
  int rc;
  while ((rc = zmq_msg_recv(m, z->sock, ZMQ_DONTWAIT)) < 0 && zmq_errno() == EINTR)
    continue;
  return rc;
}

/* recv_one receives one whole message and hands it to the callback; false when nothing
 * could be received. Parts beyond max_parts are received into a scratch message and
 * dropped, so a huge part count costs no memory. */
static bool recv_one(lt_zuv_t *z) {
  size_t n = 0;
  bool truncated = false;
  for (;;) {
    zmq_msg_t scratch;
    zmq_msg_t *m = n < z->max_parts ? &z->parts[n] : &scratch;
    zmq_msg_init(m);
    if (recv_part(z, m) < 0) {
      int e = zmq_errno();
      zmq_msg_close(m);
      if (n == 0 && !truncated) return false;
      /* A multipart message arrives whole, so this cannot happen short of ETERM. */
      lt__log(LT_LOG_ERROR, "receive failed inside a message: %s", zmq_strerror(e));
      for (size_t i = 0; i < n; i++)
        zmq_msg_close(&z->parts[i]);
      return false;
    }
    bool more = zmq_msg_more(m) != 0;
    if (m == &scratch) {
      truncated = true;
      zmq_msg_close(&scratch);
    } else {
      n++;
    }
    if (!more) break;
  }
  z->cb(z, z->parts, n, truncated);
  for (size_t i = 0; i < n; i++)
    zmq_msg_close(&z->parts[i]);
  return true;
}

static void drain(lt_zuv_t *z) {
  if (z->draining || z->closing) return;
  z->draining = 1;
  int budget = DRAIN_BUDGET;
  while (!z->closing && readable(z)) {
    if (budget-- == 0) {
      uv_idle_start(&z->idle, on_idle);
      break;
    }
    if (!recv_one(z)) break;
  }
  z->draining = 0;
}

static void on_poll(uv_poll_t *h, int status, int events) {
  (void)events;
  lt_zuv_t *z = h->data;
  if (status < 0) lt__log(LT_LOG_WARN, "poll on ZMQ_FD: %s", uv_strerror(status));
  drain(z);
}

static void on_idle(uv_idle_t *h) {
  lt_zuv_t *z = h->data;
  uv_idle_stop(h);
  drain(z);
}

int lt__zuv_start(lt_zuv_t *z, uv_loop_t *loop, void *sock, size_t max_parts, lt_zuv_recv_cb cb,
                  void *data) {
  memset(z, 0, sizeof *z);
  z->data = data;
  z->sock = sock;
  z->cb = cb;
  z->max_parts = max_parts < 1 ? 1 : max_parts;
  z->parts = calloc(z->max_parts, sizeof *z->parts);
  if (z->parts == NULL) return LT_ENOMEM;
  int fd;
  size_t len = sizeof fd;
  if (zmq_getsockopt(sock, ZMQ_FD, &fd, &len) != 0) {
    lt__log(LT_LOG_ERROR, "ZMQ_FD: %s", zmq_strerror(zmq_errno()));
    free(z->parts);
    z->parts = NULL;
    return LT_EIO;
  }
  int rc = uv_poll_init(loop, &z->poll, fd);
  if (rc != 0) {
    lt__log(LT_LOG_ERROR, "uv_poll_init: %s", uv_strerror(rc));
    free(z->parts);
    z->parts = NULL;
    return LT_EIO;
  }
  uv_idle_init(loop, &z->idle);
  z->poll.data = z;
  z->idle.data = z;
  uv_poll_start(&z->poll, UV_READABLE, on_poll);
  /* Messages may have arrived before the poll started: their edge is gone. */
  lt__zuv_kick(z);
  return LT_OK;
}

void lt__zuv_kick(lt_zuv_t *z) {
  if (!z->closing) uv_idle_start(&z->idle, on_idle);
}

int lt__zuv_send(lt_zuv_t *z, zmq_msg_t *parts, size_t n) {
  int rc = LT_OK;
  size_t i = 0;
  for (; i < n; i++) {
    int flags = ZMQ_DONTWAIT | (i + 1 < n ? ZMQ_SNDMORE : 0);
    int sent;
    /* A signal may interrupt it (EINTR) before the part is queued: made again, or a
     * completion would be lost to a signal storm. */
    while ((sent = zmq_msg_send(&parts[i], z->sock, flags)) < 0 && zmq_errno() == EINTR)
      ;
    if (sent < 0) {
      int e = zmq_errno();
      lt__log(LT_LOG_WARN, "dropped an outgoing message of %zu parts (failed at part %zu): %s", n,
              i, zmq_strerror(e));
      rc = e == EAGAIN ? LT_EAGAIN : LT_EIO;
      break;
    }
  }
  for (; i < n; i++)
    zmq_msg_close(&parts[i]);
  lt__zuv_kick(z);
  return rc;
}

static void on_closed(uv_handle_t *h) {
  lt_zuv_t *z = h->data;
  if (++z->nclosed < 2) return;
  free(z->parts);
  z->parts = NULL;
  if (z->close_cb) z->close_cb(z);
}

void lt__zuv_close(lt_zuv_t *z, void (*cb)(lt_zuv_t *z)) {
  if (z->closing) return;
  z->closing = 1;
  z->close_cb = cb;
  uv_poll_stop(&z->poll);
  uv_idle_stop(&z->idle);
  uv_close((uv_handle_t *)&z->poll, on_closed);
  uv_close((uv_handle_t *)&z->idle, on_closed);
}
