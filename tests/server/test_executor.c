/* test_executor.c: the worker pool alone, with kernels of the test module testk: results
 * and service times come back on the loop thread, failures carry the kernel's message,
 * queued jobs can be canceled and running ones cannot, the active/queued counters move,
 * and the slowdown emulation stretches service time. Each test closes its loop. */
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

static lt_kernel_fn kernel(fixture_t *f, const char *name) {
  lt_kernel_fn fn = NULL;
  char err[512];
  cr_assert_eq(lt__modules_resolve(f->mods, name, &fn, err, sizeof err), LT_OK, "%s", err);
  return fn;
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
  lt_kernel_fn inc = kernel(&f, "testk:inc");
  enum { N = 200 };
  static lt_job_t jobs[N];
  static unsigned char in[N][8];
  static lt_bytes_t inb[N];
  for (int i = 0; i < N; i++) {
    memset(&jobs[i], 0, sizeof jobs[i]);
    put_i64(in[i], 1000 * i - 7);
    inb[i] = (lt_bytes_t){in[i], 8};
    jobs[i].fn = inc;
    jobs[i].inputs = &inb[i];
    jobs[i].ninputs = 1;
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
    cr_assert_eq(j->status, LT_OK);
    cr_assert_eq(j->call.noutputs, 1);
    void *d;
    size_t len;
    lt__call_take_output(&j->call, 0, &d, &len);
    cr_assert_eq(len, 8);
    cr_assert_eq(get_i64(d), 1000 * i - 7 + 1);
    free(d);
    lt__call_clear(&j->call);
  }
  cr_assert_eq(lt__executor_active(f.ex), 0);
  cr_assert_eq(lt__executor_queued(f.ex), 0);
  teardown(&f);
}

Test(executor, failure_message) {
  fixture_t f;
  setup(&f, 1, 1.0);
  lt_job_t fail = {.fn = kernel(&f, "testk:fail")};
  unsigned char four[4] = {1, 2, 3, 4};
  lt_bytes_t bad = {four, 4};
  lt_job_t inc = {.fn = kernel(&f, "testk:inc"), .inputs = &bad, .ninputs = 1};
  lt__executor_submit(f.ex, &fail);
  lt__executor_submit(f.ex, &inc);
  run_until(&f, 2);
  cr_assert_eq(fail.status, LT_EKERNEL);
  cr_assert_str_eq(fail.call.errmsg, "fail: asked to fail");
  cr_assert_eq(fail.call.noutputs, 0);
  cr_assert_eq(inc.status, LT_EKERNEL);
  cr_assert_str_eq(inc.call.errmsg, "inc: expected 8 bytes, got 4");
  /* One thread: FIFO order. */
  cr_assert_eq(f.order[0], &fail);
  cr_assert_eq(f.order[1], &inc);
  lt__call_clear(&fail.call);
  lt__call_clear(&inc.call);
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
  lt_kernel_fn sl = kernel(&f, "testk:sleep");
  static lt_job_t jobs[5];
  unsigned char x = 'x';
  lt_bytes_t in = {&x, 1};
  for (int i = 0; i < 5; i++) {
    memset(&jobs[i], 0, sizeof jobs[i]);
    jobs[i].fn = sl;
    jobs[i].inputs = &in;
    jobs[i].ninputs = 1;
    jobs[i].param = (lt_bytes_t){"60", 2};
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
    cr_assert_eq(jobs[i].status, LT_OK);
    cr_assert_geq(jobs[i].service_us, 55000);
    lt__call_clear(&jobs[i].call);
  }
  teardown(&f);
}

Test(executor, cancel_queued_not_running) {
  fixture_t f;
  setup(&f, 1, 1.0);
  lt_kernel_fn sl = kernel(&f, "testk:sleep");
  static lt_job_t jobs[4];
  unsigned char x = 'x';
  lt_bytes_t in = {&x, 1};
  for (int i = 0; i < 4; i++) {
    memset(&jobs[i], 0, sizeof jobs[i]);
    jobs[i].fn = sl;
    jobs[i].inputs = &in;
    jobs[i].ninputs = 1;
    jobs[i].param = (lt_bytes_t){"100", 3};
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
    lt__call_clear(&jobs[i].call);
  teardown(&f);
}

Test(executor, slowdown_stretches_service_time) {
  fixture_t f;
  setup(&f, 1, 3.0);
  unsigned char x = 'x';
  lt_bytes_t in = {&x, 1};
  lt_job_t j = {.fn = kernel(&f, "testk:sleep"), .inputs = &in, .ninputs = 1, .param = {"30", 2}};
  lt__executor_submit(f.ex, &j);
  run_until(&f, 1);
  cr_assert_eq(j.status, LT_OK);
  cr_assert_geq(j.service_us, 90000, "service %llu us", (unsigned long long)j.service_us);
  lt__call_clear(&j.call);
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
