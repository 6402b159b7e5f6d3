/* module.h: kernel modules. A registry of module directories and loaded modules; resolves
 * "module:function" to the function `lt_kernel_function` exported by libmodule.so (or
 * module.so) in the first directory that has it. Modules stay loaded until the registry is
 * freed. Thread-safe (one mutex): any thread. */
#ifndef LT_MODULE_H
#define LT_MODULE_H

#include <stddef.h>
#include <lithium/kernel.h>

typedef int (*lt_kernel_fn)(lt_call_t *call);
typedef struct lt_modules lt_modules_t;

/* lt__modules_new creates an empty registry. */
int lt__modules_new(lt_modules_t **out);

/* lt__modules_add_dir appends a directory to search (copied). LT_EINVAL when it is not a
 * readable directory. */
int lt__modules_add_dir(lt_modules_t *m, const char *dir);

/* lt__modules_resolve finds kernel `name` ("module:function"). On failure returns
 * LT_EINVAL (malformed name), LT_ENOMODULE or LT_ENOKERNEL and writes a message naming the
 * module/kernel (and dlerror's reason) into err. */
int lt__modules_resolve(lt_modules_t *m, const char *name, lt_kernel_fn *fn, char *err,
                        size_t errlen);

/* lt_module_fn receives a loaded module's name and the hex SHA-256 of its file ("" when
 * it could not be read); both borrowed for the call, which must not use the registry. */
typedef void (*lt_module_fn)(void *ud, const char *name, const char *sha256);

/* lt__modules_each calls fn for every loaded module, most recently loaded first, and
 * returns how many there are. */
size_t lt__modules_each(lt_modules_t *m, lt_module_fn fn, void *ud);

/* lt__modules_free unloads every module and frees the registry; accepts NULL. */
void lt__modules_free(lt_modules_t *m);

/* lt__kernel_name_valid tells whether `name` is "module:function" with both parts made of
 * [A-Za-z0-9_], module may also contain '-' and '.', and at most 255 bytes. */
int lt__kernel_name_valid(const char *name);

#endif
