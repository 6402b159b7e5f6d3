/* test_skeletons.c: map and divide-and-conquer on real servers, alone and nested, checked
 * against expected values and against the sequential evaluator (lt_eval_run_local): map
 * with 0, 1 and many parts; dc of depth 0 and depth 12; a kernel failing deep inside a
 * nested program; normal form; and a generated-program test (random skeleton trees over a
 * fixed set of kernels, run on 3 servers and sequentially, results identical). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

/* run_all runs `inputs` through `expr`'s program on `hosts` (NULL: the sequential
 * evaluator) and returns every result as "ok:<hex>" or "err:<code>:<message>" lines. */
static char *run_all(const lt_skel_t *prog, lt_proc_t *hosts, int nhosts, int normal_form,
                     const char *mode, const char *const *inputs, int n, char **stats) {
  char *text = lt_skel_format(prog);
  lt_skel_t *copy = NULL;
  char err[256];
  cr_assert_eq(lt_skel_parse(text, &copy, err, sizeof err), LT_OK, "%s: %s", text, err);
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, copy), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "modules", LT_TEST_MODULES), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "normal_form", normal_form ? "on" : "off"), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "mode", mode), LT_OK);
  for (int i = 0; i < nhosts; i++)
    cr_assert_eq(lt_eval_add_host(ev, hosts[i].endpoint), LT_OK);
  int rc = nhosts > 0 ? lt_eval_start(ev) : lt_eval_run_local(ev);
  cr_assert_eq(rc, LT_OK, "%s", lt_strerror(rc));
  for (int i = 0; i < n; i++)
    cr_assert_eq(lt_eval_submit(ev, inputs[i], strlen(inputs[i]), NULL), LT_OK);
  lt_eval_close(ev);
  size_t cap = 4096, len = 0;
  char *out = malloc(cap);
  out[0] = '\0';
  lt_buf_t *b;
  while ((rc = lt_eval_next(ev, &b)) == LT_OK) {
    size_t need = len + 2 * lt_buf_len(b) + strlen(lt_buf_errmsg(b)) + 64;
    if (need > cap) out = realloc(out, cap = need * 2);
    if (lt_buf_error(b) != LT_OK) {
      len += (size_t)sprintf(out + len, "err:%d:%s\n", lt_buf_error(b), lt_buf_errmsg(b));
    } else {
      len += (size_t)sprintf(out + len, "ok:");
      const unsigned char *d = lt_buf_data(b);
      for (size_t k = 0; k < lt_buf_len(b); k++)
        len += (size_t)sprintf(out + len, "%02x", d[k]);
      len += (size_t)sprintf(out + len, "\n");
    }
    lt_buf_free(b);
  }
  cr_assert_eq(rc, LT_ECLOSED);
  if (stats != NULL) lt_eval_stats_json(ev, stats);
  lt_eval_free(ev);
  free(text);
  return out;
}

static void start3(lt_proc_t *p) {
  start_server(&p[0], "s0", 2);
  start_server(&p[1], "s1", 2);
  start_server(&p[2], "s2", 2);
}

static void stop3(lt_proc_t *p) {
  for (int i = 0; i < 3; i++)
    lt__proc_stop(&p[i], 5000);
}

/* same_everywhere checks that servers in plain mode, in optimized mode (lookahead and
 * lazy binding), with normal form, and the sequential evaluator agree, and returns the
 * result text (caller frees). */
static char *same_everywhere(lt_skel_t *prog, lt_proc_t *hosts, const char *const *in, int n) {
  char *local = run_all(prog, NULL, 0, 0, "plain", in, n, NULL);
  char *plain = run_all(prog, hosts, 3, 0, "plain", in, n, NULL);
  char *lazy = run_all(prog, hosts, 3, 0, "optimized", in, n, NULL);
  char *fused = run_all(prog, hosts, 3, 1, "optimized", in, n, NULL);
  char *prog_text = lt_skel_format(prog);
  cr_assert_str_eq(plain, local, "%s (plain)", prog_text);
  cr_assert_str_eq(lazy, local, "%s (optimized):\n%s\nlocal:\n%s", prog_text, lazy, local);
  cr_assert_str_eq(fused, local, "%s (optimized, normal form):\n%s\nlocal:\n%s", prog_text, fused,
                   local);
  free(prog_text);
  free(plain);
  free(lazy);
  free(fused);
  lt_skel_free(prog);
  return local;
}

