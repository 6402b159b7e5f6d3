/* zmtp_peer.h: a raw ZMTP 3.0 peer for tests, speaking the wire protocol over a plain TCP
 * socket instead of through libzmq, so that it can do what libzmq would not: announce a
 * routing id the way that hides it from the "Identity" message property (an empty
 * "Identity" first, the chosen one second), send frames of a message that never ends, or
 * stop in the middle of anything. NULL mechanism only. One thread per peer. */
#ifndef LT_TEST_ZMTP_PEER_H
#define LT_TEST_ZMTP_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include "srv_helper.h"

typedef struct th_zmtp {
  int fd;
} th_zmtp_t;

/* th_zmtp_open connects to tcp://HOST:PORT `endpoint` as a DEALER and completes the
 * handshake within timeout_ms. With `rid` (rid_len bytes, may be NULL) the peer announces
 * that routing id, hidden behind an empty one as above. 0, or -1 (nothing left open). */
int th_zmtp_open(th_zmtp_t *z, const char *endpoint, const void *rid, size_t rid_len,
                 int timeout_ms);

/* th_zmtp_greet connects to `endpoint` and sends a greeting with `mechanism` ("NULL" or
 * "CURVE", as a client) and, for NULL, a READY command, without waiting for anything: what
 * a hostile peer does before it floods a server that might refuse it. Sends time out after
 * 2 s. 0, or -1 (nothing left open). */
int th_zmtp_greet(th_zmtp_t *z, const char *endpoint, const char *mechanism);

/* th_zmtp_close closes the connection abruptly (no bye); accepts a closed peer. */
void th_zmtp_close(th_zmtp_t *z);

/* th_zmtp_frame sends one frame of `len` bytes (data NULL: zeros) with or without the MORE
 * flag. 0, or -1 when the connection is gone. */
int th_zmtp_frame(th_zmtp_t *z, const void *data, size_t len, bool more);

/* th_zmtp_send encodes `m` and sends it with the `n` payload frames `pay` as one message;
 * 0 or -1. */
int th_zmtp_send(th_zmtp_t *z, lt_msg_t *m, const lt_bytes_t *pay, uint32_t n);

/* th_zmtp_recv waits up to timeout_ms for one whole message and decodes it into r (clear
 * with th_rx_clear). 0, LT_ETIMEDOUT, LT_EIO when the connection is gone, or the decoder's
 * error. */
int th_zmtp_recv(th_zmtp_t *z, th_rx_t *r, int timeout_ms);

/* th_zmtp_recv_type receives until a message of `type` comes (others are skipped); 0, or -1
 * when none came within timeout_ms. */
int th_zmtp_recv_type(th_zmtp_t *z, lt_msg_type_t type, th_rx_t *r, int timeout_ms);

#endif
