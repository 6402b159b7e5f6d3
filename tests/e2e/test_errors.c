/* test_errors.c: every public call that can fail says why (issue 35, item 2): the text of
 * lt_last_error (the thread's) and of lt_eval_error (the evaluator's) names the call and the
 * argument, a builder given another's NULL quotes that one's reason, an older text never
 * survives a later failure, starting without a server says what to do, and lt_eval_next on
 * an open stream with nothing pending warns once (idle_warn_ms). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* has asserts that text `t` holds each of the NULL-terminated strings that follow. */
static void has_all(const char *t, ...) {
  va_list ap;
  va_start(ap, t);
  for (const char *w = va_arg(ap, const char *); w != NULL; w = va_arg(ap, const char *))
    cr_assert_not_null(strstr(t, w), "'%s' not in: %s", w, t);
  va_end(ap);
}
#define HAS(t, ...) has_all((t), __VA_ARGS__, (const char *)NULL)

/* fresh_eval returns an evaluator of farm(seq(testk:inc)), not started. */
static lt_eval_t *fresh_eval(void) {
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_farm(lt_seq("testk:inc"))), LT_OK, "%s", lt_last_error());
  return ev;
}

Test(errors, eval_new_names_the_builders_reason) {
  lt_eval_t *ev = (lt_eval_t *)1;
  cr_assert_eq(lt_eval_new(&ev, lt_seq("mandelk row")), LT_EINVAL);
  cr_assert_null(ev);
  HAS(lt_last_error(), "lt_eval_new: program is NULL", "lt_seq: kernel name 'mandelk row'",
      "has no ':'", "module:function");
  /* Nested builders pass the reason up. */
  cr_assert_eq(lt_eval_new(&ev, lt_farm(lt_while("c:c", lt_seq("m:f-g")))), LT_EINVAL);
  HAS(lt_last_error(), "lt_eval_new: program is NULL", "'m:f-g'", "'-' at offset 3",
      "function name");
  cr_assert_eq(lt_eval_new(NULL, lt_seq("a:b")), LT_EINVAL);
  HAS(lt_last_error(), "lt_eval_new: out is NULL");
}

Test(errors, builders_name_their_argument) {
  cr_assert_null(lt_seq(NULL));
  HAS(lt_last_error(), "lt_seq: kernel is NULL");
  cr_assert_null(lt_seq("a b:c"));
  HAS(lt_last_error(), "'a b:c'", "' ' at offset 1 in its module name");
  cr_assert_null(lt_seq(":f"));
  HAS(lt_last_error(), "no module before ':'");
  cr_assert_null(lt_seq("m:"));
  HAS(lt_last_error(), "no function after ':'");
  cr_assert_null(lt_seq_with("m:f", NULL, 3));
  HAS(lt_last_error(), "lt_seq_with: param is NULL with len 3");
  /* After a failure of another kind, a NULL child says only that. */
  cr_assert_eq(lt_host_split("bogus", (char[256]){0}, (char[41]){0}), LT_EINVAL);
  cr_assert_null(lt_farm(NULL));
  cr_assert_str_eq(lt_last_error(), "lt_farm: worker is NULL");
  cr_assert_null(lt_pipeline(NULL));
  HAS(lt_last_error(), "lt_pipeline: the first stage is NULL");
  cr_assert_null(lt_map("s p:lit", lt_seq("a:b"), "m:merge"));
  HAS(lt_last_error(), "lt_map: split name 's p:lit'");
  cr_assert_null(lt_map("s:split", lt_seq("a:b"), NULL));
  HAS(lt_last_error(), "lt_map: merge is NULL");
  cr_assert_null(lt_reduce("nocolon"));
  HAS(lt_last_error(), "lt_reduce:", "'nocolon'");
  cr_assert_null(lt_map_reduce("s:split", lt_seq("a:b"), lt_seq("c:d")));
  HAS(lt_last_error(), "lt_map_reduce: reduce is no lt_reduce");
  cr_assert_null(lt_dc(NULL, "d:div", lt_seq("a:b"), "c:comb"));
  HAS(lt_last_error(), "lt_dc: cond is NULL");
  cr_assert_null(lt_while("c:c!", lt_seq("a:b")));
  HAS(lt_last_error(), "lt_while: cond name 'c:c!'");
  cr_assert_null(lt_if("c:c", lt_seq("a:b"), NULL));
  HAS(lt_last_error(), "lt_if: else_branch is NULL");
  cr_assert_null(lt_skel_param(lt_seq("a:b"), "nope", "x", 1));
  HAS(lt_last_error(), "lt_skel_param:", "role 'nope'");
  cr_assert_null(lt_skel_format(NULL));
  HAS(lt_last_error(), "lt_skel_format: s is NULL");
  cr_assert_null(lt_skel_dot(NULL, 0));
  HAS(lt_last_error(), "lt_skel_dot: s is NULL");
}

