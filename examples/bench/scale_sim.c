/* examples/bench/scale_sim.c: the `scale-sim` benchmark (shared/BENCHMARKS.md). A simulated
 * large grid: 64 local servers with 6 worker threads each and a farm of tasks that sleep
 * 20 ms (bench:sleep, virtual compute), so that two cores can host 384 busy "processors"
 * while the client's scheduler sees a big grid. Efficiency = ideal makespan (tasks x 20 ms /
 * (servers x threads)) / actual. Single-threaded apart from benchlib's feeder thread.
 *
 *   bench_scale_sim [--servers 64] [--threads 6] [--tasks N] [--ms 20] [--max-pending N]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchlib.h"

#define MAX_SERVERS 256 /* lt_eval_spawn_local's limit */
#define NUM_TEXT    24

static const char usage[] =
    "usage: bench_scale_sim [options]\n"
    "  --servers N      local servers to spawn (default 64, at most 256)\n"
    "  --threads N      worker threads per server and thread window (default 6)\n"
    "  --tasks N        tasks (default servers x threads x 20)\n"
    "  --ms N           milliseconds each task sleeps (default 20)\n"
    "  --max-pending N  the client's max_pending (default: the client's, 1024)\n";

/* parse_arg reads the number after flag argv[*i] into *out (within [min, max]). */
static int parse_arg(int argc, char **argv, int *i, long min, long max, long *out) {
  if (*i + 1 >= argc) return -1;
  const char *text = argv[++*i];
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < min || v > max) {
    fprintf(stderr, "bench_scale_sim: %s needs a number from %ld to %ld, not '%s'\n", argv[*i - 1],
            min, max, text);
    return -1;
  }
  *out = v;
  return 0;
}

/* min_max_completed gives the smallest and largest per-server `completed` of the stats. */
static void min_max_completed(const char *json, long long *lo, long long *hi) {
  const char *servers = strstr(json, "\"servers\":");
  *lo = -1;
  *hi = -1;
  for (const char *p = servers ? strstr(servers, "\"completed\":") : NULL; p != NULL;
       p = strstr(p + 1, "\"completed\":")) {
    long long v = strtoll(p + strlen("\"completed\":"), NULL, 10);
    if (*lo < 0 || v < *lo) *lo = v;
    if (v > *hi) *hi = v;
  }
}

int main(int argc, char **argv) {
  long servers = 64, threads = 6, tasks = 0, ms = 20, max_pending = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int rc;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      printf("%s", usage);
      return 0;
    } else if (strcmp(a, "--servers") == 0) {
      rc = parse_arg(argc, argv, &i, 1, MAX_SERVERS, &servers);
    } else if (strcmp(a, "--threads") == 0) {
      rc = parse_arg(argc, argv, &i, 1, 1024, &threads);
    } else if (strcmp(a, "--tasks") == 0) {
      rc = parse_arg(argc, argv, &i, 1, 100000000L, &tasks);
    } else if (strcmp(a, "--ms") == 0) {
      rc = parse_arg(argc, argv, &i, 0, 60000, &ms);
    } else if (strcmp(a, "--max-pending") == 0) {
      rc = parse_arg(argc, argv, &i, 1, 1L << 30, &max_pending);
    } else {
      fprintf(stderr, "bench_scale_sim: bad argument '%s'\n%s", a, usage);
      return 2;
    }
    if (rc != 0) return 2;
  }
  if (tasks == 0) tasks = servers * threads * 20;

  char threads_text[NUM_TEXT], ms_text[NUM_TEXT], pending_text[NUM_TEXT];
  snprintf(threads_text, sizeof threads_text, "%ld", threads);
  int ms_len = snprintf(ms_text, sizeof ms_text, "%ld", ms);
  snprintf(pending_text, sizeof pending_text, "%ld", max_pending);
  const char *const kv[] = {"server_threads",
                            threads_text,
                            "max_threads",
                            threads_text,
                            max_pending > 0 ? "max_pending" : NULL,
                            pending_text,
                            NULL};
  double t0 = ex_now();
  lt_eval_t *ev = bench_eval_open("bench_scale_sim",
                                  lt_farm(lt_seq_with("bench:sleep", ms_text, (size_t)ms_len)), kv,
                                  (int)servers);
  if (ev == NULL) return 1;
  fprintf(stderr, "bench_scale_sim: %ld servers x %ld threads up in %.1f s; %ld tasks of %ld ms\n",
          servers, threads, ex_now() - t0, tasks, ms);
  double secs = 0;
  int status = bench_eval_stream("bench_scale_sim", ev, tasks, BENCH_INDEX_SIZE, bench_index_make,
                                 bench_index_check, NULL, &secs) == 0
                   ? 0
                   : 1;
  char *json = NULL;
  if (status == 0 && lt_eval_stats_json(ev, &json) != LT_OK) {
    fprintf(stderr, "bench_scale_sim: no stats\n");
    status = 1;
  }
  if (status == 0) {
    double ideal = (double)tasks * (double)ms / 1e3 / (double)(servers * threads);
    long long lo, hi;
    min_max_completed(json, &lo, &hi);
    fprintf(stderr, "bench_scale_sim: %.2f s (ideal %.2f s), %lld to %lld tasks per server\n", secs,
            ideal, lo, hi);
    bench_json("scale-sim", "makespan", secs, ideal, "s");
    bench_json("scale-sim", "throughput", (double)tasks / secs, (double)tasks / ideal, "tasks/s");
    bench_json("scale-sim", "efficiency", ideal / secs, 0, "ratio");
    printf(
        "{\"bench\": \"scale-sim\", \"detail\": \"servers\", \"servers\": %ld, \"threads\": %ld, "
        "\"tasks\": %ld, \"max_pending\": %ld, \"completed_min\": %lld, \"completed_max\": "
        "%lld}\n",
        servers, threads, tasks, max_pending > 0 ? max_pending : 1024, lo, hi);
  }
  free(json);
  lt_eval_free(ev);
  return status;
}
