/* examples/bench/hetero.c: the `hetero` and `hetero-step` benchmarks (shared/BENCHMARKS.md).
 * A farm of equal CPU-bound tasks (bench:spin) runs on running servers whose CPU speeds the
 * harness set (cgroup quotas, or --slowdown), once with the default placement and once with
 * `placement=rr`; efficiency = ideal makespan / actual, where the ideal is the work (tasks x
 * the task's CPU time t1, measured in this process on an unrestricted core) over the summed
 * speeds. With --step-at the harness's command changes the speeds when that fraction of the
 * tasks is done (--step-time: of the ideal makespan has passed; --step-work: of the farm's
 * CPU work is done, from the servers' processes and the CPU their completed instructions
 * took), and the ideal is computed piecewise; with --step-busiest the step hits the server
 * with the most work left then, whose index the command reads in $BENCH_STEP_HOST (the
 * backup benchmark). --throttle adds a run with
 * throttle=on and prints the fastest server's window history. Single-threaded apart from
 * benchlib's feeder thread and the thread that runs a timed step.
 *
 *   bench_hetero --hosts EP,EP,... --speeds 0.8,0.4,0.2,0.2 [--tasks 800] [--task-ms 20]
 *                [--step-at 0.5 --step-cmd CMD --step-speeds 0.2,0.4,0.2,0.2] [--step-busiest]
 *                [--pids PID,...] [--step-work F]
 *                [--reset-cmd CMD] [--cpu-cmd CMD] [--throttle] [--bench NAME]
 *                [--trace PREFIX]
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "benchlib.h"

#ifndef LT_EXAMPLE_MODULES
#define LT_EXAMPLE_MODULES "."
#endif

#define MAX_HOSTS    64
#define SEED_SIZE    8
#define NSEEDS       5 /* tasks cycle through this many seeds, whose sums t1's runs give */
#define PROBE_ITERS  2000000ULL
#define ITERS_TEXT   32
#define STEP_POLL_MS 10 /* --step-work looks at the servers' CPU this often */
#define QUIET_MAX_S  20 /* the longest wait for the servers to finish what a run left */

static const char usage[] =
    "usage: bench_hetero --hosts EP,... --speeds S,... [options]\n"
    "  --hosts EP,...        running lithium-servers (tcp://host:port)\n"
    "  --speeds S,...        CPU cores each server gets (its quota), in --hosts order\n"
    "  --tasks N             tasks per run (default 800)\n"
    "  --task-ms M           CPU milliseconds per task on an unrestricted core (default 20)\n"
    "  --step-at F           when this fraction of the tasks is done (0 < F < 1), or\n"
    "  --step-time F         when this fraction of the ideal makespan has passed, or\n"
    "  --step-work F         when the servers have done this fraction of the farm's work (the\n"
    "                        CPU time of --pids against tasks x the mean CPU time of the\n"
    "                        instructions completed so far, as the servers measured it) ...\n"
    "  --step-cmd CMD        ... run this shell command (it changes the speeds) ...\n"
    "  --step-speeds S,...   ... to these speeds\n"
    "  --pids PID,...        the servers' process ids, in --hosts order: their CPU time\n"
    "  --step-busiest        the step hits the server with the most work left then (with\n"
    "                        --pids; without, the most instructions out):\n"
    "                        the command reads its --hosts index (from 0) in\n"
    "                        $BENCH_STEP_HOST, and the first --step-speeds value is the speed\n"
    "                        it gets (the others' stay theirs; give them equal)\n"
    "  --reset-cmd CMD       shell command run before each run (restores the speeds)\n"
    "  --cpu-cmd CMD         shell command printing each server's CPU seconds so far, in\n"
    "                        --hosts order: shows what the servers were really given\n"
    "  --throttle            add a run with throttle=on; print the fastest server's windows\n"
    "  --backup              runs with backup=off and backup=on instead (copies of\n"
    "                        stragglers); prints their makespans and the ratio\n"
    "  --bench NAME          name in the JSON lines (default hetero, hetero-step with a step)\n"
    "  --trace PREFIX        write each run's trace to PREFIX<run>.json (option trace)\n"
    "  --stages K            a task is farm(pipe(spin x K)), each a K-th of it (default 1):\n"
    "                        its inner stages' values stay on the servers\n";

