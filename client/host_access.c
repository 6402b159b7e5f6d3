/* host_access.c: what a tool needs to reach servers outside an evaluator: hosts files and
 * announce directories (hosts.c), host strings and CURVE key files (proto/curve.c). Each
 * function forwards to the one parser the library itself uses, so a tool accepts exactly
 * what lt_eval_add_host and option `hosts` accept. Any thread. */
#include <stdio.h>
#include <string.h>

#include <lithium.h>
#include "curve.h"
#include "hosts.h"
#include "lasterr.h"

_Static_assert(LT_ENDPOINT_MAX == LT_HOST_EP_MAX && LT_ENDPOINT_MAX == LT_HOSTS_ENDPOINT_MAX,
               "one longest endpoint");
_Static_assert(LT_KEY_LEN == LT_Z85_KEY_LEN && LT_KEY_LEN == LT_HOSTS_KEY_LEN, "one key length");

LT_API int lt_hosts_read(const char *path, lt_hosts_fn fn, void *ud, char *err, size_t errlen) {
  if (path == NULL || fn == NULL) {
    if (err != NULL && errlen > 0)
      snprintf(err, errlen, "%s is NULL", path == NULL ? "path" : "fn");
    return lt__fail_null("lt_hosts_read", path == NULL ? "path" : "fn", 0);
  }
  char mine[512] = "";
  int rc = lt__hosts_read(path, fn, ud, mine, sizeof mine);
  if (err != NULL && errlen > 0) snprintf(err, errlen, "%s", mine);
  if (rc < 0) lt__fail(rc, "lt_hosts_read: path '%.300s': %s", path, mine);
  return rc;
}

LT_API int lt_host_split(const char *host, char *endpoint, char *key) {
  if (host == NULL || endpoint == NULL || key == NULL)
    return lt__fail_null("lt_host_split",
                         host == NULL       ? "host"
                         : endpoint == NULL ? "endpoint"
                                            : "key",
                         0);
  int rc = lt__host_parse(host, endpoint, key);
  if (rc != LT_OK)
    lt__fail(rc,
             "lt_host_split: host '%.300s' is malformed: expected 'tcp://HOST:PORT' and an "
             "optional CURVE server key (%d Z85 characters)",
             host, LT_KEY_LEN);
  return rc;
}

LT_API int lt_key_valid(const char *text) {
  return text != NULL && lt__hosts_key_valid(text, strlen(text));
}

LT_API int lt_keypair_write(const char *name, char *err, size_t errlen) {
  char mine[512] = "";
  int rc = lt__curve_keygen(name, mine, sizeof mine);
  if (err != NULL && errlen > 0) snprintf(err, errlen, "%s", mine);
  if (rc != LT_OK)
    lt__fail(rc, "lt_keypair_write: name '%.300s': %s", name ? name : "(null)", mine);
  return rc;
}

LT_API int lt_keypair_read(const char *path, char *pub, char *sec, char *err, size_t errlen) {
  char mine[512] = "";
  int rc = lt__curve_load_keypair(path, pub, sec, mine, sizeof mine);
  if (err != NULL && errlen > 0) snprintf(err, errlen, "%s", mine);
  if (rc != LT_OK) lt__fail(rc, "lt_keypair_read: path '%.300s': %s", path ? path : "(null)", mine);
  return rc;
}
