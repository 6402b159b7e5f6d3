/* examples/bench/dc.c: the `dc` benchmark (shared/BENCHMARKS.md). Divide and conquer with a
 * sequential cut-off, the programs of examples/fib and examples/nqueens: fib(N) as
 * dc(fibo:small, fibo:divide, fibo:seq, fibo:add) and the N-queens count as
 * dc(queens:deep, queens:place, queens:count, queens:sum), each on 2 spawned local servers
 * against the sequential reference evaluator (lt_eval_run_local: every instruction in this
 * process, one at a time). Each side runs --runs times (default 3), alternately; the medians
 * are reported: the time on the servers against the sequential time (ratio = 1 / speed-up)
 * and the instructions a second of each (the dispatcher's rate on this graph). The servers'
 * start-up is not timed. The sequential evaluator is the oracle: both sides must give the
 * same answer.
 *
 *   build/examples/bench/bench_dc [--runs 3]
 *   BENCH_FIB_N, BENCH_FIB_CUTOFF, BENCH_QUEENS_N, BENCH_QUEENS_DEPTH change the problems
 *   (defaults 44, 32, 15, 3).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchlib.h"
#include "bytes.h" /* ex_put_i64, ex_get_i64 */

#ifndef LT_EXAMPLE_MODULES
#define LT_EXAMPLE_MODULES "."
#endif

#define PROG    "bench_dc"
#define SERVERS 2

static const char usage[] = "usage: bench_dc [--runs N]\n"
                            "  --runs N   runs of each side, the median is reported (default 3)\n";

/* A problem: its program and its one task. */
typedef struct problem {
  const char *name; /* "fib" or "nqueens": the metrics' prefix */
  lt_skel_t *(*program)(void);
  unsigned char task[16];
  size_t task_len;
  char what[64]; /* e.g. "fib(44), cut-off 32" */
} problem_t;

static lt_skel_t *fib_program(void) {
  return lt_dc("fibo:small", "fibo:divide", lt_seq("fibo:seq"), "fibo:add");
}

static lt_skel_t *queens_program(void) {
  return lt_dc("queens:deep", "queens:place", lt_seq("queens:count"), "queens:sum");
}

static long env_long(const char *name, long def) {
  const char *v = getenv(name);
  return v != NULL && *v != '\0' ? strtol(v, NULL, 10) : def;
}

static void fib_problem(problem_t *p) {
  long n = env_long("BENCH_FIB_N", 44), cut = env_long("BENCH_FIB_CUTOFF", 32);
  p->name = "fib";
  p->program = fib_program;
  ex_put_i64(p->task, n);
  ex_put_i64(p->task + 8, cut);
  p->task_len = 16;
  snprintf(p->what, sizeof p->what, "fib(%ld), cut-off %ld", n, cut);
}

static void queens_problem(problem_t *p) {
  long n = env_long("BENCH_QUEENS_N", 15), depth = env_long("BENCH_QUEENS_DEPTH", 3);
  p->name = "nqueens";
  p->program = queens_program;
  p->task[0] = (unsigned char)n;
  p->task[1] = (unsigned char)depth;
  p->task_len = 2;
  snprintf(p->what, sizeof p->what, "nqueens(%ld), cut-off depth %ld", n, depth);
}

/* open_local makes an evaluator for `program` on the sequential evaluator. */
static lt_eval_t *open_local(lt_skel_t *program) {
  lt_eval_t *ev = NULL;
  int rc = lt_eval_new(&ev, program);
  if (rc == LT_OK && getenv("LITHIUM_MODULES") == NULL)
    rc = lt_eval_set(ev, "modules", LT_EXAMPLE_MODULES);
  if (rc == LT_OK) rc = lt_eval_run_local(ev);
  if (rc != LT_OK) {
    fprintf(stderr, "%s: the sequential evaluator: %s\n", PROG, lt_strerror(rc));
    lt_eval_free(ev);
    return NULL;
  }
  return ev;
}

