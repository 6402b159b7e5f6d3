/* test_top.c: the stats socket (option stats_socket) and `lithium top`: a snapshot read by
 * the tool from a running farm against lt_eval_stats_json read right after; no socket
 * without the option; a path taken by a regular file or by another evaluation refused at
 * lt_eval_start; a stale socket replaced; mode 0600; the file removed at lt_eval_free; the
 * tool on a path where nothing listens; malformed requests and silent readers against a
 * running evaluation. Real lithium-server processes (harness.h). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define TASKS 120

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char tmpdir[48];
static char sock_path[96];

static void make_tmpdir(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/lt-top-XXXXXX");
  cr_assert_not_null(mkdtemp(tmpdir));
  snprintf(sock_path, sizeof sock_path, "%s/stats.sock", tmpdir);
}

static void remove_tmpdir(void) {
  DIR *d = opendir(tmpdir);
  if (d == NULL) return;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    char p[600];
    snprintf(p, sizeof p, "%s/%s", tmpdir, de->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(tmpdir);
}

/* slow_farm is farm(sleep 40 ms) on 2 servers of 2 threads: TASKS tasks take about 1.2 s. */
static lt_eval_t *slow_farm(const char *path) {
  const char *const opts[] = {"stats_socket", path, NULL};
  return new_eval_with(lt_farm(lt_seq_with("testk:sleep", "40", 2)), 2, path ? opts : NULL);
}

/* tool runs `lithium ARGS` and returns its stdout and stderr (the caller frees it) and its exit
 * status in *status. */
static char *tool(const char *args, int *status) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s %s 2>&1", LT_TEST_TOOL, args);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  size_t cap = 1 << 20, n = 0;
  char *out = calloc(1, cap);
  size_t got;
  while ((got = fread(out + n, 1, cap - 1 - n, p)) > 0)
    n += got;
  out[n] = '\0';
  int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

/* wait_completed waits (at most 30 s) until `n` tasks completed. */
static void wait_completed(lt_eval_t *ev, uint64_t n) {
  for (int i = 0; i < 3000; i++) {
    char *s = stats_of(ev);
    uint64_t done = stats_u64(s, "tasks_completed");
    free(s);
    if (done >= n) return;
    poll(NULL, 0, 10);
  }
  cr_assert_fail("fewer than %llu tasks completed in 30 s", (unsigned long long)n);
}

/* endpoints writes the servers' endpoints of a stats text, one per line, into out. */
static void endpoints(const char *json, char *out, size_t len) {
  out[0] = '\0';
  const char *pat = "\"endpoint\":\"";
  for (const char *p = json; (p = strstr(p, pat)) != NULL;) {
    p += strlen(pat);
    const char *end = strchr(p, '"');
    cr_assert_not_null(end);
    size_t at = strlen(out), n = (size_t)(end - p);
    cr_assert_lt(at + n + 2, len);
    memcpy(out + at, p, n);
    memcpy(out + at + n, "\n", 2);
  }
}

/* read_results reads the TASKS results, each its own input, then checks the stream is over. */
static void read_results(lt_eval_t *ev) {
  int64_t sum = 0;
  for (int i = 0; i < TASKS; i++)
    sum += next_i64_within(ev, 60000);
  cr_assert_eq(sum, (int64_t)TASKS * (TASKS - 1) / 2);
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next(ev, &b), LT_ECLOSED);
}

