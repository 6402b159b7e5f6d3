/* local.h: the sequential reference evaluator behind lt_eval_run_local: one thread that
 * takes submitted tasks in order and runs each task's instance to the end in this process,
 * one instruction at a time, with the same instance machinery (mdf/instance) and the same
 * instruction semantics (mdf/exec) as the servers. */
#ifndef LT_LOCAL_H
#define LT_LOCAL_H

#include "eval.h"
#include "json.h"
#include "module.h"

typedef struct lt_local lt_local_t;

/* lt__local_new loads the modules of ev->opts.modules and resolves every kernel of
 * ev->tmpl (a kernel that does not resolve fails the tasks that use it, with its message).
 * Evaluator thread. */
int lt__local_new(lt_local_t **out, lt_eval_t *ev);

/* lt__local_resolve is the sequential evaluator's loader, also that of `lithium check
 * --modules`: it creates a module registry in *mods (the caller frees it with
 * lt__modules_free, also on failure; NULL only when out of memory), searching directory
 * `dir` (NULL: none), and resolves each of the `n` kernels ("module:function") into fns[i]
 * and errs[i]: LT_OK, or the error (LT_ENOMODULE, LT_ENOKERNEL, LT_EINVAL) with its message
 * strdup'd into msgs[i] (the caller frees those). Returns LT_OK, LT_EINVAL when `dir` is not
 * a readable directory, or LT_ENOMEM. Any thread. */
int lt__local_resolve(lt_modules_t **mods, const char *dir, char *const *kernels, uint32_t n,
                      lt_kernel_fn *fns, int *errs, char **msgs);

/* lt__local_main is the thread body (arg: the lt_local_t); it runs until ev->stop. */
void *lt__local_main(void *arg);

/* lt__local_stats_json appends the counters to the open JSON object. Any thread. */
void lt__local_stats_json(lt_local_t *l, lt_json_t *j);

/* lt__local_free frees it after the thread was joined; accepts NULL. */
void lt__local_free(lt_local_t *l);

#endif
