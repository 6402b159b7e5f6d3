/* template.c: the compiler from skeleton trees to MDF templates. seq becomes one node; farm
 * compiles its worker (a farm only says that instances are independent); pipe wires the
 * exit of each stage to the entry of the next. Knows nothing of instances or servers. */
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "template.h"

typedef struct span {
  uint32_t entry;
  uint32_t exit;
} span_t;

static int count_nodes(const lt_skel_t *s, uint32_t *n) {
  switch (s->kind) {
  case LT_SKEL_SEQ:
    (*n)++;
    return LT_OK;
  case LT_SKEL_FARM:
  case LT_SKEL_PIPE:
    for (size_t i = 0; i < s->nchildren; i++) {
      int rc = count_nodes(s->children[i], n);
      if (rc != LT_OK) return rc;
    }
    return LT_OK;
  }
  return LT_EINVAL;
}

/* kernel_index returns the index of `name` in t->kernels, adding it when new. */
static int kernel_index(lt_template_t *t, const char *name, uint32_t *idx) {
  for (uint32_t i = 0; i < t->nkernels; i++) {
    if (strcmp(t->kernels[i], name) == 0) {
      *idx = i;
      return LT_OK;
    }
  }
  char *copy = strdup(name);
  if (copy == NULL) return LT_ENOMEM;
  t->kernels[t->nkernels] = copy;
  *idx = t->nkernels++;
  return LT_OK;
}

static int emit_seq(lt_template_t *t, const lt_skel_t *s, span_t *out) {
  uint32_t id = t->nnodes;
  lt_tnode_t *n = &t->nodes[id];
  int rc = kernel_index(t, s->kernel, &n->kernel);
  if (rc != LT_OK) return rc;
  if (s->param_len > 0) {
    n->param = malloc(s->param_len);
    if (n->param == NULL) return LT_ENOMEM;
    memcpy(n->param, s->param, s->param_len);
    n->param_len = s->param_len;
  }
  n->ninputs = 1;
  n->slot_base = t->nslots;
  n->succ = -1;
  t->nslots += n->ninputs;
  t->nnodes++;
  out->entry = out->exit = id;
  return LT_OK;
}

static int emit(lt_template_t *t, const lt_skel_t *s, span_t *out) {
  switch (s->kind) {
  case LT_SKEL_SEQ:
    return emit_seq(t, s, out);
  case LT_SKEL_FARM:
    return emit(t, s->children[0], out);
  case LT_SKEL_PIPE: {
    span_t prev = {0, 0};
    for (size_t i = 0; i < s->nchildren; i++) {
      span_t cur;
      int rc = emit(t, s->children[i], &cur);
      if (rc != LT_OK) return rc;
      if (i == 0) {
        out->entry = cur.entry;
      } else {
        t->nodes[prev.exit].succ = (int32_t)cur.entry;
        t->nodes[prev.exit].succ_slot = 0;
      }
      prev = cur;
    }
    out->exit = prev.exit;
    return LT_OK;
  }
  }
  return LT_EINVAL;
}

int lt__template_compile(lt_template_t **out, const lt_skel_t *s) {
  *out = NULL;
  if (!lt__skel_valid(s)) return LT_EINVAL;
  uint32_t n = 0;
  int rc = count_nodes(s, &n);
  if (rc != LT_OK) return rc;

  lt_template_t *t = calloc(1, sizeof *t);
  if (t == NULL) return LT_ENOMEM;
  t->nodes = calloc(n, sizeof *t->nodes);
  t->kernels = calloc(n, sizeof *t->kernels);
  if (t->nodes == NULL || t->kernels == NULL) {
    lt__template_free(t);
    return LT_ENOMEM;
  }
  span_t span;
  rc = emit(t, s, &span);
  if (rc != LT_OK) {
    lt__template_free(t);
    return rc;
  }
  t->entry = span.entry;
  *out = t;
  return LT_OK;
}

void lt__template_free(lt_template_t *t) {
  if (t == NULL) return;
  for (uint32_t i = 0; i < t->nnodes; i++) free(t->nodes[i].param);
  for (uint32_t i = 0; i < t->nkernels; i++) free(t->kernels[i]);
  free(t->nodes);
  free(t->kernels);
  free(t);
}