Test(top, a_snapshot_of_a_running_farm_agrees_with_the_stats, .timeout = 120) {
  make_tmpdir();
  lt_eval_t *ev = slow_farm(sock_path);
  submit_i64s(ev, TASKS);
  wait_completed(ev, 4);
  char *before = stats_of(ev);
  char args[256];
  snprintf(args, sizeof args, "top --once --json --timeout 10000 %s", sock_path);
  int status;
  char *snap = tool(args, &status);
  char *after = stats_of(ev);
  cr_assert_eq(status, 0, "lithium top: %d: %s", status, snap);
  cr_assert_eq(snap[strlen(snap) - 1], '\n');
  /* Counts only grow: the tool's snapshot lies between the two reads. */
  const char *counts[] = {"tasks_completed", "instructions", "bytes_to_servers",
                          "bytes_from_servers", "elapsed_ms"};
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
    cr_assert_leq(stats_u64(before, counts[k]), stats_u64(snap, counts[k]), "%s", counts[k]);
    cr_assert_leq(stats_u64(snap, counts[k]), stats_u64(after, counts[k]), "%s", counts[k]);
  }
  cr_assert_eq(stats_u64(snap, "tasks_submitted"), TASKS);
  cr_assert_eq(stats_u64(snap, "tasks_completed") + stats_u64(snap, "tasks_pending"), TASKS);
  cr_assert_eq(stats_u64(snap, "tasks_failed"), 0);
  /* The same servers, each with no more done than the stats read after say. */
  char ep_snap[1024], ep_after[1024];
  endpoints(snap, ep_snap, sizeof ep_snap);
  endpoints(after, ep_after, sizeof ep_after);
  cr_assert_str_eq(ep_snap, ep_after);
  uint64_t done_snap[8], done_after[8], inflight[8], running[8], queued[8];
  int n = stats_each(snap, "completed", done_snap, 8);
  cr_assert_eq(n, 2);
  cr_assert_eq(stats_each(after, "completed", done_after, 8), n);
  cr_assert_eq(stats_each(snap, "inflight", inflight, 8), n);
  cr_assert_eq(stats_each(snap, "running", running, 8), n);
  cr_assert_eq(stats_each(snap, "queued", queued, 8), n);
  for (int i = 0; i < n; i++) {
    cr_assert_leq(done_snap[i], done_after[i]);
    cr_assert_eq(running[i] + queued[i], inflight[i]);
    cr_assert_leq(running[i], 2, "a server of 2 threads runs %llu", (unsigned long long)running[i]);
  }
  /* Totals: each completion is one instruction's, each task a farm's one instruction. */
  cr_assert_leq(stats_sum(snap, "completed"), stats_u64(snap, "instructions"));
  cr_assert_geq(stats_sum(snap, "completed"), stats_u64(snap, "tasks_completed"));
  cr_assert_gt(stats_u64(snap, "tasks_completed"), 0);
  /* A server that completed 40 ms kernels has a tail of at least 40 ms. */
  uint64_t p95[8];
  cr_assert_eq(stats_each(snap, "service_p95_us", p95, 8), n);
  for (int i = 0; i < n; i++)
    if (done_snap[i] > 0) cr_assert_geq(p95[i], 40000, "p95 %llu us", (unsigned long long)p95[i]);
  /* The screen: a header and a row a server. */
  snprintf(args, sizeof args, "top --once %s", sock_path);
  char *screen = tool(args, &status);
  cr_assert_eq(status, 0, "%s", screen);
  cr_assert_not_null(strstr(screen, "SERVER"), "%s", screen);
  cr_assert_not_null(strstr(screen, "P95 ms"), "%s", screen);
  cr_assert_not_null(strstr(screen, "tasks  120 submitted"), "%s", screen);
  char *line = strtok(ep_snap, "\n");
  cr_assert_not_null(strstr(screen, line), "%s", screen);
  lt_eval_close(ev);
  read_results(ev);
  free(before);
  free(snap);
  free(after);
  free(screen);
  lt_eval_free(ev);
  remove_tmpdir();
}

Test(top, the_socket_is_0600_and_removed_at_free_and_absent_when_off, .timeout = 120) {
  make_tmpdir();
  /* Off (the default): nothing is created, here or in the working directory. */
  char cwd[512];
  cr_assert_not_null(getcwd(cwd, sizeof cwd));
  cr_assert_eq(chdir(tmpdir), 0);
  lt_eval_t *ev = slow_farm(NULL);
  lt_buf_t *r = one_result(ev, 7, 30000);
  lt_buf_free(r);
  DIR *d = opendir(".");
  struct dirent *de;
  int entries = 0;
  while ((de = readdir(d)) != NULL)
    entries += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
  closedir(d);
  cr_assert_eq(entries, 0, "stats_socket off left a file");
  lt_eval_free(ev);
  cr_assert_eq(chdir(cwd), 0);
  /* On: a socket of mode 0600 from lt_eval_start to lt_eval_free. */
  mode_t old = umask(0);
  ev = slow_farm(sock_path);
  umask(old);
  struct stat st;
  cr_assert_eq(lstat(sock_path, &st), 0);
  cr_assert(S_ISSOCK(st.st_mode));
  cr_assert_eq(st.st_mode & 07777, 0600, "mode %o", (unsigned)(st.st_mode & 07777));
  cr_assert_eq(st.st_uid, geteuid());
  lt_eval_free(ev);
  cr_assert_neq(lstat(sock_path, &st), 0);
  cr_assert_eq(errno, ENOENT);
  remove_tmpdir();
}

/* start_on returns lt_eval_start's code for a farm with stats_socket=path (after the failure
 * the evaluator is freed; *ev_out keeps a started one). */
