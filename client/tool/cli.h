/* cli.h: the command line of the `lithium` tool: the command, its positional arguments, the
 * tool's own flags and the evaluator options (`--key value`, handed to lt_eval_set). Parsing
 * only; no file is opened and no option value is judged here. Main thread only. */
#ifndef LT_CLI_H
#define LT_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses of the tool. */
enum { LT_EXIT_OK = 0, LT_EXIT_FAILED = 1, LT_EXIT_USAGE = 2 };

/* lt__cli_parse's answer when the command should run (anything else is an exit status). */
#define LT_CLI_GO (-1)

typedef enum lt_cmd { LT_CMD_NONE = 0, LT_CMD_RUN, LT_CMD_GRAPH, LT_CMD_CHECK } lt_cmd_t;

typedef struct lt_cli_opt {
  char *flag;        /* owned: as typed, without "=value" (for messages) */
  char *key;         /* owned: the flag without dashes, '-' turned into '_' */
  const char *value; /* borrowed from argv */
} lt_cli_opt_t;

typedef struct lt_cli {
  lt_cmd_t cmd;
  const char *expr;
  const char **files; /* owned array of borrowed strings; "-" is stdin */
  size_t nfiles;
  const char *out_dir; /* --out */
  char **hosts;        /* --hosts, split at commas; owned */
  size_t nhosts;
  const char *hosts_file; /* --hosts-file: the `hosts` option */
  int servers;            /* --servers N, 0 when not given */
  int local;              /* --local */
  int stats;              /* --stats */
  char *sep;              /* --sep (escapes decoded) or --lines; owned; NULL: none */
  size_t seplen;          /* bytes of sep (it may hold NUL) */
  lt_cli_opt_t *opts;
  size_t nopts;
} lt_cli_t;

/* lt__cli_usage writes the usage text to `f`. */
void lt__cli_usage(FILE *f);

/* lt__cli_parse fills `cli` from argv (argv borrowed; it must outlive `cli`). Returns
 * LT_CLI_GO, or an exit status after writing help or version to `out` (LT_EXIT_OK) or a
 * message and the usage to `err` (LT_EXIT_USAGE). lt__cli_free is needed in every case. */
int lt__cli_parse(lt_cli_t *cli, int argc, char **argv, FILE *out, FILE *err);

/* lt__cli_free frees what lt__cli_parse allocated. */
void lt__cli_free(lt_cli_t *cli);

/* lt__cli_clock_us returns CLOCK_MONOTONIC in microseconds: the tool's one clock (deadlines,
 * rates). */
int64_t lt__cli_clock_us(void);

#endif
