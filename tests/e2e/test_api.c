/* test_api.c: the task index of each result (lt_buf_task) with ordered=off on servers, with
 * results replayed from the journal and with the sequential evaluator, failures and futures
 * included; and lt_future_wait_any over futures of one evaluator and of two, its timeout and
 * its argument checks. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define N 400

/* input_of is the int64 input of task i: every tenth is negative, and testk:neg_fails
 * fails it. */
static int64_t input_of(int i) {
  return i % 10 == 3 ? -(int64_t)i - 1 : (int64_t)i * 3;
}

/* failing_program is farm(pipe(testk:neg_fails, testk:inc)): the input plus one, or an
 * error for a negative input. */
static lt_skel_t *failing_program(void) {
  return lt_farm(lt_pipeline(lt_seq("testk:neg_fails"), lt_seq("testk:inc"), NULL));
}

static lt_eval_t *local_eval(lt_skel_t *program, const char *const *opts) {
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, program), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "modules", LT_TEST_MODULES), LT_OK);
  for (int i = 0; opts != NULL && opts[i] != NULL; i += 2)
    cr_assert_eq(lt_eval_set(ev, opts[i], opts[i + 1]), LT_OK, "%s %s", opts[i], opts[i + 1]);
  cr_assert_eq(lt_eval_run_local(ev), LT_OK);
  return ev;
}

/* check_result tells that `b` is task `task`'s right answer for input `in`. */
static void check_result(const lt_buf_t *b, uint64_t task, int64_t in) {
  if (in < 0) {
    cr_assert_eq(lt_buf_error(b), LT_EKERNEL, "task %llu: %s", (unsigned long long)task,
                 lt_buf_errmsg(b));
    cr_assert_not_null(strstr(lt_buf_errmsg(b), "negative input"), "%s", lt_buf_errmsg(b));
  } else {
    cr_assert_eq(lt_buf_error(b), LT_OK, "task %llu: %s", (unsigned long long)task,
                 lt_buf_errmsg(b));
    cr_assert_eq(lt_buf_len(b), 8);
    cr_assert_eq(get_i64(lt_buf_data(b)), in + 1, "task %llu", (unsigned long long)task);
  }
}

/* submit_and_check submits input_of(order[k]) for k in 0..n-1 (every seventh with a
 * future), reads every result, unordered, and checks that each submission index comes back
 * once with the answer to its own input. */
static void submit_and_check(lt_eval_t *ev, const int *order, int n) {
  lt_future_t **futs = calloc((size_t)n, sizeof *futs);
  unsigned char *seen = calloc((size_t)n, 1);
  for (int k = 0; k < n; k++) {
    unsigned char tok[8];
    put_i64(tok, input_of(order[k]));
    cr_assert_eq(lt_eval_submit(ev, tok, 8, k % 7 == 5 ? &futs[k] : NULL), LT_OK);
  }
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  lt_buf_t *b = NULL;
  int got = 0, rc;
  while ((rc = lt_eval_next_timeout(ev, 30000, &b)) == LT_OK) {
    uint64_t task = lt_buf_task(b);
    cr_assert_lt(task, (uint64_t)n);
    cr_assert_null(futs[task], "task %llu has a future", (unsigned long long)task);
    cr_assert_eq(seen[task], 0, "task %llu twice", (unsigned long long)task);
    seen[task] = 1;
    check_result(b, task, input_of(order[task]));
    lt_buf_free(b);
    got++;
  }
  cr_assert_eq(rc, LT_ECLOSED, "%s", lt_strerror(rc));
  for (int k = 0; k < n; k++) {
    if (futs[k] == NULL) continue;
    cr_assert_eq(lt_future_wait(futs[k], 30000, &b), LT_OK);
    cr_assert_eq(lt_buf_task(b), (uint64_t)k);
    check_result(b, (uint64_t)k, input_of(order[k]));
    lt_buf_free(b);
    lt_future_release(futs[k]);
    got++;
  }
  cr_assert_eq(got, n);
  free(seen);
  free(futs);
}

