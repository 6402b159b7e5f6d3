/* skel.c: builders and destructor of skeleton trees (lithium/skel.h). Builders take
 * ownership of their children and free them when they fail. Knows nothing of compiling or
 * running. Any thread. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

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

LT_API lt_skel_t *lt_seq_with(const char *kernel, const void *param, size_t len) {
  if (kernel == NULL || !lt__kernel_name_valid(kernel)) return NULL;
  if (len > 0 && param == NULL) return NULL;
  lt_skel_t *s = node_new(LT_SKEL_SEQ, 0);
  if (s == NULL) return NULL;
  s->kernel = strdup(kernel);
  if (s->kernel == NULL) goto fail;
  if (len > 0) {
    s->param = malloc(len);
    if (s->param == NULL) goto fail;
    memcpy(s->param, param, len);
    s->param_len = len;
  }
  return s;
fail:
  lt_skel_free(s);
  return NULL;
}

LT_API lt_skel_t *lt_seq(const char *kernel) {
  return lt_seq_with(kernel, NULL, 0);
}

LT_API lt_skel_t *lt_farm(lt_skel_t *worker) {
  if (worker == NULL) return NULL;
  lt_skel_t *s = node_new(LT_SKEL_FARM, 1);
  if (s == NULL) {
    lt_skel_free(worker);
    return NULL;
  }
  s->children[0] = worker;
  return s;
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

/* with_child builds a MAP or DC node around `child` with kernels k0, k1 (DC only), k2. */
static lt_skel_t *with_child(lt_skel_kind_t kind, const char *k0, const char *k1, lt_skel_t *child,
                             const char *k2) {
  if (child == NULL) return NULL;
  int ok = k0 != NULL && lt__kernel_name_valid(k0) && k2 != NULL && lt__kernel_name_valid(k2) &&
           (kind != LT_SKEL_DC || (k1 != NULL && lt__kernel_name_valid(k1)));
  lt_skel_t *s = ok ? node_new(kind, 1) : NULL;
  if (s == NULL) {
    lt_skel_free(child);
    return NULL;
  }
  s->children[0] = child;
  s->kernel = strdup(k0);
  s->combine = strdup(k2);
  if (kind == LT_SKEL_DC) s->divide = strdup(k1);
  if (s->kernel == NULL || s->combine == NULL || (kind == LT_SKEL_DC && s->divide == NULL)) {
    lt_skel_free(s);
    return NULL;
  }
  return s;
}

LT_API lt_skel_t *lt_map(const char *split, lt_skel_t *body, const char *merge) {
  return with_child(LT_SKEL_MAP, split, NULL, body, merge);
}

LT_API lt_skel_t *lt_dc(const char *cond, const char *divide, lt_skel_t *base,
                        const char *combine) {
  return with_child(LT_SKEL_DC, cond, divide, base, combine);
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
  if (s == NULL) return 0;
  switch (s->kind) {
  case LT_SKEL_SEQ:
    return s->kernel != NULL && lt__kernel_name_valid(s->kernel) && s->nchildren == 0;
  case LT_SKEL_FARM:
    return s->nchildren == 1 && lt__skel_valid(s->children[0]);
  case LT_SKEL_PIPE:
    if (s->nchildren == 0) return 0;
    for (size_t i = 0; i < s->nchildren; i++)
      if (!lt__skel_valid(s->children[i])) return 0;
    return 1;
  case LT_SKEL_MAP:
  case LT_SKEL_DC:
    if (s->nchildren != 1 || s->kernel == NULL || !lt__kernel_name_valid(s->kernel) ||
        s->combine == NULL || !lt__kernel_name_valid(s->combine))
      return 0;
    if (s->kind == LT_SKEL_DC && (s->divide == NULL || !lt__kernel_name_valid(s->divide))) return 0;
    return lt__skel_valid(s->children[0]);
  }
  return 0;
}
