/* skel.c: builders and destructor of skeleton trees (lithium/skel.h). Builders take
 * ownership of their children and free them when they fail; which kernels a kind takes and
 * how many children is the kinds table's (kind.h). Knows nothing of running. Any thread. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "kind.h"
#include "module.h"
#include "skel.h"

static lt_skel_t *node_new(lt_skel_kind_t kind, size_t nchildren) {
  lt_skel_t *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->kind = kind;
  if (nchildren > 0) {
    s->children = calloc(nchildren, sizeof *s->children);
    if (s->children == NULL) {
      free(s);
      return NULL;
    }
  }
  s->nchildren = nchildren;
  return s;
}

/* kernels_valid tells whether `kernels` holds a valid name for each kernel argument of the
 * kind `d`, in argument order; NULL stands for a skeleton in place of the kernel where the
 * argument allows one. */
static int kernels_valid(const lt_skel_kind_desc_t *d, const char *const *kernels) {
  size_t k = 0;
  for (uint32_t i = 0; i < d->nargs; i++) {
    if (d->args[i].kind != LT_ARG_KERNEL) continue;
    if (kernels[k] == NULL ? d->args[i].instead == 0 : !lt__kernel_name_valid(kernels[k])) return 0;
    k++;
  }
  return 1;
}

/* node_with returns a node of `kind` holding copies of `kernels` (one per kernel argument,
 * in argument order) with room for `nchildren` children; NULL on a malformed name or out of
 * memory. */
static lt_skel_t *node_with(lt_skel_kind_t kind, const char *const *kernels, size_t nchildren) {
  const lt_skel_kind_desc_t *d = lt__skel_kind(kind);
  if (!kernels_valid(d, kernels)) return NULL;
  lt_skel_t *s = node_new(kind, nchildren);
  if (s == NULL) return NULL;
  size_t k = 0;
  for (uint32_t i = 0; i < d->nargs; i++) {
    if (d->args[i].kind != LT_ARG_KERNEL) continue;
    const char *name = kernels[k++];
    lt_skel_kernel_t *slot = lt__skel_slot(s, d->args[i].slot);
    if (name != NULL && (slot->name = strdup(name)) == NULL) {
      lt_skel_free(s);
      return NULL;
    }
  }
  return s;
}

/* with_children returns `s` holding the `n` `kids`, or frees them all when `s` or one of
 * them is NULL. */
static lt_skel_t *with_children(lt_skel_t *s, lt_skel_t **kids, size_t n) {
  int whole = s != NULL;
  for (size_t i = 0; i < n; i++)
    whole = whole && kids[i] != NULL;
  if (!whole) {
    lt_skel_free(s);
    for (size_t i = 0; i < n; i++)
      lt_skel_free(kids[i]);
    return NULL;
  }
  memcpy(s->children, kids, n * sizeof *kids);
  return s;
}

/* with_child returns `s` holding `child`, or frees both when either is NULL. */
static lt_skel_t *with_child(lt_skel_t *s, lt_skel_t *child) {
  return with_children(s, &child, 1);
}

int lt__skel_param_set(lt_skel_kernel_t *k, const void *param, size_t len) {
  void *copy = NULL;
  if (len > 0) {
    if ((copy = malloc(len)) == NULL) return LT_ENOMEM;
    memcpy(copy, param, len);
  }
  free(k->param);
  k->param = copy;
  k->param_len = len;
  return LT_OK;
}

LT_API lt_skel_t *lt_seq_with(const char *kernel, const void *param, size_t len) {
  if (len > 0 && param == NULL) return NULL;
  if (kernel == NULL) return NULL;
  lt_skel_t *s = node_with(LT_SKEL_SEQ, &kernel, 0);
  if (s == NULL || len == 0) return s;
  if (lt__skel_param_set(&s->k[LT_SLOT_KERNEL], param, len) != LT_OK) {
    lt_skel_free(s);
    return NULL;
  }
  return s;
}

LT_API lt_skel_t *lt_seq(const char *kernel) {
  return lt_seq_with(kernel, NULL, 0);
}

LT_API lt_skel_t *lt_farm(lt_skel_t *worker) {
  if (worker == NULL) return NULL;
  return with_child(node_new(LT_SKEL_FARM, 1), worker);
}

