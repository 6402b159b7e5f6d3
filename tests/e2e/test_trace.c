/* test_trace.c: the trace=FILE option on real servers. python3's json module checks that the
 * file is JSON and lists its events for the checks in C: one span per executed instruction,
 * only on worker tracks of the servers of the run, each within the run; window and load
 * counters for every server; the metadata names; fused chains named by their kernels. The
 * file is already valid JSON once the stream is over, before lt_eval_free. A path in a
 * directory that does not exist fails lt_eval_start, naming the file. scripts/plot draws the
 * trace as two SVG files that parse as XML. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define MAX_EVENTS 20000

/* One event of the trace, as the python lister prints it. */
typedef struct tev {
  char ph[4];
  long pid, tid;
  long long ts, dur;    /* -1 when absent */
  long long sent, recv; /* a span's args.sent and args.recv, -1 when absent */
  char name[160];
  char arg[320]; /* args.name, args.threads or args.status, whichever is there */
} tev_t;

/* Loads the trace and prints one tab-separated line per event; exits non-zero when the file
 * is not JSON or not in the trace-event object format. */
static const char *const LISTER =
    "import json, sys\n"
    "d = json.load(open(sys.argv[1], encoding='utf-8'))\n"
    "assert isinstance(d, dict) and d['displayTimeUnit'] == 'ms'\n"
    "assert isinstance(d['traceEvents'], list)\n"
    "for e in d['traceEvents']:\n"
    "    a = e.get('args', {})\n"
    "    arg = a.get('name', a.get('threads', a.get('status', '')))\n"
    "    print(e['ph'], e['pid'], e.get('tid', 0), e.get('ts', -1), e.get('dur', -1),\n"
    "          e['name'], arg, a.get('sent', -1), a.get('recv', -1), sep='\\t')\n";

static char dir[64]; /* this test's scratch directory */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* run_python runs python3 with `argv` (after the program name, NULL-terminated), its stdout
 * into *out (caller frees, may be NULL), and returns its exit status. */
static int run_python(char **out, const char *const *argv) {
  char *args[16] = {(char *)LT_TEST_PYTHON};
  int n = 1;
  for (; argv[n - 1] != NULL && n < 15; n++)
    args[n] = (char *)argv[n - 1];
  args[n] = NULL;
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork(); /* (client/spawn.h hides <spawn.h> from this test) */
  cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execv(LT_TEST_PYTHON, args);
    _exit(127);
  }
  close(fds[1]);
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  ssize_t got;
  while ((got = read(fds[0], buf + len, cap - len - 1)) != 0) {
    if (got < 0) {
      cr_assert_eq(errno, EINTR);
      continue;
    }
    len += (size_t)got;
    if (len + 1 == cap) buf = realloc(buf, cap *= 2);
  }
  buf[len] = '\0';
  close(fds[0]);
  int st;
  while (waitpid(pid, &st, 0) < 0)
    cr_assert_eq(errno, EINTR);
  if (out != NULL)
    *out = buf;
  else
    free(buf);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* list_events parses the trace at `path` into ev (at most MAX_EVENTS); returns the number of
 * events, or -1 when python3 refused the file. */
static int list_events(const char *path, tev_t *ev) {
  char *text = NULL;
  const char *argv[] = {"-c", LISTER, path, NULL};
  if (run_python(&text, argv) != 0) {
    free(text);
    return -1;
  }
  int n = 0;
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
    cr_assert_lt(n, MAX_EVENTS);
    tev_t *e = &ev[n++];
    memset(e, 0, sizeof *e);
    char *f[9];
    char *p = line;
    for (int k = 0; k < 9; k++) {
      f[k] = strsep(&p, "\t");
      cr_assert_not_null(f[k], "short line: %s", line);
    }
    snprintf(e->ph, sizeof e->ph, "%s", f[0]);
    e->pid = strtol(f[1], NULL, 10);
    e->tid = strtol(f[2], NULL, 10);
    e->ts = strtoll(f[3], NULL, 10);
    e->dur = strtoll(f[4], NULL, 10);
    snprintf(e->name, sizeof e->name, "%s", f[5]);
    snprintf(e->arg, sizeof e->arg, "%s", f[6]);
    e->sent = strtoll(f[7], NULL, 10);
    e->recv = strtoll(f[8], NULL, 10);
  }
  free(text);
  return n;
}

static int count_spans(const tev_t *ev, int n) {
  int k = 0;
  for (int i = 0; i < n; i++)
    k += strcmp(ev[i].ph, "X") == 0;
  return k;
}

