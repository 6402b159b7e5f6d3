/* test_jobs.c: how a completion ends its task (client/jobs.c), on a hand-built dispatcher
 * state: three ready servers, no sockets, the real records, instance and template of
 * farm(testk:inc) under lazy binding. A completion whose input was not found where it was to
 * be read (LT_ENOENT: "no object ... on peer", a holder that restarted or dropped it) is a
 * loss: the task starts again from its input under a new generation, while retries remain,
 * and fails with LT_ELOST once they are spent; a failure of the kernel itself fails the task
 * with the kernel's error. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "exec.h"
#include "world.h"

#define CLIENT 0x1234

/* A world with one task of farm(testk:inc) fed, its one instruction taken from the queue and
 * put on server 1. */
typedef struct one_task {
  world_t w;
  lt_template_t *tmpl;
  lt_task_t *task;
  lt_job_rec_t *job;
} one_task_t;

/* put_out takes the queued record of f's task and puts it out on server idx. */
static lt_instr_rec_t *put_out(one_task_t *f, int idx) {
  lt_instr_rec_t *r = lt__sched_pop_fireable(&f->w.s);
  cr_assert_not_null(r, "the task's instruction is queued");
  cr_assert_eq(r->gen, f->job->gen);
  lt__sched_put_on(&f->w.s, r, idx);
  return r;
}

static void setup(one_task_t *f) {
  world_init(&f->w);
  f->w.s.client_id = CLIENT;
  lt_skel_t *prog = lt_farm(lt_seq("testk:inc"));
  cr_assert_eq(lt__template_compile(&f->tmpl, prog, 0), LT_OK);
  lt_skel_free(prog);
  f->w.s.tmpl = f->tmpl;
  f->task = calloc(1, sizeof *f->task);
  f->job = calloc(1, sizeof *f->job);
  cr_assert(f->task != NULL && f->job != NULL);
  f->job->task = f->task;
  f->job->input = lt__value_copy("\x01\0\0\0\0\0\0\0", 8);
  cr_assert_eq(lt__instance_new(&f->job->inst, f->tmpl, 0), LT_OK);
  f->job->inst->user = f->job;
  HASH_ADD(hh, f->w.s.jobs, num, sizeof f->job->num, f->job);
  cr_assert_eq(lt__instance_feed(f->job->inst, f->job->input, lt__sched_on_fire, &f->w.s), LT_OK);
}

/* job_of returns f's job while the dispatcher keeps it (freed once finished and settled). */
static lt_job_rec_t *job_of(one_task_t *f) {
  lt_job_rec_t *j = NULL;
  uint64_t num = 0;
  HASH_FIND(hh, f->w.s.jobs, &num, sizeof num, j);
  return j;
}

/* teardown ends what is left (its records go, the task fails) and frees the world. */
static void teardown(one_task_t *f) {
  lt_instr_rec_t *r;
  while ((r = f->w.s.fire_head) != NULL)
    lt__sched_end(&f->w.s, r, LT_END_ABORTED, NULL, NULL, LT_ECANCELED, "test over");
  cr_assert_null(job_of(f), "the job went with its last record");
  cr_assert_eq(f->w.s.done_head, f->task, "its result waits for delivery");
  lt_buf_free(f->task->result);
  free(f->task);
  for (size_t i = 0; i < WORLD_SERVERS; i++)
    free(f->w.srv[i].relq.ids);
  lt__template_free(f->tmpl);
  world_fini(&f->w);
}

/* complete ends r with a completion of `status` from its server. */
static void complete(one_task_t *f, lt_instr_rec_t *r, int status, const char *msg) {
  lt_completion_t cp = {.seq = r->seq, .status = status, .errmsg = msg};
  lt_msg_t m = {.type = LT_MSG_DONE};
  lt__sched_end(&f->w.s, r, status == LT_OK ? LT_END_DONE : LT_END_FAILED, &cp, &m, status, msg);
}

Test(jobs, an_input_not_found_restarts_the_task_until_retries_run_out) {
  one_task_t f;
  setup(&f);
  uint32_t retries = f.w.opts.max_retries;
  const char *gone = "input 0 (1234:1): no object 1234:1 on peer tcp://127.0.0.1:9";
  for (uint32_t k = 0; k < retries; k++) {
    complete(&f, put_out(&f, 1), LT_ENOENT, gone);
    cr_assert_not_null(job_of(&f), "lost %u times: started again, not failed", k + 1);
    cr_assert_eq(job_of(&f)->gen, k + 1, "a new generation from the task's input");
    cr_assert_null(f.w.s.done_head, "no result yet");
  }
  complete(&f, put_out(&f, 1), LT_ENOENT, gone);
  cr_assert_null(job_of(&f), "retries spent: the task is over");
  cr_assert_eq(f.w.s.done_head, f.task);
  cr_assert_eq(lt_buf_error(f.task->result), LT_ELOST, "%s", lt_buf_errmsg(f.task->result));
  teardown(&f);
}

Test(jobs, a_kernel_s_failure_fails_its_task) {
  one_task_t f;
  setup(&f);
  complete(&f, put_out(&f, 2), LT_EKERNEL, "inc: expected 8 bytes");
  cr_assert_null(job_of(&f));
  cr_assert_eq(f.w.s.done_head, f.task);
  cr_assert_eq(lt_buf_error(f.task->result), LT_EKERNEL);
  cr_assert_str_eq(lt_buf_errmsg(f.task->result), "inc: expected 8 bytes");
  teardown(&f);
}

/* A completion tells its server's noise how much later than its service time it came after
 * the client saw its instruction start (client/jobs.c, note_lag): 20 ms after the start, of
 * which 1 ms ran and 1 ms is the clock's resolution, is 18 ms of delay; one that came as
 * soon as it ran is none. */
Test(jobs, a_completion_later_than_its_service_time_is_noise) {
  one_task_t f;
  setup(&f);
  lt_instr_rec_t *r = put_out(&f, 1);
  int64_t now = lt__clock_ms();
  r->run_ms = now - 20;
  lt_completion_t cp = {.seq = r->seq, .status = LT_OK, .errmsg = "", .service_us = 1000};
  lt_msg_t m = {.type = LT_MSG_DONE};
  lt__sched_end(&f.w.s, r, LT_END_DONE, &cp, &m, LT_OK, NULL);
  double noise = lt__pace_noise_us(&f.w.srv[1].pace, f.w.srv[1].pace.noise_ms);
  cr_assert_geq(noise, 18000.0, "%f", noise);
  cr_assert_lt(noise, 18000.0 + 1000.0 * (double)(lt__clock_ms() - now) + 1, "%f", noise);
  cr_assert_float_eq(f.w.srv[2].pace.noise_us, 0.0, 1e-9, "no other server's");
  teardown(&f);
}