static int *identity(int n) {
  int *order = malloc((size_t)n * sizeof *order);
  for (int i = 0; i < n; i++)
    order[i] = i;
  return order;
}

Test(buf_task, unordered_on_servers_every_index_once_with_its_input, .timeout = 120) {
  const char *opts[] = {"ordered", "off", NULL};
  lt_eval_t *ev = new_eval_with(failing_program(), 2, opts);
  int *order = identity(N);
  submit_and_check(ev, order, N);
  free(order);
  lt_eval_free(ev);
}

Test(buf_task, unordered_sequential_evaluator, .timeout = 60) {
  const char *opts[] = {"ordered", "off", NULL};
  lt_eval_t *ev = local_eval(failing_program(), opts);
  int *order = identity(N);
  submit_and_check(ev, order, N);
  free(order);
  lt_eval_free(ev);
}

Test(buf_task, ordered_results_count_from_zero, .timeout = 60) {
  lt_eval_t *ev = local_eval(lt_seq("testk:inc"), NULL);
  submit_i64s(ev, 5);
  lt_eval_close(ev);
  for (uint64_t i = 0; i < 5; i++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next(ev, &b), LT_OK);
    cr_assert_eq(lt_buf_task(b), i);
    lt_buf_free(b);
  }
  cr_assert_eq(lt_buf_task(NULL), UINT64_MAX);
  lt_eval_free(ev);
}

Test(buf_task, journal_replay_gives_this_runs_index, .timeout = 120) {
  char path[128];
  snprintf(path, sizeof path, "/tmp/lt-api-journal-%d-%ld.jnl", (int)getpid(), (long)random());
  unlink(path); /* left by a killed run of an earlier process with the same pid */
  const char *opts[] = {"journal", path, "ordered", "off", NULL};
  /* The first run computes the first half; failures are journaled too (LT_EKERNEL). */
  lt_eval_t *ev = local_eval(failing_program(), opts);
  int *order = identity(N / 2);
  submit_and_check(ev, order, N / 2);
  free(order);
  lt_eval_free(ev);
  /* The second submits everything in reverse: the first half comes from the journal, and
   * each result names this run's submission, not the first run's. */
  ev = new_eval_with(failing_program(), 2, opts);
  order = malloc(N * sizeof *order);
  for (int k = 0; k < N; k++)
    order[k] = N - 1 - k;
  submit_and_check(ev, order, N);
  free(order);
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  cr_assert_eq(stats_u64(json, "journal_replayed"), N / 2, "%s", json);
  free(json);
  lt_eval_free(ev);
  unlink(path);
}

static int64_t ms_since(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)(t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static lt_future_t *submit_future(lt_eval_t *ev, int64_t v) {
  unsigned char tok[8];
  put_i64(tok, v);
  lt_future_t *f = NULL;
  cr_assert_eq(lt_eval_submit(ev, tok, 8, &f), LT_OK);
  cr_assert_not_null(f);
  return f;
}

Test(wait_any, futures_of_two_evaluators_each_once, .timeout = 120) {
  /* Servers that sleep a little and a sequential evaluator: results come in any order. */
  lt_eval_t *remote = new_eval(
      lt_farm(lt_pipeline(lt_seq_with("testk:sleep", "5", 1), lt_seq("testk:inc"), NULL)), 2);
  lt_eval_t *local = local_eval(lt_seq("testk:dbl"), NULL);
  enum { M = 60 };
  lt_future_t *fs[M];
  for (int i = 0; i < M; i++)
    fs[i] = submit_future(i % 2 ? remote : local, i);
  unsigned char seen[M] = {0};
  for (int k = 0; k < M; k++) {
    int which = M;
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_future_wait_any(fs, M, 30000, &which, &b), LT_OK);
    cr_assert_lt(which, M);
    cr_assert_eq(seen[which], 0, "future %d twice", which);
    seen[which] = 1;
    cr_assert_eq(lt_buf_error(b), LT_OK, "%s", lt_buf_errmsg(b));
    int64_t want = which % 2 ? (int64_t)which + 1 : 2 * (int64_t)which;
    cr_assert_eq(get_i64(lt_buf_data(b)), want, "future %d", which);
    cr_assert_eq(lt_buf_task(b), (uint64_t)(which / 2), "future %d", which);
    lt_buf_free(b);
  }
  /* Every result was taken: nothing more can come. */
  int which = 0;
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_future_wait_any(fs, M, 1000, &which, &b), LT_ESTATE);
  cr_assert_null(b);
  for (int i = 0; i < M; i++)
    lt_future_release(fs[i]);
  lt_eval_free(remote);
  lt_eval_free(local);
}

