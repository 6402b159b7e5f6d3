/* local.h: the sequential reference evaluator behind lt_eval_run_local: one thread that
 * takes submitted tasks in order and runs each task's instance to the end in this process,
 * one instruction at a time, with the same instance machinery (mdf/instance) and the same
 * instruction semantics (mdf/exec) as the servers. */
#ifndef LT_LOCAL_H
#define LT_LOCAL_H

#include "backend.h"
#include "module.h"

typedef struct lt_local lt_local_t;

/* The sequential evaluator is the backend lt__local_backend (backend.h). */

/* lt__local_resolve is the sequential evaluator's loader, also that of `lithium check
 * --modules`: it creates a module registry in *mods (the caller frees it with
 * lt__modules_free, also on failure; NULL only when out of memory), searching directory
 * `dir` (NULL: none), and resolves each of the `n` kernels ("module:function") into fns[i]
 * and errs[i]: LT_OK, or the error (LT_ENOMODULE, LT_ENOKERNEL, LT_EINVAL) with its message
 * strdup'd into msgs[i] (the caller frees those). Returns LT_OK, LT_EINVAL when `dir` is not
 * a readable directory, or LT_ENOMEM. Any thread. */
int lt__local_resolve(lt_modules_t **mods, const char *dir, char *const *kernels, uint32_t n,
                      lt_kernel_fn *fns, int *errs, char **msgs);

#endif