LT_API lt_skel_t *lt_pipeline(lt_skel_t *first, ...) {
  va_list ap;
  size_t n = 0;
  va_start(ap, first);
  for (lt_skel_t *c = first; c != NULL; c = va_arg(ap, lt_skel_t *))
    n++;
  va_end(ap);
  if (n == 0) return NULL;

  lt_skel_t *s = node_new(LT_SKEL_PIPE, n);
  va_start(ap, first);
  size_t i = 0;
  for (lt_skel_t *c = first; c != NULL; c = va_arg(ap, lt_skel_t *)) {
    if (s != NULL)
      s->children[i++] = c;
    else
      lt_skel_free(c);
  }
  va_end(ap);
  return s;
}

LT_API lt_skel_t *lt_map(const char *split, lt_skel_t *body, const char *merge) {
  if (body == NULL || merge == NULL) {
    lt_skel_free(body);
    return NULL;
  }
  const char *kernels[] = {split, merge};
  return with_child(node_with(LT_SKEL_MAP, kernels, 1), body);
}

LT_API lt_skel_t *lt_reduce(const char *combine) {
  if (combine == NULL) return NULL;
  return node_with(LT_SKEL_REDUCE, &combine, 0);
}

LT_API lt_skel_t *lt_map_reduce(const char *split, lt_skel_t *body, lt_skel_t *reduce) {
  const char *kernels[] = {split, NULL};
  lt_skel_t *kids[] = {body, reduce};
  if (reduce != NULL && reduce->kind != LT_SKEL_REDUCE) {
    lt_skel_free(reduce);
    kids[1] = NULL;
  }
  return with_children(node_with(LT_SKEL_MAP, kernels, 2), kids, 2);
}

LT_API lt_skel_t *lt_dc(const char *cond, const char *divide, lt_skel_t *base,
                        const char *combine) {
  const char *kernels[] = {cond, divide, combine};
  if (cond == NULL || divide == NULL || combine == NULL) {
    lt_skel_free(base);
    return NULL;
  }
  return with_child(node_with(LT_SKEL_DC, kernels, 1), base);
}

LT_API lt_skel_t *lt_while(const char *cond, lt_skel_t *body) {
  if (cond == NULL) {
    lt_skel_free(body);
    return NULL;
  }
  return with_child(node_with(LT_SKEL_WHILE, &cond, 1), body);
}

LT_API lt_skel_t *lt_if(const char *cond, lt_skel_t *then_branch, lt_skel_t *else_branch) {
  lt_skel_t *kids[] = {then_branch, else_branch};
  lt_skel_t *s = cond != NULL ? node_with(LT_SKEL_IF, &cond, 2) : NULL;
  return with_children(s, kids, 2);
}

/* role_slot finds the kernel argument of kind `d` whose DOT role is `role` ("kernel" for a
 * seq's), NULL when none is. */
static const lt_skel_arg_t *role_arg(const lt_skel_kind_desc_t *d, const char *role) {
  for (uint32_t i = 0; i < d->nargs; i++) {
    const lt_skel_arg_t *a = &d->args[i];
    if (a->kind == LT_ARG_KERNEL && strcmp(a->role != NULL ? a->role : "kernel", role) == 0)
      return a;
  }
  return NULL;
}

LT_API lt_skel_t *lt_skel_param(lt_skel_t *s, const char *role, const void *param, size_t len) {
  const lt_skel_arg_t *a =
      s != NULL && role != NULL ? role_arg(lt__skel_kind(s->kind), role) : NULL;
  if (a == NULL || (len > 0 && param == NULL) || lt__skel_arg_instead(s, a) ||
      lt__skel_param_set(lt__skel_slot(s, a->slot), param, len) != LT_OK) {
    lt_skel_free(s);
    return NULL;
  }
  return s;
}

