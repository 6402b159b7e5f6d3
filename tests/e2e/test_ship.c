/* test_ship.c: shipping kernel modules by hash (ship_modules, --accept-modules), end to end
 * with real lithium-server processes. A client ships its copy of a module to a server whose
 * module directory is empty and gets its results; the store holds it as DIR/<sha256>.so;
 * another session of that server does not see it. Two clients ship two different modules of
 * one name (and one DT_SONAME) to one server at once, and each gets its own results.
 * --accept-modules without CURVE on a public listen refuses to start. A module for another
 * architecture, a file that is not ELF, a hash that does not match, a module over the frame
 * limit or the session quota give error results naming the module and the reason, and the
 * server lives on. A module rebuilt while the servers ran makes the client warn once. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <lithium.h>
#include <lithium/error.h>
#include "curve.h"
#include "harness.h"
#include "log.h"
#include "server/srv_helper.h"
#include "sha256.h"

#define SHIP_A LT_TEST_SHIP_DIR "/a" /* libshipk.so: shipk:tag adds 1000 */
#define SHIP_B LT_TEST_SHIP_DIR "/b" /* libshipk.so: shipk:tag adds 2000 */

/* ---------------------------------------------------------------------------------------
 * Helpers. */

static void make_dir(char *dir, size_t len, const char *what) {
  snprintf(dir, len, "/tmp/lt-ship-%s-XXXXXX", what);
  cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(const char *dir) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

static size_t read_all(const char *path, unsigned char *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "%s", path);
  size_t n = fread(buf, 1, cap, f);
  cr_assert(feof(f), "%s is larger than %zu bytes", path, cap);
  fclose(f);
  return n;
}

/* write_file writes a file through a temporary one and a rename, as a build would. */
static void write_file(const char *path, const void *data, size_t len) {
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "wb");
  cr_assert_not_null(f, "%s", tmp);
  cr_assert_eq(fwrite(data, 1, len, f), len);
  cr_assert_eq(fclose(f), 0);
  cr_assert_eq(rename(tmp, path), 0);
}

/* copy_module copies libshipk.so of `from` into directory `to`. */
static void copy_module(const char *from, const char *to) {
  static unsigned char buf[4 << 20];
  char src[600], dst[600];
  snprintf(src, sizeof src, "%s/libshipk.so", from);
  snprintf(dst, sizeof dst, "%s/libshipk.so", to);
  write_file(dst, buf, read_all(src, buf, sizeof buf));
}

/* start_ship_server starts a server on loopback with module directory `mods`, the store
 * `store` (NULL: no --accept-modules) and `more` flags (NULL-terminated, may be NULL). */
static void start_ship_server(th_server_t *s, const char *mods, const char *store,
                              const char *const *more) {
  const char *args[24] = {"--listen", "tcp://127.0.0.1:0", "--modules", mods, "--threads", "2"};
  size_t n = 6;
  if (store != NULL) {
    args[n++] = "--accept-modules";
    args[n++] = store;
  }
  for (size_t i = 0; more != NULL && more[i] != NULL && n < 23; i++)
    args[n++] = more[i];
  args[n] = NULL;
  cr_assert_eq(th_server_start(s, args, 10000), 0);
}

/* ship_eval starts an evaluator of farm(shipk:tag) on `hosts` with local modules `moddir`
 * and ship_modules on or off. */
static lt_eval_t *ship_eval(const char *moddir, int ship, const th_server_t *hosts, int n) {
  lt_eval_t *ev;
  cr_assert_eq(lt_eval_new(&ev, lt_farm(lt_seq("shipk:tag"))), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "modules", moddir), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "ship_modules", ship ? "on" : "off"), LT_OK);
  for (int i = 0; i < n; i++)
    cr_assert_eq(lt_eval_add_host(ev, hosts[i].endpoint), LT_OK);
  int rc = lt_eval_start(ev);
  cr_assert_eq(rc, LT_OK, "start: %s", lt_strerror(rc));
  return ev;
}

/* ship_eval_refused expects lt_eval_start of farm(shipk:tag) on server `host` with local
 * modules `moddir` and ship_modules on or off to fail at once with LT_ENOMODULE naming
 * shipk and the server (issue 35: fail fast, not one error per task). */
static void ship_eval_refused(const char *moddir, int ship, const th_server_t *host) {
  lt_eval_t *ev;
  cr_assert_eq(lt_eval_new(&ev, lt_farm(lt_seq("shipk:tag"))), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "modules", moddir), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "ship_modules", ship ? "on" : "off"), LT_OK);
  cr_assert_eq(lt_eval_add_host(ev, host->endpoint), LT_OK);
  cr_assert_eq(lt_eval_submit(ev, "12345678", 8, NULL), LT_OK);
  cr_assert_eq(lt_eval_start(ev), LT_ENOMODULE, "%s", lt_eval_error(ev));
  cr_assert_not_null(strstr(lt_eval_error(ev), "no module 'shipk' (for 'shipk:tag')"), "%s",
                     lt_eval_error(ev));
  cr_assert_not_null(strstr(lt_eval_error(ev), host->endpoint), "%s", lt_eval_error(ev));
  lt_eval_free(ev);
}

