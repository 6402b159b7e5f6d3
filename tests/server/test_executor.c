/* test_executor.c: the worker pool alone, with kernels of the test module testk: results
 * and service times come back on the loop thread, fused stages and splits run whole,
 * failures carry the kernel's message, queued jobs can be canceled and running ones cannot,
 * the active/queued counters move, and the slowdown emulation stretches service time. No
 * kernel runs on the loop thread, however fast its chain's last runs were; lone jobs hand off
 * hot by budgets from what the run measured, never from a machine's speed. Each test closes
 * its loop. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <lithium/error.h>
#include "executor.h"
#include "module.h"

typedef struct fixture {
  uv_loop_t loop;
  lt_modules_t *mods;
  lt_executor_t *ex;
  int ndone;
  int ncalls;
  int want;
  lt_job_t *order[256];
} fixture_t;

static void on_done(lt_executor_t *ex, lt_job_t *done, void *data) {
  (void)ex;
  fixture_t *f = data;
  f->ncalls++;
  for (lt_job_t *j = done; j != NULL; j = j->next) {
    cr_assert_lt(f->ndone, 256);
    f->order[f->ndone++] = j;
  }
  if (f->ndone >= f->want) uv_stop(&f->loop);
}

/* stage resolves `name` into a one-kernel stage with parameter `param` (may be NULL). */
static lt_exec_stage_t stage(fixture_t *f, const char *name, const char *param) {
  lt_exec_stage_t st = {.name = name, .param = {param, param ? strlen(param) : 0}};
  char err[512];
  cr_assert_eq(lt__modules_resolve(f->mods, name, &st.fn, err, sizeof err), LT_OK, "%s", err);
  return st;
}

static void job_init(lt_job_t *j, const lt_exec_stage_t *st, uint32_t nst, const lt_bytes_t *in,
                     uint32_t nin) {
  memset(j, 0, sizeof *j);
  j->op = LT_OP_SEQ;
  j->stages = st;
  j->nstages = nst;
  j->inputs = in;
  j->ninputs = nin;
}

static void setup(fixture_t *f, int threads, double slowdown) {
  memset(f, 0, sizeof *f);
  cr_assert_eq(uv_loop_init(&f->loop), 0);
  cr_assert_eq(lt__modules_new(&f->mods), LT_OK);
  cr_assert_eq(lt__modules_add_dir(f->mods, LT_TEST_MODULES), LT_OK);
  cr_assert_eq(lt__executor_new(&f->ex, &f->loop, threads, slowdown, on_done, f), LT_OK);
  cr_assert_eq(lt__executor_threads(f->ex), threads);
}

/* run_until runs the loop until `want` jobs came back, with a 10 s safety timer. */
static void on_timeout(uv_timer_t *t) {
  (void)t;
  cr_assert_fail("executor test timed out");
}