/* find returns the first event with phase ph, name and pid (tid too when >= 0), or NULL. */
static const tev_t *find(const tev_t *ev, int n, const char *ph, const char *name, long pid,
                         long tid) {
  for (int i = 0; i < n; i++)
    if (strcmp(ev[i].ph, ph) == 0 && strcmp(ev[i].name, name) == 0 && ev[i].pid == pid &&
        (tid < 0 || ev[i].tid == tid))
      return &ev[i];
  return NULL;
}

/* A traced run: the trace file, the stats and how long the run took (µs, from before
 * lt_eval_start to after the last result). */
typedef struct run {
  char path[128];
  char *stats;
  int64_t run_us;
  int64_t free_us;   /* from before lt_eval_start to after lt_eval_free */
  uint64_t executed; /* instructions dispatched less those moved before they ran */
} run_t;

/* traced_run runs `n` int64 tasks through `program` on 2 spawned servers with 2 threads each
 * and trace=dir/trace.json (set as LITHIUM_TRACE when `via_env`); each result must be
 * expect(i). Before lt_eval_free it waits until the trace on disk is valid JSON with a span
 * per executed instruction. */
static void traced_run(run_t *r, lt_skel_t *program, int n, int64_t (*expect)(int64_t),
                       const char *normal_form, int via_env) {
  strcpy(dir, "/tmp/lt_trace_XXXXXX");
  cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
  snprintf(r->path, sizeof r->path, "%s/trace.json", dir);
  /* No copies of stragglers: each would be one more instruction run than the count below
   * expects. The trace option last, so that leaving it out keeps the others (it once cut
   * `backup=off` off too, and a loaded machine's copies failed the count). */
  const char *opts[] = {"normal_form", normal_form, "backup", "off", "trace", r->path, NULL};
  if (via_env) {
    cr_assert_eq(setenv("LITHIUM_TRACE", r->path, 1), 0); /* this test's own process */
    opts[4] = NULL;
  }
  lt_eval_t *ev = NULL;
  int64_t t0 = now_us();
  ev = new_eval_with(program, 2, opts);
  submit_i64s(ev, n);
  lt_eval_close(ev);
  for (int i = 0; i < n; i++)
    cr_assert_eq(next_i64(ev), expect(i), "task %d", i);
  r->run_us = now_us() - t0;
  cr_assert_eq(lt_eval_stats_json(ev, &r->stats), LT_OK);
  /* Moved (migrated) instructions were dispatched twice and ran once. */
  uint64_t migrated = 0;
  stats_each(r->stats, "migrated", &migrated, 1);
  r->executed = stats_u64(r->stats, "instructions") - migrated;
  cr_assert_eq(stats_u64(r->stats, "tasks_completed"), (uint64_t)n, "%s", r->stats);
  cr_assert_eq(stats_u64(r->stats, "retries"), 0, "%s", r->stats);
  cr_assert_eq(stats_sum(r->stats, "completed"), r->executed, "%s", r->stats);

  /* The stream is over: the dispatcher flushes once it is idle, leaving valid JSON. */
  tev_t *evs = malloc(MAX_EVENTS * sizeof *evs);
  int k = -1;
  /* (A read racing a write may see a torn file: only the state once idle counts.) */
  for (int64_t until = now_us() + 20 * 1000000; now_us() < until;) {
    k = list_events(r->path, evs);
    if (k >= 0 && (uint64_t)count_spans(evs, k) == r->executed) break;
    usleep(50 * 1000);
  }
  cr_assert_geq(k, 0, "the trace is not valid JSON before lt_eval_free");
  cr_assert_eq((uint64_t)count_spans(evs, k), r->executed, "spans before lt_eval_free");
  free(evs);
  lt_eval_free(ev);
  r->free_us = now_us() - t0;
}

