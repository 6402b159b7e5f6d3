/* skel.c: builders and destructor of skeleton trees (lithium/skel.h). Builders take
 * ownership of their children and free them when they fail; which kernels a kind takes and
 * how many children is the kinds table's (kind.h). Knows nothing of running. Any thread. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

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
 * kind `d`, in argument order. */
static int kernels_valid(const lt_skel_kind_desc_t *d, const char *const *kernels) {
  size_t k = 0;
  for (uint32_t i = 0; i < d->nargs; i++) {
    if (d->args[i].kind != LT_ARG_KERNEL) continue;
    if (kernels[k] == NULL || !lt__kernel_name_valid(kernels[k])) return 0;
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
    char **slot = lt__skel_slot(s, d->args[i].slot);
    if ((*slot = strdup(kernels[k++])) == NULL) {
      lt_skel_free(s);
      return NULL;
    }
  }
  return s;
}

/* with_child returns `s` holding `child`, or frees `child` when `s` is NULL. */
static lt_skel_t *with_child(lt_skel_t *s, lt_skel_t *child) {
  if (s == NULL) {
    lt_skel_free(child);
    return NULL;
  }
  s->children[0] = child;
  return s;
}

LT_API lt_skel_t *lt_seq_with(const char *kernel, const void *param, size_t len) {
  if (len > 0 && param == NULL) return NULL;
  lt_skel_t *s = node_with(LT_SKEL_SEQ, &kernel, 0);
  if (s == NULL || len == 0) return s;
  if ((s->param = malloc(len)) == NULL) {
    lt_skel_free(s);
    return NULL;
  }
  memcpy(s->param, param, len);
  s->param_len = len;
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
  if (body == NULL) return NULL;
  const char *kernels[] = {split, merge};
  return with_child(node_with(LT_SKEL_MAP, kernels, 1), body);
}

LT_API lt_skel_t *lt_dc(const char *cond, const char *divide, lt_skel_t *base,
                        const char *combine) {
  if (base == NULL) return NULL;
  const char *kernels[] = {cond, divide, combine};
  return with_child(node_with(LT_SKEL_DC, kernels, 1), base);
}

static int str_eq(const char *a, const char *b) {
  return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

LT_API int lt_skel_equal(const lt_skel_t *a, const lt_skel_t *b) {
  if (a == NULL || b == NULL) return a == b;
  if (a->kind != b->kind || a->nchildren != b->nchildren || a->param_len != b->param_len) return 0;
  if (!str_eq(a->kernel, b->kernel) || !str_eq(a->divide, b->divide) ||
      !str_eq(a->combine, b->combine))
    return 0;
  if (a->param_len > 0 && memcmp(a->param, b->param, a->param_len) != 0) return 0;
  for (size_t i = 0; i < a->nchildren; i++)
    if (!lt_skel_equal(a->children[i], b->children[i])) return 0;
  return 1;
}

LT_API void lt_skel_free(lt_skel_t *s) {
  if (s == NULL) return;
  for (size_t i = 0; i < s->nchildren; i++)
    lt_skel_free(s->children[i]);
  free(s->children);
  free(s->kernel);
  free(s->divide);
  free(s->combine);
  free(s->param);
  free(s);
}

int lt__skel_valid(const lt_skel_t *s) {
  const lt_skel_kind_desc_t *d = s != NULL ? lt__skel_kind(s->kind) : NULL;
  if (d == NULL) return 0;
  for (uint32_t i = 0; i < d->nargs; i++) {
    if (d->args[i].kind != LT_ARG_KERNEL) continue;
    const char *k = lt__skel_slot_get(s, d->args[i].slot);
    if (k == NULL || !lt__kernel_name_valid(k)) return 0;
  }
  if (lt__skel_kind_variadic(d) ? s->nchildren == 0 : s->nchildren != lt__skel_kind_nchildren(d))
    return 0;
  for (size_t i = 0; i < s->nchildren; i++)
    if (!lt__skel_valid(s->children[i])) return 0;
  return 1;
}