static void run_until(fixture_t *f, int want) {
  f->want = want;
  uv_timer_t t;
  uv_timer_init(&f->loop, &t);
  uv_timer_start(&t, on_timeout, 10000, 0);
  if (f->ndone < want) uv_run(&f->loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(&f->loop, UV_RUN_NOWAIT);
}

static void teardown(fixture_t *f) {
  lt__executor_free(f->ex);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  cr_assert_eq(uv_loop_close(&f->loop), 0);
  lt__modules_free(f->mods);
}

static void put_i64(unsigned char *p, int64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (unsigned char)((uint64_t)v >> (8 * i));
}

static int64_t get_i64(const unsigned char *p) {
  uint64_t x = 0;
  for (int i = 7; i >= 0; i--)
    x = (x << 8) | p[i];
  return (int64_t)x;
}

Test(executor, inc_many) {
  fixture_t f;
  setup(&f, 3, 1.0);
  lt_exec_stage_t inc = stage(&f, "testk:inc", NULL);
  enum { N = 200 };
  static lt_job_t jobs[N];
  static unsigned char in[N][8];
  static lt_bytes_t inb[N];
  for (int i = 0; i < N; i++) {
    put_i64(in[i], 1000 * i - 7);
    inb[i] = (lt_bytes_t){in[i], 8};
    job_init(&jobs[i], &inc, 1, &inb[i], 1);
    jobs[i].data = (void *)(intptr_t)i;
    lt__executor_submit(f.ex, &jobs[i]);
  }
  run_until(&f, N);
  cr_assert_eq(f.ndone, N);
  cr_assert_leq(f.ncalls, N);
  bool seen[N] = {false};
  for (int k = 0; k < N; k++) {
    lt_job_t *j = f.order[k];
    int i = (int)(intptr_t)j->data;
    cr_assert(!seen[i]);
    seen[i] = true;
    cr_assert_eq(j->result.status, LT_OK);
    cr_assert_eq(j->result.nout, 1);
    cr_assert_eq(j->result.outlen[0], 8);
    cr_assert_eq(get_i64(j->result.out[0]), 1000 * i - 7 + 1);
    lt__exec_result_clear(&j->result);
  }
  cr_assert_eq(lt__executor_active(f.ex), 0);
  cr_assert_eq(lt__executor_queued(f.ex), 0);
  teardown(&f);
}

Test(executor, failure_message) {
  fixture_t f;
  setup(&f, 1, 1.0);
  lt_exec_stage_t sf = stage(&f, "testk:fail", NULL), si = stage(&f, "testk:inc", NULL);
  unsigned char four[4] = {1, 2, 3, 4};
  lt_bytes_t bad = {four, 4};
  lt_job_t fail, inc;
  job_init(&fail, &sf, 1, NULL, 0);
  job_init(&inc, &si, 1, &bad, 1);
  lt__executor_submit(f.ex, &fail);
  lt__executor_submit(f.ex, &inc);
  run_until(&f, 2);
  cr_assert_eq(fail.result.status, LT_EKERNEL);
  cr_assert_str_eq(fail.result.errmsg, "testk:fail: fail: asked to fail");
  cr_assert_eq(fail.result.nout, 0);
  cr_assert_eq(inc.result.status, LT_EKERNEL);
  cr_assert_str_eq(inc.result.errmsg, "testk:inc: inc: expected 8 bytes, got 4");
  /* One thread: FIFO order. */
  cr_assert_eq(f.order[0], &fail);
  cr_assert_eq(f.order[1], &inc);
  lt__exec_result_clear(&fail.result);
  lt__exec_result_clear(&inc.result);
  teardown(&f);
}

typedef struct sampler {
  fixture_t *f;
  uint32_t max_active, max_queued;
} sampler_t;

static void on_sample(uv_timer_t *t) {
  sampler_t *s = t->data;
  uint32_t a = lt__executor_active(s->f->ex), q = lt__executor_queued(s->f->ex);
  if (a > s->max_active) s->max_active = a;
  if (q > s->max_queued) s->max_queued = q;
}

Test(executor, active_and_queued_counts) {
  fixture_t f;
  setup(&f, 2, 1.0);
  lt_exec_stage_t sl = stage(&f, "testk:sleep", "60");
  static lt_job_t jobs[5];
  unsigned char x = 'x';
  lt_bytes_t in = {&x, 1};
  for (int i = 0; i < 5; i++) {
    job_init(&jobs[i], &sl, 1, &in, 1);
    lt__executor_submit(f.ex, &jobs[i]);
  }
  cr_assert_leq(lt__executor_active(f.ex) + lt__executor_queued(f.ex), 5);
  sampler_t s = {.f = &f};
  uv_timer_t t;
  uv_timer_init(&f.loop, &t);
  t.data = &s;
  uv_timer_start(&t, on_sample, 0, 10);
  run_until(&f, 5);
  uv_close((uv_handle_t *)&t, NULL);
  cr_assert_eq(s.max_active, 2, "never more than 2 threads, and both used: %u", s.max_active);
  cr_assert_geq(s.max_queued, 1);
  for (int i = 0; i < 5; i++) {
    cr_assert_eq(jobs[i].result.status, LT_OK);
    cr_assert_geq(jobs[i].service_us, 55000);
    lt__exec_result_clear(&jobs[i].result);
  }
  teardown(&f);
}

Test(executor, cancel_queued_not_running) {
  fixture_t f;
  setup(&f, 1, 1.0);
  lt_exec_stage_t sl = stage(&f, "testk:sleep", "100");
  static lt_job_t jobs[4];
  unsigned char x = 'x';
  lt_bytes_t in = {&x, 1};
  for (int i = 0; i < 4; i++) {
    job_init(&jobs[i], &sl, 1, &in, 1);
    jobs[i].data = (void *)(intptr_t)i;
    lt__executor_submit(f.ex, &jobs[i]);
  }
  /* Wait until the single worker has taken job 0. */
  for (int spins = 0; lt__executor_active(f.ex) == 0 && spins < 1000; spins++)
    usleep(1000);
  cr_assert_eq(lt__executor_active(f.ex), 1);
  cr_assert_eq(lt__executor_queued(f.ex), 3);
  cr_assert(!lt__executor_cancel(f.ex, &jobs[0]), "a running job cannot be canceled");
  cr_assert(lt__executor_cancel(f.ex, &jobs[2]));
  cr_assert(!lt__executor_cancel(f.ex, &jobs[2]), "canceling twice");
  cr_assert(lt__executor_cancel(f.ex, &jobs[3]));
  cr_assert_eq(lt__executor_queued(f.ex), 1);
  run_until(&f, 2);
  cr_assert_eq(f.ndone, 2);
  cr_assert_eq(f.order[0], &jobs[0]);
  cr_assert_eq(f.order[1], &jobs[1]);
  for (int i = 0; i < 2; i++)
    lt__exec_result_clear(&jobs[i].result);
  teardown(&f);
}

Test(executor, slowdown_stretches_service_time) {
  fixture_t f;
  setup(&f, 1, 3.0);
  unsigned char x = 'x';
  lt_bytes_t in = {&x, 1};
  lt_exec_stage_t sl = stage(&f, "testk:sleep", "30");
  lt_job_t j;
  job_init(&j, &sl, 1, &in, 1);
  lt__executor_submit(f.ex, &j);
  run_until(&f, 1);
  cr_assert_eq(j.result.status, LT_OK);
  cr_assert_geq(j.service_us, 90000, "service %llu us", (unsigned long long)j.service_us);
  lt__exec_result_clear(&j.result);
  teardown(&f);
}

/* gang links jobs[1..n-1] behind jobs[0]: one unit. */
static void gang(lt_job_t *jobs, int n) {
  for (int i = 0; i + 1 < n; i++)
    jobs[i].gang = &jobs[i + 1];
}

/* A gang runs on one worker, in order, back to back, and comes back in one hand-off; each
 * job keeps its own result. */
Test(executor, gang_runs_on_one_worker_in_order) {
  fixture_t f;
  setup(&f, 3, 1.0);
  lt_exec_stage_t inc = stage(&f, "testk:inc", NULL);
  enum { N = 40 };
  static lt_job_t jobs[N];
  static unsigned char in[N][8];
  static lt_bytes_t inb[N];
  for (int i = 0; i < N; i++) {
    put_i64(in[i], i);
    inb[i] = (lt_bytes_t){in[i], 8};
    job_init(&jobs[i], &inc, 1, &inb[i], 1);
  }
  gang(jobs, N);
  lt_job_t *unit = &jobs[0];
  lt__executor_submit_list(f.ex, &unit, 1);
  run_until(&f, N);
  cr_assert_eq(f.ndone, N);
  cr_assert_eq(f.ncalls, 1, "one hand-off for the gang, not %d", f.ncalls);
  for (int i = 0; i < N; i++) {
    cr_assert_eq(f.order[i], &jobs[i], "in gang order");
    cr_assert_eq(jobs[i].worker, jobs[0].worker);
    cr_assert_null(jobs[i].gang, "the gang link is cleared");
    cr_assert_eq(get_i64(jobs[i].result.out[0]), i + 1);
    if (i > 0) cr_assert_geq(jobs[i].start_us, jobs[i - 1].start_us + jobs[i - 1].service_us);
    lt__exec_result_clear(&jobs[i].result);
  }
  cr_assert_eq(lt__executor_active(f.ex), 0);
  cr_assert_eq(lt__executor_queued(f.ex), 0);
  teardown(&f);
}

/* A queued gang's members can be canceled one by one, its leader too (the next member takes
 * its place in the queue); once a worker has the gang, none can. */
Test(executor, gang_cancel) {
  fixture_t f;
  setup(&f, 1, 1.0);
  lt_exec_stage_t sl = stage(&f, "testk:sleep", "100");
  lt_exec_stage_t inc = stage(&f, "testk:inc", NULL);
  unsigned char x[8] = {0};
  lt_bytes_t in = {x, 8};
  static lt_job_t blocker, jobs[5], tail;
  job_init(&blocker, &sl, 1, &in, 1);
  lt__executor_submit(f.ex, &blocker);
  for (int spins = 0; lt__executor_active(f.ex) == 0 && spins < 1000; spins++)
    usleep(1000);
  for (int i = 0; i < 5; i++)
    job_init(&jobs[i], &inc, 1, &in, 1);
  job_init(&tail, &inc, 1, &in, 1);
  gang(jobs, 5);
  lt_job_t *units[2] = {&jobs[0], &tail};
  lt__executor_submit_list(f.ex, units, 2);
  cr_assert_eq(lt__executor_queued(f.ex), 6);
  cr_assert(lt__executor_cancel(f.ex, &jobs[2]), "a queued member");
  cr_assert(lt__executor_cancel(f.ex, &jobs[0]), "a queued leader");
  cr_assert(!lt__executor_cancel(f.ex, &jobs[0]), "canceling twice");
  cr_assert(lt__executor_cancel(f.ex, &jobs[4]), "the last member");
  cr_assert_eq(lt__executor_queued(f.ex), 3);
  run_until(&f, 4);
  cr_assert_eq(f.ndone, 4);
  cr_assert_eq(f.order[0], &blocker);
  cr_assert_eq(f.order[1], &jobs[1], "the heir runs where the leader was queued");
  cr_assert_eq(f.order[2], &jobs[3]);
  cr_assert_eq(f.order[3], &tail);
  for (int i = 0; i < 4; i++)
    lt__exec_result_clear(&f.order[i]->result);
  teardown(&f);
}

/* A gang counts as one running job of its group: a group limited to 1 runs one gang at a
 * time, and a second unit of it waits though workers are free. */
Test(executor, gang_counts_once_in_its_group) {
  fixture_t f;
  setup(&f, 3, 1.0);
  lt_exec_stage_t sl = stage(&f, "testk:sleep", "30");
  unsigned char x[8] = {0};
  lt_bytes_t in = {x, 8};
  lt_exgroup_t g;
  memset(&g, 0, sizeof g);
  lt__executor_set_limit(f.ex, &g, 1);
  static lt_job_t a[3], b[3];
  for (int i = 0; i < 3; i++) {
    job_init(&a[i], &sl, 1, &in, 1);
    job_init(&b[i], &sl, 1, &in, 1);
    a[i].group = b[i].group = &g;
  }
  gang(a, 3);
  gang(b, 3);
  lt_job_t *units[2] = {&a[0], &b[0]};
  lt__executor_submit_list(f.ex, units, 2);
  run_until(&f, 6);
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 3; k++) {
      uint64_t a0 = a[i].start_us, a1 = a0 + a[i].service_us;
      uint64_t b0 = b[k].start_us, b1 = b0 + b[k].service_us;
      cr_assert(a1 <= b0 || b1 <= a0, "a[%d] and b[%d] overlap under a window of 1", i, k);
    }
  cr_assert_eq(g.running, 0);
  for (int i = 0; i < 3; i++) {
    lt__exec_result_clear(&a[i].result);
    lt__exec_result_clear(&b[i].result);
  }
  teardown(&f);
}

