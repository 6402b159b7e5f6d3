/* local.c: the sequential reference evaluator (local.h), a backend (backend.h). Every
 * fired frame goes on a stack and is run at once with lt__exec_run; a task's instance is
 * driven to its end before the next task starts. Nothing here knows of sockets. Its own
 * thread, plus local_new on the evaluator's thread. */
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "buf.h"
#include "exec.h"
#include "instance.h"
#include "local.h"
#include "log.h"
#include "module.h"
#include "vec.h"

struct lt_local {
  lt_eval_t *ev;              /* opaque: the door's calls only */
  const lt_eval_door_t *door; /* the evaluator's calls (backend.h) */
  const lt_template_t *tmpl;
  int wake_fd;
  lt_modules_t *mods;
  lt_kernel_fn *fns; /* per kernel of the template; NULL when it did not resolve */
  int *errs;
  char **errmsgs;
  lt_frame_t **stack;
  size_t nstack, capstack;
  atomic_ullong instructions;
};

int lt__local_resolve(lt_modules_t **mods, const char *dir, char *const *kernels, uint32_t n,
                      lt_kernel_fn *fns, int *errs, char **msgs) {
  int rc = lt__modules_new(mods);
  if (rc == LT_OK && dir != NULL) rc = lt__modules_add_dir(*mods, dir);
  for (uint32_t i = 0; rc == LT_OK && i < n; i++) {
    char err[512];
    errs[i] = lt__modules_resolve(*mods, kernels[i], &fns[i], err, sizeof err);
    if (errs[i] != LT_OK && (msgs[i] = strdup(err)) == NULL) rc = LT_ENOMEM;
  }
  return rc;
}

static void local_free(void *self) {
  lt_local_t *l = self;
  if (l == NULL) return;
  if (l->errmsgs != NULL)
    for (uint32_t i = 0; i < l->tmpl->nkernels; i++)
      free(l->errmsgs[i]);
  free(l->errmsgs);
  free(l->errs);
  free(l->fns);
  free(l->stack);
  lt__modules_free(l->mods);
  free(l);
}

/* local_new loads the modules of option `modules` and resolves every kernel of the
 * template (a kernel that does not resolve fails the tasks that use it, with its message).
 * Evaluator thread. */
static int local_new(void **out, const lt_backend_env_t *env) {
  *out = NULL;
  lt_local_t *l = calloc(1, sizeof *l);
  if (l == NULL) return LT_ENOMEM;
  l->ev = env->ev;
  l->door = env->door;
  l->tmpl = env->tmpl;
  l->wake_fd = env->wake_fd;
  uint32_t n = l->tmpl->nkernels;
  l->fns = calloc(n, sizeof *l->fns);
  l->errs = calloc(n, sizeof *l->errs);
  l->errmsgs = calloc(n, sizeof *l->errmsgs);
  int rc = (l->fns && l->errs && l->errmsgs)
               ? lt__local_resolve(&l->mods, env->opts->modules, l->tmpl->kernels, n, l->fns,
                                   l->errs, l->errmsgs)
               : LT_ENOMEM;
  if (rc != LT_OK) {
    if (rc == LT_EINVAL)
      lt__log(LT_LOG_ERROR, "run_local: cannot use module directory '%s'", env->opts->modules);
    local_free(l);
    return rc;
  }
  *out = l;
  return LT_OK;
}

static void on_fire(void *ud, lt_instance_t *inst, lt_frame_t *f) {
  (void)inst;
  lt_local_t *l = ud;
  if (LT_VEC_RESERVE(l->stack, l->capstack, l->nstack + 1) != LT_OK)
    abort(); /* nothing sensible is left to do without memory */
  l->stack[l->nstack++] = f;
}

/* run_frame runs the instruction of `f` and applies its completion. On failure returns the
 * error and writes its message into err. */
