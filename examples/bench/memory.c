/* examples/bench/memory.c: the `memory` benchmark (shared/BENCHMARKS.md). Two parts:
 *  - a stream: 1 000 000 tasks of 16 bytes through farm(seq(bench:noop "echo")) on one
 *    server, fed while the results are read. The client's and the server's peak RSS (VmHWM)
 *    against 64 MiB, and their RSS at the last result against that at the half-way result
 *    (flat: a ratio near 1);
 *  - a peer fetch: map(bench:fill, seq(bench:sum), bench:add) of the task "N,2" on two
 *    servers with placement=rr: the split makes two parts of N bytes (1 000 000 000) on one
 *    server, and
 *    round robin sends the sum of one of them to the other server, which fetches that part
 *    peer to peer (a successor chained to a seq stage would stay with its input; the parts
 *    of a map are placed anew). The receiving server (the one whose bytes_peer_in counts the
 *    value) reports its peak RSS against the value's size; the sender holds both parts. The
 *    default heartbeat_ms holds: the receiver keeps the value in the message it received,
 *    where a copy doubled its memory and held up its loop thread (and so its heartbeats)
 *    for seconds.
 *  - large values on the client: farm(seq(bench:touch)) on one server, every task submitted
 *    before the first result is read and each result freed once checked: 2 tasks of
 *    200 MB, then 8 tasks of 100 MB, handed over without a copy (lt_eval_submit_owned). The
 *    client's peak RSS above its RSS before the case (VmHWM, reset through
 *    /proc/self/clear_refs) against the most bytes it held: each task's, from its submit
 *    until its result is freed (its input, then its result).
 * The benchmark starts its servers itself (benchproc.h) to read their /proc/PID/status.
 *
 *   build/examples/bench/bench_memory [--tasks 1000000]
 *   BENCH_PEER_BYTES changes the value of the peer fetch (default 1000000000; 0 skips it).
 *   BENCH_LARGE=0 skips the large values; BENCH_LARGE_COPY=1 submits them with lt_eval_submit
 *   (copied).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchlib.h"
#include "benchproc.h"

#define PROG      "bench_memory"
#define BOUND_MIB 64.0

static const char usage[] = "usage: bench_memory [--tasks N]\n"
                            "  --tasks N  tasks of the stream (default 1000000)\n";

/* What the stream samples at its half-way result (check runs on the reading thread). */
typedef struct sample {
  long half;
  pid_t server;
  long client_kib, server_kib;
} sample_t;

static int check_result(long i, const unsigned char *data, size_t len, void *arg) {
  sample_t *s = arg;
  if (i == s->half) {
    s->client_kib = bench_proc_kib(0, "VmRSS");
    s->server_kib = bench_proc_kib(s->server, "VmRSS");
  }
  return bench_noop_check(i, data, len, NULL);
}

/* open_on makes a started evaluator for `program` on the servers `hosts` (comma-separated). */
static lt_eval_t *open_on(lt_skel_t *program, const char *hosts, const char *const *kv) {
  ex_opts_t o;
  ex_opts_init(&o, PROG);
  o.hosts = hosts;
  return ex_eval_open_with(&o, program, 0, kv);
}

static double mib(long kib) {
  return (double)kib / 1024.0;
}

