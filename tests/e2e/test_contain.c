/* test_contain.c: one bad kernel never takes the servers down (issue "containment"), with
 * supervised lithium-server processes: a kernel that segfaults, aborts or exits on one input of a
 * farm fails that task alone with LT_ECRASH naming the kernel and the signal, every other
 * result is right, and the same endpoints serve the next evaluation; so does one that
 * aborts or faults as the second stage of a lazy pipeline, in a map body and in a dc leaf,
 * where values of every task stay on the servers it takes down (crash charging across
 * lineage, issue 21 item 4); a kernel that never returns fails its task with LT_ETIMEDOUT
 * under task_timeout_ms, and its server, recycled, serves again. No kernel runs on a
 * server's loop thread, however fast its last runs: a slow run of such a kernel holds no other
 * session's round trips up and restarts nothing. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define READ_MS 60000

/* serves_again runs 50 tasks of testk:inc on the same servers: all must be right. */
static void serves_again(lt_proc_t *p, int n) {
  lt_eval_t *ev = eval_on_procs(lt_farm(lt_seq("testk:inc")), p, n, NULL);
  submit_i64s(ev, 50);
  lt_eval_close(ev);
  for (int i = 0; i < 50; i++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next_timeout(ev, READ_MS, &b), LT_OK, "result %d", i);
    cr_assert_eq(lt_buf_error(b), LT_OK, "task %d: %s", i, lt_buf_errmsg(b));
    cr_assert_eq(get_i64(lt_buf_data(b)), i + 1);
    lt_buf_free(b);
  }
  lt_eval_free(ev);
}

static void poison(const char *how, const char *signame) {
  lt_proc_t p[3];
  for (int i = 0; i < 3; i++)
    start_server(&p[i], "supervised", 2);
  char param[32];
  int n = snprintf(param, sizeof param, "37:%s", how);
  const char *opts[] = {"heartbeat_ms", "300", NULL};
  lt_eval_t *ev =
      eval_on_procs(lt_farm(lt_seq_with("testk:crash_on", param, (size_t)n)), p, 3, opts);
  enum { N = 300 };
  submit_i64s(ev, N);
  lt_eval_close(ev);
  int errors = 0;
  for (int i = 0; i < N; i++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next_timeout(ev, READ_MS, &b), LT_OK, "result %d", i);
    if (i == 37) {
      cr_assert_eq(lt_buf_error(b), LT_ECRASH, "task 37: %s %s", lt_strerror(lt_buf_error(b)),
                   lt_buf_errmsg(b));
      cr_assert_not_null(strstr(lt_buf_errmsg(b), "testk:crash_on"), "%s", lt_buf_errmsg(b));
      cr_assert_not_null(strstr(lt_buf_errmsg(b), signame), "%s", lt_buf_errmsg(b));
      cr_assert_not_null(strstr(lt_buf_errmsg(b), "not retried"), "%s", lt_buf_errmsg(b));
    } else {
      cr_assert_eq(lt_buf_error(b), LT_OK, "task %d: %s", i, lt_buf_errmsg(b));
      cr_assert_eq(get_i64(lt_buf_data(b)), i);
    }
    errors += lt_buf_error(b) != LT_OK;
    lt_buf_free(b);
  }
  cr_assert_eq(errors, 1);
  lt_eval_free(ev);
  /* The same endpoints: the supervisors restarted their workers. */
  serves_again(p, 3);
  for (int i = 0; i < 3; i++)
    lt__proc_stop(&p[i], 5000);
}

Test(poison, segfaulting_kernel_fails_its_task_alone, .timeout = 180) {
  poison("segv", "SIGSEGV");
}

Test(poison, aborting_kernel_fails_its_task_alone, .timeout = 180) {
  poison("abort", "SIGABRT");
}

/* A kernel that ends the process with _exit(0) (issue 36 item 5: it took the whole server
 * down, its supervisor too, which took the status for its worker's own) is a crash like a
 * signal: its task fails with LT_ECRASH naming the exit, and the restarted servers serve. */