/* Each job says which worker ran it and when it started (for traces): jobs that overlapped
 * in time ran on different workers, every start lies between submit and return. */
Test(executor, jobs_carry_worker_and_start) {
  fixture_t f;
  setup(&f, 3, 1.0);
  unsigned char x = 'x';
  lt_bytes_t in = {&x, 1};
  lt_exec_stage_t sl = stage(&f, "testk:sleep", "20");
  enum { N = 6 };
  lt_job_t jobs[N];
  uint64_t before = lt__executor_now_us();
  for (int i = 0; i < N; i++) {
    job_init(&jobs[i], &sl, 1, &in, 1);
    lt__executor_submit(f.ex, &jobs[i]);
  }
  run_until(&f, N);
  uint64_t after = lt__executor_now_us();
  for (int i = 0; i < N; i++) {
    const lt_job_t *a = &jobs[i];
    cr_assert_eq(a->result.status, LT_OK);
    cr_assert_lt(a->worker, 3);
    cr_assert(a->start_us >= before && a->start_us + a->service_us <= after);
    for (int k = 0; k < i; k++) {
      const lt_job_t *b = &jobs[k];
      int overlap =
          a->start_us < b->start_us + b->service_us && b->start_us < a->start_us + a->service_us;
      cr_assert(!overlap || a->worker != b->worker, "jobs %d and %d overlap on worker %u", k, i,
                a->worker);
    }
  }
  for (int i = 0; i < N; i++)
    lt__exec_result_clear(&jobs[i].result);
  teardown(&f);
}

