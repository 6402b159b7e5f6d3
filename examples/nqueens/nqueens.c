/* examples/nqueens/nqueens.c: counting the solutions of the n-queens problem by divide and
 * conquer, dc(queens:deep, queens:place, queens:count, queens:sum). A task is a partial
 * board; above the cut-off depth it is divided into one board per safe column of the next
 * row (possibly none: a dead end makes 0 parts and sums to 0), and boards at the cut-off
 * depth are counted sequentially. Checks the count against the known numbers (OEIS A000170).
 * Run `nqueens --help` for the options. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium.h>

#include "bytes.h"
#include "runner.h"

#define PROG "nqueens"

/* Solutions of n-queens for n = 1.., OEIS A000170. */
/* clang-format off */
static const int64_t known[] = {
    1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712, 365596, 2279184, 14772512,
    95815104, 666090624, 4968057848LL, 39029188884LL, 314666222712LL, 2691008701644LL,
    24233937684440LL, 227514171973736LL, 2207893435808352LL, 22317699616364044LL,
    234907967154122528LL};
/* clang-format on */
#define MAX_N ((long long)(sizeof known / sizeof known[0]))

typedef struct options {
  ex_opts_t common;
  long long n, depth;
} options_t;

static void usage(FILE *f, const char *argv0) {
  fprintf(f,
          "usage: %s [--n N] [--depth D] [--servers N | --hosts EP,... | --local] [--stats]\n"
          "  --n N         board size, 1..%lld (default 10)\n"
          "  --depth D     count boards with D queens sequentially, 0..N (default 3)\n",
          argv0, MAX_N);
  ex_opts_usage(f);
}

static int parse_args(int argc, char **argv, options_t *opt) {
  ex_opts_init(&opt->common, PROG);
  opt->n = 10;
  opt->depth = 3;
  const ex_num_flag_t flags[] = {{"--n", 1, MAX_N, &opt->n}, {"--depth", 0, MAX_N, &opt->depth}};
  if (ex_args_parse(&opt->common, argc, argv, flags, 2, usage) != 0) return -1;
  if (opt->depth > opt->n) {
    fprintf(stderr, "%s: --depth %lld is deeper than the board (--n %lld)\n", PROG, opt->depth,
            opt->n);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  options_t opt;
  if (parse_args(argc, argv, &opt) != 0) return 2;
  const ex_opts_t *co = &opt.common;

  lt_skel_t *program = lt_dc("queens:deep", "queens:place", lt_seq("queens:count"), "queens:sum");
  char *text = lt_skel_format(program);
  printf("%s: %s\n", PROG, text != NULL ? text : "?");
  free(text);

  /* The empty board: n, the cut-off depth, no queens. */
  unsigned char task[2] = {(unsigned char)opt.n, (unsigned char)opt.depth};

  lt_eval_t *ev = ex_eval_open(co, program, co->local);
  if (ev == NULL) return 1;
  int status = 1;
  lt_buf_t *r = NULL;
  double t0 = ex_now();
  if (ex_eval_run(co, ev, task, sizeof task, &r) != 0) goto out;
  double seconds = ex_now() - t0;
  if (lt_buf_len(r) != 8) {
    printf("%s: WRONG: the result has %zu bytes, not 8\n", PROG, lt_buf_len(r));
    goto out;
  }
  int64_t got = ex_get_i64(lt_buf_data(r)), want = known[opt.n - 1];
  printf("%s: %lld queens: %" PRId64 " solutions (cut-off depth %lld)\n", PROG, opt.n, got,
         opt.depth);
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
