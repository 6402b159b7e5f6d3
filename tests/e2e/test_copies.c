/* test_copies.c: copies of stragglers at any stage (client/backup.c). In a lazy chain
 * farm(pipe(inc, sleep)) with values kept on the servers (inline_max=0), a server made
 * slow by --slowdown holds the second stage of its tasks long after the others are idle;
 * that stage's input is on the slow server, so each copy fetches it from there peer to
 * peer. The first result wins, every result is right and comes once, and nothing is left
 * on any server (the loser's output and the inputs the winning copy left are released).
 * Killed while copies are out, the slow server takes its values with it: the tasks it held
 * run again from the client's input (lineage), and still every result is right and once.
 * A straggling first stage, whose output is named to the successors waiting on its server,
 * cannot be copied: its task runs again from the client's input on an idle server, once,
 * and the old run's records are dropped (reruns). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "harness.h"

#define NTASKS 30

/* start_three starts a server `slowdown` times slower and two of normal speed. */
static void start_three(lt_proc_t p[3], const char *slowdown) {
  const char *slow[] = {"--slowdown", slowdown, NULL};
  start_server_with(&p[0], "slow", 2, slow);
  start_server(&p[1], "fast0", 2);
  start_server(&p[2], "fast1", 2);
}

/* chain_eval runs `prog` on the three servers, copies on, values on the servers, and
 * submits NTASKS tasks. */
static lt_eval_t *chain_eval(const lt_proc_t p[3], lt_skel_t *prog) {
  const char *opts[] = {"backup", "on",           "migrate", "off", "inline_max",
                        "0",      "heartbeat_ms", "1000",    NULL};
  lt_eval_t *ev = eval_on_procs(prog, p, 3, opts);
  submit_i64s(ev, NTASKS);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  return ev;
}

/* last_slow is farm(pipe(inc, sleep 40 ms)): the straggling stage is the last. */
static lt_skel_t *last_slow(void) {
  return lt_farm(lt_pipeline(lt_seq("testk:inc"), lt_seq_with("testk:sleep", "40", 2), NULL));
}

/* read_all reads the NTASKS results, in order, each once: i + `plus` for task i. */
static void read_all(lt_eval_t *ev, int plus) {
  for (int i = 0; i < NTASKS; i++)
    cr_assert_eq(next_i64_within(ev, 60000), i + plus, "result %d", i);
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next_timeout(ev, 1000, &b), LT_ECLOSED, "a result came twice");
}

/* wait_backups waits (up to 60 s) until the client has sent a copy. */
static void wait_backups(lt_eval_t *ev) {
  for (int tries = 0; tries < 1200; tries++) {
    char *json = stats_of(ev);
    uint64_t n = stats_u64(json, "backups");
    free(json);
    if (n > 0) return;
    nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL);
  }
  cr_assert_fail("no copy was sent in 60 s");
}

Test(copies, an_inner_stage_held_on_a_slow_server_gets_copies, .timeout = 240) {
  lt_proc_t p[3];
  start_three(p, "10");
  lt_eval_t *ev = chain_eval(p, last_slow());
  read_all(ev, 1);
  char *json = stats_of(ev);
  cr_assert_eq(stats_u64(json, "tasks_completed"), NTASKS, "%s", json);
  cr_assert_gt(stats_u64(json, "backups"), 0, "%s", json);
  cr_assert_gt(stats_u64(json, "backups_won"), 0, "%s", json);
  cr_assert_gt(stats_sum(json, "bytes_peer_in"), 0, "copies fetched their inputs: %s", json);
  free(json);
  cr_assert_eq(values_held_total(ev), 0, "values left on the servers");
  lt_eval_free(ev);
  for (int i = 0; i < 3; i++)
    lt__proc_stop(&p[i], 5000);
}

Test(copies, a_holder_killed_while_copies_are_out_loses_nothing, .timeout = 240) {
  lt_proc_t p[3];
  start_three(p, "50");
  lt_eval_t *ev = chain_eval(p, last_slow());
  wait_backups(ev);
  cr_assert_eq(kill(p[0].pid, SIGKILL), 0);
  read_all(ev, 1);
  char *json = stats_of(ev);
  cr_assert_eq(stats_u64(json, "tasks_completed"), NTASKS, "%s", json);
  free(json);
  cr_assert_eq(values_held_total(ev), 0, "values left on the live servers");
  lt_eval_free(ev);
  for (int i = 0; i < 3; i++)
    lt__proc_stop(&p[i], 5000);
}

Test(copies, a_straggling_first_stage_has_its_task_run_again, .timeout = 240) {
  lt_proc_t p[3];
  start_three(p, "10");
  lt_eval_t *ev =
      chain_eval(p, lt_farm(lt_pipeline(lt_seq_with("testk:sleep", "40", 2), lt_seq("testk:inc"),
                                        lt_seq("testk:inc"), NULL)));
  read_all(ev, 2);
  char *json = stats_of(ev);
  cr_assert_eq(stats_u64(json, "tasks_completed"), NTASKS, "%s", json);
  cr_assert_gt(stats_u64(json, "reruns"), 0, "%s", json);
  cr_assert_leq(stats_u64(json, "reruns"), NTASKS, "once a task at most: %s", json);
  free(json);
  cr_assert_eq(values_held_total(ev), 0, "values left on the servers");
  lt_eval_free(ev);
  for (int i = 0; i < 3; i++)
    lt__proc_stop(&p[i], 5000);
}
