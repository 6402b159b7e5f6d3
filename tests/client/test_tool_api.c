/* test_tool_api.c: the public functions the `lithium` tool is built on, through the public
 * headers alone: the option table (each option listed once) and option sets (defaults,
 * values as text, messages, the cross check, LITHIUM_* variables), the kernel check of a
 * program against a module directory, hosts files and host strings, CURVE key pair files,
 * and a status query of a server that is not there. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lithium.h>

/* Every option is listed exactly once, with an arg and help, and nothing past the end. */
Test(tool_api, option_iteration_lists_every_option_once) {
  size_t n = lt_option_count();
  cr_assert_gt(n, 10);
  const char **keys = calloc(n, sizeof *keys);
  cr_assert_not_null(keys);
  for (size_t i = 0; i < n; i++) {
    const char *arg = NULL, *help = NULL;
    cr_assert_eq(lt_option_info(i, &keys[i], &arg, NULL, &help), LT_OK);
    cr_expect_not_null(keys[i]);
    cr_expect(arg != NULL && arg[0] != '\0', "option %s has no arg", keys[i]);
    cr_expect(help != NULL && help[0] != '\0', "option %s has no help", keys[i]);
    for (size_t k = 0; k < i; k++)
      cr_expect_neq(strcmp(keys[k], keys[i]), 0, "option %s is listed twice", keys[i]);
  }
  cr_expect_eq(lt_option_info(n, NULL, NULL, NULL, NULL), LT_EINVAL);
  /* Every key of the table is one lt_options_set knows, and its default reads back. */
  lt_options_t *o;
  cr_assert_eq(lt_options_new(&o), LT_OK);
  for (size_t i = 0; i < n; i++) {
    char v[256];
    cr_expect_eq(lt_options_get(o, keys[i], v, sizeof v), LT_OK, "%s", keys[i]);
  }
  lt_options_free(o);
  free(keys);
}

/* Values go in and come back as text, '-' and '_' alike, with lt_eval_set's messages. */
Test(tool_api, option_set_get_and_messages) {
  lt_options_t *o;
  cr_assert_eq(lt_options_new(&o), LT_OK);
  char v[64];
  cr_expect_eq(lt_options_get(o, "normal_form", v, sizeof v), LT_OK);
  cr_expect_str_eq(v, "off");
  cr_expect_eq(lt_options_get(o, "max_pending", v, sizeof v), LT_OK);
  cr_expect_str_eq(v, "1024");
  cr_expect_eq(lt_options_get(o, "placement", v, sizeof v), LT_OK);
  cr_expect_str_eq(v, "eft");
  cr_expect_eq(lt_options_get(o, "modules", v, sizeof v), LT_OK);
  cr_expect_str_eq(v, "");
  cr_expect_eq(lt_options_set(o, "normal-form", "ON"), LT_OK);
  cr_expect_eq(lt_options_set(o, "placement", "rr"), LT_OK);
  cr_expect_eq(lt_options_set(o, "modules", "/tmp/mods"), LT_OK);
  cr_expect_eq(lt_options_set(o, "backup_factor", "2.5"), LT_OK);
  lt_options_get(o, "normal_form", v, sizeof v);
  cr_expect_str_eq(v, "on");
  lt_options_get(o, "placement", v, sizeof v);
  cr_expect_str_eq(v, "rr");
  lt_options_get(o, "modules", v, sizeof v);
  cr_expect_str_eq(v, "/tmp/mods");
  lt_options_get(o, "backup_factor", v, sizeof v);
  cr_expect_str_eq(v, "2.5");
  cr_expect_eq(lt_options_set(o, "nosuch", "1"), LT_EINVAL);
  cr_expect_str_eq(lt_options_error(o), "unknown option 'nosuch'");
  cr_expect_eq(lt_options_set(o, "ordered", "maybe"), LT_EINVAL);
  cr_expect(strstr(lt_options_error(o), "bad value 'maybe' for ordered") != NULL, "%s",
            lt_options_error(o));
  cr_expect_eq(lt_options_get(o, "nosuch", v, sizeof v), LT_EINVAL);
  /* min_threads above the default max_threads passes set and fails the check. */
  cr_expect_eq(lt_options_set(o, "min_threads", "100"), LT_OK);
  cr_expect_eq(lt_options_check(o), LT_EINVAL);
  cr_expect(strstr(lt_options_error(o), "min_threads 100 is above max_threads") != NULL, "%s",
            lt_options_error(o));
  cr_expect_eq(lt_options_set(o, "max_threads", "100"), LT_OK);
  cr_expect_eq(lt_options_check(o), LT_OK);
  lt_options_free(o);
  lt_options_free(NULL);
  cr_expect_str_eq(lt_options_error(NULL), "");
}