Test(poison, exiting_kernel_fails_its_task_alone, .timeout = 180) {
  poison("exit", "exit(0)");
}

/* A program whose task i reads K int64s from i * K and answers each one plus ADD, with
 * testk:crash_on as one of its kernels, crashing on the value task VICTIM gives it. */
enum { LIN_TASKS = 200, VICTIM = 37 };

static void put_task(unsigned char *buf, int k, int i) {
  for (int j = 0; j < k; j++)
    put_i64(buf + 8 * j, (int64_t)i * k + j);
}

/* lineage runs LIN_TASKS tasks of `prog` on 3 supervised servers: task VICTIM fails with
 * LT_ECRASH naming testk:crash_on and `signame`, every other one is right. */
static void lineage(lt_skel_t *prog, int k, int add, const char *signame) {
  lt_proc_t p[3];
  for (int i = 0; i < 3; i++)
    start_server(&p[i], "supervised", 2);
  const char *opts[] = {"heartbeat_ms", "300", NULL};
  lt_eval_t *ev = eval_on_procs(prog, p, 3, opts);
  unsigned char in[64];
  for (int i = 0; i < LIN_TASKS; i++) {
    put_task(in, k, i);
    cr_assert_eq(lt_eval_submit(ev, in, 8 * (size_t)k, NULL), LT_OK);
  }
  lt_eval_close(ev);
  for (int i = 0; i < LIN_TASKS; i++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next_timeout(ev, READ_MS, &b), LT_OK, "result %d", i);
    if (i == VICTIM) {
      cr_assert_eq(lt_buf_error(b), LT_ECRASH, "task %d: %s %s", i, lt_strerror(lt_buf_error(b)),
                   lt_buf_errmsg(b));
      cr_assert_not_null(strstr(lt_buf_errmsg(b), "testk:crash_on"), "%s", lt_buf_errmsg(b));
      cr_assert_not_null(strstr(lt_buf_errmsg(b), signame), "%s", lt_buf_errmsg(b));
    } else {
      cr_assert_eq(lt_buf_error(b), LT_OK, "task %d: %s %s", i, lt_strerror(lt_buf_error(b)),
                   lt_buf_errmsg(b));
      cr_assert_eq(lt_buf_len(b), 8 * (size_t)k, "task %d", i);
      for (int j = 0; j < k; j++)
        cr_assert_eq(get_i64((const unsigned char *)lt_buf_data(b) + 8 * j),
                     (int64_t)i * k + j + add, "task %d, value %d", i, j);
    }
    lt_buf_free(b);
  }
  lt_eval_free(ev);
  serves_again(p, 3);
  for (int i = 0; i < 3; i++)
    lt__proc_stop(&p[i], 5000);
}

/* crash_param is crash_on's parameter for the value `v` and the way `how`. */
static const char *crash_param(char *buf, size_t len, int64_t v, const char *how) {
  snprintf(buf, len, "%lld:%s", (long long)v, how);
  return buf;
}

static void pipe_second_stage(const char *how, const char *signame) {
  char param[32];
  crash_param(param, sizeof param, VICTIM + 1, how);
  lineage(lt_farm(lt_pipeline(lt_seq("testk:inc"),
                              lt_seq_with("testk:crash_on", param, strlen(param)), NULL)),
          1, 1, signame);
}

Test(lineage, abort_in_the_second_stage_of_a_lazy_pipeline_fails_its_task_alone, .timeout = 240) {
  pipe_second_stage("abort", "SIGABRT");
}

Test(lineage, fault_in_the_second_stage_of_a_lazy_pipeline_fails_its_task_alone, .timeout = 240) {
  pipe_second_stage("fault", "SIGSEGV");
}

