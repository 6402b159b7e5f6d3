/* test_instance.c: graph instances driven by hand: a pipeline's token walks the chain; a
 * map grows a frame per part and merges them in order (also with 0 and 1 parts); a dc
 * recurses, runs the base block on base cases and combines; bad completions are refused. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include <lithium/error.h>
#include "instance.h"

#define MAXF 4096
static lt_frame_t *fired[MAXF];
static int nfired;

static void on_fire(void *ud, lt_instance_t *inst, lt_frame_t *f) {
  (void)ud;
  (void)inst;
  cr_assert_lt(nfired, MAXF);
  fired[nfired++] = f;
}

static lt_frame_t *pop(void) {
  cr_assert_gt(nfired, 0);
  return fired[--nfired];
}

static lt_value_t *str(const char *s) {
  return lt__value_copy(s, strlen(s));
}

/* complete_vals completes `f` with client-held values as its output tokens. */
static int complete_vals(lt_instance_t *inst, lt_frame_t *f, int answer, lt_value_t **vals,
                         uint32_t n, char *err) {
  lt_token_t toks[16];
  cr_assert_leq(n, 16);
  for (uint32_t i = 0; i < n; i++)
    toks[i] = (lt_token_t){.value = vals[i]};
  return lt__instance_complete(inst, f, answer, toks, n, on_fire, NULL, err, 128);
}

/* complete1 completes `f` with one output `s`. */
static int complete1(lt_instance_t *inst, lt_frame_t *f, const char *s) {
  lt_value_t *v = str(s);
  char err[128];
  int rc = complete_vals(inst, f, -1, &v, 1, err);
  lt__value_unref(v);
  return rc;
}

static lt_instance_t *start(lt_skel_t *s, lt_template_t **t, const char *input) {
  cr_assert_eq(lt__template_compile(t, s, 0), LT_OK);
  lt_instance_t *inst = NULL;
  cr_assert_eq(lt__instance_new(&inst, *t, 7), LT_OK);
  nfired = 0;
  lt_value_t *in = str(input);
  cr_assert_eq(lt__instance_feed(inst, in, on_fire, NULL), LT_OK);
  lt__value_unref(in);
  return inst;
}

Test(instance, token_walks_a_pipeline) {
  lt_skel_t *s = lt_pipeline(lt_seq("m:a"), lt_seq("m:b"), lt_seq("m:c"), NULL);
  lt_template_t *t;
  lt_instance_t *inst = start(s, &t, "x");
  for (int step = 0; step < 3; step++) {
    lt_frame_t *f = pop();
    lt_fire_t fi;
    lt__frame_fire_info(f, &fi);
    cr_assert_eq(fi.op, LT_OP_SEQ);
    cr_assert_eq(fi.ninputs, 1);
    cr_assert_eq(((const char *)fi.inputs[0].value->data)[0], step == 0 ? 'x' : 'y');
    cr_assert_str_eq(t->kernels[fi.stages[0].kernel], step == 0   ? "m:a"
                                                      : step == 1 ? "m:b"
                                                                  : "m:c");
    cr_assert_eq(complete1(inst, f, "y"), LT_OK);
  }
  cr_assert_eq(nfired, 0);
  cr_assert(inst->done);
  cr_assert_eq(inst->result.value->len, 1);
  lt__instance_free(inst);
  lt__template_free(t);
  lt_skel_free(s);
}

/* run_map splits into `parts` parts, completes each body with its index, merges. */
static void run_map(uint32_t parts) {
  lt_skel_t *s = lt_map("m:split", lt_seq("m:body"), "m:merge");
  lt_template_t *t;
  lt_instance_t *inst = start(s, &t, "in");
  lt_frame_t *f = pop();
  lt_fire_t fi;
  lt__frame_fire_info(f, &fi);
  cr_assert_eq(fi.op, LT_OP_SPLIT);
  lt_value_t *outs[8];
  for (uint32_t i = 0; i < parts; i++) {
    char b[16]; /* "p" and any uint32_t: no truncation at any optimisation level */
    snprintf(b, sizeof b, "p%u", i);
    outs[i] = str(b);
  }
  char err[128];
  cr_assert_eq(complete_vals(inst, f, -1, outs, parts, err), LT_OK);
  for (uint32_t i = 0; i < parts; i++)
    lt__value_unref(outs[i]);
  if (parts > 0) {
    cr_assert_eq(nfired, (int)parts);
    /* Complete the bodies out of order: the merge still sees part order. */
    while (nfired > 0) {
      lt_frame_t *b = pop();
      lt__frame_fire_info(b, &fi);
      cr_assert_str_eq(t->kernels[fi.stages[0].kernel], "m:body");
      char r[8];
      memcpy(r, fi.inputs[0].value->data, fi.inputs[0].value->len);
      r[fi.inputs[0].value->len] = '\0';
      r[0] = 'r';
      cr_assert_eq(complete1(inst, b, r), LT_OK);
      if (nfired > 0 && fired[nfired - 1] == f) break;
    }
  }
  cr_assert_eq(nfired, 1, "only the merge is left");
  lt_frame_t *m = pop();
  cr_assert_eq(m, f);
  lt__frame_fire_info(m, &fi);
  cr_assert_eq(fi.op, LT_OP_SEQ);
  cr_assert_str_eq(t->kernels[fi.stages[0].kernel], "m:merge");
  cr_assert_eq(fi.ninputs, parts);
  for (uint32_t i = 0; i < parts; i++) {
    char want[16];
    snprintf(want, sizeof want, "r%u", i);
    cr_assert_eq(memcmp(fi.inputs[i].value->data, want, strlen(want)), 0);
  }
  cr_assert_eq(complete1(inst, m, "merged"), LT_OK);
  cr_assert(inst->done);
  lt__instance_free(inst);
  lt__template_free(t);
  lt_skel_free(s);
}