/* LITHIUM_<KEY> variables apply; a bad one names the variable. */
Test(tool_api, option_set_from_env) {
  lt_options_t *o;
  cr_assert_eq(lt_options_new(&o), LT_OK);
  setenv("LITHIUM_MAX_PENDING", "7", 1);
  cr_expect_eq(lt_options_from_env(o), LT_OK);
  char v[32];
  lt_options_get(o, "max_pending", v, sizeof v);
  cr_expect_str_eq(v, "7");
  setenv("LITHIUM_MAX_PENDING", "zero", 1);
  cr_expect_eq(lt_options_from_env(o), LT_EINVAL);
  cr_expect(strstr(lt_options_error(o), "LITHIUM_MAX_PENDING") != NULL, "%s", lt_options_error(o));
  unsetenv("LITHIUM_MAX_PENDING");
  lt_options_free(o);
}

typedef struct missing {
  int n;
  char kernel[64];
  int err;
} missing_t;

static void on_missing(void *ud, const char *kernel, int err, const char *msg) {
  missing_t *m = ud;
  m->n++;
  snprintf(m->kernel, sizeof m->kernel, "%s", kernel);
  m->err = err;
  cr_expect(msg != NULL && msg[0] != '\0');
}

/* The kernels that exist pass; one that does not is reported by name. */
Test(tool_api, check_kernels_reports_the_missing_ones) {
  lt_skel_t *s = NULL;
  cr_assert_eq(lt_skel_parse("pipe(testk:echo, farm(testk:nosuch))", &s, NULL, 0), LT_OK);
  missing_t m = {0};
  cr_expect_eq(lt_skel_check_kernels(s, LT_TEST_MODULES, on_missing, &m), 1);
  cr_expect_eq(m.n, 1);
  cr_expect_str_eq(m.kernel, "testk:nosuch");
  cr_expect_eq(m.err, LT_ENOKERNEL);
  lt_skel_free(s);
  cr_assert_eq(lt_skel_parse("map(testk:two, testk:inc, testk:concat)", &s, NULL, 0), LT_OK);
  cr_expect_eq(lt_skel_check_kernels(s, LT_TEST_MODULES, NULL, NULL), 0);
  cr_expect_eq(lt_skel_check_kernels(s, "/nonexistent/modules", NULL, NULL), LT_EINVAL);
  cr_expect_eq(lt_skel_check_kernels(NULL, LT_TEST_MODULES, NULL, NULL), LT_EINVAL);
  lt_skel_free(s);
}

typedef struct seen {
  int n;
  char ep[4][LT_ENDPOINT_MAX + 1];
  int has_key[4];
} seen_t;

static int on_host(void *ud, const char *endpoint, const char *key) {
  seen_t *s = ud;
  if (s->n < 4) {
    snprintf(s->ep[s->n], sizeof s->ep[s->n], "%s", endpoint);
    s->has_key[s->n] = key != NULL;
  }
  s->n++;
  return 0;
}

#define KEY "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"

