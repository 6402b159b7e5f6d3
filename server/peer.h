/* peer.h: server-to-server lazy binding, the asking side. When an instruction reads a value
 * held by another server, this server opens (once per holder endpoint, then keeps) a DEALER
 * to the holder's ROUTER, says hello as a peer and fetches the value into its own store
 * under the same id, where every local reader parked on it resolves without a copy; the
 * copy stays while it has local readers. A fetch with no answer about its id (the value, an
 * error, or the holder's "still pending", sent at each of our heartbeats while the value's
 * producer runs) for the fetch timeout after it was asked fails with LT_ELOST, and so do
 * all of a peer's when it stays silent that long, or a client's LOST names it. A link the
 * holder does not welcome within min(fetch timeout, 5 s) is dropped and its endpoint left
 * alone for 10 s, doubling up to 10 min: only Lithium servers are kept connected to. Links
 * idle for a fetch timeout are closed, and the least recently used idle one makes room when
 * the table is full. The holder's side of a fetch is fetch.c. Loop thread only. */
#ifndef LT_PEER_H
#define LT_PEER_H

#include <stdbool.h>
#include "server.h"
#include "session.h"

/* The hello name of a peer session starts with this (then the asker's endpoint), so that
 * the holder counts the values it serves to peers (load.peer_out). */
#define LT_PEER_NAME_PREFIX "peer "

/* Longest holder endpoint accepted (bytes). */
#define LT_PEER_EP_MAX 255

/* lt__peer_init initialises the peer state of `srv` (its timer handle, its peer client id)
 * with `fetch_ms`, the silence after which a peer with pending fetches is unreachable (and
 * the idle time after which a link without fetches is closed), and `max_peers`, the links
 * kept at most (0: LT_SRV_DEFAULT_MAX_PEERS). Call once while setting up, before anything
 * can close the server's handles. */
void lt__peer_init(lt_server_t *srv, uint64_t fetch_ms, uint32_t max_peers);

/* lt__peer_remote tells whether `holder` names another server than `srv` (not "" and not
 * its own endpoint). */
bool lt__peer_remote(const lt_server_t *srv, const char *holder);

/* lt__peer_endpoint_ok tells whether a holder endpoint from the network is acceptable:
 * tcp://, with a host part, at most LT_PEER_EP_MAX bytes. */
bool lt__peer_endpoint_ok(const char *ep);

/* lt__peer_need makes sure value `id` of `holder` (a remote, valid endpoint) is or will be
 * in the local store, for one more local reader: when the store has a copy fetched earlier
 * (or a fetch under way) the reader shares it; when the store does not know `id` a pending
 * entry is made and a FETCH goes to the holder. `last` says the reader is the value's last
 * consumer (LT_INSTR_RELEASE_INPUTS): the holder is asked to drop the value once it has
 * sent it, or, when a fetch without that request is under way or done, sent a RELEASE. The
 * caller then reads `id` from the store as a local input; when *counted is set it calls
 * lt__peer_unref once it no longer needs the input. (An id the store knows without having
 * fetched it is simply read: *counted stays false.) A FETCH that cannot be queued yet is
 * sent by the timer later, or fails after the fetch timeout. LT_OK, or LT_EINVAL (cannot
 * connect), LT_ELOST (every link has fetches pending and the table is full), LT_EIO
 * (cannot send), LT_ENOMEM, with a message in err: the reader fails, it never waits for
 * room. */
/* `key` is the holder's public key as the session announced it ("" or NULL: none; a link
 * opened under CURVE needs it), `secret` that of the session the value is fetched for. */
int lt__peer_need(lt_server_t *srv, const char *holder, const char *key, uint64_t secret,
                  lt_oid_t id, bool last, bool *counted, char *err, size_t errlen);

/* lt__peer_unref ends one reader of the fetched copy of `id`; after the last one the copy
 * leaves the store (the holder still has the value unless a last reader released it). A
 * later reader fetches again. */
void lt__peer_unref(lt_server_t *srv, lt_oid_t id);

/* lt__peer_release tells `holder` (a remote, valid endpoint) to drop `id`: a last reader
 * that will never fetch it (another of its inputs failed). Best effort: errors are logged. */
void lt__peer_release(lt_server_t *srv, const char *holder, const char *key, uint64_t secret,
                      lt_oid_t id);

/* lt__peer_name tells whether a hello `name` (may be NULL) is that of a peer server. */
bool lt__peer_name(const char *name);

/* lt__peer_lost handles a client's word that `holder` is dead (LT_MSG_LOST): every pending
 * fetch from it of a value of `client` fails at once with LT_ELOST ("holder EP is gone"),
 * failing the readers parked on it; the link is closed when no other client's fetch is
 * pending on it (a new one is made on the next need: the holder may come back). Fetches of
 * other clients' values keep waiting under the fetch timeout: one client's view proves
 * nothing about them. */
void lt__peer_lost(lt_server_t *srv, uint64_t client, const char *holder);

/* lt__peer_session tells whether session `s` is another server's peer link. */
bool lt__peer_session(const lt_session_t *s);

/* lt__peer_close_all closes every peer link (pending fetches fail with LT_ESHUTDOWN) and the
 * peer timer. Part of closing the server; the sockets are closed by the loop's close
 * callbacks, before the ZeroMQ context is terminated. */
void lt__peer_close_all(lt_server_t *srv);

#endif
