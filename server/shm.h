/* shm.h: same-host transfers of values between servers (issue 32). A server listens on an
 * abstract unix socket (SOCK_SEQPACKET, named "lithium-shm-PID-RANDOM": nothing on the file
 * system, gone with the process) and tells its name, with this host's identity (boot id and
 * network namespace), only to peer servers, in the welcome of their authenticated ZeroMQ
 * link. A peer of the same host connects (the holder checks SO_PEERCRED: same uid, and the
 * asker checks the holder's likewise) and attaches the connection to its ZeroMQ session by
 * showing that session's id and secret. From then on its FETCHes say `shm`, and a ready value
 * of at least LT_SHM_MIN bytes that passed the FETCH's checks (the session's secret, as over
 * ZeroMQ) is answered on the unix socket: its bytes copied by a libuv pool thread into a
 * memfd, sealed against writing, shrinking and growing, and handed over with SCM_RIGHTS; the
 * asker maps it read-only as the value (no copy). Anything that fails falls back to the
 * ZeroMQ VALUE. Loop thread only, except where noted. */
#ifndef LT_SHM_H
#define LT_SHM_H

#include <stdbool.h>
#include <stdint.h>
#include "server.h"
#include "peer.h"
#include "session.h"

/* Values below this go by ZeroMQ: the memfd, the seals, the descriptor and the mapping cost
 * a handful of system calls and a page-table set-up, which a copy of 64 KiB through
 * ZeroMQ's loopback pays back. A page count, not a speed: the same on any machine. */
#define LT_SHM_MIN ((uint64_t)64 << 10)

/* Longest "HOST NAME" announced in a welcome. */
#define LT_SHM_SAME_HOST_MAX 200

/* The messages on the unix socket: one datagram each, of exactly this layout (both ends
 * are the same build on the same host), checked field by field on receipt. */
#define LT_SHM_MAGIC 0x4c54534du /* "LTSM" */
typedef enum lt_shm_type {
  LT_SHM_ATTACH = 1,   /* asker -> holder: a = the asker's peer id, b = its peer secret */
  LT_SHM_ATTACHED = 2, /* holder -> asker: the connection serves that session */
  LT_SHM_VALUE = 3     /* holder -> asker: value {a, b} of `len` bytes is the memfd sent along */
} lt_shm_type_t;

typedef struct lt_shm_msg {
  uint32_t magic;
  uint32_t type;
  uint64_t a, b;
  uint64_t len;
} lt_shm_msg_t;

/* ---- shm_wire.c: the socket's messages and the host's identity. Any thread. */

/* lt__shm_host writes this host's identity ("BOOTID:NETNS") into buf; false when /proc does
 * not tell (same-host transfers are then off). */
bool lt__shm_host(char *buf, size_t len);

/* lt__shm_send_msg sends `m` on unix socket `fd` without waiting, with descriptor `pass`
 * attached when it is not negative. LT_OK, LT_EAGAIN (the socket's buffer is full) or
 * LT_EIO. */
int lt__shm_send_msg(int fd, const lt_shm_msg_t *m, int pass);

/* lt__shm_recv_msg receives one datagram from `fd` without waiting. LT_OK with *m filled and
 * checked (size, magic, type) and *got the descriptor that came with it (-1 when none; the
 * caller owns it); LT_EAGAIN when nothing is there; LT_ECLOSED at the end of the
 * connection; LT_EPROTO for a malformed datagram (consumed; any descriptors it carried are
 * closed); LT_EIO. */
int lt__shm_recv_msg(int fd, lt_shm_msg_t *m, int *got);

/* lt__shm_peer_uid_ok tells whether the process at the other end of unix socket `fd` runs
 * under this process's effective uid (SO_PEERCRED). */
bool lt__shm_peer_uid_ok(int fd);

/* ---- shm.c: the holder's side. */

typedef struct lt_shm lt_shm_t;

/* lt__shm_start opens the listening socket of `srv` unless srv->no_shm; a failure is logged
 * and leaves same-host transfers off (the server runs on). */
void lt__shm_start(lt_server_t *srv);

/* lt__shm_same_host returns "HOST NAME" for the welcome of a peer, or "" when off
 * (borrowed). */
const char *lt__shm_same_host(const lt_server_t *srv);

/* Sends value `id` = `v` to session `s` by ZeroMQ (fetch.c). */
typedef void lt_shm_fallback_fn(lt_server_t *srv, lt_session_t *s, lt_oid_t id, lt_value_t *v);

/* lt__shm_offer tries to answer session `s`'s fetch of `id` with value `v` by memfd: true
 * when `s` has an attached connection and `v` is large enough; the transfer then goes on
 * without the caller (a reference to `v` is taken), and if it cannot finish the value is
 * sent by ZeroMQ after all, with fallback(srv, s, id, v) (unless `s` has ended). False: the
 * caller sends the VALUE. */
bool lt__shm_offer(lt_server_t *srv, lt_session_t *s, lt_oid_t id, lt_value_t *v,
                   lt_shm_fallback_fn *fallback);

/* lt__shm_session_gone detaches and closes the connection of session `s`, if any. */
void lt__shm_session_gone(lt_server_t *srv, lt_session_t *s);

/* lt__shm_close closes the listener and every connection; part of closing the server.
 * Transfers still on a pool thread end without sending. */
void lt__shm_close(lt_server_t *srv);

/* ---- shm_link.c: the asker's side, one link per holder. */

typedef struct lt_shm_link lt_shm_link_t;

/* A value that came by memfd (v: one reference, the callee's), or a malformed one that
 * cost the link (v NULL): its fetch is lost. */
typedef void lt_shm_value_cb(void *data, lt_oid_t id, lt_value_t *v);

/* The link attached, or ended (lt__shm_link_ready tells which). */
typedef void lt_shm_state_cb(void *data);

/* lt__shm_local tells whether a welcome's `same_host` names this host (and same-host
 * transfers are on here). */
bool lt__shm_local(const lt_server_t *srv, const char *same_host);

/* lt__shm_link_open connects to the holder that announced `same_host` when it names this
 * host, and attaches as this server's peer session there. NULL when it is another host,
 * the announcement is malformed, or the socket cannot be reached (all silent: ZeroMQ
 * serves). Values that come on it go to cb(data, ...), its attach and its end to
 * state_cb(data) (never from within lt__shm_link_open or lt__shm_link_close). */
lt_shm_link_t *lt__shm_link_open(lt_server_t *srv, const char *same_host, lt_shm_value_cb *cb,
                                 lt_shm_state_cb *state_cb, void *data);

/* lt__shm_link_ready tells whether the link is attached and open (fetches may say shm). */
bool lt__shm_link_ready(const lt_shm_link_t *l);

/* lt__shm_link_close closes the link; its memory goes once the loop has closed its handles.
 * Accepts NULL. */
void lt__shm_link_close(lt_shm_link_t *l);

#endif