typedef struct config {
  const char *hosts[MAX_HOSTS];
  char *hosts_buf;
  int nhosts;
  double speeds[MAX_HOSTS], after[MAX_HOSTS];
  int nspeeds, nafter;
  long tasks;
  double task_ms, step_at, step_time, step_work;
  int pids[MAX_HOSTS];
  int npids;
  double step_delay; /* --step-time in seconds: step_time x the ideal makespan */
  const char *step_cmd, *reset_cmd, *cpu_cmd, *bench;
  const char *trace; /* --trace: the runs' trace files are named from it */
  int throttle;
  int backup;  /* --backup: compare backup=off and backup=on instead */
  int busiest; /* --step-busiest: the step hits the server with the most work left */
  int stages;  /* --stages: a task is a lazy pipeline of this many spins (default 1) */
} config_t;

/* The state of one run, seen by the result check on the reading thread. */
typedef struct run {
  uint64_t sums[NSEEDS]; /* the expected checksum of each seed */
  _Atomic long done;     /* results read */
  long step_n;           /* the count at which the step command runs (or ran, --step-time) */
  const char *step_cmd;
  const config_t *c;
  lt_eval_t *ev;
  int step_host;              /* --step-busiest: the server the step hit; else 0 */
  double pid_cpu0[MAX_HOSTS]; /* --pids: each server's CPU seconds at the start */
  double t_step;              /* ex_now() when the step command ran, 0 before */
  int step_failed;
  /* --step-time: the thread that runs the step command at a time, and its end. */
  double step_delay; /* seconds after the start */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int over;
} run_t;

/* parse_list splits comma-separated numbers > 0 into v; returns the count or -1. */
static int parse_list(const char *text, double *v, int max) {
  int n = 0;
  const char *p = text;
  for (;;) {
    char *end = NULL;
    errno = 0;
    double x = strtod(p, &end);
    if (end == p || errno != 0 || !isfinite(x) || x <= 0 || n == max) return -1;
    v[n++] = x;
    if (*end == '\0') return n;
    if (*end != ',') return -1;
    p = end + 1;
  }
}

/* parse_number reads a number in (0, max] into *out. */
static int parse_number(const char *text, double max, double *out) {
  char *end = NULL;
  errno = 0;
  double x = strtod(text, &end);
  if (end == text || *end != '\0' || errno != 0 || !isfinite(x) || x <= 0 || x > max) return -1;
  *out = x;
  return 0;
}

/* split_hosts cuts the copy of `text` in c->hosts_buf at the commas. */
static int split_hosts(config_t *c, const char *text) {
  free(c->hosts_buf);
  if ((c->hosts_buf = strdup(text)) == NULL) return -1;
  c->nhosts = 0;
  for (char *save = NULL, *h = strtok_r(c->hosts_buf, ",", &save); h != NULL;
       h = strtok_r(NULL, ",", &save)) {
    if (c->nhosts == MAX_HOSTS || strncmp(h, "tcp://", 6) != 0) return -1;
    c->hosts[c->nhosts++] = h;
  }
  return c->nhosts > 0 ? 0 : -1;
}

