/* lithium.c: the `lithium` command-line tool: `check` (parse and print the canonical form;
 * with --modules, also load every kernel the way the sequential evaluator does),
 * `graph` (the compiled MDF template as Graphviz DOT), `run` (run.c), `status` (status.c),
 * `up` and `down` (up.c). Options are judged
 * by the evaluator's own table before anything starts, so every command refuses a bad one.
 * Exit status: 0 success, 1 a task or the run failed, 2 bad usage, expression or input. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium.h>
#include "cli.h"
#include "curve.h"
#include "local.h"
#include "options.h"
#include "run.h"
#include "status.h"
#include "up.h"
#include "template.h"

/* Tasks submitted ahead of the one being written, at most (and at most max_pending). */
#define MAX_WINDOW 1024

/* check_options applies LITHIUM_<KEY> and then the command line's options to `o`, the way
 * lt_eval_new and lt_eval_set will. Returns 0 or an exit status after a message. */
static int check_options(const lt_cli_t *cli, lt_options_t *o) {
  int rc = lt__options_from_env(o);
  if (rc != LT_OK) {
    fprintf(stderr, "lithium: %s\n", o->error);
    return rc == LT_EINVAL ? LT_EXIT_USAGE : LT_EXIT_FAILED;
  }
  for (size_t i = 0; i < cli->nopts; i++) {
    rc = lt__options_set(o, cli->opts[i].key, cli->opts[i].value);
    if (rc != LT_OK) {
      fprintf(stderr, "lithium: option %s: %s\n", cli->opts[i].flag, o->error);
      return rc == LT_EINVAL ? LT_EXIT_USAGE : LT_EXIT_FAILED;
    }
  }
  if (lt__options_check(o) != LT_OK) {
    fprintf(stderr, "lithium: %s\n", o->error);
    return LT_EXIT_USAGE;
  }
  return LT_EXIT_OK;
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

/* report_unique writes "lithium: MSG" on stderr unless an earlier kernel had the same
 * message (the kernels of one missing module). */
static void report_unique(char *const *msgs, uint32_t i) {
  for (uint32_t k = 0; k < i; k++)
    if (msgs[k] != NULL && strcmp(msgs[k], msgs[i]) == 0) return;
  fprintf(stderr, "lithium: %s\n", msgs[i]);
}

/* check_kernels loads every module the program names from directory `dir` with the
 * sequential evaluator's loader and reports each kernel or module that is missing. Returns
 * 0, or an exit status after the messages. */
static int check_kernels(const lt_skel_t *s, const char *dir) {
  lt_template_t *t = NULL;
  int rc = lt__template_compile(&t, s, 0);
  if (rc != LT_OK) {
    fprintf(stderr, "lithium: %s\n", lt_strerror(rc));
    return rc == LT_EINVAL ? LT_EXIT_USAGE : LT_EXIT_FAILED;
  }
  uint32_t n = t->nkernels;
  lt_kernel_fn *fns = calloc(n + 1, sizeof *fns);
  int *errs = calloc(n + 1, sizeof *errs);
  char **msgs = calloc(n + 1, sizeof *msgs);
  lt_modules_t *mods = NULL;
  rc = fns && errs && msgs ? lt__local_resolve(&mods, dir, t->kernels, n, fns, errs, msgs)
                           : LT_ENOMEM;
  int status = LT_EXIT_OK;
  if (rc == LT_EINVAL) {
    fprintf(stderr, "lithium: --modules %s: not a readable directory\n", dir);
    status = LT_EXIT_USAGE;
  } else if (rc != LT_OK) {
    fprintf(stderr, "lithium: %s\n", lt_strerror(rc));
    status = LT_EXIT_FAILED;
  } else {
    for (uint32_t i = 0; i < n; i++) {
      if (errs[i] == LT_OK) continue;
      report_unique(msgs, i);
      status = LT_EXIT_USAGE;
    }
  }
  for (uint32_t i = 0; msgs != NULL && i < n; i++)
    free(msgs[i]);
  free(msgs);
  free(errs);
  free(fns);
  lt__modules_free(mods);
  lt__template_free(t);
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

static int cmd_graph(const lt_cli_t *cli, const lt_skel_t *s, int normal_form) {
  lt_template_t *t;
  int rc = lt__template_compile(&t, s, normal_form);
  if (rc != LT_OK) {
    fprintf(stderr, "lithium: %s: %s\n", cli->expr, lt_strerror(rc));
    return rc == LT_EINVAL ? LT_EXIT_USAGE : LT_EXIT_FAILED;
  }
  char *dot = lt__template_dot(t);
  lt__template_free(t);
  if (dot == NULL) {
    fprintf(stderr, "lithium: out of memory\n");
    return LT_EXIT_FAILED;
  }
  fputs(dot, stdout);
  free(dot);
  return finish_stdout();
}

static int dispatch(const lt_cli_t *cli) {
  lt_options_t opts;
  lt__options_init(&opts);
  int status = check_options(cli, &opts);
  lt_skel_t *s = NULL;
  if (status == LT_EXIT_OK) {
    char err[512];
    int rc = lt_skel_parse(cli->expr, &s, err, sizeof err);
    if (rc != LT_OK) {
      fprintf(stderr, "lithium: %s: %s\n", cli->expr, err[0] != '\0' ? err : lt_strerror(rc));
      status = rc == LT_EINVAL ? LT_EXIT_USAGE : LT_EXIT_FAILED;
    }
  }
  if (status == LT_EXIT_OK) {
    switch (cli->cmd) {
    case LT_CMD_CHECK:
      status = cmd_check(cli, s, opts.modules);
      break;
    case LT_CMD_GRAPH:
      status = cmd_graph(cli, s, opts.normal_form);
      break;
    default: {
      size_t window = opts.max_pending < MAX_WINDOW ? opts.max_pending : MAX_WINDOW;
      status = lt__run(cli, s, window);
      s = NULL; /* taken */
      break;
    }
    }
  }
  lt_skel_free(s);
  lt__options_clear(&opts);
  return status;
}

/* keygen writes NAME.key (the key pair, 0600) and NAME.pub for CURVE; never overwrites. */
static int keygen(int argc, char **argv) {
  if (argc != 3 || argv[2][0] == '\0' || argv[2][0] == '-') {
    fputs("usage: lithium keygen NAME   (writes NAME.key, mode 0600, and NAME.pub)\n", stderr);
    return LT_EXIT_USAGE;
  }
  char err[600];
  int rc = lt__curve_keygen(argv[2], err, sizeof err);
  if (rc != LT_OK) {
    fprintf(stderr, "lithium keygen: %s\n", err);
    return rc == LT_EEXIST || rc == LT_EINVAL ? LT_EXIT_USAGE : 1;
  }
  printf("wrote %s.key (secret, mode 0600) and %s.pub\n", argv[2], argv[2]);
  return 0;
}

int main(int argc, char **argv) {
  /* A closed stdout shows up as a write error we report, not as a silent death. */
  signal(SIGPIPE, SIG_IGN);
  if (argc >= 2 && strcmp(argv[1], "keygen") == 0) return keygen(argc, argv);
  /* Commands about servers rather than programs have command lines of their own. */
  if (argc >= 2 && strcmp(argv[1], "status") == 0) return lt__status_main(argc - 1, argv + 1);
  if (argc >= 2 && strcmp(argv[1], "up") == 0) return lt__up_main(argc - 1, argv + 1, 0);
  if (argc >= 2 && strcmp(argv[1], "down") == 0) return lt__up_main(argc - 1, argv + 1, 1);
  lt_cli_t cli;
  int status = lt__cli_parse(&cli, argc, argv, stdout, stderr);
  if (status == LT_CLI_GO) status = dispatch(&cli);
  lt__cli_free(&cli);
  return status;
}
