/* test_liveness.c: nothing hangs and nothing is lost (issue "every wait ends"). Real
 * lithium-server processes get real signals: SIGKILL and a restart on the same port,
 * SIGSTOP/SIGCONT of a server and of the client, SIGTERM and SIGINT; tasks larger than a
 * server's frame limit; unreachable and unresolvable hosts; a hostile server that never
 * finishes its work and answers for instructions it was never given. Every read has a
 * deadline (lt_eval_next_timeout), so a regression fails instead of hanging. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "hostile.h"

#define READ_MS 30000 /* no result may take longer than this to arrive */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* server_stats returns the stats object of the server at `endpoint` (a pointer into json). */
static const char *server_stats(const char *json, const char *endpoint) {
  char pat[300];
  snprintf(pat, sizeof pat, "\"endpoint\":\"%s\"", endpoint);
  const char *p = strstr(json, pat);
  cr_assert_not_null(p, "%s not in %s", endpoint, json);
  return p;
}

/* ---- 1. a server restarted on its old endpoint ------------------------------------- */

Test(restart, server_killed_and_restarted_on_its_port_is_used_again, .timeout = 120) {
  lt_proc_t p[3];
  start_server(&p[0], "victim", 2);
  start_server(&p[1], "a", 2);
  start_server(&p[2], "b", 2);
  const char *opts[] = {"heartbeat_ms", "300", NULL};
  lt_eval_t *ev = eval_on_procs(lt_farm(lt_seq_with("testk:sleep", "20", 2)), p, 3, opts);
  enum { N = 600 };
  submit_i64s(ev, N);
  lt_eval_close(ev);
  char victim[256];
  snprintf(victim, sizeof victim, "%s", p[0].endpoint);
  for (int i = 0; i < N; i++) {
    if (i == 30) {
      kill(p[0].pid, SIGKILL);
      lt__proc_stop(&p[0], 1000);
      sleep_ms(300);
      const char *listen[] = {"--listen", victim, NULL};
      start_server_with(&p[0], "victim", 2, listen);
      cr_assert_str_eq(p[0].endpoint, victim);
    }
    cr_assert_eq(next_i64_within(ev, READ_MS), i);
  }
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next_timeout(ev, READ_MS, &b), LT_ECLOSED);
  char *json = stats_of(ev);
  const char *v = server_stats(json, victim);
  cr_assert_geq(stats_u64(v, "sessions"), 2, "%s", json);
  cr_assert_eq(strncmp(strstr(v, "\"alive\":"), "\"alive\":true", 12), 0, "%s", json);
  cr_assert_gt(stats_u64(v, "completed"), 0, "the restarted server got no work: %s", json);
  free(json);
  lt_eval_free(ev);
  for (int i = 0; i < 3; i++)
    lt__proc_stop(&p[i], 5000);
}

/* ---- 1b. the client paused beyond the servers' idle timeout ----------------------- */

/* run_client is the child process: it reads every result of a farm over the servers and
 * exits 0 when all are right, 2 on a wrong or failed one, 3 when one took too long. */
static void run_client(lt_proc_t *p, int n, int tasks) {
  lt_eval_t *ev = NULL;
  if (lt_eval_new(&ev, lt_farm(lt_seq_with("testk:sleep", "5", 1))) != LT_OK) _exit(4);
  lt_eval_set(ev, "heartbeat_ms", "200");
  for (int i = 0; i < n; i++)
    lt_eval_add_host(ev, p[i].endpoint);
  if (lt_eval_start(ev) != LT_OK) _exit(4);
  for (int i = 0; i < tasks; i++) {
    unsigned char tok[8];
    put_i64(tok, i);
    lt_eval_submit(ev, tok, 8, NULL);
  }
  lt_eval_close(ev);
  for (int i = 0; i < tasks; i++) {
    lt_buf_t *b = NULL;
    if (lt_eval_next_timeout(ev, READ_MS, &b) != LT_OK) _exit(3);
    int ok = lt_buf_error(b) == LT_OK && lt_buf_len(b) == 8 && get_i64(lt_buf_data(b)) == i;
    lt_buf_free(b);
    if (!ok) _exit(2);
  }
  lt_eval_free(ev);
  _exit(0);
}

