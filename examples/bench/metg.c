/* examples/bench/metg.c: the `metg` benchmark (shared/BENCHMARKS.md, issue 24): Task Bench's
 * minimum effective task granularity. For each task size T (10 ms down to 3 µs) it runs N
 * independent busy kernels of T µs of CPU (bench:busy, busy.h) in farm(seq(bench:busy)) on 2
 * spawned local servers, and the same N spins on a pool of as many plain pthreads as cores in
 * this process; the pool runs before and after each of ours, and efficiency = the mean of
 * those two pool times / ours. Ours are, in this order: the farm in mode=optimized, the same
 * farm in mode=plain, and a 3-stage pipeline of busy kernels (with dependencies: stage k+1 of
 * a task waits for stage k), T per stage and N/3 tasks, so that it runs as many spins of T as
 * the farm. METG(50 %) is the smallest T whose efficiency is at least 0.5, interpolated
 * (metg_of). It prints one JSON line per efficiency and per METG (unit "us", or "us (at
 * most)" / "us (above)" when no size lies on the other side of 0.5), detail lines with the
 * times, and a note on how METG was found. The main thread runs the evaluators; the pool and
 * the feeder (benchlib.c) are the only other threads.
 *
 *   LT_BENCH_METG_SIZES=10000,3000,1000,300,100,30,10,3 (µs)  LT_BENCH_METG_SECONDS=1.5
 *   LT_BENCH_METG_MAX_TASKS=100000  LT_BENCH_METG_SIDES=farm,plain,pipeline
 *   LT_BENCH_METG_SERVERS=2  LT_BENCH_METG_OPTIONS=grain=8,max_threads=2 (after the mode)
 *   build/examples/bench/bench_metg
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "benchlib.h"
#include "busy.h"

#define SERVERS       2 /* LT_BENCH_METG_SERVERS overrides it */
#define STAGES        3
#define MAX_SIZES     16
#define MAX_POOL      256
#define DEFAULT_SIZES "10000,3000,1000,300,100,30,10,3"
#define DEFAULT_SECS  1.5
#define DEFAULT_MAX   100000L
#define HALF          0.5

static const char usage[] =
    "usage: bench_metg\n"
    "  Environment: LT_BENCH_METG_SIZES (task sizes in µs, comma-separated, default\n"
    "  " DEFAULT_SIZES "), LT_BENCH_METG_SECONDS (CPU seconds of work per size and run,\n"
    "  default 1.5), LT_BENCH_METG_MAX_TASKS (at most this many tasks per run, default 100000),\n"
    "  LT_BENCH_METG_SIDES (which of farm, plain and pipeline to run, comma-separated, default\n"
    "  all three), LT_BENCH_METG_SERVERS (spawned servers, default 2), LT_BENCH_METG_OPTIONS\n"
    "  (KEY=VALUE,... set after the mode, e.g. grain=8).\n";

/* The pool: `threads` plain threads take spin indices from `next` until `spins` are done. */
typedef struct pool {
  atomic_long next;
  long spins;
  double us;
} pool_t;

static void *pool_work(void *p) {
  pool_t *pool = p;
  uint64_t sum = 0;
  long i;
  while ((i = atomic_fetch_add(&pool->next, 1)) < pool->spins)
    sum += bench_busy_spin(pool->us, (uint64_t)i);
  return (void *)(uintptr_t)(sum & 1);
}

/* pool_run spins `spins` times `us` µs on `threads` fresh threads; *seconds from the first
 * thread's start to the last one's end. Returns 0, or -1 after printing why. */
static int pool_run(int threads, long spins, double us, double *seconds) {
  pthread_t th[MAX_POOL];
  pool_t pool = {.spins = spins, .us = us};
  atomic_init(&pool.next, 0);
  double t0 = ex_now();
  int n = 0;
  for (; n < threads; n++)
    if (pthread_create(&th[n], NULL, pool_work, &pool) != 0) break;
  for (int k = 0; k < n; k++)
    pthread_join(th[k], NULL);
  *seconds = ex_now() - t0;
  if (n < threads) {
    fprintf(stderr, "bench_metg: cannot start the pool's thread %d\n", n);
    return -1;
  }
  return 0;
}

/* Options set after the mode (LT_BENCH_METG_OPTIONS): keys and values, NULL-ended. */
#define MAX_EXTRA 16
static char extra_text[512];
static const char *extra[2 * MAX_EXTRA + 1];

/* extra_parse splits `text` ("k=v,k=v") into `extra`; -1 when it is malformed. */
static int extra_parse(const char *text) {
  if (strlen(text) >= sizeof extra_text) return -1;
  strcpy(extra_text, text);
  size_t n = 0;
  for (char *save = NULL, *kv = strtok_r(extra_text, ",", &save); kv != NULL;
       kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    if (eq == NULL || eq == kv || n == 2 * MAX_EXTRA) return -1;
    *eq = '\0';
    extra[n++] = kv;
    extra[n++] = eq + 1;
  }
  extra[n] = NULL;
  return 0;
}

