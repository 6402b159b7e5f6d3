/* cli.c: the `lithium` tool's command line (cli.h). Flags may come anywhere, before or after
 * the command; `--` ends them. A long flag the tool does not know is an evaluator option
 * whose value is judged later by the options table, so the keys stay those of lt_eval_set.
 * Main thread only. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lithium.h>

#ifndef LT_VERSION
#define LT_VERSION "0.0.0"
#endif

/* run_flag_name returns the canonical spelling of one of the tool's own flags (all of them
 * belong to `run`), or NULL when `name` (length `len`) is an evaluator option. */
static const char *run_flag_name(const char *name, size_t len) {
  static const char *const flags[] = {"--out",   "--hosts", "--hosts-file", "--servers",
                                      "--local", "--stats", "--sep",        "--lines"};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
    if (strlen(flags[i]) == len + 2 && strncmp(flags[i] + 2, name, len) == 0) return flags[i];
  return NULL;
}

/* print_wrapped writes the words of `text` from column `indent` on (where the cursor is),
 * breaking lines before column HELP_WIDTH and indenting the next ones to `indent`. */
#define HELP_WIDTH 92
static void print_wrapped(FILE *f, const char *text, int indent) {
  int col = indent;
  for (text += strspn(text, " "); *text != '\0'; text += strspn(text, " ")) {
    int n = (int)strcspn(text, " ");
    if (col > indent && col + 1 + n > HELP_WIDTH) {
      fprintf(f, "\n%*s", indent, "");
      col = indent;
    } else if (col > indent) {
      fputc(' ', f);
      col++;
    }
    col += fprintf(f, "%.*s", n, text);
    text += n;
  }
  fputc('\n', f);
}

/* options_help writes every evaluator option of the table but those whose flag the tool
 * takes for itself (`hosts`: --hosts-file above). */
static void options_help(FILE *f) {
  enum { TEXT_COL = 31 };
  const char *key, *arg, *def, *help;
  for (size_t i = 0; lt_option_info(i, &key, &arg, &def, &help) == LT_OK; i++) {
    if (run_flag_name(key, strlen(key)) != NULL) continue;
    char text[256];
    int len = snprintf(text, sizeof text, "      --%s %s", key, arg);
    fprintf(f, "%s%*s", text, len < TEXT_COL ? TEXT_COL - len : 1, "");
    snprintf(text, sizeof text, "%s%s%s%s", help, def != NULL ? " (default " : "",
             def != NULL ? def : "", def != NULL ? ")" : "");
    print_wrapped(f, text, len < TEXT_COL ? TEXT_COL : len + 1);
  }
}

void lt__cli_usage(FILE *f) {
  fputs("usage: lithium run EXPR FILE... [options]\n"
        "       lithium graph EXPR [--normal_form on]\n"
        "       lithium check EXPR [--modules DIR]\n"
        "       lithium keygen NAME\n"
        "       lithium journal compact FILE\n"
        "       lithium status [--hosts FILE|DIR] [ENDPOINT...] [--json]  (see status --help)\n"
        "       lithium up HOSTS [--key F] [--allow F] [--modules DIR] [--port P]  (up --help)\n"
        "       lithium down HOSTS                 (ssh launch; see up --help)\n"
        "       lithium top [--once [--json]] SOCKET  (a running evaluation; see top --help)\n"
        "commands:\n"
        "  run      run every FILE through the skeleton program EXPR, one task per file\n"
        "           (- reads stdin as one task); results go to stdout in input order;\n"
        "           a program ending in reduce(...) prints one result, of all the files\n"
        "  graph    print the compiled MDF template of EXPR as a Graphviz digraph\n"
        "  check    parse EXPR and print its canonical form; with --modules DIR, first check\n"
        "           that every kernel it names exists in a module of DIR\n"
        "  keygen   write a CURVE key pair: NAME.key (secret, mode 0600) and NAME.pub;\n"
        "           never overwrites\n"
        "  journal compact  rewrite the results journal FILE (--journal) without a torn\n"
        "           tail, damaged records and duplicates (atomically: a new file renamed)\n"
        "options of run:\n"
        "  -o, --out DIR        write each result to DIR/<base name of its input> (stdin:\n"
        "                       DIR/stdin); DIR is created; a failed task writes nothing\n"
        "      --hosts EP,...   use running servers (tcp://host:port, each optionally\n"
        "                       followed by a space and the server's Z85 public key)\n"
        "      --hosts-file F   use the servers of hosts file F (one `ENDPOINT [KEY]` a\n"
        "                       line), or every server announced in directory F\n"
        "      --servers N      start N local lithium-server processes (default 2)\n"
        "      --local          no servers: the sequential evaluator, in this process\n"
        "      --stats          print the run's statistics as JSON on stderr at the end\n"
        "      --sep TEXT       without --out: write TEXT after each result on stdout\n"
        "                       (default none; \\n, \\t, \\0 and \\\\ are understood)\n"
        "      --lines          without --out: one result a line (--sep '\\n')\n"
        "  -h, --help           show this help\n"
        "  -V, --version        show the version\n"
        "evaluator options (lt_eval_set keys, also LITHIUM_<KEY> in the environment; --KEY VALUE\n"
        "or --KEY=VALUE; '-' and '_' alike in KEY; booleans on/off, true/false, yes/no, 1/0):\n",
        f);
  options_help(f);
  fputs("EXPR: seq(m:f) or m:f, seq(m:f, \"param\"), farm(S), pipe(S, ...), map(m:split, S,\n"
        "m:merge), dc(m:cond, m:divide, S, m:combine).\n"
        "Exit status: 0 success, 1 a task or the run failed, 2 bad usage, expression or input.\n",
        f);
}

