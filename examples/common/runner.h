/* runner.h: what the map and divide-and-conquer example programs share: their common
 * command-line options (--servers, --hosts, --local, --stats), an evaluator set up on spawned
 * servers, on given servers or as the sequential evaluator, one task run through it, and the
 * instruction count of the run. The thread that owns the evaluator calls these. */
#ifndef LT_EXAMPLE_RUNNER_H
#define LT_EXAMPLE_RUNNER_H

#include <stddef.h>
#include <stdio.h>

#include <lithium.h>

typedef struct ex_opts {
  const char *prog;  /* program name, for messages */
  int servers;       /* servers to spawn when hosts is NULL */
  const char *hosts; /* comma-separated endpoints of running servers, or NULL */
  int local;         /* run with the sequential evaluator instead of servers */
  int stats;         /* print the evaluator's statistics (JSON) */
} ex_opts_t;

/* ex_opts_init sets the defaults: 2 spawned servers, no statistics. `prog` is borrowed. */
void ex_opts_init(ex_opts_t *o, const char *prog);

/* ex_opts_parse takes argv[*i] when it is a common option, with its value (advancing *i).
 * Returns 1 when it took it, 0 when the option is not a common one, -1 on a bad value (the
 * reason is printed). */
int ex_opts_parse(ex_opts_t *o, int argc, char **argv, int *i);

/* ex_opts_usage prints the help lines of the common options. */
void ex_opts_usage(FILE *f);

/* ex_parse_num parses argv value `text` of option `flag` as a decimal in [min, max] into
 * *out; prints the reason and returns -1 when it is not one. */
int ex_parse_num(const ex_opts_t *o, const char *flag, const char *text, long long min,
                 long long max, long long *out);

/* A numeric option of a program: `name N`, N within [min, max], into *value. */
typedef struct ex_num_flag {
  const char *name;
  long long min, max;
  long long *value;
} ex_num_flag_t;

/* The help text of a program; ex_args_parse prints it for --help and after a bad argument. */
typedef void (*ex_usage_fn)(FILE *f, const char *argv0);

/* ex_args_parse reads the whole command line of a program whose own options are numeric:
 * the common options (ex_opts_parse, after ex_opts_init and the program's defaults), -h and
 * --help (usage on stdout, exit 0) and `flags`. Returns 0, or -1 after printing why. */
int ex_args_parse(ex_opts_t *o, int argc, char **argv, const ex_num_flag_t *flags, size_t nflags,
                  ex_usage_fn usage);

/* ex_eval_open makes an evaluator for `program` (taking ownership, also on failure), points it
 * at this build's server program and modules unless LITHIUM_SERVER / LITHIUM_MODULES say
 * otherwise, and starts it: sequentially in this process when `local`, else on the servers
 * of `o`. Returns NULL after printing why. */
lt_eval_t *ex_eval_open(const ex_opts_t *o, lt_skel_t *program, int local);

/* ex_eval_open_with is ex_eval_open that also sets the options in `kv` (NULL-terminated key,
 * value, key, value, ...; borrowed) after the server program and modules, before starting:
 * e.g. mode, trace or lookahead. kv may be NULL. */
lt_eval_t *ex_eval_open_with(const ex_opts_t *o, lt_skel_t *program, int local,
                             const char *const *kv);

/* ex_eval_where writes where a run of `o` goes ("2 spawned servers", "the given servers", "the
 * sequential evaluator" when `local`) into buf. */
void ex_eval_where(const ex_opts_t *o, int local, char *buf, size_t len);

/* ex_eval_run submits one task of `len` bytes, closes the input and waits for the result,
 * which goes to *out (caller frees with lt_buf_free). Returns 0, or -1 after printing the
 * error when the evaluator failed or the task's result is an error. */
int ex_eval_run(const ex_opts_t *o, lt_eval_t *ev, const void *task, size_t len, lt_buf_t **out);

/* ex_eval_report prints "<what> on <where>: <seconds> s, <n> instructions" from the
 * evaluator's statistics, and the whole JSON when o->stats. */
void ex_eval_report(const ex_opts_t *o, lt_eval_t *ev, int local, double seconds);

/* Stats texts (lt_eval_stats_json): ex_stat_u64 returns the first `"key":N` (the top-level
 * counters come before the per-server objects), -1 when absent; ex_stat_sum adds up every
 * occurrence (a per-server counter over all servers), 0 when there is none. */
long long ex_stat_u64(const char *json, const char *key);
long long ex_stat_sum(const char *json, const char *key);

/* ex_now returns a monotonic clock in seconds. */
double ex_now(void);

#endif