Test(map, zero_one_and_many_parts, .timeout = 120) {
  lt_proc_t hosts[3];
  start3(hosts);
  const char *in[] = {"", "ab", "abcdefghij"};
  char *r = same_everywhere(lt_map("skelk:chunks", lt_seq("skelk:rev"), "skelk:cat"), hosts, in, 3);
  /* chunks of 3 reversed: "" -> "", "ab" -> "ba", "abcdefghij" -> "cbafedihgj" */
  cr_assert_str_eq(r, "ok:\nok:6261\nok:636261666564696867"
                      "6a\n");
  free(r);
  stop3(hosts);
}

Test(dc, fib_with_cutoff_and_depth_zero, .timeout = 120) {
  lt_proc_t hosts[3];
  start3(hosts);
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_dc("skelk:fib_cut", "skelk:fib_div", lt_seq("skelk:fib_seq"),
                                      "skelk:add")),
               LT_OK);
  cr_assert_eq(lt_eval_set(ev, "modules", LT_TEST_MODULES), LT_OK);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(lt_eval_add_host(ev, hosts[i].endpoint), LT_OK);
  cr_assert_eq(lt_eval_start(ev), LT_OK);
  const int64_t want[] = {0, 1, 1, 2, 55, 6765};
  const int64_t n[] = {0, 1, 2, 3, 10, 20};
  submit_values(ev, n, 6);
  lt_eval_close(ev);
  for (int i = 0; i < 6; i++)
    cr_assert_eq(next_i64(ev), want[i], "fib(%lld)", (long long)n[i]);
  lt_eval_free(ev);
  stop3(hosts);
}

Test(reduce, map_reduce_combines_pairs_in_part_order, .timeout = 120) {
  lt_proc_t hosts[3];
  start3(hosts);
  /* Chunks of 2 reversed, then combined two at a time (cat2 refuses any other count): the
   * same as one merge of all parts; one part is the result as it is; no part fails. */
  const char *in[] = {"abcdefghijklmnopq", "ab", ""};
  lt_skel_t *p = lt_skel_param(
      lt_map_reduce("skelk:chunks", lt_seq("skelk:rev"), lt_reduce("skelk:cat2")), "split", "2", 1);
  char *r = same_everywhere(p, hosts, in, 3);
  cr_assert_str_eq(r, "ok:62616463666568676a696c6b6e6d706f71\nok:6261\n"
                      "err:-10:skelk:chunks: made no parts, and a reduce needs at least one\n");
  free(r);
  /* Map-reduce nested in map-reduce, and a reduce over 30 parts. */
  const char *in2[] = {"abcdefghijklmnopqrstuvwxyz0123"};
  lt_skel_t *inner = lt_map_reduce("skelk:halves", lt_seq("skelk:rev"), lt_reduce("skelk:cat2"));
  p = lt_skel_param(lt_map_reduce("skelk:chunks", inner, lt_reduce("skelk:cat2")), "split", "1", 1);
  r = same_everywhere(p, hosts, in2, 1);
  cr_assert_str_eq(r, "ok:6162636465666768696a6b6c6d6e6f707172737475767778797a30313233\n");
  free(r);
  stop3(hosts);
}

Test(reduce, the_last_stage_reduces_the_stream_to_one_result, .timeout = 120) {
  lt_proc_t hosts[3];
  start3(hosts);
  /* 40 tasks reversed, then their results combined two at a time (cat2 refuses any other
   * count) in submission order: one result, the concatenation. */
  char bufs[40][8];
  const char *in[40];
  char want[40 * 8 * 2 + 8] = "ok:";
  for (int i = 0; i < 40; i++) {
    snprintf(bufs[i], sizeof bufs[i], "%02d;", i);
    in[i] = bufs[i];
    for (int k = 2; k >= 0; k--)
      snprintf(want + strlen(want), 3, "%02x", (unsigned char)bufs[i][k]);
  }
  strcat(want, "\n");
  lt_skel_t *p = lt_pipeline(lt_seq("skelk:rev"), lt_reduce("skelk:cat2"), NULL);
  cr_assert(lt_skel_reduces(p));
  char *r = same_everywhere(p, hosts, in, 40);
  cr_assert_str_eq(r, want);
  free(r);
  /* One task is its own result; a failing task makes the result its failure, the
   * earliest of two. */
  const char *one[] = {"abc"};
  r = same_everywhere(lt_pipeline(lt_seq("skelk:rev"), lt_reduce("skelk:cat2"), NULL), hosts, one,
                      1);
  cr_assert_str_eq(r, "ok:636261\n");
  free(r);
  const char *bad[] = {"ab", "xy", "cd", "x", "ef"};
  r = same_everywhere(
      lt_pipeline(lt_seq_with("skelk:fail_on", "x", 1), lt_reduce("skelk:cat2"), NULL), hosts, bad,
      5);
  cr_assert_str_eq(r, "err:-10:task 1: skelk:fail_on: fail_on: found x\n");
  free(r);
  stop3(hosts);
}

