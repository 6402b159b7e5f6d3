/* examples/bench/shmcopy.c: the `shmcopy` benchmark (issue 32, item 3): how fast a value moves
 * between two servers of one host, against memcpy measured in the same run.
 * map(data:gen2, seq(data:sum), data:add) with placement=rr: each of --tasks seeds makes two
 * values of 16 MiB on one server, and round robin runs the sum
 * of one of them on the other server, which fetches it. Two pairs of benchmark-owned local servers,
 * one with same-host transfers (the default: a sealed memfd over a unix socket, server/shm.h) and
 * one with --no-shm (ZeroMQ over loopback TCP), run alternately --runs times (default 3). Reported
 * (medians):
 * - memfd_copy: the bytes the holders moved by memfd over the time they spent making the
 *   memfds (the one copy of a transfer: the asker maps the memfd, it copies nothing), in
 *   GB/s, against memcpy of the same size in this process, warm (both buffers touched before)
 *   and into fresh pages (what a copy into new memory pays);
 * - time: the run's wall time with memfds against the same with --no-shm;
 * both sides must give the same sums, and the memfd side must have moved every value so.
 *
 *   build/examples/bench/bench_shmcopy [--runs 3] [--tasks 20]
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "benchlib.h"
#include "benchproc.h"
#include "databench.h"

#define PROG      "bench_shmcopy"
#define MAX_TASKS 10000
#define MAX_RUNS  50
#define VALUE_MIB 16 /* data:gen's default size (a map's split takes no parameter) */

static const char usage[] = "usage: bench_shmcopy [--runs N] [--tasks N]\n"
                            "  --runs N   runs of each side, the median is reported (default 3)\n"
                            "  --tasks N  values moved per run, at most 10000 (default 20)\n";

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* memcpy_gbps times a memcpy of `len` bytes: into a buffer touched before (warm) or into
 * fresh pages; the best of 5, in GB/s. */
static double memcpy_gbps(const char *src, size_t len, char *warm_dst) {
  double best = 1e30;
  for (int i = 0; i < 5; i++) {
    char *dst = warm_dst;
    if (dst == NULL) {
      dst = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (dst == MAP_FAILED) return 0;
    }
    double t = now_s();
    memcpy(dst, src, len);
    t = now_s() - t;
    if (warm_dst == NULL) munmap(dst, len);
    if (t < best) best = t;
  }
  return (double)len / best / 1e9;
}

/* The servers' counters, since they started. */
typedef struct counts {
  double shm_bytes, shm_us, shm_values, fallbacks, peer_bytes;
} counts_t;

/* One run's figures: its counters, and the servers' totals after it. */
typedef struct run {
  double seconds;
  double shm_bytes, shm_us, shm_values, fallbacks, peer_bytes;
  counts_t total;
} run_t;

/* run_once runs the tasks on the servers `hosts`, checks the sums against `sums` (filled by
 * the first run) and reads the servers' counters once their reports have caught up. */
static int run_once(const char *hosts, long tasks, uint64_t *sums, bool *have, run_t *out) {
  lt_eval_t *ev = NULL;
  int rc = lt_eval_new(&ev, lt_map("data:gen2", lt_seq("data:sum"), "data:add"));
  char list[600];
  snprintf(list, sizeof list, "%s", hosts);
  for (char *h = strtok(list, ","); h != NULL && rc == LT_OK; h = strtok(NULL, ","))
    rc = lt_eval_add_host(ev, h);
  if (rc == LT_OK) rc = lt_eval_set(ev, "placement", "rr");
  if (rc == LT_OK) rc = lt_eval_start(ev);
  lt_future_t **f = calloc((size_t)tasks, sizeof *f);
  if (f == NULL) rc = LT_ENOMEM;
  double t0 = now_s();
  /* One task at a time: each transfer has the machine to itself, so that the holder's time
   * making a memfd is that of one copy, not of several sharing the cores. */
  for (long i = 0; i < tasks && rc == LT_OK; i++) {
    uint64_t seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
    rc = lt_eval_submit(ev, &seed, sizeof seed, &f[i]);
    lt_buf_t *r = NULL;
    rc = lt_future_wait(f[i], -1, &r);
    if (rc == LT_OK && (lt_buf_error(r) != LT_OK || lt_buf_len(r) != 8)) rc = LT_EINVAL;
    uint64_t s = 0;
    if (rc == LT_OK) memcpy(&s, lt_buf_data(r), 8);
    if (rc == LT_OK && *have && s != sums[i]) rc = LT_EINVAL;
    if (rc == LT_OK) sums[i] = s;
    lt_buf_free(r);
  }
  out->seconds = now_s() - t0;
  for (long i = 0; f != NULL && i < tasks; i++)
    if (f[i] != NULL) lt_future_release(f[i]);
  free(f);
  /* A holder's counters reach the client with its next message: wait (2 s at most) until
   * the bytes sent by memfd match those received so. */
  run_t was = *out; /* out->total: the servers' counters after the earlier runs */
  for (int tries = 0; rc == LT_OK && tries < 40; tries++) {
    char *json = NULL;
    if (lt_eval_stats_json(ev, &json) != LT_OK) break;
    out->shm_bytes = databench_stat_sum(json, "bytes_shm_out");
    out->shm_us = databench_stat_sum(json, "shm_us");
    out->shm_values = databench_stat_sum(json, "shm_values_in");
    out->fallbacks = databench_stat_sum(json, "shm_fallbacks");
    out->peer_bytes = databench_stat_sum(json, "bytes_peer_in");
    double in = databench_stat_sum(json, "bytes_shm_in");
    free(json);
    if (out->shm_bytes == in) break;
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
  }
  lt_eval_free(ev);
  out->total =
      (counts_t){out->shm_bytes, out->shm_us, out->shm_values, out->fallbacks, out->peer_bytes};
  out->shm_bytes -= was.total.shm_bytes;
  out->shm_us -= was.total.shm_us;
  out->shm_values -= was.total.shm_values;
  out->fallbacks -= was.total.fallbacks;
  out->peer_bytes -= was.total.peer_bytes;
  if (rc != LT_OK) fprintf(stderr, "%s: a run failed: %s\n", PROG, lt_strerror(rc));
  *have = *have || rc == LT_OK;
  return rc == LT_OK ? 0 : -1;
}

