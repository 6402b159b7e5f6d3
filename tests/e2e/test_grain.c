/* test_grain.c: grouped instructions (option `grain`) on real lithium-server processes. A
 * group runs on one server worker as one hand-off (packed: one entry, one server task, one
 * completion entry), yet every task keeps its own result, its own error, its own future and
 * its place in ordered output; plain mode and grain=1 never
 * group; a server killed while it holds groups loses no task; grain=auto groups short
 * kernels once it has measured them and leaves long ones alone. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

/* submit_n submits the int64 tasks v(i) = i - neg for i in 0..n-1 (so the first `neg` are
 * negative), each with a future when `futs` is not NULL. */
static void submit_n(lt_eval_t *ev, int n, int neg, lt_future_t **futs) {
  for (int i = 0; i < n; i++) {
    unsigned char tok[8];
    put_i64(tok, (int64_t)i - neg);
    cr_assert_eq(lt_eval_submit(ev, tok, 8, futs != NULL ? &futs[i] : NULL), LT_OK);
  }
}

/* every_seventh_negative submits task i as -i when i % 7 == 3, else as i. */
static void every_seventh_negative(lt_eval_t *ev, int n) {
  for (int i = 0; i < n; i++) {
    unsigned char tok[8];
    put_i64(tok, i % 7 == 3 ? -(int64_t)i : i);
    cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK);
  }
}

/* Fixed groups of 8 through a kernel that fails on negative inputs: each failure is its own
 * task's, named with its input, in its place; the others are right; every result says which
 * task it is. */
Test(grain, groups_keep_each_result_error_and_order, .timeout = 120) {
  const char *const opts[] = {"grain", "8", NULL};
  lt_eval_t *ev = new_eval_with(lt_farm(lt_seq("testk:neg_fails")), 2, opts);
  const int n = 3000;
  every_seventh_negative(ev, n);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  for (int i = 0; i < n; i++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next_timeout(ev, 30000, &b), LT_OK, "task %d", i);
    cr_assert_eq(lt_buf_task(b), (uint64_t)i);
    if (i % 7 == 3) {
      cr_assert_eq(lt_buf_error(b), LT_EKERNEL, "task %d", i);
      char want[64];
      snprintf(want, sizeof want, "negative input %d", -i);
      cr_assert_not_null(strstr(lt_buf_errmsg(b), want), "task %d: %s", i, lt_buf_errmsg(b));
    } else {
      cr_assert_eq(lt_buf_error(b), LT_OK, "task %d: %s", i, lt_buf_errmsg(b));
      cr_assert_eq(get_i64(lt_buf_data(b)), i);
    }
    lt_buf_free(b);
  }
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next(ev, &b), LT_ECLOSED);
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  uint64_t groups = stats_u64(json, "groups"), grouped = stats_u64(json, "grouped");
  cr_assert_gt(groups, 0, "%s", json);
  cr_assert_geq(grouped, 2 * groups, "%s", json);
  cr_assert_leq(grouped, 8 * groups, "no group above the grain: %s", json);
  /* a task run again (a stand-in for a straggler's pack member) sends its one instruction
   * again */
  cr_assert_eq(distinct_instructions(json) - stats_u64(json, "reruns"), (uint64_t)n, "%s", json);
  cr_assert_eq(stats_u64(json, "packs"), groups, "every group of this farm goes packed: %s", json);
  free(json);
  lt_eval_free(ev);
}

/* Futures of grouped tasks: each resolves to its own task's result, read in reverse. */
Test(grain, each_task_keeps_its_future, .timeout = 120) {
  const char *const opts[] = {"grain", "16", NULL};
  lt_eval_t *ev = new_eval_with(lt_farm(lt_seq("testk:inc")), 2, opts);
  enum { N = 800 };
  static lt_future_t *futs[N];
  submit_n(ev, N, 0, futs);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  for (int i = N - 1; i >= 0; i--) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_future_wait(futs[i], 30000, &b), LT_OK, "future %d", i);
    cr_assert_eq(lt_buf_error(b), LT_OK);
    cr_assert_eq(get_i64(lt_buf_data(b)), i + 1, "future %d", i);
    cr_assert_eq(lt_buf_task(b), (uint64_t)i);
    lt_buf_free(b);
    lt_future_release(futs[i]);
  }
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  cr_assert_gt(stats_u64(json, "groups"), 0, "%s", json);
  cr_assert_gt(stats_u64(json, "packs"), 0, "%s", json);
  free(json);
  lt_eval_free(ev);
}