__attribute__((format(printf, 2, 3))) static int usage_error(FILE *err, const char *fmt, ...) {
  fputs("lithium: ", err);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(err, fmt, ap);
  va_end(ap);
  fputc('\n', err);
  lt__cli_usage(err);
  return LT_EXIT_USAGE;
}

static int parse_servers(const char *s, int *out) {
  if (s[0] < '0' || s[0] > '9') return -1;
  errno = 0;
  char *end;
  long n = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || n < 1 || n > 256) return -1;
  *out = (int)n;
  return 0;
}

/* add_hosts appends the comma-separated endpoints of `list`; -1 on an empty one or no
 * memory. */
static int add_hosts(lt_cli_t *cli, const char *list) {
  for (;;) {
    size_t n = strcspn(list, ",");
    if (n == 0) return -1;
    char **h = realloc(cli->hosts, (cli->nhosts + 1) * sizeof *h);
    if (h == NULL) return -1;
    cli->hosts = h;
    if ((h[cli->nhosts] = strndup(list, n)) == NULL) return -1;
    cli->nhosts++;
    if (list[n] == '\0') return 0;
    list += n + 1;
  }
}

/* add_option records `--name[=value]` (name of length `len`) as an evaluator option. */
static int add_option(lt_cli_t *cli, const char *arg, size_t len, const char *value) {
  lt_cli_opt_t *o = realloc(cli->opts, (cli->nopts + 1) * sizeof *o);
  if (o == NULL) return -1;
  cli->opts = o;
  o = &o[cli->nopts];
  o->flag = strndup(arg, len + 2);
  o->key = strndup(arg + 2, len);
  o->value = value;
  if (o->flag == NULL || o->key == NULL) {
    free(o->flag);
    free(o->key);
    return -1;
  }
  for (char *k = o->key; *k != '\0'; k++)
    if (*k == '-') *k = '_';
  cli->nopts++;
  return 0;
}

/* set_sep decodes the separator `text` (\n, \t, \0 and \\; no other escape) into
 * cli->sep. Returns 0, or -1 with the problem in `why`. */
static int set_sep(lt_cli_t *cli, const char *text, const char **why) {
  char *sep = malloc(strlen(text) + 1);
  if (sep == NULL) {
    *why = "out of memory";
    return -1;
  }
  size_t n = 0;
  for (const char *p = text; *p != '\0'; p++) {
    if (*p != '\\') {
      sep[n++] = *p;
      continue;
    }
    static const char from[] = "nt0\\", to[] = "\n\t\0\\";
    const char *e = p[1] != '\0' ? strchr(from, p[1]) : NULL;
    if (e == NULL) {
      free(sep);
      *why = "unknown escape (expected \\n, \\t, \\0 or \\\\)";
      return -1;
    }
    sep[n++] = to[e - from];
    p++;
  }
  free(cli->sep);
  cli->sep = sep;
  cli->seplen = n;
  return 0;
}

static int set_command(lt_cli_t *cli, const char *word, FILE *err) {
  if (strcmp(word, "run") == 0)
    cli->cmd = LT_CMD_RUN;
  else if (strcmp(word, "graph") == 0)
    cli->cmd = LT_CMD_GRAPH;
  else if (strcmp(word, "check") == 0)
    cli->cmd = LT_CMD_CHECK;
  else
    return usage_error(err, "unknown command '%s'", word);
  return LT_CLI_GO;
}

/* check_positionals checks the count of positional arguments against the command. */
static int check_positionals(const lt_cli_t *cli, size_t npos, const char *run_flag, FILE *err) {
  if (cli->cmd == LT_CMD_RUN) {
    if (npos < 3) return usage_error(err, "run needs EXPR and at least one FILE");
    int stdin_seen = 0;
    for (size_t i = 0; i < cli->nfiles; i++) {
      if (strcmp(cli->files[i], "-") != 0) continue;
      if (stdin_seen++) return usage_error(err, "- (stdin) can be given only once");
    }
    if (cli->local && (cli->nhosts > 0 || cli->servers > 0 || cli->hosts_file != NULL))
      return usage_error(err, "--local excludes --hosts, --hosts-file and --servers");
    if (cli->sep != NULL && cli->out_dir != NULL)
      return usage_error(err, "--sep and --lines apply to results on stdout, not to --out");
    return LT_CLI_GO;
  }
  const char *name = cli->cmd == LT_CMD_GRAPH ? "graph" : "check";
  if (npos != 2) return usage_error(err, "%s takes exactly one EXPR", name);
  if (run_flag != NULL) return usage_error(err, "%s applies to run only", run_flag);
  return LT_CLI_GO;
}