/* A hosts file is read line by line; host strings split; keys are checked. */
Test(tool_api, hosts_files_and_host_strings) {
  char path[] = "/tmp/lt_hostsXXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  FILE *f = fdopen(fd, "w");
  fprintf(f, "# servers\ntcp://a:1\n\ntcp://b:2 %s  # with a key\n", KEY);
  fclose(f);
  seen_t s = {0};
  char err[256] = "";
  cr_expect_eq(lt_hosts_read(path, on_host, &s, err, sizeof err), LT_OK, "%s", err);
  cr_expect_eq(s.n, 2);
  cr_expect_str_eq(s.ep[0], "tcp://a:1");
  cr_expect_str_eq(s.ep[1], "tcp://b:2");
  cr_expect_eq(s.has_key[0], 0);
  cr_expect_eq(s.has_key[1], 1);
  f = fopen(path, "w");
  fprintf(f, "tcp://a:1\nudp://b:2\n");
  fclose(f);
  cr_expect_eq(lt_hosts_read(path, on_host, &s, err, sizeof err), LT_EINVAL);
  cr_expect(strstr(err, "line 2") != NULL, "%s", err);
  unlink(path);
  cr_expect_eq(lt_hosts_read(path, on_host, &s, err, sizeof err), LT_ENOENT);
  char ep[LT_ENDPOINT_MAX + 1], key[LT_KEY_LEN + 1];
  cr_expect_eq(lt_host_split("tcp://h:9 " KEY, ep, key), LT_OK);
  cr_expect_str_eq(ep, "tcp://h:9");
  cr_expect_str_eq(key, KEY);
  cr_expect_eq(lt_host_split("tcp://h:9", ep, key), LT_OK);
  cr_expect_str_eq(key, "");
  cr_expect_eq(lt_host_split("h:9", ep, key), LT_EINVAL);
  cr_expect_eq(lt_host_split("tcp://h:9 notakey", ep, key), LT_EINVAL);
  cr_expect(lt_key_valid(KEY));
  cr_expect(!lt_key_valid("short"));
  cr_expect(!lt_key_valid(NULL));
}

/* A key pair written is read back; it is never overwritten. */
Test(tool_api, keypair_write_and_read) {
  char dir[] = "/tmp/lt_keysXXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char name[64], kfile[80], pfile[80];
  snprintf(name, sizeof name, "%s/k", dir);
  snprintf(kfile, sizeof kfile, "%s.key", name);
  snprintf(pfile, sizeof pfile, "%s.pub", name);
  char err[600] = "";
  cr_assert_eq(lt_keypair_write(name, err, sizeof err), LT_OK, "%s", err);
  cr_expect_eq(lt_keypair_write(name, err, sizeof err), LT_EEXIST);
  char pub[LT_KEY_LEN + 1], sec[LT_KEY_LEN + 1];
  cr_assert_eq(lt_keypair_read(kfile, pub, sec, err, sizeof err), LT_OK, "%s", err);
  cr_expect(lt_key_valid(pub));
  cr_expect(lt_key_valid(sec));
  cr_expect_eq(lt_keypair_read(pfile, pub, sec, err, sizeof err), LT_EINVAL);
  unlink(kfile);
  unlink(pfile);
  rmdir(dir);
}

/* A server that is not there is an entry that did not answer, asked once however often it
 * is named; the JSON says so. */
Test(tool_api, status_of_an_absent_server) {
  const char *eps[] = {"tcp://127.0.0.1:1", "tcp://127.0.0.1:1"};
  lt_server_status_t *st = NULL;
  size_t n = 0;
  cr_assert_eq(lt_status_query(&st, &n, eps, NULL, 2, NULL, NULL, 200), LT_OK);
  cr_assert_eq(n, 1);
  cr_expect_str_eq(st[0].endpoint, "tcp://127.0.0.1:1");
  cr_expect_eq(st[0].answered, 0);
  cr_expect_str_eq(st[0].error, "no answer");
  char *json = lt_status_json(st, n);
  cr_assert_not_null(json);
  cr_expect_str_eq(json, "[{\"endpoint\":\"tcp://127.0.0.1:1\",\"answered\":false,"
                         "\"error\":\"no answer\"}]");
  free(json);
  lt_status_free(st, n);
  /* A server with a key and no key pair of ours is refused before anything is sent. */
  const char *keys[] = {KEY};
  cr_assert_eq(lt_status_query(&st, &n, eps, keys, 1, "", "", 200), LT_OK);
  cr_expect(strstr(st[0].error, "auth refused") != NULL, "%s", st[0].error);
  lt_status_free(st, n);
  cr_expect_eq(lt_status_query(&st, &n, NULL, NULL, 1, NULL, NULL, 10), LT_EINVAL);
  lt_status_free(NULL, 0);
}
