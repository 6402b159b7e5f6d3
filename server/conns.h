/* conns.h: the connections the ROUTER accepted, watched through libzmq's socket monitor, so
 * that those without a session cannot hold the server's descriptors (issue 22, case 7).
 * libzmq closes a connection whose handshake is not over within ZMQ_HANDSHAKE_IVL, but keeps
 * one that completed it and then says nothing, for ever; at a low open-file limit enough of
 * them keep every honest client out. The monitor tells each accepted connection's
 * descriptor (ZMQ_EVENT_ACCEPTED) and its end (ZMQ_EVENT_DISCONNECTED); every message tells
 * the descriptor it came from (ZMQ_SRCFD). A connection counts as *bound* while a session
 * that said hello on it lives. An unbound one is cut (shutdown(2), never close(2): the
 * descriptor is libzmq's, which then closes it as a peer's end):
 * - when it has been unbound for LT_CONNS_HELLO_MS (since its accept, or since its session
 *   ended);
 * - the oldest first, when more than a quarter of the descriptors (after a reserve of an
 *   eighth of the soft RLIMIT_NOFILE, at least 16) are unbound connections (at least 8 are
 *   always allowed): sessions are bounded apart (--max-sessions, by default at most half
 *   the limit);
 * - the oldest unbound ones first, a batch at a time, when descriptors run short anyway: an
 *   accepted descriptor within the reserve (accept returns the lowest free number, so all
 *   below it are taken).
 * Oldest first because an honest client says hello as soon as its handshake is over: the
 * connections that waited longest without one are the idle ones, the newest may be the
 * honest client about to speak. Loop thread only. */
#ifndef LT_CONNS_H
#define LT_CONNS_H

#include <stdint.h>
#include "server.h"

/* How long a connection may stay without a live session before it is cut (ms). */
#define LT_CONNS_HELLO_MS 10000

/* lt__conns_start starts watching the ROUTER of `srv` (before it binds, so that no accept
 * is missed). LT_OK, or LT_EIO/LT_ENOMEM with a message in err. */
int lt__conns_start(lt_server_t *srv, char *err, size_t errlen);

/* lt__conns_seen records that the connection of descriptor `fd` (ZMQ_SRCFD of a message;
 * ignored when negative) numbered `conn` (zap.h) sent a message and whether a session of
 * that connection lives now (`bound`). It returns true when the table holds the connection
 * as bound (so its session need not say so again), false when it does not know it yet: the
 * monitor's accept event, which travels apart from the socket's messages, may come after
 * the connection's first messages. */
bool lt__conns_seen(lt_server_t *srv, int fd, uint64_t conn, bool bound);

/* lt__conns_unbound records that the session on connection `conn` of descriptor `fd` ended:
 * the connection is unbound again, and is cut LT_CONNS_HELLO_MS later unless a new session
 * starts on it. */
void lt__conns_unbound(lt_server_t *srv, int fd, uint64_t conn);

/* lt__conns_cuts returns how many connections were cut since the start. */
uint64_t lt__conns_cuts(const lt_server_t *srv);

/* lt__conns_close stops the monitor and closes its socket and handles; part of closing the
 * server (before the ROUTER is closed). Accepts a server that never started it. */
void lt__conns_close(lt_server_t *srv);

/* lt__conns_leave stops the monitor and closes its socket at once, leaving the loop's handles
 * alone: for a process about to _exit without running its loop again, whose ZeroMQ context
 * must end (zmq_ctx_term waits for every socket). Before the ROUTER is closed. */
void lt__conns_leave(lt_server_t *srv);

#endif
