/* conn.h: the client's link to one session on one lithium-server: a link of its transport
 * (a DEALER socket and a monitor of its TCP connection under ZeroMQ), the session state (hello
 * sent, welcome seen, stopping, dead), what the welcome said (incarnation, frame limit), the
 * server's last load report and byte counters. Sends and receives whole messages through the codec,
 * over the transport it is given (lt_net_t: ZeroMQ, net_zmq.c, or the simulator's in-memory
 * network). Dispatcher thread only. */
#ifndef LT_CONN_H
#define LT_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>
#include "codec.h"
#include "value.h"

typedef enum lt_conn_state {
  LT_CONN_HELLO = 0, /* hello sent, waiting for welcome */
  LT_CONN_READY,
  LT_CONN_STOPPING, /* the server said it is shutting down: no new work, answers still come */
  LT_CONN_DEAD
} lt_conn_state_t;

/* What the monitor of a connection saw (lt__conn_monitor). */
typedef enum lt_conn_event {
  LT_CONN_EV_NONE = 0,
  LT_CONN_EV_CONNECTED,     /* a TCP connection is up */
  LT_CONN_EV_DISCONNECTED,  /* an established connection went down */
  LT_CONN_EV_AUTH_FAILED,   /* the security handshake failed: a refused key, a key the server
                               does not have, or CURVE on one side only */
  LT_CONN_EV_HANDSHAKE_LOST /* the connection closed during the handshake before either side
                               said why: a server that died or restarted then, or one that
                               closed on a key it could not read (a wrong server key) */
} lt_conn_event_t;

/* What a connection says who it is with: the session's secret and servers, and CURVE keys
 * (all "" without CURVE). Borrowed for the call. */
typedef struct lt_conn_auth {
  uint64_t secret;
  const char *const *peers; /* the session's servers, "ENDPOINT [KEY]" (PROGRAM.peers) */
  uint32_t npeers;
  const char *pub, *sec; /* the client's key pair (curve_key), or "" */
  const char *server;    /* the server's public key, or "": no CURVE */
} lt_conn_auth_t;

typedef struct lt_net lt_net_t;

typedef struct lt_conn {
  char *endpoint;
  const lt_net_t *net; /* its transport (set by lt__conn_open) */
  void *sock;          /* the transport's link: a DEALER under ZeroMQ; NULL once closed */
  void *mon;           /* ZeroMQ: PAIR socket receiving sock's connection events */
  lt_conn_state_t state;
  char *server_id;
  uint64_t incarnation; /* of the server process that welcomed us; 0 before */
  uint64_t max_frame;   /* the largest frame the server takes (welcome); 0 before */
  int connected;        /* a TCP connection was up at least once */
  int tried;            /* a TCP connect was tried (the name resolved) */
  int refused;          /* a connect was refused or failed after trying */
  int unresolvable;     /* a connect failed before trying: the name did not resolve */
  int cut;              /* a handshake just closed: libzmq's disconnect event that follows
                           it is no lost session (the hello is still queued) */
  uint32_t threads;
  double speed; /* the server's calibrated speed, from its welcome */
  lt_load_t load;
  int64_t opened_ms;
  int64_t last_recv_ms;
  int64_t last_send_ms;
  uint32_t inflight;  /* instructions dispatched, not completed */
  uint64_t completed; /* completions received */
  double cpu_s;       /* the CPU seconds they used, as the server measured each */
  uint64_t bytes_out; /* every byte sent on this link */
  uint64_t bytes_in;  /* every byte received on this link */
} lt_conn_t;

/* A received message: its frames stay alive until lt__rx_clear, msg borrows from them. */
typedef struct lt_rx {
  zmq_msg_t *parts;
  size_t nparts;
  size_t cap;
  lt_bytes_t *frames;
  lt_msg_t msg;
} lt_rx_t;

/* The transport door (STYLE 24): the calls a connection makes of the network, so that the
 * simulator (tests/sim) runs the dispatcher over an in-memory network. Parts are zmq_msg_t
 * either way (they need no socket). Every call is the dispatcher thread's. */
