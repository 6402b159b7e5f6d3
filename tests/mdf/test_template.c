/* test_template.c: skeleton builders and the compiler to MDF templates: chains of nested
 * pipelines, shared kernel tables, parameters, map and dc blocks, normal-form fusion, the
 * DOT output and malformed trees. */
#include <criterion/criterion.h>
#include <string.h>

#include <lithium/error.h>
#include "skel.h"
#include "template.h"

Test(skel, builders_check_names_and_children) {
  cr_assert_null(lt_seq(NULL));
  cr_assert_null(lt_seq(""));
  cr_assert_null(lt_seq("mod"));
  cr_assert_null(lt_seq(":f"));
  cr_assert_null(lt_seq("m:"));
  cr_assert_null(lt_seq("m:f:g"));
  cr_assert_null(lt_seq_with("m:f", NULL, 3));
  cr_assert_null(lt_farm(NULL));
  cr_assert_null(lt_pipeline(NULL));
  cr_assert_null(lt_map("m:s", NULL, "m:m"));
  cr_assert_null(lt_map("bad", lt_seq("m:f"), "m:m"));
  cr_assert_null(lt_dc("m:c", "m:d", lt_seq("m:f"), "nope"));
  lt_skel_t *s = lt_seq_with("m:f", "ab", 2);
  cr_assert_not_null(s);
  cr_assert_eq(s->kind, LT_SKEL_SEQ);
  cr_assert_eq(s->k[LT_SLOT_KERNEL].param_len, 2);
  cr_assert_eq(memcmp(s->k[LT_SLOT_KERNEL].param, "ab", 2), 0);
  lt_skel_free(s);
  lt_skel_free(NULL);
}

Test(skel, equal_compares_everything) {
  lt_skel_t *a = lt_dc("m:c", "m:d", lt_pipeline(lt_seq_with("m:f", "x", 1), NULL), "m:k");
  lt_skel_t *b = lt_dc("m:c", "m:d", lt_pipeline(lt_seq_with("m:f", "x", 1), NULL), "m:k");
  lt_skel_t *c = lt_dc("m:c", "m:d", lt_pipeline(lt_seq_with("m:f", "y", 1), NULL), "m:k");
  cr_assert(lt_skel_equal(a, b));
  cr_assert_not(lt_skel_equal(a, c));
  cr_assert_not(lt_skel_equal(a, NULL));
  lt_skel_free(a);
  lt_skel_free(b);
  lt_skel_free(c);
}

/* chain returns the kernel names of a block's chain, "|"-separated, stages by "+". */
static void chain(const lt_template_t *t, uint32_t block, char *buf, size_t len) {
  buf[0] = '\0';
  for (int32_t i = (int32_t)t->blocks[block]; i >= 0; i = t->nodes[i].next) {
    if (buf[0]) strncat(buf, "|", len - strlen(buf) - 1);
    const lt_tnode_t *n = &t->nodes[i];
    if (n->kind == LT_TN_MAP) strncat(buf, "MAP:", len - strlen(buf) - 1);
    if (n->kind == LT_TN_DC) strncat(buf, "DC:", len - strlen(buf) - 1);
    for (uint32_t k = 0; k < n->nstages; k++) {
      if (k) strncat(buf, "+", len - strlen(buf) - 1);
      strncat(buf, t->kernels[n->stages[k].kernel], len - strlen(buf) - 1);
    }
  }
}

Test(template, nested_pipeline_is_one_chain) {
  lt_skel_t *s =
      lt_pipeline(lt_farm(lt_seq("m:a")),
                  lt_pipeline(lt_seq_with("m:b", "p", 1),
                              lt_farm(lt_pipeline(lt_seq("m:c"), lt_seq("m:a"), NULL)), NULL),
                  lt_seq("m:d"), NULL);
  cr_assert_not_null(s);
  lt_template_t *t = NULL;
  cr_assert_eq(lt__template_compile(&t, s, 0), LT_OK);
  char buf[256];
  chain(t, 0, buf, sizeof buf);
  cr_assert_str_eq(buf, "m:a|m:b|m:c|m:a|m:d");
  cr_assert_eq(t->nkernels, 4, "a kernel used twice is one table entry");
  cr_assert_eq(lt__template_chain_length(t, 0), 5);
  lt__template_free(t);

  cr_assert_eq(lt__template_compile(&t, s, 1), LT_OK);
  chain(t, 0, buf, sizeof buf);
  cr_assert_str_eq(buf, "m:a+m:b+m:c+m:a+m:d", "normal form fuses the whole chain");
  cr_assert_eq(t->nodes[t->blocks[0]].stages[1].param_len, 1);
  lt__template_free(t);
  lt_skel_free(s);
}

Test(template, map_and_dc_get_blocks) {
  lt_skel_t *s = lt_pipeline(
      lt_seq("m:a"), lt_seq("m:b"),
      lt_map("m:split",
             lt_pipeline(lt_seq("m:x"), lt_dc("m:c", "m:d", lt_seq("m:base"), "m:k"), NULL),
             "m:merge"),
      lt_seq("m:z"), NULL);
  lt_template_t *t = NULL;
  cr_assert_eq(lt__template_compile(&t, s, 1), LT_OK);
  char buf[256];
  chain(t, 0, buf, sizeof buf);
  cr_assert_str_eq(buf, "m:a+m:b|MAP:m:split+m:merge|m:z");
  const lt_tnode_t *map = &t->nodes[t->nodes[t->blocks[0]].next];
  chain(t, map->block, buf, sizeof buf);
  cr_assert_str_eq(buf, "m:x|DC:m:c+m:d+m:k");
  int32_t dc = t->nodes[t->blocks[map->block]].next;
  chain(t, t->nodes[dc].block, buf, sizeof buf);
  cr_assert_str_eq(buf, "m:base");
  cr_assert_eq(t->nblocks, 3);

  char *dot = lt__template_dot(t);
  cr_assert_not_null(dot);
  cr_assert_not_null(strstr(dot, "digraph"));
  cr_assert_not_null(strstr(dot, "split m:split"));
  cr_assert_not_null(strstr(dot, "cond m:c"));
  free(dot);
  lt__template_free(t);
  lt_skel_free(s);
}