static int start_on(const char *path, lt_eval_t **ev_out, char *err, size_t len) {
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_farm(lt_seq("testk:inc"))), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "server", LT_TEST_SERVER), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "modules", LT_TEST_MODULES), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "stats_socket", path), LT_OK);
  cr_assert_eq(lt_eval_spawn_local(ev, 1), LT_OK);
  int rc = lt_eval_start(ev);
  snprintf(err, len, "%s", lt_eval_error(ev));
  if (rc == LT_OK && ev_out != NULL) {
    *ev_out = ev;
  } else {
    lt_eval_free(ev);
  }
  return rc;
}

/* stale_socket leaves a socket file at path that nothing listens on (a killed run's). */
static void stale_socket(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  cr_assert_lt(strlen(path), sizeof sa.sun_path);
  memcpy(sa.sun_path, path, strlen(path));
  cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  close(fd);
}

Test(top, a_path_taken_is_refused_and_a_stale_socket_replaced, .timeout = 120) {
  make_tmpdir();
  char err[1024];
  /* A regular file: refused, and left as it was. */
  FILE *f = fopen(sock_path, "w");
  fputs("precious\n", f);
  fclose(f);
  cr_assert_eq(start_on(sock_path, NULL, err, sizeof err), LT_EEXIST);
  cr_assert_not_null(strstr(err, "stats_socket"), "%s", err);
  cr_assert_not_null(strstr(err, "exists and is not a socket"), "%s", err);
  char text[64] = {0};
  f = fopen(sock_path, "r");
  cr_assert_not_null(fgets(text, sizeof text, f));
  fclose(f);
  cr_assert_str_eq(text, "precious\n");
  unlink(sock_path);
  /* A socket nothing listens on: replaced. Another evaluation's, listening: refused. */
  stale_socket(sock_path);
  lt_eval_t *first = NULL;
  cr_assert_eq(start_on(sock_path, &first, err, sizeof err), LT_OK, "%s", err);
  cr_assert_eq(start_on(sock_path, NULL, err, sizeof err), LT_EEXIST);
  cr_assert_not_null(strstr(err, "another evaluation listens there"), "%s", err);
  /* The refused one left the first's socket alone. */
  int status;
  char args[256];
  snprintf(args, sizeof args, "top --once --json --timeout 10000 %s", sock_path);
  char *snap = tool(args, &status);
  cr_assert_eq(status, 0, "%s", snap);
  free(snap);
  lt_eval_free(first);
  remove_tmpdir();
}

Test(top, the_tool_fails_at_once_where_nothing_listens, .timeout = 60) {
  make_tmpdir();
  char args[256];
  int status;
  /* No file at all. */
  snprintf(args, sizeof args, "top --once --timeout 30000 %s", sock_path);
  char *out = tool(args, &status);
  cr_assert_eq(status, 1, "%s", out);
  cr_assert_not_null(strstr(out, "no such socket"), "%s", out);
  free(out);
  /* A socket file with nothing behind it: refused at once, not after the 30 s timeout (the
   * test's own timeout is 60 s for the two). */
  stale_socket(sock_path);
  snprintf(args, sizeof args, "top --timeout 30000 %s", sock_path);
  int64_t t0 = now_ms();
  out = tool(args, &status);
  cr_assert_lt(now_ms() - t0, 20000, "the tool waited on a socket nothing listens on");
  cr_assert_eq(status, 1, "%s", out);
  cr_assert_not_null(strstr(out, "nothing listens there"), "%s", out);
  free(out);
  /* No path: usage. */
  out = tool("top --once", &status);
  cr_assert_eq(status, 2, "%s", out);
  free(out);
  remove_tmpdir();
}

/* fake_server listens at sock_path in a child process that answers one connection with
 * `answer` and exits; returns its pid. */
static pid_t fake_server(const char *answer) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  memcpy(sa.sun_path, sock_path, strlen(sock_path));
  cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  cr_assert_eq(listen(fd, 4), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    alarm(20); /* every wait has an end, also the child's */
    int c = accept(fd, NULL, NULL);
    char req[64];
    if (c >= 0 && recv(c, req, sizeof req, 0) > 0) send(c, answer, strlen(answer), MSG_NOSIGNAL);
    _exit(0);
  }
  close(fd);
  return pid;
}

Test(top, the_tool_refuses_an_answer_that_is_no_snapshot, .timeout = 60) {
  const char *answers[] = {"{\"tasks_submitted\":1,", "[1,2]\n", "{\"a\":\"\\u12\"}\n",
                           "{\"a\":1}{\n", "{\"error\":\"unknown request\"}\n"};
  const char *says[] = {"not a stats snapshot", "not a JSON object", "not a stats snapshot",
                        "not a stats snapshot", "unknown request"};
  for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++) {
    make_tmpdir();
    pid_t pid = fake_server(answers[i]);
    char args[256];
    snprintf(args, sizeof args, "top --once --json --timeout 10000 %s", sock_path);
    int status;
    char *out = tool(args, &status);
    cr_assert_eq(status, 1, "%s: %s", answers[i], out);
    cr_assert_not_null(strstr(out, says[i]), "%s: %s", answers[i], out);
    free(out);
    cr_assert_eq(waitpid(pid, NULL, 0), pid);
    remove_tmpdir();
  }
}