/* expect_tags runs tasks 0..n-1 and expects each result to be i + add. */
static void expect_tags(lt_eval_t *ev, int n, int64_t add) {
  submit_i64s(ev, n);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  for (int64_t i = 0; i < n; i++)
    cr_assert_eq(next_i64_within(ev, 20000), i + add, "task %lld", (long long)i);
}

/* expect_error runs one task and expects an error result whose message holds every one of
 * `needles` (NULL-terminated). */
static void expect_error(lt_eval_t *ev, const char *const *needles) {
  lt_buf_t *b = one_result(ev, 1, 20000);
  cr_assert_neq(lt_buf_error(b), LT_OK, "the task ran: %lld", (long long)get_i64(lt_buf_data(b)));
  for (int i = 0; needles[i] != NULL; i++)
    cr_assert_not_null(strstr(lt_buf_errmsg(b), needles[i]), "'%s' not in: %s", needles[i],
                       lt_buf_errmsg(b));
  lt_buf_free(b);
}

/* ---------------------------------------------------------------------------------------
 * Shipping. */

/* A server with an empty module directory runs the module a client ships, stored by its
 * hash; another session of that server does not see it. */
Test(ship, to_an_empty_module_directory) {
  char empty[64], store[64];
  make_dir(empty, sizeof empty, "empty");
  make_dir(store, sizeof store, "store");
  cr_assert_eq(chmod(store, 0755), 0); /* the server makes it 0700 */
  th_server_t s;
  start_ship_server(&s, empty, store, NULL);
  lt_eval_t *ev = ship_eval(SHIP_A, 1, &s, 1);
  expect_tags(ev, 40, 1000);

  char sha[LT_SHA256_HEX], path[300];
  cr_assert_eq(lt__sha256_file(SHIP_A "/libshipk.so", sha), LT_OK);
  snprintf(path, sizeof path, "%s/%s.so", store, sha);
  struct stat sb;
  cr_assert_eq(stat(path, &sb), 0, "%s not stored", path);
  cr_assert_eq(sb.st_mode & 0777, 0600);
  cr_assert_eq(stat(store, &sb), 0);
  cr_assert_eq(sb.st_mode & 0777, 0700);

  /* Another client, which ships nothing, while the first one's session is still open: its
   * start fails, the server has no copy for it. */
  ship_eval_refused(SHIP_A, 0, &s);
  lt_eval_free(ev);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 15000), 0);
  remove_dir(empty);
  remove_dir(store);
}

/* Two clients ship two different modules of one name (the same file name and DT_SONAME,
 * different code) to one server at once: each session runs its own. */
Test(ship, two_clients_two_copies_at_once) {
  char empty[64], store[64];
  make_dir(empty, sizeof empty, "empty");
  make_dir(store, sizeof store, "store");
  th_server_t s;
  start_ship_server(&s, empty, store, NULL);
  lt_eval_t *a = ship_eval(SHIP_A, 1, &s, 1);
  lt_eval_t *b = ship_eval(SHIP_B, 1, &s, 1);
  enum { N = 100 };
  for (int i = 0; i < N; i++) {
    unsigned char tok[8];
    put_i64(tok, i);
    cr_assert_eq(lt_eval_submit(a, tok, 8, NULL), LT_OK);
    cr_assert_eq(lt_eval_submit(b, tok, 8, NULL), LT_OK);
  }
  cr_assert_eq(lt_eval_close(a), LT_OK);
  cr_assert_eq(lt_eval_close(b), LT_OK);
  for (int64_t i = 0; i < N; i++) {
    cr_assert_eq(next_i64_within(a, 20000), i + 1000);
    cr_assert_eq(next_i64_within(b, 20000), i + 2000);
  }
  lt_eval_free(a);
  lt_eval_free(b);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 15000), 0);
  remove_dir(empty);
  remove_dir(store);
}