Test(errors, parse_says_where) {
  lt_skel_t *s = NULL;
  cr_assert_eq(lt_skel_parse("farm(", &s, NULL, 0), LT_EINVAL);
  HAS(lt_last_error(), "lt_skel_parse: expr 'farm(':", "offset");
  char err[256];
  cr_assert_eq(lt_skel_parse(NULL, &s, err, sizeof err), LT_EINVAL);
  HAS(lt_last_error(), "lt_skel_parse: expr is NULL");
}

Test(errors, options_calls_name_the_key) {
  lt_options_t *o = NULL;
  cr_assert_eq(lt_options_new(NULL), LT_EINVAL);
  HAS(lt_last_error(), "lt_options_new: out is NULL");
  cr_assert_eq(lt_options_new(&o), LT_OK);
  cr_assert_eq(lt_options_set(o, "no_such_key", "1"), LT_EINVAL);
  HAS(lt_last_error(), "unknown option 'no_such_key'");
  cr_assert_eq(lt_options_set(o, "max_pending", "0"), LT_EINVAL);
  HAS(lt_last_error(), "max_pending");
  char buf[64];
  cr_assert_eq(lt_options_get(o, "nope", buf, sizeof buf), LT_EINVAL);
  HAS(lt_last_error(), "lt_options_get: unknown option 'nope'");
  cr_assert_eq(lt_options_set(o, "max_threads", "1"), LT_OK);
  cr_assert_eq(lt_options_check(o), LT_EINVAL);
  HAS(lt_last_error(), "min_threads", "max_threads");
  cr_assert_eq(lt_options_check(NULL), LT_EINVAL);
  HAS(lt_last_error(), "lt_options_check: o is NULL");
  cr_assert_eq(lt_option_info(100000, NULL, NULL, NULL, NULL), LT_EINVAL);
  HAS(lt_last_error(), "lt_option_info: i 100000 is out of range");
  lt_options_free(o);
}

/* A bad LITHIUM_<KEY> variable fails lt_eval_new and lt_options_from_env, naming it. */
Test(errors, environment_names_the_variable) {
  cr_assert_eq(setenv("LITHIUM_MAX_PENDING", "0", 1), 0);
  lt_eval_t *ev = (lt_eval_t *)1;
  cr_assert_eq(lt_eval_new(&ev, lt_seq("testk:inc")), LT_EINVAL);
  cr_assert_null(ev);
  HAS(lt_last_error(), "lt_eval_new: the environment:", "LITHIUM_MAX_PENDING");
  lt_options_t *o = NULL;
  cr_assert_eq(lt_options_new(&o), LT_OK);
  cr_assert_eq(lt_options_from_env(o), LT_EINVAL);
  HAS(lt_last_error(), "LITHIUM_MAX_PENDING");
  lt_options_free(o);
  cr_assert_eq(lt_options_from_env(NULL), LT_EINVAL);
  HAS(lt_last_error(), "lt_options_from_env: o is NULL");
  unsetenv("LITHIUM_MAX_PENDING");
}

/* With nonblocking on, a submit over max_pending says so: a task that sleeps 1 s keeps the
 * one pending place taken (tried again should the machine stall that long). */
Test(errors, nonblocking_submit_says_why) {
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_seq_with("testk:sleep", "1000", 4)), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "modules", LT_TEST_MODULES), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "nonblocking", "on"), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "max_pending", "1"), LT_OK);
  cr_assert_eq(lt_eval_run_local(ev), LT_OK);
  unsigned char tok[8];
  put_i64(tok, 1);
  int rc = LT_OK;
  for (int i = 0; i < 100 && rc == LT_OK; i++)
    rc = lt_eval_submit(ev, tok, sizeof tok, NULL);
  cr_assert_eq(rc, LT_EAGAIN);
  HAS(lt_eval_error(ev), "lt_eval_submit: max_pending tasks are unfinished",
      "option nonblocking is on");
  lt_eval_free(ev);
}

