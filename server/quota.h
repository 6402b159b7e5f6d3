/* quota.h: what one session may take of a server: bytes of values held in the store and
 * how many ids (values pending, ready or failed), instructions parked and instructions
 * queued (checked by task.c), fetches waiting (fetch.c), and how many sessions there may
 * be at once (checked at hello); and what all sessions together may hold (--max-bytes,
 * --max-values). A refusal is LT_EQUOTA with a message naming the flag. Also raises
 * the open-file limit at start, so that the session limit stays below it, and gives memory back to
 * the system after large releases. Loop thread only. */
#ifndef LT_QUOTA_H
#define LT_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "server.h"

typedef struct lt_quota lt_quota_t;

/* lt__quota_new sets the quotas from the flags, raises the soft RLIMIT_NOFILE to the hard
 * one and derives the default session limit from it; counts each client's bytes held
 * through the store's accounting callback. LT_ENOMEM. */
int lt__quota_new(lt_server_t *srv, const lt_srv_args_t *a);

/* lt__quota_free frees the counters; accepts a server without them. */
void lt__quota_free(lt_server_t *srv);

/* lt__quota_held returns the bytes of values held under client id `client`. */
uint64_t lt__quota_held(const lt_server_t *srv, uint64_t client);

/* lt__quota_ids returns the ids (pending, ready or failed) held under client id `client`. */
uint64_t lt__quota_ids(const lt_server_t *srv, uint64_t client);

/* lt__quota_server_room tells whether `bytes` more bytes and `ids` more ids fit under the
 * server-wide caps (--max-bytes, --max-values: all sessions together, so that a thousand
 * sessions at their own quotas cannot hold a thousand times one). LT_OK, or LT_EQUOTA with a
 * message naming the flag in err. */
int lt__quota_server_room(const lt_server_t *srv, uint64_t bytes, uint64_t ids, char *err,
                          size_t errlen);

/* lt__quota_max_bytes, _max_values, _max_fetches, _max_parked, _max_queued, _max_sessions
 * return the limits. */
uint32_t lt__quota_max_values(const lt_server_t *srv);
uint32_t lt__quota_max_fetches(const lt_server_t *srv);
uint64_t lt__quota_max_bytes(const lt_server_t *srv);
uint32_t lt__quota_max_parked(const lt_server_t *srv);
uint32_t lt__quota_max_queued(const lt_server_t *srv);
uint32_t lt__quota_max_sessions(const lt_server_t *srv);

/* lt__quota_session_ok tells whether one more session may open; a refusal is logged, at
 * most once a second with the number refused since. */
bool lt__quota_session_ok(lt_server_t *srv);

/* lt__quota_trim returns freed heap to the system (malloc_trim) once at least 1 MiB of
 * values left the store since the last trim; after a session ends. */
void lt__quota_trim(lt_server_t *srv);

#endif