static int run_frame(lt_local_t *l, lt_instance_t *inst, lt_frame_t *f, char *err, size_t errlen) {
  const lt_template_t *t = l->tmpl;
  lt_fire_t fi;
  lt__frame_fire_info(f, &fi);
  lt_exec_stage_t st[fi.nstages];
  for (uint32_t k = 0; k < fi.nstages; k++) {
    uint32_t ki = fi.stages[k].kernel;
    if (l->fns[ki] == NULL) {
      snprintf(err, errlen, "%s", l->errmsgs[ki]);
      return l->errs[ki];
    }
    st[k] =
        (lt_exec_stage_t){l->fns[ki], t->kernels[ki], {fi.stages[k].param, fi.stages[k].param_len}};
  }
  lt_bytes_t in[fi.ninputs ? fi.ninputs : 1];
  for (uint32_t k = 0; k < fi.ninputs; k++)
    in[k] = (lt_bytes_t){fi.inputs[k].value->data, fi.inputs[k].value->len};
  lt_exec_result_t r;
  lt__exec_run(fi.op, st, fi.nstages, in, fi.ninputs, &r);
  atomic_fetch_add(&l->instructions, 1);
  if (r.status != LT_OK) {
    snprintf(err, errlen, "%s", r.errmsg);
    lt__exec_result_clear(&r);
    return r.status;
  }
  lt_token_t *toks = calloc(r.nout ? r.nout : 1, sizeof *toks);
  int rc = toks != NULL ? LT_OK : LT_ENOMEM;
  for (uint32_t i = 0; rc == LT_OK && i < r.nout; i++) {
    toks[i].at = 0;
    toks[i].size = r.outlen[i];
    toks[i].value = lt__value_pooled(r.out[i], r.outlen[i]);
    r.out[i] = NULL;
    if (toks[i].value == NULL) rc = LT_ENOMEM;
  }
  if (rc == LT_OK)
    rc = lt__instance_complete(inst, f, r.answer, toks, r.nout, on_fire, l, err, errlen);
  else
    snprintf(err, errlen, "out of memory");
  for (uint32_t i = 0; toks != NULL && i < r.nout; i++)
    lt__value_unref(toks[i].value);
  free(toks);
  lt__exec_result_clear(&r);
  return rc;
}

/* run_task drives one task's instance to its end and returns its result. */
static lt_buf_t *run_task(lt_local_t *l, lt_task_t *task) {
  lt_instance_t *inst = NULL;
  char err[LT_KERNEL_ERRMSG_MAX + 256] = "";
  int rc = lt__instance_new(&inst, l->tmpl, task->seq);
  l->nstack = 0;
  if (rc == LT_OK)
    rc = task->input2 != NULL ? lt__instance_feed_pair(inst, task->input, task->input2, on_fire, l)
                              : lt__instance_feed(inst, task->input, on_fire, l);
  /* The instance holds the inputs as long as its instructions need them; nothing is ever
   * recomputed here, so the task's own references go now. */
  lt__value_unref(task->input);
  lt__value_unref(task->input2);
  task->input = task->input2 = NULL;
  while (rc == LT_OK && l->nstack > 0) {
    lt_frame_t *f = l->stack[--l->nstack];
    rc = run_frame(l, inst, f, err, sizeof err);
  }
  lt_buf_t *b;
  if (rc != LT_OK)
    b = lt__buf_fail(rc, err);
  else if (!inst->done)
    b = lt__buf_fail(LT_ESTATE, "the program ended without a result");
  else
    b = lt__buf_ok(inst->result.value);
  lt__instance_free(inst);
  return b != NULL ? b : lt__buf_fail(LT_ENOMEM, NULL);
}

/* local_main is the thread body: one task at a time, in submission order, until the
 * evaluator stops it (tasks still queued then are cancelled by lt_eval_free). */
static void *local_main(void *arg) {
  lt_local_t *l = arg;
  while (!l->door->stopping(l->ev)) {
    lt_task_t *t = l->door->take(l->ev, 1);
    if (t == NULL) {
      struct pollfd pfd = {.fd = l->wake_fd, .events = POLLIN};
      if (poll(&pfd, 1, -1) > 0) l->door->woken(l->ev);
      continue;
    }
    t->result = run_task(l, t);
    /* The journal syncs when nothing waits: a batch, what was waiting, is done. */
    l->door->deliver(l->ev, t, LT_EVAL_SYNC_IDLE);
  }
  return NULL;
}

static void local_stats_json(void *self, lt_json_t *j) {
  lt_local_t *l = self;
  lt__json_u64(j, "instructions", atomic_load(&l->instructions));
  lt__json_u64(j, "bytes_to_servers", 0);
  lt__json_u64(j, "bytes_from_servers", 0);
  lt__json_u64(j, "retries", 0);
  lt__json_str(j, "mode", "local");
  lt__json_array_open(j, "servers");
  lt__json_array_close(j);
}

const lt_backend_ops_t lt__local_backend = {
    .create = local_new,
    .run = local_main,
    .stats_json = local_stats_json,
    .destroy = local_free,
};