Test(pause, client_stopped_beyond_idle_timeout_resumes_and_loses_nothing, .timeout = 120) {
  lt_proc_t p[2];
  const char *idle[] = {"--idle-timeout", "300", NULL};
  start_server_with(&p[0], "a", 2, idle);
  start_server_with(&p[1], "b", 2, idle);
  pid_t child = fork();
  cr_assert_geq(child, 0);
  if (child == 0) run_client(p, 2, 1500);
  sleep_ms(400); /* the client is well into its run */
  kill(child, SIGSTOP);
  sleep_ms(1200); /* four idle timeouts: both servers dropped its sessions */
  kill(child, SIGCONT);
  int status = 0;
  cr_assert_eq(waitpid(child, &status, 0), child);
  cr_assert(WIFEXITED(status), "client died: status %d", status);
  cr_assert_eq(WEXITSTATUS(status), 0, "client exit %d (2 wrong result, 3 hung)",
               WEXITSTATUS(status));
  for (int i = 0; i < 2; i++)
    lt__proc_stop(&p[i], 5000);
}

/* ---- 6. a server paused, declared dead, resumed ----------------------------------- */

Test(pause, server_stopped_then_continued_comes_back, .timeout = 120) {
  lt_proc_t p[2];
  /* Unsupervised: SIGSTOP of a supervisor would not stop the worker that serves. */
  const char *alone[] = {"--no-supervise", NULL};
  start_server_with(&p[0], "paused", 2, alone);
  start_server(&p[1], "steady", 2);
  const char *opts[] = {"heartbeat_ms", "200", NULL};
  lt_eval_t *ev = eval_on_procs(lt_farm(lt_seq_with("testk:sleep", "10", 2)), p, 2, opts);
  enum { N = 500 };
  submit_i64s(ev, N);
  lt_eval_close(ev);
  for (int i = 0; i < N; i++) {
    if (i == 20) kill(p[0].pid, SIGSTOP);
    if (i == 150) kill(p[0].pid, SIGCONT);
    cr_assert_eq(next_i64_within(ev, READ_MS), i);
  }
  char *json = stats_of(ev);
  const char *v = server_stats(json, p[0].endpoint);
  cr_assert_geq(stats_u64(v, "sessions"), 2, "never declared dead: %s", json);
  free(json);
  lt_eval_free(ev);
  for (int i = 0; i < 2; i++)
    lt__proc_stop(&p[i], 5000);
}

/* ---- 3. SIGTERM and SIGINT --------------------------------------------------------- */

