/* test_args.c: lithium-server's flag parsing: defaults, every flag, --help/--version, and
 * every kind of bad flag or value taking the exit-2 path with the usage on the error
 * stream. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lithium/error.h>
#include "args.h"
#include "bufpool.h"
#include "log.h"

typedef struct streams {
  FILE *out, *err;
  char *obuf, *ebuf;
  size_t olen, elen;
} streams_t;

static int parse(lt_srv_args_t *a, streams_t *s, const char *const *argv) {
  int argc = 0;
  while (argv[argc] != NULL)
    argc++;
  s->out = open_memstream(&s->obuf, &s->olen);
  s->err = open_memstream(&s->ebuf, &s->elen);
  /* getopt may permute argv: give it a copy. */
  char **copy = calloc((size_t)argc + 1, sizeof *copy);
  for (int i = 0; i < argc; i++)
    copy[i] = (char *)argv[i];
  int rc = lt__args_parse(a, argc, copy, s->out, s->err);
  fclose(s->out);
  fclose(s->err);
  free(copy);
  return rc;
}

static void streams_free(streams_t *s) {
  free(s->obuf);
  free(s->ebuf);
}

Test(args, defaults) {
  lt_srv_args_t a;
  streams_t s = {0};
  const char *argv[] = {"lithium-server", NULL};
  cr_assert_eq(parse(&a, &s, argv), LT_ARGS_RUN);
  cr_assert_str_eq(a.listen, "tcp://127.0.0.1:5555");
  cr_assert_geq(a.threads, 3);
  cr_assert_eq(a.threads % 3, 0);
  cr_assert_eq(a.nmodules, 0);
  cr_assert_null(a.name);
  cr_assert_eq(a.log_level, -1);
  cr_assert_eq(a.max_frame, (uint64_t)1 << 30);
  cr_assert_eq(a.idle_ms, 60000);
  cr_assert_eq(a.fetch_ms, 30000);
  cr_assert_eq(a.max_peers, 256);
  cr_assert_float_eq(a.slowdown, 1.0, 1e-9);
  cr_assert_eq(s.olen, 0);
  cr_assert_eq(s.elen, 0);
  lt__args_free(&a);
  streams_free(&s);
}

Test(args, every_flag) {
  lt_srv_args_t a;
  streams_t s = {0};
  const char *argv[] = {"lithium-server",
                        "--listen",
                        "tcp://127.0.0.1:0",
                        "--threads",
                        "7",
                        "--modules",
                        "/tmp/a",
                        "-m",
                        "/tmp/b",
                        "--name",
                        "node-1 (östra)",
                        "--log-level",
                        "debug",
                        "--max-frame",
                        "64k",
                        "--idle-timeout",
                        "0",
                        "--fetch-timeout",
                        "750",
                        "--max-peers",
                        "3",
                        "--slowdown",
                        "2.5",
                        NULL};
  cr_assert_eq(parse(&a, &s, argv), LT_ARGS_RUN, "%s", s.ebuf);
  cr_assert_str_eq(a.listen, "tcp://127.0.0.1:0");
  cr_assert_eq(a.threads, 7);
  cr_assert_eq(a.nmodules, 2);
  cr_assert_str_eq(a.modules[0], "/tmp/a");
  cr_assert_str_eq(a.modules[1], "/tmp/b");
  cr_assert_str_eq(a.name, "node-1 (östra)");
  cr_assert_eq(a.log_level, LT_LOG_DEBUG);
  cr_assert_eq(a.max_frame, 65536);
  cr_assert_eq(a.idle_ms, 0);
  cr_assert_eq(a.fetch_ms, 750);
  cr_assert_eq(a.max_peers, 3);
  cr_assert_float_eq(a.slowdown, 2.5, 1e-9);
  lt__args_free(&a);
  streams_free(&s);
}