Test(errors, tool_calls_name_the_path) {
  char err[512], ep[LT_ENDPOINT_MAX + 1], key[LT_KEY_LEN + 1], pub[41], sec[41];
  cr_assert_lt(lt_hosts_read("/nonexistent/hosts", (lt_hosts_fn)1, NULL, err, sizeof err), 0);
  HAS(lt_last_error(), "lt_hosts_read: path '/nonexistent/hosts'");
  cr_assert_eq(lt_host_split("bogus", ep, key), LT_EINVAL);
  HAS(lt_last_error(), "lt_host_split: host 'bogus' is malformed", "tcp://HOST:PORT");
  cr_assert_neq(lt_keypair_read("/nonexistent/k.key", pub, sec, err, sizeof err), LT_OK);
  HAS(lt_last_error(), "lt_keypair_read: path '/nonexistent/k.key'");
  cr_assert_neq(lt_keypair_write("/nonexistent/dir/k", err, sizeof err), LT_OK);
  HAS(lt_last_error(), "lt_keypair_write: name '/nonexistent/dir/k'");
  cr_assert_eq(lt_journal_compact("/nonexistent/j", NULL, NULL, 0), LT_ENOENT);
  HAS(lt_last_error(), "lt_journal_compact:", "/nonexistent/j");
  size_t n;
  cr_assert_eq(lt_status_query(NULL, &n, NULL, NULL, 0, NULL, NULL, 10), LT_EINVAL);
  HAS(lt_last_error(), "lt_status_query: out is NULL");
  lt_skel_t *s = lt_seq("testk:inc");
  cr_assert_eq(lt_skel_check_kernels(s, "/nonexistent/mods", NULL, NULL), LT_EINVAL);
  HAS(lt_last_error(), "lt_skel_check_kernels: dir '/nonexistent/mods'");
  cr_assert_eq(lt_skel_check_kernels(NULL, LT_TEST_MODULES, NULL, NULL), LT_EINVAL);
  HAS(lt_last_error(), "lt_skel_check_kernels: s is NULL");
  lt_skel_free(s);
}

Test(errors, start_without_a_server_says_what_to_do) {
  lt_eval_t *ev = fresh_eval();
  cr_assert_eq(lt_eval_start(ev), LT_ENOSERVER);
  HAS(lt_eval_error(ev), "lt_eval_start: no server", "lt_eval_add_host", "lt_eval_spawn_local",
      "hosts", "LITHIUM_HOSTS");
  cr_assert_str_eq(lt_last_error(), lt_eval_error(ev));
  cr_assert_eq(lt_eval_set(ev, "hosts", "/nonexistent/hosts"), LT_OK);
  cr_assert_neq(lt_eval_start(ev), LT_OK);
  HAS(lt_eval_error(ev), "option hosts '/nonexistent/hosts'");
  lt_eval_free(ev);
}

/* The old text of another failure never survives: run_local with a missing module directory
 * says so, after an unknown option said something else. */
Test(errors, run_local_missing_modules_replaces_an_older_text) {
  lt_eval_t *ev = fresh_eval();
  cr_assert_eq(lt_eval_set(ev, "no_such_option", "1"), LT_EINVAL);
  HAS(lt_eval_error(ev), "unknown option 'no_such_option'");
  cr_assert_eq(lt_eval_set(ev, "modules", "/nonexistent/modules"), LT_OK);
  cr_assert_eq(lt_eval_run_local(ev), LT_EINVAL);
  HAS(lt_eval_error(ev), "lt_eval_run_local: option modules '/nonexistent/modules'",
      "not a readable directory");
  cr_assert_null(strstr(lt_eval_error(ev), "no_such_option"));
  cr_assert_str_eq(lt_last_error(), lt_eval_error(ev));
  lt_eval_free(ev);
}