/* stream runs the first part and prints its JSON lines. */
static int stream(long tasks) {
  bench_server_t srv;
  if (bench_server_start(PROG, &srv, NULL) != 0) return -1;
  const char *const kv[] = {"mode", "optimized", NULL};
  lt_eval_t *ev = open_on(lt_farm(lt_seq_with("bench:noop", "echo", 4)), srv.endpoint, kv);
  sample_t s = {.half = tasks / 2, .server = srv.pid, .client_kib = -1, .server_kib = -1};
  double secs = 0;
  int rc = ev != NULL ? bench_eval_stream(PROG, ev, tasks, BENCH_NOOP_SIZE, bench_noop_make,
                                          check_result, &s, &secs)
                      : -1;
  long client_end = bench_proc_kib(0, "VmRSS"), server_end = bench_proc_kib(srv.pid, "VmRSS");
  long client_peak = bench_proc_kib(0, "VmHWM"), server_peak = bench_proc_kib(srv.pid, "VmHWM");
  lt_eval_free(ev);
  bench_server_stop(&srv);
  if (rc != 0) return -1;
  if (client_peak < 0 || server_peak < 0 || s.client_kib < 0 || s.server_kib < 0) {
    fprintf(stderr, "%s: cannot read /proc/PID/status\n", PROG);
    return -1;
  }
  fprintf(stderr, "%s: %ld tasks in %.1f s (%.0f tasks/s)\n", PROG, tasks, secs, tasks / secs);
  printf("{\"bench\": \"memory\", \"detail\": \"note\", \"note\": \"stream: %ld tasks of 16 B "
         "through farm(bench:noop), 1 server, %.0f tasks/s; peak RSS against %.0f MiB, RSS at "
         "the last result against the half-way one\"}\n",
         tasks, tasks / secs, BOUND_MIB);
  bench_json("memory", "client_peak_rss", mib(client_peak), BOUND_MIB, "MiB");
  bench_json("memory", "server_peak_rss", mib(server_peak), BOUND_MIB, "MiB");
  bench_json("memory", "client_rss_end_vs_half", mib(client_end), mib(s.client_kib), "MiB");
  bench_json("memory", "server_rss_end_vs_half", mib(server_end), mib(s.server_kib), "MiB");
  return 0;
}

/* peer_in returns the bytes_peer_in of server `endpoint` in stats `json`, -1 if absent. */
static long long peer_in(const char *json, const char *endpoint) {
  char key[300];
  snprintf(key, sizeof key, "\"endpoint\":\"%s\"", endpoint);
  const char *at = strstr(json, key);
  return at != NULL ? ex_stat_u64(at, "bytes_peer_in") : -1;
}

/* fetch runs the peer-fetch part and prints its JSON lines. */
static int fetch(unsigned long long bytes) {
  const char *const flags[] = {"--max-frame", "4g", "--max-session-bytes", "8g", NULL};
  bench_server_t srv[2];
  if (bench_server_start(PROG, &srv[0], flags) != 0) return -1;
  if (bench_server_start(PROG, &srv[1], flags) != 0) {
    bench_server_stop(&srv[0]);
    return -1;
  }
  char hosts[600], param[32];
  snprintf(hosts, sizeof hosts, "%s,%s", srv[0].endpoint, srv[1].endpoint);
  snprintf(param, sizeof param, "%llu,2", bytes);
  const char *const kv[] = {"mode", "optimized", "placement", "rr", NULL};
  lt_eval_t *ev = open_on(lt_map("bench:fill", lt_seq("bench:sum"), "bench:add"), hosts, kv);
  lt_future_t *f = NULL;
  lt_buf_t *r = NULL;
  char *json = NULL;
  double t0 = ex_now();
  int rc = ev != NULL ? lt_eval_submit(ev, param, strlen(param), &f) : LT_EINVAL;
  if (rc == LT_OK) rc = lt_future_wait(f, -1, &r);
  double secs = ex_now() - t0;
  if (rc == LT_OK) rc = lt_buf_error(r);
  if (rc == LT_OK) {
    uint64_t sum;
    memcpy(&sum, lt_buf_data(r), sizeof sum);
    if (lt_buf_len(r) != 8 || sum != 2 * bytes * 0x5a) rc = LT_EINVAL;
  }
  if (rc == LT_OK) rc = lt_eval_stats_json(ev, &json);
  int to = -1;
  for (int i = 0; rc == LT_OK && i < 2; i++)
    if (peer_in(json, srv[i].endpoint) >= (long long)bytes) to = i;
  long peak[2] = {bench_proc_kib(srv[0].pid, "VmHWM"), bench_proc_kib(srv[1].pid, "VmHWM")};
  if (rc != LT_OK)
    fprintf(stderr, "%s: peer fetch: %s %s\n", PROG, lt_strerror(rc), r ? lt_buf_errmsg(r) : "");
  free(json);
  lt_buf_free(r);
  lt_future_release(f);
  lt_eval_free(ev);
  bench_server_stop(&srv[0]);
  bench_server_stop(&srv[1]);
  if (rc != LT_OK) return -1;
  if (to < 0) {
    fprintf(stderr, "%s: peer fetch: no server fetched the value from its peer\n", PROG);
    return -1;
  }
  fprintf(stderr,
          "%s: peer fetch of %llu bytes in %.2f s; peak RSS %.0f MiB receiving, %.0f "
          "MiB sending\n",
          PROG, bytes, secs, mib(peak[to]), mib(peak[1 - to]));
  printf("{\"bench\": \"memory\", \"detail\": \"note\", \"note\": \"peer fetch: a value of %llu "
         "B made by bench:fill on one server and read by bench:sum on the other (placement=rr) in "
         "%.2f s; the sender (both parts) peaked at %.0f MiB\"}\n",
         bytes, secs, mib(peak[1 - to]));
  bench_json("memory", "peer_fetch_peak_rss", (double)peak[to] * 1024.0, (double)bytes, "B");
  return 0;
}