/* --accept-modules runs code from the network: without CURVE only on loopback. */
Test(ship, accept_modules_needs_curve_off_loopback) {
  char store[64], keys[64], err[4096], out[512];
  make_dir(store, sizeof store, "store");
  const char *argv[] = {
      LT_TEST_SERVER, "--listen", "tcp://0.0.0.0:0", "--insecure", "--accept-modules", store, NULL};
  cr_assert_eq(th_run(argv, 10000, out, sizeof out, err, sizeof err), 2, "%s", err);
  cr_assert_not_null(strstr(err, "--accept-modules"), "%s", err);
  cr_assert_not_null(strstr(err, "--curve-key"), "%s", err);
  /* With a key it starts. */
  make_dir(keys, sizeof keys, "keys");
  char base[100], key[128], kerr[300];
  snprintf(base, sizeof base, "%s/server", keys);
  cr_assert_eq(lt__curve_keygen(base, kerr, sizeof kerr), LT_OK, "%s", kerr);
  snprintf(key, sizeof key, "%s.key", base);
  const char *curve[] = {
      "--listen", "tcp://0.0.0.0:0", "--curve-key", key, "--accept-modules", store, NULL};
  th_server_t s;
  cr_assert_eq(th_server_start(&s, curve, 10000), 0);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 15000), 0);
  /* A store owned by someone else, or that is not a directory, is refused too. */
  char file[100];
  snprintf(file, sizeof file, "%s/not-a-dir", store);
  write_file(file, "x", 1);
  const char *notdir[] = {LT_TEST_SERVER,     "--listen", "tcp://127.0.0.1:0",
                          "--accept-modules", file,       NULL};
  cr_assert_eq(th_run(notdir, 10000, out, sizeof out, err, sizeof err), 2, "%s", err);
  cr_assert_not_null(strstr(err, "not a directory"), "%s", err);
  remove_dir(store);
  remove_dir(keys);
}

/* patch_machine makes the module in `dir` an ELF file for another machine. */
static void patch_machine(const char *dir) {
  static unsigned char buf[4 << 20];
  char path[600];
  snprintf(path, sizeof path, "%s/libshipk.so", dir);
  size_t n = read_all(path, buf, sizeof buf);
  cr_assert_gt(n, 20);
  unsigned other = buf[18] == 62 ? 183 : 62; /* x86-64 <-> aarch64 (e_machine, little-endian) */
  buf[18] = (unsigned char)other;
  buf[19] = 0;
  write_file(path, buf, n);
}

/* A module the server cannot load, or refuses, is an error result naming the module and
 * the reason; the session and the server live on. */
Test(ship, bad_modules_fail_their_tasks) {
  char empty[64], store[64], foreign[64], text[64];
  make_dir(empty, sizeof empty, "empty");
  make_dir(store, sizeof store, "store");
  make_dir(foreign, sizeof foreign, "foreign");
  make_dir(text, sizeof text, "text");
  copy_module(SHIP_A, foreign);
  patch_machine(foreign);
  char path[300];
  snprintf(path, sizeof path, "%s/libshipk.so", text);
  write_file(path, "this is not an ELF file\n", 24);
  th_server_t s;
  start_ship_server(&s, empty, store, NULL);

  lt_eval_t *ev = ship_eval(foreign, 1, &s, 1);
  const char *arch[] = {"shipk", "another architecture", NULL};
  expect_error(ev, arch);
  lt_eval_free(ev);
  ev = ship_eval(text, 1, &s, 1);
  const char *notelf[] = {"shipk", "not an ELF file", NULL};
  expect_error(ev, notelf);
  lt_eval_free(ev);
  /* The server is well: a good module ships and runs. */
  ev = ship_eval(SHIP_B, 1, &s, 1);
  expect_tags(ev, 10, 2000);
  lt_eval_free(ev);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 15000), 0);

  /* Over the frame limit (the client sends it without its bytes) or the session's quota. */
  struct stat sb;
  cr_assert_eq(stat(SHIP_A "/libshipk.so", &sb), 0);
  cr_assert_gt(sb.st_size, 4096, "the test module is too small for the limits below");
  const char *frame[] = {"--max-frame", "4k", NULL};
  start_ship_server(&s, empty, store, frame);
  ev = ship_eval(SHIP_A, 1, &s, 1);
  const char *why_frame[] = {"shipk", "frame limit", NULL};
  expect_error(ev, why_frame);
  lt_eval_free(ev);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 15000), 0);
  const char *quota[] = {"--max-session-bytes", "4k", NULL};
  start_ship_server(&s, empty, store, quota);
  ev = ship_eval(SHIP_A, 1, &s, 1);
  const char *why_quota[] = {"shipk", "quota", NULL};
  expect_error(ev, why_quota);
  lt_eval_free(ev);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 15000), 0);

  /* A server without --accept-modules runs its own copy (none here): the start fails. */
  start_ship_server(&s, empty, NULL, NULL);
  ship_eval_refused(SHIP_A, 1, &s);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 15000), 0);
  remove_dir(empty);
  remove_dir(store);
  remove_dir(foreign);
  remove_dir(text);
}