/* ours_run streams `tasks` index tasks through `program` (taken) on `servers` fresh servers
 * in `mode`, then the options of LT_BENCH_METG_OPTIONS; the servers' start-up is not timed. */
static int ours_run(lt_skel_t *program, const char *mode, int servers, long tasks,
                    double *seconds) {
  const char *kv[2 * MAX_EXTRA + 3] = {"mode", mode};
  for (size_t i = 0; extra[i] != NULL; i++)
    kv[2 + i] = extra[i];
  lt_eval_t *ev = bench_eval_open("bench_metg", program, kv, servers);
  if (ev == NULL) return -1;
  int rc = bench_eval_stream("bench_metg", ev, tasks, BENCH_INDEX_SIZE, bench_index_make,
                             bench_index_check, NULL, seconds);
  char *st = NULL;
  if (lt_eval_stats_json(ev, &st) == LT_OK)
    printf("bench_metg: %s: %lld instructions, %lld packs of %lld tasks, %lld copies\n", mode,
           ex_stat_u64(st, "instructions"), ex_stat_u64(st, "packs"), ex_stat_u64(st, "packed"),
           ex_stat_u64(st, "backups"));
  free(st);
  lt_eval_free(ev);
  return rc;
}

/* The three sides of ours, each with its own efficiencies. */
enum { FARM, PLAIN, PIPE, SIDES };
static const char *const side_name[SIDES] = {"farm", "plain", "pipeline"};

/* side_program makes the program of a side for tasks of `us` µs. */
static lt_skel_t *side_program(int side, long us) {
  char p[32];
  int n = snprintf(p, sizeof p, "%ld", us);
  if (side != PIPE) return lt_farm(lt_seq_with("bench:busy", p, (size_t)n));
  return lt_pipeline(lt_seq_with("bench:busy", p, (size_t)n),
                     lt_seq_with("bench:busy", p, (size_t)n),
                     lt_seq_with("bench:busy", p, (size_t)n), NULL);
}

/* size_name writes "10ms" or "300us" for a size in µs. */
static void size_name(long us, char *buf, size_t len) {
  if (us >= 1000 && us % 1000 == 0)
    snprintf(buf, len, "%ldms", us / 1000);
  else
    snprintf(buf, len, "%ldus", us);
}

/* metg_of returns METG(50 %) of one side from sizes[0..n) (largest first) and their
 * efficiencies: walking from the largest size down, the first size below 0.5 and the one
 * before it bracket the crossing, and log(T) is interpolated linearly in the efficiency
 * between them: log T = log T_lo + (0.5 - e_lo) / (e_hi - e_lo) * (log T_hi - log T_lo).
 * When every size reaches 0.5 the smallest size is returned and *bound is -1 (METG is at most
 * that); when even the largest misses it, the largest and +1 (METG is above it); else 0. */
static double metg_of(const long *sizes, const double *eff, int n, int *bound) {
  *bound = 0;
  if (eff[0] < HALF) {
    *bound = 1;
    return (double)sizes[0];
  }
  for (int i = 1; i < n; i++) {
    if (eff[i] >= HALF) continue;
    double lo = log((double)sizes[i]), hi = log((double)sizes[i - 1]);
    double f = (HALF - eff[i]) / (eff[i - 1] - eff[i]);
    return exp(lo + f * (hi - lo));
  }
  *bound = -1;
  return (double)sizes[n - 1];
}

static int cmp_desc(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return (x < y) - (x > y);
}

/* parse_sizes reads the comma-separated sizes in µs, sorted largest first. */
static int parse_sizes(const char *text, long *sizes, int *n) {
  *n = 0;
  const char *p = text;
  while (*p != '\0') {
    char *end = NULL;
    long v = strtol(p, &end, 10);
    if (end == p || v < 1 || v > 1000000 || *n == MAX_SIZES || (*end != ',' && *end != '\0'))
      return -1;
    sizes[(*n)++] = v;
    p = *end == ',' ? end + 1 : end;
  }
  if (*n == 0) return -1;
  qsort(sizes, (size_t)*n, sizeof *sizes, cmp_desc);
  return 0;
}

/* parse_sides sets run[side] for each side named in the comma-separated `text`; -1 when a
 * name is unknown or none is given. */
static int parse_sides(const char *text, int *run) {
  int any = 0;
  for (int side = 0; side < SIDES; side++)
    run[side] = 0;
  for (const char *p = text; *p != '\0';) {
    size_t len = strcspn(p, ",");
    int side = 0;
    while (side < SIDES &&
           (strlen(side_name[side]) != len || strncmp(p, side_name[side], len) != 0))
      side++;
    if (side == SIDES) return -1;
    run[side] = any = 1;
    p += len;
    if (*p == ',') p++;
  }
  return any ? 0 : -1;
}