/* parse_args fills c; 0, 1 after --help, -1 after printing why. */
static int parse_args(int argc, char **argv, config_t *c) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      printf("%s", usage);
      return 1;
    } else if (strcmp(a, "--throttle") == 0) {
      c->throttle = 1;
      continue;
    } else if (strcmp(a, "--backup") == 0) {
      c->backup = 1;
      continue;
    } else if (strcmp(a, "--step-busiest") == 0) {
      c->busiest = 1;
      continue;
    } else if (v == NULL) {
      bad = 1;
    } else if (strcmp(a, "--hosts") == 0) {
      bad = split_hosts(c, v) != 0;
    } else if (strcmp(a, "--speeds") == 0) {
      bad = (c->nspeeds = parse_list(v, c->speeds, MAX_HOSTS)) < 0;
    } else if (strcmp(a, "--step-speeds") == 0) {
      bad = (c->nafter = parse_list(v, c->after, MAX_HOSTS)) < 0;
    } else if (strcmp(a, "--tasks") == 0) {
      char *end = NULL;
      c->tasks = strtol(v, &end, 10);
      bad = *end != '\0' || c->tasks < 1 || c->tasks > 10000000;
    } else if (strcmp(a, "--task-ms") == 0) {
      bad = parse_number(v, 60000, &c->task_ms) != 0;
    } else if (strcmp(a, "--step-at") == 0) {
      bad = parse_number(v, 1, &c->step_at) != 0 || c->step_at >= 1;
    } else if (strcmp(a, "--step-work") == 0) {
      bad = parse_number(v, 1, &c->step_work) != 0 || c->step_work >= 1;
    } else if (strcmp(a, "--pids") == 0) {
      double p[MAX_HOSTS];
      bad = (c->npids = parse_list(v, p, MAX_HOSTS)) < 0;
      for (int k = 0; !bad && k < c->npids; k++)
        c->pids[k] = (int)p[k];
    } else if (strcmp(a, "--step-time") == 0) {
      bad = parse_number(v, 1, &c->step_time) != 0 || c->step_time >= 1;
    } else if (strcmp(a, "--step-cmd") == 0) {
      c->step_cmd = v;
    } else if (strcmp(a, "--reset-cmd") == 0) {
      c->reset_cmd = v;
    } else if (strcmp(a, "--cpu-cmd") == 0) {
      c->cpu_cmd = v;
    } else if (strcmp(a, "--bench") == 0) {
      c->bench = v;
    } else if (strcmp(a, "--trace") == 0) {
      c->trace = v;
    } else if (strcmp(a, "--stages") == 0) {
      char *end = NULL;
      long k = strtol(v, &end, 10);
      bad = *end != '\0' || k < 1 || k > 16;
      c->stages = (int)k;
    } else {
      bad = 1;
    }
    if (bad) {
      fprintf(stderr, "bench_hetero: bad argument '%s%s%s'\n%s", a, v ? " " : "", v ? v : "",
              usage);
      return -1;
    }
    i++;
  }
  const char *why = NULL;
  if (c->nhosts == 0 || c->nspeeds != c->nhosts)
    why = "--hosts and --speeds are needed, one speed per host";
  else if ((c->step_at > 0) + (c->step_time > 0) + (c->step_work > 0) > 1)
    why = "--step-at, --step-time and --step-work exclude each other";
  else if ((c->step_at > 0 || c->step_time > 0 || c->step_work > 0) &&
           (c->step_cmd == NULL || c->nafter != c->nhosts))
    why = "a step needs --step-cmd and one --step-speeds value per host";
  else if (c->step_at == 0 && c->step_time == 0 && c->step_work == 0 &&
           (c->step_cmd != NULL || c->nafter > 0))
    why = "--step-cmd and --step-speeds need --step-at, --step-time or --step-work";
  else if (c->npids > 0 && c->npids != c->nhosts)
    why = "--pids needs one process id per host";
  else if (c->step_work > 0 && c->npids == 0)
    why = "--step-work needs --pids";
  else if (c->busiest && c->step_cmd == NULL)
    why = "--step-busiest needs a step";
  if (why != NULL) {
    fprintf(stderr, "bench_hetero: %s\n%s", why, usage);
    return -1;
  }
  if (c->bench == NULL)
    c->bench = c->step_at > 0 || c->step_time > 0 || c->step_work > 0 ? "hetero-step" : "hetero";
  return 0;
}

static void make_task(long i, unsigned char *buf, void *arg) {
  (void)arg;
  uint64_t seed = (uint64_t)(i % NSEEDS);
  memcpy(buf, &seed, SEED_SIZE);
}

/* stats_server returns the start of server `ep`'s object in the stats JSON, or NULL. */
static const char *stats_server(const char *json, const char *ep) {
  char pat[300];
  snprintf(pat, sizeof pat, "\"endpoint\":\"%s\"", ep);
  return strstr(json, pat);
}

/* stat_double returns the first number `key` in the stats JSON from `json` on; -1 if absent. */
static double stat_double(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  return p != NULL ? strtod(p + strlen(pat), NULL) : -1;
}

