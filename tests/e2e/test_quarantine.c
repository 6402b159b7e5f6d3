/* test_quarantine.c: flaky hosts get a cool-down (the quarantine policy, client/quarantine.c,
 * issue "One core for the dispatcher"). A supervised server whose worker aborts on every
 * call, beside two healthy ones: every task's result is right (no task fails for the
 * host's crashes), the host is quarantined, gets no new work, and the stats say so; with
 * quarantine=off the stats still carry the keys, false and 0. The last server taking work is
 * spared its cool-down: a poison task that crashes the only server fails alone, LT_ECRASH,
 * and the others' results come (they used to fail LT_ENOSERVER after connect_timeout_ms). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define READ_MS 60000
#define BAD_ENV "LT_TEST_FLAKY_HOST"

/* start_flaky starts a server whose kernels see BAD_ENV set: testk:abort_if aborts there. */
static void start_flaky(lt_proc_t *p) {
  cr_assert_eq(setenv(BAD_ENV, "1", 1), 0);
  start_server(p, "flaky", 2);
  cr_assert_eq(unsetenv(BAD_ENV), 0);
}

/* check_next reads the next result and checks it: i + 1. */
static void check_next(lt_eval_t *ev, int i) {
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next_timeout(ev, READ_MS, &b), LT_OK, "result %d", i);
  cr_assert_eq(lt_buf_error(b), LT_OK, "task %d: %s: %s", i, lt_strerror(lt_buf_error(b)),
               lt_buf_errmsg(b));
  cr_assert_eq(get_i64(lt_buf_data(b)), i + 1, "task %d", i);
  lt_buf_free(b);
}

/* run_all submits n tasks and checks every result. */
static void run_all(lt_eval_t *ev, int n) {
  submit_i64s(ev, n);
  lt_eval_close(ev);
  for (int i = 0; i < n; i++)
    check_next(ev, i);
}

Test(quarantine, a_host_whose_every_call_aborts_fails_no_task, .timeout = 240) {
  lt_proc_t p[3];
  start_server(&p[0], "good1", 2);
  start_server(&p[1], "good2", 2);
  start_flaky(&p[2]);
  const char *opts[] = {"heartbeat_ms", "300", NULL};
  lt_eval_t *ev =
      eval_on_procs(lt_farm(lt_seq_with("testk:abort_if", BAD_ENV, strlen(BAD_ENV))), p, 3, opts);
  /* Rounds of tasks, every result checked, until the host is quarantined: each round
   * gives the flaky host, when it is back after its last crash, work to crash on. For 90 s
   * at most (it takes 3 crashes, a few hundred ms each). */
  enum { ROUND = 40, ROUNDS = 3000 };
  int64_t next = 0;
  uint64_t quarantines = 0;
  unsigned char tok[8];
  for (int round = 0; round < ROUNDS && quarantines == 0; round++) {
    for (int k = 0; k < ROUND; k++) {
      put_i64(tok, next + k);
      cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK);
    }
    for (int k = 0; k < ROUND; k++)
      check_next(ev, (int)next + k);
    next += ROUND;
    char *json = stats_of(ev);
    quarantines = stats_u64(json, "quarantines");
    free(json);
    struct timespec pause = {0, 30 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  cr_assert_geq(quarantines, 1, "the flaky host was never quarantined");
  /* Quarantined, it gets no new work: the rest runs on the healthy two, all right. */
  char *before = stats_of(ev);
  uint64_t lost_before = stats_u64(before, "retries");
  cr_expect_not_null(strstr(before, "\"quarantined\":true"), "%s", before);
  free(before);
  for (int k = 0; k < ROUND; k++) {
    put_i64(tok, next + k);
    cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK);
  }
  lt_eval_close(ev);
  for (int k = 0; k < ROUND; k++)
    check_next(ev, (int)next + k);
  char *after = stats_of(ev);
  cr_expect_eq(stats_u64(after, "retries"), lost_before, "nothing lost while quarantined: %s",
               after);
  free(after);
  lt_eval_free(ev);
  for (int i = 0; i < 3; i++)
    lt__proc_stop(&p[i], 5000);
}

Test(quarantine, off_keeps_the_stats_keys, .timeout = 120) {
  lt_proc_t p[2];
  start_server(&p[0], "good1", 2);
  start_server(&p[1], "good2", 2);
  const char *opts[] = {"quarantine", "off", NULL};
  lt_eval_t *ev =
      eval_on_procs(lt_farm(lt_seq_with("testk:abort_if", BAD_ENV, strlen(BAD_ENV))), p, 2, opts);
  run_all(ev, 20);
  char *json = stats_of(ev);
  cr_expect_eq(stats_u64(json, "quarantines"), 0, "%s", json);
  cr_expect_not_null(strstr(json, "\"quarantined\":false"), "%s", json);
  free(json);
  lt_eval_free(ev);
  for (int i = 0; i < 2; i++)
    lt__proc_stop(&p[i], 5000);
}

Test(quarantine, the_only_server_is_spared_its_cool_down, .timeout = 120) {
  lt_proc_t p;
  start_server(&p, "alone", 2);
  const char *opts[] = {"quarantine_crashes", "1", "connect_timeout_ms", "1000", NULL};
  lt_eval_t *ev = eval_on_procs(lt_farm(lt_seq_with("testk:crash_on", "5", 1)), &p, 1, opts);
  enum { N = 20 };
  submit_i64s(ev, N);
  lt_eval_close(ev);
  for (int i = 0; i < N; i++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next_timeout(ev, READ_MS, &b), LT_OK, "result %d", i);
    if (i == 5) {
      cr_assert_eq(lt_buf_error(b), LT_ECRASH, "task 5: %s", lt_buf_errmsg(b));
    } else {
      cr_assert_eq(lt_buf_error(b), LT_OK, "task %d: %s: %s", i, lt_strerror(lt_buf_error(b)),
                   lt_buf_errmsg(b));
      cr_assert_eq(get_i64(lt_buf_data(b)), i, "task %d", i);
    }
    lt_buf_free(b);
  }
  char *json = stats_of(ev);
  cr_assert_eq(stats_u64(json, "quarantines"), 0, "%s", json);
  free(json);
  lt_eval_free(ev);
  lt__proc_stop(&p, 5000);
}
