/* test_misreport.c: a server whose packed completions do not match what was sent (issue 36,
 * item 2), against a hostile stand-in (hostile.c) that answers each pack with the wrong
 * shape (a member named twice, one missing, ids of nothing sent), claiming every member it
 * names done with a wrong value. The client takes none of it: the stand-in is dropped for a
 * protocol error (dead, not greeted again), its work runs on the real server beside it and
 * every result is right, well within task_timeout_ms and its grace; alone, every task ends
 * with an error by then, none with the stand-in's value. farm(dbl), 64 tasks, grain=8,
 * task_timeout_ms=3000. And a stand-in that says it sent a done the client never got: its
 * session ends at once and its work runs on the real server, with no deadline set. Every
 * process and thread started here is stopped. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "hostile.h"

#define N 64
/* task_timeout_ms, its grace (2 heartbeats of 1 s, at least 1 s: deadline.c) and a margin
 * for a loaded machine: the old client took 26 s (the deadline times the grain) or more. */
#define TIMEOUT_MS 3000
#define BOUND_MS   (TIMEOUT_MS + 2000 + 7000)

static const char *const opts[] = {"grain", "8", "task_timeout_ms", "3000", NULL};

typedef lt_hostile_run_t run_t;

/* left_ms is what is left of the bound that started at t0 (at least 1 ms). */
static int left_ms(int64_t t0) {
  int64_t left = BOUND_MS - (mono_ms() - t0);
  return left > 0 ? (int)left : 1;
}

/* assert_dropped checks that the stand-in sent packs, was dropped for a protocol error and
 * was greeted once only. */
static void assert_dropped(run_t *r) {
  char *json = stats_of(r->ev);
  cr_assert_gt(atomic_load(&r->h.packs), 0, "the stand-in got no pack: %s", json);
  cr_assert_geq(stats_u64(json, "protocol_errors"), 1, "%s", json);
  const char *at = strstr(json, r->h.endpoint);
  cr_assert_not_null(at, "%s", json);
  const char *state = strstr(at, "\"state\":\"dead\"");
  const char *why = strstr(at, "\"reason\":\"protocol error: ");
  cr_assert(state != NULL && why != NULL, "the stand-in is not dropped: %s", json);
  free(json);
  cr_assert_eq(atomic_load(&r->h.welcomes), 1, "the stand-in was greeted again");
}

/* wait_for waits until the stand-in's counter `v` reaches `n`; the test fails with `what`
 * once the bound that started at t0 is over. */
static void wait_for(atomic_int *v, int n, int64_t t0, const char *what) {
  while (atomic_load(v) < n) {
    cr_assert_lt(mono_ms() - t0, BOUND_MS, "%s", what);
    struct timespec pause = {.tv_nsec = 5000000};
    nanosleep(&pause, NULL);
  }
}

/* beside_an_honest_server: every result right (2 i), in order, within the bound. The real
 * server joins once the stand-in has misreported a pack, so that it cannot take all the
 * work first. */
static void beside_an_honest_server(lt_hostile_mode_t mode) {
  run_t r;
  hostile_run_start(&r, mode, 0, lt_farm(lt_seq("testk:dbl")), opts);
  start_server(&r.p, "honest", 2);
  r.honest = 1;
  int64_t t0 = mono_ms();
  submit_i64s(r.ev, N);
  lt_eval_close(r.ev);
  wait_for(&r.h.packs, 1, t0, "the stand-in got no pack");
  cr_assert_eq(lt_eval_add_host(r.ev, r.p.endpoint), LT_OK);
  for (int i = 0; i < N; i++)
    cr_assert_eq(next_i64_within(r.ev, left_ms(t0)), 2 * i, "task %d", i);
  int64_t took = mono_ms() - t0;
  cr_assert_lt(took, BOUND_MS, "took %lld ms", (long long)took);
  /* Its work went elsewhere when it misreported, not once held past a deadline (the old
   * client's watchdog took it back after 5 heartbeats). */
  char *json = stats_of(r.ev);
  cr_assert_eq(stats_u64(json, "overdue"), 0, "%s", json);
  free(json);
  assert_dropped(&r);
  hostile_run_stop(&r);
}

