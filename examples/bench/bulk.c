/* examples/bench/bulk.c: the `bulk` benchmark (shared/BENCHMARKS.md). Values of 64 MiB
 * through farm(seq(bench:touch)) on one spawned local server (each comes back as a new value
 * of the same size), fed while the results are read, against a raw ZeroMQ DEALER->ROUTER
 * echo of as many 64 MiB messages with as many in flight as the runtime may have
 * (max_pending). The figure is bytes a second both ways (sent + received over the time from
 * the first submit to the last result), with each value made in a buffer of its own and
 * handed over without a copy (lt_eval_submit_owned); a second figure submits them with
 * lt_eval_submit (copied from one buffer). Each side runs --runs times (default 3),
 * alternately; the medians are reported as JSON lines.
 *
 *   build/examples/bench/bench_bulk [--runs 3] [--tasks 16]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchlib.h"

#define PROG       "bench_bulk"
#define VALUE_SIZE ((size_t)64 << 20)
#define IN_FLIGHT  4 /* max_pending of the runtime, window of the raw echo */

static const char usage[] = "usage: bench_bulk [--runs N] [--tasks N]\n"
                            "  --runs N   runs of each side, the median is reported (default 3)\n"
                            "  --tasks N  values (and raw messages) per run (default 16)\n";

/* Value i: its first byte is i, the rest a fixed pattern; bench:touch answers with a copy
 * whose first byte is one more. */
static void make_value(long i, unsigned char *buf, void *arg) {
  (void)arg;
  memset(buf, 0x5a, VALUE_SIZE);
  buf[0] = (unsigned char)i;
}

static int check_value(long i, const unsigned char *data, size_t len, void *arg) {
  (void)arg;
  return len == VALUE_SIZE && data[0] == (unsigned char)(i + 1) && data[1] == 0x5a &&
                 data[VALUE_SIZE - 1] == 0x5a
             ? 0
             : -1;
}

/* runtime_rate streams the values through a fresh evaluator and server, handed over without
 * a copy or (`copied`) copied: bytes/s both ways. */
static int runtime_rate(long tasks, int copied, double *rate) {
  char pending[16];
  snprintf(pending, sizeof pending, "%d", IN_FLIGHT);
  const char *const kv[] = {"mode", "optimized", "max_pending", pending, NULL};
  lt_eval_t *ev = bench_eval_open(PROG, lt_farm(lt_seq("bench:touch")), kv, 1);
  if (ev == NULL) return -1;
  double secs = 0;
  int rc =
      copied ? bench_eval_stream(PROG, ev, tasks, VALUE_SIZE, make_value, check_value, NULL, &secs)
             : bench_eval_stream_owned(PROG, ev, tasks, VALUE_SIZE, make_value, check_value, NULL,
                                       &secs);
  lt_eval_free(ev);
  if (rc == 0) *rate = 2.0 * (double)tasks * (double)VALUE_SIZE / secs;
  return rc;
}

int main(int argc, char **argv) {
  int runs = 3;
  long tasks = 16;
  int rc = bench_parse_args(argc, argv, usage, &runs, &tasks);
  if (rc != 0) return rc > 0 ? 0 : 2;
  double lt_rate[runs], copied_rate[runs], raw_rate[runs];
  for (int r = 0; r < runs; r++) {
    double secs = 0;
    if (runtime_rate(tasks, 0, &lt_rate[r]) != 0 || runtime_rate(tasks, 1, &copied_rate[r]) != 0 ||
        bench_echo_run(tasks, IN_FLIGHT, VALUE_SIZE, &secs, NULL) != 0)
      return 1;
    raw_rate[r] = 2.0 * (double)tasks * (double)VALUE_SIZE / secs;
    fprintf(stderr, "%s: run %d: %.0f MB/s both ways (copied: %.0f), raw echo %.0f MB/s\n", PROG,
            r + 1, lt_rate[r] / 1e6, copied_rate[r] / 1e6, raw_rate[r] / 1e6);
  }
  printf("{\"bench\": \"bulk\", \"detail\": \"note\", \"note\": \"%ld values of 64 MiB through "
         "farm(bench:touch), 1 server, max_pending %d; raw echo window %d; bytes_per_s: handed "
         "over (lt_eval_submit_owned), bytes_per_s_copied: lt_eval_submit\"}\n",
         tasks, IN_FLIGHT, IN_FLIGHT);
  double raw = bench_median(raw_rate, (size_t)runs);
  bench_json("bulk", "bytes_per_s", bench_median(lt_rate, (size_t)runs), raw, "B/s");
  bench_json("bulk", "bytes_per_s_copied", bench_median(copied_rate, (size_t)runs), raw, "B/s");
  return 0;
}
