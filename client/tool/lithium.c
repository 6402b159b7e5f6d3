/* lithium.c: the `lithium` command-line tool: `check` (parse and print the canonical form;
 * with --modules, also load every kernel the way the sequential evaluator does),
 * `graph` (the compiled MDF template as Graphviz DOT), `run` (run.c), `status` (status.c),
 * `up` and `down` (up.c), `top` (top.c: a running evaluation's stats socket), `journal
 * compact` (lt_journal_compact). Options are judged
 * by the evaluator's own table before anything starts, so every command refuses a bad one.
 * Exit status: 0 success, 1 a task or the run failed, 2 bad usage, expression or input. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium.h>
#include "cli.h"
#include "run.h"
#include "status.h"
#include "top.h"
#include "up.h"

/* Tasks submitted ahead of the one being written, at most (and at most max_pending). */
#define MAX_WINDOW 1024

/* check_options applies LITHIUM_<KEY> and then the command line's options to `o`, the way
 * lt_eval_new and lt_eval_set will. Returns 0 or an exit status after a message. */
static int check_options(const lt_cli_t *cli, lt_options_t *o) {
  int rc = lt_options_from_env(o);
  if (rc != LT_OK) {
    fprintf(stderr, "lithium: %s\n", lt_options_error(o));
    return rc == LT_EINVAL ? LT_EXIT_USAGE : LT_EXIT_FAILED;
  }
  for (size_t i = 0; i < cli->nopts; i++) {
    rc = lt_options_set(o, cli->opts[i].key, cli->opts[i].value);
    if (rc != LT_OK) {
      fprintf(stderr, "lithium: option %s: %s\n", cli->opts[i].flag, lt_options_error(o));
      return rc == LT_EINVAL ? LT_EXIT_USAGE : LT_EXIT_FAILED;
    }
  }
  if (lt_options_check(o) != LT_OK) {
    fprintf(stderr, "lithium: %s\n", lt_options_error(o));
    return LT_EXIT_USAGE;
  }
  return LT_EXIT_OK;
}

/* option_value writes the value option `key` holds in `o` as text into buf (len bytes) and
 * returns buf. */
static const char *option_value(lt_options_t *o, const char *key, char *buf, size_t len) {
  if (lt_options_get(o, key, buf, len) != LT_OK) buf[0] = '\0';
  return buf;
}

static int finish_stdout(void) {
  if (fflush(stdout) == 0 && !ferror(stdout)) return LT_EXIT_OK;
  fprintf(stderr, "lithium: stdout: write failed\n");
  return LT_EXIT_FAILED;
}

/* modules_flag tells whether --modules was given on the command line: only then does
 * `check` look for the kernels (LITHIUM_MODULES alone keeps it a syntax check). */
static int modules_flag(const lt_cli_t *cli) {
  for (size_t i = 0; i < cli->nopts; i++)
    if (strcmp(cli->opts[i].key, "modules") == 0) return 1;
  return 0;
}

/* The messages already written by report_unique. */
typedef struct reported {
  char **msgs;
  size_t n;
} reported_t;

/* report_unique writes "lithium: MSG" on stderr unless an earlier kernel had the same
 * message (the kernels of one missing module). */
static void report_unique(void *ud, const char *kernel, int err, const char *msg) {
  reported_t *r = ud;
  (void)kernel;
  (void)err;
  for (size_t k = 0; k < r->n; k++)
    if (strcmp(r->msgs[k], msg) == 0) return;
  fprintf(stderr, "lithium: %s\n", msg);
  char **m = realloc(r->msgs, (r->n + 1) * sizeof *m);
  if (m == NULL) return;
  r->msgs = m;
  if ((m[r->n] = strdup(msg)) != NULL) r->n++;
}

/* check_kernels loads every module the program names from directory `dir` with the
 * sequential evaluator's loader and reports each kernel or module that is missing. Returns
 * 0, or an exit status after the messages. */
static int check_kernels(const lt_skel_t *s, const char *dir) {
  reported_t r = {NULL, 0};
  int rc = lt_skel_check_kernels(s, dir, report_unique, &r);
  int status = rc == 0 ? LT_EXIT_OK : LT_EXIT_USAGE;
  if (rc == LT_EINVAL) {
    fprintf(stderr, "lithium: --modules %s: not a readable directory\n", dir);
  } else if (rc < 0) {
    fprintf(stderr, "lithium: %s\n", lt_strerror(rc));
    status = LT_EXIT_FAILED;
  }
  for (size_t k = 0; k < r.n; k++)
    free(r.msgs[k]);
  free(r.msgs);
  return status;
}

static int cmd_check(const lt_cli_t *cli, const lt_skel_t *s, const char *modules) {
  if (modules_flag(cli)) {
    int status = check_kernels(s, modules);
    if (status != LT_EXIT_OK) return status;
  }
  char *text = lt_skel_format(s);
  if (text == NULL) {
    fprintf(stderr, "lithium: out of memory\n");
    return LT_EXIT_FAILED;
  }
  puts(text);
  free(text);
  return finish_stdout();
}

/* cmd_graph prints the compiled template; a parsed program always compiles, so the one
 * failure left is memory. */
