/* test_zerocopy.c: inputs handed over without a copy (lt_eval_submit_owned) and results read
 * as views of the received message. Every owned buffer's free callback runs exactly once:
 * after a run on servers (lazy binding and plain mode), when kernels fail, when the submit
 * is refused, with the sequential evaluator and when a server dies mid-run and tasks are
 * recomputed from their inputs; the input is kept only while lineage may need it. The
 * callback poisons the bytes before freeing them, so a use after it would give wrong results
 * even without ASan. A large result stays valid, without a copy, until lt_buf_free, also
 * after lt_eval_free; and the client's memory stays within 1.5 x the bytes it holds for a
 * few large values (a bound on memory, not on time). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "harness.h"

#define N 60

/* A buffer handed over with lt_eval_submit_owned, as its free callback saw it. */
typedef struct owned {
  void *data;
  size_t len;
  atomic_int calls; /* callback runs */
  atomic_int wrong; /* runs with another pointer than the one given */
} owned_t;

static void owned_free(void *data, void *hint) {
  owned_t *o = hint;
  if (data != o->data) atomic_store(&o->wrong, 1);
  if (atomic_fetch_add(&o->calls, 1) == 0 && data == o->data && data != NULL) {
    memset(data, 0xee, o->len); /* a later use reads garbage */
    free(data);
  }
}

/* submit_owned hands `ev` a fresh buffer of `len` bytes: int64 `v`, then v's low bits. */
static int submit_owned(lt_eval_t *ev, owned_t *o, size_t len, int64_t v, lt_future_t **f) {
  o->len = len;
  o->data = malloc(len);
  cr_assert_not_null(o->data);
  memset(o->data, (int)(v & 0x7f), len);
  if (len >= 8) put_i64(o->data, v);
  return lt_eval_submit_owned(ev, o->data, len, owned_free, o, f);
}

/* submit_i64s_owned submits the int64 tasks in[0..n) as owned buffers to the stream. */
static void submit_i64s_owned(lt_eval_t *ev, owned_t *o, const int64_t *in, int n) {
  for (int i = 0; i < n; i++)
    cr_assert_eq(submit_owned(ev, &o[i], 8, in[i], NULL), LT_OK, "task %d", i);
}

/* expect_once checks that each of o[0..n) was given back exactly once, as it was given. */
static void expect_once(owned_t *o, int n) {
  for (int i = 0; i < n; i++) {
    cr_assert_eq(atomic_load(&o[i].calls), 1, "buffer %d: freed %d times", i,
                 atomic_load(&o[i].calls));
    cr_assert_eq(atomic_load(&o[i].wrong), 0, "buffer %d: freed with another pointer", i);
  }
}

/* at_most_once checks that none of o[0..n) was given back twice so far. */
static void at_most_once(owned_t *o, int n) {
  for (int i = 0; i < n; i++)
    cr_assert_leq(atomic_load(&o[i].calls), 1, "buffer %d freed twice", i);
}

/* pipe_inc_dbl is farm(pipe(testk:inc, testk:dbl)): (x + 1) * 2. */
static lt_skel_t *pipe_inc_dbl(void) {
  return lt_farm(lt_pipeline(lt_seq("testk:inc"), lt_seq("testk:dbl"), NULL));
}

Test(zerocopy, freed_once_after_a_run_lazy_and_plain, .timeout = 120) {
  static const char *const modes[] = {"optimized", "plain"};
  for (int m = 0; m < 2; m++) {
    const char *opts[] = {"mode", modes[m], NULL};
    lt_eval_t *ev = new_eval_with(pipe_inc_dbl(), 2, opts);
    owned_t o[N];
    int64_t in[N];
    memset(o, 0, sizeof o);
    for (int i = 0; i < N; i++)
      in[i] = i * 7;
    submit_i64s_owned(ev, o, in, N);
    cr_assert_eq(lt_eval_close(ev), LT_OK);
    for (int i = 0; i < N; i++) {
      cr_assert_eq(next_i64(ev), (in[i] + 1) * 2, "%s: task %d", modes[m], i);
      at_most_once(o, N);
    }
    lt_eval_free(ev);
    expect_once(o, N);
  }
}