/* The worker runs the whole op: fused stages back to back, a split's parts. */
Test(executor, ops) {
  fixture_t f;
  setup(&f, 2, 1.0);
  lt_exec_stage_t chain[3] = {stage(&f, "testk:inc", NULL), stage(&f, "testk:dbl", NULL),
                              stage(&f, "testk:inc", NULL)};
  lt_exec_stage_t two = stage(&f, "testk:two", NULL);
  unsigned char v[8];
  put_i64(v, 20);
  lt_bytes_t in = {v, 8};
  lt_job_t seq, split;
  job_init(&seq, chain, 3, &in, 1);
  job_init(&split, &two, 1, &in, 1);
  split.op = LT_OP_SPLIT;
  lt__executor_submit(f.ex, &seq);
  lt__executor_submit(f.ex, &split);
  run_until(&f, 2);
  cr_assert_eq(seq.result.status, LT_OK, "%s", seq.result.errmsg);
  cr_assert_eq(seq.result.nout, 1);
  cr_assert_eq(get_i64(seq.result.out[0]), (20 + 1) * 2 + 1);
  cr_assert_eq(split.result.status, LT_OK, "%s", split.result.errmsg);
  cr_assert_eq(split.result.nout, 2);
  cr_assert_eq(get_i64(split.result.out[1]), 20);
  lt__exec_result_clear(&seq.result);
  lt__exec_result_clear(&split.result);
  teardown(&f);
}

