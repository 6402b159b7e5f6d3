/* host_access.c: what a tool needs to reach servers outside an evaluator: hosts files and
 * announce directories (hosts.c), host strings and CURVE key files (proto/curve.c). Each
 * function forwards to the one parser the library itself uses, so a tool accepts exactly
 * what lt_eval_add_host and option `hosts` accept. Any thread. */
#include <string.h>

#include <lithium.h>
#include "curve.h"
#include "hosts.h"

_Static_assert(LT_ENDPOINT_MAX == LT_HOST_EP_MAX && LT_ENDPOINT_MAX == LT_HOSTS_ENDPOINT_MAX,
               "one longest endpoint");
_Static_assert(LT_KEY_LEN == LT_Z85_KEY_LEN && LT_KEY_LEN == LT_HOSTS_KEY_LEN, "one key length");

LT_API int lt_hosts_read(const char *path, lt_hosts_fn fn, void *ud, char *err, size_t errlen) {
  if (path == NULL || fn == NULL) return LT_EINVAL;
  return lt__hosts_read(path, fn, ud, err, errlen);
}

LT_API int lt_host_split(const char *host, char *endpoint, char *key) {
  return lt__host_parse(host, endpoint, key);
}

LT_API int lt_key_valid(const char *text) {
  return text != NULL && lt__hosts_key_valid(text, strlen(text));
}

LT_API int lt_keypair_write(const char *name, char *err, size_t errlen) {
  return lt__curve_keygen(name, err, errlen);
}

LT_API int lt_keypair_read(const char *path, char *pub, char *sec, char *err, size_t errlen) {
  return lt__curve_load_keypair(path, pub, sec, err, errlen);
}
