/* zap.h: lithium-server's gatekeeper, libzmq's ZAP protocol (RFC 27): a thread of its own
 * answers the authentication requests of the context on "inproc://zeromq.zap.01", so a
 * handshake costs the loop nothing. It names every connection: the connection's number
 * (LT_ZAP_CONN, one per handshake, never reused) becomes a property of each of its
 * messages, so that a session is bound to its connection and not to a routing id. With a
 * key pair (CURVE) a key is allowed when it is the server's own public key (servers sharing
 * a key pair trust one another) or listed in the --allow file; a refused key is logged at
 * warn with its address; the allowed key becomes the connection's "User-Id" message
 * property. Without one, only the NULL mechanism is taken. The list is re-read on
 * lt__zap_reload (SIGHUP). */
#ifndef LT_ZAP_H
#define LT_ZAP_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

/* The message property (ZAP metadata) holding the number of a message's connection, in
 * decimal; libzmq puts ZAP metadata before the peer's own properties, so a peer cannot
 * forge it. */
#define LT_ZAP_CONN "X-Lithium-Conn"

typedef struct lt_zap lt_zap_t;

/* lt__zap_start reads the allow file `allow_path` (may be NULL: only `own_pub` is allowed),
 * binds the ZAP socket in `zctx` and starts the thread; call before any socket binds.
 * `own_pub` NULL: no CURVE, connections use the NULL mechanism (and allow_path is unused).
 * LT_EINVAL/LT_EIO for an unreadable or malformed file, with a message in err. Loop thread. */
int lt__zap_start(lt_zap_t **out, void *zctx, const char *own_pub, const char *allow_path,
                  char *err, size_t errlen);

/* lt__zap_reload reads the allow file again; on an error the old list stays and the
 * message goes into err. Loop thread. */
int lt__zap_reload(lt_zap_t *z, char *err, size_t errlen);

/* lt__zap_conn reads the connection number of a received message part (its LT_ZAP_CONN
 * property); 0 when it has none (a message that did not pass the handshake's ZAP request).
 * Loop thread. */
uint64_t lt__zap_conn(zmq_msg_t *msg);

/* lt__zap_stop stops the thread, closes its socket and frees z; before the context is
 * terminated. Accepts NULL. Loop thread. */
void lt__zap_stop(lt_zap_t *z);

#endif
