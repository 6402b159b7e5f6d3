/* test_pack.c: packed instructions (a grain's group of seq tasks sent as one entry, run as one
 * server task, answered by one completion entry) on real lithium-server processes. Each task
 * of a pack keeps what it would have alone: a kernel that crashes its supervised server in
 * one member fails that task alone with LT_ECRASH (in a farm and as the second stage of a
 * lazy pipeline, whose packs read references); a member that overruns task_timeout_ms fails
 * alone with LT_ETIMEDOUT and the members after it run again; a server killed while it holds
 * packs of a lazy pipeline loses no task and delivers none twice; divide and conquer, whose
 * combines wait for one another, packs only what can run; pack=off sends the same groups
 * unpacked. The per-task results, errors, futures and order of groups (test_grain.c)
 * run packed too, since packing is on by default. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

#define READ_MS 60000

/* packs_of returns the evaluator's `packs` stat; `packed` goes to *tasks when not NULL. */
static uint64_t packs_of(lt_eval_t *ev, uint64_t *tasks) {
  char *json = stats_of(ev);
  uint64_t packs = stats_u64(json, "packs");
  if (tasks != NULL) *tasks = stats_u64(json, "packed");
  free(json);
  return packs;
}

/* expect_all reads n ordered results of tasks 0..n-1: task `bad` fails with `err` and its
 * message names `what`; every other one is f(i) = i * mul + add. */
static void expect_all(lt_eval_t *ev, int n, int bad, int err, const char *what, int64_t mul,
                       int64_t add) {
  for (int i = 0; i < n; i++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next_timeout(ev, READ_MS, &b), LT_OK, "result %d", i);
    cr_assert_eq(lt_buf_task(b), (uint64_t)i);
    if (i == bad) {
      cr_assert_eq(lt_buf_error(b), err, "task %d: %s %s", i, lt_strerror(lt_buf_error(b)),
                   lt_buf_errmsg(b));
      cr_assert_not_null(strstr(lt_buf_errmsg(b), what), "%s", lt_buf_errmsg(b));
    } else {
      cr_assert_eq(lt_buf_error(b), LT_OK, "task %d: %s %s", i, lt_strerror(lt_buf_error(b)),
                   lt_buf_errmsg(b));
      cr_assert_eq(get_i64(lt_buf_data(b)), (int64_t)i * mul + add, "task %d", i);
    }
    lt_buf_free(b);
  }
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next(ev, &b), LT_ECLOSED);
}

/* run_supervised runs n int64 tasks of `prog` under `opts` on `nsrv` supervised servers and
 * checks them with expect_all; the servers must serve the same endpoints afterwards. Returns
 * the packs sent. */
static uint64_t run_supervised(lt_skel_t *prog, const char *const *opts, int nsrv, int n, int bad,
                               int err, const char *what, int64_t mul, int64_t add) {
  lt_proc_t p[3];
  for (int i = 0; i < nsrv; i++)
    start_server(&p[i], "supervised", 2);
  lt_eval_t *ev = eval_on_procs(prog, p, nsrv, opts);
  submit_i64s(ev, n);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  expect_all(ev, n, bad, err, what, mul, add);
  uint64_t packs = packs_of(ev, NULL);
  lt_eval_free(ev);
  /* The same endpoints serve again. */
  ev = eval_on_procs(lt_farm(lt_seq("testk:inc")), p, nsrv, opts);
  submit_i64s(ev, 40);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  expect_all(ev, 40, -1, LT_OK, "", 1, 1);
  lt_eval_free(ev);
  for (int i = 0; i < nsrv; i++)
    lt__proc_stop(&p[i], 5000);
  return packs;
}

/* A segfault in one member of a pack: that task fails with LT_ECRASH, named; the other
 * members of its pack (run again, uncharged) and every other task are right. */
Test(pack, a_crash_in_a_pack_fails_its_task_alone, .timeout = 180) {
  const char *const opts[] = {"grain", "16", "heartbeat_ms", "300", NULL};
  uint64_t packs = run_supervised(lt_farm(lt_seq_with("testk:crash_on", "37:segv", 7)), opts, 2,
                                  300, 37, LT_ECRASH, "SIGSEGV", 1, 0);
  cr_assert_gt(packs, 0);
}

