/* test_deadline.c: the deadline policy (client/deadline.c) on a hand-built dispatcher state
 * (world.h): three ready servers, no sockets, records put on them by hand. It asks nothing
 * without task_timeout_ms or before the deadline and its grace; past them it takes the
 * instruction back with what waits behind it and stops the server's new work; with no
 * retry left, or no other server to go to, it fails the task with LT_ETIMEDOUT naming the
 * kernel; it waits longer while the server reports work waiting. */
#include <criterion/criterion.h>
#include <string.h>

#include <lithium/error.h>
#include "exec.h"
#include "template.h"
#include "world.h"

typedef struct fixture {
  world_t w;
  lt_policy_t p;
  lt_job_rec_t job;
  lt_tstage_t stage;
  lt_template_t tmpl;
  char *kernels[1];
  lt_instr_rec_t r[2]; /* r[0] runs on server 0, r[1] waits behind it */
} fixture_t;

/* setup: task_timeout_ms `timeout`, 1 s heartbeats (a grace of 2 s), the policy's state and
 * blobs, and two records out on server 0, whose window runs one at a time. */
static void setup(fixture_t *f, const char *timeout) {
  memset(f, 0, sizeof *f);
  world_init(&f->w);
  cr_assert_eq(lt__options_set(&f->w.opts, "task_timeout_ms", timeout), LT_OK);
  f->kernels[0] = "testk:sleep";
  f->tmpl.kernels = f->kernels;
  f->tmpl.nkernels = 1;
  f->w.s.tmpl = &f->tmpl;
  f->p = (lt_policy_t){.ops = &lt__policy_deadline, .s = &f->w.s, .id = 0, .q = &f->w.s.requests};
  f->p.state = calloc(1, lt__policy_deadline.state_size);
  for (size_t i = 0; i < WORLD_SERVERS; i++) {
    f->w.srv[i].blob[0] = calloc(1, lt__policy_deadline.server_size);
    lt__pace_init(&f->w.srv[i].pace, 4, &f->w.opts, 0);
  }
  f->w.srv[0].pace.window = 1;
  f->job.num = 7;
  for (int k = 0; k < 2; k++) {
    f->r[k] = (lt_instr_rec_t){.seq = (uint64_t)(k + 1) * (LT_MAX_PARTS + 1),
                               .job = &f->job,
                               .op = LT_OP_SEQ,
                               .stages = &f->stage,
                               .nstages = 1,
                               .state = LT_IR_QUEUED,
                               .conn = -1};
    lt__sched_put_on(&f->w.s, &f->r[k], 0);
  }
  f->r[0].run_ms = 0;
  cr_assert_eq(f->r[1].run_ms, -1, "a full window is ahead of it");
}

static void teardown(fixture_t *f) {
  lt__policy_deadline.fini(&f->p);
  free(f->p.state);
  for (size_t i = 0; i < WORLD_SERVERS; i++)
    free(f->w.srv[i].blob[0]);
  free(f->w.s.requests.reqs);
  HASH_CLEAR(hh, f->w.s.inflight);
  world_fini(&f->w);
}

/* asked returns the request of kind k about seq (or server, for a limit), or NULL. */
static const lt_req_t *asked(const fixture_t *f, lt_req_kind_t k, uint64_t seq) {
  const lt_req_queue_t *q = &f->w.s.requests;
  for (size_t i = 0; i < q->n; i++)
    if (q->reqs[i].kind == k && (k == LT_REQ_LIMIT ? q->reqs[i].server : q->reqs[i].seq) == seq)
      return &q->reqs[i];
  return NULL;
}

Test(deadline, nothing_is_asked_without_a_deadline_or_before_it) {
  fixture_t f;
  setup(&f, "0");
  lt__policy_deadline.on_tick(&f.p, 1000000);
  cr_assert_eq(f.w.s.requests.n, 0, "task_timeout_ms=0: the servers alone enforce nothing");
  teardown(&f);
  setup(&f, "2000");
  lt__policy_deadline.on_tick(&f.p, 4000); /* 2 s and a grace of 2 heartbeats */
  cr_assert_eq(f.w.s.requests.n, 0);
  teardown(&f);
}

Test(deadline, past_its_deadline_an_instruction_and_what_waits_behind_it_go_elsewhere) {
  fixture_t f;
  setup(&f, "2000");
  lt__policy_deadline.on_tick(&f.p, 4001);
  cr_assert_not_null(asked(&f, LT_REQ_TAKE_BACK, f.r[0].seq));
  cr_assert_not_null(asked(&f, LT_REQ_TAKE_BACK, f.r[1].seq), "it waited on a late server");
  const lt_req_t *l = asked(&f, LT_REQ_LIMIT, 0);
  cr_assert_not_null(l);
  cr_assert_eq(l->n, 0, "a late server gets no new work");
  cr_assert_null(asked(&f, LT_REQ_FAIL, f.r[0].seq));
  teardown(&f);
}