Test(reduce, a_reducing_program_takes_no_future_and_no_task_gives_no_result) {
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_pipeline(lt_seq("skelk:rev"), lt_reduce("skelk:cat2"), NULL)),
               LT_OK);
  cr_assert_eq(lt_eval_set(ev, "modules", LT_TEST_MODULES), LT_OK);
  cr_assert_eq(lt_eval_run_local(ev), LT_OK);
  lt_future_t *f = (lt_future_t *)1;
  cr_assert_eq(lt_eval_submit(ev, "a", 1, &f), LT_EINVAL);
  cr_assert_null(f);
  lt_eval_close(ev);
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next(ev, &b), LT_ECLOSED);
  lt_eval_free(ev);
}

Test(while, loops_until_the_condition_fails, .timeout = 120) {
  lt_proc_t hosts[3];
  start3(hosts);
  /* Drop the first byte while longer than 3; a task already short enough passes as it is. */
  const char *in[] = {"abcdefgh", "xy", "abcd"};
  lt_skel_t *p = lt_skel_param(lt_while("skelk:long", lt_seq("skelk:shrink")), "cond", "3", 1);
  char *r = same_everywhere(p, hosts, in, 3);
  cr_assert_str_eq(r, "ok:666768\nok:7879\nok:626364\n");
  free(r);
  /* A while inside a map, and a map inside a while. */
  const char *in2[] = {"abcdefghijkl"};
  lt_skel_t *w = lt_skel_param(lt_while("skelk:long", lt_seq("skelk:shrink")), "cond", "1", 1);
  r = same_everywhere(lt_skel_param(lt_map("skelk:chunks", w, "skelk:cat"), "split", "4", 1), hosts,
                      in2, 1);
  cr_assert_str_eq(r, "ok:64686c\n"); /* "abcd" -> "d", "efgh" -> "h", "ijkl" -> "l" */
  free(r);
  lt_skel_t *body = lt_pipeline(lt_seq("skelk:shrink"),
                                lt_map("skelk:halves", lt_seq("skelk:rev"), "skelk:cat"), NULL);
  r = same_everywhere(lt_skel_param(lt_while("skelk:long", body), "cond", "9", 1), hosts, in2, 1);
  cr_assert_str_eq(r, "ok:656463626b6a696867\n"); /* 12 -> 11 -> 10 -> 9 bytes */
  free(r);
  stop3(hosts);
}

Test(if, runs_one_branch_by_the_condition, .timeout = 120) {
  lt_proc_t hosts[3];
  start3(hosts);
  const char *in[] = {"ab", "abcdef", ""};
  lt_skel_t *p = lt_skel_param(
      lt_if("skelk:small", lt_seq("skelk:rev"), lt_seq_with("skelk:app", "!", 1)), "cond", "2", 1);
  char *r = same_everywhere(p, hosts, in, 3);
  cr_assert_str_eq(r, "ok:6261\nok:61626364656621\nok:\n");
  free(r);
  stop3(hosts);
}

Test(params, every_kernel_of_a_skeleton_reads_its_own, .timeout = 120) {
  lt_proc_t hosts[3];
  start3(hosts);
  /* The parser and the builders agree, and each kernel gets its own parameter: chunks of 4
   * (not the default 3), and a dc cut-off of 3 (not the default 1). */
  lt_skel_t *parsed = NULL;
  char err[256];
  cr_assert_eq(lt_skel_parse("pipe(map(skelk:chunks \"4\", skelk:rev, skelk:cat),"
                             " dc(skelk:small \"3\", skelk:halves, skelk:rev, skelk:cat))",
                             &parsed, err, sizeof err),
               LT_OK, "%s", err);
  lt_skel_t *built = lt_pipeline(
      lt_skel_param(lt_map("skelk:chunks", lt_seq("skelk:rev"), "skelk:cat"), "split", "4", 1),
      lt_skel_param(lt_dc("skelk:small", "skelk:halves", lt_seq("skelk:rev"), "skelk:cat"), "cond",
                    "3", 1),
      NULL);
  cr_assert(lt_skel_equal(parsed, built));
  lt_skel_free(built);
  const char *in[] = {"abcdefghij"};
  char *r = same_everywhere(parsed, hosts, in, 1);
  /* chunks of 4 reversed: "dcbahgfeji"; dc splits 10 -> 5 -> 2,3 and reverses the pieces:
   * "dc" "bah" | "gf" "eji" -> "cd" "hab" "fg" "ije" */
  cr_assert_str_eq(r, "ok:63646861626667696a65\n");
  free(r);
  stop3(hosts);
}

