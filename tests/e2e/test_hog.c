/* test_hog.c: thread-count load throttling against external load, judged by the windows
 * the client ends with, never by times: one server's host taken away from it part of the
 * time makes that server's window smaller than the others'. The load is something the test
 * controls and that holds on a machine of any speed, in a CPU quota or not: the server is
 * stopped (SIGSTOP) most of every cycle and continued (SIGCONT) for the rest, as a host whose
 * CPU goes mostly to others would run it; the kernels sleep, so the servers need no CPU to
 * keep their speed and CPU shares between them play no part. Its own executable. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* The duty cycle of the stopped server: STOP_MS stopped, RUN_MS running. A 10 ms task on it
 * takes about (STOP_MS + RUN_MS) / RUN_MS as long, far past the throttle's 1.5 x. */
#define STOP_MS 30
#define RUN_MS  10

static void sleep_ms(int ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* start_duty_cycle starts a process that stops and continues process `pid` in turn until it
 * is killed (stop_duty_cycle) or this process ends: then it continues `pid` once more and
 * ends too, so that a failed test leaves no server stopped for good, deaf to the SIGTERM
 * that this process's end sends it. */
static pid_t start_duty_cycle(pid_t pid) {
  pid_t parent = getpid();
  pid_t c = fork();
  cr_assert_neq(c, -1);
  if (c != 0) return c;
  signal(SIGTERM, SIG_DFL);
  while (getppid() == parent) {
    kill(pid, SIGSTOP);
    sleep_ms(STOP_MS);
    kill(pid, SIGCONT);
    sleep_ms(RUN_MS);
  }
  _exit(0);
}

/* stop_duty_cycle ends the process that start_duty_cycle made and continues `pid`. */
static void stop_duty_cycle(pid_t c, pid_t pid) {
  kill(c, SIGKILL);
  waitpid(c, NULL, 0);
  kill(pid, SIGCONT);
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

/* A server's host is taken from it mid-run: its window ends smaller than those of the
 * others. The test waits for behaviour, bounded by numbers of tasks, never by time: the
 * load starts once the window of server 0 has grown to max_threads, and the run ends once it
 * is below both others'. */
Test(throttle, a_hogged_server_ends_with_a_smaller_window, .timeout = 240) {
  lt_proc_t hosts[3];
  /* Unsupervised: the pid that is stopped must be the one that runs the kernels. */
  const char *alone[] = {"--no-supervise", NULL};
  start_server_with(&hosts[0], "hogged", 4, alone);
  start_server_with(&hosts[1], "free0", 4, alone);
  start_server_with(&hosts[2], "free1", 4, alone);
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_farm(lt_seq_with("testk:sleep", "10", 2))), LT_OK);
  const char *opts[] = {"throttle", "on", "min_threads", "2", "max_threads", "4", NULL};
  for (int i = 0; opts[i] != NULL; i += 2)
    cr_assert_eq(lt_eval_set(ev, opts[i], opts[i + 1]), LT_OK);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(lt_eval_add_host(ev, hosts[i].endpoint), LT_OK);
  cr_assert_eq(lt_eval_start(ev), LT_OK);
  feeder_t f = {.ev = ev};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, feed, &f), 0);

  pid_t duty = -1;
  uint64_t w[3] = {0};
  int64_t got = 0, hog_at = -1;
  for (;;) {
    cr_assert_eq(next_i64(ev), got);
    got++;
    if (got % 25 != 0) continue;
    windows_now(ev, w);
    if (hog_at < 0 && w[0] == 4) {
      duty = start_duty_cycle(hosts[0].pid);
      hog_at = got;
    }
    if (hog_at >= 0 && w[0] < w[1] && w[0] < w[2]) break; /* the end of the run */
    if (got >= (hog_at < 0 ? 4000 : hog_at + 6000)) break;
  }
  if (duty > 0) stop_duty_cycle(duty, hosts[0].pid);
  atomic_store(&f.stop, 1);
  lt_buf_t *b;
  while (lt_eval_next(ev, &b) == LT_OK)
    lt_buf_free(b);
  pthread_join(th, NULL);
  /* The run ended with the hogged window below both others (the loop's exit); every
   * window is within its bounds then and after the drain. */
  cr_assert(duty > 0, "the window of server 0 never reached 4 in %lld tasks", (long long)got);
  cr_assert(w[0] < w[1] && w[0] < w[2], "windows %llu %llu %llu after %lld tasks, %lld loaded",
            (unsigned long long)w[0], (unsigned long long)w[1], (unsigned long long)w[2],
            (long long)got, (long long)(got - hog_at));
  windows_now(ev, w);
  for (int i = 0; i < 3; i++)
    cr_assert(w[i] >= 2 && w[i] <= 4, "window %d: %llu", i, (unsigned long long)w[i]);
  lt_eval_free(ev);
  for (int i = 0; i < 3; i++)
    lt__proc_stop(&hosts[i], 5000);
}