/* alone: every task ends with an error within the bound, none with the stand-in's value. */
static void alone(lt_hostile_mode_t mode) {
  run_t r;
  hostile_run_start(&r, mode, 0, lt_farm(lt_seq("testk:dbl")), opts);
  int64_t t0 = mono_ms();
  submit_i64s(r.ev, N);
  lt_eval_close(r.ev);
  for (int i = 0; i < N; i++) {
    lt_buf_t *b = NULL;
    int rc = lt_eval_next_timeout(r.ev, left_ms(t0), &b);
    cr_assert_eq(rc, LT_OK, "task %d: no end within %d ms: %s", i, BOUND_MS, lt_strerror(rc));
    int err = lt_buf_error(b);
    int64_t v = err == LT_OK && lt_buf_len(b) == 8 ? get_i64(lt_buf_data(b)) : 0;
    lt_buf_free(b);
    cr_assert_neq(err, LT_OK, "task %d: a result (%lld) with no honest server", i, (long long)v);
  }
  assert_dropped(&r);
  hostile_run_stop(&r);
}

/* The three shapes: a member named twice, one missing, ids of nothing sent. */
static lt_hostile_mode_t shapes[] = {LT_HOSTILE_PACK_TWICE, LT_HOSTILE_PACK_SHORT,
                                     LT_HOSTILE_PACK_UNKNOWN};

ParameterizedTestParameters(misreport, each_shape_drops_the_server) {
  return cr_make_param_array(lt_hostile_mode_t, shapes, sizeof shapes / sizeof shapes[0]);
}

ParameterizedTest(lt_hostile_mode_t *mode, misreport, each_shape_drops_the_server, .timeout = 120) {
  beside_an_honest_server(*mode);
}

ParameterizedTestParameters(misreport, alone_each_shape_ends_every_task) {
  return cr_make_param_array(lt_hostile_mode_t, shapes, sizeof shapes / sizeof shapes[0]);
}

ParameterizedTest(lt_hostile_mode_t *mode, misreport, alone_each_shape_ends_every_task,
                  .timeout = 120) {
  alone(*mode);
}

/* A server that says, in its heartbeat answers, that it sent a done the client never got (a
 * send it failed, a message dropped on the way): the client ends that session at the first
 * such answer and runs its work on the honest server, with no deadline set and no overdue
 * rule taking the work back (the stand-in's load reports show it computing, so without the
 * count the run would wait for ever). Every result is right; `lost_dones` counts the loss;
 * the stand-in is greeted again, not dropped (a loss is no proof of a lie). */
Test(misreport, a_done_that_never_arrived_ends_the_session, .timeout = 120) {
  static const char *const no_deadline[] = {"heartbeat_ms", "200", NULL};
  run_t r;
  hostile_run_start(&r, LT_HOSTILE_LOSES, 0, lt_farm(lt_seq("testk:dbl")), no_deadline);
  int64_t t0 = mono_ms();
  submit_i64s(r.ev, N);
  lt_eval_close(r.ev);
  wait_for(&r.h.kept, 1, t0, "the stand-in got no work");
  start_server(&r.p, "honest", 2);
  r.honest = 1;
  cr_assert_eq(lt_eval_add_host(r.ev, r.p.endpoint), LT_OK);
  for (int i = 0; i < N; i++)
    cr_assert_eq(next_i64_within(r.ev, left_ms(t0)), 2 * i, "task %d", i);
  char *json = stats_of(r.ev);
  cr_assert_geq(stats_u64(json, "lost_dones"), 1, "%s", json);
  cr_assert_eq(stats_u64(json, "overdue"), 0, "%s", json);
  cr_assert_eq(stats_u64(json, "protocol_errors"), 0, "%s", json);
  cr_assert_not_null(strstr(json, "of its done messages never arrived"), "%s", json);
  free(json);
  wait_for(&r.h.welcomes, 2, t0, "the stand-in was not greeted again");
  hostile_run_stop(&r);
}
