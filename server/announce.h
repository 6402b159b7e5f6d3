/* announce.h: `lithium-server --announce DIR`: once bound, the server writes its hosts-file
 * line to DIR/<name>.endpoint (atomically: a temporary file renamed into place) and removes
 * it when it exits after a graceful stop. Clients with `hosts=DIR` use every server
 * announced there. Main thread only. */
#ifndef LT_SRV_ANNOUNCE_H
#define LT_SRV_ANNOUNCE_H

#include <stddef.h>

/* lt__announce_endpoint turns the bound endpoint `bound` into one a client on another host
 * can reach: `advertise` replaces the host part when given (a full "tcp://..." endpoint
 * replaces everything); a wildcard host (0.0.0.0, [::], *) becomes the first non-loopback
 * IPv4 address of the host (127.0.0.1 when there is none). LT_EINVAL when `bound` is not
 * tcp://HOST:PORT or the result does not fit `len`. */
int lt__announce_endpoint(const char *bound, const char *advertise, char *out, size_t len);

/* lt__announce_write writes `line` (a hosts-file line, without newline) to
 * DIR/<name>.endpoint, `name` with '/' and leading dots made harmless; the path written is
 * put into `path`. LT_EIO with the reason in `err`. */
int lt__announce_write(const char *dir, const char *name, const char *line, char *path,
                       size_t pathlen, char *err, size_t errlen);

/* lt__announce_remove removes the file lt__announce_write wrote; "" does nothing. */
void lt__announce_remove(const char *path);

#endif
