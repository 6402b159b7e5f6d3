/* test_hosts.c: hosts files and announce directories (option `hosts`): the line parser
 * (comments, blank lines, keys, malformed lines), a farm on the servers of a hosts file,
 * the errors lt_eval_start gives for a bad or missing one, and announce directories with
 * real `lithium-server --announce` processes: every announced server is used, a server that
 * announces mid-run gets work, and a stopped server's file is gone; `lithium status` on
 * idle, busy and missing servers. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hosts.h"

#define KEY "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7" /* Z85, 40 characters */

typedef struct got {
  char ep[8][300];
  char key[8][64];
  int n;
} got_t;

static int collect(void *ud, const char *endpoint, const char *key) {
  got_t *g = ud;
  if (g->n == 8) return LT_ENOMEM;
  snprintf(g->ep[g->n], sizeof g->ep[g->n], "%s", endpoint);
  snprintf(g->key[g->n], sizeof g->key[g->n], "%s", key != NULL ? key : "-");
  g->n++;
  return 0;
}

static int parse(const char *text, got_t *g, char *err, size_t errlen) {
  memset(g, 0, sizeof *g);
  err[0] = '\0';
  return lt__hosts_parse(text, strlen(text), collect, g, err, errlen);
}

Test(hosts_parse, entries_comments_and_keys) {
  got_t g;
  char err[256];
  const char *text = "# servers of the lab\n"
                     "\n"
                     "tcp://10.0.0.1:5555\n"
                     "   tcp://10.0.0.2:5555   " KEY "  # node 2\r\n"
                     "\t# indented comment\n"
                     "tcp://h3:7000 # a comment after the endpoint\n"
                     "tcp://h4:7000 #" KEY "\n" /* '#' is Z85: 41 characters is a comment */
                     "tcp://h5:1";              /* no final newline */
  cr_assert_eq(parse(text, &g, err, sizeof err), LT_OK, "%s", err);
  cr_assert_eq(g.n, 5);
  cr_expect_str_eq(g.ep[0], "tcp://10.0.0.1:5555");
  cr_expect_str_eq(g.key[0], "-");
  cr_expect_str_eq(g.ep[1], "tcp://10.0.0.2:5555");
  cr_expect_str_eq(g.key[1], KEY);
  cr_expect_str_eq(g.ep[2], "tcp://h3:7000");
  cr_expect_str_eq(g.key[2], "-");
  cr_expect_str_eq(g.key[3], "-");
  cr_expect_str_eq(g.ep[4], "tcp://h5:1");
  /* A key that starts with '#' is a key, not a comment. */
  cr_assert_eq(parse("tcp://h:1 #q:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\n", &g, err, sizeof err),
               LT_OK, "%s", err);
  cr_expect_str_eq(g.key[0], "#q:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7");
  cr_assert_eq(parse("", &g, err, sizeof err), LT_OK);
  cr_assert_eq(g.n, 0);
}

Test(hosts_parse, malformed_lines_are_named) {
  got_t g;
  char err[256];
  static const struct {
    const char *text;
    const char *why;
  } bad[] = {
      {"tcp://a:1\nhost:5555\n", "line 2"},
      {"ipc:///tmp/x\n", "line 1"},
      {"tcp://a:1 shortkey\n", "public key"},
      {"\n\ntcp://a:1 " KEY " extra\n", "line 3"},
      {"tcp://\n", "endpoint"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_expect_eq(parse(bad[i].text, &g, err, sizeof err), LT_EINVAL, "%s", bad[i].text);
    cr_expect(strstr(err, bad[i].why) != NULL, "'%s' for '%s'", err, bad[i].text);
  }
}

/* ---- with servers ------------------------------------------------------------------------ */

static char tmpdir[256];

static void make_tmpdir(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/lt-hosts-XXXXXX");
  cr_assert_not_null(mkdtemp(tmpdir));
}

static void remove_tmpdir(void) {
  DIR *d = opendir(tmpdir);
  if (d == NULL) return;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    char p[600];
    snprintf(p, sizeof p, "%s/%s", tmpdir, de->d_name);
    if (rmdir(p) != 0) unlink(p);
  }
  closedir(d);
  rmdir(tmpdir);
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "%s: %s", path, strerror(errno));
  fputs(text, f);
  cr_assert_eq(fclose(f), 0);
}