int main(int argc, char **argv) {
  int rc = bench_parse_args(argc, argv, usage, NULL, NULL);
  if (rc != 0) return rc > 0 ? 0 : 2;
  long sizes[MAX_SIZES];
  int nsizes = 0;
  const char *text = getenv("LT_BENCH_METG_SIZES");
  if (parse_sizes(text != NULL ? text : DEFAULT_SIZES, sizes, &nsizes) != 0) {
    fprintf(stderr,
            "bench_metg: LT_BENCH_METG_SIZES must be up to %d sizes in µs from 1 to "
            "1000000, comma-separated\n",
            MAX_SIZES);
    return 2;
  }
  text = getenv("LT_BENCH_METG_SECONDS");
  double secs = text != NULL ? atof(text) : DEFAULT_SECS;
  text = getenv("LT_BENCH_METG_MAX_TASKS");
  long max_tasks = text != NULL ? atol(text) : DEFAULT_MAX;
  if (secs <= 0 || secs > 3600 || max_tasks < STAGES) {
    fprintf(stderr, "bench_metg: LT_BENCH_METG_SECONDS must be in (0, 3600] and "
                    "LT_BENCH_METG_MAX_TASKS at least 3\n");
    return 2;
  }
  text = getenv("LT_BENCH_METG_SERVERS");
  int servers = text != NULL ? atoi(text) : SERVERS;
  if (servers < 1 || servers > 64) {
    fprintf(stderr, "bench_metg: LT_BENCH_METG_SERVERS must be from 1 to 64\n");
    return 2;
  }
  int run_side[SIDES];
  text = getenv("LT_BENCH_METG_OPTIONS");
  if (text != NULL && extra_parse(text) != 0) {
    fprintf(stderr, "bench_metg: LT_BENCH_METG_OPTIONS must be KEY=VALUE,... (at most %d)\n",
            MAX_EXTRA);
    return 2;
  }
  text = getenv("LT_BENCH_METG_SIDES");
  if (parse_sides(text != NULL ? text : "farm,plain,pipeline", run_side) != 0) {
    fprintf(stderr, "bench_metg: LT_BENCH_METG_SIDES must name some of farm, plain and "
                    "pipeline, comma-separated\n");
    return 2;
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cores < 1 ? 1 : cores > MAX_POOL ? MAX_POOL : (int)cores;
  double eff[SIDES][MAX_SIZES];
  for (int s = 0; s < nsizes; s++) {
    long us = sizes[s];
    long n = (long)(secs * 1e6 / (double)us);
    if (n > max_tasks) n = max_tasks;
    if (n < 2L * threads * STAGES) n = 2L * threads * STAGES;
    n -= n % STAGES; /* the pipeline runs n / 3 tasks of 3 spins: as many spins as the farm */
    double before, after, ours;
    if (pool_run(threads, n, (double)us, &before) != 0) return 1;
    for (int side = 0; side < SIDES; side++) {
      if (!run_side[side]) continue;
      long tasks = side == PIPE ? n / STAGES : n;
      const char *mode = side == PLAIN ? "plain" : "optimized";
      if (ours_run(side_program(side, us), mode, servers, tasks, &ours) != 0 ||
          pool_run(threads, n, (double)us, &after) != 0)
        return 1;
      eff[side][s] = (before + after) / 2 / ours;
      char name[32], metric[64];
      size_name(us, name, sizeof name);
      snprintf(metric, sizeof metric, "%s_efficiency_%s", side_name[side], name);
      bench_json("metg", metric, eff[side][s], 0, "pool time / ours");
      printf("{\"bench\": \"metg\", \"detail\": \"times\", \"side\": \"%s\", \"task_us\": %ld, "
             "\"spins\": %ld, \"seconds\": %.6g, \"pool_before\": %.6g, \"pool_after\": %.6g, "
             "\"pool_threads\": %d}\n",
             side_name[side], us, n, ours, before, after, threads);
      fflush(stdout);
      fprintf(stderr,
              "bench_metg: %s, %ld spins of %ld us: %.3f s, pool %.3f / %.3f s: "
              "efficiency %.3f\n",
              side_name[side], n, us, ours, before, after, eff[side][s]);
      before = after; /* the pool after one side is the pool before the next */
    }
  }
  printf("{\"bench\": \"metg\", \"detail\": \"note\", \"note\": \"METG(50 %%): the smallest "
         "task size at efficiency >= 0.5, log(T) interpolated linearly in the efficiency "
         "between the first size below 0.5 (from the largest down) and the one above it; "
         "efficiency = mean of the pool of %d threads before and after / ours; %d servers; "
         "pipeline: 3 stages of T each, N/3 tasks\"}\n",
         threads, servers);
  for (int side = 0; side < SIDES; side++) {
    if (!run_side[side]) continue;
    int bound = 0;
    double m = metg_of(sizes, eff[side], nsizes, &bound);
    char metric[64];
    snprintf(metric, sizeof metric, "%s_metg50", side_name[side]);
    /* The unit says when METG is a bound: no size on the other side of 0.5. */
    bench_json("metg", metric, m, 0, bound < 0 ? "us (at most)" : bound > 0 ? "us (above)" : "us");
  }
  return 0;
}