Test(errors, evaluator_calls_name_the_argument) {
  lt_eval_t *ev = fresh_eval();
  cr_assert_eq(lt_eval_set(NULL, "a", "b"), LT_EINVAL);
  HAS(lt_last_error(), "lt_eval_set: ev is NULL");
  cr_assert_eq(lt_eval_add_host(ev, "localhost:5555"), LT_EINVAL);
  HAS(lt_eval_error(ev), "lt_eval_add_host: endpoint 'localhost:5555' is malformed");
  cr_assert_eq(lt_eval_add_host(ev, NULL), LT_EINVAL);
  HAS(lt_last_error(), "lt_eval_add_host: endpoint is NULL");
  cr_assert_eq(lt_eval_remove_host(ev, "tcp://127.0.0.1:9"), LT_ENOENT);
  HAS(lt_eval_error(ev), "lt_eval_remove_host: endpoint 'tcp://127.0.0.1:9' was never added");
  cr_assert_eq(lt_eval_spawn_local(ev, 0), LT_EINVAL);
  HAS(lt_eval_error(ev), "lt_eval_spawn_local: nservers 0 is out of range");
  cr_assert_eq(lt_eval_set(ev, "server", "/nonexistent/lithium-server"), LT_OK);
  cr_assert_eq(lt_eval_spawn_local(ev, 1), LT_ESPAWN);
  HAS(lt_eval_error(ev), "lt_eval_spawn_local: cannot start server 1 of 1",
      "/nonexistent/lithium-server");
  cr_assert_eq(lt_eval_submit(ev, NULL, 3, NULL), LT_EINVAL);
  HAS(lt_eval_error(ev), "lt_eval_submit: data is NULL with len 3");
  cr_assert_eq(lt_eval_submit_owned(ev, NULL, 4, NULL, NULL, NULL), LT_EINVAL);
  HAS(lt_eval_error(ev), "lt_eval_submit_owned: data is NULL with len 4");
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next(ev, NULL), LT_EINVAL);
  HAS(lt_last_error(), "lt_eval_next: out is NULL");
  cr_assert_eq(lt_eval_next_timeout(ev, 0, &b), LT_ESTATE);
  HAS(lt_eval_error(ev), "lt_eval_next: ev is not started");
  cr_assert_eq(lt_eval_stats_json(ev, NULL), LT_EINVAL);
  HAS(lt_last_error(), "lt_eval_stats_json: json is NULL");
  cr_assert_eq(lt_eval_close(NULL), LT_EINVAL);
  HAS(lt_last_error(), "lt_eval_close: ev is NULL");
  cr_assert_eq(lt_eval_start(NULL), LT_EINVAL);
  HAS(lt_last_error(), "lt_eval_start: ev is NULL");
  lt_eval_free(ev);
}

Test(errors, local_run_states_and_futures) {
  lt_eval_t *ev = fresh_eval();
  cr_assert_eq(lt_eval_set(ev, "modules", LT_TEST_MODULES), LT_OK);
  cr_assert_eq(lt_eval_run_local(ev), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "ordered", "off"), LT_ESTATE);
  HAS(lt_eval_error(ev), "option 'ordered' set after start");
  cr_assert_eq(lt_eval_run_local(ev), LT_ESTATE);
  HAS(lt_eval_error(ev), "lt_eval_run_local: ev was started already");
  cr_assert_eq(lt_eval_start(ev), LT_ESTATE);
  HAS(lt_eval_error(ev), "lt_eval_start: ev was started already");
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next_timeout(ev, 0, &b), LT_ETIMEDOUT);
  HAS(lt_eval_error(ev), "lt_eval_next_timeout: no result within timeout_ms 0");
  unsigned char tok[8];
  put_i64(tok, 41);
  lt_future_t *f = NULL;
  cr_assert_eq(lt_eval_submit(ev, tok, sizeof tok, &f), LT_OK);
  cr_assert_eq(lt_future_wait(f, -1, &b), LT_OK);
  lt_buf_free(b);
  cr_assert_eq(lt_future_wait(f, -1, &b), LT_ESTATE);
  HAS(lt_last_error(), "lt_future_wait: the result of f was taken already");
  int which;
  cr_assert_eq(lt_future_wait_any(&f, 1, 0, &which, &b), LT_ESTATE);
  HAS(lt_last_error(), "lt_future_wait_any: the results of all 1 futures");
  cr_assert_eq(lt_future_wait_any(&f, 0, 0, &which, &b), LT_EINVAL);
  HAS(lt_last_error(), "lt_future_wait_any: n 0 is not positive");
  cr_assert_eq(lt_future_wait(NULL, 0, &b), LT_EINVAL);
  HAS(lt_last_error(), "lt_future_wait: f is NULL");
  lt_future_release(f);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  cr_assert_eq(lt_eval_submit(ev, tok, sizeof tok, NULL), LT_ECLOSED);
  HAS(lt_eval_error(ev), "lt_eval_submit: the stream of ev is closed");
  cr_assert_eq(lt_eval_next(ev, &b), LT_ECLOSED);
  HAS(lt_eval_error(ev), "lt_eval_next: the stream is closed and every result was read");
  lt_eval_free(ev);
}

