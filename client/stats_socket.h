/* stats_socket.h: the evaluation's stats on a local Unix-domain socket (option stats_socket)
 * for `lithium top`. The evaluator opens it at lt_eval_start and closes it at lt_eval_free
 * (after the dispatcher thread was joined); the dispatcher serves it from its own loop: the
 * listening socket and each connection are items of its zmq_poll, every call on them is
 * non-blocking, and a connection gets LT_STATSOCK_MS to ask and read before it is closed,
 * so a reader that connects and never reads costs one buffered snapshot, for that long.
 *
 * The protocol: the reader sends the line "stats\n"; the answer is the snapshot (the text of
 * lt_eval_stats_json) and "\n", then the connection closes. Any other request gets
 * {"error":"..."} and "\n" and is closed. lt__statsock_open/close: evaluator thread;
 * lt__statsock_items/serve: dispatcher thread. */
#ifndef LT_STATS_SOCKET_H
#define LT_STATS_SOCKET_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#define LT_STATSOCK_CONNS 8 /* readers served at once; more are closed at once */
#define LT_STATSOCK_ITEMS (1 + LT_STATSOCK_CONNS)
#define LT_STATSOCK_MS    2000 /* a connection's whole life: ask, answer, read */

/* lt_statsock_snap_fn writes the snapshot's text into *json (the caller frees it); returns
 * LT_OK or a negative code. Called on the dispatcher thread. */
typedef int (*lt_statsock_snap_fn)(void *ud, char **json);

typedef struct lt_statsock lt_statsock_t;

/* lt__statsock_open listens on the Unix-domain socket `path`, mode 0600 from its creation on
 * (it accepts no connection before its mode is set, and answers only readers of our own
 * user). A socket of ours at `path` that nothing listens on (left by a run that was
 * killed) is replaced; anything else there is refused: LT_EEXIST. LT_EINVAL: a path too
 * long for a socket; LT_EIO: the system refused. `err` (len bytes) says why. */
int lt__statsock_open(lt_statsock_t **out, const char *path, lt_statsock_snap_fn snap, void *ud,
                      char *err, size_t len);

/* lt__statsock_items fills items[0..LT_STATSOCK_ITEMS) for zmq_poll: the listening socket,
 * then each connection (fd -1 when none). */
void lt__statsock_items(const lt_statsock_t *ss, zmq_pollitem_t *items);

/* lt__statsock_serve accepts, reads, answers and closes as items' revents (from
 * lt__statsock_items and zmq_poll) allow, without blocking, and closes the connections older
 * than LT_STATSOCK_MS at `now_ms`. */
void lt__statsock_serve(lt_statsock_t *ss, const zmq_pollitem_t *items, int64_t now_ms);

/* lt__statsock_close closes every connection and the socket and removes the socket file if it
 * is still the one it created; accepts NULL. */
void lt__statsock_close(lt_statsock_t *ss);

#endif
