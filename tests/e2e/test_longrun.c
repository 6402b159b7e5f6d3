/* test_longrun.c: long runs on shared grids. Copies of stragglers (backup=on): a server
 * made 25 times slower by --slowdown holds the last tasks of a farm long after the others
 * are idle; copies on the idle servers finish first, and every result is right and
 * delivered once. Draining a host (lt_eval_remove_host) under load: nothing fails, nothing
 * more goes there, and its session ends; `lithium status` shows the host draining meanwhile. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* run_farm runs n tasks of testk:sleep 30 ms over a slow and two fast servers and returns
 * the stats; every result is checked in order. */
static char *run_farm(const char *backup, int n) {
  lt_proc_t p[3];
  const char *slow[] = {"--slowdown", "25", NULL};
  start_server_with(&p[0], "slow", 2, slow);
  start_server(&p[1], "fast0", 2);
  start_server(&p[2], "fast1", 2);
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_farm(lt_seq_with("testk:sleep", "30", 2))), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "backup", backup), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "migrate", "off"), LT_OK); /* copies alone move work */
  for (int i = 0; i < 3; i++)
    cr_assert_eq(lt_eval_add_host(ev, p[i].endpoint), LT_OK);
  cr_assert_eq(lt_eval_start(ev), LT_OK);
  submit_i64s(ev, n);
  lt_eval_close(ev);
  for (int i = 0; i < n; i++)
    cr_assert_eq(next_i64_within(ev, 60000), i);
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next_timeout(ev, 1000, &b), LT_ECLOSED, "a result came twice");
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  cr_assert_eq(stats_u64(json, "tasks_completed"), (uint64_t)n, "%s", json);
  lt_eval_free(ev);
  for (int i = 0; i < 3; i++)
    lt__proc_stop(&p[i], 5000);
  return json;
}

Test(backup, stragglers_get_copies_and_the_first_result_wins, .timeout = 180) {
  char *json = run_farm("on", 40);
  cr_assert_gt(stats_u64(json, "backups"), 0, "%s", json);
  cr_assert_gt(stats_u64(json, "backups_won"), 0, "%s", json);
  cr_assert_leq(stats_u64(json, "backups_won"), stats_u64(json, "backups"), "%s", json);
  free(json);
}

Test(backup, off_sends_no_copies, .timeout = 180) {
  char *json = run_farm("off", 40);
  cr_assert_eq(stats_u64(json, "backups"), 0, "%s", json);
  free(json);
}

Test(drain, removing_a_host_under_load_loses_nothing, .timeout = 180) {
  lt_proc_t p[3];
  for (int i = 0; i < 3; i++)
    start_server(&p[i], i == 0 ? "leaving" : "staying", 2);
  lt_eval_t *ev = NULL;
  /* A lazy pipeline: values of the leaving server are still needed when it goes. */
  cr_assert_eq(lt_eval_new(&ev, lt_farm(lt_pipeline(lt_seq_with("testk:sleep", "3", 1),
                                                    lt_seq_with("testk:sleep", "3", 1),
                                                    lt_seq("testk:inc"), NULL))),
               LT_OK);
  cr_assert_eq(lt_eval_set(ev, "inline_max", "0"), LT_OK);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(lt_eval_add_host(ev, p[i].endpoint), LT_OK);
  cr_assert_eq(lt_eval_start(ev), LT_OK);
  enum { NT = 600 };
  submit_i64s(ev, NT);
  lt_eval_close(ev);
  for (int i = 0; i < NT; i++) {
    if (i == 100) {
      cr_assert_eq(lt_eval_remove_host(ev, p[0].endpoint), LT_OK);
      cr_assert_eq(lt_eval_remove_host(ev, p[0].endpoint), LT_ENOENT);
    }
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next_timeout(ev, 30000, &b), LT_OK, "result %d", i);
    cr_assert_eq(lt_buf_error(b), LT_OK, "task %d: %s", i, lt_buf_errmsg(b));
    cr_assert_eq(get_i64(lt_buf_data(b)), i + 1);
    lt_buf_free(b);
  }
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  const char *v = strstr(json, p[0].endpoint);
  cr_assert_not_null(v, "%s", json);
  cr_assert_not_null(strstr(v, "\"alive\":false"), "%s", json);
  cr_assert_not_null(strstr(v, "\"removed\":true"), "%s", json);
  cr_assert_not_null(strstr(v, "\"reason\":\"removed\""), "%s", json);
  free(json);
  lt_eval_free(ev);
  for (int i = 0; i < 3; i++)
    lt__proc_stop(&p[i], 5000);
}

/* status_json runs `lithium status --json ENDPOINT` into `out`. */
static void status_json(const char *endpoint, char *out, size_t len) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "'%s' status --json --timeout 5000 '%s'", LT_TEST_TOOL, endpoint);
  FILE *f = popen(cmd, "r");
  cr_assert_not_null(f);
  size_t n = fread(out, 1, len - 1, f);
  out[n] = '\0';
  cr_assert_eq(pclose(f), 0, "lithium status: %s", out);
}

/* wait_status polls the server's status until it contains `want`; the test fails after
 * `ms`. */
static void wait_status(const char *endpoint, const char *want, int ms) {
  char out[8192];
  for (int waited = 0;; waited += 50) {
    status_json(endpoint, out, sizeof out);
    if (strstr(out, want) != NULL) return;
    cr_assert_lt(waited, ms, "no %s in the status: %s", want, out);
    usleep(50 * 1000);
  }
}

/* A host being drained says so in `lithium status` until its running work is done. */
Test(drain, a_draining_host_shows_in_status, .timeout = 120) {
  lt_proc_t p[2];
  start_server(&p[0], "leaving", 2);
  start_server(&p[1], "staying", 2);
  lt_eval_t *ev = eval_on_procs(lt_farm(lt_seq_with("testk:sleep", "5000", 4)), p, 1, NULL);
  submit_i64s(ev, 2);
  lt_eval_close(ev);
  wait_status(p[0].endpoint, "\"active\":2", 10000);
  cr_assert_eq(lt_eval_add_host(ev, p[1].endpoint), LT_OK);
  cr_assert_eq(lt_eval_remove_host(ev, p[0].endpoint), LT_OK);
  wait_status(p[0].endpoint, "\"draining\":1", 4000);
  for (int i = 0; i < 2; i++)
    cr_assert_eq(next_i64_within(ev, 30000), i);
  /* The drained session ends with its last result. */
  wait_status(p[0].endpoint, "\"draining\":0", 10000);
  lt_eval_free(ev);
  for (int i = 0; i < 2; i++)
    lt__proc_stop(&p[i], 5000);
}