typedef struct lt_net_ops {
  /* open makes c's link to `endpoint` (c->sock, and c->mon if it has one), with the CURVE
   * keys of `auth`: LT_OK, LT_EAUTH (keys), LT_EINVAL (a bad endpoint), LT_EIO. */
  int (*open)(void *ctx, lt_conn_t *c, const char *endpoint, const lt_conn_auth_t *auth);
  /* send sends parts[0..n) as one message without blocking: every part is sent or closed;
   * LT_OK, LT_EAGAIN (it cannot take the message now) or LT_EIO. */
  int (*send)(lt_conn_t *c, zmq_msg_t *parts, size_t n);
  /* recv receives the next part (initialised by the caller) into *part: of a new message
   * without blocking (`first`), else the rest of the current one; *more tells whether more
   * parts follow. LT_OK, LT_EAGAIN (no message waits) or LT_EIO. */
  int (*recv)(lt_conn_t *c, zmq_msg_t *part, int first, int *more);
  /* readable tells whether a message waits unread. */
  int (*readable)(lt_conn_t *c);
  /* monitor reads one event of the link without blocking and updates c's connected, tried,
   * refused and unresolvable (lt__conn_monitor). */
  lt_conn_event_t (*monitor)(lt_conn_t *c);
  /* close closes the link (c->sock, c->mon: NULL after), first letting what was sent leave
   * for up to `linger_ms`. */
  void (*close)(lt_conn_t *c, int linger_ms);
} lt_net_ops_t;

struct lt_net {
  const lt_net_ops_t *ops;
  void *ctx; /* the transport's: the ZeroMQ context, or the simulated network */
};

/* lt__net_zmq is the ZeroMQ transport (net_zmq.c); its ctx is a ZeroMQ context. */
extern const lt_net_ops_t lt__net_zmq;

/* What the session runs: the kernel names (PROGRAM) and the modules they name, whose copy
 * on the server the welcome states. Borrowed for the call. */
typedef struct lt_conn_program {
  char *const *kernels;
  uint32_t nkernels;
  const char *const *modules;
  uint32_t nmodules;
} lt_conn_program_t;

/* lt__conn_open opens a link of `net` (a DEALER and its monitor), connects it to `endpoint` and
 * sends hello (asking for stored outputs up to `inline_max` bytes to come back too, and for the
 * server's copy of the program's modules) + program. The connection starts in
 * LT_CONN_HELLO. On failure the connection keeps its endpoint (or has none after
 * LT_ENOMEM) and may be closed. */
int lt__conn_open(lt_conn_t *c, const lt_net_t *net, const char *endpoint, uint64_t client_id,
                  uint64_t inline_max, const lt_conn_program_t *prog, const lt_conn_auth_t *auth,
                  int64_t now_ms);

/* lt__conn_program sends PROGRAM again with the session's current servers `peers` (the
 * kernel table is unchanged: the server keeps it). */
int lt__conn_program(lt_conn_t *c, char *const *kernels, uint32_t nkernels,
                     const char *const *peers, uint32_t npeers, int64_t now_ms);

/* lt__conn_send encodes and sends `m` with its payload frames (values are sent without
 * copying: each lt_value_t in `values`, one per payload frame, gets a reference released by
 * ZeroMQ once it is done with the frame, or at once when the message is not sent). Never
 * blocks: LT_EAGAIN when the socket cannot take it now, LT_ENOMEM when a part cannot be
 * made (nothing is sent then). */
int lt__conn_send(lt_conn_t *c, const lt_msg_t *m, lt_value_t *const *values, int64_t now_ms);

/* lt__conn_recv receives one whole message without blocking and decodes it into rx->msg.
 * LT_EAGAIN when nothing is waiting; LT_EPROTO/LT_ETOOBIG for a message that was dropped
 * (rx needs no clear then). */
int lt__conn_recv(lt_conn_t *c, lt_rx_t *rx, const lt_codec_limits_t *lim, int64_t now_ms);

/* lt__conn_monitor reads one event of the connection's monitor without blocking and
 * updates connected/tried/refused; LT_CONN_EV_NONE when nothing (more) is waiting. */
lt_conn_event_t lt__conn_monitor(lt_conn_t *c);

/* lt__conn_readable tells whether a message waits unread on c. */
int lt__conn_readable(lt_conn_t *c);

/* lt__conn_shut closes the link (no bye) and keeps the rest for the stats. */
void lt__conn_shut(lt_conn_t *c);

/* lt__rx_value returns a value of the payload `frame` (one of rx->msg.frames) of the received
 * message, with one reference: a large one shares the received bytes (the value keeps them
 * after lt__rx_clear; no copy), a small one is a copy (lt__value_from_msg). NULL on out of
 * memory. */
lt_value_t *lt__rx_value(lt_rx_t *rx, const lt_bytes_t *frame);

/* lt__rx_clear releases a received message (the arrays stay for the next one). */
void lt__rx_clear(lt_rx_t *rx);

/* lt__rx_free releases a message and the arrays. */
void lt__rx_free(lt_rx_t *rx);

/* lt__conn_close sends bye (best effort), closes the socket and frees; accepts a closed
 * connection. */
void lt__conn_close(lt_conn_t *c);

#endif