Test(zerocopy, freed_once_when_kernels_fail, .timeout = 120) {
  lt_eval_t *ev =
      new_eval(lt_farm(lt_pipeline(lt_seq("testk:neg_fails"), lt_seq("testk:inc"), NULL)), 2);
  owned_t o[N];
  int64_t in[N];
  memset(o, 0, sizeof o);
  for (int i = 0; i < N; i++)
    in[i] = i % 3 == 0 ? -i - 1 : i;
  submit_i64s_owned(ev, o, in, N);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  for (int i = 0; i < N; i++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next(ev, &b), LT_OK);
    if (in[i] < 0) {
      cr_assert_eq(lt_buf_error(b), LT_EKERNEL, "task %d: %s", i, lt_buf_errmsg(b));
    } else {
      cr_assert_eq(lt_buf_error(b), LT_OK, "task %d: %s", i, lt_buf_errmsg(b));
      cr_assert_eq(get_i64(lt_buf_data(b)), in[i] + 1);
    }
    lt_buf_free(b);
  }
  lt_eval_free(ev);
  expect_once(o, N);
}

Test(zerocopy, freed_before_a_refused_submit_returns, .timeout = 60) {
  owned_t o[6];
  memset(o, 0, sizeof o);
  /* No evaluator, and no bytes for a length. */
  cr_assert_eq(submit_owned(NULL, &o[0], 8, 1, NULL), LT_EINVAL);
  cr_assert_eq(atomic_load(&o[0].calls), 1);
  o[1].data = NULL;
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_seq("testk:inc")), LT_OK);
  cr_assert_eq(lt_eval_submit_owned(ev, NULL, 8, owned_free, &o[1], NULL), LT_EINVAL);
  cr_assert_eq(atomic_load(&o[1].calls), 1);
  /* A closed evaluator. */
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  cr_assert_eq(submit_owned(ev, &o[2], 8, 2, NULL), LT_ECLOSED);
  cr_assert_eq(atomic_load(&o[2].calls), 1);
  lt_eval_free(ev);
  /* A program that reduces its stream takes no futures. */
  cr_assert_eq(lt_eval_new(&ev, lt_pipeline(lt_seq("testk:inc"), lt_reduce("testk:concat"), NULL)),
               LT_OK);
  lt_future_t *f = NULL;
  cr_assert_eq(submit_owned(ev, &o[3], 8, 3, &f), LT_EINVAL);
  cr_assert_null(f);
  cr_assert_eq(atomic_load(&o[3].calls), 1);
  lt_eval_free(ev);
  /* A full window, non-blocking: the first task holds the only place. */
  const char *opts[] = {"max_pending", "1", "nonblocking", "on", NULL};
  ev = new_eval_with(lt_farm(lt_seq_with("testk:sleep", "300", 3)), 1, opts);
  cr_assert_eq(submit_owned(ev, &o[4], 8, 4, NULL), LT_OK);
  cr_assert_eq(submit_owned(ev, &o[5], 8, 5, NULL), LT_EAGAIN);
  cr_assert_eq(atomic_load(&o[5].calls), 1);
  lt_eval_free(ev); /* the first task never finished: its buffer goes now */
  expect_once(o, 6);
}

Test(zerocopy, sequential_evaluator_frees_an_input_once_it_ran, .timeout = 60) {
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, pipe_inc_dbl()), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "modules", LT_TEST_MODULES), LT_OK);
  owned_t o[N];
  lt_future_t *f[N];
  memset(o, 0, sizeof o);
  /* Half submitted before the start, half after; every other one with a future. */
  for (int i = 0; i < N; i++) {
    if (i == N / 2) cr_assert_eq(lt_eval_run_local(ev), LT_OK);
    f[i] = NULL;
    cr_assert_eq(submit_owned(ev, &o[i], 8, i, i % 2 ? &f[i] : NULL), LT_OK);
  }
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  for (int i = 0; i < N; i++) {
    lt_buf_t *b = NULL;
    if (i % 2)
      cr_assert_eq(lt_future_wait(f[i], 10000, &b), LT_OK);
    else
      cr_assert_eq(lt_eval_next(ev, &b), LT_OK);
    cr_assert_eq(lt_buf_error(b), LT_OK, "task %d: %s", i, lt_buf_errmsg(b));
    cr_assert_eq(get_i64(lt_buf_data(b)), (i + 1) * 2);
    /* Nothing recomputes in-process: the input went once its first instruction ran. */
    cr_assert_eq(atomic_load(&o[i].calls), 1, "task %d: input not freed by its result", i);
    lt_buf_free(b);
    lt_future_release(f[i]);
  }
  lt_eval_free(ev);
  expect_once(o, N);
}