static lt_eval_t *eval_on_hosts(lt_skel_t *prog, const char *hosts) {
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, prog), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "hosts", hosts), LT_OK);
  return ev;
}

/* completed_of returns the `completed` count of the server with `endpoint` in the stats, or
 * -1 when it is not there. */
static long completed_of(const char *json, const char *endpoint) {
  char pat[400];
  snprintf(pat, sizeof pat, "\"endpoint\":\"%s\"", endpoint);
  const char *p = strstr(json, pat);
  if (p == NULL) return -1;
  p = strstr(p, "\"completed\":");
  return p != NULL ? strtol(p + strlen("\"completed\":"), NULL, 10) : -1;
}

/* slow_inc is farm(pipe(sleep MS, inc)): int64 x -> x + 1 after `ms` milliseconds. */
static lt_skel_t *slow_inc(int ms) {
  char p[16];
  int n = snprintf(p, sizeof p, "%d", ms);
  return lt_farm(lt_pipeline(lt_seq_with("testk:sleep", p, (size_t)n), lt_seq("testk:inc"), NULL));
}

static void run_farm(lt_eval_t *ev, int n) {
  submit_i64s(ev, n);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  for (int i = 0; i < n; i++)
    cr_assert_eq(next_i64(ev), i + 1, "task %d", i);
}

Test(hosts, farm_on_the_servers_of_a_hosts_file, .timeout = 60) {
  make_tmpdir();
  lt_proc_t a, b;
  start_server(&a, "hosts-a", 2);
  start_server(&b, "hosts-b", 2);
  char path[300], text[1024];
  snprintf(path, sizeof path, "%s/hosts", tmpdir);
  snprintf(text, sizeof text, "# two servers\n%s\n\n%s %s # keyed\n%s\n", a.endpoint, b.endpoint,
           KEY, a.endpoint);
  write_text(path, text);
  lt_eval_t *ev = eval_on_hosts(slow_inc(2), path);
  int rc = lt_eval_start(ev);
  cr_assert_eq(rc, LT_OK, "start: %s", lt_strerror(rc));
  run_farm(ev, 200);
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  cr_expect_gt(completed_of(json, a.endpoint), 0, "%s", json);
  /* The key on b's line is used: b does not speak CURVE, nor has this client a key pair, so
   * b is refused (its line was read, not skipped) and a does the work. */
  cr_expect_eq(completed_of(json, b.endpoint), 0, "%s", json);
  cr_expect_not_null(strstr(json, "\"reason\":\"auth refused\""), "%s", json);
  free(json);
  lt_eval_free(ev);
  lt__proc_stop(&a, 5000);
  lt__proc_stop(&b, 5000);
  remove_tmpdir();
}

Test(hosts, bad_or_missing_hosts_file_fails_the_start, .timeout = 30) {
  make_tmpdir();
  char path[300];
  snprintf(path, sizeof path, "%s/hosts", tmpdir);
  write_text(path, "tcp://127.0.0.1:1\nnot-an-endpoint\n");
  lt_eval_t *ev = eval_on_hosts(lt_seq("testk:inc"), path);
  cr_expect_eq(lt_eval_start(ev), LT_EINVAL);
  lt_eval_free(ev);
  snprintf(path, sizeof path, "%s/missing", tmpdir);
  ev = eval_on_hosts(lt_seq("testk:inc"), path);
  cr_expect_eq(lt_eval_start(ev), LT_ENOENT);
  lt_eval_free(ev);
  /* An announce directory where nobody announces: no server, after connect_timeout_ms. */
  ev = eval_on_hosts(lt_seq("testk:inc"), tmpdir);
  cr_assert_eq(lt_eval_set(ev, "connect_timeout_ms", "300"), LT_OK);
  cr_expect_eq(lt_eval_start(ev), LT_ENOSERVER);
  lt_eval_free(ev);
  remove_tmpdir();
}

