/* examples/bench/bigpipe.c: the `bigpipe` benchmark (shared/BENCHMARKS.md, issue 32). A
 * 3-stage pipeline of large values, farm(pipe(seq(data:gen), seq(data:xform),
 * seq(data:sum))): each of 20 tasks is an 8-byte seed, gen makes 16 MiB from it, xform a new
 * 16 MiB from that, sum 8 bytes; on 2 benchmark-owned local servers with the default options
 * (the 16 MiB values stay on the servers: lazy binding), against the sequential evaluator
 * (lt_eval_run_local) in the same run, alternately, --runs times (default 3); the medians are
 * reported with where the time goes (databench.h). The servers' CPU against the kernels' own
 * is the figure of the output pool (target <= 1.3). Both sides must give the same sums; the
 * checksum line (FNV-1a 64 of the sums) is what scripts/bench/peers compares with Dask's.
 *
 *   build/examples/bench/bench_bigpipe [--runs 3] [--tasks 20]
 *   BENCH_BIGPIPE_MIB changes the size of the values (default 16); BENCH_BIGPIPE_INPLACE=1
 *   makes the transform data:xform_inplace (lt_call_output_from_input: in place on the
 *   servers, a copy in the sequential evaluator).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchlib.h"
#include "databench.h"

#define PROG      "bench_bigpipe"
#define MAX_TASKS 10000

static const char usage[] = "usage: bench_bigpipe [--runs N] [--tasks N]\n"
                            "  --runs N   runs of each side, the median is reported (default 3)\n"
                            "  --tasks N  tasks (seeds) per run, at most 10000 (default 20)\n";

/* The tasks and the sums they gave: on the servers, then sequentially. */
typedef struct side {
  long tasks;
  uint64_t *sums;
  uint64_t *par_sums; /* the servers' of this round, for the check of the sequential side */
} side_t;

static int work(lt_eval_t *ev, void *arg) {
  side_t *s = arg;
  lt_future_t **f = calloc((size_t)s->tasks, sizeof *f);
  if (f == NULL) return -1;
  int rc = LT_OK;
  for (long i = 0; i < s->tasks && rc == LT_OK; i++) {
    uint64_t seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
    rc = lt_eval_submit(ev, &seed, sizeof seed, &f[i]);
  }
  for (long i = 0; i < s->tasks && rc == LT_OK; i++) {
    lt_buf_t *r = NULL;
    rc = lt_future_wait(f[i], -1, &r);
    if (rc == LT_OK && lt_buf_error(r) != LT_OK) rc = lt_buf_error(r);
    if (rc == LT_OK && lt_buf_len(r) != 8) rc = LT_EINVAL;
    if (rc == LT_OK)
      memcpy(&s->sums[i], lt_buf_data(r), 8);
    else
      fprintf(stderr, "%s: task %ld: %s %s\n", PROG, i, lt_strerror(rc),
              r != NULL ? lt_buf_errmsg(r) : "");
    lt_buf_free(r);
  }
  for (long i = 0; i < s->tasks; i++)
    lt_future_release(f[i]);
  free(f);
  return rc == LT_OK ? 0 : -1;
}

static lt_skel_t *program(void) {
  const char *mib = getenv("BENCH_BIGPIPE_MIB");
  lt_skel_t *gen =
      mib != NULL && *mib != '\0' ? lt_seq_with("data:gen", mib, strlen(mib)) : lt_seq("data:gen");
  const char *inplace = getenv("BENCH_BIGPIPE_INPLACE");
  const char *xform =
      inplace != NULL && strcmp(inplace, "1") == 0 ? "data:xform_inplace" : "data:xform";
  return lt_farm(lt_pipeline(gen, lt_seq(xform), lt_seq("data:sum"), NULL));
}

/* run_side runs one side (srv NULL: sequential, which must give the sums the servers gave
 * just before). */
static int run_side(bench_server_t *srv, const char *hosts, databench_run_t *x, void *arg) {
  side_t *s = arg;
  side_t one = {s->tasks, srv != NULL ? s->par_sums : s->sums, NULL};
  if (databench_run(PROG, program(), NULL, srv, hosts, work, &one, x) != 0) return -1;
  if (srv == NULL && memcmp(s->sums, s->par_sums, (size_t)s->tasks * sizeof *s->sums) != 0) {
    fprintf(stderr, "%s: the servers' sums differ from the sequential evaluator's\n", PROG);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  int runs = 3;
  long tasks = 20;
  int rc = bench_parse_args(argc, argv, usage, &runs, &tasks);
  if (rc != 0) return rc > 0 ? 0 : 2;
  if (tasks > MAX_TASKS) {
    fprintf(stderr, "%s: at most %d tasks\n%s", PROG, MAX_TASKS, usage);
    return 2;
  }
  uint64_t *sums = calloc(2 * (size_t)tasks, sizeof *sums);
  if (sums == NULL) return 1;
  side_t side = {tasks, sums, sums + tasks};
  databench_run_t par[runs], seq[runs];
  int status = databench_compare(PROG, runs, run_side, &side, par, seq) == 0 ? 0 : 1;
  if (status == 0) {
    const char *mib = getenv("BENCH_BIGPIPE_MIB");
    const char *inplace = getenv("BENCH_BIGPIPE_INPLACE");
    printf("{\"bench\": \"bigpipe\", \"detail\": \"note\", \"note\": \"farm(pipe(gen, %s, "
           "sum)), %ld tasks, values of %s MiB, %d local servers with the default options "
           "against the sequential evaluator, median of %d alternating runs\"}\n",
           inplace != NULL && strcmp(inplace, "1") == 0 ? "xform_inplace" : "xform", tasks,
           mib != NULL && *mib != '\0' ? mib : "16", DATABENCH_SERVERS, runs);
    databench_report("bigpipe", par, seq, runs);
    databench_checksum("bigpipe", databench_fnv1a(sums, (size_t)tasks * sizeof *sums));
  }
  free(sums);
  return status;
}
