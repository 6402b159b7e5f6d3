/* test_contain.c: one bad kernel never takes the servers down (issue "containment"), with
 * supervised lithium-server processes: a kernel that segfaults or aborts on one input of a
 * farm fails that task alone with LT_ECRASH naming the kernel and the signal, every other
 * result is right, and the same endpoints serve the next evaluation; so does one that
 * aborts or faults as the second stage of a lazy pipeline, in a map body and in a dc leaf,
 * where values of every task stay on the servers it takes down (crash charging across
 * lineage, issue 21 item 4); a kernel that never returns fails its task with LT_ETIMEDOUT
 * under task_timeout_ms, and its server, recycled, serves again. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- kernels run on the server's loop thread (issue 24, fewer hand-offs) -------------------
 * One task at a time on a server of 2 idle workers: after a few runs the server runs a short
 * chain's kernel on its loop thread instead of a worker. */

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

/* A kernel that crashes on the loop thread is charged the crash alone, as on a worker: its
 * task fails with LT_ECRASH, not retried, and the restarted server serves the rest. */
Test(inline, crash_on_the_loop_thread_fails_its_task_alone, .timeout = 120) {
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

/* A kernel that never returns on the loop thread (fast 30 times, then stuck): the loop's own
 * timer is stuck with it, so the sentinel thread recycles the worker process after
 * LT_INLINE_STUCK_MS; the task runs again on the restarted server, on a worker this time,
 * and fails with LT_ETIMEDOUT; the same endpoint serves the tasks after it. */
Test(inline, a_kernel_stuck_on_the_loop_thread_recycles_the_server, .timeout = 120) {
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

/* A kernel that runs long on the loop thread (no deadline tick can interrupt it) still fails
 * its task with LT_ETIMEDOUT when it returns past task_timeout_ms; the tasks after it run. */
Test(inline, deadline_holds_on_the_loop_thread, .timeout = 120) {
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