Test(dc, depth_twelve, .timeout = 180) {
  lt_proc_t hosts[3];
  start3(hosts);
  char big[4097];
  for (int i = 0; i < 4096; i++)
    big[i] = (char)('a' + i % 26);
  big[4096] = '\0';
  const char *in[] = {big, "x"};
  /* halves until 1 byte: depth 12, 4096 base cases, each reversed (a no-op on 1 byte) and
   * xor-ed; the combine concatenates, so the result is the input xor 0x20. */
  char *r = same_everywhere(
      lt_dc("skelk:small", "skelk:halves",
            lt_pipeline(lt_seq("skelk:rev"), lt_seq_with("skelk:xor", " ", 1), NULL), "skelk:cat"),
      hosts, in, 2);
  char *want = malloc(3 + 2 * 4096 + 16 + 8);
  size_t len = (size_t)sprintf(want, "ok:");
  for (int i = 0; i < 4096; i++)
    len += (size_t)sprintf(want + len, "%02x", (unsigned char)(big[i] ^ 0x20));
  sprintf(want + len, "\nok:58\n");
  cr_assert_str_eq(r, want);
  free(want);
  free(r);
  stop3(hosts);
}

Test(nested, failing_kernel_deep_inside_fails_that_task_only, .timeout = 120) {
  lt_proc_t hosts[3];
  start3(hosts);
  const char *in[] = {"hello world", "oops! here", "fine"};
  /* farm(pipe(map(chunks, dc(small, halves, fail_on "!", cat), cat), rev)) */
  char *r = same_everywhere(
      lt_farm(lt_pipeline(lt_map("skelk:chunks",
                                 lt_dc("skelk:small", "skelk:halves",
                                       lt_seq_with("skelk:fail_on", "!", 1), "skelk:cat"),
                                 "skelk:cat"),
                          lt_seq("skelk:rev"), NULL)),
      hosts, in, 3);
  cr_assert_not_null(strstr(r, "ok:646c726f77206f6c6c6568\n"), "%s", r);
  cr_assert_not_null(strstr(r, "err:-10:skelk:fail_on: fail_on: found !\n"), "%s", r);
  cr_assert_not_null(strstr(r, "ok:656e6966\n"), "%s", r);
  free(r);
  stop3(hosts);
}

Test(normal_form, fewer_instructions_same_results, .timeout = 120) {
  lt_proc_t hosts[3];
  start3(hosts);
  const char *in[] = {"abc", "defg", "hi"};
  lt_skel_t *p = lt_pipeline(lt_seq("skelk:rev"), lt_seq_with("skelk:app", "!", 1),
                             lt_seq_with("skelk:xor", "A", 1), lt_seq("skelk:rev"), NULL);
  char *plain_stats = NULL, *fused_stats = NULL;
  char *a = run_all(p, hosts, 3, 0, "optimized", in, 3, &plain_stats);
  char *b = run_all(p, hosts, 3, 1, "optimized", in, 3, &fused_stats);
  cr_assert_str_eq(a, b);
  /* a task run again sends its instructions again: all of them, after the 1 to all the
   * first run had sent */
  uint64_t plain = distinct_instructions(plain_stats), reruns = stats_u64(plain_stats, "reruns");
  cr_assert(plain >= 12 + reruns && plain <= 12 + 4 * reruns, "%s", plain_stats);
  uint64_t fused = distinct_instructions(fused_stats);
  cr_assert_eq(fused, 3 + stats_u64(fused_stats, "reruns"), "%s", fused_stats);
  free(a);
  free(b);
  free(plain_stats);
  free(fused_stats);
  lt_skel_free(p);
  stop3(hosts);
}

/* ---- generated programs ---------------------------------------------------------------- */

static uint32_t rng = 12345;
static uint32_t rnd(uint32_t n) {
  rng = rng * 1103515245u + 12345u;
  return (rng >> 8) % n;
}

/* num_param returns a decimal parameter from 1 to max, as text in `buf` (a dc cut-off of 0
 * would divide a 1-byte task for ever). */
