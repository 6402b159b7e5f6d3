/* dot.c: a template as a Graphviz digraph (`lithium graph`). One cluster per block, one box
 * per node labelled with its kind and kernels, solid edges along a chain, dashed edges from
 * a map or dc node to the block it runs on each part. Reads the template only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"
#include "template.h"

static const char *kname(const lt_template_t *t, const lt_tnode_t *n, uint32_t i) {
  return t->kernels[n->stages[i].kernel];
}

static void emit_node(lt_strbuf_t *o, const lt_template_t *t, uint32_t id) {
  const lt_tnode_t *n = &t->nodes[id];
  lt__strbuf_printf(o, "    n%u [label=\"", id);
  switch (n->kind) {
  case LT_TN_SEQ:
    lt__strbuf_printf(o, "seq");
    for (uint32_t i = 0; i < n->nstages; i++)
      lt__strbuf_printf(o, "%s%s%s", i ? " ; " : "\\n", kname(t, n, i),
                        n->stages[i].param_len ? " (param)" : "");
    break;
  case LT_TN_MAP:
    lt__strbuf_printf(o, "map\\nsplit %s\\nmerge %s", kname(t, n, LT_TS_SPLIT),
                      kname(t, n, LT_TS_MERGE));
    break;
  case LT_TN_DC:
    lt__strbuf_printf(o, "dc\\ncond %s\\ndivide %s\\ncombine %s", kname(t, n, LT_TS_COND),
                      kname(t, n, LT_TS_DIVIDE), kname(t, n, LT_TS_COMBINE));
    break;
  }
  lt__strbuf_printf(o, "\"];\n");
}

char *lt__template_dot(const lt_template_t *t) {
  lt_strbuf_t o = {0};
  lt__strbuf_printf(&o, "digraph lithium {\n  node [shape=box, fontname=\"monospace\"];\n");
  lt__strbuf_printf(&o, "  input [shape=oval]; result [shape=oval];\n");
  for (uint32_t b = 0; b < t->nblocks; b++) {
    lt__strbuf_printf(&o, "  subgraph cluster_b%u {\n    label=\"%s\";\n", b,
                      b == 0 ? "program" : "block");
    for (int32_t i = (int32_t)t->blocks[b]; i >= 0; i = t->nodes[i].next)
      emit_node(&o, t, (uint32_t)i);
    lt__strbuf_printf(&o, "  }\n");
  }
  lt__strbuf_printf(&o, "  input -> n%u;\n", t->blocks[0]);
  for (uint32_t i = 0; i < t->nnodes; i++) {
    const lt_tnode_t *n = &t->nodes[i];
    if (n->next >= 0) lt__strbuf_printf(&o, "  n%u -> n%d;\n", i, n->next);
    if (n->kind != LT_TN_SEQ)
      lt__strbuf_printf(&o, "  n%u -> n%u [style=dashed, label=\"%s\"];\n", i, t->blocks[n->block],
                        n->kind == LT_TN_MAP ? "each part" : "base case");
  }
  int32_t last = (int32_t)t->blocks[0];
  while (t->nodes[last].next >= 0)
    last = t->nodes[last].next;
  lt__strbuf_printf(&o, "  n%d -> result;\n}\n", last);
  return lt__strbuf_take(&o);
}
