/* examples/sort/sort.c: merge sort by divide and conquer. Sorts an array of pseudo-random
 * int64 with dc(msort:small, msort:halves, msort:sort, msort:merge): arrays longer than the
 * cut-off are halved, shorter ones are sorted sequentially on one server, and the combine
 * merges two sorted halves. Checks that the result is sorted and holds the input's values.
 * Run `sort --help` for the options. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium.h>

#include "bytes.h"
#include "runner.h"

#define PROG       "sort"
#define MAX_SIZE   (1LL << 24) /* values; 128 MiB of task */
#define MAX_REPORT 5

typedef struct options {
  ex_opts_t common;
  long long size, cutoff, seed;
} options_t;

static void usage(FILE *f, const char *argv0) {
  fprintf(f,
          "usage: %s [--size N] [--cutoff C] [--seed S] [--servers N | --hosts EP,... | --local]"
          " [--stats]\n"
          "  --size N      number of int64 values, 0..%lld (default 1000000)\n"
          "  --cutoff C    sort arrays of at most C values sequentially (default 65536)\n"
          "  --seed S      seed of the pseudo-random values (default 1)\n",
          argv0, MAX_SIZE);
  ex_opts_usage(f);
}

static int parse_args(int argc, char **argv, options_t *opt) {
  ex_opts_init(&opt->common, PROG);
  opt->size = 1000000;
  opt->cutoff = 65536;
  opt->seed = 1;
  const ex_num_flag_t flags[] = {{"--size", 0, MAX_SIZE, &opt->size},
                                 {"--cutoff", 1, MAX_SIZE, &opt->cutoff},
                                 {"--seed", 0, INT64_MAX, &opt->seed}};
  return ex_args_parse(&opt->common, argc, argv, flags, 3, usage);
}

/* next_random is splitmix64: every seed gives a well-mixed sequence. */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* check returns the number of problems of `got` (len bytes) as the sort of want[n]: wrong
 * size, out of order, or other values than the input's. want is sorted here. */
static long long check(const unsigned char *got, size_t len, int64_t *want, size_t n) {
  if (len != n * 8) {
    printf("%s: WRONG: the result has %zu bytes, not %zu\n", PROG, len, n * 8);
    return 1;
  }
  long long bad = 0;
  for (size_t i = 1; i < n; i++) {
    if (ex_get_i64(got + (i - 1) * 8) > ex_get_i64(got + i * 8)) {
      if (bad < MAX_REPORT) printf("%s: WRONG: not sorted at index %zu\n", PROG, i);
      bad++;
    }
  }
  qsort(want, n, sizeof *want, cmp_i64);
  for (size_t i = 0; i < n; i++) {
    if (ex_get_i64(got + i * 8) != want[i]) {
      if (bad < MAX_REPORT)
        printf("%s: WRONG: value %zu is %" PRId64 ", expected %" PRId64 "\n", PROG, i,
               ex_get_i64(got + i * 8), want[i]);
      bad++;
    }
  }
  return bad;
}

int main(int argc, char **argv) {
  options_t opt;
  if (parse_args(argc, argv, &opt) != 0) return 2;
  const ex_opts_t *co = &opt.common;

  size_t n = (size_t)opt.size;
  unsigned char *task = malloc(8 + n * 8);
  int64_t *want = malloc(n ? n * sizeof *want : 1);
  if (task == NULL || want == NULL) {
    fprintf(stderr, "%s: out of memory for %zu values\n", PROG, n);
    free(task);
    free(want);
    return 1;
  }
  ex_put_u64(task, (uint64_t)opt.cutoff);
  uint64_t state = (uint64_t)opt.seed;
  for (size_t i = 0; i < n; i++) {
    want[i] = (int64_t)next_random(&state);
    ex_put_i64(task + 8 + i * 8, want[i]);
  }

  lt_skel_t *program = lt_dc("msort:small", "msort:halves", lt_seq("msort:sort"), "msort:merge");
  char *text = lt_skel_format(program);
  printf("%s: %s\n", PROG, text != NULL ? text : "?");
  free(text);

  int status = 1;
  lt_buf_t *r = NULL;
  lt_eval_t *ev = ex_eval_open(co, program, co->local);
  if (ev == NULL) goto out;
  double t0 = ex_now();
  if (ex_eval_run(co, ev, task, 8 + n * 8, &r) != 0) goto out;
  double seconds = ex_now() - t0;
  printf("%s: %zu values sorted with cut-off %lld\n", PROG, n, opt.cutoff);
  ex_eval_report(co, ev, co->local, seconds);
  long long bad = check(lt_buf_data(r), lt_buf_len(r), want, n);
  if (bad != 0) {
    printf("%s: WRONG: %lld problems\n", PROG, bad);
    goto out;
  }
  printf("%s: correct (sorted, same values as the input)\n", PROG);
  status = 0;
out:
  lt_buf_free(r);
  lt_eval_free(ev);
  free(task);
  free(want);
  return status;
}