Test(executor, bad_arguments) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  lt_executor_t *ex = (lt_executor_t *)1;
  cr_assert_eq(lt__executor_new(&ex, &loop, 0, 1.0, on_done, NULL), LT_EINVAL);
  cr_assert_null(ex);
  lt__executor_free(NULL);
  cr_assert_eq(uv_loop_close(&loop), 0);
}

/* ---- no kernel on the loop thread; hot hand-offs ----------------------------------------- */

/* run_one submits `job` alone and runs the loop until it is back. */
static void run_one(fixture_t *f, lt_job_t *job) {
  f->ndone = 0;
  lt__executor_submit(f->ex, job);
  run_until(f, 1);
  cr_assert_eq(job->result.status, LT_OK, "%s", job->result.errmsg);
  lt__exec_result_clear(&job->result);
}

typedef struct ticker {
  fixture_t *f;
  int ticks;
} ticker_t;

static void on_tick(uv_timer_t *t) {
  ticker_t *k = t->data;
  if (k->f->ndone == 0) k->ticks++; /* while the job is out */
}

/* A chain fast 30 times in a row (what once made a lone job of it run on the loop thread),
 * then slow (a 300 ms sleep on one input): every run is a worker's, the slow one included.
 * The submit returns before the kernel ran (the job is queued or running, not done), and the
 * loop turns (its timer fires) while the kernel runs. No timing bound: an order of events. */