/* read_announce reads DIR/<name>.endpoint into buf without its newline; 0 when missing. */
static int read_announce(const char *name, char *buf, size_t len) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s.endpoint", tmpdir, name);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  int ok = fgets(buf, (int)len, f) != NULL;
  fclose(f);
  if (ok) buf[strcspn(buf, "\n")] = '\0';
  return ok;
}

Test(announce, late_server_joins_a_running_farm, .timeout = 120) {
  make_tmpdir();
  const char *const ann[] = {"--announce", tmpdir, NULL};
  lt_proc_t a, b, c;
  start_server_with(&a, "ann-a", 2, ann);
  start_server_with(&b, "ann-b", 2, ann);
  char line[300];
  cr_assert(read_announce("ann-a", line, sizeof line), "ann-a.endpoint is missing");
  cr_expect_str_eq(line, a.endpoint);

  lt_eval_t *ev = eval_on_hosts(slow_inc(20), tmpdir);
  int rc = lt_eval_start(ev);
  cr_assert_eq(rc, LT_OK, "start: %s", lt_strerror(rc));
  const int n = 600; /* 20 ms each on 2 x 2 threads: about 3 s, 2.7 s after the late start */
  submit_i64s(ev, n);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  int i = 0;
  for (; i < 60; i++)
    cr_assert_eq(next_i64(ev), i + 1, "task %d", i);
  start_server_with(&c, "ann-c", 2, ann); /* announces mid-run */
  for (; i < n; i++)
    cr_assert_eq(next_i64(ev), i + 1, "task %d", i);
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  cr_expect_gt(completed_of(json, a.endpoint), 0, "%s", json);
  cr_expect_gt(completed_of(json, b.endpoint), 0, "%s", json);
  cr_expect_gt(completed_of(json, c.endpoint), 0, "the late server got no work: %s", json);
  free(json);
  lt_eval_free(ev);

  /* A graceful stop removes the announcement. */
  lt__proc_stop(&c, 5000);
  cr_expect(!read_announce("ann-c", line, sizeof line), "ann-c.endpoint is still there");
  lt__proc_stop(&a, 5000);
  lt__proc_stop(&b, 5000);
  remove_tmpdir();
}

Test(announce, wildcard_listen_announces_a_routable_address, .timeout = 60) {
  make_tmpdir();
  lt_proc_t w, v;
  const char *const wild[] = {"--listen", "tcp://*:0", "--announce", tmpdir, "--insecure", NULL};
  start_server_with(&w, "wild", 1, wild);
  char line[300];
  cr_assert(read_announce("wild", line, sizeof line));
  cr_expect(strncmp(line, "tcp://", 6) == 0 && strstr(line, "0.0.0.0") == NULL &&
                strstr(line, "*") == NULL,
            "announced %s", line);
  const char *port = strrchr(w.endpoint, ':');
  cr_expect(strcmp(strrchr(line, ':'), port) == 0, "announced %s for %s", line, w.endpoint);
  /* --advertise names the address clients should use; a client reaches it there. */
  const char *const adv[] = {"--listen",    "tcp://*:0", "--announce", tmpdir,
                             "--advertise", "127.0.0.1", "--insecure", NULL};
  start_server_with(&v, "adv", 1, adv);
  cr_assert(read_announce("adv", line, sizeof line));
  cr_expect(strncmp(line, "tcp://127.0.0.1:", 16) == 0, "announced %s", line);
  lt__proc_stop(&w, 5000);
  cr_expect(!read_announce("wild", line, sizeof line));
  lt_eval_t *ev = eval_on_hosts(slow_inc(0), tmpdir);
  int rc = lt_eval_start(ev);
  cr_assert_eq(rc, LT_OK, "start: %s", lt_strerror(rc));
  run_farm(ev, 20);
  lt_eval_free(ev);
  lt__proc_stop(&v, 5000);
  remove_tmpdir();
}

/* ---- lithium status ---------------------------------------------------------------------- */

/* status_json runs `lithium status ARGS --json` and returns its stdout (caller frees) and
 * exit status. */
