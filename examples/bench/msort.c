/* examples/bench/msort.c: the `msort` benchmark (shared/BENCHMARKS.md, issue 32). A merge
 * sort by divide and conquer, dc(data:small, data:halve, seq(data:sort), data:merge), of
 * 20 000 000 pseudo-random uint32 (80 MB) with leaves of at most 262 144 values sorted by
 * qsort: one task, on 2 benchmark-owned local servers with the default options, against the
 * sequential evaluator (lt_eval_run_local) in the same run, alternately, --runs times
 * (default 3); the medians are reported with where the time goes (databench.h). Both sides'
 * results are checked: sorted, and the same values as the input (count, sum and xor); the
 * checksum line (the sum of (i + 1) x value i, mod 2^64) is what scripts/bench/peers compares
 * with Dask's.
 *
 *   build/examples/bench/bench_msort [--runs 3]
 *   BENCH_MSORT_N and BENCH_MSORT_CUTOFF change the size and the leaves (defaults 20000000,
 *   262144).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchlib.h"
#include "databench.h"

#define PROG "bench_msort"

static const char usage[] = "usage: bench_msort [--runs N]\n"
                            "  --runs N   runs of each side, the median is reported (default 3)\n";

/* The task and what its result must be. */
typedef struct msort {
  unsigned char *task; /* cut-off, then the values */
  size_t len;
  size_t count;
  uint64_t sum, xor_;
  uint64_t weighted; /* the last result's checksum: the sum of (i + 1) x value i, mod 2^64 */
} msort_t;

static long env_long(const char *name, long def, long min, long max) {
  const char *v = getenv(name);
  long x = v != NULL && *v != '\0' ? strtol(v, NULL, 10) : def;
  return x < min ? min : x > max ? max : x;
}

static int make_task(msort_t *m) {
  m->count = (size_t)env_long("BENCH_MSORT_N", 20000000, 2, 1L << 28);
  uint32_t cutoff = (uint32_t)env_long("BENCH_MSORT_CUTOFF", 262144, 1, 1L << 30);
  m->len = 4 + m->count * 4;
  m->task = malloc(m->len);
  if (m->task == NULL) return -1;
  memcpy(m->task, &cutoff, 4);
  uint32_t x = 2463534242u;
  m->sum = m->xor_ = 0;
  for (size_t i = 0; i < m->count; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    memcpy(m->task + 4 + 4 * i, &x, 4);
    m->sum += x;
    m->xor_ ^= x;
  }
  return 0;
}

/* check tells whether `data` is the input sorted, and keeps its checksum. */
static int check(msort_t *m, const unsigned char *data, size_t len) {
  if (len != m->count * 4) {
    fprintf(stderr, "%s: the result has %zu bytes, not %zu\n", PROG, len, m->count * 4);
    return -1;
  }
  uint64_t sum = 0, xor_ = 0, weighted = 0;
  uint32_t prev = 0;
  for (size_t i = 0; i < m->count; i++) {
    uint32_t v;
    memcpy(&v, data + 4 * i, 4);
    if (i > 0 && v < prev) {
      fprintf(stderr, "%s: the result is not sorted at index %zu\n", PROG, i);
      return -1;
    }
    prev = v;
    sum += v;
    xor_ ^= v;
    weighted += (uint64_t)(i + 1) * v;
  }
  m->weighted = weighted;
  if (sum != m->sum || xor_ != m->xor_) {
    fprintf(stderr, "%s: the result does not hold the input's values\n", PROG);
    return -1;
  }
  return 0;
}

/* work sorts once: one task, its result checked after the clock stops (databench_run stops
 * it when work returns; the check is outside, in run_side). */
typedef struct side {
  const msort_t *m;
  lt_buf_t *result;
} side_t;

static int work(lt_eval_t *ev, void *arg) {
  side_t *s = arg;
  lt_future_t *f = NULL;
  int rc = lt_eval_submit(ev, s->m->task, s->m->len, &f);
  if (rc == LT_OK) rc = lt_future_wait(f, -1, &s->result);
  if (rc == LT_OK && lt_buf_error(s->result) != LT_OK) rc = lt_buf_error(s->result);
  if (rc != LT_OK)
    fprintf(stderr, "%s: %s %s\n", PROG, lt_strerror(rc),
            s->result != NULL ? lt_buf_errmsg(s->result) : "");
  lt_future_release(f);
  return rc == LT_OK ? 0 : -1;
}

static lt_skel_t *program(void) {
  return lt_dc("data:small", "data:halve", lt_seq("data:sort"), "data:merge");
}

/* run_side runs one side (srv NULL: sequential) and checks its result. */
static int run_side(bench_server_t *srv, const char *hosts, databench_run_t *x, void *arg) {
  msort_t *m = arg;
  side_t s = {m, NULL};
  int rc = databench_run(PROG, program(), NULL, srv, hosts, work, &s, x);
  if (rc == 0) rc = check(m, lt_buf_data(s.result), lt_buf_len(s.result));
  lt_buf_free(s.result);
  return rc;
}

int main(int argc, char **argv) {
  int runs = 3;
  int rc = bench_parse_args(argc, argv, usage, &runs, NULL);
  if (rc != 0) return rc > 0 ? 0 : 2;
  msort_t m;
  if (make_task(&m) != 0) {
    fprintf(stderr, "%s: out of memory\n", PROG);
    return 1;
  }
  databench_run_t par[runs], seq[runs];
  int status = databench_compare(PROG, runs, run_side, &m, par, seq) == 0 ? 0 : 1;
  if (status == 0) {
    uint32_t cutoff;
    memcpy(&cutoff, m.task, 4);
    printf("{\"bench\": \"msort\", \"detail\": \"note\", \"note\": \"dc merge sort of %zu "
           "uint32, leaves of at most %u sorted by qsort, 1 task, %d local servers with the "
           "default options against the sequential evaluator, median of %d alternating runs\"}\n",
           m.count, cutoff, DATABENCH_SERVERS, runs);
    databench_report("msort", par, seq, runs);
    databench_checksum("msort", m.weighted);
  }
  free(m.task);
  return status;
}