/* The bytes the client holds for the program, counted by the program: each task's bytes from
 * its submit until the program frees its result. All that time the client has the task's
 * input (until the task is done: lineage) or its result (bench:touch answers a value of the
 * input's size; a result is on the client once its task is done), and for a moment, while
 * the result arrives, both. `freed` counts the inputs whose free callback ran. Any thread. */
typedef struct held {
  atomic_llong now, peak;
  atomic_long freed;
} held_t;

static void held_add(held_t *h, long long n) {
  long long v = atomic_fetch_add(&h->now, n) + n, p = atomic_load(&h->peak);
  while (v > p && !atomic_compare_exchange_weak(&h->peak, &p, v)) {
  }
}

/* reset_peak makes VmHWM start again from the present RSS; 0, or -1 when the kernel cannot. */
static int reset_peak(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (f == NULL) return -1;
  int rc = fputs("5", f) >= 0 ? 0 : -1;
  return fclose(f) == 0 ? rc : -1;
}

/* An input handed over without a copy, and the count of its free callback. */
typedef struct large_in {
  held_t *held;
  long long len;
} large_in_t;

static void large_free(void *data, void *hint) {
  large_in_t *in = hint;
  atomic_fetch_add(&in->held->freed, 1);
  free(data);
}

/* submit_large hands the input `buf` of `len` bytes to the evaluator: without a copy
 * (lt_eval_submit_owned; `in` is its record), or, with `copy`, as lt_eval_submit copies it,
 * freeing `buf` at once. */
static int submit_large(lt_eval_t *ev, unsigned char *buf, large_in_t *in, int copy) {
  if (!copy) return lt_eval_submit_owned(ev, buf, (size_t)in->len, large_free, in, NULL);
  int rc = lt_eval_submit(ev, buf, (size_t)in->len, NULL);
  free(buf);
  return rc;
}

/* large_check tells whether `b` is bench:touch's answer to the input of task i. */
static int large_check(const lt_buf_t *b, long i, size_t len) {
  const unsigned char *d = lt_buf_data(b);
  return lt_buf_error(b) == LT_OK && lt_buf_len(b) == len && d[0] == (unsigned char)(i + 1) &&
         d[1] == 0x5a && d[len - 1] == 0x5a;
}

/* large runs `tasks` tasks of `len` bytes through farm(seq(bench:touch)) on one server, all
 * submitted before the first result is read, and prints the client's peak RSS above its RSS
 * before the run against the peak of the bytes it held. The inputs are handed over without a
 * copy, or copied with `copy`. */