Test(lineage, abort_in_a_map_body_fails_its_task_alone, .timeout = 240) {
  char param[32];
  crash_param(param, sizeof param, VICTIM * 4 + 2, "abort");
  lt_skel_t *map =
      lt_map("skelk:chunks", lt_seq_with("testk:crash_on", param, strlen(param)), "skelk:cat");
  lineage(lt_skel_param(map, "split", "8", 1), 4, 0, "SIGABRT");
}

Test(lineage, abort_in_a_dc_leaf_fails_its_task_alone, .timeout = 240) {
  char param[32];
  crash_param(param, sizeof param, VICTIM * 4 + 2, "abort");
  lt_skel_t *dc = lt_dc("skelk:small", "skelk:halves",
                        lt_seq_with("testk:crash_on", param, strlen(param)), "skelk:cat");
  lineage(lt_skel_param(dc, "cond", "8", 1), 4, 0, "SIGABRT");
}

Test(deadline, kernel_that_never_returns_times_out_and_its_server_comes_back, .timeout = 120) {
  lt_proc_t p[2];
  for (int i = 0; i < 2; i++)
    start_server(&p[i], "supervised", 2);
  const char *opts[] = {"task_timeout_ms", "500", NULL};
  lt_eval_t *ev = eval_on_procs(lt_seq("testk:forever"), p, 2, opts);
  lt_buf_t *b = one_result(ev, 1, READ_MS);
  cr_assert_eq(lt_buf_error(b), LT_ETIMEDOUT, "%s: %s", lt_strerror(lt_buf_error(b)),
               lt_buf_errmsg(b));
  cr_assert_not_null(strstr(lt_buf_errmsg(b), "testk:forever"), "%s", lt_buf_errmsg(b));
  lt_buf_free(b);
  lt_eval_free(ev);
  serves_again(p, 2);
  for (int i = 0; i < 2; i++)
    lt__proc_stop(&p[i], 5000);
}

/* ---- no kernel runs on the server's loop thread (issue 36 item 1) -------------------------
 * One task at a time on a server of 2 idle workers, the way a learnt "short" chain once ran on
 * the loop thread: every kernel runs on a worker, however fast its last runs were. */

/* round_trip submits v alone and waits for its result. */
static lt_buf_t *round_trip(lt_eval_t *ev, int64_t v) {
  unsigned char tok[8];
  put_i64(tok, v);
  cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK);
  lt_buf_t *b = NULL;
  int rc = lt_eval_next_timeout(ev, READ_MS, &b);
  cr_assert_eq(rc, LT_OK, "next: %s", lt_strerror(rc));
  return b;
}

/* timed_inc makes one round trip of v through an evaluator of testk:inc and returns how long
 * it took, in us. */
static double timed_inc(lt_eval_t *ev, int64_t v) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  lt_buf_t *b = round_trip(ev, v);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  cr_assert_eq(lt_buf_error(b), LT_OK, "%s", lt_buf_errmsg(b));
  cr_assert_eq(get_i64(lt_buf_data(b)), v + 1);
  lt_buf_free(b);
  return (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
}

/* incarnation_of copies the incarnation of the one server in ev's stats into buf. */
static void incarnation_of(lt_eval_t *ev, char *buf, size_t len) {
  char *st = stats_of(ev);
  const char *k = strstr(st, "\"incarnation\"");
  cr_assert_not_null(k, "%s", st);
  const char *q = strchr(k + 13, '"');
  cr_assert_not_null(q);
  snprintf(buf, len, "%.16s", q + 1);
  free(st);
}

/* now_us reads CLOCK_MONOTONIC in us. */
static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* A kernel fast 10 times, then 1.5 s long (its time follows its input: the chain a server
 * once learnt "short" and ran on its loop thread): on the loop thread it held every round trip
 * of another session for its 1.5 s. The other session's round trips while it runs are judged
 * against the kernel's own length and against an equally long run of them just before, with
 * nothing else running (a calibration in the same run), never against a constant: none takes
 * half the kernel's time (the calibration's worst must be below that too, or the machine's
 * own hiccups could not be told from a held round trip), and they come at least a quarter as
 * often as in the calibration. A slow machine (a CPU quota holds every thread of the test for
 * the rest of its period, 100 ms; other processes) stretches both runs alike. The long task's
 * result is right, and the server is the same process throughout (same incarnation, no
 * session lost). */
