/* oid.h: object ids (lt_oid_t, defined in proto/msg.h) and the client's id generator.
 * An id is named by the client: 64-bit random client id + 64-bit sequence. Any thread. */
#ifndef LT_OID_H
#define LT_OID_H

#include <stdbool.h>
#include <stdint.h>
#include "msg.h"

/* lt__oid_eq tells whether two ids are the same. */
static inline bool lt__oid_eq(lt_oid_t a, lt_oid_t b) {
  return a.client == b.client && a.seq == b.seq;
}

/* lt__oid_client_random returns a fresh non-zero random client id (getrandom, falling back
 * to time and pid). */
uint64_t lt__oid_client_random(void);

/* lt__oid_format writes "clie...:seq" in hex into buf (at least 25 bytes) and returns buf:
 * only the first 4 hex digits of the client id, which is not to be logged in full. */
char *lt__oid_format(lt_oid_t id, char *buf, size_t len);

#endif