Test(template, new_skeleton_builders_check_their_arguments) {
  /* A reduce is no skeleton of its own: not alone, not as a middle stage or a body; only
   * in a map's merge place or as the last stage of the program's pipeline. */
  lt_template_t *t = NULL;
  lt_skel_t *r = lt_reduce("m:c");
  cr_assert_not_null(r);
  cr_assert_eq(lt__template_compile(&t, r, 0), LT_EINVAL);
  cr_assert_null(lt_skel_format(r));
  lt_skel_t *p = lt_pipeline(lt_reduce("m:c"), lt_seq("m:f"), NULL);
  cr_assert_eq(lt__template_compile(&t, p, 0), LT_EINVAL);
  lt_skel_free(p);
  p = lt_pipeline(lt_seq("m:f"), r, NULL);
  cr_assert_eq(lt__template_compile(&t, p, 0), LT_OK);
  cr_assert_eq(t->nblocks, 2); /* the program, and the combine of two of its results */
  cr_assert_eq(t->combine_block, 1);
  cr_assert_eq(lt__template_chain_length(t, 0), 1);
  cr_assert_eq(t->nodes[t->blocks[1]].skel, LT_SKEL_REDUCE);
  lt__template_free(t);
  lt_skel_free(p);
  cr_assert_null(lt_map_reduce("m:s", lt_seq("m:f"), lt_seq("m:c"))); /* not a reduce */
  cr_assert_null(lt_map_reduce("m:s", NULL, lt_reduce("m:c")));
  cr_assert_null(lt_map_reduce("bad", lt_seq("m:f"), lt_reduce("m:c")));
  cr_assert_null(lt_reduce("bad"));
  cr_assert_null(lt_while("m:c", NULL));
  cr_assert_null(lt_while(NULL, lt_seq("m:f")));
  cr_assert_null(lt_if("m:c", lt_seq("m:f"), NULL));
  cr_assert_null(lt_if("bad", lt_seq("m:f"), lt_seq("m:g")));
  cr_assert_null(lt_map("m:s", lt_seq("m:f"), NULL));
  /* A parameter goes to the kernel its role names, and only to one the skeleton has. */
  cr_assert_null(lt_skel_param(lt_map("m:s", lt_seq("m:f"), "m:m"), "cond", "x", 1));
  cr_assert_null(lt_skel_param(lt_seq("m:f"), "split", "x", 1));
  cr_assert_null(lt_skel_param(lt_seq("m:f"), "kernel", NULL, 1));
  cr_assert_null(lt_skel_param(NULL, "kernel", "x", 1));
  lt_skel_t *m =
      lt_skel_param(lt_map_reduce("m:s", lt_seq("m:f"), lt_reduce("m:c")), "split", "8", 1);
  cr_assert_null(lt_skel_param(m, "merge", "x", 1)); /* the reduce holds the combine */
  m = lt_skel_param(
      lt_map_reduce("m:s", lt_seq("m:f"), lt_skel_param(lt_reduce("m:c"), "combine", "z", 1)),
      "split", "8", 1);
  char *text = lt_skel_format(m);
  cr_assert_str_eq(text, "map(m:s \"8\", m:f, reduce(m:c \"z\"))");
  free(text);
  cr_assert_eq(lt__template_compile(&t, m, 0), LT_OK);
  cr_assert_eq(t->nnodes, 2);
  const lt_tnode_t *n = &t->nodes[t->blocks[0]];
  cr_assert(n->kind == LT_TN_MAP && n->reduce && n->nstages == 2);
  cr_assert_eq(n->stages[LT_TS_MERGE].param_len, 1);
  lt__template_free(t);
  lt_skel_free(m);
  /* if and while compile to a test node with their blocks. */
  lt_skel_t *w = lt_if("m:c", lt_while("m:d", lt_seq("m:f")), lt_seq("m:g"));
  cr_assert_eq(lt__template_compile(&t, w, 0), LT_OK);
  n = &t->nodes[t->blocks[0]];
  cr_assert(n->kind == LT_TN_IF && n->nblocks == 2 && n->nstages == 1);
  cr_assert_eq(t->nodes[t->blocks[n->block]].kind, LT_TN_WHILE);
  cr_assert_eq(t->nodes[t->blocks[n->alt]].kind, LT_TN_SEQ);
  lt__template_free(t);
  lt_skel_free(w);
}

Test(template, malformed_tree_is_rejected) {
  lt_skel_t bad = {.kind = LT_SKEL_PIPE, .nchildren = 0};
  lt_template_t *t = (lt_template_t *)1;
  cr_assert_eq(lt__template_compile(&t, &bad, 0), LT_EINVAL);
  cr_assert_null(t);
  lt_skel_t leaf = {.kind = LT_SKEL_SEQ, .k = {{.name = "not a name"}}};
  cr_assert_eq(lt__template_compile(&t, &leaf, 0), LT_EINVAL);
  cr_assert_eq(lt__template_compile(&t, NULL, 0), LT_EINVAL);
}