static void graceful_stop(int sig) {
  lt_proc_t p[3];
  start_server(&p[0], "stopping", 2);
  start_server(&p[1], "a", 2);
  start_server(&p[2], "b", 2);
  lt_eval_t *ev = eval_on_procs(lt_farm(lt_seq_with("testk:sleep", "5", 1)), p, 3, NULL);
  enum { N = 600 };
  submit_i64s(ev, N);
  lt_eval_close(ev);
  for (int i = 0; i < N; i++) {
    if (i == 60) kill(p[0].pid, sig);
    cr_assert_eq(next_i64_within(ev, READ_MS), i); /* zero task errors */
  }
  char *json = stats_of(ev);
  cr_assert_eq(stats_u64(json, "retries"), 0, "a graceful stop was charged: %s", json);
  free(json);
  lt_eval_free(ev);
  int status = 0;
  cr_assert_eq(waitpid(p[0].pid, &status, 0), p[0].pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
  p[0].pid = 0;
  for (int i = 0; i < 3; i++)
    lt__proc_stop(&p[i], 5000);
}

Test(stop, sigterm_loses_no_task, .timeout = 120) {
  graceful_stop(SIGTERM);
}

Test(stop, sigint_loses_no_task, .timeout = 120) {
  graceful_stop(SIGINT);
}

/* SIGUSR1: drain and exit. */
Test(stop, sigusr1_drains_and_loses_no_task, .timeout = 120) {
  graceful_stop(SIGUSR1);
}

/* A storm of signals the server handles (SIGHUP: re-read the allow list) interrupts its
 * looks at the socket (EINTR): each is made again, so no message waits for the next one to
 * be read (ZMQ_FD is edge-triggered) and nothing is logged as an error. The client gets a
 * storm too (SIGUSR2, handled without SA_RESTART, as a user's timer might be): an
 * interrupted send or receive is made again, never taken for a broken session. */
typedef struct storm {
  pid_t pid;
  atomic_int stop;
  long sent;
} storm_t;

static void on_usr2(int sig) {
  (void)sig;
}

static void *hup_storm(void *arg) {
  storm_t *st = arg;
  struct timespec gap = {0, 20000};
  while (!atomic_load(&st->stop)) {
    kill(st->pid, SIGHUP);
    kill(getpid(), SIGUSR2);
    st->sent++;
    nanosleep(&gap, NULL);
  }
  return NULL;
}

#define STORM_MS 60000

Test(stop, a_storm_of_signals_loses_nothing_and_logs_no_error, .timeout = 120) {
  stderr_capture_t cap;
  stderr_capture_begin(&cap); /* the server's stderr too: it inherits this one */
  lt_proc_t p;
  start_server(&p, "hup", 2);
  lt_eval_t *ev = eval_on_procs(lt_farm(lt_seq("testk:inc")), &p, 1, NULL);
  struct sigaction sa = {.sa_handler = on_usr2}, old;
  cr_assert_eq(sigaction(SIGUSR2, &sa, &old), 0); /* no SA_RESTART */
  storm_t st = {p.pid, 0, 0};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, hup_storm, &st), 0);
  enum { N = 30000 };
  submit_i64s(ev, N);
  lt_eval_close(ev);
  /* Results that stop coming, or trickle, fail with how far they got and the stats (the test
   * takes well under a second on an idle machine; STORM_MS is a bound on a stall, not on
   * speed). */
  int64_t until = now_ms() + STORM_MS;
  int slow = 0;
  for (int i = 0; i < N; i++) {
    lt_buf_t *b = NULL;
    int rc;
    while ((rc = lt_eval_next_timeout(ev, 1000, &b)) == LT_ETIMEDOUT && now_ms() < until)
      slow++;
    if (rc != LT_OK) {
      char *json = stats_of(ev);
      cr_assert_fail("%d of %d results in %d ms (%d waits of 1 s), then %s; the storm sent %ld "
                     "signals; stats: %s",
                     i, N, STORM_MS, slow, lt_strerror(rc), st.sent, json);
    }
    cr_assert_eq(lt_buf_error(b), LT_OK, "task %d failed: %s", i, lt_buf_errmsg(b));
    cr_assert_eq(get_i64(lt_buf_data(b)), i + 1);
    lt_buf_free(b);
  }
  atomic_store(&st.stop, 1);
  pthread_join(th, NULL);
  char *json = stats_of(ev);
  cr_assert_eq(stats_u64(json, "retries"), 0, "%s", json);
  cr_assert_eq(stats_u64(json, "sessions"), 1, "the session broke: %s", json);
  cr_assert_eq(stats_u64(json, "lost_dones"), 0, "%s", json);
  free(json);
  sigaction(SIGUSR2, &old, NULL);
  lt_eval_free(ev);
  lt__proc_stop(&p, 5000);
  static char out[1 << 16];
  stderr_capture_end(&cap, out, sizeof out);
  cr_assert_gt(st.sent, 100, "the storm sent %ld signals", st.sent);
  cr_assert_null(strstr(out, "ZMQ_EVENTS"), "%s", out);
  cr_assert_null(strstr(out, " error "), "%s", out);
}

/* ---- 2. tasks over a server's frame limit ------------------------------------------ */

Test(frames, task_over_the_frame_limit_fails_alone, .timeout = 60) {
  lt_proc_t p;
  const char *small[] = {"--max-frame", "65536", NULL};
  start_server_with(&p, "small", 2, small);
  lt_eval_t *ev = eval_on_procs(lt_farm(lt_seq("testk:echo")), &p, 1, NULL);
  enum { N = 40, BIG = 100000 };
  unsigned char *big = calloc(1, BIG);
  for (int i = 0; i < N; i++) {
    unsigned char tok[8];
    put_i64(tok, i);
    if (i % 10 == 3)
      cr_assert_eq(lt_eval_submit(ev, big, BIG, NULL), LT_OK);
    else
      cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK);
  }
  lt_eval_close(ev);
  for (int i = 0; i < N; i++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next_timeout(ev, READ_MS, &b), LT_OK, "result %d", i);
    if (i % 10 == 3) {
      cr_assert_eq(lt_buf_error(b), LT_ETOOBIG, "task %d: %s", i, lt_buf_errmsg(b));
      cr_assert_not_null(strstr(lt_buf_errmsg(b), "100000"), "%s", lt_buf_errmsg(b));
      cr_assert_not_null(strstr(lt_buf_errmsg(b), "65536"), "%s", lt_buf_errmsg(b));
    } else {
      cr_assert_eq(lt_buf_error(b), LT_OK, "task %d: %s", i, lt_buf_errmsg(b));
      cr_assert_eq(get_i64(lt_buf_data(b)), i);
    }
    lt_buf_free(b);
  }
  free(big);
  lt_eval_free(ev);
  lt__proc_stop(&p, 5000);
}