/* The same as the second stage of a lazy pipeline: its packs read references on the server. */
Test(pack, a_crash_in_a_packed_second_stage_fails_its_task_alone, .timeout = 240) {
  const char *const opts[] = {"grain", "8", "heartbeat_ms", "300", NULL};
  lt_skel_t *prog =
      lt_farm(lt_pipeline(lt_seq("testk:inc"), lt_seq_with("testk:crash_on", "38:abort", 8), NULL));
  uint64_t packs = run_supervised(prog, opts, 3, 200, 37, LT_ECRASH, "SIGABRT", 1, 1);
  cr_assert_gt(packs, 0);
}

/* A member that overruns the deadline fails alone with LT_ETIMEDOUT; the members of its pack
 * before it keep their results and those after it run again. */
Test(pack, a_member_past_the_deadline_fails_alone, .timeout = 180) {
  const char *const opts[] = {"grain", "8", "task_timeout_ms", "400", NULL};
  uint64_t packs = run_supervised(lt_farm(lt_seq_with("testk:stall_on", "21:5000", 7)), opts, 2,
                                  120, 21, LT_ETIMEDOUT, "testk:stall_on", 1, 0);
  cr_assert_gt(packs, 0);
}

/* A server killed with SIGKILL while it holds packs of a lazy pipeline (the second stage's
 * members read the first stage's outputs there): every task once, right. */
Test(pack, server_killed_holding_packs_loses_nothing, .timeout = 180) {
  lt_proc_t a, b;
  start_server(&a, "victim", 2);
  start_server(&b, "survivor", 2);
  const char *const opts[] = {"grain", "8", NULL};
  lt_proc_t procs[2] = {a, b};
  lt_eval_t *ev = eval_on_procs(
      lt_farm(lt_pipeline(lt_seq_with("testk:sleep", "1", 1), lt_seq("testk:dbl"), NULL)), procs, 2,
      opts);
  const int n = 600;
  submit_i64s(ev, n);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  for (int i = 0; i < n; i++) {
    if (i == 40) kill(a.pid, SIGKILL);
    cr_assert_eq(next_i64_within(ev, 30000), 2 * (int64_t)i, "task %d", i);
  }
  lt_buf_t *r = NULL;
  cr_assert_eq(lt_eval_next(ev, &r), LT_ECLOSED);
  uint64_t tasks = 0;
  cr_assert_gt(packs_of(ev, &tasks), 0);
  cr_assert_geq(tasks, 2 * packs_of(ev, NULL));
  lt_eval_free(ev);
  lt__proc_stop(&a, 1000);
  lt__proc_stop(&b, 5000);
}

/* pack=off: the same groups go unpacked, with the same results. */
Test(pack, off_sends_groups_unpacked, .timeout = 120) {
  const char *const opts[] = {"grain", "8", "pack", "off", NULL};
  lt_eval_t *ev = new_eval_with(lt_farm(lt_seq("testk:inc")), 1, opts);
  submit_i64s(ev, 400);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  expect_all(ev, 400, -1, LT_OK, "", 1, 1);
  char *json = stats_of(ev);
  cr_assert_gt(stats_u64(json, "groups"), 0, "%s", json);
  cr_assert_eq(stats_u64(json, "packs"), 0, "%s", json);
  free(json);
  lt_eval_free(ev);
}

/* Divide and conquer with an explicit grain on 2 servers: its combines (fibo's add) may wait
 * for each other, so a pack takes only members whose inputs exist (a pack of a combine and
 * the combine it waits for would never run). fib(n) for n up to 21, cut-off 3: thousands of
 * instructions, every answer right. */
Test(pack, divide_and_conquer_packs_only_what_can_run, .timeout = 120) {
  const char *const opts[] = {"grain", "16", NULL};
  lt_skel_t *prog =
      lt_skel_param(lt_dc("skelk:fib_cut", "skelk:fib_div", lt_seq("skelk:fib_seq"), "skelk:add"),
                    "cond", "3", 1);
  lt_eval_t *ev = new_eval_with(prog, 2, opts);
  const int64_t want[] = {0, 1, 55, 2584, 6765, 10946};
  const int64_t n[] = {0, 1, 10, 18, 20, 21};
  submit_values(ev, n, 6);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  for (int i = 0; i < 6; i++)
    cr_assert_eq(next_i64_within(ev, 60000), want[i], "fib(%lld)", (long long)n[i]);
  cr_assert_gt(packs_of(ev, NULL), 0);
  lt_eval_free(ev);
}