Test(args, short_flags_and_equals) {
  lt_srv_args_t a;
  streams_t s = {0};
  const char *argv[] = {"lithium-server", "-l", "ipc:///tmp/x", "-t3", "--name=abc",
                        "--max-frame=2M", NULL};
  cr_assert_eq(parse(&a, &s, argv), LT_ARGS_RUN, "%s", s.ebuf);
  cr_assert_str_eq(a.listen, "ipc:///tmp/x");
  cr_assert_eq(a.threads, 3);
  cr_assert_str_eq(a.name, "abc");
  cr_assert_eq(a.max_frame, 2u << 20);
  lt__args_free(&a);
  streams_free(&s);
}

Test(args, help_and_version) {
  lt_srv_args_t a;
  streams_t s = {0};
  const char *help[] = {"lithium-server", "--threads", "2", "--help", NULL};
  cr_assert_eq(parse(&a, &s, help), LT_ARGS_EXIT_OK);
  cr_assert_not_null(strstr(s.obuf, "usage: lithium-server"));
  cr_assert_not_null(strstr(s.obuf, "--idle-timeout"));
  cr_assert_not_null(strstr(s.obuf, "--fetch-timeout"));
  cr_assert_eq(s.elen, 0);
  lt__args_free(&a);
  streams_free(&s);

  memset(&s, 0, sizeof s);
  const char *version[] = {"lithium-server", "-V", NULL};
  cr_assert_eq(parse(&a, &s, version), LT_ARGS_EXIT_OK);
  cr_assert_not_null(strstr(s.obuf, "lithium-server "));
  lt__args_free(&a);
  streams_free(&s);
}

/* Every bad command line takes the exit-2 path, names the problem and prints the usage. */
Test(args, announce_and_advertise) {
  lt_srv_args_t a;
  streams_t s = {0};
  const char *none[] = {"lithium-server", NULL};
  cr_assert_eq(parse(&a, &s, none), LT_ARGS_RUN);
  cr_assert_null(a.announce);
  cr_assert_null(a.advertise);
  lt__args_free(&a);
  streams_free(&s);
  memset(&s, 0, sizeof s);
  const char *argv[] = {"lithium-server", "--announce", "/shared/run1",
                        "--advertise",    "node7",      NULL};
  cr_assert_eq(parse(&a, &s, argv), LT_ARGS_RUN);
  cr_assert_str_eq(a.announce, "/shared/run1");
  cr_assert_str_eq(a.advertise, "node7");
  cr_assert_null(a.accept_modules);
  lt__args_free(&a);
  streams_free(&s);
}

/* --accept-modules is off by default and takes the store's directory. */
Test(args, accept_modules) {
  lt_srv_args_t a;
  streams_t s = {0};
  const char *argv[] = {"lithium-server", "--accept-modules", "/var/lib/lithium/shipped", NULL};
  cr_assert_eq(parse(&a, &s, argv), LT_ARGS_RUN);
  cr_assert_str_eq(a.accept_modules, "/var/lib/lithium/shipped");
  lt__args_free(&a);
  streams_free(&s);
  memset(&s, 0, sizeof s);
  const char *help[] = {"lithium-server", "--help", NULL};
  cr_assert_eq(parse(&a, &s, help), LT_ARGS_EXIT_OK);
  cr_assert_not_null(strstr(s.obuf, "--accept-modules DIR"));
  lt__args_free(&a);
  streams_free(&s);
}