/* run_killing runs a 3-stage chain on 3 servers in `mode`, kills one mid-run while it has
 * work out, and checks every result and every buffer. */
static void run_killing(const char *mode) {
  lt_proc_t hosts[3];
  for (int i = 0; i < 3; i++)
    start_server(&hosts[i], "h", 2);
  const char *opts[] = {"mode", mode, "heartbeat_ms", "200", "max_threads", "2", NULL};
  lt_skel_t *p = lt_farm(lt_pipeline(lt_seq_with("testk:sleep", "5", 1), lt_seq("testk:inc"),
                                     lt_seq("testk:dbl"), NULL));
  lt_eval_t *ev = eval_on_procs(p, hosts, 3, opts);
  owned_t o[N];
  int64_t in[N];
  memset(o, 0, sizeof o);
  for (int i = 0; i < N; i++)
    in[i] = 1000 + i;
  submit_i64s_owned(ev, o, in, N);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  wait_inflight(ev, 1, 3); /* killed while it has work out */
  kill(hosts[1].pid, SIGKILL);
  for (int i = 0; i < N; i++) {
    cr_assert_eq(next_i64(ev), (in[i] + 1) * 2, "%s: task %d", mode, i);
    at_most_once(o, N);
  }
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  cr_assert_gt(stats_u64(json, "retries"), 0, "%s: nothing was lost: %s", mode, json);
  free(json);
  lt_eval_free(ev);
  expect_once(o, N);
  for (int i = 0; i < 3; i++)
    lt__proc_stop(&hosts[i], 5000);
}

Test(zerocopy, freed_once_when_a_server_dies_lazy, .timeout = 120) {
  run_killing("optimized"); /* tasks whose values died with it start again from the input */
}

Test(zerocopy, freed_once_when_a_server_dies_plain, .timeout = 120) {
  run_killing("plain"); /* lost instructions are sent again with the values the client has */
}

/* The input's lineage: under lazy binding the values after the first stage stay on a
 * server, so the input is kept until the task is done; with lazy=off every value comes back
 * and nothing is recomputed, so it goes once the first stage has completed, while the
 * second (2 s) still runs. */
Test(zerocopy, input_kept_while_lineage_needs_it, .timeout = 120) {
  static const char *const modes[] = {"optimized", "plain"};
  for (int m = 0; m < 2; m++) {
    const char *opts[] = {"mode", modes[m], NULL};
    lt_eval_t *ev = new_eval_with(
        lt_pipeline(lt_seq("testk:inc"), lt_seq_with("testk:sleep", "2000", 4), NULL), 1, opts);
    owned_t o = {0};
    cr_assert_eq(submit_owned(ev, &o, 8, 41, NULL), LT_OK);
    cr_assert_eq(lt_eval_close(ev), LT_OK);
    lt_buf_t *b = NULL;
    int rc;
    while ((rc = lt_eval_next_timeout(ev, 20, &b)) == LT_ETIMEDOUT) {
      if (m == 0) cr_assert_eq(atomic_load(&o.calls), 0, "freed while lineage needs it");
      if (m == 1 && atomic_load(&o.calls) == 1) break;
    }
    if (m == 1) {
      cr_assert_eq(rc, LT_ETIMEDOUT, "plain: the input was kept until the task was done");
      cr_assert_eq(lt_eval_next(ev, &b), LT_OK);
    }
    cr_assert_eq(lt_buf_error(b), LT_OK, "%s", lt_buf_errmsg(b));
    cr_assert_eq(get_i64(lt_buf_data(b)), 42);
    lt_buf_free(b);
    lt_eval_free(ev);
    expect_once(&o, 1);
  }
}

/* check_view checks that `b` holds `len` bytes from byte `from` of the pattern i % 251, kept
 * in the message it came in (kind LT_VALUE_MSG: not a copy). */
static void check_view(const lt_buf_t *b, size_t len, size_t from) {
  cr_assert_eq(lt_buf_error(b), LT_OK, "%s", lt_buf_errmsg(b));
  cr_assert_eq(lt_buf_len(b), len);
  cr_assert_eq(b->value->kind, LT_VALUE_MSG, "a large result must be a view, not a copy");
  cr_assert_eq(lt_buf_data(b), b->value->data);
  const unsigned char *d = lt_buf_data(b);
  for (size_t i = 0; i < len; i++)
    cr_assert_eq(d[i], (unsigned char)((i + from) % 251), "byte %zu", i);
}