static const char *num_param(char *buf, uint32_t max) {
  snprintf(buf, 12, "%u", 1 + rnd(max));
  return buf;
}

/* gen makes a random program of the given depth over skelk's kernels. A program for a
 * while's body (`keep`) never makes its input longer, so that the loop, which shrinks the
 * input each round, ends. */
static lt_skel_t *gen(int depth, int keep) {
  uint32_t pick = depth <= 0 ? rnd(3) : rnd(11);
  char param[12];
  if (pick == 2 && keep) pick = 0;
  switch (pick) {
  case 0:
    return lt_seq("skelk:rev");
  case 1:
    param[0] = (char)rnd(256);
    return lt_seq_with("skelk:xor", param, 1);
  case 2: {
    uint32_t n = rnd(4);
    for (uint32_t i = 0; i < n; i++)
      param[i] = (char)('a' + rnd(26));
    return lt_seq_with("skelk:app", param, n);
  }
  case 3:
    return lt_farm(gen(depth - 1, keep));
  case 4:
    return rnd(2) ? lt_pipeline(gen(depth - 1, keep), gen(depth - 1, keep), NULL)
                  : lt_pipeline(gen(depth - 1, keep), gen(depth - 1, keep), gen(depth - 1, keep),
                                NULL);
  case 5:
    return lt_map("skelk:halves", gen(depth - 1, keep), "skelk:cat");
  case 6:
    return lt_skel_param(lt_dc("skelk:small", "skelk:halves", gen(depth - 1, keep), "skelk:cat"),
                         "cond", param, strlen(num_param(param, 6)));
  case 7:
    snprintf(param, sizeof param, "%u", 1 + rnd(5)); /* a chunk size */
    return lt_skel_param(
        lt_map_reduce("skelk:chunks", gen(depth - 1, keep), lt_reduce("skelk:cat2")), "split",
        param, strlen(param));
  case 8:
    return lt_skel_param(lt_if("skelk:small", gen(depth - 1, keep), gen(depth - 1, keep)), "cond",
                         param, strlen(num_param(param, 30)));
  default:
    return lt_skel_param(
        lt_while("skelk:long", lt_pipeline(lt_seq("skelk:shrink"), gen(depth - 1, 1), NULL)),
        "cond", param, strlen(num_param(param, 30)));
  }
}

Test(generated, random_programs_agree_with_the_sequential_evaluator, .timeout = 300) {
  lt_proc_t hosts[3];
  start3(hosts);
  char bufs[12][48];
  const char *in[12];
  for (int i = 0; i < 12; i++) {
    uint32_t n = rnd(40);
    for (uint32_t k = 0; k < n; k++)
      bufs[i][k] = (char)('A' + rnd(58));
    bufs[i][n] = '\0';
    in[i] = bufs[i];
  }
  for (int p = 0; p < 30; p++) {
    char *r = same_everywhere(gen(3, 0), hosts, in, 12);
    free(r);
  }
  stop3(hosts);
}

Test(map, thirty_thousand_parts_keep_every_server_alive, .timeout = 180) {
  /* One merge of 30 000 inputs: placing it must not stall the dispatcher (which would stop
   * answering heartbeats and declare healthy servers dead). */
  lt_proc_t hosts[3];
  start3(hosts);
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_map("skelk:chunks", lt_seq("skelk:rev"), "skelk:cat")), LT_OK);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(lt_eval_add_host(ev, hosts[i].endpoint), LT_OK);
  cr_assert_eq(lt_eval_start(ev), LT_OK);
  size_t n = 90000;
  char *in = malloc(n);
  for (size_t i = 0; i < n; i++)
    in[i] = (char)('a' + i % 26);
  cr_assert_eq(lt_eval_submit(ev, in, n, NULL), LT_OK);
  lt_eval_close(ev);
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next(ev, &b), LT_OK);
  cr_assert_eq(lt_buf_error(b), LT_OK, "%s", lt_buf_errmsg(b));
  cr_assert_eq(lt_buf_len(b), n);
  const char *d = lt_buf_data(b);
  for (size_t c = 0; c < n / 3; c++)
    for (size_t k = 0; k < 3; k++)
      cr_assert_eq(d[3 * c + k], in[3 * c + 2 - k]);
  lt_buf_free(b);
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  cr_assert_null(strstr(json, "\"alive\":false"), "%s", json);
  free(json);
  free(in);
  lt_eval_free(ev);
  stop3(hosts);
}