#define STALL_MS 1500
Test(loop, a_slow_run_of_a_fast_kernel_holds_no_other_session, .timeout = 120) {
  lt_proc_t p;
  start_server(&p, "supervised", 2);
  char stall[32];
  snprintf(stall, sizeof stall, "10:%d", STALL_MS);
  lt_eval_t *a =
      eval_on_procs(lt_farm(lt_seq_with("testk:stall_on", stall, strlen(stall))), &p, 1, NULL);
  lt_eval_t *b = eval_on_procs(lt_farm(lt_seq("testk:inc")), &p, 1, NULL);
  int calib = 0;
  double worst_calib = 0, t0 = now_us();
  for (double end = t0 + STALL_MS * 1e3; now_us() < end; calib++) {
    double us = timed_inc(b, calib);
    if (us > worst_calib) worst_calib = us;
  }
  double calib_s = (now_us() - t0) / 1e6;
  double bound = STALL_MS * 1e3 / 2;
  cr_assert_lt(worst_calib, bound,
               "the machine is too slow to tell: a round trip alone took %.0f us", worst_calib);
  char inc0[20], inc1[20];
  incarnation_of(b, inc0, sizeof inc0);
  for (int i = 0; i < 10; i++) {
    lt_buf_t *r = round_trip(a, i);
    cr_assert_eq(lt_buf_error(r), LT_OK, "task %d: %s", i, lt_buf_errmsg(r));
    lt_buf_free(r);
  }
  unsigned char tok[8];
  put_i64(tok, 10);
  cr_assert_eq(lt_eval_submit(a, tok, 8, NULL), LT_OK);
  lt_buf_t *slow = NULL;
  int during = 0;
  double worst = 0;
  t0 = now_us();
  while (lt_eval_next_timeout(a, 0, &slow) == LT_ETIMEDOUT) {
    double us = timed_inc(b, 1000 + during);
    during++;
    if (us > worst) worst = us;
  }
  double during_s = (now_us() - t0) / 1e6;
  cr_assert_eq(lt_buf_error(slow), LT_OK, "%s", lt_buf_errmsg(slow));
  cr_assert_eq(get_i64(lt_buf_data(slow)), 10);
  lt_buf_free(slow);
  cr_log_info("%d round trips of the other session in %.2f s during the kernel, the worst %.0f "
              "us (%d in %.2f s before, the worst %.0f us; bound %.0f us)",
              during, during_s, worst, calib, calib_s, worst_calib, bound);
  cr_assert_lt(worst, bound,
               "a round trip of the other session took %.0f us during the %d ms kernel (the "
               "worst of %d in as long before: %.0f us)",
               worst, STALL_MS, calib, worst_calib);
  cr_assert_geq(4 * during / during_s, calib / calib_s,
                "%d round trips of the other session in %.2f s during the kernel, %d in %.2f s "
                "before",
                during, during_s, calib, calib_s);
  incarnation_of(b, inc1, sizeof inc1);
  cr_assert_str_eq(inc0, inc1, "the server restarted");
  cr_assert_eq(server_stat(b, "completed", 0), (uint64_t)(calib + during));
  lt_eval_free(a);
  lt_eval_free(b);
  lt__proc_stop(&p, 5000);
}

/* A kernel that crashes after 40 fast runs alone is charged the crash alone: its task fails
 * with LT_ECRASH, not retried, and the restarted server serves the rest. */
