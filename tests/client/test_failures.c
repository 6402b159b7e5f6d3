/* test_failures.c: the failure accounting (client/failures.c) on a hand-built dispatcher
 * state (world.h): entry 0 a session of host 0 that ended (its incarnation 5 crashed, say its
 * successor's welcome), entry 1 that successor, entry 2 another host taking work. One crash
 * verdict per session: the crash policy and the quarantine policy hear the same welcome and
 * take the same crash as theirs or not (a culprit none of what we lost there is nobody's of
 * ours: no charge, no quarantine), and the core settles what the session cost on that
 * verdict: refunded after a crash of ours, counted for good otherwise. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "exec.h"
#include "sched_failures.h"
#include "world.h"

#define SEQ_A 256 /* the instruction of task 7 that was running when the worker crashed */

typedef struct fixture {
  world_t w;
  lt_job_rec_t job;
  lt_instr_rec_t rec; /* SEQ_A, queued again after its loss, its try held */
  lt_tstage_t stage;
  lt_msg_t welcome;
  uint64_t crashed[1];
} fixture_t;

/* setup: quarantine on at its first crash; entry 0 lost SEQ_A (task 7) when its worker
 * crashed; entry 1's welcome names `culprit` (0: none, the listed SEQ_A charged). */
static void setup(fixture_t *f, uint64_t culprit) {
  memset(f, 0, sizeof *f);
  world_init(&f->w);
  cr_assert_eq(lt__options_set(&f->w.opts, "quarantine", "on"), LT_OK);
  cr_assert_eq(lt__options_set(&f->w.opts, "quarantine_crashes", "1"), LT_OK);
  cr_assert_eq(world_policies(&f->w), LT_OK);
  lt_sched_t *s = &f->w.s;
  for (size_t i = 0; i < WORLD_SERVERS; i++) {
    f->w.srv[i].slot.predecessor = -1;
    f->w.srv[i].slot.successor = -1;
    f->w.srv[i].conn.endpoint = "tcp://127.0.0.1:1";
    lt__pace_init(&f->w.srv[i].pace, 4, &f->w.opts, 0);
  }
  f->w.srv[0].conn.state = LT_CONN_DEAD;
  f->w.srv[0].conn.incarnation = 5;
  f->w.srv[0].slot.successor = 1;
  f->w.srv[1].slot.predecessor = 0;
  f->w.srv[2].slot.host = 1;
  f->job.num = 7;
  HASH_ADD(hh, s->jobs, num, sizeof f->job.num, &f->job);
  f->rec = (lt_instr_rec_t){.seq = SEQ_A,
                            .job = &f->job,
                            .op = LT_OP_SEQ,
                            .stages = &f->stage,
                            .nstages = 1,
                            .state = LT_IR_OUT,
                            .conn = 0};
  /* Lost with entry 0's session: its try is charged and held. */
  lt__fail_note_loss(s, 0, &f->rec);
  lt__fail_charge_try(s, &f->rec);
  lt__sched_push_fireable(s, &f->rec, 0);
  f->crashed[0] = SEQ_A;
  f->welcome = (lt_msg_t){.type = LT_MSG_WELCOME};
  f->welcome.u.welcome.crash_signal = 11;
  f->welcome.u.welcome.crashed_incarnation = 5;
  f->welcome.u.welcome.crash_culprit = culprit;
  f->welcome.u.welcome.ncrashed = 1;
  f->welcome.u.welcome.crashed = f->crashed;
}

static void teardown(fixture_t *f) {
  lt__sched_pop_fireable(&f->w.s);
  HASH_CLEAR(hh, f->w.s.jobs);
  for (size_t i = 0; i < WORLD_SERVERS; i++)
    lt__fail_forget(&f->w.s, i);
  world_fini(&f->w);
}

/* asked returns the request of kind k about server idx, or NULL. */
static const lt_req_t *asked(const fixture_t *f, lt_req_kind_t k, size_t idx) {
  const lt_req_queue_t *q = &f->w.s.requests;
  for (size_t i = 0; i < q->n; i++)
    if (q->reqs[i].kind == k && q->reqs[i].server == idx) return &q->reqs[i];
  return NULL;
}

Test(failures, a_culprit_none_of_ours_is_no_crash_for_the_crash_nor_the_quarantine_policy) {
  fixture_t f;
  setup(&f, 999);
  cr_assert_eq(lt__fail_crash_verdict(&f.w.s, 1, &f.welcome), LT_CRASH_FOREIGN);
  uint32_t at = 0;
  cr_assert_null(lt__fail_crash_next(&f.w.s, 1, &f.welcome, &at), "charged to nothing of ours");
  lt__policies_server_ready(&f.w.s, 1, &f.welcome);
  const lt_req_t *l = asked(&f, LT_REQ_LIMIT, 1);
  cr_assert(l == NULL || l->n != 0, "no cool-down for a crash that was not ours");
  for (size_t i = 0; i < f.w.s.requests.n; i++)
    cr_assert_neq(f.w.s.requests.reqs[i].kind, LT_REQ_FAIL, "no task charged");
  teardown(&f);
}