/* run_once solves `p` once, on the servers or sequentially, and gives the seconds from the
 * submit to the result, the instructions the evaluator counted and the answer. */
static int run_once(const problem_t *p, int local, double *seconds, double *instructions,
                    int64_t *answer) {
  lt_eval_t *ev =
      local ? open_local(p->program()) : bench_eval_open(PROG, p->program(), NULL, SERVERS);
  if (ev == NULL) return -1;
  double t0 = ex_now();
  lt_future_t *f = NULL;
  lt_buf_t *r = NULL;
  int rc = lt_eval_submit(ev, p->task, p->task_len, &f);
  if (rc == LT_OK) rc = lt_future_wait(f, -1, &r);
  *seconds = ex_now() - t0;
  if (rc == LT_OK && lt_buf_error(r) != LT_OK) rc = lt_buf_error(r);
  if (rc == LT_OK && lt_buf_len(r) != 8) {
    fprintf(stderr, "%s: %s: the answer has %zu bytes, not 8\n", PROG, p->what, lt_buf_len(r));
    rc = LT_EINVAL;
  } else if (rc == LT_OK) {
    *answer = ex_get_i64(lt_buf_data(r));
  } else {
    fprintf(stderr, "%s: %s: %s %s\n", PROG, p->what, lt_strerror(rc), r ? lt_buf_errmsg(r) : "");
  }
  char *json = NULL;
  if (rc == LT_OK && lt_eval_stats_json(ev, &json) == LT_OK)
    *instructions = (double)ex_stat_u64(json, "instructions");
  free(json);
  lt_buf_free(r);
  lt_future_release(f);
  lt_eval_free(ev);
  return rc == LT_OK ? 0 : -1;
}

/* measure runs both sides of `p` `runs` times, alternately, and prints its JSON lines. */
static int measure(const problem_t *p, int runs) {
  double t_par[runs], t_seq[runs], ips_par[runs], ips_seq[runs], n_par = 0, n_seq = 0;
  for (int r = 0; r < runs; r++) {
    int64_t got = 0, want = 0;
    if (run_once(p, 0, &t_par[r], &n_par, &got) != 0 ||
        run_once(p, 1, &t_seq[r], &n_seq, &want) != 0)
      return -1;
    if (got != want) {
      fprintf(stderr, "%s: %s: %lld on the servers, %lld sequentially\n", PROG, p->what,
              (long long)got, (long long)want);
      return -1;
    }
    ips_par[r] = n_par / t_par[r];
    ips_seq[r] = n_seq / t_seq[r];
    fprintf(stderr, "%s: %s run %d: %.3f s on %d servers, %.3f s sequential (%.0f instructions)\n",
            PROG, p->what, r + 1, t_par[r], SERVERS, t_seq[r], n_par);
  }
  char metric[64];
  printf("{\"bench\": \"dc\", \"detail\": \"note\", \"note\": \"%s: %.0f instructions on %d "
         "servers, %.0f sequential\"}\n",
         p->what, n_par, SERVERS, n_seq);
  snprintf(metric, sizeof metric, "%s_time", p->name);
  double tp = bench_median(t_par, (size_t)runs), ts = bench_median(t_seq, (size_t)runs);
  bench_json("dc", metric, tp, ts, "s");
  snprintf(metric, sizeof metric, "%s_speedup", p->name);
  bench_json("dc", metric, ts / tp, 0, "x");
  snprintf(metric, sizeof metric, "%s_instructions_per_s", p->name);
  bench_json("dc", metric, bench_median(ips_par, (size_t)runs), bench_median(ips_seq, (size_t)runs),
             "instr/s");
  return 0;
}

int main(int argc, char **argv) {
  int runs = 3;
  int rc = bench_parse_args(argc, argv, usage, &runs, NULL);
  if (rc != 0) return rc > 0 ? 0 : 2;
  problem_t fib, queens;
  fib_problem(&fib);
  queens_problem(&queens);
  return measure(&fib, runs) == 0 && measure(&queens, runs) == 0 ? 0 : 1;
}