Test(loop, a_fast_kernel_s_crash_fails_its_task_alone, .timeout = 120) {
  lt_proc_t p;
  start_server(&p, "supervised", 2);
  lt_eval_t *ev = eval_on_procs(lt_farm(lt_seq_with("testk:crash_on", "40:segv", 7)), &p, 1, NULL);
  for (int i = 0; i < 60; i++) {
    lt_buf_t *b = round_trip(ev, i);
    if (i == 40) {
      cr_assert_eq(lt_buf_error(b), LT_ECRASH, "task 40: %s %s", lt_strerror(lt_buf_error(b)),
                   lt_buf_errmsg(b));
      cr_assert_not_null(strstr(lt_buf_errmsg(b), "testk:crash_on"), "%s", lt_buf_errmsg(b));
      cr_assert_not_null(strstr(lt_buf_errmsg(b), "SIGSEGV"), "%s", lt_buf_errmsg(b));
      cr_assert_not_null(strstr(lt_buf_errmsg(b), "not retried"), "%s", lt_buf_errmsg(b));
    } else {
      cr_assert_eq(lt_buf_error(b), LT_OK, "task %d: %s", i, lt_buf_errmsg(b));
      cr_assert_eq(get_i64(lt_buf_data(b)), i);
    }
    lt_buf_free(b);
  }
  lt_eval_free(ev);
  lt__proc_stop(&p, 5000);
}

/* A kernel fast 30 times, then stuck for good: it is stuck on a worker, so the loop's
 * deadline timer fails its task with LT_ETIMEDOUT and recycles the worker process; the same
 * endpoint serves the tasks after it. */
Test(loop, a_fast_kernel_stuck_fails_by_its_deadline, .timeout = 120) {
  lt_proc_t p;
  start_server(&p, "supervised", 2);
  const char *opts[] = {"task_timeout_ms", "500", "heartbeat_ms", "300", NULL};
  lt_eval_t *ev =
      eval_on_procs(lt_farm(lt_seq_with("testk:stall_on", "30:3600000", 10)), &p, 1, opts);
  for (int i = 0; i < 40; i++) {
    lt_buf_t *b = round_trip(ev, i);
    if (i == 30) {
      cr_assert_eq(lt_buf_error(b), LT_ETIMEDOUT, "%s: %s", lt_strerror(lt_buf_error(b)),
                   lt_buf_errmsg(b));
    } else {
      cr_assert_eq(lt_buf_error(b), LT_OK, "task %d: %s", i, lt_buf_errmsg(b));
      cr_assert_eq(get_i64(lt_buf_data(b)), i);
    }
    lt_buf_free(b);
  }
  lt_eval_free(ev);
  lt__proc_stop(&p, 5000);
}

/* A kernel fast 30 times, then long past task_timeout_ms, fails its task with LT_ETIMEDOUT;
 * the tasks after it run. */
Test(loop, a_fast_kernel_run_long_fails_by_its_deadline, .timeout = 120) {
  lt_proc_t p;
  start_server(&p, "supervised", 2);
  const char *opts[] = {"task_timeout_ms", "150", NULL};
  lt_eval_t *ev = eval_on_procs(lt_farm(lt_seq("testk:busy")), &p, 1, opts);
  for (int i = 0; i < 40; i++) {
    lt_buf_t *b = round_trip(ev, i == 30 ? 400 : 0); /* 400 ms of CPU time */
    if (i == 30) {
      cr_assert_eq(lt_buf_error(b), LT_ETIMEDOUT, "%s: %s", lt_strerror(lt_buf_error(b)),
                   lt_buf_errmsg(b));
      cr_assert_not_null(strstr(lt_buf_errmsg(b), "testk:busy"), "%s", lt_buf_errmsg(b));
    } else {
      cr_assert_eq(lt_buf_error(b), LT_OK, "task %d: %s", i, lt_buf_errmsg(b));
    }
    lt_buf_free(b);
  }
  lt_eval_free(ev);
  lt__proc_stop(&p, 5000);
}