Test(instance, map_with_0_1_and_5_parts) {
  run_map(0);
  run_map(1);
  run_map(5);
}

Test(instance, dc_recurses_to_depth_12_without_recursion_on_the_stack) {
  /* Binary dc of depth 12: 4096 base cases, each through a 2-stage base block. */
  lt_skel_t *s =
      lt_dc("m:cond", "m:div", lt_pipeline(lt_seq("m:b1"), lt_seq("m:b2"), NULL), "m:comb");
  lt_template_t *t;
  lt_instance_t *inst = start(s, &t, "");
  char err[128];
  uint64_t steps = 0, bases = 0, combines = 0;
  while (nfired > 0) {
    lt_frame_t *f = pop();
    lt_fire_t fi;
    lt__frame_fire_info(f, &fi);
    const char *k = t->kernels[fi.stages[0].kernel];
    if (fi.op == LT_OP_DCSTEP) {
      steps++;
      size_t depth = fi.inputs[0].value->len;
      if (depth == 12) {
        cr_assert_eq(complete_vals(inst, f, 1, NULL, 0, err), LT_OK);
      } else {
        lt_value_t *parts[2];
        char buf[16];
        memset(buf, 'd', sizeof buf);
        parts[0] = lt__value_copy(buf, depth + 1);
        parts[1] = lt__value_copy(buf, depth + 1);
        cr_assert_eq(complete_vals(inst, f, 0, parts, 2, err), LT_OK);
        lt__value_unref(parts[0]);
        lt__value_unref(parts[1]);
      }
    } else if (strcmp(k, "m:comb") == 0) {
      combines++;
      cr_assert_eq(fi.ninputs, 2);
      uint64_t a, b;
      memcpy(&a, fi.inputs[0].value->data, 8);
      memcpy(&b, fi.inputs[1].value->data, 8);
      uint64_t sum = a + b;
      lt_value_t *v = lt__value_copy(&sum, 8);
      cr_assert_eq(complete_vals(inst, f, -1, &v, 1, err), LT_OK);
      lt__value_unref(v);
    } else {
      if (strcmp(k, "m:b1") == 0) bases++;
      uint64_t one = 1;
      lt_value_t *v = lt__value_copy(&one, 8);
      cr_assert_eq(complete_vals(inst, f, -1, &v, 1, err), LT_OK);
      lt__value_unref(v);
    }
  }
  cr_assert(inst->done);
  uint64_t leaves;
  memcpy(&leaves, inst->result.value->data, 8);
  cr_assert_eq(leaves, 4096);
  cr_assert_eq(bases, 4096);
  cr_assert_eq(combines, 4095);
  cr_assert_eq(steps, 8191);
  cr_assert_null(inst->live, "every frame was freed as it finished");
  lt__instance_free(inst);
  lt__template_free(t);
  lt_skel_free(s);
}

Test(instance, bad_completions_are_refused) {
  lt_skel_t *s = lt_pipeline(lt_seq("m:a"), lt_dc("m:c", "m:d", lt_seq("m:b"), "m:k"), NULL);
  lt_template_t *t;
  lt_instance_t *inst = start(s, &t, "x");
  lt_frame_t *f = pop();
  char err[128];
  cr_assert_eq(complete_vals(inst, f, -1, NULL, 0, err), LT_EPROTO);
  cr_assert_not_null(strstr(err, "exactly one output"), "%s", err);
  lt__instance_free(inst); /* frees the frames and tokens still held */
  lt__template_free(t);

  inst = start(s, &t, "x");
  cr_assert_eq(complete1(inst, pop(), "y"), LT_OK);
  f = pop();
  cr_assert_eq(complete_vals(inst, f, -1, NULL, 0, err), LT_EPROTO, "a dc step without an answer");
  lt_value_t *v = str("z");
  cr_assert_eq(complete_vals(inst, f, 1, &v, 1, err), LT_EPROTO, "a base case with parts");
  lt__value_unref(v);
  lt__instance_free(inst);
  lt__template_free(t);
  lt_skel_free(s);
}

static void no_holder(void *ud, const lt_token_t *t) {
  int *seen = ud;
  (*seen)++;
  cr_assert_eq(lt__token_at(t), 0, "a token no server holds names holder %llu",
               (unsigned long long)lt__token_at(t));
}

/* A gather's parts not yet computed have no holder: a task that fails or is recomputed
 * releases what lt__instance_tokens gives it, and must release nothing for them. */
Test(instance, pending_parts_have_no_holder) {
  lt_skel_t *s = lt_map("m:split", lt_seq("m:body"), "m:merge");
  lt_template_t *t;
  lt_instance_t *inst = start(s, &t, "in");
  lt_frame_t *f = pop();
  lt_value_t *outs[3] = {str("a"), str("b"), str("c")};
  char err[128];
  cr_assert_eq(complete_vals(inst, f, -1, outs, 3, err), LT_OK);
  for (int i = 0; i < 3; i++)
    lt__value_unref(outs[i]);
  int seen = 0;
  lt__instance_tokens(inst, no_holder, &seen);
  cr_assert_geq(seen, 3, "the pending parts are visited");
  lt__instance_free(inst);
  lt__template_free(t);
  lt_skel_free(s);
}