/* count_in counts the lines of file `path` holding `what`. */
static int count_in(const char *path, const char *what) {
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, f) != NULL)
    n += strstr(line, what) != NULL;
  fclose(f);
  return n;
}

/* lt_eval_next on a stream not closed, with nothing pending, warns once after idle_warn_ms:
 * the wait goes on (up to its timeout) and the next wait does not warn again. */
Test(errors, next_on_an_open_idle_stream_warns_once) {
  char path[] = "/tmp/lt_test_idle_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  int saved = dup(STDERR_FILENO);
  cr_assert_eq(dup2(fd, STDERR_FILENO), STDERR_FILENO);
  lt_eval_t *ev = fresh_eval();
  cr_assert_eq(lt_eval_set(ev, "modules", LT_TEST_MODULES), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "idle_warn_ms", "20"), LT_OK);
  cr_assert_eq(lt_eval_run_local(ev), LT_OK);
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next_timeout(ev, 1500, &b), LT_ETIMEDOUT);
  cr_assert_eq(lt_eval_next_timeout(ev, 300, &b), LT_ETIMEDOUT);
  lt_eval_free(ev);
  /* A stream with work pending does not warn, however long the wait. */
  ev = fresh_eval();
  cr_assert_eq(lt_eval_set(ev, "idle_warn_ms", "0"), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "modules", LT_TEST_MODULES), LT_OK);
  cr_assert_eq(lt_eval_run_local(ev), LT_OK);
  cr_assert_eq(lt_eval_next_timeout(ev, 200, &b), LT_ETIMEDOUT);
  lt_eval_free(ev);
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fd);
  int n = count_in(path, "is not closed, with no task pending");
  unlink(path);
  cr_assert_eq(n, 1, "%d warnings", n);
}

/* ---- fail fast (issue 35, item 1): lt_eval_start checks every kernel ------------------- */

/* server_completed asks server `p` how many instructions it finished since it started,
 * from any client (lithium status). */
static uint64_t server_completed(const lt_proc_t *p) {
  lt_server_status_t *st = NULL;
  size_t n = 0;
  const char *ep = p->endpoint;
  cr_assert_eq(lt_status_query(&st, &n, &ep, NULL, 1, NULL, NULL, 10000), LT_OK);
  cr_assert_eq(n, 1);
  cr_assert(st[0].answered, "%s", st[0].error);
  uint64_t done = st[0].completed;
  lt_status_free(st, n);
  return done;
}

/* submit_some submits n int64 tasks before the start, as Lithium's submit-then-parDo does. */
static void submit_some(lt_eval_t *ev, int n) {
  for (int i = 0; i < n; i++) {
    unsigned char tok[8];
    put_i64(tok, i);
    cr_assert_eq(lt_eval_submit(ev, tok, sizeof tok, NULL), LT_OK, "%s", lt_eval_error(ev));
  }
}

/* eval_on makes an evaluator of `program` on server `p`, with option modules `modules`
 * (NULL: unset), 200 tasks submitted, not started. */
static lt_eval_t *eval_on(lt_skel_t *program, const lt_proc_t *p, const char *modules) {
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, program), LT_OK, "%s", lt_last_error());
  if (modules != NULL) cr_assert_eq(lt_eval_set(ev, "modules", modules), LT_OK);
  cr_assert_eq(lt_eval_add_host(ev, p->endpoint), LT_OK);
  submit_some(ev, 200);
  return ev;
}

/* A typo in a kernel's function ("testk:icn") fails lt_eval_start once, with LT_ENOKERNEL,
 * naming the kernel, the module and where it looked; no server ran anything, and later
 * submits are refused. */
