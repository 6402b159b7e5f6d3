/* examples/fib/fib.c: divide and conquer with a sequential cut-off. Computes fib(n) with
 * dc(fibo:small, fibo:divide, fibo:seq, fibo:add): a task (n, cut-off) with n >= cut-off is
 * divided into (n-1) and (n-2), smaller ones run the naive recursion on one server, and the
 * combine adds the two halves. Checks the result against an iterative fib.
 * Run `fib --help` for the options. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium.h>

#include "bytes.h"
#include "runner.h"

#define PROG    "fib"
#define MAX_N   92 /* fib(92) is the largest Fibonacci number in an int64 */
#define MAX_CUT 46 /* fibo:seq refuses n > 45 */

typedef struct options {
  ex_opts_t common;
  long long n, cutoff;
} options_t;

static void usage(FILE *f, const char *argv0) {
  fprintf(f,
          "usage: %s [--n N] [--cutoff C] [--servers N | --hosts EP,... | --local] [--stats]\n"
          "  --n N         compute fib(N), 0..%d (default 30)\n"
          "  --cutoff C    solve tasks with n < C sequentially, 2..%d (default 15)\n",
          argv0, MAX_N, MAX_CUT);
  ex_opts_usage(f);
}

static int parse_args(int argc, char **argv, options_t *opt) {
  ex_opts_init(&opt->common, PROG);
  opt->n = 30;
  opt->cutoff = 15;
  const ex_num_flag_t flags[] = {{"--n", 0, MAX_N, &opt->n},
                                 {"--cutoff", 2, MAX_CUT, &opt->cutoff}};
  return ex_args_parse(&opt->common, argc, argv, flags, 2, usage);
}

static int64_t fib_iter(int64_t n) {
  int64_t a = 0, b = 1;
  for (int64_t i = 0; i < n; i++) {
    int64_t c = a + b;
    a = b;
    b = c;
  }
  return a;
}

/* base_cases counts the leaves of the dc tree, fibo:small's decisions replayed. */
static int64_t base_cases(int64_t n, int64_t cutoff) {
  int64_t leaves[MAX_N + 1];
  for (int64_t i = 0; i <= n; i++)
    leaves[i] = (i < cutoff || i < 2) ? 1 : leaves[i - 1] + leaves[i - 2];
  return leaves[n];
}

int main(int argc, char **argv) {
  options_t opt;
  if (parse_args(argc, argv, &opt) != 0) return 2;
  const ex_opts_t *co = &opt.common;

  lt_skel_t *program = lt_dc("fibo:small", "fibo:divide", lt_seq("fibo:seq"), "fibo:add");
  char *text = lt_skel_format(program);
  printf("%s: %s\n", PROG, text != NULL ? text : "?");
  free(text);

  unsigned char task[16];
  ex_put_i64(task, opt.n);
  ex_put_i64(task + 8, opt.cutoff);

  lt_eval_t *ev = ex_eval_open(co, program, co->local);
  if (ev == NULL) return 1;
  double t0 = ex_now();
  lt_buf_t *r = NULL;
  int status = 1;
  if (ex_eval_run(co, ev, task, sizeof task, &r) != 0) goto out;
  double seconds = ex_now() - t0;

  int64_t want = fib_iter(opt.n);
  if (lt_buf_len(r) != 8) {
    printf("%s: WRONG: the result has %zu bytes, not 8\n", PROG, lt_buf_len(r));
    goto out;
  }
  int64_t got = ex_get_i64(lt_buf_data(r));
  printf("%s: fib(%lld) = %" PRId64 " with cut-off %lld (%" PRId64 " base cases)\n", PROG, opt.n,
         got, opt.cutoff, base_cases(opt.n, opt.cutoff));
  ex_eval_report(co, ev, co->local, seconds);
  if (got != want) {
    printf("%s: WRONG: expected %" PRId64 "\n", PROG, want);
    goto out;
  }
  printf("%s: correct\n", PROG);
  status = 0;
out:
  lt_buf_free(r);
  lt_eval_free(ev);
  return status;
}