Test(top, the_screen_shows_frames_until_the_evaluation_ends, .timeout = 120) {
  make_tmpdir();
  lt_eval_t *ev = slow_farm(sock_path);
  submit_i64s(ev, TASKS);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s top --interval 100 --timeout 10000 %s 2>&1", LT_TEST_TOOL,
           sock_path);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  /* The first frame is out (the tool flushes each): the evaluation ends after it. */
  char line[512];
  cr_assert_not_null(fgets(line, sizeof line, p));
  cr_assert_not_null(strstr(line, "lithium top"), "%s", line);
  lt_eval_close(ev);
  read_results(ev);
  lt_eval_free(ev);
  size_t cap = 1 << 20, n = 0, got;
  char *out = calloc(1, cap);
  while ((got = fread(out + n, 1, cap - 1 - n, p)) > 0)
    n += got;
  int st = pclose(p);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  cr_assert_not_null(strstr(out, "SERVER"), "%s", out);
  cr_assert_not_null(strstr(out, "the evaluation ended"), "%s", out);
  free(out);
  remove_tmpdir();
}

/* raw_connect connects to the stats socket; the test fails when it cannot. */
static int raw_connect(void) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
  cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0, "%s", strerror(errno));
  return fd;
}

/* raw_answer reads what the socket sends until it closes (at most 10 s) into out. */
static size_t raw_answer(int fd, char *out, size_t len) {
  size_t n = 0;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    cr_assert_gt(poll(&p, 1, 10000), 0, "no answer within 10 s");
    ssize_t got = recv(fd, out + n, len - 1 - n, 0);
    if (got <= 0) break;
    n += (size_t)got;
  }
  out[n] = '\0';
  close(fd);
  return n;
}

Test(top, malformed_requests_and_silent_readers_do_not_hurt_the_run, .timeout = 120) {
  make_tmpdir();
  lt_eval_t *ev = slow_farm(sock_path);
  submit_i64s(ev, TASKS);
  char answer[4096];
  /* A request of another protocol: an error line, then the connection closes. */
  int fd = raw_connect();
  const char http[] = "GET / HTTP/1.0\r\n\r\n";
  cr_assert_eq(send(fd, http, sizeof http - 1, 0), (ssize_t)sizeof http - 1);
  raw_answer(fd, answer, sizeof answer);
  cr_assert_not_null(strstr(answer, "{\"error\":"), "%s", answer);
  /* A line that never ends: closed without an answer. */
  fd = raw_connect();
  char junk[200];
  memset(junk, 'x', sizeof junk);
  send(fd, junk, sizeof junk, MSG_NOSIGNAL);
  cr_assert_eq(raw_answer(fd, answer, sizeof answer), 0);
  /* Binary junk with a newline: an error. */
  fd = raw_connect();
  const char bin[] = {'\0', '\xff', 's', '\n'};
  send(fd, bin, sizeof bin, MSG_NOSIGNAL);
  raw_answer(fd, answer, sizeof answer);
  cr_assert_not_null(strstr(answer, "{\"error\":"), "%s", answer);
  /* Readers that connect and never send or read, more than are served at once, then one that
   * asks and never reads: the run goes on, and the tool still gets its snapshot. */
  int silent[20];
  for (int i = 0; i < 20; i++)
    silent[i] = raw_connect();
  int lazy = raw_connect();
  send(lazy, "stats\n", 6, MSG_NOSIGNAL);
  int status;
  char args[256];
  snprintf(args, sizeof args, "top --once --json --timeout 10000 %s", sock_path);
  char *snap = tool(args, &status);
  cr_assert_eq(status, 0, "%s", snap);
  cr_assert_eq(stats_u64(snap, "tasks_submitted"), TASKS);
  free(snap);
  lt_eval_close(ev);
  read_results(ev);
  char *s = stats_of(ev);
  cr_assert_eq(stats_u64(s, "tasks_failed"), 0);
  cr_assert_eq(stats_u64(s, "retries"), 0);
  free(s);
  for (int i = 0; i < 20; i++)
    close(silent[i]);
  close(lazy);
  lt_eval_free(ev);
  remove_tmpdir();
}