Test(args, bad_flags_exit_2) {
  static const char *const bad[][4] = {
      {"--bogus", NULL},
      {"-x", NULL},
      {"--threads", "0", NULL},
      {"--threads", "abc", NULL},
      {"--threads", "5000", NULL},
      {"--threads", "-3", NULL},
      {"--threads", "4x", NULL},
      {"--max-frame", "0", NULL},
      {"--max-frame", "12q", NULL},
      {"--max-frame", "99999999999999999999", NULL},
      {"--max-frame", "2048g", NULL},
      {"--idle-timeout", "-1", NULL},
      {"--idle-timeout", "", NULL},
      {"--fetch-timeout", "0", NULL},
      {"--fetch-timeout", "9", NULL},
      {"--fetch-timeout", "1s", NULL},
      {"--max-peers", "0", NULL},
      {"--max-peers", "4097", NULL},
      {"--log-level", "loud", NULL},
      {"--slowdown", "0.5", NULL},
      {"--slowdown", "nan", NULL},
      {"--name", "", NULL},
      {"--name", "tab\there", NULL},
      {"--name", "\xff\xfe", NULL},
      {"--listen", "", NULL},
      {"--listen", "no-scheme", NULL},
      {"--modules", "", NULL},
      {"--announce", "", NULL},
      {"--accept-modules", "", NULL},
      {"--advertise", "", NULL},
      {"--advertise", "two words", NULL},
      {"--advertise", "ipc:///tmp/x", NULL},
      {"--listen", NULL},
      {"--threads", NULL},
      {"extra-positional", NULL},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *argv[6] = {"lithium-server"};
    for (size_t j = 0; bad[i][j] != NULL; j++)
      argv[j + 1] = bad[i][j];
    lt_srv_args_t a;
    streams_t s = {0};
    int rc = parse(&a, &s, argv);
    cr_assert_eq(rc, LT_ARGS_EXIT_USAGE, "case %zu (%s) gave %d", i, bad[i][0], rc);
    cr_assert_eq(rc, 2);
    cr_assert_not_null(strstr(s.ebuf, "lithium-server: "), "case %zu: %s", i, s.ebuf);
    cr_assert_not_null(strstr(s.ebuf, "usage: lithium-server"), "case %zu", i);
    cr_assert_eq(s.olen, 0, "case %zu printed on stdout", i);
    lt__args_free(&a);
    streams_free(&s);
  }
}

Test(args, messages_name_the_problem) {
  lt_srv_args_t a;
  streams_t s = {0};
  const char *argv[] = {"lithium-server", "--threads", "zero", NULL};
  cr_assert_eq(parse(&a, &s, argv), 2);
  cr_assert_not_null(strstr(s.ebuf, "--threads 'zero'"), "%s", s.ebuf);
  lt__args_free(&a);
  streams_free(&s);

  memset(&s, 0, sizeof s);
  const char *argv2[] = {"lithium-server", "--frobnicate", NULL};
  cr_assert_eq(parse(&a, &s, argv2), 2);
  cr_assert_not_null(strstr(s.ebuf, "--frobnicate"), "%s", s.ebuf);
  lt__args_free(&a);
  streams_free(&s);
}

Test(args, parse_size) {
  uint64_t v;
  cr_assert_eq(lt__args_parse_size("1", &v), LT_OK);
  cr_assert_eq(v, 1);
  cr_assert_eq(lt__args_parse_size("3k", &v), LT_OK);
  cr_assert_eq(v, 3072);
  cr_assert_eq(lt__args_parse_size("5M", &v), LT_OK);
  cr_assert_eq(v, 5u << 20);
  cr_assert_eq(lt__args_parse_size("1g", &v), LT_OK);
  cr_assert_eq(v, 1u << 30);
  cr_assert_eq(lt__args_parse_size("1024g", &v), LT_OK);
  cr_assert_eq(v, (uint64_t)1 << 40);
  cr_assert_eq(lt__args_parse_size("1025g", &v), LT_EINVAL);
  cr_assert_eq(lt__args_parse_size("0", &v), LT_EINVAL);
  cr_assert_eq(lt__args_parse_size("k", &v), LT_EINVAL);
  cr_assert_eq(lt__args_parse_size("1kb", &v), LT_EINVAL);
  cr_assert_eq(lt__args_parse_size(" 1", &v), LT_EINVAL);
  cr_assert_eq(lt__args_parse_size(NULL, &v), LT_EINVAL);
}

/* getopt keeps global state: a second parse must start afresh. */
Test(args, parse_twice) {
  for (int k = 0; k < 2; k++) {
    lt_srv_args_t a;
    streams_t s = {0};
    const char *argv[] = {"lithium-server", "--threads", "4", "-m", "/x", NULL};
    cr_assert_eq(parse(&a, &s, argv), LT_ARGS_RUN);
    cr_assert_eq(a.threads, 4);
    cr_assert_eq(a.nmodules, 1);
    lt__args_free(&a);
    streams_free(&s);
  }
}