static char *status_json(const char *args, int *status) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s status %s --json --timeout 5000", LT_TEST_TOOL, args);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  char *out = calloc(1, 65536);
  size_t n = fread(out, 1, 65535, p);
  out[n] = '\0';
  int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

/* json_num reads `"key":N` after `from` in text. */
static long long json_num(const char *text, const char *from, const char *key) {
  const char *p = strstr(text, from);
  cr_assert_not_null(p, "%s not in %s", from, text);
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  p = strstr(p, pat);
  cr_assert_not_null(p, "%s not in %s", key, text);
  return strtoll(p + strlen(pat), NULL, 10);
}

Test(status, servers_answer_with_their_load, .timeout = 60) {
  make_tmpdir();
  const char *const ann[] = {"--announce", tmpdir, NULL};
  lt_proc_t a, b;
  start_server_with(&a, "status-a", 3, ann);
  start_server_with(&b, "status-b", 2, ann);
  /* Idle servers. */
  char args[600];
  int st;
  snprintf(args, sizeof args, "--hosts %s", tmpdir);
  char *out = status_json(args, &st);
  cr_expect_eq(st, 0, "%s", out);
  cr_expect(strstr(out, "\"name\":\"status-a\"") != NULL, "%s", out);
  cr_expect(strstr(out, "\"name\":\"status-b\"") != NULL, "%s", out);
  cr_expect_eq(json_num(out, "\"name\":\"status-a\"", "threads"), 3, "%s", out);
  cr_expect_eq(json_num(out, "\"name\":\"status-a\"", "sessions"), 0, "%s", out);
  free(out);
  out = NULL;

  /* A run in progress: 1 s tasks, a session and running instructions on each server. */
  lt_eval_t *ev = eval_on_hosts(slow_inc(1000), tmpdir);
  cr_assert_eq(lt_eval_start(ev), LT_OK);
  submit_i64s(ev, 8);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  /* Where the tasks went depends on which server welcomed first: look until some run. */
  snprintf(args, sizeof args, "%s %s", a.endpoint, b.endpoint);
  long long active = 0, sessions = 0;
  for (int tries = 0; tries < 40 && active == 0; tries++) {
    usleep(100 * 1000);
    free(out);
    out = status_json(args, &st);
    cr_expect_eq(st, 0, "%s", out);
    active = json_num(out, "\"name\":\"status-a\"", "active") +
             json_num(out, "\"name\":\"status-b\"", "active");
    sessions = json_num(out, "\"name\":\"status-a\"", "sessions") +
               json_num(out, "\"name\":\"status-b\"", "sessions");
  }
  cr_expect_gt(active, 0, "nothing runs: %s", out);
  cr_expect_geq(sessions, 1, "%s", out);
  cr_expect_gt(json_num(out, "\"name\":\"status-a\"", "uptime_ms"), 0, "%s", out);
  /* The module the run loaded, with the SHA-256 of its file. */
  char cmd[600], hash[80] = "", want[200];
  snprintf(cmd, sizeof cmd, "sha256sum %s/libtestk.so", LT_TEST_MODULES);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  cr_assert_not_null(fgets(hash, 65, p));
  pclose(p);
  snprintf(want, sizeof want, "\"modules\":[{\"name\":\"testk\",\"sha256\":\"%s\"}]", hash);
  cr_expect(strstr(out, want) != NULL, "%s not in %s", want, out);
  free(out);
  for (int i = 0; i < 8; i++)
    cr_assert_eq(next_i64(ev), i + 1);
  lt_eval_free(ev);

  /* One server gone: its row says so and the exit status is 1. */
  lt__proc_stop(&b, 5000);
  snprintf(args, sizeof args, "%s tcp://127.0.0.1:1 --timeout 300", a.endpoint);
  out = status_json(args, &st);
  cr_expect_eq(st, 1, "%s", out);
  cr_expect(strstr(out, "\"answered\":false") != NULL, "%s", out);
  cr_expect(strstr(out, "\"name\":\"status-a\"") != NULL, "%s", out);
  free(out);
  lt__proc_stop(&a, 5000);
  remove_tmpdir();
}