static int str_eq(const char *a, const char *b) {
  return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static int kernel_eq(const lt_skel_kernel_t *a, const lt_skel_kernel_t *b) {
  return str_eq(a->name, b->name) && a->param_len == b->param_len &&
         (a->param_len == 0 || memcmp(a->param, b->param, a->param_len) == 0);
}

LT_API int lt_skel_equal(const lt_skel_t *a, const lt_skel_t *b) {
  if (a == NULL || b == NULL) return a == b;
  if (a->kind != b->kind || a->nchildren != b->nchildren) return 0;
  for (int k = 0; k < LT_SKEL_SLOTS; k++)
    if (!kernel_eq(&a->k[k], &b->k[k])) return 0;
  for (size_t i = 0; i < a->nchildren; i++)
    if (!lt_skel_equal(a->children[i], b->children[i])) return 0;
  return 1;
}

LT_API void lt_skel_free(lt_skel_t *s) {
  if (s == NULL) return;
  for (size_t i = 0; i < s->nchildren; i++)
    lt_skel_free(s->children[i]);
  free(s->children);
  for (int k = 0; k < LT_SKEL_SLOTS; k++) {
    free(s->k[k].name);
    free(s->k[k].param);
  }
  free(s);
}

/* slots_valid tells whether the kernel slots of `s` hold what its kind `d` says: a valid
 * name in each kernel argument's slot (or nothing where a skeleton stands instead), and
 * nothing, not even a parameter, in the slots the kind does not use. */
static int slots_valid(const lt_skel_kind_desc_t *d, const lt_skel_t *s) {
  int used[LT_SKEL_SLOTS] = {0};
  for (uint32_t i = 0; i < d->nargs; i++) {
    const lt_skel_arg_t *a = &d->args[i];
    if (a->kind != LT_ARG_KERNEL) continue;
    used[a->slot] = 1;
    const lt_skel_kernel_t *k = lt__skel_slot_get(s, a->slot);
    if (lt__skel_arg_instead(s, a) ? k->param_len != 0 : !lt__kernel_name_valid(k->name)) return 0;
  }
  for (int k = 0; k < LT_SKEL_SLOTS; k++)
    if (!used[k] && (s->k[k].name != NULL || s->k[k].param_len != 0)) return 0;
  return 1;
}

/* node_valid is lt__skel_valid of a node standing in place of a kernel of kind `instead`
 * (0: in place of a skeleton, where no kind that only stands for a kernel may be). */
static int node_valid(const lt_skel_t *s, lt_skel_kind_t instead) {
  const lt_skel_kind_desc_t *d = s != NULL ? lt__skel_kind(s->kind) : NULL;
  if (d == NULL || (instead != 0 ? s->kind != instead : d->only_instead)) return 0;
  if (!slots_valid(d, s)) return 0;
  if (lt__skel_kind_variadic(d) ? s->nchildren == 0 : s->nchildren != lt__skel_nchildren(d, s))
    return 0;
  size_t child = 0;
  for (uint32_t i = 0; i < d->nargs; i++) {
    const lt_skel_arg_t *a = &d->args[i];
    int ok = 1;
    if (a->kind == LT_ARG_KERNEL && lt__skel_arg_instead(s, a))
      ok = node_valid(s->children[child++], a->instead);
    else if (a->kind == LT_ARG_SKEL)
      ok = node_valid(s->children[child++], 0);
    else if (a->kind == LT_ARG_SKELS)
      for (; child < s->nchildren && ok; child++)
        ok = node_valid(s->children[child], 0);
    if (!ok) return 0;
  }
  return 1;
}

LT_API int lt_skel_reduces(const lt_skel_t *s) {
  return lt__skel_valid(s) && lt__skel_reduces(s);
}

int lt__skel_reduces(const lt_skel_t *s) {
  return s != NULL && s->kind == LT_SKEL_PIPE && s->nchildren >= 2 && s->children != NULL &&
         s->children[s->nchildren - 1] != NULL &&
         s->children[s->nchildren - 1]->kind == LT_SKEL_REDUCE;
}

/* reducing_valid is lt__skel_valid of a program that reduces its stream: its stages before
 * the reduce valid skeletons, the last a valid reduce. */
static int reducing_valid(const lt_skel_t *s) {
  for (size_t i = 0; i + 1 < s->nchildren; i++)
    if (!node_valid(s->children[i], 0)) return 0;
  return node_valid(s->children[s->nchildren - 1], LT_SKEL_REDUCE);
}

int lt__skel_valid(const lt_skel_t *s) {
  return lt__skel_reduces(s) ? reducing_valid(s) : node_valid(s, 0);
}