Test(wait_any, times_out_then_wakes_on_the_result, .timeout = 60) {
  lt_eval_t *ev = new_eval(lt_farm(lt_seq_with("testk:sleep", "1500", 4)), 1);
  lt_future_t *fs[2] = {submit_future(ev, 7), submit_future(ev, 8)};
  int which = 5;
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_future_wait_any(fs, 2, 0, &which, &b), LT_ETIMEDOUT);
  cr_assert_null(b);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  cr_assert_eq(lt_future_wait_any(fs, 2, 200, &which, &b), LT_ETIMEDOUT);
  int64_t ms = ms_since(&t0);
  cr_assert_geq(ms, 190, "%lld ms", (long long)ms);
  cr_assert_lt(ms, 1400, "%lld ms", (long long)ms);
  cr_assert_null(b);
  /* Forever: the first result wakes it (well before both sleeps are over on one server of
   * two threads, and without polling). */
  cr_assert_eq(lt_future_wait_any(fs, 2, -1, &which, &b), LT_OK);
  cr_assert_lt(which, 2);
  cr_assert_eq(get_i64(lt_buf_data(b)), which == 0 ? 7 : 8);
  cr_assert_eq(lt_buf_task(b), (uint64_t)which);
  lt_buf_free(b);
  int first = which;
  cr_assert_eq(lt_future_wait_any(fs, 2, 30000, &which, &b), LT_OK);
  cr_assert_eq(which, 1 - first);
  lt_buf_free(b);
  /* A result taken by lt_future_wait_any is gone for lt_future_wait too. */
  cr_assert_eq(lt_future_wait(fs[0], 0, &b), LT_ESTATE);
  lt_future_release(fs[0]);
  lt_future_release(fs[1]);
  lt_eval_free(ev);
}

Test(wait_any, skips_taken_futures_and_checks_arguments, .timeout = 60) {
  lt_eval_t *ev = local_eval(lt_seq("testk:inc"), NULL);
  lt_future_t *fs[3] = {submit_future(ev, 1), submit_future(ev, 2), submit_future(ev, 3)};
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_future_wait(fs[0], 30000, &b), LT_OK);
  lt_buf_free(b);
  int which = 0;
  /* fs[0] was taken: the next ready one is fs[1] or fs[2]. */
  cr_assert_eq(lt_future_wait_any(fs, 3, 30000, &which, &b), LT_OK);
  cr_assert_neq(which, 0);
  lt_buf_free(b);

  lt_future_t *with_null[2] = {fs[2], NULL};
  cr_assert_eq(lt_future_wait_any(NULL, 3, 0, &which, &b), LT_EINVAL);
  cr_assert_eq(lt_future_wait_any(fs, 0, 0, &which, &b), LT_EINVAL);
  cr_assert_eq(lt_future_wait_any(fs, 3, 0, NULL, &b), LT_EINVAL);
  cr_assert_eq(lt_future_wait_any(fs, 3, 0, &which, NULL), LT_EINVAL);
  cr_assert_eq(lt_future_wait_any(with_null, 2, 0, &which, &b), LT_EINVAL);
  for (int i = 0; i < 3; i++)
    lt_future_release(fs[i]);
  lt_eval_free(ev);
}
