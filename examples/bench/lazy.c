/* examples/bench/lazy.c: the `lazy` benchmark (shared/BENCHMARKS.md). A pipeline of 4 seq
 * stages (bench:touch: each makes a new 1 MiB value) over 200 tasks of 1 MiB on 2 local
 * servers, once in mode=optimized (lookahead and lazy binding: intermediate values go from
 * server to server) and once with lazy=off (lookahead on: every value goes through the
 * client). The figure is the bytes on the client's links, bytes_to_servers +
 * bytes_from_servers of lt_eval_stats_json (ideal ratio 0.25: input and output only); the
 * time and the server-to-server bytes are reported beside it. One run of each by default
 * (the byte counts do not vary); with --runs N the medians.
 *
 *   build/examples/bench/bench_lazy [--runs 1] [--tasks 200]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchlib.h"

static const char usage[] =
    "usage: bench_lazy [--runs N] [--tasks N]\n"
    "  --runs N   runs of each setting, the median is reported (default 1)\n"
    "  --tasks N  tasks of 1 MiB per run (default 200)\n";

typedef struct result {
  double seconds;
  double client_bytes; /* bytes_to_servers + bytes_from_servers */
  double peer_bytes;   /* bytes_peer_in over all servers */
} result_t;

/* one_run streams the tasks with lazy binding `lazy` ("on"/"off"), lookahead on. */
static int one_run(const char *lazy, long tasks, result_t *res) {
  const char *const kv[] = {"mode", "optimized", "lazy", lazy, "normal_form", "off", NULL};
  unsigned char *want = malloc(BENCH_CHAIN_SIZE);
  if (want == NULL) {
    fprintf(stderr, "bench_lazy: out of memory\n");
    return -1;
  }
  lt_eval_t *ev = bench_eval_open("bench_lazy", bench_chain_program(), kv, 2);
  if (ev == NULL) {
    free(want);
    return -1;
  }
  int rc = bench_eval_stream("bench_lazy", ev, tasks, BENCH_CHAIN_SIZE, bench_chain_make,
                             bench_chain_check, want, &res->seconds);
  free(want);
  char *json = NULL;
  if (rc == 0 && (rc = lt_eval_stats_json(ev, &json)) != LT_OK)
    fprintf(stderr, "bench_lazy: lt_eval_stats_json: %s\n", lt_strerror(rc));
  lt_eval_free(ev);
  if (rc != 0) return -1;
  long long to = ex_stat_u64(json, "bytes_to_servers");
  long long from = ex_stat_u64(json, "bytes_from_servers");
  res->peer_bytes = (double)ex_stat_sum(json, "bytes_peer_in");
  free(json);
  if (to < 0 || from < 0) {
    fprintf(stderr, "bench_lazy: the statistics lack bytes_to_servers/bytes_from_servers\n");
    return -1;
  }
  res->client_bytes = (double)(to + from);
  return 0;
}

int main(int argc, char **argv) {
  int runs = 1;
  long tasks = 200;
  int rc = bench_parse_args(argc, argv, usage, &runs, &tasks);
  if (rc != 0) return rc > 0 ? 0 : 2;
  size_t n = (size_t)runs;
  double *v = calloc(6 * n, sizeof *v);
  if (v == NULL) {
    fprintf(stderr, "bench_lazy: out of memory\n");
    return 1;
  }
  double *lz_bytes = v, *lz_secs = v + n, *lz_peer = v + 2 * n;
  double *off_bytes = v + 3 * n, *off_secs = v + 4 * n, *off_peer = v + 5 * n;
  int status = 0;
  for (int r = 0; r < runs && status == 0; r++) {
    result_t lz, off;
    if (one_run("off", tasks, &off) != 0 || one_run("on", tasks, &lz) != 0) {
      status = 1;
      break;
    }
    lz_bytes[r] = lz.client_bytes, lz_secs[r] = lz.seconds, lz_peer[r] = lz.peer_bytes;
    off_bytes[r] = off.client_bytes, off_secs[r] = off.seconds, off_peer[r] = off.peer_bytes;
    fprintf(stderr,
            "bench_lazy: run %d: lazy on %.0f client bytes, %.0f peer bytes, %.2f s; "
            "lazy off %.0f client bytes, %.0f peer bytes, %.2f s\n",
            r + 1, lz.client_bytes, lz.peer_bytes, lz.seconds, off.client_bytes, off.peer_bytes,
            off.seconds);
  }
  if (status == 0) {
    bench_json("lazy", "client_bytes", bench_median(lz_bytes, n), bench_median(off_bytes, n),
               "bytes");
    bench_json("lazy", "time", bench_median(lz_secs, n), bench_median(off_secs, n), "s");
    bench_json("lazy", "peer_bytes", bench_median(lz_peer, n), bench_median(off_peer, n), "bytes");
  }
  free(v);
  return status;
}
