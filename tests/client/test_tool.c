/* test_tool.c: the `lithium` command-line tool, run as a child process (posix_spawn) with
 * stdin, stdout and stderr on files of a mkdtemp directory (stderr on a pseudo-terminal for
 * the progress line): help and usage errors, check, graph, run to stdout and to --out, a
 * failing task, bad options, parse errors, missing and clashing files, --local against
 * servers, map and dc, --sep and --lines. Every test removes its directory; the tool reaps its
 * servers. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_ARGS 64

typedef struct result {
  int status; /* exit status, or 128 + signal */
  char *out;  /* stdout, NUL-terminated */
  size_t out_len;
  char *err; /* stderr, NUL-terminated */
} result_t;

static char dir[64]; /* this test's scratch directory */

static void make_dir(void) {
  strcpy(dir, "/tmp/lt_tool_XXXXXX");
  cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static void remove_dir(void) {
  nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* path_of returns dir/name in a static buffer of its own (eight of them rotate). */
static const char *path_of(const char *name) {
  static char bufs[8][256];
  static int next;
  char *b = bufs[next++ % 8];
  snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
  return b;
}

static void write_file(const char *name, const char *text) {
  FILE *f = fopen(path_of(name), "wb");
  cr_assert_not_null(f, "%s: %s", name, strerror(errno));
  fputs(text, f);
  cr_assert_eq(fclose(f), 0);
}

/* slurp reads a whole file (NUL-terminated, caller frees); NULL when it does not exist. */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t cap = 1024, n = 0;
  char *b = malloc(cap);
  size_t got;
  while ((got = fread(b + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (n + 1 == cap) b = realloc(b, cap *= 2);
  }
  fclose(f);
  b[n] = '\0';
  if (len != NULL) *len = n;
  return b;
}

/* CHILD_MS bounds a run of the tool: far above any run here (a few seconds, even under a
 * sanitizer), and below the tests' own timeouts, so that a tool that hangs fails its test
 * with its name instead of outliving it (an orphan holding the test runner's descriptors
 * would hang the whole suite). */
#define CHILD_MS 25000

static int wait_child(pid_t pid) {
  int st;
  for (int waited = 0;; waited += 5) {
    pid_t got = waitpid(pid, &st, WNOHANG);
    if (got == pid) break;
    cr_assert(got == 0 || errno == EINTR, "waitpid: %s", strerror(errno));
    if (waited >= CHILD_MS) { /* killed: the caller says so, with what the tool printed */
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    struct timespec ts = {0, 5 * 1000000L};
    nanosleep(&ts, NULL);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* collect_args turns the NULL-terminated arguments into argv for the tool. */
static void collect_args(char **argv, va_list ap) {
  int n = 0;
  argv[n++] = (char *)LT_TEST_TOOL;
  for (const char *a; (a = va_arg(ap, const char *)) != NULL;) {
    cr_assert_lt(n, MAX_ARGS - 1);
    argv[n++] = (char *)a;
  }
  argv[n] = NULL;
}

/* tool_argv runs the tool with `argv` (from collect_args), stdin from `in` (NULL:
 * /dev/null), and fills `r` (free with free_result). */
static void tool_argv(result_t *r, const char *in, char **argv) {
  char out_path[128], err_path[128];
  snprintf(out_path, sizeof out_path, "%s/.stdout", dir);
  snprintf(err_path, sizeof err_path, "%s/.stderr", dir);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in != NULL ? in : "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  int rc = posix_spawn(&pid, LT_TEST_TOOL, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  cr_assert_eq(rc, 0, "posix_spawn: %s", strerror(rc));
  r->status = wait_child(pid);
  r->out = slurp(out_path, &r->out_len);
  r->err = slurp(err_path, NULL);
  cr_assert(r->out != NULL && r->err != NULL);
  cr_assert_neq(r->status, -1, "`lithium %s %s` did not exit within %d ms (killed); stderr:\n%s",
                argv[1], argv[2] != NULL ? argv[2] : "", CHILD_MS, r->err);
  unlink(out_path);
  unlink(err_path);
}

/* tool runs the tool with the NULL-terminated arguments, stdin from `in` (NULL:
 * /dev/null), and fills `r` (free with free_result). */
static void tool(result_t *r, const char *in, ...) {
  char *argv[MAX_ARGS];
  va_list ap;
  va_start(ap, in);
  collect_args(argv, ap);
  va_end(ap);
  tool_argv(r, in, argv);
}

/* start_server starts a lithium-server on a free loopback port and returns its pid, with
 * its endpoint (from the READY line) in `ep`. */
static pid_t start_server(char *ep, size_t eplen) {
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  char *argv[] = {
      (char *)LT_TEST_SERVER,  "--listen", "tcp://127.0.0.1:0", "--threads", "2", "--modules",
      (char *)LT_TEST_MODULES, NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid;
  int rc = posix_spawn(&pid, LT_TEST_SERVER, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  cr_assert_eq(rc, 0, "posix_spawn: %s", strerror(rc));
  char line[512];
  size_t n = 0;
  while (n < sizeof line - 1 && memchr(line, '\n', n) == NULL) {
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    cr_assert_gt(poll(&pfd, 1, 10000), 0, "no READY line from the server");
    ssize_t got = read(fds[0], line + n, sizeof line - 1 - n);
    cr_assert_gt(got, 0, "the server exited before READY");
    n += (size_t)got;
  }
  close(fds[0]);
  line[n] = '\0';
  cr_assert(strncmp(line, "READY ", 6) == 0, "%s", line);
  snprintf(ep, eplen, "%.*s", (int)strcspn(line + 6, "\n"), line + 6);
  return pid;
}

static void stop_server(pid_t pid) {
  kill(pid, SIGTERM);
  cr_expect_eq(wait_child(pid), 0, "the server exits cleanly");
}

static void free_result(result_t *r) {
  free(r->out);
  free(r->err);
}

#define SERVERS "--server", LT_TEST_SERVER, "--modules", LT_TEST_MODULES
#define LOCAL   "--local", "--modules", LT_TEST_MODULES

/* expect_file checks dir/name holds exactly `want` (NULL: does not exist). */
static void expect_file(const char *name, const char *want) {
  char *got = slurp(path_of(name), NULL);
  if (want == NULL) {
    cr_expect_null(got, "%s should not exist, holds '%s'", name, got);
  } else {
    cr_assert_not_null(got, "%s is missing", name);
    cr_expect_str_eq(got, want, "%s", name);
  }
  free(got);
}

Test(tool, help_version_and_usage_errors, .timeout = 30) {
  make_dir();
  result_t r;
  tool(&r, NULL, "--help", NULL);
  cr_expect_eq(r.status, 0);
  cr_expect(strncmp(r.out, "usage: lithium", 14) == 0, "%s", r.out);
  cr_expect_str_eq(r.err, "");
  free_result(&r);
  tool(&r, NULL, "run", "-h", NULL);
  cr_expect_eq(r.status, 0);
  cr_expect(strstr(r.out, "lithium check EXPR") != NULL);
  free_result(&r);
  tool(&r, NULL, "--version", NULL);
  cr_expect_eq(r.status, 0);
  cr_expect(strncmp(r.out, "lithium 0.", 10) == 0, "%s", r.out);
  free_result(&r);

  tool(&r, NULL, NULL);
  cr_expect_eq(r.status, 2);
  cr_expect_str_eq(r.out, "");
  cr_expect(strstr(r.err, "usage: lithium") != NULL, "%s", r.err);
  free_result(&r);
  tool(&r, NULL, "frobnicate", "m:f", NULL);
  cr_expect_eq(r.status, 2);
  cr_expect(strncmp(r.err, "lithium: unknown command 'frobnicate'\nusage:", 44) == 0, "%s", r.err);
  free_result(&r);
  tool(&r, NULL, "run", "testk:echo", NULL); /* no FILE */
  cr_expect_eq(r.status, 2);
  cr_expect(strstr(r.err, "usage:") != NULL);
  free_result(&r);
  tool(&r, NULL, "check", "m:f", "--out", path_of("o"), NULL); /* --out is run's */
  cr_expect_eq(r.status, 2);
  cr_expect(strncmp(r.err, "lithium: --out applies to run only", 34) == 0, "%s", r.err);
  free_result(&r);
  tool(&r, NULL, "run", "m:f", "x", "--local", "--servers", "2", NULL);
  cr_expect_eq(r.status, 2);
  cr_expect(strstr(r.err, "--local excludes") != NULL, "%s", r.err);
  free_result(&r);
  tool(&r, NULL, "run", "m:f", "-", "-", NULL);
  cr_expect_eq(r.status, 2);
  free_result(&r);
  remove_dir();
}

Test(tool, check_prints_canonical_form, .timeout = 30) {
  make_dir();
  result_t r;
  tool(&r, NULL, "check", " pipeline( farm(seq(testk:inc)) ,seq(skelk:app, \"x y\"),\n m:f)", NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "pipe(farm(testk:inc), seq(skelk:app, \"x y\"), m:f)\n");
  cr_expect_str_eq(r.err, "");
  free_result(&r);
  tool(&r, NULL, "check",
       "map(skelk:chunks, dc(skelk:small, skelk:halves, skelk:rev, skelk:cat), skelk:cat)", NULL);
  cr_expect_eq(r.status, 0);
  cr_expect_str_eq(r.out, "map(skelk:chunks, dc(skelk:small, skelk:halves, skelk:rev, skelk:cat), "
                          "skelk:cat)\n");
  free_result(&r);
  remove_dir();
}

Test(tool, parse_error_exits_2_with_offset, .timeout = 30) {
  make_dir();
  result_t r;
  tool(&r, NULL, "check", "farm(testk:inc", NULL);
  cr_expect_eq(r.status, 2);
  cr_expect_str_eq(r.out, "");
  cr_expect(strncmp(r.err, "lithium: farm(testk:inc: offset 14: expected ", 45) == 0, "%s", r.err);
  free_result(&r);
  tool(&r, NULL, "graph", "pipe(a:b,, c:d)", NULL);
  cr_expect_eq(r.status, 2);
  cr_expect(strncmp(r.err, "lithium: pipe(a:b,, c:d): offset 9: expected ", 45) == 0, "%s", r.err);
  free_result(&r);
  /* run refuses before it starts anything: no output directory appears. */
  write_file("a", "x");
  tool(&r, NULL, "run", "farm(", path_of("a"), "--out", path_of("out"), SERVERS, NULL);
  cr_expect_eq(r.status, 2);
  cr_expect(strncmp(r.err, "lithium: farm(: offset 5: expected ", 35) == 0, "%s", r.err);
  cr_expect_neq(access(path_of("out"), F_OK), 0);
  free_result(&r);
  remove_dir();
}

Test(tool, graph_is_dot_and_respects_normal_form, .timeout = 30) {
  make_dir();
  result_t r;
  tool(&r, NULL, "graph", "pipe(farm(testk:upper), testk:echo)", NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect(strncmp(r.out, "digraph lithium {", 17) == 0, "%s", r.out);
  cr_expect(strstr(r.out, "testk:upper") != NULL && strstr(r.out, "testk:echo") != NULL);
  cr_expect(strstr(r.out, "n0 -> n1") != NULL, "two instructions without normal form:\n%s", r.out);
  cr_expect_eq(r.out[r.out_len - 2], '}');
  free_result(&r);
  tool(&r, NULL, "graph", "pipe(farm(testk:upper), testk:echo)", "--normal_form", "on", NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "testk:upper ; testk:echo") != NULL, "fused:\n%s", r.out);
  cr_expect(strstr(r.out, "n1") == NULL, "one instruction with normal form:\n%s", r.out);
  free_result(&r);
  tool(&r, NULL, "graph", "map(skelk:chunks, skelk:rev, skelk:cat)", "--normal-form=off", NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "cluster_b1") != NULL, "the body is a block:\n%s", r.out);
  free_result(&r);
  remove_dir();
}

Test(tool, run_to_stdout_on_servers, .timeout = 60) {
  make_dir();
  write_file("a", "alpha ");
  write_file("b", "");
  write_file("c", "gamma\n");
  result_t r;
  tool(&r, NULL, "run", "farm(testk:upper)", path_of("a"), path_of("b"), path_of("c"), SERVERS,
       NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "ALPHA GAMMA\n");
  cr_expect_str_eq(r.err, "", "quiet when stderr is not a terminal");
  free_result(&r);
  /* --ordered off changes nothing: results are matched to files, written in input order. */
  tool(&r, NULL, "run", "pipe(farm(testk:upper), seq(skelk:app, \"!\"))", path_of("a"),
       path_of("b"), path_of("c"), SERVERS, "--servers", "3", "--ordered=off", NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "ALPHA !!GAMMA\n!");
  free_result(&r);
  remove_dir();
}

Test(tool, run_to_out_dir, .timeout = 60) {
  make_dir();
  mkdir(path_of("in"), 0755);
  write_file("in/one.txt", "abc");
  write_file("in/two.txt", "hello world");
  result_t r;
  tool(&r, NULL, "run", "pipe(testk:upper, skelk:rev)", path_of("in/one.txt"),
       path_of("in/two.txt"), "-o", path_of("out/deep"), SERVERS, "--servers", "1", NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "");
  cr_expect_str_eq(r.err, "");
  expect_file("out/deep/one.txt", "CBA");
  expect_file("out/deep/two.txt", "DLROW OLLEH");
  free_result(&r);
  /* stdin is one task, written as DIR/stdin. */
  tool(&r, path_of("in/two.txt"), "run", "testk:upper", "-", "--out", path_of("out"), LOCAL, NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  expect_file("out/stdin", "HELLO WORLD");
  free_result(&r);
  remove_dir();
}

Test(tool, stdin_to_stdout, .timeout = 60) {
  make_dir();
  write_file("in", "piped text");
  result_t r;
  tool(&r, path_of("in"), "run", "farm(testk:upper)", "-", SERVERS, NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "PIPED TEXT");
  free_result(&r);
  remove_dir();
}

Test(tool, failing_task_exits_1_and_keeps_going, .timeout = 60) {
  make_dir();
  write_file("good1", "fine");
  write_file("bad", "oh no!");
  write_file("good2", "also fine");
  result_t r;
  tool(&r, NULL, "run", "farm(pipe(seq(skelk:fail_on, \"!\"), testk:upper))", path_of("good1"),
       path_of("bad"), path_of("good2"), "--out", path_of("out"), SERVERS, NULL);
  cr_expect_eq(r.status, 1);
  char want[256];
  snprintf(want, sizeof want, "lithium: %s: skelk:fail_on: fail_on: found !\n", path_of("bad"));
  cr_expect_str_eq(r.err, want);
  expect_file("out/good1", "FINE");
  expect_file("out/good2", "ALSO FINE");
  expect_file("out/bad", NULL);
  free_result(&r);
  /* testk:fail fails everything; on stdout nothing is written for a failed task. */
  tool(&r, NULL, "run", "testk:fail", path_of("good1"), path_of("good2"), SERVERS, NULL);
  cr_expect_eq(r.status, 1);
  cr_expect_str_eq(r.out, "");
  snprintf(want, sizeof want,
           "lithium: %s: testk:fail: fail: asked to fail\n"
           "lithium: %s: testk:fail: fail: asked to fail\n",
           path_of("good1"), path_of("good2"));
  cr_expect_str_eq(r.err, want);
  free_result(&r);
  tool(&r, NULL, "run", "pipe(testk:upper, seq(skelk:fail_on, \"!\"))", path_of("good1"),
       path_of("bad"), path_of("good2"), LOCAL, NULL);
  cr_expect_eq(r.status, 1);
  cr_expect_str_eq(r.out, "FINEALSO FINE");
  cr_expect(strstr(r.err, "fail_on: found !") != NULL, "%s", r.err);
  free_result(&r);
  remove_dir();
}

Test(tool, bad_options_exit_2, .timeout = 30) {
  make_dir();
  write_file("a", "x");
  result_t r;
  tool(&r, NULL, "run", "testk:echo", path_of("a"), "--no_such_key", "1", "--out", path_of("out"),
       SERVERS, NULL);
  cr_expect_eq(r.status, 2);
  cr_expect_str_eq(r.err, "lithium: option --no_such_key: unknown option 'no_such_key'\n");
  cr_expect_neq(access(path_of("out"), F_OK), 0, "nothing done");
  free_result(&r);
  tool(&r, NULL, "run", "testk:echo", path_of("a"), "--ordered=maybe", SERVERS, NULL);
  cr_expect_eq(r.status, 2);
  cr_expect_str_eq(r.err, "lithium: option --ordered: bad value 'maybe' for ordered (expected "
                          "on/off, true/false, yes/no or 1/0)\n");
  free_result(&r);
  tool(&r, NULL, "graph", "m:f", "--max_pending", "0", NULL);
  cr_expect_eq(r.status, 2);
  cr_expect_str_eq(r.err, "lithium: option --max_pending: bad value '0' for max_pending (expected "
                          "an integer from 1 to 1073741824)\n");
  free_result(&r);
  tool(&r, NULL, "run", "testk:echo", path_of("a"), "--modules", NULL);
  cr_expect_eq(r.status, 2);
  cr_expect(strncmp(r.err, "lithium: option --modules: missing value", 40) == 0, "%s", r.err);
  free_result(&r);
  tool(&r, NULL, "run", "testk:echo", path_of("a"), "--servers", "0", NULL);
  cr_expect_eq(r.status, 2);
  free_result(&r);
  tool(&r, NULL, "run", "testk:echo", path_of("a"), "--hosts", "udp://nowhere", SERVERS, NULL);
  cr_expect_eq(r.status, 2);
  cr_expect(strstr(r.err, "bad endpoint 'udp://nowhere'") != NULL, "%s", r.err);
  free_result(&r);
  remove_dir();
}

/* The option table's checks as the tool shows them: '-' and '_' alike, booleans in any case,
 * min_threads against max_threads, LITHIUM_* variables with a bad value or naming no option. */
Test(tool, option_messages, .timeout = 30) {
  static const struct {
    const char *env, *value, *args[6]; /* env=value for this case only, unless env is NULL */
    int status;
    const char *err; /* exactly, or NULL: see below */
  } cases[] = {
      {NULL, NULL, {"--max-pending", "8", "--ordered=OFF", "--placement", "RR"}, 0, ""},
      {NULL,
       NULL,
       {"--max_threads", "2", "--min-threads", "3"},
       2,
       "lithium: option --min-threads: bad value '3' for min_threads (expected at most "
       "max_threads, 2)\n"},
      {NULL,
       NULL,
       {"--max_threads", "1"},
       2,
       "lithium: min_threads 2 (the default) is above max_threads 1: set min_threads too\n"},
      {NULL, NULL, {"--max_threads", "1", "--min_threads", "1"}, 0, ""},
      {"LITHIUM_ORDERED",
       "maybe",
       {NULL},
       2,
       "lithium: bad value 'maybe' for LITHIUM_ORDERED (expected on/off, true/false, yes/no or "
       "1/0)\n"},
      {"LITHIUM_ORDRED", "off", {NULL}, 0, NULL},
  };
  make_dir();
  setenv("LITHIUM_LOG", "warn", 1); /* not an option: never warned about */
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (cases[i].env != NULL) setenv(cases[i].env, cases[i].value, 1);
    const char *const *a = cases[i].args;
    result_t r;
    tool(&r, NULL, "check", "m:f", a[0], a[1], a[2], a[3], a[4], a[5], NULL);
    cr_expect_eq(r.status, cases[i].status, "case %zu: %s", i, r.err);
    if (r.status == 0) cr_expect_str_eq(r.out, "m:f\n");
    if (cases[i].err != NULL)
      cr_expect_str_eq(r.err, cases[i].err, "case %zu", i);
    else
      cr_expect(strstr(r.err, " warn ") != NULL &&
                    strstr(r.err, "environment variable LITHIUM_ORDRED names no option") != NULL &&
                    strstr(r.err, "LITHIUM_LOG") == NULL,
                "%s", r.err);
    free_result(&r);
    if (cases[i].env != NULL) unsetenv(cases[i].env);
  }
  remove_dir();
}

Test(tool, missing_input_is_named, .timeout = 30) {
  make_dir();
  write_file("here", "x");
  result_t r;
  tool(&r, NULL, "run", "testk:echo", path_of("here"), path_of("nope"), "--out", path_of("out"),
       SERVERS, NULL);
  cr_expect_eq(r.status, 2);
  char want[256];
  snprintf(want, sizeof want, "lithium: %s: No such file or directory\n", path_of("nope"));
  cr_expect_str_eq(r.err, want);
  cr_expect_str_eq(r.out, "");
  cr_expect_neq(access(path_of("out"), F_OK), 0, "nothing done");
  free_result(&r);
  tool(&r, NULL, "run", "testk:echo", dir, LOCAL, NULL); /* a directory is no input */
  cr_expect_eq(r.status, 2);
  cr_expect(strstr(r.err, "Is a directory") != NULL, "%s", r.err);
  free_result(&r);
  remove_dir();
}

Test(tool, out_dir_clashes_are_refused, .timeout = 30) {
  make_dir();
  mkdir(path_of("x"), 0755);
  mkdir(path_of("y"), 0755);
  write_file("x/same", "1");
  write_file("y/same", "2");
  result_t r;
  tool(&r, NULL, "run", "testk:upper", path_of("x/same"), path_of("y/same"), "--out", path_of("o"),
       LOCAL, NULL);
  cr_expect_eq(r.status, 2);
  cr_expect(strstr(r.err, "would both write") != NULL, "%s", r.err);
  free_result(&r);
  /* --out the inputs' own directory would overwrite them. */
  tool(&r, NULL, "run", "testk:upper", path_of("x/same"), "--out", path_of("x"), LOCAL, NULL);
  cr_expect_eq(r.status, 2);
  cr_expect(strstr(r.err, "would overwrite the input") != NULL, "%s", r.err);
  expect_file("x/same", "1");
  free_result(&r);
  remove_dir();
}

/* Programs of farm and pipe run on servers and locally give the same bytes. */
Test(tool, local_equals_servers, .timeout = 60) {
  make_dir();
  char name[16], text[64];
  const char *files[12];
  for (int i = 0; i < 12; i++) {
    snprintf(name, sizeof name, "f%02d", i);
    snprintf(text, sizeof text, "task %d: %.*s", i, i * 3, "the quick brown fox jumps over it");
    write_file(name, text);
    files[i] = strdup(path_of(name));
  }
  const char *prog = "pipe(farm(pipe(testk:upper, skelk:rev)), seq(skelk:xor, \" \"), "
                     "farm(seq(skelk:app, \"|\")))";
  result_t loc, srv, fused;
#define FILES12                                                                                    \
  files[0], files[1], files[2], files[3], files[4], files[5], files[6], files[7], files[8],        \
      files[9], files[10], files[11]
  tool(&loc, NULL, "run", prog, FILES12, LOCAL, NULL);
  tool(&srv, NULL, "run", prog, FILES12, SERVERS, "--servers", "3", NULL);
  tool(&fused, NULL, "run", prog, FILES12, SERVERS, "--normal_form", "on", "--max_pending", "2",
       NULL);
  cr_expect_eq(loc.status, 0, "%s", loc.err);
  cr_expect_eq(srv.status, 0, "%s", srv.err);
  cr_expect_eq(fused.status, 0, "%s", fused.err);
  /* upper, rev, then xor ' ' (lower case; spaces become NUL bytes), then '|' per task. */
  cr_expect(memmem(loc.out, loc.out_len, "kciuq\0eht", 9) != NULL);
  cr_expect_eq(loc.out_len, 8 * 10 + 9 * 2 + 3 * 66 + 12, "%zu", loc.out_len);
  cr_expect(srv.out_len == loc.out_len && memcmp(srv.out, loc.out, loc.out_len) == 0);
  cr_expect(fused.out_len == loc.out_len && memcmp(fused.out, loc.out, loc.out_len) == 0);
  free_result(&loc);
  free_result(&srv);
  free_result(&fused);
  for (int i = 0; i < 12; i++)
    free((char *)files[i]);
  remove_dir();
}

Test(tool, map_and_dc_local, .timeout = 30) {
  make_dir();
  write_file("a", "abcdefgh");
  write_file("e", "");
  write_file("h", "Hello, World");
  write_file("w", "HelloWorld");
  result_t r;
  tool(&r, NULL, "run", "map(skelk:chunks, skelk:rev, skelk:cat)", path_of("a"), path_of("e"),
       path_of("h"), LOCAL, NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "cbafedhgleH,oloW dlr");
  free_result(&r);
  tool(&r, NULL, "run", "dc(skelk:small, skelk:halves, seq(skelk:xor, \" \"), skelk:cat)",
       path_of("w"), "--out", path_of("out"), LOCAL, NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  expect_file("out/w", "hELLOwORLD");
  free_result(&r);
  remove_dir();
}

Test(tool, a_reducing_program_prints_one_result, .timeout = 60) {
  make_dir();
  write_file("a", "ab");
  write_file("b", "cd");
  write_file("c", "ef");
  write_file("x", "xy");
  result_t r;
  const char *prog = "pipe(skelk:rev, reduce(skelk:cat2))";
  tool(&r, NULL, "run", prog, path_of("a"), path_of("b"), path_of("c"), SERVERS, "--lines", NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "badcfe\n");
  free_result(&r);
  tool(&r, NULL, "run", prog, path_of("a"), path_of("b"), path_of("c"), LOCAL, NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "badcfe");
  free_result(&r);
  /* A failed task fails the one result, named; --out has nothing to name files after. */
  tool(&r, NULL, "run", "pipe(seq(skelk:fail_on, \"x\"), reduce(skelk:cat2))", path_of("a"),
       path_of("x"), path_of("c"), LOCAL, NULL);
  cr_expect_eq(r.status, 1);
  cr_expect_str_eq(r.out, "");
  cr_expect(strstr(r.err, "lithium: reduce: task 1: skelk:fail_on: fail_on: found x") != NULL, "%s",
            r.err);
  free_result(&r);
  tool(&r, NULL, "run", prog, path_of("a"), "--out", path_of("out"), LOCAL, NULL);
  cr_expect_eq(r.status, 2);
  cr_expect(strstr(r.err, "--out: this program reduces its inputs to one result") != NULL, "%s",
            r.err);
  free_result(&r);
  remove_dir();
}

/* The one map test on servers: needs the servers' map support. */
Test(tool, map_on_servers, .timeout = 60) {
  make_dir();
  write_file("a", "abcdefgh");
  write_file("h", "Hello, World");
  result_t r;
  tool(&r, NULL, "run", "farm(map(skelk:chunks, skelk:rev, skelk:cat))", path_of("a"), path_of("h"),
       SERVERS, NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "cbafedhgleH,oloW dlr");
  free_result(&r);
  remove_dir();
}

Test(tool, hosts_and_stats, .timeout = 60) {
  make_dir();
  write_file("a", "abc");
  char ep[256];
  pid_t srv = start_server(ep, sizeof ep);
  result_t r;
  tool(&r, NULL, "run", "testk:upper", path_of("a"), path_of("a"), "--hosts", ep, "--stats", NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "ABCABC");
  cr_expect(strstr(r.err, "\"tasks_completed\":2") != NULL, "%s", r.err);
  cr_expect(strstr(r.err, ep) != NULL, "the server is in the stats: %s", r.err);
  free_result(&r);
  stop_server(srv);
  /* Nobody listens there: the run cannot start. */
  tool(&r, NULL, "run", "testk:upper", path_of("a"), "--hosts", "tcp://127.0.0.1:1",
       "--connect_timeout_ms", "200", NULL);
  cr_expect_eq(r.status, 1);
  cr_expect(strstr(r.err, "lithium: cannot start the evaluator") != NULL, "%s", r.err);
  free_result(&r);
  /* No server program there. */
  tool(&r, NULL, "run", "testk:upper", path_of("a"), "--server", path_of("no-server"), NULL);
  cr_expect_eq(r.status, 1);
  cr_expect(strstr(r.err, "lithium: cannot start 2 local servers") != NULL, "%s", r.err);
  free_result(&r);
  remove_dir();
}

/* --trace FILE writes the trace of the run (tests/e2e/test_trace.c checks its contents); a
 * path that cannot be created stops the run, naming it. */
Test(tool, trace_option, .timeout = 60) {
  make_dir();
  write_file("a", "abc");
  write_file("b", "de");
  result_t r;
  tool(&r, NULL, "run", "farm(testk:upper)", path_of("a"), path_of("b"), SERVERS, "--trace",
       path_of("t.json"), NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "ABCDE");
  free_result(&r);
  char *trace = slurp(path_of("t.json"), NULL);
  cr_assert_not_null(trace, "no trace written");
  cr_expect(strncmp(trace, "{\"displayTimeUnit\":\"ms\"", 22) == 0, "%.80s", trace);
  cr_expect(strstr(trace, "\"name\":\"testk:upper\"") != NULL, "no span: %s", trace);
  size_t len = strlen(trace);
  cr_expect(len > 4 && strcmp(trace + len - 4, "\n]}\n") == 0, "not closed: %s", trace);
  free(trace);
  tool(&r, NULL, "run", "farm(testk:upper)", path_of("a"), SERVERS, "--trace",
       path_of("no-dir/t.json"), NULL);
  cr_expect_eq(r.status, 1);
  cr_expect(strstr(r.err, path_of("no-dir/t.json")) != NULL, "%s", r.err);
  cr_expect(strstr(r.err, "lithium: cannot start the evaluator") != NULL, "%s", r.err);
  cr_expect_str_eq(r.out, "");
  free_result(&r);
  remove_dir();
}

/* With stderr on a terminal the tool draws a progress line; reads the terminal while the
 * tool runs so it never blocks on a full buffer. */
Test(tool, progress_on_a_terminal, .timeout = 60) {
  make_dir();
  write_file("a", "x");
  write_file("b", "y");
  write_file("c", "z");
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  cr_assert_geq(master, 0);
  cr_assert_eq(grantpt(master), 0);
  cr_assert_eq(unlockpt(master), 0);
  const char *slave = ptsname(master);
  cr_assert_not_null(slave);
  char *argv[MAX_ARGS] = {(char *)LT_TEST_TOOL,
                          "run",
                          "farm(testk:upper)",
                          (char *)path_of("a"),
                          (char *)path_of("b"),
                          (char *)path_of("c"),
                          "--out",
                          (char *)path_of("out"),
                          SERVERS,
                          NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, slave, O_RDWR | O_NOCTTY, 0);
  posix_spawn_file_actions_addclose(&fa, master);
  pid_t pid;
  cr_assert_eq(posix_spawn(&pid, LT_TEST_TOOL, &fa, NULL, argv, environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  char seen[8192];
  size_t n = 0;
  int status = -1;
  for (;;) {
    struct pollfd pfd = {.fd = master, .events = POLLIN};
    if (poll(&pfd, 1, 50) > 0) {
      ssize_t got = read(master, seen + n, sizeof seen - 1 - n);
      if (got > 0) n += (size_t)got;
      if (got > 0) continue;
    }
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      break;
    }
  }
  /* Drain what the tool wrote last (the slave is closed: read ends with EIO). */
  for (;;) {
    struct pollfd pfd = {.fd = master, .events = POLLIN};
    if (poll(&pfd, 1, 100) <= 0) break;
    ssize_t got = read(master, seen + n, sizeof seen - 1 - n);
    if (got <= 0) break;
    n += (size_t)got;
  }
  close(master);
  seen[n] = '\0';
  cr_expect_eq(status, 0, "%s", seen);
  cr_expect(strstr(seen, "3/3 tasks") != NULL, "progress line: '%s'", seen);
  expect_file("out/a", "X");
  remove_dir();
}

Test(tool, hosts_file, .timeout = 60) {
  make_dir();
  write_file("a", "abc");
  char ep[256], text[512];
  pid_t srv = start_server(ep, sizeof ep);
  snprintf(text, sizeof text, "# the test's server\n\n%s   # running\n", ep);
  write_file("hosts", text);
  result_t r;
  /* No local servers are started when a hosts file names the servers. */
  tool(&r, NULL, "run", "testk:upper", path_of("a"), "--hosts-file", path_of("hosts"), "--stats",
       "--server", path_of("no-server"), NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "ABC");
  cr_expect(strstr(r.err, ep) != NULL, "the server is in the stats: %s", r.err);
  free_result(&r);
  stop_server(srv);
  write_file("bad", "tcp://127.0.0.1:1\nnonsense\n");
  tool(&r, NULL, "run", "testk:upper", path_of("a"), "--hosts-file", path_of("bad"), NULL);
  cr_expect_eq(r.status, 1);
  cr_expect(strstr(r.err, "line 2") != NULL, "%s", r.err);
  free_result(&r);
  tool(&r, NULL, "run", "testk:upper", path_of("a"), "--hosts-file", path_of("bad"), "--local",
       NULL);
  cr_expect_eq(r.status, 2, "%s", r.err);
  free_result(&r);
  remove_dir();
}

/* lithium up/down with a stand-in for ssh (runs the remote command here) and for
 * lithium-server (records its flags, says READY, stops on SIGTERM): the flags handed to the
 * servers, the hosts file with the public key next to --key, --insecure without a key where
 * the server knows it, the pids recorded and stopped, and a host whose server cannot start. */
Test(tool, up_and_down_with_stand_ins, .timeout = 60) {
  make_dir();
  write_file("ssh", "#!/bin/sh\nfor last; do :; done\nexec sh -c \"$last\"\n");
  char text[1024];
  snprintf(text, sizeof text,
           "#!/bin/sh\n"
           "if [ \"$1\" = --help ]; then echo '  --insecure   no CURVE'; exit 0; fi\n"
           "echo \"$*\" >>%s\n"
           "trap 'exit 0' TERM\n"
           "echo 'READY tcp://0.0.0.0:4242'\n"
           "while :; do sleep 0.05; done\n",
           path_of("args.log"));
  write_file("fake-lithium-server", text);
  cr_assert_eq(chmod(path_of("ssh"), 0755), 0);
  cr_assert_eq(chmod(path_of("fake-lithium-server"), 0755), 0);
  write_file("kp.key", "secret\n");
  write_file("kp.pub", "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\n");
  char ssh[300], server[300], state[300], key[300], allow[300];
  snprintf(ssh, sizeof ssh, "%s", path_of("ssh"));
  snprintf(server, sizeof server, "%s", path_of("fake-lithium-server"));
  snprintf(state, sizeof state, "%s", path_of("state"));
  snprintf(key, sizeof key, "%s", path_of("kp.key"));
  snprintf(allow, sizeof allow, "%s", path_of("allow"));

  result_t r;
  tool(&r, NULL, "up", "h1,user@h2", "--ssh", ssh, "--server", server, "--state", state, "--port",
       "4242", "--key", key, "--allow", allow, "--modules", "/srv/m", NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "\ntcp://h1:4242 rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\n") != NULL,
            "%s", r.out);
  cr_expect(strstr(r.out, "\ntcp://h2:4242 rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\n") != NULL,
            "%s", r.out);
  free_result(&r);
  char *args = slurp(path_of("args.log"), NULL);
  cr_assert_not_null(args);
  snprintf(text, sizeof text,
           "--name h1 --listen tcp://*:4242 --modules /srv/m --curve-key %s "
           "--allow %s\n",
           key, allow);
  cr_expect(strstr(args, text) != NULL, "%s", args);
  cr_expect(strstr(args, "--insecure") == NULL, "%s", args);
  free(args);
  tool(&r, NULL, "down", "h1,user@h2", "--ssh", ssh, "--state", state, NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.err, "lithium down: h1: stopped 1 server\n") != NULL, "%s", r.err);
  cr_expect(strstr(r.err, "lithium down: user@h2: stopped 1 server\n") != NULL, "%s", r.err);
  free_result(&r);

  /* No key: --insecure, since this server knows the flag. A server that cannot start. */
  unlink(path_of("args.log"));
  tool(&r, NULL, "up", "h3", "--ssh", ssh, "--server", server, "--state", state, NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "\ntcp://h3:4242\n") != NULL, "%s", r.out);
  free_result(&r);
  args = slurp(path_of("args.log"), NULL);
  cr_expect(args != NULL && strstr(args, "--listen tcp://*:0 --insecure") != NULL, "%s", args);
  free(args);
  tool(&r, NULL, "down", "h3", "--ssh", ssh, "--state", state, NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  free_result(&r);
  tool(&r, NULL, "up", "h4", "--ssh", ssh, "--server", path_of("none"), "--state", state, NULL);
  cr_expect_eq(r.status, 1);
  cr_expect(strstr(r.err, "lithium up: h4: ") != NULL && strstr(r.err, "none") != NULL, "%s",
            r.err);
  free_result(&r);
  tool(&r, NULL, "up", NULL);
  cr_expect_eq(r.status, 2);
  free_result(&r);
  remove_dir();
}

#define JOURNAL_FILES 10000
#define RECORD_LEN    7 /* "%06d\n" */

/* start_journal_run starts `lithium run` over the `n` files with journal `jnl`, stdout on
 * `out_fd` and stderr on `err_path`; returns its pid. */
static pid_t start_journal_run(char **files, int n, const char *jnl, int out_fd,
                               const char *err_path) {
  const char *head[] = {LT_TEST_TOOL, "run", "farm(seq(testk:sleep, \"1\"))"};
  const char *tail[] = {"--server", LT_TEST_SERVER, "--modules", LT_TEST_MODULES, "--journal",
                        jnl,        "--backup",     "off",       "--stats",       NULL};
  size_t nh = sizeof head / sizeof head[0], nt = sizeof tail / sizeof tail[0];
  char **argv = malloc((nh + (size_t)n + nt) * sizeof *argv);
  cr_assert_not_null(argv);
  memcpy(argv, head, sizeof head);
  memcpy(argv + nh, files, (size_t)n * sizeof *argv);
  memcpy(argv + nh + n, tail, sizeof tail);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  int rc = posix_spawn(&pid, LT_TEST_TOOL, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  free(argv);
  cr_assert_eq(rc, 0, "posix_spawn: %s", strerror(rc));
  return pid;
}

/* stats_total sums every `"key":N` of the JSON text. */
static uint64_t stats_total(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  uint64_t sum = 0;
  for (const char *p = json; (p = strstr(p, pat)) != NULL; p += strlen(pat))
    sum += strtoull(p + strlen(pat), NULL, 10);
  return sum;
}

/* --journal: a run over 10 000 files killed with SIGKILL halfway and started again writes
 * every result, in order, and computes again at most what the first run had in flight. */
Test(tool, journal_resumes_a_killed_run, .timeout = 120) {
  make_dir();
  mkdir(path_of("in"), 0755);
  char **files = calloc(JOURNAL_FILES, sizeof *files);
  cr_assert_not_null(files);
  char name[32], text[16];
  for (int i = 0; i < JOURNAL_FILES; i++) {
    snprintf(name, sizeof name, "in/%05d", i);
    snprintf(text, sizeof text, "%06d\n", i);
    write_file(name, text);
    files[i] = strdup(path_of(name));
  }
  const char *jnl = strdup(path_of("run.jnl"));
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  pid_t first = start_journal_run(files, JOURNAL_FILES, jnl, fds[1], path_of("first.err"));
  close(fds[1]);
  /* Read half the results, then kill the client outright. */
  size_t got = 0;
  char buf[4096];
  while (got < (size_t)JOURNAL_FILES / 2 * RECORD_LEN) {
    ssize_t k = read(fds[0], buf, sizeof buf);
    cr_assert_gt(k, 0, "the first run ended early");
    got += (size_t)k;
  }
  kill(first, SIGKILL);
  cr_assert_eq(wait_child(first), 128 + SIGKILL, "the first run was killed, not finished");
  /* What is still in the pipe was written before the kill too. */
  for (ssize_t k; (k = read(fds[0], buf, sizeof buf)) > 0;)
    got += (size_t)k;
  close(fds[0]);
  size_t written = got / RECORD_LEN;

  int out = open(path_of("second.out"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  cr_assert_geq(out, 0);
  pid_t second = start_journal_run(files, JOURNAL_FILES, jnl, out, path_of("second.err"));
  close(out);
  int status = wait_child(second);
  char *err = slurp(path_of("second.err"), NULL);
  cr_assert_eq(status, 0, "%s", err);
  size_t len = 0;
  char *all = slurp(path_of("second.out"), &len);
  cr_assert_eq(len, (size_t)JOURNAL_FILES * RECORD_LEN);
  for (int i = 0; i < JOURNAL_FILES; i++) {
    snprintf(text, sizeof text, "%06d\n", i);
    cr_assert(memcmp(all + (size_t)i * RECORD_LEN, text, RECORD_LEN) == 0, "result %d", i);
  }
  uint64_t replayed = stats_total(err, "journal_replayed");
  uint64_t computed = stats_total(err, "executed");
  /* Everything the first run had written was in the journal; nothing is done twice. */
  cr_expect_geq(replayed, written, "%s", err);
  cr_expect_eq(replayed + computed, JOURNAL_FILES, "%s", err);
  free(all);
  free(err);
  free((char *)jnl);
  for (int i = 0; i < JOURNAL_FILES; i++)
    free(files[i]);
  free(files);
  remove_dir();
}

Test(tool, sep_and_lines_on_stdout, .timeout = 60) {
  make_dir();
  write_file("a", "alpha");
  write_file("b", "");
  write_file("c", "gamma");
  result_t r;
  /* Default: no separator. */
  tool(&r, NULL, "run", "testk:upper", path_of("a"), path_of("b"), path_of("c"), LOCAL, NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "ALPHAGAMMA");
  free_result(&r);
  /* --lines: one result a line, an empty one too. */
  tool(&r, NULL, "run", "testk:upper", path_of("a"), path_of("b"), path_of("c"), LOCAL, "--lines",
       NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "ALPHA\n\nGAMMA\n");
  free_result(&r);
  /* --sep with every escape, on servers and with results out of order. */
  tool(&r, NULL, "run", "farm(testk:upper)", path_of("a"), path_of("c"), SERVERS, "--ordered=off",
       "--sep", "\\t|\\\\|\\0|\\n", NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  static const char want[] = "ALPHA\t|\\|\0|\nGAMMA\t|\\|\0|\n";
  cr_expect_eq(r.out_len, sizeof want - 1, "%zu bytes: %s", r.out_len, r.out);
  cr_expect_eq(memcmp(r.out, want, sizeof want - 1), 0, "%s", r.out);
  free_result(&r);
  /* A failed task writes nothing, not even the separator; stdin works too. */
  write_file("in", "stdin");
  tool(&r, path_of("in"), "run", "testk:upper", "-", LOCAL, "--sep=,", NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "STDIN,");
  free_result(&r);
  tool(&r, NULL, "run", "pipe(testk:upper, testk:fail)", path_of("a"), LOCAL, "--lines", NULL);
  cr_expect_eq(r.status, 1);
  cr_expect_str_eq(r.out, "");
  free_result(&r);
  remove_dir();
}

/* expect_refused runs the tool with the NULL-terminated arguments and expects a usage error
 * (status 2, nothing on stdout) whose message holds `want`. */
static void expect_refused(const char *want, ...) {
  char *argv[MAX_ARGS];
  va_list ap;
  va_start(ap, want);
  collect_args(argv, ap);
  va_end(ap);
  result_t r;
  tool_argv(&r, NULL, argv);
  cr_expect_eq(r.status, 2, "%s %s: %s", argv[1], argv[2], r.err);
  cr_expect_str_eq(r.out, "");
  cr_expect(strstr(r.err, want) != NULL, "want '%s': %s", want, r.err);
  free_result(&r);
}

Test(tool, sep_and_lines_usage_errors, .timeout = 30) {
  make_dir();
  write_file("a", "alpha");
  const char *a = path_of("a");
  expect_refused("not to --out", "run", "testk:upper", a, LOCAL, "--lines", "--out", path_of("o"),
                 NULL);
  cr_expect_neq(access(path_of("o"), F_OK), 0, "nothing was written");
  expect_refused("not to --out", "run", "testk:upper", a, LOCAL, "-o", path_of("o"), "--sep", ",",
                 NULL);
  expect_refused("--sep '\\q': unknown escape", "run", "testk:upper", a, LOCAL, "--sep", "\\q",
                 NULL);
  expect_refused("--sep 'x\\': unknown escape", "run", "testk:upper", a, LOCAL, "--sep", "x\\",
                 NULL);
  expect_refused("give one", "run", "testk:upper", a, LOCAL, "--sep", ",", "--lines", NULL);
  expect_refused("--lines takes no value", "run", "testk:upper", a, LOCAL, "--lines=yes", NULL);
  expect_refused("--lines applies to run only", "check", "testk:upper", "--lines", NULL);
  remove_dir();
}

Test(tool, check_modules_finds_every_kernel, .timeout = 30) {
  make_dir();
  result_t r;
  /* Every kernel there: the canonical form, as without --modules. */
  tool(&r, NULL, "check", "pipe(farm(testk:inc), map(skelk:chunks, skelk:rev, skelk:cat))",
       "--modules", LT_TEST_MODULES, NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "pipe(farm(testk:inc), map(skelk:chunks, skelk:rev, skelk:cat))\n");
  cr_expect_str_eq(r.err, "");
  free_result(&r);
  /* Each missing kernel and each missing module (once for its two kernels) is named. */
  tool(&r, NULL, "check",
       "pipe(testk:inc, farm(testk:nope), nomod:f, dc(nomod:g, testk:dbl, "
       "testk:inc, skelk:none))",
       "--modules", LT_TEST_MODULES, NULL);
  cr_expect_eq(r.status, 2, "%s", r.err);
  cr_expect_str_eq(r.out, "");
  cr_expect(strstr(r.err, "lithium: unknown kernel 'testk:nope'") != NULL, "%s", r.err);
  cr_expect(strstr(r.err, "lithium: unknown kernel 'skelk:none'") != NULL, "%s", r.err);
  const char *mod = strstr(r.err, "lithium: unknown module 'nomod'");
  cr_expect(mod != NULL, "%s", r.err);
  cr_expect(mod == NULL || strstr(mod + 10, "unknown module 'nomod'") == NULL, "once: %s", r.err);
  cr_expect(strstr(r.err, "testk:inc") == NULL && strstr(r.err, "testk:dbl") == NULL, "%s", r.err);
  free_result(&r);
  /* A module file that is not a shared object, and a directory that is not there. */
  write_file("libjunk.so", "not an ELF file");
  tool(&r, NULL, "check", "junk:f", "--modules", dir, NULL);
  cr_expect_eq(r.status, 2, "%s", r.err);
  cr_expect(strstr(r.err, "lithium: cannot load module 'junk'") != NULL, "%s", r.err);
  free_result(&r);
  tool(&r, NULL, "check", "testk:inc", "--modules", path_of("none"), NULL);
  cr_expect_eq(r.status, 2, "%s", r.err);
  cr_expect(strstr(r.err, "not a readable directory") != NULL, "%s", r.err);
  free_result(&r);
  /* Without --modules, check stays a syntax check. */
  tool(&r, NULL, "check", "nomod:f", NULL);
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "nomod:f\n");
  free_result(&r);
  remove_dir();
}