/* pid_cpu returns the CPU seconds (user + system, all threads) process pid has used, or -1. */
static double pid_cpu(int pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  size_t n = f != NULL ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f != NULL) fclose(f);
  buf[n] = '\0';
  /* The fields after the command name, which ends at the last ')': utime is the 14th. */
  const char *p = strrchr(buf, ')');
  unsigned long long ut = 0, st = 0;
  if (p == NULL ||
      sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
    return -1;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A look at the servers' progress (--pids): per server, the CPU its process has used since
 * the run began and, from the stats, the instructions it completed and has out and the CPU
 * time the completed ones took. */
typedef struct progress {
  double used[MAX_HOSTS], done_cpu[MAX_HOSTS], completed[MAX_HOSTS], out[MAX_HOSTS];
} progress_t;

/* look fills *p; -1 when the stats cannot be read. */
static int look(const run_t *r, progress_t *p) {
  char *json = NULL;
  if (lt_eval_stats_json(r->ev, &json) != LT_OK) return -1;
  for (int i = 0; i < r->c->nhosts; i++) {
    const char *sv = stats_server(json, r->c->hosts[i]);
    p->used[i] = i < r->c->npids ? pid_cpu(r->c->pids[i]) - r->pid_cpu0[i] : 0;
    p->done_cpu[i] = sv != NULL ? stat_double(sv, "cpu_s") : 0;
    p->completed[i] = sv != NULL ? (double)ex_stat_u64(sv, "completed") : 0;
    p->out[i] = sv != NULL ? (double)ex_stat_u64(sv, "inflight") : 0;
  }
  free(json);
  return 0;
}

/* task_cpu returns the mean CPU seconds of server i's completed instructions (of them all
 * for i < 0), 0 before any. */
static double task_cpu(const run_t *r, const progress_t *p, int i) {
  double cpu = 0, n = 0;
  for (int k = 0; k < r->c->nhosts; k++) {
    if (i >= 0 && k != i) continue;
    cpu += p->done_cpu[k];
    n += p->completed[k];
  }
  return n > 0 ? cpu / n : 0;
}

/* wait_idle waits (at most QUIET_MAX_S) until the servers of --pids use no CPU for a while:
 * instructions a run left behind (copies that lost, originals whose copy won) finish before
 * the next run counts their servers' CPU. */
static void wait_idle(const config_t *c) {
  double last = -1;
  for (int k = 0; c->npids > 0 && k < QUIET_MAX_S * 10; k++) {
    double now = 0;
    for (int i = 0; i < c->npids; i++)
      now += pid_cpu(c->pids[i]);
    if (last >= 0 && now - last < 0.01) return;
    last = now;
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* busiest returns the index of the server with the most work left now (the first of
 * equals): with --pids, what its completed and outstanding instructions take (at its mean
 * so far) less the CPU it has used; without, its instructions out. */
static int busiest(const run_t *r) {
  progress_t p;
  int best = 0;
  double most = -1e300;
  if (look(r, &p) != 0) return 0;
  for (int i = 0; i < r->c->nhosts; i++) {
    double left = p.out[i];
    if (r->c->npids > 0) left = (p.completed[i] + p.out[i]) * task_cpu(r, &p, i) - p.used[i];
    if (left > most) {
      most = left;
      best = i;
    }
  }
  return best;
}

/* work_due tells whether the servers have done step_work of the farm's work: the CPU their
 * processes used against the instructions (tasks x stages) x the mean CPU of those completed
 * so far. */
static int work_due(const run_t *r) {
  progress_t p;
  if (look(r, &p) != 0) return 0;
  double used = 0, w = task_cpu(r, &p, -1);
  for (int i = 0; i < r->c->nhosts; i++)
    used += p.used[i];
  double instrs = (double)r->c->tasks * (r->c->stages > 1 ? r->c->stages : 1);
  return w > 0 && used >= r->c->step_work * instrs * w;
}

/* run_step runs the step command, once, and notes when and after how many results; with
 * --step-busiest it first picks the server and hands its index to the command. */
static void run_step(run_t *r) {
  r->t_step = ex_now();
  r->step_n = r->done;
  char cmd[8192];
  if (r->c->busiest) {
    r->step_host = busiest(r);
    snprintf(cmd, sizeof cmd, "BENCH_STEP_HOST=%d; export BENCH_STEP_HOST; %s", r->step_host,
             r->step_cmd);
  } else {
    snprintf(cmd, sizeof cmd, "%s", r->step_cmd);
  }
  int rc = system(cmd);
  if (rc != 0) {
    fprintf(stderr, "bench_hetero: step command failed (status %d): %s\n", rc, cmd);
    r->step_failed = 1;
  }
}

/* step_timer is the --step-time and --step-work thread: it runs the step command step_delay
 * seconds after it starts, or once the servers have done step_work of the farm's work
 * (looked at every STEP_POLL_MS), unless the run is over first. */
static void *step_timer(void *arg) {
  run_t *r = arg;
  const config_t *c = r->c;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  double t0 = (double)until.tv_sec + (double)until.tv_nsec / 1e9, t = t0 + r->step_delay;
  pthread_mutex_lock(&r->mu);
  int rc = 0, due = 0;
  while (!r->over && !due) {
    if (c->step_work > 0) t += STEP_POLL_MS / 1e3;
    until.tv_sec = (time_t)t;
    until.tv_nsec = (long)((t - (double)until.tv_sec) * 1e9);
    rc = pthread_cond_timedwait(&r->cv, &r->mu, &until);
    if (rc == ETIMEDOUT) due = c->step_work > 0 ? work_due(r) : 1;
  }
  int run = !r->over;
  pthread_mutex_unlock(&r->mu);
  if (run) run_step(r);
  return NULL;
}

/* check_result verifies a result by its content (results come as they complete, so their
 * index says nothing) and, on the reading thread, runs the step command once `step_n`
 * results are in: counting read results is counting completed tasks. */
static int check_result(long i, const unsigned char *data, size_t len, void *arg) {
  (void)i;
  run_t *r = arg;
  uint64_t seed, sum;
  if (len != 2 * SEED_SIZE) return -1;
  memcpy(&seed, data, SEED_SIZE);
  memcpy(&sum, data + SEED_SIZE, SEED_SIZE);
  if (seed >= NSEEDS || sum != r->sums[seed]) return -1;
  if (++r->done == r->step_n && r->step_cmd != NULL && r->c->step_at > 0) run_step(r);
  return 0;
}

/* spin_program is farm(seq(bench:spin, "<iters>")), or with `stages` > 1 a farm of a
 * pipeline of that many spins of iters / stages each. */
static lt_skel_t *spin_program(unsigned long long iters, int stages) {
  char text[ITERS_TEXT];
  if (stages <= 1) {
    int n = snprintf(text, sizeof text, "%llu", iters);
    return lt_farm(lt_seq_with("bench:spin", text, (size_t)n));
  }
  int n = snprintf(text, sizeof text, "%llu", iters / (unsigned long long)stages);
  lt_skel_t *p = lt_seq_with("bench:spin", text, (size_t)n);
  for (int k = 1; k < stages; k++)
    p = lt_pipeline(p, lt_seq_with("bench:spin", text, (size_t)n), NULL);
  return lt_farm(p);
}

/* cpu_now returns this process's CPU time in seconds: t1 is CPU time, so that other load on
 * the machine while it is measured does not inflate it. */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* local_times runs `n` tasks (seeds 0..n-1) one at a time in this process with
 * lt_eval_run_local and gives each one's CPU seconds and checksum. */
static int local_times(unsigned long long iters, int stages, int n, double *secs, uint64_t *sums) {
  lt_eval_t *ev = NULL;
  int rc = lt_eval_new(&ev, spin_program(iters, stages));
  if (rc == LT_OK && getenv("LITHIUM_MODULES") == NULL)
    rc = lt_eval_set(ev, "modules", LT_EXAMPLE_MODULES);
  if (rc == LT_OK) rc = lt_eval_run_local(ev);
  for (int i = 0; rc == LT_OK && i < n; i++) {
    unsigned char task[SEED_SIZE];
    lt_buf_t *b = NULL;
    make_task(i, task, NULL);
    double t0 = cpu_now();
    if ((rc = lt_eval_submit(ev, task, sizeof task, NULL)) != LT_OK) break;
    if ((rc = lt_eval_next(ev, &b)) != LT_OK) break;
    secs[i] = cpu_now() - t0;
    if (lt_buf_error(b) != LT_OK || lt_buf_len(b) != 2 * SEED_SIZE) {
      fprintf(stderr, "bench_hetero: local spin failed: %s\n", lt_buf_errmsg(b));
      rc = LT_EKERNEL;
    } else {
      memcpy(&sums[i], (const unsigned char *)lt_buf_data(b) + SEED_SIZE, sizeof sums[i]);
    }
    lt_buf_free(b);
  }
  if (rc != LT_OK && rc != LT_EKERNEL)
    fprintf(stderr, "bench_hetero: local evaluator: %s\n", lt_strerror(rc));
  lt_eval_free(ev);
  return rc == LT_OK ? 0 : -1;
}

/* calibrate picks the iteration count of a task of c->task_ms and measures its CPU time
 * *t1 (the median of NSEEDS runs) and the checksum of every seed. The short probe can be off
 * (frequency ramp-up, cold caches), so a count far off the target is scaled once more. */
static int calibrate(const config_t *c, unsigned long long *iters, double *t1, uint64_t *sums) {
  double secs[NSEEDS], want = c->task_ms / 1e3;
  if (local_times(PROBE_ITERS, c->stages, NSEEDS, secs, sums) != 0) return -1;
  *t1 = bench_median(secs, NSEEDS);
  *iters = PROBE_ITERS;
  for (int k = 0; k < 2 && fabs(*t1 - want) > 0.1 * want; k++) {
    double scaled = (double)*iters * want / (*t1 > 0 ? *t1 : 1e-9);
    *iters = scaled < 1 ? 1 : (unsigned long long)scaled;
    if (local_times(*iters, c->stages, NSEEDS, secs, sums) != 0) return -1;
    *t1 = bench_median(secs, NSEEDS);
  }
  return 0;
}

/* read_cpu runs c->cpu_cmd and reads one number per host from its output into cpu[]; all 0
 * without the command. Returns 0, or -1 after printing why. */
static int read_cpu(const config_t *c, double *cpu) {
  memset(cpu, 0, sizeof *cpu * (size_t)c->nhosts);
  if (c->cpu_cmd == NULL) return 0;
  FILE *f = popen(c->cpu_cmd, "r");
  int n = 0;
  while (f != NULL && n < c->nhosts && fscanf(f, "%lf", &cpu[n]) == 1)
    n++;
  int rc = f != NULL ? pclose(f) : -1;
  if (n != c->nhosts || rc != 0) {
    fprintf(stderr, "bench_hetero: --cpu-cmd gave %d of %d numbers (status %d): %s\n", n, c->nhosts,
            rc, c->cpu_cmd);
    return -1;
  }
  return 0;
}

/* print_window_history prints server `ep`'s window history from the stats as a JSON line. */
static void print_window_history(const config_t *c, const char *json, const char *ep,
                                 double step_ms) {
  const char *s = stats_server(json, ep);
  const char *h = s != NULL ? strstr(s, "\"window_history\":") : NULL;
  if (h == NULL) {
    fprintf(stderr, "bench_hetero: no window history for %s in the stats\n", ep);
    return;
  }
  h += strlen("\"window_history\":");
  size_t n = 0;
  int depth = 0;
  do { /* the array is made of numbers and brackets only */
    if (h[n] == '[') depth++;
    if (h[n] == ']') depth--;
    n++;
  } while (depth > 0 && h[n] != '\0');
  printf("{\"bench\": \"%s\", \"detail\": \"window_history\", \"run\": \"throttle\", "
         "\"endpoint\": \"%s\", \"step_ms\": %.0f, \"window_changes\": %lld, "
         "\"window_history\": %.*s}\n",
         c->bench, ep, step_ms, ex_stat_u64(s, "window_changes"), (int)n, h);
}

/* one_run runs the farm with options kv; *secs is its makespan, *done_at_step the results
 * read when the step ran (c->tasks without a step). Prints the per-server completed counts
 * against the ideal split, and with `windows` the fastest server's window history.
 * Returns 0, 1 when the client rejects an option (the run is skipped), -1 on failure. */
static int one_run(const config_t *c, const char *name, const char *const *kv,
                   unsigned long long iters, const uint64_t *sums, int windows, double *secs,
                   long *done_at_step, double *cpu_used, double *capacity) {
  if (c->reset_cmd != NULL && system(c->reset_cmd) != 0) {
    fprintf(stderr, "bench_hetero: reset command failed: %s\n", c->reset_cmd);
    return -1;
  }
  wait_idle(c);
  lt_eval_t *ev = NULL;
  int rc = lt_eval_new(&ev, spin_program(iters, c->stages));
  for (size_t i = 0; rc == LT_OK && kv[i] != NULL; i += 2) {
    if ((rc = lt_eval_set(ev, kv[i], kv[i + 1])) != LT_OK) {
      fprintf(stderr, "bench_hetero: run %s skipped: this client rejects option %s=%s: %s\n", name,
              kv[i], kv[i + 1], lt_strerror(rc));
      lt_eval_free(ev);
      return 1;
    }
  }
  if (rc == LT_OK && c->trace != NULL) {
    char path[4096];
    snprintf(path, sizeof path, "%s%s.json", c->trace, name);
    rc = lt_eval_set(ev, "trace", path);
  }
  for (int i = 0; rc == LT_OK && i < c->nhosts; i++)
    rc = lt_eval_add_host(ev, c->hosts[i]);
  double t_start = ex_now();
  if (rc == LT_OK) rc = lt_eval_start(ev);
  if (rc != LT_OK) {
    fprintf(stderr, "bench_hetero: run %s: cannot start on %s, ...: %s\n", name, c->hosts[0],
            lt_strerror(rc));
    lt_eval_free(ev);
    return -1;
  }
  run_t r = {
      .step_cmd = c->step_cmd, .c = c, .ev = ev, .step_n = c->tasks, .step_delay = c->step_delay};
  if (c->step_at > 0) r.step_n = (long)ceil(c->step_at * (double)c->tasks);
  for (int i = 0; i < c->npids; i++)
    r.pid_cpu0[i] = pid_cpu(c->pids[i]);
  pthread_mutex_init(&r.mu, NULL);
  pthread_cond_init(&r.cv, NULL);
  pthread_t timer;
  int timed = c->step_cmd != NULL && (r.step_delay > 0 || c->step_work > 0) &&
              pthread_create(&timer, NULL, step_timer, &r) == 0;
  memcpy(r.sums, sums, sizeof r.sums);
  double cpu0[MAX_HOSTS], cpu1[MAX_HOSTS];
  if (read_cpu(c, cpu0) != 0) {
    lt_eval_free(ev);
    return -1;
  }
  double t0 = ex_now();
  int status =
      bench_eval_stream("bench_hetero", ev, c->tasks, SEED_SIZE, make_task, check_result, &r, secs);
  if (timed) {
    pthread_mutex_lock(&r.mu);
    r.over = 1;
    pthread_cond_signal(&r.cv);
    pthread_mutex_unlock(&r.mu);
    pthread_join(timer, NULL);
  }
  pthread_mutex_destroy(&r.mu);
  pthread_cond_destroy(&r.cv);
  char *json = NULL;
  if (status == 0 && r.step_failed) status = -1;
  if (status == 0 && read_cpu(c, cpu1) != 0) status = -1;
  if (status == 0 && lt_eval_stats_json(ev, &json) != LT_OK) {
    fprintf(stderr, "bench_hetero: run %s: no stats\n", name);
    status = -1;
  }
  if (status == 0) {
    *done_at_step = r.step_n;
    fprintf(stderr, "bench_hetero: run %s: %ld tasks in %.2f s%s", name, c->tasks, *secs,
            r.t_step > 0 ? "" : "\n");
    if (r.t_step > 0 && c->busiest)
      fprintf(stderr, ", step after %.2f s on server %d (%s)\n", r.t_step - t0, r.step_host,
              c->hosts[r.step_host]);
    else if (r.t_step > 0)
      fprintf(stderr, ", step after %.2f s\n", r.t_step - t0);
    double sum = 0, sum_after = 0;
    int fastest = 0;
    for (int i = 0; i < c->nhosts; i++) {
      sum += c->speeds[i];
      sum_after += c->nafter > 0 ? c->after[i] : 0;
      if (c->speeds[i] > c->speeds[fastest]) fastest = i;
    }
    /* The CPU time the quotas allowed: the old speeds until the step, the new ones after. */
    double before = r.t_step > 0 ? r.t_step - t0 : *secs;
    *capacity = sum * before + (c->nafter > 0 ? sum_after * (*secs - before) : 0);
    *cpu_used = 0;
    printf("{\"bench\": \"%s\", \"detail\": \"servers\", \"run\": \"%s\", \"servers\": [", c->bench,
           name);
    for (int i = 0; i < c->nhosts; i++) {
      const char *s = stats_server(json, c->hosts[i]);
      double ideal = (double)r.step_n * c->speeds[i] / sum;
      /* --step-busiest: the server hit takes the first speed after the step, server 0 its. */
      int k = i == r.step_host ? 0 : i == 0 ? r.step_host : i;
      if (c->nafter > 0) ideal += (double)(c->tasks - r.step_n) * c->after[k] / sum_after;
      /* The server's calibrated speed and measured service time show what placement saw. */
      *cpu_used += cpu1[i] - cpu0[i];
      printf("%s{\"endpoint\": \"%s\", \"cores\": %g, \"completed\": %lld, \"ideal\": %.1f, "
             "\"speed\": %.3g, \"service_us\": %.0f, \"cpu_s\": %.2f, \"instructions_cpu_s\": "
             "%.2f}",
             i > 0 ? ", " : "", c->hosts[i], c->speeds[i],
             s != NULL ? ex_stat_u64(s, "completed") : -1, ideal,
             s != NULL ? stat_double(s, "speed") : -1,
             s != NULL ? stat_double(s, "service_us") : -1, cpu1[i] - cpu0[i],
             s != NULL ? stat_double(s, "cpu_s") : -1);
    }
    printf("]}\n");
    printf("{\"bench\": \"%s\", \"detail\": \"copies\", \"run\": \"%s\", \"backups\": %lld, "
           "\"backups_won\": %lld, \"reruns\": %lld, \"migrations\": %lld, \"migrated\": %lld, "
           "\"step_host\": %d}\n",
           c->bench, name, ex_stat_u64(json, "backups"), ex_stat_u64(json, "backups_won"),
           ex_stat_u64(json, "reruns"), ex_stat_u64(json, "migrations"),
           ex_stat_u64(json, "migrated"), r.t_step > 0 ? r.step_host : -1);
    if (windows)
      print_window_history(c, json, c->hosts[fastest],
                           r.t_step > 0 ? (r.t_step - t_start) * 1e3 : -1);
    fflush(stdout);
  }
  free(json);
  lt_eval_free(ev);
  return status;
}

int main(int argc, char **argv) {
  config_t c = {.tasks = 800, .task_ms = 20};
  int rc = parse_args(argc, argv, &c);
  if (rc != 0) {
    free(c.hosts_buf);
    return rc > 0 ? 0 : 2;
  }
  unsigned long long iters = 0;
  double t1 = 0;
  uint64_t sums[NSEEDS];
  if (calibrate(&c, &iters, &t1, sums) != 0) {
    free(c.hosts_buf);
    return 1;
  }
  double sum = 0, sum_after = 0;
  for (int i = 0; i < c.nhosts; i++) {
    sum += c.speeds[i];
    sum_after += c.nafter > 0 ? c.after[i] : 0;
  }
  c.step_delay = c.step_time * (double)c.tasks * t1 / sum;
  fprintf(stderr,
          "bench_hetero: %ld tasks of %llu iterations, t1 = %.2f ms on this core, "
          "%d servers with %g cores in all\n",
          c.tasks, iters, t1 * 1e3, c.nhosts, sum);

  const char *const eft[] = {"ordered", "off", NULL};
  const char *const rr[] = {"ordered", "off", "placement", "rr", NULL};
  const char *const thr[] = {"ordered", "off", "throttle", "on", NULL};
  struct {
    const char *name;
    const char *const *kv;
    int windows;
    double secs, eff, cpu, capacity;
    int rc;
  } runs[] = {{"default", eft, 0, 0, 0, 0, 0, 0},
              {"rr", rr, 0, 0, 0, 0, 0, 0},
              {"throttle", thr, 1, 0, 0, 0, 0, 0}};
  const char *const boff[] = {"ordered", "off", "backup", "off", NULL};
  const char *const bon[] = {"ordered", "off", "backup", "on", NULL};
  if (c.backup) {
    runs[0].name = "backup_off";
    runs[0].kv = boff;
    runs[1].name = "backup_on";
    runs[1].kv = bon;
  }
  int nruns = c.throttle && !c.backup ? 3 : 2, status = 0;
  for (int k = 0; k < nruns && status == 0; k++) {
    long at = c.tasks;
    runs[k].rc = one_run(&c, runs[k].name, runs[k].kv, iters, sums, runs[k].windows, &runs[k].secs,
                         &at, &runs[k].cpu, &runs[k].capacity);
    if (runs[k].rc < 0) status = 1;
    if (runs[k].rc != 0) continue;
    /* The ideal: the work done before the step at the old speeds, the rest at the new ones. */
    double ideal = (double)at * t1 / sum;
    if (c.nafter > 0) ideal += (double)(c.tasks - at) * t1 / sum_after;
    runs[k].eff = ideal / runs[k].secs;
    char metric[64];
    snprintf(metric, sizeof metric, k == 0 ? "makespan" : "makespan_%s", runs[k].name);
    bench_json(c.bench, metric, runs[k].secs, ideal, "s");
    /* How much of the CPU time the quotas allowed the servers used: low when placement left
     * fast servers idle, or when other load on the machine took their share. */
    if (k == 0 && c.cpu_cmd != NULL)
      bench_json(c.bench, "cpu_used", runs[k].cpu, runs[k].capacity, "s");
  }
  if (status == 0 && c.backup) {
    /* The straggler's copies against waiting for it: the target is at most 0.6. */
    bench_json(c.bench, "backup_ratio", runs[1].rc == 0 ? runs[1].secs / runs[0].secs : 0, 0.6,
               "ratio");
  } else if (status == 0) {
    bench_json(c.bench, "efficiency", runs[0].eff, runs[1].rc == 0 ? runs[1].eff : 0, "ratio");
    if (c.throttle) bench_json(c.bench, "efficiency_throttle", runs[2].eff, runs[0].eff, "ratio");
  }
  free(c.hosts_buf);
  return status;
}
