/* test_template.c: skeleton builders and the compiler to MDF templates: node counts,
 * wiring of pipelines (nested ones too), shared kernel tables, parameters, bad trees. */
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
  lt_skel_t *s = lt_seq_with("m:f", "ab", 2);
  cr_assert_not_null(s);
  cr_assert_eq(s->kind, LT_SKEL_SEQ);
  cr_assert_eq(s->param_len, 2);
  cr_assert_eq(memcmp(s->param, "ab", 2), 0);
  lt_skel_free(s);
  lt_skel_free(NULL);
}

Test(template, seq_is_one_node) {
  lt_template_t *t = NULL;
  lt_skel_t *s = lt_seq("m:f");
  cr_assert_eq(lt__template_compile(&t, s), LT_OK);
  cr_assert_eq(t->nnodes, 1);
  cr_assert_eq(t->nkernels, 1);
  cr_assert_str_eq(t->kernels[0], "m:f");
  cr_assert_eq(t->entry, 0);
  cr_assert_eq(t->nodes[0].succ, -1);
  cr_assert_eq(t->nodes[0].ninputs, 1);
  lt__template_free(t);
  lt_skel_free(s);
}

Test(template, nested_pipeline_is_wired_in_order) {
  /* pipe(farm(a), pipe(b, farm(pipe(c, a))), d) = a -> b -> c -> a -> d */
  lt_skel_t *s = lt_pipeline(
      lt_farm(lt_seq("m:a")),
      lt_pipeline(lt_seq_with("m:b", "p", 1), lt_farm(lt_pipeline(lt_seq("m:c"), lt_seq("m:a"), NULL)),
                  NULL),
      lt_seq("m:d"), NULL);
  cr_assert_not_null(s);
  lt_template_t *t = NULL;
  cr_assert_eq(lt__template_compile(&t, s), LT_OK);
  cr_assert_eq(t->nnodes, 5);
  cr_assert_eq(t->nkernels, 4, "a kernel used twice is one table entry");
  const char *want[] = {"m:a", "m:b", "m:c", "m:a", "m:d"};
  int32_t n = (int32_t)t->entry;
  for (int i = 0; i < 5; i++) {
    cr_assert_geq(n, 0);
    cr_assert_str_eq(t->kernels[t->nodes[n].kernel], want[i]);
    if (i == 1) cr_assert_eq(t->nodes[n].param_len, 1);
    n = t->nodes[n].succ;
  }
  cr_assert_eq(n, -1);
  cr_assert_eq(t->nslots, 5);
  lt__template_free(t);
  lt_skel_free(s);
}

Test(template, malformed_tree_is_rejected) {
  lt_skel_t bad = {.kind = LT_SKEL_PIPE, .nchildren = 0};
  lt_template_t *t = (lt_template_t *)1;
  cr_assert_eq(lt__template_compile(&t, &bad), LT_EINVAL);
  cr_assert_null(t);
  lt_skel_t leaf = {.kind = LT_SKEL_SEQ, .kernel = "not a name"};
  cr_assert_eq(lt__template_compile(&t, &leaf), LT_EINVAL);
  cr_assert_eq(lt__template_compile(&t, NULL), LT_EINVAL);
}