Test(frames, big_tasks_go_to_the_server_that_takes_them, .timeout = 60) {
  lt_proc_t p[2];
  const char *small[] = {"--max-frame", "65536", NULL};
  start_server_with(&p[0], "small", 2, small);
  start_server(&p[1], "large", 2);
  lt_eval_t *ev = eval_on_procs(lt_farm(lt_seq("testk:echo")), p, 2, NULL);
  enum { N = 60, BIG = 100000 };
  unsigned char *big = calloc(1, BIG);
  for (int i = 0; i < N; i++) {
    put_i64(big, i);
    cr_assert_eq(lt_eval_submit(ev, big, i % 2 ? BIG : 8, NULL), LT_OK);
  }
  lt_eval_close(ev);
  for (int i = 0; i < N; i++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next_timeout(ev, READ_MS, &b), LT_OK);
    cr_assert_eq(lt_buf_error(b), LT_OK, "task %d: %s", i, lt_buf_errmsg(b));
    cr_assert_eq(lt_buf_len(b), i % 2 ? BIG : 8);
    cr_assert_eq(get_i64(lt_buf_data(b)), i);
    lt_buf_free(b);
  }
  free(big);
  lt_eval_free(ev);
  for (int i = 0; i < 2; i++)
    lt__proc_stop(&p[i], 5000);
}

Test(frames, big_batches_stay_within_a_small_frame_limit, .timeout = 60) {
  lt_proc_t p;
  const char *small[] = {"--max-frame", "4096", NULL};
  start_server_with(&p, "small", 2, small);
  /* A long parameter makes every instruction about 300 bytes: one execute of all of them
   * would be far over 4096 bytes. */
  char param[301];
  memset(param, 'x', 300);
  param[300] = '\0';
  lt_eval_t *ev = eval_on_procs(
      lt_farm(lt_pipeline(lt_seq_with("testk:inc", param, 300), lt_seq("testk:inc"), NULL)), &p, 1,
      NULL);
  enum { N = 500 };
  submit_i64s(ev, N);
  lt_eval_close(ev);
  for (int i = 0; i < N; i++)
    cr_assert_eq(next_i64_within(ev, READ_MS), i + 2);
  lt_eval_free(ev);
  lt__proc_stop(&p, 5000);
}

/* ---- 5. lazy recovery without the fetch timeout ----------------------------------- */

Test(lazy, killed_holder_is_recomputed_at_once, .timeout = 120) {
  lt_proc_t p[3];
  const char *slow_fetch[] = {"--fetch-timeout", "60000", NULL};
  for (int i = 0; i < 3; i++)
    start_server_with(&p[i], i == 0 ? "victim" : "other", 2, slow_fetch);
  /* The kill is seen on the connection at once: long heartbeats keep a loaded machine from
   * making the survivors look dead too. */
  const char *opts[] = {"mode", "optimized", "inline_max", "0", "heartbeat_ms", "3000", NULL};
  /* Every stage's output stays on its server and is fetched by the next stage's. */
  lt_eval_t *ev = eval_on_procs(
      lt_farm(lt_pipeline(lt_seq_with("testk:sleep", "5", 1), lt_seq_with("testk:sleep", "5", 1),
                          lt_seq("testk:inc"), NULL)),
      p, 3, opts);
  enum { N = 300 };
  submit_i64s(ev, N);
  lt_eval_close(ev);
  int64_t t0 = now_ms();
  for (int i = 0; i < N; i++) {
    if (i == 40) kill(p[0].pid, SIGKILL);
    cr_assert_eq(next_i64_within(ev, READ_MS), i + 1);
  }
  /* Fetches from the dead holder fail when the client says so, not after 60 s. */
  cr_assert_lt(now_ms() - t0, 30000, "took %lld ms", (long long)(now_ms() - t0));
  lt_eval_free(ev);
  for (int i = 0; i < 3; i++)
    lt__proc_stop(&p[i], 5000);
}

