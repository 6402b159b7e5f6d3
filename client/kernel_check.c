/* kernel_check.c: lt_skel_check_kernels, whether every kernel a program names can be loaded
 * (`lithium check --modules`). It compiles the program for its kernel list and asks the
 * sequential evaluator's loader (local.c), so it finds what lt_eval_run_local would; it
 * runs nothing. Any thread. */
#include <stdlib.h>

#include <lithium.h>
#include "lasterr.h"
#include "local.h"
#include "template.h"

/* resolve_all resolves the kernels of `t` from directory `dir` and reports each one that
 * does not load. Returns their count or an error. */
static int resolve_all(const lt_template_t *t, const char *dir, lt_kernel_report_fn fn, void *ud) {
  uint32_t n = t->nkernels;
  lt_kernel_fn *fns = calloc(n + 1, sizeof *fns);
  int *errs = calloc(n + 1, sizeof *errs);
  char **msgs = calloc(n + 1, sizeof *msgs);
  lt_modules_t *mods = NULL;
  int rc = fns && errs && msgs ? lt__local_resolve(&mods, dir, t->kernels, n, fns, errs, msgs)
                               : LT_ENOMEM;
  int missing = 0;
  for (uint32_t i = 0; rc == LT_OK && i < n; i++) {
    if (errs[i] == LT_OK) continue;
    missing++;
    if (fn != NULL) fn(ud, t->kernels[i], errs[i], msgs[i] != NULL ? msgs[i] : "");
  }
  for (uint32_t i = 0; msgs != NULL && i < n; i++)
    free(msgs[i]);
  free(msgs);
  free(errs);
  free(fns);
  lt__modules_free(mods);
  return rc == LT_OK ? missing : rc;
}

LT_API int lt_skel_check_kernels(const lt_skel_t *s, const char *dir, lt_kernel_report_fn fn,
                                 void *ud) {
  if (s == NULL) return lt__fail_null("lt_skel_check_kernels", "s", 0);
  lt_template_t *t = NULL;
  int rc = lt__template_compile(&t, s, 0);
  if (rc != LT_OK)
    return lt__fail(rc, "lt_skel_check_kernels: s is no valid program: %s", lt_strerror(rc));
  rc = resolve_all(t, dir, fn, ud);
  lt__template_free(t);
  if (rc == LT_EINVAL)
    lt__fail(rc, "lt_skel_check_kernels: dir '%.300s' is not a readable directory",
             dir != NULL ? dir : "(null)");
  else if (rc < 0)
    lt__fail(rc, "lt_skel_check_kernels: %s", lt_strerror(rc));
  return rc;
}