static int cmd_graph(const lt_skel_t *s, int normal_form) {
  char *dot = lt_skel_dot(s, normal_form);
  if (dot == NULL) {
    fprintf(stderr, "lithium: out of memory\n");
    return LT_EXIT_FAILED;
  }
  fputs(dot, stdout);
  free(dot);
  return finish_stdout();
}

static int dispatch(const lt_cli_t *cli) {
  lt_options_t *opts = NULL;
  if (lt_options_new(&opts) != LT_OK) {
    fprintf(stderr, "lithium: out of memory\n");
    return LT_EXIT_FAILED;
  }
  int status = check_options(cli, opts);
  lt_skel_t *s = NULL;
  if (status == LT_EXIT_OK) {
    char err[512];
    int rc = lt_skel_parse(cli->expr, &s, err, sizeof err);
    if (rc != LT_OK) {
      fprintf(stderr, "lithium: %s: %s\n", cli->expr, err[0] != '\0' ? err : lt_strerror(rc));
      status = rc == LT_EINVAL ? LT_EXIT_USAGE : LT_EXIT_FAILED;
    }
  }
  char value[4096]; /* an option's value, as text */
  if (status == LT_EXIT_OK) {
    switch (cli->cmd) {
    case LT_CMD_CHECK:
      status = cmd_check(cli, s, option_value(opts, "modules", value, sizeof value));
      break;
    case LT_CMD_GRAPH:
      status =
          cmd_graph(s, strcmp(option_value(opts, "normal_form", value, sizeof value), "on") == 0);
      break;
    default: {
      size_t max_pending =
          strtoul(option_value(opts, "max_pending", value, sizeof value), NULL, 10);
      size_t window = max_pending < MAX_WINDOW ? max_pending : MAX_WINDOW;
      status = lt__run(cli, s, window);
      s = NULL; /* taken */
      break;
    }
    }
  }
  lt_skel_free(s);
  lt_options_free(opts);
  return status;
}

/* keygen writes NAME.key (the key pair, 0600) and NAME.pub for CURVE; never overwrites. */
static int keygen(int argc, char **argv) {
  if (argc != 3 || argv[2][0] == '\0' || argv[2][0] == '-') {
    fputs("usage: lithium keygen NAME   (writes NAME.key, mode 0600, and NAME.pub)\n", stderr);
    return LT_EXIT_USAGE;
  }
  char err[600];
  int rc = lt_keypair_write(argv[2], err, sizeof err);
  if (rc != LT_OK) {
    fprintf(stderr, "lithium keygen: %s\n", err);
    return rc == LT_EEXIST || rc == LT_EINVAL ? LT_EXIT_USAGE : 1;
  }
  printf("wrote %s.key (secret, mode 0600) and %s.pub\n", argv[2], argv[2]);
  return 0;
}

/* journal runs `lithium journal compact FILE`: the journal rewritten without a torn tail,
 * damaged records and duplicates (lt_journal_compact), and what was dropped. */
static int journal(int argc, char **argv) {
  if (argc != 4 || strcmp(argv[2], "compact") != 0 || argv[3][0] == '\0') {
    fputs("usage: lithium journal compact FILE\n", stderr);
    return LT_EXIT_USAGE;
  }
  char err[600];
  lt_journal_stats_t st;
  int rc = lt_journal_compact(argv[3], &st, err, sizeof err);
  if (rc != LT_OK) {
    fprintf(stderr, "lithium journal: %s\n", err);
    return rc == LT_EINVAL || rc == LT_ENOENT ? LT_EXIT_USAGE : LT_EXIT_FAILED;
  }
  printf("%s: %llu records kept; dropped %llu duplicates, %llu damaged, a torn tail of %llu "
         "bytes; %llu -> %llu bytes\n",
         argv[3], (unsigned long long)st.records, (unsigned long long)st.duplicates,
         (unsigned long long)st.damaged, (unsigned long long)st.torn_bytes,
         (unsigned long long)st.bytes_before, (unsigned long long)st.bytes_after);
  return finish_stdout();
}

int main(int argc, char **argv) {
  /* A closed stdout shows up as a write error we report, not as a silent death. */
  signal(SIGPIPE, SIG_IGN);
  if (argc >= 2 && strcmp(argv[1], "keygen") == 0) return keygen(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "journal") == 0) return journal(argc, argv);
  /* Commands about servers rather than programs have command lines of their own. */
  if (argc >= 2 && strcmp(argv[1], "status") == 0) return lt__status_main(argc - 1, argv + 1);
  if (argc >= 2 && strcmp(argv[1], "top") == 0) return lt__top_main(argc - 1, argv + 1);
  if (argc >= 2 && strcmp(argv[1], "up") == 0) return lt__up_main(argc - 1, argv + 1, 0);
  if (argc >= 2 && strcmp(argv[1], "down") == 0) return lt__up_main(argc - 1, argv + 1, 1);
  lt_cli_t cli;
  int status = lt__cli_parse(&cli, argc, argv, stdout, stderr);
  if (status == LT_CLI_GO) status = dispatch(&cli);
  lt__cli_free(&cli);
  return status;
}
