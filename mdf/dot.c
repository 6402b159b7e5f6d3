/* dot.c: a template as a Graphviz digraph (`lithium graph`). One cluster per block, one box
 * per node labelled with its kind and kernels, solid edges along a chain, dashed edges from
 * a map or dc node to the block it runs on each part. Reads the template only. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template.h"

typedef struct out {
  char *buf;
  size_t len, cap;
  int failed;
} out_t;

__attribute__((format(printf, 2, 3))) static void emit(out_t *o, const char *fmt, ...) {
  if (o->failed) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || o->len + (size_t)n + 1 > o->cap) {
    size_t cap = o->cap ? o->cap : 1024;
    while (n >= 0 && cap < o->len + (size_t)n + 1)
      cap *= 2;
    char *b = n < 0 ? NULL : realloc(o->buf, cap);
    if (b == NULL) {
      o->failed = 1;
      return;
    }
    o->buf = b;
    o->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
  va_end(ap);
  o->len += (size_t)n;
}

static const char *kname(const lt_template_t *t, const lt_tnode_t *n, uint32_t i) {
  return t->kernels[n->stages[i].kernel];
}

static void emit_node(out_t *o, const lt_template_t *t, uint32_t id) {
  const lt_tnode_t *n = &t->nodes[id];
  emit(o, "    n%u [label=\"", id);
  switch (n->kind) {
  case LT_TN_SEQ:
    emit(o, "seq");
    for (uint32_t i = 0; i < n->nstages; i++)
      emit(o, "%s%s%s", i ? " ; " : "\\n", kname(t, n, i),
           n->stages[i].param_len ? " (param)" : "");
    break;
  case LT_TN_MAP:
    emit(o, "map\\nsplit %s\\nmerge %s", kname(t, n, LT_TS_SPLIT), kname(t, n, LT_TS_MERGE));
    break;
  case LT_TN_DC:
    emit(o, "dc\\ncond %s\\ndivide %s\\ncombine %s", kname(t, n, LT_TS_COND),
         kname(t, n, LT_TS_DIVIDE), kname(t, n, LT_TS_COMBINE));
    break;
  }
  emit(o, "\"];\n");
}

char *lt__template_dot(const lt_template_t *t) {
  out_t o = {0};
  emit(&o, "digraph lithium {\n  node [shape=box, fontname=\"monospace\"];\n");
  emit(&o, "  input [shape=oval]; result [shape=oval];\n");
  for (uint32_t b = 0; b < t->nblocks; b++) {
    emit(&o, "  subgraph cluster_b%u {\n    label=\"%s\";\n", b, b == 0 ? "program" : "block");
    for (int32_t i = (int32_t)t->blocks[b]; i >= 0; i = t->nodes[i].next)
      emit_node(&o, t, (uint32_t)i);
    emit(&o, "  }\n");
  }
  emit(&o, "  input -> n%u;\n", t->blocks[0]);
  for (uint32_t i = 0; i < t->nnodes; i++) {
    const lt_tnode_t *n = &t->nodes[i];
    if (n->next >= 0) emit(&o, "  n%u -> n%d;\n", i, n->next);
    if (n->kind != LT_TN_SEQ)
      emit(&o, "  n%u -> n%u [style=dashed, label=\"%s\"];\n", i, t->blocks[n->block],
           n->kind == LT_TN_MAP ? "each part" : "base case");
  }
  int32_t last = (int32_t)t->blocks[0];
  while (t->nodes[last].next >= 0)
    last = t->nodes[last].next;
  emit(&o, "  n%d -> result;\n}\n", last);
  if (o.failed) {
    free(o.buf);
    return NULL;
  }
  return o.buf;
}