static int large(const char *metric, long tasks, size_t len, int copy) {
  bench_server_t srv;
  const char *const flags[] = {"--max-session-bytes", "8g", NULL};
  if (bench_server_start(PROG, &srv, flags) != 0) return -1;
  const char *const kv[] = {"mode", "optimized", NULL};
  lt_eval_t *ev = open_on(lt_farm(lt_seq("bench:touch")), srv.endpoint, kv);
  held_t h;
  atomic_init(&h.now, 0);
  atomic_init(&h.peak, 0);
  atomic_init(&h.freed, 0);
  large_in_t *ins = calloc((size_t)tasks, sizeof *ins);
  int rc = ev != NULL && ins != NULL && reset_peak() == 0 ? LT_OK : LT_EINVAL;
  long base = bench_proc_kib(0, "VmRSS");
  double t0 = ex_now();
  for (long i = 0; rc == LT_OK && i < tasks; i++) {
    unsigned char *buf = malloc(len);
    if (buf == NULL) {
      rc = LT_ENOMEM;
      break;
    }
    memset(buf, 0x5a, len);
    buf[0] = (unsigned char)i;
    ins[i] = (large_in_t){&h, (long long)len};
    held_add(&h, (long long)len);
    rc = submit_large(ev, buf, &ins[i], copy);
  }
  if (rc == LT_OK) rc = lt_eval_close(ev);
  lt_buf_t *b = NULL;
  for (long i = 0; rc == LT_OK && i < tasks; i++) {
    if ((rc = lt_eval_next(ev, &b)) != LT_OK) break;
    if (!large_check(b, i, len)) {
      fprintf(stderr, "%s: large values: task %ld: %s\n", PROG, i,
              lt_buf_error(b) ? lt_buf_errmsg(b) : "wrong result");
      rc = LT_EINVAL;
    }
    lt_buf_free(b);
    held_add(&h, -(long long)len);
  }
  double secs = ex_now() - t0;
  long peak = bench_proc_kib(0, "VmHWM");
  lt_eval_free(ev); /* the last free callbacks run by its end */
  free(ins);
  bench_server_stop(&srv);
  if (rc == LT_OK && !copy && atomic_load(&h.freed) != tasks) {
    fprintf(stderr, "%s: large values: %ld free callbacks for %ld inputs\n", PROG,
            atomic_load(&h.freed), tasks);
    rc = LT_EINVAL;
  }
  if (rc != LT_OK || base < 0 || peak < 0) {
    fprintf(stderr, "%s: large values (%s): %s\n", PROG, metric, lt_strerror(rc));
    return -1;
  }
  double grew = (double)(peak - base) * 1024.0;
  fprintf(stderr,
          "%s: %ld tasks of %zu B%s in %.2f s: client peak RSS %.0f MiB above %.0f MiB, "
          "held at most %.0f MiB\n",
          PROG, tasks, len, copy ? " (copied)" : "", secs, grew / 1048576.0, mib(base),
          (double)atomic_load(&h.peak) / 1048576.0);
  bench_json("memory", metric, grew, (double)atomic_load(&h.peak), "B");
  return 0;
}

int main(int argc, char **argv) {
  long tasks = 1000000;
  int rc = bench_parse_args(argc, argv, usage, NULL, &tasks);
  if (rc != 0) return rc > 0 ? 0 : 2;
  const char *b = getenv("BENCH_PEER_BYTES");
  unsigned long long bytes = b != NULL && *b != '\0' ? strtoull(b, NULL, 10) : 1000000000ULL;
  const char *l = getenv("BENCH_LARGE");
  int big = l == NULL || strcmp(l, "0") != 0;
  if (stream(tasks) != 0) return 1;
  const char *c = getenv("BENCH_LARGE_COPY");
  int copy = c != NULL && strcmp(c, "0") != 0 && *c != '\0';
  if (big && (large("client_rss_2x200MB", 2, 200000000, copy) != 0 ||
              large("client_rss_8x100MB", 8, 100000000, copy) != 0))
    return 1;
  return bytes == 0 || fetch(bytes) == 0 ? 0 : 1;
}
