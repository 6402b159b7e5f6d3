/* examples/bench/lookahead.c: the `lookahead` benchmark (shared/BENCHMARKS.md). A farm of
 * 600 tasks that each sleep 2 ms (bench:sleep "2") on one local server with 6 worker threads
 * and max_threads=6, once with lookahead=on and once with lookahead=off (lazy=off in both).
 * Without lookahead one instruction is in flight per server, so 5 of its 6 workers idle; the
 * ratio of the throughputs is the figure (6 is ideal). Each setting runs --runs times
 * (default 3), alternately; the medians are reported as one JSON line.
 *
 *   build/examples/bench/bench_lookahead [--runs 3] [--tasks 600]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchlib.h"

static const char usage[] =
    "usage: bench_lookahead [--runs N] [--tasks N]\n"
    "  --runs N   runs of each setting, the median is reported (default 3)\n"
    "  --tasks N  tasks per run (default 600)\n";

/* one_run runs the farm with lookahead `on` ("on"/"off") and gives its throughput. */
static int one_run(const char *on, long tasks, double *rate) {
  const char *const kv[] = {"lookahead",      on,  "lazy", "off", "max_threads", "6",
                            "server_threads", "6", NULL};
  lt_eval_t *ev =
      bench_eval_open("bench_lookahead", lt_farm(lt_seq_with("bench:sleep", "2", 1)), kv, 1);
  if (ev == NULL) return -1;
  double secs = 0;
  int rc = bench_eval_stream("bench_lookahead", ev, tasks, BENCH_INDEX_SIZE, bench_index_make,
                             bench_index_check, NULL, &secs);
  lt_eval_free(ev);
  if (rc == 0) *rate = (double)tasks / secs;
  return rc;
}

int main(int argc, char **argv) {
  int runs = 3;
  long tasks = 600;
  int rc = bench_parse_args(argc, argv, usage, &runs, &tasks);
  if (rc != 0) return rc > 0 ? 0 : 2;
  double *on = calloc((size_t)runs, sizeof *on);
  double *off = calloc((size_t)runs, sizeof *off);
  if (on == NULL || off == NULL) {
    fprintf(stderr, "bench_lookahead: out of memory\n");
    return 1;
  }
  int status = 0;
  for (int r = 0; r < runs && status == 0; r++) {
    if (one_run("off", tasks, &off[r]) != 0 || one_run("on", tasks, &on[r]) != 0)
      status = 1;
    else
      fprintf(stderr, "bench_lookahead: run %d: lookahead on %.0f tasks/s, off %.0f tasks/s\n",
              r + 1, on[r], off[r]);
  }
  if (status == 0)
    bench_json("lookahead", "throughput", bench_median(on, (size_t)runs),
               bench_median(off, (size_t)runs), "tasks/s");
  free(on);
  free(off);
  return status;
}
