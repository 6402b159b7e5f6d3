/* test_hog.c: thread-count load throttling against external load, judged by the windows
 * the client ends with, never by times: a CPU hog on one server's host makes that server's
 * window smaller than the others'. Its own executable, so that no other test shares the
 * CPUs while it runs (ctest runs suites one at a time). Linux only: it pins processes. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* pin_process puts every thread of process `pid` on CPU `cpu`. */
static void pin_process(pid_t pid, int cpu) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
  DIR *d = opendir(dir);
  cr_assert_not_null(d, "%s", dir);
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    cr_assert_eq(sched_setaffinity((pid_t)atoi(e->d_name), sizeof set, &set), 0, "%s", e->d_name);
  }
  closedir(d);
}

/* start_hog starts a process that spins on CPU `cpu` until it is killed. */
static pid_t start_hog(int cpu) {
  pid_t pid = fork();
  cr_assert_neq(pid, -1);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves no hog behind */
    if (getppid() == 1) _exit(0);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
    volatile uint64_t x = 0;
    for (;;)
      x++;
  }
  return pid;
}

/* A feeder thread streams tasks until told to stop, then closes the input. */
typedef struct feeder {
  lt_eval_t *ev;
  atomic_int stop;
  int64_t sent;
} feeder_t;

static void *feed(void *arg) {
  feeder_t *f = arg;
  while (!atomic_load(&f->stop)) {
    unsigned char tok[8];
    put_i64(tok, f->sent);
    if (lt_eval_submit(f->ev, tok, 8, NULL) != LT_OK) break;
    f->sent++;
  }
  lt_eval_close(f->ev);
  return NULL;
}

/* windows_now reads the three servers' windows from the stats. */
static void windows_now(lt_eval_t *ev, uint64_t w[3]) {
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  cr_assert_eq(stats_each(json, "window", w, 3), 3, "%s", json);
  free(json);
}

/* A hog takes the CPU of one server's host mid-run: its window ends smaller than those of
 * the others. Server 0 shares CPU 0 with eight spinning processes; servers 1 and 2 have
 * CPU 1. Tasks use a tenth of their time as CPU, so the servers do not saturate alone. The
 * test waits for behaviour, bounded by numbers of tasks, never by time: the hog starts
 * once the window of server 0 has grown to max_threads, and the run ends once it is below
 * both others'. */
Test(throttle, a_hogged_server_ends_with_a_smaller_window, .timeout = 240) {
  cpu_set_t mine;
  cr_assert_eq(sched_getaffinity(0, sizeof mine, &mine), 0);
  if (!CPU_ISSET(0, &mine) || !CPU_ISSET(1, &mine)) cr_skip_test("needs CPUs 0 and 1");
  lt_proc_t hosts[3];
  /* Unsupervised: the pid that is pinned must be the one that runs the kernels. */
  const char *alone[] = {"--no-supervise", NULL};
  start_server_with(&hosts[0], "hogged", 4, alone);
  start_server_with(&hosts[1], "free0", 4, alone);
  start_server_with(&hosts[2], "free1", 4, alone);
  pin_process(hosts[0].pid, 0);
  pin_process(hosts[1].pid, 1);
  pin_process(hosts[2].pid, 1);
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_farm(lt_seq_with("testk:work", "10", 2))), LT_OK);
  const char *opts[] = {"throttle", "on", "min_threads", "2", "max_threads", "4", NULL};
  for (int i = 0; opts[i] != NULL; i += 2)
    cr_assert_eq(lt_eval_set(ev, opts[i], opts[i + 1]), LT_OK);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(lt_eval_add_host(ev, hosts[i].endpoint), LT_OK);
  cr_assert_eq(lt_eval_start(ev), LT_OK);
  feeder_t f = {.ev = ev};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, feed, &f), 0);

  pid_t hogs[8];
  int nhogs = 0;
  uint64_t w[3] = {0};
  int64_t got = 0, hog_at = -1;
  for (;;) {
    cr_assert_eq(next_i64(ev), got);
    got++;
    if (got % 25 != 0) continue;
    windows_now(ev, w);
    if (hog_at < 0 && w[0] == 4) {
      for (nhogs = 0; nhogs < 8; nhogs++)
        hogs[nhogs] = start_hog(0);
      hog_at = got;
    }
    if (hog_at >= 0 && w[0] < w[1] && w[0] < w[2]) break; /* the end of the run */
    cr_assert_lt(got, hog_at < 0 ? 4000 : hog_at + 6000, "windows %llu %llu %llu",
                 (unsigned long long)w[0], (unsigned long long)w[1], (unsigned long long)w[2]);
  }
  atomic_store(&f.stop, 1);
  for (int i = 0; i < nhogs; i++) {
    kill(hogs[i], SIGKILL);
    waitpid(hogs[i], NULL, 0);
  }
  lt_buf_t *b;
  while (lt_eval_next(ev, &b) == LT_OK)
    lt_buf_free(b);
  pthread_join(th, NULL);
  /* The run ended with the hogged window below both others (the loop's exit); every
   * window is within its bounds then and after the drain. */
  cr_assert(w[0] < w[1] && w[0] < w[2]);
  windows_now(ev, w);
  for (int i = 0; i < 3; i++)
    cr_assert(w[i] >= 2 && w[i] <= 4, "window %d: %llu", i, (unsigned long long)w[i]);
  lt_eval_free(ev);
  for (int i = 0; i < 3; i++)
    lt__proc_stop(&hosts[i], 5000);
}
