/* fetch.h: FETCH requests on the holder of a value: answered at once, or parked until the
 * value is set. Loop thread only. */
#ifndef LT_FETCH_H
#define LT_FETCH_H

#include "server.h"
#include "session.h"

/* lt__fetch_handle answers a FETCH of `id` from session `s` with a VALUE: at once when the
 * value is ready, failed or unknown (LT_ENOENT), or once it is set when it is pending (while
 * the server is stopping, a pending value is answered LT_ESHUTDOWN at once). */
void lt__fetch_handle(lt_server_t *srv, lt_session_t *s, lt_oid_t id);

/* lt__fetch_drop_session takes the session's parked fetches out of the store; unless
 * `status` is LT_OK each is first answered with a VALUE carrying `status`. */
void lt__fetch_drop_session(lt_server_t *srv, lt_session_t *s, int status);

#endif