/* send_module sends MODULE shipk with `sha` and the bytes of `dir`/libshipk.so. */
static void send_module(th_client_t *c, const char *dir, const char *sha) {
  static unsigned char buf[4 << 20];
  char path[600];
  snprintf(path, sizeof path, "%s/libshipk.so", dir);
  size_t n = read_all(path, buf, sizeof buf);
  lt_bytes_t pay = {buf, n};
  lt_msg_t m = {.type = LT_MSG_MODULE};
  m.u.module.name = "shipk";
  m.u.module.sha256 = sha;
  m.u.module.size = n;
  m.u.module.frame = 0;
  cr_assert_eq(th_send(c, &m, &pay, 1), 0);
}

/* Bytes that do not have the SHA-256 announced are refused: the instruction fails saying so;
 * the same session may ship the module again, right. */
Test(ship, hash_mismatch_refused) {
  char empty[64], store[64];
  make_dir(empty, sizeof empty, "empty");
  make_dir(store, sizeof store, "store");
  th_server_t s;
  start_ship_server(&s, empty, store, NULL);
  th_client_t c;
  const uint64_t id = UINT64_C(0x5111900000000001);
  cr_assert_eq(th_client_open(&c, s.endpoint), 0);
  cr_assert_eq(th_hello_ok(&c, id), 0);
  const char *kernels[] = {"shipk:tag"};
  cr_assert_eq(th_program(&c, kernels, 1), 0);
  char sha_b[LT_SHA256_HEX], sha_a[LT_SHA256_HEX], msg[600];
  cr_assert_eq(lt__sha256_file(SHIP_B "/libshipk.so", sha_b), LT_OK);
  cr_assert_eq(lt__sha256_file(SHIP_A "/libshipk.so", sha_a), LT_OK);
  send_module(&c, SHIP_A, sha_b); /* a's bytes under b's hash */
  int64_t v = 0;
  cr_assert_eq(th_exec1(&c, 1, NULL, 5, (lt_oid_t){id, 1}, LT_INSTR_RETURN, &v, msg, sizeof msg),
               LT_ENOMODULE, "%s", msg);
  cr_assert_not_null(strstr(msg, "shipk"), "%s", msg);
  cr_assert_not_null(strstr(msg, "SHA-256"), "%s", msg);
  char path[300];
  snprintf(path, sizeof path, "%s/%s.so", store, sha_b);
  cr_assert_neq(access(path, F_OK), 0, "refused bytes were stored");
  send_module(&c, SHIP_A, sha_a);
  cr_assert_eq(th_exec1(&c, 2, NULL, 5, (lt_oid_t){id, 2}, LT_INSTR_RETURN, &v, msg, sizeof msg),
               LT_OK, "%s", msg);
  cr_assert_eq(v, 1005);
  th_client_close(&c);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 15000), 0);
  remove_dir(empty);
  remove_dir(store);
}

/* ---------------------------------------------------------------------------------------
 * A module rebuilt while the servers ran. */

/* run_captured runs expect_tags on a new evaluator with stderr in a file, and returns how
 * many lines of it say `needle`. */
static int run_captured(const char *moddir, int ship, const th_server_t *hosts, int n, int64_t add,
                        const char *needle) {
  stderr_capture_t cap;
  stderr_capture_begin(&cap);
  lt__log_set_level(LT_LOG_WARN);
  lt_eval_t *ev = ship_eval(moddir, ship, hosts, n);
  expect_tags(ev, 40, add);
  lt_eval_free(ev);
  static char log[1 << 16];
  stderr_capture_end(&cap, log, sizeof log);
  int count = 0;
  for (const char *p = log; (p = strstr(p, needle)) != NULL; p += strlen(needle))
    count++;
  return count;
}

Test(ship, rebuilt_module_warns_once) {
  char mods[64], store[64];
  make_dir(mods, sizeof mods, "mods");
  make_dir(store, sizeof store, "store");
  copy_module(SHIP_A, mods);
  th_server_t s[2];
  start_ship_server(&s[0], mods, store, NULL);
  start_ship_server(&s[1], mods, store, NULL);
  /* Each server loads the module as it is now. */
  const char *warning = "module 'shipk': server";
  for (int i = 0; i < 2; i++)
    cr_assert_eq(run_captured(mods, 0, &s[i], 1, 1000, warning), 0);
  /* The module is rebuilt: the servers keep running the copy they loaded, and the client
   * says so once for the evaluation, not once per server or per task. */
  copy_module(SHIP_B, mods);
  cr_assert_eq(run_captured(mods, 0, s, 2, 1000, warning), 1);
  /* Under ship_modules=on the client's copy runs, and nothing is to be warned about. */
  cr_assert_eq(run_captured(mods, 1, s, 2, 2000, warning), 0);
  for (int i = 0; i < 2; i++)
    cr_assert_eq(th_server_stop(&s[i], SIGTERM, 15000), 0);
  remove_dir(mods);
  remove_dir(store);
}