/* pattern makes `len` bytes of i % 251. */
static void *pattern(size_t len) {
  unsigned char *p = malloc(len);
  cr_assert_not_null(p);
  for (size_t i = 0; i < len; i++)
    p[i] = (unsigned char)(i % 251);
  return p;
}

Test(zerocopy, a_result_is_a_view_valid_until_freed, .timeout = 120) {
  enum { BIG = 1 << 20, LONG = 100000 };
  /* A final result returned with its completion. */
  lt_eval_t *ev = new_eval(lt_farm(lt_seq("testk:echo")), 1);
  owned_t o = {0};
  o.data = pattern(BIG);
  o.len = BIG;
  cr_assert_eq(lt_eval_submit_owned(ev, o.data, BIG, owned_free, &o, NULL), LT_OK);
  cr_assert_eq(lt_eval_submit(ev, "small", 5, NULL), LT_OK);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  lt_buf_t *big = NULL, *small = NULL;
  cr_assert_eq(lt_eval_next(ev, &big), LT_OK);
  cr_assert_eq(lt_eval_next(ev, &small), LT_OK);
  cr_assert_eq(small->value->kind, LT_VALUE_INLINE, "a small result is copied");
  /* A result fetched from its server: a while that ran two rounds ends on the value its
   * last body made there. */
  unsigned char *in = pattern(LONG + 2);
  lt_eval_t *wev = new_eval(
      lt_skel_param(lt_while("skelk:long", lt_seq("skelk:shrink")), "cond", "100000", 6), 1);
  lt_buf_t *fetched = NULL;
  cr_assert_eq(lt_eval_submit(wev, in, LONG + 2, NULL), LT_OK);
  free(in);
  cr_assert_eq(lt_eval_close(wev), LT_OK);
  cr_assert_eq(lt_eval_next(wev, &fetched), LT_OK);
  /* Both evaluators, their sockets and their servers go first. */
  lt_eval_free(ev);
  lt_eval_free(wev);
  expect_once(&o, 1);
  check_view(big, BIG, 0);
  check_view(fetched, LONG, 2);
  cr_assert_eq(memcmp(lt_buf_data(small), "small", 5), 0);
  lt_buf_free(big);
  lt_buf_free(fetched);
  lt_buf_free(small);
}

/* status_kib is the value in KiB of `field` (VmRSS, VmHWM) of this process's status. */
static long status_kib(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  cr_assert_not_null(f);
  char line[256];
  long kib = -1;
  size_t n = strlen(field);
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, field, n) == 0 && line[n] == ':') kib = strtol(line + n + 1, NULL, 10);
  fclose(f);
  cr_assert_geq(kib, 0, "no %s", field);
  return kib;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LT_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LT_TEST_SANITIZED 1
#endif
#endif

Test(zerocopy, client_memory_within_1_5_times_what_it_holds, .timeout = 120) {
#ifdef LT_TEST_SANITIZED
  cr_skip_test("a sanitizer's allocator keeps freed memory (quarantine): RSS says nothing here");
#endif
  enum { TASKS = 4 };
  const size_t len = (size_t)32 << 20;
  lt_eval_t *ev = new_eval(lt_farm(lt_seq("testk:echo")), 1);
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (f == NULL || fputs("5", f) < 0 || fclose(f) != 0)
    cr_skip_test("cannot reset the peak RSS (/proc/self/clear_refs)");
  long base = status_kib("VmRSS");
  owned_t o[TASKS];
  memset(o, 0, sizeof o);
  for (int i = 0; i < TASKS; i++)
    cr_assert_eq(submit_owned(ev, &o[i], len, i, NULL), LT_OK);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  for (int i = 0; i < TASKS; i++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next(ev, &b), LT_OK);
    cr_assert_eq(lt_buf_error(b), LT_OK, "%s", lt_buf_errmsg(b));
    cr_assert_eq(lt_buf_len(b), len);
    cr_assert_eq(get_i64(lt_buf_data(b)), i);
    lt_buf_free(b);
  }
  long grew = status_kib("VmHWM") - base;
  lt_eval_free(ev);
  expect_once(o, TASKS);
  /* It holds the inputs until their tasks are done; each result arrives while they are held,
   * and is freed once read. Copies on the way in or out would each add a value. */
  long held = (long)(TASKS * len / 1024);
  cr_assert_lt(grew, held * 3 / 2, "the client grew by %ld KiB holding %ld KiB", grew, held);
}