static void run_clear(run_t *r) {
  free(r->stats);
  nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int64_t plus_one(int64_t i) {
  return i + 1;
}

static int64_t fused(int64_t i) {
  return (i + 1) * 2;
}

/* server_pid returns the process of the server whose process_name holds `endpoint`. */
static long server_pid(const tev_t *ev, int n, const char *endpoint) {
  for (int i = 0; i < n; i++)
    if (strcmp(ev[i].ph, "M") == 0 && strcmp(ev[i].name, "process_name") == 0 &&
        strstr(ev[i].arg, endpoint) != NULL)
      return ev[i].pid;
  return -1;
}

Test(trace, farm_on_two_servers, .timeout = 180) {
  const int n = 150;
  run_t r;
  traced_run(
      &r,
      lt_pipeline(lt_farm(lt_seq_with("testk:sleep", "1", 1)), lt_farm(lt_seq("testk:inc")), NULL),
      n, plus_one, "off", 0);
  cr_assert_eq(r.executed, 2 * (uint64_t)n, "%s", r.stats);
  tev_t *ev = malloc(MAX_EVENTS * sizeof *ev);
  int k = list_events(r.path, ev);
  cr_assert_gt(k, 0, "the final trace is not valid JSON");

  /* The servers of the run, by their endpoints in the stats. */
  long pids[2];
  const char *p = r.stats;
  for (int s = 0; s < 2; s++) {
    p = strstr(p, "\"endpoint\":\"");
    cr_assert_not_null(p, "%s", r.stats);
    p += strlen("\"endpoint\":\"");
    char ep[128];
    snprintf(ep, sizeof ep, "%.*s", (int)strcspn(p, "\""), p);
    pids[s] = server_pid(ev, k, ep);
    cr_assert_geq(pids[s], 0, "no process named %s", ep);
    cr_assert_not_null(find(ev, k, "C", "window", pids[s], -1), "window of %s", ep);
    cr_assert_not_null(find(ev, k, "C", "load", pids[s], -1), "load of %s", ep);
    const tev_t *w = find(ev, k, "C", "window", pids[s], -1);
    cr_assert_gt(atoi(w->arg), 0, "window threads of %s", ep);
  }
  cr_assert_neq(pids[0], pids[1]);
  const tev_t *client = find(ev, k, "M", "process_name", 1, -1);
  cr_assert(client != NULL && strcmp(client->arg, "lithium client") == 0);
  const tev_t *disp = find(ev, k, "M", "thread_name", 1, 1);
  cr_assert(disp != NULL && strcmp(disp->arg, "dispatcher") == 0);

  int spans = 0, sleeps = 0, incs = 0, per[2] = {0, 0};
  for (int i = 0; i < k; i++) {
    const tev_t *e = &ev[i];
    cr_assert(e->ts >= -1 && e->ts <= r.free_us, "event %s at %lld", e->name, e->ts);
    if (strcmp(e->ph, "X") != 0) continue;
    spans++;
    int s = e->pid == pids[0] ? 0 : e->pid == pids[1] ? 1 : -1;
    cr_assert_geq(s, 0, "span %s on process %ld, not a server of the run", e->name, e->pid);
    per[s]++;
    /* Tracks 1 and 2 are the workers': no kernel runs on the loop thread. */
    cr_assert(e->tid >= 1 && e->tid <= 2, "span on track %ld: servers have 2 workers", e->tid);
    cr_assert_geq(e->dur, 0);
    cr_assert_geq(e->ts, 0);
    cr_assert_leq(e->ts + e->dur, r.run_us, "span %lld+%lld past the run (%lld us)", e->ts, e->dur,
                  (long long)r.run_us);
    cr_assert_str_eq(e->arg, "ok");
    /* Sent before its completion came back, which was no earlier than the span's end. */
    cr_assert(e->sent >= 0 && e->sent <= e->recv, "span sent at %lld, back at %lld", e->sent,
              e->recv);
    cr_assert(e->ts + e->dur <= e->recv && e->recv <= r.run_us, "span %lld+%lld back at %lld",
              e->ts, e->dur, e->recv);
    sleeps += strcmp(e->name, "testk:sleep") == 0;
    incs += strcmp(e->name, "testk:inc") == 0;
    const tev_t *tn = find(ev, k, "M", "thread_name", e->pid, e->tid);
    cr_assert(tn != NULL && strncmp(tn->arg, "worker ", 7) == 0, "track %ld/%ld unnamed", e->pid,
              e->tid);
  }
  cr_assert_eq((uint64_t)spans, r.executed, "one span per instruction: %s", r.stats);
  cr_assert_eq(sleeps, n);
  cr_assert_eq(incs, n);
  cr_assert_gt(per[0] + per[1], 0);
  free(ev);
  run_clear(&r);
}

/* Also: LITHIUM_TRACE sets the option. */
Test(trace, fused_chains_are_named_by_their_kernels, .timeout = 120) {
  const int n = 40;
  run_t r;
  traced_run(&r, lt_pipeline(lt_seq("testk:inc"), lt_seq("testk:dbl"), NULL), n, fused, "on", 1);
  cr_assert_eq(r.executed, (uint64_t)n, "normal form: one instruction per task: %s", r.stats);
  tev_t *ev = malloc(MAX_EVENTS * sizeof *ev);
  int k = list_events(r.path, ev);
  cr_assert_gt(k, 0);
  int spans = 0;
  for (int i = 0; i < k; i++) {
    if (strcmp(ev[i].ph, "X") != 0) continue;
    spans++;
    cr_assert_str_eq(ev[i].name, "testk:inc > testk:dbl");
  }
  cr_assert_eq(spans, n);
  free(ev);
  run_clear(&r);
}

Test(trace, a_bad_path_fails_the_start, .init = cr_redirect_stderr, .timeout = 30) {
  const char *path = "/nonexistent-lithium-dir/trace.json";
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_farm(lt_seq("testk:inc"))), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "trace", path), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "trace", ""), LT_EINVAL, "an empty path is refused at once");
  cr_assert_eq(lt_eval_add_host(ev, "tcp://127.0.0.1:1"), LT_OK);
  cr_assert_eq(lt_eval_start(ev), LT_EIO);
  lt_eval_free(ev);
  cr_assert_eq(access(path, F_OK), -1);
  fflush(stderr);
  char line[512] = "";
  cr_assert_not_null(fgets(line, sizeof line, cr_get_redirected_stderr()));
  cr_assert(strstr(line, path) != NULL && strstr(line, "cannot open") != NULL, "%s", line);
}