Test(executor, no_kernel_runs_on_the_loop_thread) {
  fixture_t f;
  setup(&f, 2, 1.0);
  lt_exec_stage_t st = stage(&f, "testk:stall_on", "7:300");
  unsigned char v[8];
  lt_bytes_t in = {v, 8};
  for (int i = 0; i < 30; i++) {
    put_i64(v, i < 7 ? i : i + 1);
    lt_job_t j;
    job_init(&j, &st, 1, &in, 1);
    run_one(&f, &j);
    cr_assert_lt(j.worker, 2, "run %d ran on worker %u", i, j.worker);
  }
  put_i64(v, 7);
  lt_job_t slow;
  job_init(&slow, &st, 1, &in, 1);
  f.ndone = 0;
  ticker_t k = {.f = &f};
  uv_timer_t t;
  uv_timer_init(&f.loop, &t);
  t.data = &k;
  uv_timer_start(&t, on_tick, 1, 1);
  lt__executor_submit(f.ex, &slow);
  uint32_t active, queued;
  lt__executor_counts(f.ex, &active, &queued);
  cr_assert_eq(active + queued, 1, "the kernel ran inside the submit");
  cr_assert_eq(f.ndone, 0);
  run_until(&f, 1);
  uv_close((uv_handle_t *)&t, NULL);
  cr_assert_eq(slow.result.status, LT_OK);
  cr_assert_lt(slow.worker, 2);
  cr_assert_geq(slow.service_us, 300000);
  cr_assert_geq(k.ticks, 2, "the loop turned %d times while the kernel ran", k.ticks);
  lt__exec_result_clear(&slow.result);
  teardown(&f);
}

/* chained: every job that comes back submits the next (as a client whose next task waits for
 * the last result would), until `left` is 0. */
typedef struct chained {
  fixture_t *f;
  lt_job_t job;
  int left;
  uint32_t max_worker;
} chained_t;

static void on_chained(lt_executor_t *ex, lt_job_t *done, void *data) {
  chained_t *c = data;
  for (lt_job_t *j = done; j != NULL; j = j->next) {
    cr_assert_eq(j->result.status, LT_OK, "%s", j->result.errmsg);
    lt__exec_result_clear(&j->result);
    if (j->worker > c->max_worker) c->max_worker = j->worker;
    c->f->ndone++;
  }
  if (--c->left > 0)
    lt__executor_submit(ex, &c->job);
  else
    uv_stop(&c->f->loop);
}

/* A stream of lone jobs, each submitted as the last comes back: the first ones wake a
 * sleeping worker (nothing was measured yet, so nothing waits hot), and once wake-ups and
 * gaps are measured the hot-wait budget is what they say: at most SPIN_WORTH (8) measured
 * wake-ups and at most 1 ms, and either 0 or the gap's mean or more. Every job is taken by a
 * worker, hot or woken (never run by the loop thread), and once the stream ends no worker
 * stays hot. Counts and ratios of the run's own measurements only. */
