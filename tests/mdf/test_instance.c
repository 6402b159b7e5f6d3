/* test_instance.c: graph instances: the entry fires on the input, completions move the
 * token along a pipeline, the last node gives the result, stray completions are refused. */
#include <criterion/criterion.h>

#include <lithium/error.h>
#include "instance.h"

static uint32_t fired[16];
static int nfired;

static void on_fire(void *ud, lt_instance_t *inst, uint32_t node) {
  (void)ud;
  (void)inst;
  fired[nfired++] = node;
}

Test(instance, token_walks_a_pipeline) {
  lt_skel_t *s = lt_pipeline(lt_seq("m:a"), lt_seq("m:b"), lt_seq("m:c"), NULL);
  lt_template_t *t = NULL;
  cr_assert_eq(lt__template_compile(&t, s), LT_OK);
  lt_instance_t *inst = NULL;
  cr_assert_eq(lt__instance_new(&inst, t, 7), LT_OK);
  cr_assert_eq(inst->task, 7);

  lt_value_t *in = lt__value_copy("x", 1);
  nfired = 0;
  cr_assert_eq(lt__instance_feed(inst, in, on_fire, NULL), LT_OK);
  lt__value_unref(in);
  cr_assert_eq(nfired, 1);
  uint32_t node = fired[0];
  cr_assert_eq(node, t->entry);
  uint32_t n = 0;
  lt_value_t *const *ins = lt__instance_inputs(inst, node, &n);
  cr_assert_eq(n, 1);
  cr_assert_eq(((const char *)ins[0]->data)[0], 'x');

  for (int step = 0; step < 3; step++) {
    lt_value_t *out = lt__value_copy("yz", 2);
    int before = nfired;
    cr_assert_eq(lt__instance_complete(inst, node, out, on_fire, NULL), LT_OK);
    cr_assert_eq(lt__instance_complete(inst, node, out, on_fire, NULL), LT_ESTATE,
                 "a node completes once");
    lt__value_unref(out);
    if (step < 2) {
      cr_assert_eq(nfired, before + 1);
      node = fired[nfired - 1];
      cr_assert_not(inst->done);
    } else {
      cr_assert_eq(nfired, before);
      cr_assert(inst->done);
      cr_assert_eq(inst->result->len, 2);
    }
  }
  lt__instance_free(inst);
  lt__template_free(t);
  lt_skel_free(s);
}

Test(instance, free_with_tokens_in_flight) {
  lt_skel_t *s = lt_pipeline(lt_seq("m:a"), lt_seq("m:b"), NULL);
  lt_template_t *t = NULL;
  cr_assert_eq(lt__template_compile(&t, s), LT_OK);
  lt_instance_t *inst = NULL;
  cr_assert_eq(lt__instance_new(&inst, t, 1), LT_OK);
  lt_value_t *in = lt__value_copy("x", 1);
  nfired = 0;
  cr_assert_eq(lt__instance_feed(inst, in, on_fire, NULL), LT_OK);
  cr_assert_eq(lt__instance_feed(inst, in, on_fire, NULL), LT_ESTATE, "the entry fills once");
  lt__value_unref(in);
  cr_assert_eq(lt__instance_complete(inst, 99, in, on_fire, NULL), LT_ESTATE);
  lt__instance_free(inst); /* frees the held token: valgrind/ASan would see a leak */
  lt__template_free(t);
  lt_skel_free(s);
}
