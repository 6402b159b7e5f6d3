/* zmq_uv.h: the glue between one ZeroMQ socket and a libuv loop. A uv_poll watches ZMQ_FD;
 * since ZMQ_FD is edge-triggered, the glue drains the socket while ZMQ_EVENTS says
 * ZMQ_POLLIN, after every poll callback and after every send, and hands each whole multipart
 * message to a callback. Sends never block: what cannot be sent is dropped and logged.
 * Loop thread only. */
#ifndef LT_ZMQ_UV_H
#define LT_ZMQ_UV_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>
#include <zmq.h>

typedef struct lt_zuv lt_zuv_t;

/* Called once per received message with its `n` parts (borrowed: the glue closes them
 * after the call; copy, zmq_msg_copy or zmq_msg_move out what must outlive it). `truncated`
 * is true when the message had more than max_parts parts: the rest were received and
 * dropped, only the first max_parts are given. The callback may send on the socket. */
typedef void (*lt_zuv_recv_cb)(lt_zuv_t *z, zmq_msg_t *parts, size_t n, bool truncated);

struct lt_zuv {
  void *data; /* the user's */
  /* private */
  uv_poll_t poll;
  uv_idle_t idle;
  void *sock;
  size_t max_parts;
  zmq_msg_t *parts;
  lt_zuv_recv_cb cb;
  int draining;
  int closing;
  int nclosed;
  void (*close_cb)(lt_zuv_t *z);
};

/* lt__zuv_start watches `sock` (not owned) on `loop`; messages longer than `max_parts`
 * parts are cut (see lt_zuv_recv_cb). LT_EIO when ZMQ_FD cannot be read, LT_ENOMEM. */
int lt__zuv_start(lt_zuv_t *z, uv_loop_t *loop, void *sock, size_t max_parts, lt_zuv_recv_cb cb,
                  void *data);

/* lt__zuv_send sends the `n` parts as one message with ZMQ_DONTWAIT, taking ownership of
 * them (they are closed or sent in every case). A message that cannot be sent (EAGAIN at
 * the high-water mark, host unreachable) is dropped and logged. Then schedules a drain, as
 * a send may have eaten the edge of ZMQ_FD. LT_OK, or LT_EAGAIN/LT_EIO when dropped. */
int lt__zuv_send(lt_zuv_t *z, zmq_msg_t *parts, size_t n);

/* lt__zuv_kick schedules a drain in the next loop iteration; call after sending on the
 * socket by other means. */
void lt__zuv_kick(lt_zuv_t *z);

/* lt__zuv_close stops watching and closes the handles; `cb` (may be NULL) runs when both
 * are closed, after which *z may be freed. The socket itself is the caller's to close. */
void lt__zuv_close(lt_zuv_t *z, void (*cb)(lt_zuv_t *z));

#endif
