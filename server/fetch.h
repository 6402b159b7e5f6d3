/* fetch.h: FETCH requests on the holder of a value: answered at once, or parked until the
 * value is set (or, for a peer, until an unknown id appears); with `release` the value is
 * dropped once sent. Fetching from another holder
 * is peer.h. Loop thread only. */
#ifndef LT_FETCH_H
#define LT_FETCH_H

#include "server.h"
#include "session.h"

/* lt__fetch_handle answers a FETCH of `id` from session `s`, whose frame limit is
 * `max_frame` (0: none), with a VALUE: at once when the value is ready, failed or unknown
 * (LT_ENOENT), or once it is set when it is pending (while the server is stopping, a pending
 * value is answered LT_ESHUTDOWN at once). An unknown id asked for by a peer server waits up
 * to a grace period (2 s, at most --fetch-timeout) for the instruction that makes it, as the
 * peer's fetch may overtake the client's EXECUTE. With `release` (the asker is the last
 * reader) a ready or failed value is dropped from the store right after its VALUE is sent. A
 * value over `max_frame` is refused with LT_ETOOBIG, not sent: the asker's socket would drop
 * the link it came on. The bytes of values sent to peer sessions count in srv->peer_out. */
/* With `shm` (a same-host peer attached to this server's unix socket) a ready value of at
 * least LT_SHM_MIN bytes goes as a memfd (shm.h) instead of a VALUE. */
void lt__fetch_handle(lt_server_t *srv, lt_session_t *s, lt_oid_t id, bool release,
                      uint64_t max_frame, bool shm);

/* lt__fetch_init initialises the timer of the fetches that wait for unknown ids. Call once
 * while setting up, before anything can close the server's handles. */
void lt__fetch_init(lt_server_t *srv);

/* lt__fetch_close closes that timer. Part of closing the server. */
void lt__fetch_close(lt_server_t *srv);

/* lt__fetch_retry answers or parks the peers' fetches whose unknown id has entered the store
 * since the last call (the store tells fetch.c of every new id); the others are not looked
 * at, and those past their grace period are answered LT_ENOENT by a timer. Part of
 * the server's settle: costs nothing when no waited-for id appeared. A session's fetches
 * waiting at once are bounded by --max-session-fetches (LT_EQUOTA). */
void lt__fetch_retry(lt_server_t *srv);

/* lt__fetch_still_pending answers a heartbeat of peer session `s`: each of its fetches
 * parked on a value whose producer has not finished is told "still pending" (a VALUE with
 * LT_EAGAIN), which keeps the asker's fetch waiting another --fetch-timeout (peer.h); at
 * most once every STILL_PENDING_MS per session, whatever the heartbeats' rate. */
void lt__fetch_still_pending(lt_server_t *srv, lt_session_t *s);

/* lt__fetch_drop_session takes the session's parked fetches out of the store; unless
 * `status` is LT_OK each is first answered with a VALUE carrying `status`. */
void lt__fetch_drop_session(lt_server_t *srv, lt_session_t *s, int status);

#endif
