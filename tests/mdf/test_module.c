/* test_module.c: the kernel-module registry: directories, resolving "module:function",
 * caching, and the error messages for malformed names, unknown modules and kernels, and
 * modules that fail to load. Uses the testk module from LT_TEST_MODULES. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lithium/error.h>

#include "bufpool.h"
#include "call.h"
#include "module.h"

static lt_modules_t *registry(const char *dir) {
  lt_modules_t *m = NULL;
  cr_assert_eq(lt__modules_new(&m), LT_OK);
  if (dir != NULL) cr_assert_eq(lt__modules_add_dir(m, dir), LT_OK, "add_dir %s", dir);
  return m;
}

/* make_tmpdir creates a fresh directory under /tmp (removed by rm_tmpdir). */
static void make_tmpdir(char *buf, size_t len) {
  snprintf(buf, len, "/tmp/lt-test-module-XXXXXX");
  cr_assert_not_null(mkdtemp(buf));
}

static void write_file(const char *path, const void *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  cr_assert_geq(fd, 0, "open %s", path);
  cr_assert_eq(write(fd, data, len), (ssize_t)len);
  close(fd);
}

static void copy_file(const char *from, const char *to) {
  FILE *f = fopen(from, "rb");
  cr_assert_not_null(f, "open %s", from);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n);
  cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  write_file(to, buf, (size_t)n);
  free(buf);
}

static void rm_tmpdir(const char *dir, const char *const *files) {
  char path[512];
  for (; *files != NULL; files++) {
    snprintf(path, sizeof path, "%s/%s", dir, *files);
    unlink(path);
  }
  cr_assert_eq(rmdir(dir), 0, "rmdir %s", dir);
}

/* run_int calls `fn` on one int64 input and returns its int64 output. */
static int64_t run_int(lt_kernel_fn fn, int64_t x) {
  lt_bytes_t in = {&x, sizeof x};
  lt__call_t c;
  lt__call_init(&c, &in, 1, (lt_bytes_t){NULL, 0});
  cr_assert_eq(lt__call_run(&c, fn), LT_OK, "%s", c.errmsg);
  cr_assert_eq(c.noutputs, 1);
  void *data;
  size_t len;
  lt__call_take_output(&c, 0, &data, &len);
  cr_assert_eq(len, 8);
  int64_t y;
  memcpy(&y, data, 8);
  lt__bufpool_free(data);
  lt__call_clear(&c);
  return y;
}

Test(module, name_valid) {
  static const char *const good[] = {"testk:inc", "a:b", "my-mod.v2:f_1", "M_9:_X", "x:0abc", NULL};
  static const char *const bad[] = {"",      "testk",      ":inc",     "testk:",  "testk:in-c",
                                    "a:b:c", "te/stk:inc", "../x:inc", "mod:f.n", "mod :f",
                                    "m\n:f", "mod:f g",    NULL};
  for (const char *const *p = good; *p != NULL; p++)
    cr_assert(lt__kernel_name_valid(*p), "'%s' should be valid", *p);
  for (const char *const *p = bad; *p != NULL; p++)
    cr_assert_not(lt__kernel_name_valid(*p), "'%s' should be invalid", *p);
  cr_assert_not(lt__kernel_name_valid(NULL));

  char name[300];
  memset(name, 'm', sizeof name);
  name[100] = ':';
  name[255] = '\0'; /* 255 bytes: the limit */
  cr_assert(lt__kernel_name_valid(name));
  name[255] = 'f';
  name[256] = '\0';
  cr_assert_not(lt__kernel_name_valid(name));
}

Test(module, resolve_good_kernel) {
  lt_modules_t *m = registry(LT_TEST_MODULES);
  lt_kernel_fn inc = NULL, dbl = NULL, again = NULL;
  char err[256] = "untouched";
  cr_assert_eq(lt__modules_resolve(m, "testk:inc", &inc, err, sizeof err), LT_OK, "%s", err);
  cr_assert_not_null(inc);
  cr_assert_eq(lt__modules_resolve(m, "testk:dbl", &dbl, err, sizeof err), LT_OK, "%s", err);
  cr_assert_eq(lt__modules_resolve(m, "testk:inc", &again, NULL, 0), LT_OK);
  cr_assert_eq(again, inc, "a module is loaded once");
  cr_assert_eq(run_int(inc, 41), 42);
  cr_assert_eq(run_int(dbl, 21), 42);
  lt__modules_free(m);
  lt__modules_free(NULL);
}

static void count_module(void *ud, const char *name, const char *sha256) {
  char *seen = ud;
  snprintf(seen, 128, "%s %s", name, sha256);
}