/* ---- 8. start with unreachable and unresolvable hosts ----------------------------- */

Test(hosts, start_does_not_wait_for_hosts_that_never_answer, .timeout = 60) {
  lt_proc_t p;
  start_server(&p, "up", 2);
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_farm(lt_seq("testk:inc"))), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "connect_timeout_ms", "3000"), LT_OK);
  cr_assert_eq(lt_eval_add_host(ev, "tcp://127.0.0.1:1"), LT_OK); /* refused */
  cr_assert_eq(lt_eval_add_host(ev, "tcp://no-such-host.invalid:5555"), LT_OK);
  cr_assert_eq(lt_eval_add_host(ev, p.endpoint), LT_OK);
  cr_assert_eq(lt_eval_add_host(ev, p.endpoint), LT_OK); /* the same server */
  int64_t t0 = now_ms();
  cr_assert_eq(lt_eval_start(ev), LT_OK);
  cr_assert_lt(now_ms() - t0, 2500, "start waited %lld ms for hosts that never answer",
               (long long)(now_ms() - t0));
  submit_i64s(ev, 50);
  lt_eval_close(ev);
  for (int i = 0; i < 50; i++)
    cr_assert_eq(next_i64_within(ev, READ_MS), i + 1);
  /* Past the connect timeout every host has a verdict. */
  sleep_ms(3500);
  char *json = stats_of(ev);
  cr_assert_not_null(strstr(json, "\"reason\":\"refused\""), "%s", json);
  cr_assert_not_null(strstr(json, "\"reason\":\"unresolvable\""), "%s", json);
  int n = 0;
  for (const char *q = json; (q = strstr(q, p.endpoint)) != NULL; q++)
    n++;
  cr_assert_eq(n, 1, "the same endpoint twice must be one server: %s", json);
  free(json);
  lt_eval_free(ev);
  lt__proc_stop(&p, 5000);
}

/* ---- 7. a hostile server ------------------------------------------------------------ */

/* A long task among short ones of the same kernel (a big photo among small ones) is out far
 * longer than 50 x its chain's best time; its server computes all the while, so the watchdog
 * leaves it alone: it is neither taken back nor computed twice. */
Test(hostile, long_task_on_a_computing_server_is_not_overdue, .timeout = 120) {
  lt_proc_t p[2];
  start_server(&p[0], "a", 1);
  start_server(&p[1], "b", 1);
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_farm(lt_seq("testk:busy"))), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "heartbeat_ms", "200"), LT_OK); /* the watchdog's floor: 1 s */
  /* The long task stays where it went: no copy of the straggler, no move at the end. */
  cr_assert_eq(lt_eval_set(ev, "backup", "off"), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "migrate", "off"), LT_OK);
  cr_assert_eq(lt_eval_add_host(ev, p[0].endpoint), LT_OK);
  cr_assert_eq(lt_eval_add_host(ev, p[1].endpoint), LT_OK);
  cr_assert_eq(lt_eval_start(ev), LT_OK);
  enum { N = 41, LONG_MS = 3000 };
  for (int i = 0; i < N; i++) {
    unsigned char tok[8];
    put_i64(tok, i == N - 1 ? LONG_MS : 2);
    cr_assert_eq(lt_eval_submit(ev, tok, sizeof tok, NULL), LT_OK);
  }
  lt_eval_close(ev);
  for (int i = 0; i < N; i++)
    cr_assert_eq(next_i64_within(ev, READ_MS), i == N - 1 ? LONG_MS : 2);
  char *json = stats_of(ev);
  cr_assert_eq(stats_u64(json, "overdue"), 0, "%s", json);
  cr_assert_eq(stats_u64(json, "stray_completions"), 0, "%s", json);
  free(json);
  lt_eval_free(ev);
  lt__proc_stop(&p[0], 5000);
  lt__proc_stop(&p[1], 5000);
}

