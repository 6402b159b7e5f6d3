/* databench.c: runs and measurements of the data-heavy benchmarks (databench.h): an
 * evaluator on benchmark-owned servers (their pids are known, so their CPU time and page
 * faults can be read from /proc) or on the sequential evaluator, one run of the program's
 * work timed and accounted, and the report. Nothing here knows what the work computes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "benchlib.h"
#include "databench.h"

int databench_servers_start(const char *prog, bench_server_t *srv, char *hosts, size_t len) {
  size_t used = 0;
  hosts[0] = '\0';
  for (int i = 0; i < DATABENCH_SERVERS; i++) {
    if (bench_server_start(prog, &srv[i], NULL) != 0) {
      for (int j = 0; j < i; j++)
        bench_server_stop(&srv[j]);
      return -1;
    }
    int n = snprintf(hosts + used, len - used, "%s%s", i > 0 ? "," : "", srv[i].endpoint);
    if (n > 0) used += (size_t)n < len - used ? (size_t)n : len - used - 1;
  }
  return 0;
}

void databench_servers_stop(bench_server_t *srv) {
  for (int i = 0; i < DATABENCH_SERVERS; i++)
    bench_server_stop(&srv[i]);
}

double databench_stat_sum(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  double sum = 0;
  for (const char *p = strstr(json, pat); p != NULL; p = strstr(p + 1, pat))
    sum += strtod(p + strlen(pat), NULL);
  return sum;
}

/* self_cpu returns this process's CPU (user + system) in seconds. */
static double self_cpu(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* servers_cpu adds the servers' CPU seconds and minor faults into *cpu and *faults. */
static int servers_cpu(const bench_server_t *srv, double *cpu, double *faults) {
  *cpu = *faults = 0;
  for (int i = 0; srv != NULL && i < DATABENCH_SERVERS; i++) {
    double c = 0, f = 0;
    if (bench_proc_cpu(srv[i].pid, &c, &f) != 0) return -1;
    *cpu += c;
    *faults += f;
  }
  return 0;
}

int databench_run(const char *prog, lt_skel_t *program, const char *const *kv, bench_server_t *srv,
                  const char *hosts, databench_work_fn work, void *arg, databench_run_t *out) {
  memset(out, 0, sizeof *out);
  ex_opts_t o;
  ex_opts_init(&o, prog);
  o.hosts = hosts;
  lt_eval_t *ev = ex_eval_open_with(&o, program, srv == NULL, kv);
  if (ev == NULL) return -1;
  double cpu0 = 0, faults0 = 0, cpu1 = 0, faults1 = 0;
  if (servers_cpu(srv, &cpu0, &faults0) != 0) {
    fprintf(stderr, "%s: cannot read the servers' /proc/PID/stat\n", prog);
    lt_eval_free(ev);
    return -1;
  }
  double self0 = self_cpu(), t0 = ex_now();
  int rc = work(ev, arg);
  out->seconds = ex_now() - t0;
  out->client_cpu_s = self_cpu() - self0;
  if (rc == 0 && servers_cpu(srv, &cpu1, &faults1) != 0) {
    fprintf(stderr, "%s: cannot read the servers' /proc/PID/stat\n", prog);
    rc = -1;
  }
  char *json = NULL;
  if (rc == 0 && lt_eval_stats_json(ev, &json) != LT_OK) {
    fprintf(stderr, "%s: lt_eval_stats_json failed\n", prog);
    rc = -1;
  }
  lt_eval_free(ev);
  if (rc != 0) return -1;
  out->server_cpu_s = cpu1 - cpu0;
  out->server_faults = faults1 - faults0;
  /* Locally the kernels run in this process, one at a time, and nothing else does. */
  out->kernel_cpu_s = srv != NULL ? databench_stat_sum(json, "cpu_s") : out->client_cpu_s;
  out->client_bytes =
      (double)(ex_stat_u64(json, "bytes_to_servers") + ex_stat_u64(json, "bytes_from_servers"));
  out->peer_bytes = (double)ex_stat_sum(json, "bytes_peer_in");
  out->instructions = (double)ex_stat_u64(json, "instructions");
  /* The sequential evaluator has neither: absent counts are 0. */
  long long reruns = ex_stat_u64(json, "reruns"), backups = ex_stat_u64(json, "backups");
  out->reruns = reruns > 0 ? (double)reruns : 0;
  out->backups = backups > 0 ? (double)backups : 0;
  free(json);
  return 0;
}

void databench_log(const char *prog, const char *what, int r, const databench_run_t *x) {
  fprintf(stderr,
          "%s: %s run %d: %.3f s; kernels %.3f CPU-s, servers %.3f CPU-s, client %.3f CPU-s; "
          "%.0f server faults; %.0f client-link bytes, %.0f peer bytes; %.0f instructions, "
          "%.0f reruns, %.0f copies\n",
          prog, what, r, x->seconds, x->kernel_cpu_s, x->server_cpu_s, x->client_cpu_s,
          x->server_faults, x->client_bytes, x->peer_bytes, x->instructions, x->reruns, x->backups);
}

int databench_compare(const char *prog, int runs, databench_side_fn side, void *arg,
                      databench_run_t *par, databench_run_t *seq) {
  bench_server_t srv[DATABENCH_SERVERS];
  char hosts[DATABENCH_SERVERS * (sizeof srv[0].endpoint + 1)];
  if (databench_servers_start(prog, srv, hosts, sizeof hosts) != 0) return -1;
  int rc = 0;
  for (int r = 0; r < runs && rc == 0; r++) {
    if ((rc = side(srv, hosts, &par[r], arg)) != 0 || (rc = side(NULL, NULL, &seq[r], arg)) != 0)
      break;
    databench_log(prog, "servers", r + 1, &par[r]);
    databench_log(prog, "sequential", r + 1, &seq[r]);
  }
  databench_servers_stop(srv);
  return rc;
}

/* median_of returns the median of the field at `offset` of runs[0..n). */
static double median_of(const databench_run_t *runs, int n, size_t offset) {
  double v[n];
  for (int i = 0; i < n; i++)
    memcpy(&v[i], (const char *)&runs[i] + offset, sizeof v[i]);
  return bench_median(v, (size_t)n);
}

#define MEDIAN(runs, n, field) median_of(runs, n, offsetof(databench_run_t, field))

void databench_report(const char *bench, const databench_run_t *par, const databench_run_t *seq,
                      int runs) {
  double tp = MEDIAN(par, runs, seconds), ts = MEDIAN(seq, runs, seconds);
  bench_json(bench, "time", tp, ts, "s");
  bench_json(bench, "speedup", tp > 0 ? ts / tp : 0, 0, "x");
  /* The servers' CPU against the kernels' own: the sequential evaluator's, which runs nothing
   * else (the servers' own measure of their kernels includes the page faults of fresh
   * outputs, which the pool is there to remove). */
  bench_json(bench, "server_cpu", MEDIAN(par, runs, server_cpu_s), MEDIAN(seq, runs, kernel_cpu_s),
             "CPU-s");
  bench_json(bench, "kernel_cpu", MEDIAN(par, runs, kernel_cpu_s), MEDIAN(seq, runs, kernel_cpu_s),
             "CPU-s");
  bench_json(bench, "server_faults", MEDIAN(par, runs, server_faults), 0, "faults");
  bench_json(bench, "client_bytes", MEDIAN(par, runs, client_bytes), 0, "bytes");
  bench_json(bench, "peer_bytes", MEDIAN(par, runs, peer_bytes), 0, "bytes");
  bench_json(bench, "instructions", MEDIAN(par, runs, instructions),
             MEDIAN(seq, runs, instructions), "instr");
  bench_json(bench, "reruns", MEDIAN(par, runs, reruns), 0, "reruns");
  bench_json(bench, "copies", MEDIAN(par, runs, backups), 0, "copies");
}

uint64_t databench_fnv1a(const void *data, size_t len) {
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < len; i++)
    h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

void databench_checksum(const char *bench, uint64_t checksum) {
  printf("{\"bench\": \"%s\", \"detail\": \"checksum\", \"checksum\": \"%016llx\"}\n", bench,
         (unsigned long long)checksum);
  fflush(stdout);
}