Test(module, loaded_modules_with_their_hash) {
  lt_modules_t *m = registry(LT_TEST_MODULES);
  char seen[128] = "";
  cr_assert_eq(lt__modules_each(m, count_module, seen), 0);
  lt_kernel_fn fn = NULL;
  cr_assert_eq(lt__modules_resolve(m, "testk:inc", &fn, NULL, 0), LT_OK);
  cr_assert_eq(lt__modules_resolve(m, "testk:dbl", &fn, NULL, 0), LT_OK);
  cr_assert_eq(lt__modules_each(m, count_module, seen), 1);
  /* The hash is the file's, as sha256sum computes it. */
  char cmd[600], want[128] = "";
  snprintf(cmd, sizeof cmd, "sha256sum %s/libtestk.so", LT_TEST_MODULES);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  cr_assert_not_null(fgets(want, 65, p));
  pclose(p);
  cr_expect(strncmp(seen, "testk ", 6) == 0 && strcmp(seen + 6, want) == 0, "%s vs %s", seen, want);
  lt__modules_free(m);
}

Test(module, unknown_module) {
  char dir[64];
  make_tmpdir(dir, sizeof dir);
  lt_modules_t *m = registry(dir);
  cr_assert_eq(lt__modules_add_dir(m, LT_TEST_MODULES), LT_OK);
  lt_kernel_fn fn = NULL;
  char err[512];
  cr_assert_eq(lt__modules_resolve(m, "nosuch:inc", &fn, err, sizeof err), LT_ENOMODULE);
  cr_assert_null(fn);
  char want[512];
  snprintf(want, sizeof want, "unknown module 'nosuch' (searched: %s, %s)", dir, LT_TEST_MODULES);
  cr_assert_str_eq(err, want);
  /* a registry without directories says so */
  lt_modules_t *empty = registry(NULL);
  cr_assert_eq(lt__modules_resolve(empty, "testk:inc", &fn, err, sizeof err), LT_ENOMODULE);
  cr_assert(strstr(err, "unknown module 'testk'") != NULL, "%s", err);
  lt__modules_free(empty);
  lt__modules_free(m);
  rm_tmpdir(dir, (const char *const[]){NULL});
}

Test(module, unknown_kernel) {
  lt_modules_t *m = registry(LT_TEST_MODULES);
  lt_kernel_fn fn = NULL;
  char err[512];
  cr_assert_eq(lt__modules_resolve(m, "testk:nosuch", &fn, err, sizeof err), LT_ENOKERNEL);
  cr_assert_null(fn);
  cr_assert_str_eq(err, "unknown kernel 'testk:nosuch' (module 'testk' has no lt_kernel_nosuch)");
  /* static helpers of the module are not kernels */
  cr_assert_eq(lt__modules_resolve(m, "testk:get_i64", &fn, err, sizeof err), LT_ENOKERNEL);
  /* the failure did not spoil the module */
  cr_assert_eq(lt__modules_resolve(m, "testk:inc", &fn, err, sizeof err), LT_OK);
  lt__modules_free(m);
}

Test(module, malformed_names) {
  lt_modules_t *m = registry(LT_TEST_MODULES);
  static const char *const bad[] = {
      "", "testk", "testk:", ":inc", "testk:inc:x", "../modules/testk:inc", "testk:in c", NULL};
  for (const char *const *p = bad; *p != NULL; p++) {
    lt_kernel_fn fn = NULL;
    char err[512] = "";
    cr_assert_eq(lt__modules_resolve(m, *p, &fn, err, sizeof err), LT_EINVAL, "'%s'", *p);
    cr_assert_null(fn);
    cr_assert(strstr(err, "malformed kernel name") != NULL, "%s", err);
  }
  lt_kernel_fn fn = NULL;
  cr_assert_eq(lt__modules_resolve(m, NULL, &fn, NULL, 0), LT_EINVAL);
  lt__modules_free(m);
}

Test(module, add_dir_checks) {
  lt_modules_t *m = registry(NULL);
  cr_assert_eq(lt__modules_add_dir(m, "/nonexistent/lithium/modules"), LT_EINVAL);
  cr_assert_eq(lt__modules_add_dir(m, ""), LT_EINVAL);
  cr_assert_eq(lt__modules_add_dir(m, NULL), LT_EINVAL);
  char file[600];
  snprintf(file, sizeof file, "%s/libtestk.so", LT_TEST_MODULES);
  cr_assert_eq(lt__modules_add_dir(m, file), LT_EINVAL, "a file is not a directory");
  cr_assert_eq(lt__modules_add_dir(m, LT_TEST_MODULES), LT_OK);
  lt__modules_free(m);
}

