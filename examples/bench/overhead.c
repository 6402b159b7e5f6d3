/* examples/bench/overhead.c: the `overhead` benchmark (shared/BENCHMARKS.md). It streams
 * 200 000 tasks of 16 bytes through farm(seq(bench:noop)) on one local server in
 * mode=optimized, submitting from a feeder thread while the main thread reads, and compares
 * the task rate with a raw ZeroMQ DEALER->ROUTER echo of as many 16-byte messages with the
 * runtime's window in flight (2 x max_threads). Each side runs --runs times (default 3),
 * alternately; the medians are reported as one JSON line. The runtime runs with grain=1 (one
 * instruction per task and hand-off); a third side runs it with throttle=on, compared with the
 * runtime without it (throttling must not cost throughput), and a fourth with grain=auto
 * (overhead-grain: tasks of one chain grouped per hand-off), compared with the raw echo's
 * message rate.
 * BENCH_RUNTIME_ONLY=1 runs the first side alone, for scripts that compare two runtimes
 * (scripts/bench/run curve: against a server with CURVE and one without, via BENCH_HOSTS);
 * BENCH_GRAIN sets that side's grain (default 1).
 *
 *   build/examples/bench/bench_overhead [--runs 3] [--tasks 200000]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchlib.h"

#define MAX_THREADS 6                 /* the runtime's default */
#define WINDOW      (2 * MAX_THREADS) /* the runtime's window before it has paced itself */

static const char usage[] = "usage: bench_overhead [--runs N] [--tasks N]\n"
                            "  --runs N   runs of each side, the median is reported (default 3)\n"
                            "  --tasks N  tasks (and raw messages) per run (default 200000)\n";

/* runtime_run streams the tasks through a fresh evaluator and one fresh server; the server's
 * start-up is not timed. *window gets the server's window at the end (the instructions the
 * runtime kept in flight, paced from the round trip and the service time). */
static int runtime_run(long tasks, const char *throttle, const char *grain, double *rate,
                       int *window) {
  const char *const kv[] = {"mode",   "optimized", "max_threads", "6", "throttle",
                            throttle, "grain",     grain,         NULL};
  lt_eval_t *ev =
      bench_eval_open("bench_overhead", lt_farm(lt_seq_with("bench:noop", "echo", 4)), kv, 1);
  if (ev == NULL) return -1;
  double secs = 0;
  int rc = bench_eval_stream("bench_overhead", ev, tasks, BENCH_NOOP_SIZE, bench_noop_make,
                             bench_noop_check, NULL, &secs);
  char *json = NULL;
  if (rc == 0 && lt_eval_stats_json(ev, &json) == LT_OK) {
    const char *w = strstr(json, "\"admit\":");
    if (w != NULL) *window = atoi(w + strlen("\"admit\":"));
    if (getenv("BENCH_STATS") != NULL) fprintf(stderr, "%s\n", json);
  }
  free(json);
  lt_eval_free(ev);
  if (rc == 0) *rate = (double)tasks / secs;
  return rc;
}

int main(int argc, char **argv) {
  int runs = 3;
  long tasks = 200000;
  int rc = bench_parse_args(argc, argv, usage, &runs, &tasks);
  if (rc != 0) return rc > 0 ? 0 : 2;
  double *lt_rate = calloc((size_t)runs, sizeof *lt_rate);
  double *raw_rate = calloc((size_t)runs, sizeof *raw_rate);
  double *thr_rate = calloc((size_t)runs, sizeof *thr_rate);
  double *grain_rate = calloc((size_t)runs, sizeof *grain_rate);
  if (lt_rate == NULL || raw_rate == NULL || thr_rate == NULL || grain_rate == NULL) {
    fprintf(stderr, "bench_overhead: out of memory\n");
    return 1;
  }
  const char *only = getenv("BENCH_RUNTIME_ONLY");
  int runtime_only = only != NULL && strcmp(only, "1") == 0;
  const char *grain = getenv("BENCH_GRAIN") != NULL ? getenv("BENCH_GRAIN") : "1";
  int status = 0;
  for (int r = 0; r < runs && status == 0; r++) {
    int window = WINDOW;
    int unused = 0;
    if (runtime_run(tasks, "off", grain, &lt_rate[r], &window) != 0 ||
        (!runtime_only && (runtime_run(tasks, "on", "1", &thr_rate[r], &unused) != 0 ||
                           runtime_run(tasks, "off", "auto", &grain_rate[r], &unused) != 0))) {
      status = 1;
      break;
    }
    if (runtime_only) {
      fprintf(stderr, "bench_overhead: run %d: %.0f tasks/s\n", r + 1, lt_rate[r]);
      continue;
    }
    /* The raw echo keeps as many messages in flight as the runtime did. */
    double secs = 0;
    if (window < 1) window = WINDOW;
    if (bench_echo_run(tasks, window, BENCH_NOOP_SIZE, &secs, NULL) != 0) {
      status = 1;
      break;
    }
    raw_rate[r] = (double)tasks / secs;
    fprintf(stderr,
            "bench_overhead: run %d: %.0f tasks/s (throttle on: %.0f, grain=auto: %.0f), raw "
            "echo %.0f msgs/s (window %d)\n",
            r + 1, lt_rate[r], thr_rate[r], grain_rate[r], raw_rate[r], window);
  }
  if (status == 0 && runtime_only) {
    bench_json("overhead", "tasks_per_s", bench_median(lt_rate, (size_t)runs), 0, "tasks/s");
  } else if (status == 0) {
    bench_json("overhead", "tasks_per_s", bench_median(lt_rate, (size_t)runs),
               bench_median(raw_rate, (size_t)runs), "tasks/s");
    /* Throttling must not cost throughput on tiny tasks: the same run with throttle=on. */
    bench_json("overhead", "tasks_per_s_throttle", bench_median(thr_rate, (size_t)runs),
               bench_median(lt_rate, (size_t)runs), "tasks/s");
    bench_json("overhead-grain", "tasks_per_s", bench_median(grain_rate, (size_t)runs),
               bench_median(raw_rate, (size_t)runs), "tasks/s");
  }
  free(lt_rate);
  free(raw_rate);
  free(thr_rate);
  free(grain_rate);
  return status;
}
