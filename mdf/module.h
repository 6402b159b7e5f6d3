/* module.h: kernel modules. A registry of module directories and loaded modules; resolves
 * "module:function" to the function `lt_kernel_function` exported by libmodule.so (or
 * module.so) in the first directory that has it. Modules stay loaded until the registry is
 * freed. Thread-safe (one mutex): any thread. */
#ifndef LT_MODULE_H
#define LT_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <lithium/kernel.h>
#include "sha256.h"

/* The longest kernel name ("module:function") and so the longest module name, in bytes. */
#define LT_MODULE_NAME_MAX 255

typedef int (*lt_kernel_fn)(lt_call_t *call);
typedef struct lt_modules lt_modules_t;

/* lt__modules_new creates an empty registry. */
int lt__modules_new(lt_modules_t **out);

/* lt__modules_set_checked makes every later load of a module check its file first
 * (safefile.h): opened without following a link, owned by root or this process's user and
 * writable by no one else, in a directory chain likewise; loaded from the descriptor
 * checked. A module that fails is not loaded (LT_ENOMODULE, naming the reason). Each load
 * checks again; a loaded module stays loaded. */
void lt__modules_set_checked(lt_modules_t *m, bool on);

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

/* lt__modules_locate writes the path of the file module `name` would be loaded from (the
 * first directory with lib<name>.so or <name>.so) into path. LT_OK or LT_ENOMODULE. */
int lt__modules_locate(lt_modules_t *m, const char *name, char *path, size_t len);

/* lt__modules_sha256 writes the hex SHA-256 of the copy of module `name` this registry
 * would run into hex: of the module loaded, else of the file it would load; "" when it has
 * none (or the file cannot be read). */
void lt__modules_sha256(lt_modules_t *m, const char *name, char hex[LT_SHA256_HEX]);

/* lt__modules_free unloads every module and frees the registry; accepts NULL. */
void lt__modules_free(lt_modules_t *m);

/* lt__kernel_name_valid tells whether `name` is "module:function" with both parts made of
 * [A-Za-z0-9_], module may also contain '-' and '.', and at most 255 bytes. */
int lt__kernel_name_valid(const char *name);

/* lt__module_name_valid tells whether `module` is a module name: [A-Za-z0-9_.-]+, at most
 * LT_MODULE_NAME_MAX bytes, and neither "." nor "..". */
int lt__module_name_valid(const char *module);

/* lt__kernel_module writes the module part of kernel `kernel` into module. LT_EINVAL for a
 * malformed kernel name. */
int lt__kernel_module(const char *kernel, char module[LT_MODULE_NAME_MAX + 1]);

/* lt__module_open loads the module file at `path` (named `name` in messages) with
 * RTLD_NOW | RTLD_LOCAL, after checking that it is a shared object for this machine: a file
 * at another path is another handle, even with the same DT_SONAME. LT_ENOMODULE with the
 * reason in err ("cannot load module 'img': built for another architecture: ..."). */
int lt__module_open(const char *path, const char *name, void **handle, char *err, size_t errlen);

/* lt__module_kernel finds kernel `kernel` ("module:function") in a loaded module's
 * `handle`: its symbol lt_kernel_<function>. LT_ENOKERNEL with a message. */
int lt__module_kernel(void *handle, const char *kernel, lt_kernel_fn *fn, char *err, size_t errlen);

/* lt__module_in_place tells whether kernel `kernel` ("module:function") of the loaded module
 * `handle` is declared to write in place (LT_KERNEL_IN_PLACE). */
int lt__module_in_place(void *handle, const char *kernel);

/* lt__modules_in_place tells the same of a kernel of the registry's modules (0 when its
 * module does not load). */
int lt__modules_in_place(lt_modules_t *m, const char *name);

#endif