Test(hostile, server_that_never_finishes_cannot_hang_the_client, .timeout = 120) {
  lt_hostile_t h;
  hostile_start(&h, LT_HOSTILE_KEEPS);

  lt_proc_t p;
  start_server(&p, "honest", 2);
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_farm(lt_seq_with("testk:sleep", "5", 1))), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "heartbeat_ms", "200"), LT_OK);
  cr_assert_eq(lt_eval_add_host(ev, h.endpoint), LT_OK);
  cr_assert_eq(lt_eval_add_host(ev, p.endpoint), LT_OK);
  cr_assert_eq(lt_eval_start(ev), LT_OK);
  enum { N = 200 };
  submit_i64s(ev, N);
  lt_eval_close(ev);
  for (int i = 0; i < N; i++)
    cr_assert_eq(next_i64_within(ev, READ_MS), i);
  char *json = stats_of(ev);
  cr_assert_gt(stats_u64(json, "stray_completions"), 0, "%s", json);
  cr_assert_gt(stats_u64(json, "overdue"), 0, "%s", json);
  free(json);
  lt_eval_free(ev);
  lt__proc_stop(&p, 5000);
  hostile_stop(&h);
}

/* ---- lt_eval_next_timeout ----------------------------------------------------------- */

Test(api, next_timeout_ends_the_wait, .timeout = 60) {
  lt_eval_t *ev = new_eval(lt_seq_with("testk:sleep", "700", 3), 1);
  unsigned char tok[8];
  put_i64(tok, 5);
  cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK);
  lt_eval_close(ev);
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next_timeout(ev, 0, &b), LT_ETIMEDOUT);
  cr_assert_null(b);
  int64_t t0 = now_ms();
  cr_assert_eq(lt_eval_next_timeout(ev, 100, &b), LT_ETIMEDOUT);
  cr_assert_geq(now_ms() - t0, 100);
  cr_assert_eq(next_i64_within(ev, READ_MS), 5);
  cr_assert_eq(lt_eval_next_timeout(ev, 100, &b), LT_ECLOSED);
  lt_eval_free(ev);
}

/* ---- 9. errors do not depend on the mode ------------------------------------------- */

/* first_error runs the pipeline inc | fail | dbl over one task in `mode` ("local": the
 * sequential evaluator) and returns its error and message: the first failure's, the stage
 * after it never runs. (A kernel that does not exist fails lt_eval_start now.) */
static int first_error(const char *mode, char *msg, size_t msglen) {
  lt_skel_t *prog =
      lt_pipeline(lt_seq("testk:inc"), lt_seq("testk:fail"), lt_seq("testk:dbl"), NULL);
  lt_eval_t *ev = NULL;
  if (strcmp(mode, "local") == 0) {
    cr_assert_eq(lt_eval_new(&ev, prog), LT_OK);
    cr_assert_eq(lt_eval_set(ev, "modules", LT_TEST_MODULES), LT_OK);
    cr_assert_eq(lt_eval_run_local(ev), LT_OK);
  } else {
    const char *opts[] = {"mode", mode, NULL};
    ev = new_eval_with(prog, 2, opts);
  }
  lt_buf_t *b = one_result(ev, 1, READ_MS);
  int err = lt_buf_error(b);
  snprintf(msg, msglen, "%s", lt_buf_errmsg(b));
  lt_buf_free(b);
  lt_eval_free(ev);
  return err;
}

Test(errors, a_task_fails_the_same_way_in_every_mode, .timeout = 60) {
  char local[512], plain[512], optimized[512];
  int el = first_error("local", local, sizeof local);
  int ep = first_error("plain", plain, sizeof plain);
  int eo = first_error("optimized", optimized, sizeof optimized);
  cr_assert_eq(el, LT_EKERNEL, "local: %s %s", lt_strerror(el), local);
  cr_assert_eq(ep, el, "plain: %s %s", lt_strerror(ep), plain);
  cr_assert_eq(eo, el, "optimized: %s %s", lt_strerror(eo), optimized);
  cr_assert_str_eq(plain, local);
  cr_assert_str_eq(optimized, local);
  /* The kernel's name once. */
  const char *first = strstr(local, "testk:fail");
  cr_assert_not_null(first, "%s", local);
  cr_assert_null(strstr(first + 1, "testk:fail"), "prefix twice: %s", local);
}
