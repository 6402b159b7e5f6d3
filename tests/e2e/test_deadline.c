/* test_deadline.c: the client enforces task_timeout_ms and gives up a silent server, against
 * a hostile stand-in (hostile.c: a raw ZeroMQ ROUTER speaking the protocol) alone or beside
 * a real lithium-server (issue 22, item 9). A server that answers heartbeats but never
 * completes its work loses it within task_timeout_ms and a grace, and its tasks complete on
 * the healthy server or fail LT_ETIMEDOUT, far below the watchdog's minute; a server that
 * says nothing after its welcome is given up, and its tasks finish or fail within
 * connect_timeout_ms and its 3 missed heartbeats, without cycles of greetings. Every read
 * has a deadline; every process and thread started here is stopped. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "hostile.h"

#define N 20

typedef lt_hostile_run_t run_t;

/* run_right submits n tasks, expects every result right and returns the time taken (ms). */
static int64_t run_right(run_t *r, int n) {
  int64_t t0 = mono_ms();
  submit_i64s(r->ev, n);
  lt_eval_close(r->ev);
  for (int i = 0; i < n; i++)
    cr_assert_eq(next_i64_within(r->ev, 15000), i);
  return mono_ms() - t0;
}

/* run_failing submits n tasks, expects every one to fail, counts their errors that are
 * `want` and returns the time taken (ms); `msg` gets the last message. Errors other than
 * `want` and `also` fail the test. */
static int64_t run_failing(run_t *r, int n, int want, int also, int *nwant, char *msg, size_t len) {
  int64_t t0 = mono_ms();
  submit_i64s(r->ev, n);
  lt_eval_close(r->ev);
  *nwant = 0;
  for (int i = 0; i < n; i++) {
    lt_buf_t *b = NULL;
    int rc = lt_eval_next_timeout(r->ev, 15000, &b);
    cr_assert_eq(rc, LT_OK, "no result: %s", lt_strerror(rc));
    int err = lt_buf_error(b);
    snprintf(msg, len, "%s", lt_buf_errmsg(b));
    lt_buf_free(b);
    cr_assert(err == want || err == also, "task %d: %s: %s", i, lt_strerror(err), msg);
    *nwant += err == want;
  }
  return mono_ms() - t0;
}

static uint64_t eval_stat(lt_eval_t *ev, const char *key) {
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  uint64_t v = stats_u64(json, key);
  free(json);
  return v;
}

/* ---- a server that keeps its work --------------------------------------------------- */

Test(deadline, work_held_past_the_deadline_runs_on_the_healthy_server, .timeout = 120) {
  /* The deadline is 2 s and a grace of 2 heartbeats; the watchdog waits at least 5. */
  const char *opts[] = {"task_timeout_ms", "2000", "heartbeat_ms", "1000", NULL};
  run_t r;
  hostile_run_start(&r, LT_HOSTILE_KEEPS, 1, lt_farm(lt_seq_with("testk:sleep", "200", 1)), opts);
  int64_t took = run_right(&r, N);
  cr_assert_lt(took, 15000, "took %lld ms", (long long)took);
  cr_assert_gt(eval_stat(r.ev, "deadline_misses"), 0);
  hostile_run_stop(&r);
}

Test(deadline, a_task_no_server_reports_fails_etimedout, .timeout = 120) {
  const char *opts[] = {"task_timeout_ms", "1000", "heartbeat_ms", "200", NULL};
  run_t r;
  hostile_run_start(&r, LT_HOSTILE_KEEPS, 0, lt_farm(lt_seq_with("testk:sleep", "10", 1)), opts);
  char msg[512];
  int timedout;
  int64_t took = run_failing(&r, 2, LT_ETIMEDOUT, LT_ETIMEDOUT, &timedout, msg, sizeof msg);
  cr_assert_not_null(strstr(msg, "testk:sleep"), "%s", msg);
  cr_assert_not_null(strstr(msg, "did not report in time"), "%s", msg);
  cr_assert_geq(took, 1000, "took %lld ms", (long long)took);
  cr_assert_lt(took, 6000, "took %lld ms", (long long)took);
  hostile_run_stop(&r);
}

Test(deadline, a_stream_on_a_server_that_never_reports_ends_in_bounded_time, .timeout = 120) {
  const char *opts[] = {
      "task_timeout_ms", "1000", "heartbeat_ms", "200", "connect_timeout_ms", "2000", NULL};
  run_t r;
  hostile_run_start(&r, LT_HOSTILE_KEEPS, 0, lt_farm(lt_seq_with("testk:sleep", "10", 1)), opts);
  /* What ran there times out; what waited behind it finds no server to take it. */
  char msg[512];
  int timedout;
  int64_t took = run_failing(&r, N, LT_ETIMEDOUT, LT_ENOSERVER, &timedout, msg, sizeof msg);
  cr_assert_gt(timedout, 0);
  cr_assert_lt(took, 10000, "took %lld ms", (long long)took);
  hostile_run_stop(&r);
}

/* ---- a server silent after its welcome ---------------------------------------------- */

/* 3 heartbeats of 500 ms to find it silent, connect_timeout_ms of 2 s with no server. */
#define SILENT_BOUND_MS (1500 + 2000 + 2500)

Test(silent, a_mute_server_alone_fails_its_tasks_within_the_connect_timeout, .timeout = 120) {
  const char *opts[] = {"heartbeat_ms", "500", "connect_timeout_ms", "2000", NULL};
  run_t r;
  hostile_run_start(&r, LT_HOSTILE_MUTE, 0, lt_farm(lt_seq_with("testk:sleep", "10", 1)), opts);
  char msg[512];
  int noserver;
  int64_t took = run_failing(&r, N, LT_ENOSERVER, LT_ENOSERVER, &noserver, msg, sizeof msg);
  cr_assert_lt(took, SILENT_BOUND_MS, "took %lld ms", (long long)took);
  /* Greeted again, on probation: its later sessions never spoke, so they got no work. */
  cr_assert_gt(atomic_load(&r.h.welcomes), 1, "the silent server was not greeted again");
  cr_assert_eq(atomic_load(&r.h.reworks), 0, "a later silent session got work");
  hostile_run_stop(&r);
}

Test(silent, work_of_a_mute_server_runs_on_the_healthy_one, .timeout = 120) {
  const char *opts[] = {"heartbeat_ms", "500", "connect_timeout_ms", "2000", NULL};
  run_t r;
  /* The run outlasts the 3 heartbeats that find the stand-in silent. */
  hostile_run_start(&r, LT_HOSTILE_MUTE, 1, lt_farm(lt_seq_with("testk:sleep", "200", 1)), opts);
  int64_t took = run_right(&r, N);
  cr_assert_lt(took, SILENT_BOUND_MS, "took %lld ms", (long long)took);
  cr_assert_gt(eval_stat(r.ev, "retries"), 0, "the silent server got no work");
  /* Greeted again after its silent session ended, on probation: no work went there. */
  struct timespec pause = {.tv_sec = 1};
  nanosleep(&pause, NULL);
  cr_assert_gt(atomic_load(&r.h.welcomes), 1, "the silent server was not greeted again");
  cr_assert_eq(atomic_load(&r.h.reworks), 0, "a later silent session got work");
  hostile_run_stop(&r);
}
