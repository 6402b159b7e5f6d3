/* examples/bench/latency.c: the `latency` benchmark (shared/BENCHMARKS.md). One task at a
 * time through farm(seq(bench:noop)) on one local server in mode=plain: submit, wait for the
 * result, repeat (5000 rounds after 200 unmeasured warm-up rounds). The baseline is a raw
 * ZeroMQ DEALER->ROUTER echo of 16 bytes with a window of 1. Reports the median round trip
 * of each side (median over --runs runs of the per-run medians) as one JSON line.
 *
 *   build/examples/bench/bench_latency [--runs 3] [--tasks 5000]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchlib.h"

#define TASK_SIZE 16
#define WARMUP    200

static const char usage[] = "usage: bench_latency [--runs N] [--tasks N]\n"
                            "  --runs N   runs of each side, the median is reported (default 3)\n"
                            "  --tasks N  measured round trips per run (default 5000)\n";

/* runtime_run makes `rounds` round trips (after the warm-up) on a fresh evaluator and server
 * and returns their median in *median_us. */
static int runtime_run(long rounds, double *rtt, double *median_us) {
  static const char *const kv[] = {"mode", "plain", NULL};
  lt_eval_t *ev =
      bench_eval_open("bench_latency", lt_farm(lt_seq_with("bench:noop", "echo", 4)), kv, 1);
  if (ev == NULL) return -1;
  unsigned char task[TASK_SIZE];
  memset(task, 0x5a, sizeof task);
  int rc = LT_OK;
  for (long i = 0; i < WARMUP + rounds; i++) {
    memcpy(task, &i, sizeof i);
    lt_buf_t *b = NULL;
    double t0 = ex_now();
    if ((rc = lt_eval_submit(ev, task, sizeof task, NULL)) != LT_OK ||
        (rc = lt_eval_next(ev, &b)) != LT_OK) {
      fprintf(stderr, "bench_latency: round %ld: %s\n", i, lt_strerror(rc));
      break;
    }
    double t1 = ex_now();
    int ok = lt_buf_error(b) == LT_OK && lt_buf_len(b) == TASK_SIZE &&
             memcmp(lt_buf_data(b), task, TASK_SIZE) == 0;
    if (!ok) fprintf(stderr, "bench_latency: round %ld: bad result: %s\n", i, lt_buf_errmsg(b));
    lt_buf_free(b);
    if (!ok) {
      rc = LT_EPROTO;
      break;
    }
    if (i >= WARMUP) rtt[i - WARMUP] = (t1 - t0) * 1e6;
  }
  lt_eval_free(ev);
  if (rc != LT_OK) return -1;
  *median_us = bench_median(rtt, (size_t)rounds);
  return 0;
}

/* raw_run does the same over the raw echo. */
static int raw_run(long rounds, double *rtt, double *median_us) {
  double secs = 0;
  if (bench_echo_run(WARMUP + rounds, 1, TASK_SIZE, &secs, rtt) != 0) return -1;
  *median_us = bench_median(rtt + WARMUP, (size_t)rounds);
  return 0;
}

int main(int argc, char **argv) {
  int runs = 3;
  long rounds = 5000;
  int rc = bench_parse_args(argc, argv, usage, &runs, &rounds);
  if (rc != 0) return rc > 0 ? 0 : 2;
  double *rtt = calloc((size_t)(WARMUP + rounds), sizeof *rtt);
  double *lt_med = calloc((size_t)runs, sizeof *lt_med);
  double *raw_med = calloc((size_t)runs, sizeof *raw_med);
  if (rtt == NULL || lt_med == NULL || raw_med == NULL) {
    fprintf(stderr, "bench_latency: out of memory\n");
    return 1;
  }
  int status = 0;
  for (int r = 0; r < runs && status == 0; r++) {
    if (raw_run(rounds, rtt, &raw_med[r]) != 0 || runtime_run(rounds, rtt, &lt_med[r]) != 0)
      status = 1;
    else
      fprintf(stderr, "bench_latency: run %d: median %.1f us, raw echo %.1f us\n", r + 1, lt_med[r],
              raw_med[r]);
  }
  if (status == 0)
    bench_json("latency", "median_rtt", bench_median(lt_med, (size_t)runs),
               bench_median(raw_med, (size_t)runs), "us");
  free(rtt);
  free(lt_med);
  free(raw_med);
  return status;
}