Test(executor, lone_jobs_hand_off_by_measured_budgets) {
  fixture_t f;
  setup(&f, 2, 1.0);
  lt_exec_stage_t inc = stage(&f, "testk:inc", NULL);
  lt__executor_free(f.ex); /* again, with the chaining callback */
  uv_run(&f.loop, UV_RUN_DEFAULT);
  enum { N = 2000 };
  static chained_t c;
  memset(&c, 0, sizeof c);
  c.f = &f;
  c.left = N;
  cr_assert_eq(lt__executor_new(&f.ex, &f.loop, 2, 1.0, on_chained, &c), LT_OK);
  lt_executor_handoffs_t h;
  lt__executor_handoffs(f.ex, &h);
  cr_assert_eq(h.spin_us, 0, "a budget before anything was measured");
  unsigned char v[8];
  put_i64(v, 1);
  lt_bytes_t in = {v, 8};
  job_init(&c.job, &inc, 1, &in, 1);
  lt__executor_submit(f.ex, &c.job);
  uv_timer_t t;
  uv_timer_init(&f.loop, &t);
  uv_timer_start(&t, on_timeout, 60000, 0);
  uv_run(&f.loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  cr_assert_eq(f.ndone, N);
  cr_assert_lt(c.max_worker, 2);
  lt__executor_handoffs(f.ex, &h);
  cr_log_info("hand-offs of %d chained jobs: %llu hot, %llu woken, %llu by the loop's hot wait; "
              "wake-up %.1f us, gap %.1f us, loop wake-up %.1f us, budget %llu us",
              N, (unsigned long long)h.hot, (unsigned long long)h.woken,
              (unsigned long long)h.loop_hot, h.wake_us, h.gap_us, h.loop_wake_us,
              (unsigned long long)h.spin_us);
  cr_assert_geq(h.woken, 1, "the first job woke a worker");
  cr_assert_leq(h.hot + h.woken, N, "hot %llu woken %llu", (unsigned long long)h.hot,
                (unsigned long long)h.woken);
  cr_assert_gt(h.wake_us, 0);
  cr_assert_leq(h.spin_us, 1000);
  cr_assert_leq((double)h.spin_us, 8 * h.wake_us + 1, "budget %llu us, wake-up %.1f us",
                (unsigned long long)h.spin_us, h.wake_us);
  if (h.spin_us > 0) cr_assert_geq((double)h.spin_us, h.gap_us);
  if (h.hot > 0) cr_assert_gt(h.spins, 0);
  /* The stream is over: a hot worker gives up within its budget (1 ms at most). */
  for (int i = 0; i < 5000 && lt__executor_spinning(f.ex) > 0; i++)
    usleep(1000);
  cr_assert_eq(lt__executor_spinning(f.ex), 0, "a worker still waits hot with nothing to come");
  teardown(&f);
}

/* The loop thread waits hot, before it polls, for a job it submitted that turn, for at most
 * one wake-up of its own as measured: with an instant kernel and a wake-up of the loop as
 * measured, some of a stream's completions are taken that way, and each that is not woke
 * the loop; the loop's wake-up is measured at all. A job longer than any budget (a 50 ms
 * sleep) comes back by the async wake-up whatever the loop waited. */
Test(executor, the_loop_waits_hot_for_its_lone_job_then_sleeps) {
  fixture_t f;
  setup(&f, 1, 1.0);
  lt_exec_stage_t inc = stage(&f, "testk:inc", NULL), sl = stage(&f, "testk:sleep", "50");
  unsigned char v[8];
  put_i64(v, 1);
  lt_bytes_t in = {v, 8};
  for (int i = 0; i < 200; i++) {
    lt_job_t j;
    job_init(&j, &inc, 1, &in, 1);
    run_one(&f, &j);
  }
  lt_executor_handoffs_t h;
  lt__executor_handoffs(f.ex, &h);
  cr_assert_gt(h.loop_wake_us, 0, "the loop's wake-up was never measured");
  cr_assert_leq(h.loop_hot, 200);
  uint64_t hot0 = h.loop_hot;
  lt_job_t j;
  job_init(&j, &sl, 1, &in, 1);
  run_one(&f, &j);
  cr_assert_geq(j.service_us, 50000);
  lt__executor_handoffs(f.ex, &h);
  cr_assert_eq(h.loop_hot, hot0, "a 50 ms job was taken by the loop's hot wait");
  teardown(&f);
}