/* MODULE.so without the lib prefix, directory order, and a module that fails to load. */
Test(module, file_names_order_and_bad_module) {
  char dir[64], src[600], dst[600];
  make_tmpdir(dir, sizeof dir);
  snprintf(src, sizeof src, "%s/libtestk.so", LT_TEST_MODULES);
  snprintf(dst, sizeof dst, "%s/alt.so", dir);
  copy_file(src, dst);
  snprintf(dst, sizeof dst, "%s/libbroken.so", dir);
  write_file(dst, "this is not an ELF file\n", 24);
  /* a broken libtestk.so first in the search order shadows the good one */
  snprintf(dst, sizeof dst, "%s/testk.so", dir);
  write_file(dst, "garbage", 7);

  lt_modules_t *m = registry(dir);
  cr_assert_eq(lt__modules_add_dir(m, LT_TEST_MODULES), LT_OK);
  lt_kernel_fn fn = NULL;
  char err[512];
  cr_assert_eq(lt__modules_resolve(m, "alt:inc", &fn, err, sizeof err), LT_OK, "%s", err);
  cr_assert_eq(run_int(fn, 1), 2);

  cr_assert_eq(lt__modules_resolve(m, "broken:inc", &fn, err, sizeof err), LT_ENOMODULE);
  cr_assert(strstr(err, "cannot load module 'broken'") != NULL, "%s", err);
  cr_assert(strstr(err, "libbroken.so") != NULL, "dlerror's reason names the file: %s", err);

  cr_assert_eq(lt__modules_resolve(m, "testk:inc", &fn, err, sizeof err), LT_ENOMODULE,
               "the first directory with the module wins");
  cr_assert(strstr(err, "cannot load module 'testk'") != NULL, "%s", err);
  lt__modules_free(m);

  /* in the other order, the good libtestk.so is found first */
  m = registry(LT_TEST_MODULES);
  cr_assert_eq(lt__modules_add_dir(m, dir), LT_OK);
  cr_assert_eq(lt__modules_resolve(m, "testk:inc", &fn, err, sizeof err), LT_OK, "%s", err);
  lt__modules_free(m);
  rm_tmpdir(dir, (const char *const[]){"alt.so", "libbroken.so", "testk.so", NULL});
}

typedef struct {
  lt_modules_t *m;
  int failures;
} race_t;

static void *resolve_many(void *arg) {
  race_t *r = arg;
  static const char *const names[] = {"testk:inc", "testk:dbl", "testk:echo", "testk:nosuch"};
  for (int i = 0; i < 400; i++) {
    lt_kernel_fn fn = NULL;
    char err[256];
    int want = (i % 4 == 3) ? LT_ENOKERNEL : LT_OK;
    if (lt__modules_resolve(r->m, names[i % 4], &fn, err, sizeof err) != want) r->failures++;
  }
  return NULL;
}

Test(module, concurrent_resolve) {
  lt_modules_t *m = registry(LT_TEST_MODULES);
  pthread_t t[4];
  race_t r[4];
  for (int i = 0; i < 4; i++) {
    r[i] = (race_t){m, 0};
    cr_assert_eq(pthread_create(&t[i], NULL, resolve_many, &r[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    cr_assert_eq(r[i].failures, 0);
  }
  lt__modules_free(m);
}

#define SHIP_A LT_TEST_SHIP_DIR "/a/libshipk.so"
#define SHIP_B LT_TEST_SHIP_DIR "/b/libshipk.so"

/* Two files with one DT_SONAME (tests/kernels builds shipk twice with -soname libshipk.so,
 * adding 1000 and 2000), opened by path with RTLD_LOCAL: glibc gives two handles, each with
 * its own code and globals. Shipped modules rely on it. */
Test(module, same_soname_two_handles) {
  void *a = NULL, *b = NULL;
  char err[600];
  cr_assert_eq(lt__module_open(SHIP_A, "shipk", &a, err, sizeof err), LT_OK, "%s", err);
  cr_assert_eq(lt__module_open(SHIP_B, "shipk", &b, err, sizeof err), LT_OK, "%s", err);
  cr_assert_neq(a, b, "glibc gave one handle to two files with one DT_SONAME");
  lt_kernel_fn fa = NULL, fb = NULL;
  cr_assert_eq(lt__module_kernel(a, "shipk:tag", &fa, err, sizeof err), LT_OK, "%s", err);
  cr_assert_eq(lt__module_kernel(b, "shipk:tag", &fb, err, sizeof err), LT_OK, "%s", err);
  cr_assert_neq((void *)fa, (void *)fb);
  cr_assert_eq(run_int(fa, 1), 1001);
  cr_assert_eq(run_int(fb, 1), 2001);
  cr_assert_eq(lt__module_kernel(a, "shipk:nope", &fa, err, sizeof err), LT_ENOKERNEL);
  cr_assert_not_null(strstr(err, "lt_kernel_nope"), "%s", err);
  /* Closing one leaves the other working. */
  dlclose(a);
  cr_assert_eq(run_int(fb, 2), 2002);
  dlclose(b);
}