Test(deadline, with_no_retry_left_the_task_fails_etimedout_naming_the_kernel) {
  fixture_t f;
  setup(&f, "2000");
  cr_assert_eq(lt__options_set(&f.w.opts, "max_retries", "0"), LT_OK);
  lt__policy_deadline.on_tick(&f.p, 4001);
  const lt_req_t *q = asked(&f, LT_REQ_FAIL, f.r[0].seq);
  cr_assert_not_null(q);
  cr_assert_eq(q->err, LT_ETIMEDOUT);
  cr_assert_eq(q->task, 7);
  cr_assert_not_null(strstr(q->msg, "testk:sleep: ran longer than 2000 ms"), "%s", q->msg);
  cr_assert_not_null(strstr(q->msg, "did not report in time"), "%s", q->msg);
  teardown(&f);
}

Test(deadline, with_no_other_server_the_task_fails_etimedout) {
  fixture_t f;
  setup(&f, "2000");
  f.w.srv[1].gone = 1; /* the others are dead */
  f.w.srv[2].gone = 1;
  lt__policy_deadline.on_tick(&f.p, 4001);
  cr_assert_not_null(asked(&f, LT_REQ_FAIL, f.r[0].seq));
  cr_assert_null(asked(&f, LT_REQ_TAKE_BACK, f.r[0].seq));
  teardown(&f);
}

/* Servers another policy holds back for a while (a cool-down, another late server's) may
 * take work soon: the task taken back waits for them instead of failing at its first
 * take-back (the simulator's seed 3019804). */
Test(deadline, a_task_waits_for_servers_a_policy_holds_back) {
  fixture_t f;
  setup(&f, "2000");
  f.w.srv[1].limit[1] = 0;
  f.w.srv[2].limit[1] = 0;
  lt__policy_deadline.on_tick(&f.p, 4001);
  cr_assert_null(asked(&f, LT_REQ_FAIL, f.r[0].seq));
  cr_assert_not_null(asked(&f, LT_REQ_TAKE_BACK, f.r[0].seq));
  teardown(&f);
}

Test(deadline, work_waiting_on_the_server_gives_it_four_times_as_long) {
  fixture_t f;
  setup(&f, "2000");
  f.w.srv[0].conn.load.queued = 3; /* other clients' work, maybe ahead of ours */
  lt__policy_deadline.on_tick(&f.p, 16000);
  cr_assert_eq(f.w.s.requests.n, 0);
  lt__policy_deadline.on_tick(&f.p, 16001);
  cr_assert_not_null(asked(&f, LT_REQ_TAKE_BACK, f.r[0].seq));
  teardown(&f);
}

/* Whether one more loss fails the task is the failure accounting's one rule (failures.c,
 * lt__fail_would_fail), the rule a take-back's loss then meets in jobs.c. An instruction whose
 * frame went on (its output named to successors on its server) is never placed again: its
 * loss recomputes the task from its input, whatever its own tries, while the task's restarts
 * last. So it is taken back, not failed (deadline.c's own copy of the rule failed it). */
Test(deadline, a_loss_that_would_recompute_the_task_is_taken_back_not_failed) {
  fixture_t f;
  setup(&f, "2000");
  f.job.input = lt__value_copy("x", 1);
  f.r[0].moved = 1;
  f.r[0].tries = f.w.opts.max_retries;
  lt__policy_deadline.on_tick(&f.p, 4001);
  cr_assert_null(asked(&f, LT_REQ_FAIL, f.r[0].seq));
  cr_assert_not_null(asked(&f, LT_REQ_TAKE_BACK, f.r[0].seq));
  lt__value_unref(f.job.input);
  teardown(&f);
}

/* And the other way: an instruction that reads a value held on its own server cannot run
 * elsewhere, so with the task's restarts spent its loss fails the task: it fails with
 * LT_ETIMEDOUT naming the kernel, not with LT_ELOST after a take-back (deadline.c's copy of the
 * rule looked at the instruction's tries alone). */
Test(deadline, a_loss_that_would_fail_the_task_fails_it_etimedout) {
  fixture_t f;
  setup(&f, "2000");
  f.job.input = lt__value_copy("x", 1);
  f.job.restarts = f.w.opts.max_retries;
  f.r[0].ins = f.r[0].ins_small;
  f.r[0].nins = 1;
  lt__holder_set(&f.w.s, &f.r[0].ins[0], 0);
  lt__policy_deadline.on_tick(&f.p, 4001);
  const lt_req_t *q = asked(&f, LT_REQ_FAIL, f.r[0].seq);
  cr_assert_not_null(q);
  cr_assert_eq(q->err, LT_ETIMEDOUT);
  cr_assert_null(asked(&f, LT_REQ_TAKE_BACK, f.r[0].seq));
  lt__value_unref(f.job.input);
  teardown(&f);
}