int lt__cli_parse(lt_cli_t *cli, int argc, char **argv, FILE *out, FILE *err) {
  memset(cli, 0, sizeof *cli);
  const char **pos = calloc((size_t)argc + 1, sizeof *pos);
  if (pos == NULL) return usage_error(err, "out of memory");
  cli->files = pos; /* positionals first; the files are their tail */
  size_t npos = 0;
  const char *run_flag = NULL; /* the first flag that only `run` takes */
  int flags_done = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (flags_done || a[0] != '-' || strcmp(a, "-") == 0) {
      pos[npos++] = a;
      continue;
    }
    if (strcmp(a, "--") == 0) {
      flags_done = 1;
      continue;
    }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      lt__cli_usage(out);
      return LT_EXIT_OK;
    }
    if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
      fprintf(out, "lithium %s\n", LT_VERSION);
      return LT_EXIT_OK;
    }
    /* Split "--name=value" / "--name value" / "-o value". */
    const char *name, *value = NULL;
    size_t len;
    if (strcmp(a, "-o") == 0) {
      name = "out";
      len = 3;
      a = "--out";
    } else if (a[1] == '-') {
      name = a + 2;
      const char *eq = strchr(name, '=');
      len = eq != NULL ? (size_t)(eq - name) : strlen(name);
      if (eq != NULL) value = eq + 1;
    } else {
      return usage_error(err, "unknown flag %s", a);
    }
    if (len == 0) return usage_error(err, "bad flag %s", a);
    const char *run_name = run_flag_name(name, len);
    int is_switch =
        run_name != NULL && (strcmp(run_name, "--local") == 0 || strcmp(run_name, "--stats") == 0 ||
                             strcmp(run_name, "--lines") == 0);
    if (is_switch && value != NULL) return usage_error(err, "%s takes no value", run_name);
    if (!is_switch && value == NULL) {
      if (i + 1 >= argc) return usage_error(err, "option %.*s: missing value", (int)len + 2, a);
      value = argv[++i];
    }
    if (run_name == NULL) {
      if (add_option(cli, a, len, value) != 0) return usage_error(err, "out of memory");
      continue;
    }
    if (run_flag == NULL) run_flag = run_name;
    if (strcmp(run_name, "--out") == 0) {
      if (value[0] == '\0') return usage_error(err, "--out: empty directory name");
      cli->out_dir = value;
    } else if (strcmp(run_name, "--hosts") == 0) {
      if (add_hosts(cli, value) != 0) return usage_error(err, "--hosts: bad list '%s'", value);
    } else if (strcmp(run_name, "--hosts-file") == 0) {
      if (value[0] == '\0') return usage_error(err, "--hosts-file: empty file name");
      cli->hosts_file = value;
    } else if (strcmp(run_name, "--servers") == 0) {
      if (parse_servers(value, &cli->servers) != 0)
        return usage_error(err, "--servers: expected 1..256, got '%s'", value);
    } else if (strcmp(run_name, "--local") == 0) {
      cli->local = 1;
    } else if (strcmp(run_name, "--sep") == 0 || strcmp(run_name, "--lines") == 0) {
      const char *why = NULL, *text = run_name[2] == 's' ? value : "\\n";
      if (cli->sep != NULL) return usage_error(err, "--sep and --lines: give one, once");
      if (set_sep(cli, text, &why) != 0) return usage_error(err, "--sep '%s': %s", text, why);
    } else {
      cli->stats = 1;
    }
  }
  if (npos == 0) return usage_error(err, "no command");
  int rc = set_command(cli, pos[0], err);
  if (rc != LT_CLI_GO) return rc;
  if (npos >= 2) cli->expr = pos[1];
  cli->files = pos + (npos >= 2 ? 2 : npos);
  cli->nfiles = npos >= 2 ? npos - 2 : 0;
  /* Keep the allocation's start reachable for lt__cli_free. */
  memmove(pos, cli->files, cli->nfiles * sizeof *pos);
  cli->files = pos;
  return check_positionals(cli, npos, run_flag, err);
}

void lt__cli_free(lt_cli_t *cli) {
  free(cli->files);
  free(cli->sep);
  for (size_t i = 0; i < cli->nhosts; i++)
    free(cli->hosts[i]);
  free(cli->hosts);
  for (size_t i = 0; i < cli->nopts; i++) {
    free(cli->opts[i].flag);
    free(cli->opts[i].key);
  }
  free(cli->opts);
  memset(cli, 0, sizeof *cli);
}

int64_t lt__cli_clock_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