/* check_svg parses an SVG with python's xml.etree and returns how many polylines it draws
 * and, in *text, its text elements joined by '|' (caller frees). */
static int check_svg(const char *path, char **text) {
  static const char *const script =
      "import sys, xml.etree.ElementTree as ET\n"
      "root = ET.parse(sys.argv[1]).getroot()\n"
      "ns = '{http://www.w3.org/2000/svg}'\n"
      "assert root.tag == ns + 'svg'\n"
      "print(len(root.findall('.//' + ns + 'polyline')))\n"
      "print('|'.join(t.text or '' for t in root.iter(ns + 'text')))\n";
  const char *argv[] = {"-c", script, path, NULL};
  char *out = NULL;
  int rc = run_python(&out, argv);
  cr_assert_eq(rc, 0, "%s is not SVG: %s", path, out);
  int lines = atoi(out);
  *text = strdup(strchr(out, '\n') + 1);
  free(out);
  return lines;
}

Test(trace, plot_draws_both_figures, .timeout = 180) {
  run_t r;
  traced_run(
      &r,
      lt_pipeline(lt_farm(lt_seq_with("testk:sleep", "1", 1)), lt_farm(lt_seq("testk:inc")), NULL),
      60, plus_one, "off", 0);
  char out[128], tasks[160], window[160];
  snprintf(out, sizeof out, "%s/plots", dir);
  snprintf(tasks, sizeof tasks, "%s/tasks.svg", out);
  snprintf(window, sizeof window, "%s/window.svg", out);
  const char *plot[] = {LT_TEST_PLOT, r.path, "--out", out, NULL};
  cr_assert_eq(run_python(NULL, plot), 0);
  char *text;
  /* One line per server, each in the legend with its id. */
  cr_assert_eq(check_svg(tasks, &text), 2, "%s", text);
  cr_assert(strstr(text, "local-0") != NULL && strstr(text, "local-1") != NULL, "%s", text);
  cr_assert(strstr(text, "time since start (s)") != NULL, "%s", text);
  free(text);
  /* The window and the active threads of each server. */
  cr_assert_eq(check_svg(window, &text), 4, "%s", text);
  cr_assert(strstr(text, "thread window") != NULL, "%s", text);
  free(text);
  /* One server only. */
  const char *one[] = {LT_TEST_PLOT, r.path, "--out", out, "--server", "local-1", NULL};
  cr_assert_eq(run_python(NULL, one), 0);
  cr_assert_eq(check_svg(window, &text), 2, "%s", text);
  cr_assert(strstr(text, "local-1") != NULL && strstr(text, "local-0") == NULL, "%s", text);
  free(text);
  const char *none[] = {LT_TEST_PLOT, r.path, "--out", out, "--server", "no-such-server", NULL};
  cr_assert_neq(run_python(NULL, none), 0);
  const char *help[] = {LT_TEST_PLOT, "--help", NULL};
  char *usage = NULL;
  cr_assert_eq(run_python(&usage, help), 0);
  cr_assert(strstr(usage, "--out") != NULL && strstr(usage, "--server") != NULL, "%s", usage);
  free(usage);
  run_clear(&r);
}