static int servers(bench_server_t *s, const char *const *extra, char *hosts, size_t len) {
  if (bench_server_start(PROG, &s[0], extra) != 0) return -1;
  if (bench_server_start(PROG, &s[1], extra) != 0) {
    bench_server_stop(&s[0]);
    return -1;
  }
  snprintf(hosts, len, "%s,%s", s[0].endpoint, s[1].endpoint);
  return 0;
}

int main(int argc, char **argv) {
  int runs = 3;
  long tasks = 20;
  int rc = bench_parse_args(argc, argv, usage, &runs, &tasks);
  if (rc != 0) return rc > 0 ? 0 : 2;
  if (tasks > MAX_TASKS || runs > MAX_RUNS) {
    fprintf(stderr, "%s: at most %d tasks and %d runs\n%s", PROG, MAX_TASKS, MAX_RUNS, usage);
    return 2;
  }
  size_t len = (size_t)VALUE_MIB << 20;
  char *src = malloc(len), *dst = malloc(len);
  uint64_t *sums = calloc((size_t)tasks, sizeof *sums);
  if (src == NULL || dst == NULL || sums == NULL || len == 0) return 1;
  memset(src, 0x5a, len);
  memset(dst, 0, len);
  bench_server_t on[2], off[2];
  char hon[600], hoff[600];
  const char *const no_shm[] = {"--no-shm", NULL}, *const shm[] = {"--shm", NULL};
  if (servers(on, shm, hon, sizeof hon) != 0) return 1;
  if (servers(off, no_shm, hoff, sizeof hoff) != 0) return 1;
  double copy[MAX_RUNS], warm[MAX_RUNS], fresh[MAX_RUNS], t_on[MAX_RUNS], t_off[MAX_RUNS];
  bool have = false;
  int status = 0;
  run_t a = {0}, b = {0};
  for (int r = 0; r < runs && status == 0; r++) {
    warm[r] = memcpy_gbps(src, len, dst);
    fresh[r] = memcpy_gbps(src, len, NULL);
    if (run_once(hon, tasks, sums, &have, &a) != 0 || run_once(hoff, tasks, sums, &have, &b) != 0)
      status = 1;
    /* Round robin runs some sums beside their value: only the others move. */
    if (status == 0 && (a.shm_values == 0 || a.fallbacks > 0)) {
      fprintf(stderr, "%s: %.0f values moved by memfd, %.0f fell back to ZeroMQ\n", PROG,
              a.shm_values, a.fallbacks);
      status = 1;
    }
    copy[r] = a.shm_us > 0 ? a.shm_bytes / a.shm_us / 1e3 : 0;
    t_on[r] = a.seconds;
    t_off[r] = b.seconds;
    fprintf(stderr,
            "%s: run %d: memfd copy %.2f GB/s (%.0f values, %.0f bytes in %.0f us), memcpy warm "
            "%.2f GB/s, fresh %.2f GB/s; %.3f s with memfds (%.0f peer bytes), %.3f s with "
            "--no-shm (%.0f)\n",
            PROG, r, copy[r], a.shm_values, a.shm_bytes, a.shm_us, warm[r], fresh[r], a.seconds,
            a.peer_bytes, b.seconds, b.peer_bytes);
  }
  for (int i = 0; i < 2; i++) {
    bench_server_stop(&on[i]);
    bench_server_stop(&off[i]);
  }
  if (status == 0) {
    printf("{\"bench\": \"shmcopy\", \"detail\": \"note\", \"note\": \"map(gen2, sum, add), "
           "%ld values of %zu MiB each moved between 2 local servers (placement=rr), median of %d "
           "alternating runs; memfd_copy: bytes moved by memfd / the holders' time making the "
           "memfds, against memcpy of the same size in the same run\"}\n",
           tasks, len >> 20, runs);
    double c = bench_median(copy, runs);
    bench_json("shmcopy", "memfd_copy_vs_memcpy", c, bench_median(warm, runs), "GB/s");
    bench_json("shmcopy", "memfd_copy_vs_fresh_memcpy", c, bench_median(fresh, runs), "GB/s");
    bench_json("shmcopy", "time", bench_median(t_on, runs), bench_median(t_off, runs), "s");
  }
  free(src);
  free(dst);
  free(sums);
  return status;
}
