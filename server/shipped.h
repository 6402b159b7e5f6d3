/* shipped.h: kernel modules shipped by clients (--accept-modules DIR). The store is
 * content-addressed: DIR/<sha256>.so, written to a temporary file and renamed, mode 0600 in
 * a directory of mode 0700 that only the server's user owns; a module is verified against
 * the SHA-256 its client announced before it is stored, and a stored file again before it
 * is used. A loaded module belongs to the sessions that shipped it, never to the server's
 * shared registry: it is reference counted — its session holds one reference and every
 * kernel table (lt_program_t) that resolved a kernel in it another — so it is unloaded only
 * once no queued or running instruction can call into it. Two modules of one name with
 * different bytes are two files and so two handles (RTLD_LOCAL), whatever their DT_SONAME.
 * Loop thread only. */
#ifndef LT_SHIPPED_H
#define LT_SHIPPED_H

#include <stddef.h>
#include "module.h"

typedef struct lt_shipstore lt_shipstore_t;
typedef struct lt_shipped lt_shipped_t;

/* lt__shipstore_open makes `dir` the store: created (mode 0700) when missing; an existing
 * one must be a directory owned by the server's user and is made mode 0700. LT_EINVAL or
 * LT_EAUTH with the reason in err. */
int lt__shipstore_open(lt_shipstore_t **out, const char *dir, char *err, size_t errlen);

/* lt__shipstore_free frees the store handle (the files stay: they are a cache); accepts
 * NULL. Modules still loaded keep their own references. */
void lt__shipstore_free(lt_shipstore_t *st);

/* lt__shipstore_load verifies that data[0..len) has the hex SHA-256 `sha`, stores it (or
 * finds it stored) and loads it as module `name`. On success *out holds one reference.
 * LT_ENOMODULE with the reason in err (hash mismatch, not a shared object for this machine,
 * dlopen's error), LT_EIO (the store cannot be written), LT_ENOMEM. */
int lt__shipstore_load(lt_shipstore_t *st, const char *name, const char *sha, const void *data,
                       size_t len, lt_shipped_t **out, char *err, size_t errlen);

/* lt__shipped_ref takes one more reference (accepts NULL) and returns it. */
lt_shipped_t *lt__shipped_ref(lt_shipped_t *m);

/* lt__shipped_unref drops one; the last unloads the module. Accepts NULL. */
void lt__shipped_unref(lt_shipped_t *m);

/* lt__shipped_sha256 returns the module's hex SHA-256 (borrowed). */
const char *lt__shipped_sha256(const lt_shipped_t *m);

/* lt__shipped_kernel resolves kernel `kernel` ("module:function") in the module.
 * LT_ENOKERNEL with a message. */
int lt__shipped_kernel(lt_shipped_t *m, const char *kernel, lt_kernel_fn *fn, char *err,
                       size_t errlen);

/* lt__shipped_in_place tells whether kernel `kernel` of the module writes in place
 * (LT_KERNEL_IN_PLACE). */
int lt__shipped_in_place(lt_shipped_t *m, const char *kernel);

#endif