Test(args, containment_flags) {
  lt_srv_args_t a;
  streams_t s = {0};
  const char *dflt[] = {"lithium-server", NULL};
  cr_assert_eq(parse(&a, &s, dflt), LT_ARGS_RUN);
  cr_assert(!a.no_supervise);
  cr_assert_eq(a.max_session_bytes, (uint64_t)1 << 30);
  cr_assert_eq(a.max_parked, 100000);
  cr_assert_eq(a.max_queued, 100000);
  cr_assert_eq(a.max_values, 1000000);
  cr_assert_eq(a.max_fetches, 100000);
  cr_assert_eq(a.max_sessions, 0, "0: derived from the open-file limit at start");
  cr_assert_eq(a.max_bytes, 0, "0: half the physical memory, at start");
  cr_assert_eq(a.max_total_values, 4000000);
  lt__args_free(&a);
  streams_free(&s);
  const char *argv[] = {"lithium-server",
                        "--no-supervise",
                        "--max-session-bytes",
                        "64m",
                        "--max-parked",
                        "10",
                        "--max-queued",
                        "20",
                        "--max-sessions",
                        "30",
                        "--max-session-values",
                        "40",
                        "--max-session-fetches",
                        "50",
                        "--max-bytes",
                        "2g",
                        "--max-values",
                        "60",
                        NULL};
  cr_assert_eq(parse(&a, &s, argv), LT_ARGS_RUN);
  cr_assert(a.no_supervise);
  cr_assert_eq(a.max_session_bytes, (uint64_t)64 << 20);
  cr_assert_eq(a.max_parked, 10);
  cr_assert_eq(a.max_queued, 20);
  cr_assert_eq(a.max_sessions, 30);
  cr_assert_eq(a.max_values, 40);
  cr_assert_eq(a.max_fetches, 50);
  cr_assert_eq(a.max_bytes, (uint64_t)2 << 30);
  cr_assert_eq(a.max_total_values, 60);
  lt__args_free(&a);
  streams_free(&s);
  const char *bad[] = {"lithium-server", "--max-parked", "0", NULL};
  cr_assert_eq(parse(&a, &s, bad), LT_ARGS_EXIT_USAGE);
  cr_assert(strstr(s.ebuf, "bad count '0'") != NULL, "%s", s.ebuf);
  lt__args_free(&a);
  streams_free(&s);
}

/* --pool-bytes bounds the idle output buffers kept mapped (bufpool.h); 0 turns the pool off. */
Test(args, pool_bytes) {
  lt_srv_args_t a;
  streams_t s = {0};
  const char *dflt[] = {"lithium-server", NULL};
  cr_assert_eq(parse(&a, &s, dflt), LT_ARGS_RUN);
  cr_assert_eq(a.pool_bytes, LT_BUFPOOL_DEFAULT_MAX);
  lt__args_free(&a);
  streams_free(&s);
  const char *set[] = {"lithium-server", "--pool-bytes", "64m", NULL};
  cr_assert_eq(parse(&a, &s, set), LT_ARGS_RUN, "%s", s.ebuf);
  cr_assert_eq(a.pool_bytes, (uint64_t)64 << 20);
  lt__args_free(&a);
  streams_free(&s);
  const char *off[] = {"lithium-server", "--pool-bytes", "0", NULL};
  cr_assert_eq(parse(&a, &s, off), LT_ARGS_RUN, "%s", s.ebuf);
  cr_assert_eq(a.pool_bytes, 0);
  lt__args_free(&a);
  streams_free(&s);
  const char *bad[] = {"lithium-server", "--pool-bytes", "lots", NULL};
  cr_assert_eq(parse(&a, &s, bad), LT_ARGS_EXIT_USAGE);
  cr_assert(strstr(s.ebuf, "bad --pool-bytes 'lots'") != NULL, "%s", s.ebuf);
  lt__args_free(&a);
  streams_free(&s);
}