/* Unordered results of grouped tasks: each of them once, tied to its input by lt_buf_task. */
Test(grain, unordered_results_once_each, .timeout = 120) {
  const char *const opts[] = {"grain", "32", "ordered", "off", NULL};
  lt_eval_t *ev = new_eval_with(lt_farm(lt_seq("testk:dbl")), 2, opts);
  enum { N = 2000 };
  static unsigned char seen[N];
  submit_n(ev, N, 0, NULL);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  for (int k = 0; k < N; k++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next_timeout(ev, 30000, &b), LT_OK);
    uint64_t i = lt_buf_task(b);
    cr_assert_lt(i, (uint64_t)N);
    cr_assert_eq(seen[i], 0, "task %llu twice", (unsigned long long)i);
    seen[i] = 1;
    cr_assert_eq(get_i64(lt_buf_data(b)), 2 * (int64_t)i);
    lt_buf_free(b);
  }
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next(ev, &b), LT_ECLOSED);
  lt_eval_free(ev);
}

/* grain=1 and plain mode send every instruction alone. */
Test(grain, one_and_plain_never_group, .timeout = 120) {
  const char *const one[] = {"grain", "1", NULL};
  const char *const plain[] = {"mode", "plain", NULL};
  const char *const *sets[] = {one, plain};
  for (int k = 0; k < 2; k++) {
    lt_eval_t *ev = new_eval_with(lt_farm(lt_seq("testk:inc")), 1, sets[k]);
    submit_n(ev, 500, 0, NULL);
    cr_assert_eq(lt_eval_close(ev), LT_OK);
    for (int i = 0; i < 500; i++)
      cr_assert_eq(next_i64(ev), i + 1);
    char *json = NULL;
    cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
    cr_assert_eq(stats_u64(json, "groups"), 0, "%s: %s", sets[k][0], json);
    free(json);
    lt_eval_free(ev);
  }
}

/* grain=auto: an empty kernel is grouped once its service time is known; a kernel of 20 ms
 * is never grouped (its own time dwarfs an instruction's cost). */
Test(grain, auto_groups_short_kernels_only, .timeout = 120) {
  lt_eval_t *ev = new_eval(lt_farm(lt_seq("testk:inc")), 1);
  const int n = 20000;
  int next = 0;
  for (int i = 0; i < n; i++) {
    unsigned char tok[8];
    put_i64(tok, i);
    cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK);
    for (; i % 512 == 511 && next < i - 256; next++)
      cr_assert_eq(next_i64(ev), next + 1);
  }
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  for (; next < n; next++)
    cr_assert_eq(next_i64(ev), next + 1);
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  cr_assert_gt(stats_u64(json, "groups"), 0, "%s", json);
  free(json);
  lt_eval_free(ev);

  ev = new_eval(lt_farm(lt_seq_with("testk:sleep", "20", 2)), 1);
  submit_n(ev, 60, 0, NULL);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  for (int i = 0; i < 60; i++)
    cr_assert_eq(next_i64(ev), i);
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  cr_assert_eq(stats_u64(json, "groups"), 0, "%s", json);
  free(json);
  lt_eval_free(ev);
}

/* A server killed with SIGKILL while it holds groups: their tasks go elsewhere, none is
 * lost or delivered twice. */
Test(grain, server_killed_holding_groups_loses_nothing, .timeout = 120) {
  lt_proc_t a, b;
  start_server(&a, "victim", 2);
  start_server(&b, "survivor", 2);
  const char *const opts[] = {"grain", "8", NULL};
  lt_proc_t procs[2] = {a, b};
  lt_eval_t *ev = eval_on_procs(lt_farm(lt_seq_with("testk:sleep", "2", 1)), procs, 2, opts);
  submit_n(ev, 600, 0, NULL);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  for (int i = 0; i < 600; i++) {
    if (i == 40) kill(a.pid, SIGKILL);
    cr_assert_eq(next_i64_within(ev, 30000), i);
  }
  lt_buf_t *r = NULL;
  cr_assert_eq(lt_eval_next(ev, &r), LT_ECLOSED);
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  cr_assert_not_null(strstr(json, "\"alive\":false"), "%s", json);
  cr_assert_gt(stats_u64(json, "groups"), 0, "%s", json);
  free(json);
  lt_eval_free(ev);
  lt__proc_stop(&a, 1000);
  lt__proc_stop(&b, 5000);
}