Test(failures, a_crash_of_ours_is_charged_by_both_and_refunds_the_others_tries) {
  fixture_t f;
  setup(&f, SEQ_A);
  cr_assert_eq(lt__fail_crash_verdict(&f.w.s, 1, &f.welcome), LT_CRASH_OURS);
  uint32_t at = 0;
  const lt_loss_t *l = lt__fail_crash_next(&f.w.s, 1, &f.welcome, &at);
  cr_assert_not_null(l);
  cr_assert_eq(l->task, 7);
  cr_assert_null(lt__fail_crash_next(&f.w.s, 1, &f.welcome, &at), "the culprit alone");
  lt__policies_server_ready(&f.w.s, 1, &f.welcome);
  const lt_req_t *q = asked(&f, LT_REQ_LIMIT, 1);
  cr_assert(q != NULL && q->n == 0, "quarantine_crashes=1: a cool-down");
  /* The core settles the session on the same verdict, in the loop's apply phase. */
  lt__fail_session_ended(&f.w.s, 1, &f.welcome);
  q = asked(&f, LT_REQ_SETTLE, 0);
  cr_assert(q != NULL && q->policy == LT_REQ_CORE && q->n == 1);
  cr_assert_eq(f.rec.tries, 1);
  cr_assert_eq(f.w.s.retries, 1);
  lt__sched_apply_requests(&f.w.s);
  cr_assert_eq(f.rec.tries, 0, "a crash's loss is nobody's retry");
  cr_assert_eq(f.rec.tries_held, 0);
  cr_assert_eq(f.w.s.retries, 0);
  cr_assert_eq(f.w.srv[0].slot.nlost, 0, "settled once");
  teardown(&f);
}

Test(failures, a_session_that_did_not_crash_counts_its_tries_for_good) {
  fixture_t f;
  setup(&f, 0);
  f.welcome.u.welcome.crash_signal = 0;
  cr_assert_eq(lt__fail_crash_verdict(&f.w.s, 1, &f.welcome), LT_CRASH_NONE);
  lt__fail_session_ended(&f.w.s, 1, &f.welcome);
  lt__sched_apply_requests(&f.w.s);
  cr_assert_eq(f.rec.tries, 1);
  cr_assert_eq(f.rec.tries_held, 0, "counted toward max_retries now");
  cr_assert_eq(f.w.s.retries, 1);
  cr_assert_eq(f.w.srv[0].slot.crashed, -1);
  teardown(&f);
}

Test(failures, a_settle_a_policy_files_is_ignored) {
  fixture_t f;
  setup(&f, SEQ_A);
  lt__policy_ask(&f.w.s.policies[0], &(lt_req_t){.kind = LT_REQ_SETTLE, .server = 0, .n = 1});
  lt__sched_apply_requests(&f.w.s);
  cr_assert_eq(f.rec.tries, 1, "only the core counts");
  cr_assert_eq(f.rec.tries_held, 1);
  teardown(&f);
}

/* The rule of what a loss does, and its answer one try ahead, on records of one task. */
Test(failures, a_loss_fails_a_task_only_as_the_one_rule_says) {
  fixture_t f;
  setup(&f, 0);
  lt_sched_t *s = &f.w.s;
  uint32_t max = f.w.opts.max_retries;
  lt_instr_rec_t r = {.seq = 2 * SEQ_A, .job = &f.job, .op = LT_OP_SEQ, .conn = 2};
  f.job.input = lt__value_copy("x", 1);
  r.tries = max;
  cr_assert_eq(lt__fail_loss_outcome(s, &r, 0), LT_LOSS_AGAIN);
  cr_assert_eq(lt__fail_loss_outcome(s, &r, 1), LT_LOSS_FAILS);
  cr_assert(lt__fail_would_fail(s, &r));
  r.tries_held = 1; /* one of them lost with a session whose end is not known yet */
  cr_assert_not(lt__fail_would_fail(s, &r));
  /* Its frame went on, its output named to successors there: a loss recomputes the task,
   * whatever its tries, until the task's restarts are spent. */
  r.tries_held = 0;
  r.moved = 1;
  cr_assert_eq(lt__fail_loss_outcome(s, &r, 1), LT_LOSS_RECOMPUTES);
  cr_assert_not(lt__fail_would_fail(s, &r));
  f.job.restarts = max;
  cr_assert(lt__fail_would_fail(s, &r));
  f.job.restarts_held = 1;
  cr_assert_not(lt__fail_would_fail(s, &r));
  lt__value_unref(f.job.input);
  teardown(&f);
}