Test(failfast, typo_in_a_kernel_fails_the_start_once, .timeout = 60) {
  lt_proc_t srv;
  start_server(&srv, "failfast-kernel", 2);
  lt_eval_t *ev = eval_on(
      lt_farm(lt_pipeline(lt_seq("testk:inc"), lt_seq("testk:icn"), lt_seq("testk:dlb"), NULL)),
      &srv, LT_TEST_MODULES);
  cr_assert_eq(lt_eval_start(ev), LT_ENOKERNEL, "%s", lt_eval_error(ev));
  HAS(lt_eval_error(ev), "lt_eval_start: 2 kernel(s)", "'testk:icn'", "'testk:dlb'",
      "module 'testk' has no lt_kernel_icn", "modules=" LT_TEST_MODULES, "nothing was sent");
  cr_assert_null(strstr(lt_eval_error(ev), "'testk:inc'"), "%s", lt_eval_error(ev));
  char *json = stats_of(ev);
  cr_assert_eq(stats_u64(json, "instructions"), 0, "%s", json);
  free(json);
  unsigned char tok[8] = {0};
  cr_assert_neq(lt_eval_submit(ev, tok, sizeof tok, NULL), LT_OK);
  lt_eval_free(ev);
  cr_assert_eq(server_completed(&srv), 0);
  lt__proc_stop(&srv, 5000);
}

/* A module no server has ("nomod") fails lt_eval_start once, with LT_ENOMODULE, naming the
 * server, the module and its kernels, also without a local modules directory; nothing was
 * sent to the server that did welcome us. */
Test(failfast, missing_module_fails_the_start_once, .timeout = 60) {
  lt_proc_t srv;
  start_server(&srv, "failfast-module", 2);
  const char *modules[] = {NULL, LT_TEST_MODULES};
  for (int k = 0; k < 2; k++) {
    lt_eval_t *ev =
        eval_on(lt_pipeline(lt_seq("testk:inc"), lt_seq("nomod:f"), lt_seq("nomod:g"), NULL), &srv,
                modules[k]);
    cr_assert_eq(lt_eval_start(ev), LT_ENOMODULE, "%s", lt_eval_error(ev));
    HAS(lt_eval_error(ev), "lt_eval_start: no server has every module", srv.endpoint,
        "no module 'nomod' (for 'nomod:f', 'nomod:g')", "--modules", "nothing was sent");
    cr_assert_null(strstr(lt_eval_error(ev), "'testk'"), "%s", lt_eval_error(ev));
    char *json = stats_of(ev);
    cr_assert_eq(stats_u64(json, "instructions"), 0, "%s", json);
    free(json);
    lt_eval_free(ev);
  }
  cr_assert_eq(server_completed(&srv), 0);
  lt__proc_stop(&srv, 5000);
}

/* A server that joins later without the program's module gets no work, with one warning;
 * the run ends right on the server that has it. */
Test(failfast, late_server_without_the_module_gets_no_work, .timeout = 120) {
  char empty[] = "/tmp/lt_test_nomods_XXXXXX";
  cr_assert_not_null(mkdtemp(empty));
  lt_proc_t a, b;
  start_server(&a, "failfast-a", 2);
  char err[256];
  cr_assert_eq(
      lt__proc_spawn(&b, LT_TEST_SERVER, empty, 2, "failfast-b", NULL, 10000, err, sizeof err),
      LT_OK, "%s", err);
  cr_assert_eq(rmdir(empty), 0); /* b keeps no module, and the test leaves nothing behind */
  lt_eval_t *ev = eval_on(lt_farm(lt_seq("testk:inc")), &a, NULL);
  cr_assert_eq(lt_eval_start(ev), LT_OK, "%s", lt_eval_error(ev));
  cr_assert_eq(lt_eval_add_host(ev, b.endpoint), LT_OK);
  cr_assert(wait_stat(ev, 1, "threads", 1, 30000), "server b never welcomed us");
  submit_some(ev, 200);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  int64_t sum = 0;
  lt_buf_t *r = NULL;
  while (lt_eval_next(ev, &r) == LT_OK) {
    cr_assert_eq(lt_buf_error(r), LT_OK, "%s", lt_buf_errmsg(r));
    sum += get_i64(lt_buf_data(r));
    lt_buf_free(r);
  }
  cr_assert_eq(sum, 2 * (199 * 200 / 2 + 200), "every result of the 2 x 200 tasks, right");
  cr_assert_eq(server_stat(ev, "completed", 1), 0);
  lt_eval_free(ev);
  cr_assert_eq(server_completed(&b), 0);
  lt__proc_stop(&a, 5000);
  lt__proc_stop(&b, 5000);
}
