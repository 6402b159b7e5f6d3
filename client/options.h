/* options.h: the evaluator's options (lt_eval_set keys, LITHIUM_<KEY> environment
 * variables, `--key value` of the tools), described once in LT_OPTIONS. Parsing and
 * validation only; unknown keys and bad values are LT_EINVAL with a message in
 * lt_options_t.error, never ignored. Owned by the evaluator's thread. */
#ifndef LT_OPTIONS_H
#define LT_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

/* Placement of new work (option `placement`). */
typedef enum lt_placement {
  LT_PLACE_EFT = 0, /* earliest estimated finish (DESIGN.md 7) */
  LT_PLACE_RR       /* round robin over the servers with room: the baseline */
} lt_placement_t;

/* The shape of an option's value. */
typedef enum lt_opt_type {
  LT_OPT_BOOL,   /* int: on/off, true/false, yes/no, 1/0, any case */
  LT_OPT_UINT,   /* uint32_t in [lo, hi] */
  LT_OPT_AUTO,   /* uint32_t in [lo, hi], or "auto" (any case), stored as 0 */
  LT_OPT_DOUBLE, /* double in [lo, hi] */
  LT_OPT_ENUM,   /* int: the index of the value in `arg` ("a|b|c") */
  LT_OPT_PATH,   /* char *: a non-empty string, copied */
  LT_OPT_KEY     /* char[41]: a CURVE key read from a file or text ("" or "off": none) */
} lt_opt_type_t;

/* LT_OPTIONS(X) is every evaluator option, once, in the order defaults are applied (mode
 * first: the switches after it repeat what it sets):
 *   X(key, type, field, default, lo, hi, arg, help)
 * `field` names the member of lt_options_t; `default` is parsed like a value (NULL: none);
 * lo and hi bound numbers; `arg` is the value's shape in --help, for enums its values.
 * The environment variable is LITHIUM_ and the key in capitals. docs/guide.md's Options table
 * and the tool's --help list the same keys (tests/client/test_options.c checks both). */
#define LT_OPTIONS(X)                                                                              \
  X(mode, LT_OPT_ENUM, mode, "optimized", 0, 0, "optimized|plain",                                 \
    "optimized: lookahead, lazy, backup, quarantine on; plain: all off (the original Lithium)")    \
  X(lookahead, LT_OPT_BOOL, lookahead, "on", 0, 0, "on|off",                                       \
    "many instructions in flight per server")                                                      \
  X(lazy, LT_OPT_BOOL, lazy, "on", 0, 0, "on|off",                                                 \
    "values stay on the servers; successors get references")                                       \
  X(max_threads, LT_OPT_UINT, max_threads, "6", 1, 4096, "N",                                      \
    "the thread window: instructions running at once per server")                                  \
  X(throttle, LT_OPT_BOOL, throttle, "off", 0, 0, "on|off",                                        \
    "adapt each server's window between min_threads and max_threads")                              \
  X(placement, LT_OPT_ENUM, placement, "eft", 0, 0, "eft|rr",                                      \
    "new work to the earliest finish (eft) or round robin (rr)")                                   \
  X(migrate, LT_OPT_BOOL, migrate, "on", 0, 0, "on|off",                                           \
    "end of stream: move queued work from slow servers to idle ones")                              \
  X(locality, LT_OPT_DOUBLE, locality, "0", 0, 1000, "X",                                          \
    "new work stays on the holder of most of its input bytes when it finishes within X times "     \
    "the best (0: off)")                                                                           \
  X(backup, LT_OPT_BOOL, backup, "on", 0, 0, "on|off",                                             \
    "end of stream: copies of stragglers on idle servers")                                         \
  X(backup_factor, LT_OPT_DOUBLE, backup_factor, "2", 1, 1000, "X",                                \
    "a straggler has run this many times its expected time")                                       \
  X(quarantine, LT_OPT_BOOL, quarantine, "on", 0, 0, "on|off",                                     \
    "a server whose worker crashed for several tasks gets no work for a cool-down")                \
  X(quarantine_crashes, LT_OPT_UINT, quarantine_crashes, "3", 1, 1000, "N",                        \
    "crashes of different tasks within a minute that quarantine a server")                         \
  X(min_threads, LT_OPT_UINT, min_threads, "2", 1, 4096, "N",                                      \
    "the smallest thread window under throttle (at most max_threads)")                             \
  X(inline_max, LT_OPT_UINT, inline_max, "65536", 0, 1u << 30, "BYTES",                            \
    "lazy: outputs up to this size also come back to the client")                                  \
  X(grain, LT_OPT_AUTO, grain, "auto", 1, 1024, "auto|N",                                          \
    "instructions of one chain per hand-off to a server: auto sizes it from service times")        \
  X(pack, LT_OPT_BOOL, pack, "on", 0, 0, "on|off",                                                 \
    "a grain's group of seq tasks goes as one packed instruction (one entry, one completion)")     \
  X(normal_form, LT_OPT_BOOL, normal_form, "off", 0, 0, "on|off",                                  \
    "fuse adjacent seq stages into one instruction")                                               \
  X(modules, LT_OPT_PATH, modules, NULL, 0, 0, "DIR",                                              \
    "directory of kernel modules (spawned servers, the local evaluator)")                          \
  X(server, LT_OPT_PATH, server, NULL, 0, 0, "PATH",                                               \
    "the lithium-server program spawned servers run")                                              \
  X(hosts, LT_OPT_PATH, hosts, NULL, 0, 0, "FILE|DIR",                                             \
    "a hosts file or an announce directory of servers")                                            \
  X(server_threads, LT_OPT_UINT, server_threads, "0", 0, 4096, "N",                                \
    "--threads of spawned servers (0: the server's default)")                                      \
  X(ordered, LT_OPT_BOOL, ordered, "on", 0, 0, "on|off",                                           \
    "results in submission order; off: as they complete")                                          \
  X(max_pending, LT_OPT_UINT, max_pending, "1024", 1, 1u << 30, "N",                               \
    "unfinished tasks before submit blocks")                                                       \
  X(nonblocking, LT_OPT_BOOL, nonblocking, "off", 0, 0, "on|off",                                  \
    "submit returns LT_EAGAIN instead of blocking")                                                \
  X(max_retries, LT_OPT_UINT, max_retries, "3", 0, 1000, "N",                                      \
    "re-dispatches of an instruction whose server died")                                           \
  X(heartbeat_ms, LT_OPT_UINT, heartbeat_ms, "1000", 10, 600000, "MS",                             \
    "heartbeat period; a server silent 3 periods is dead")                                         \
  X(connect_timeout_ms, LT_OPT_UINT, connect_timeout_ms, "5000", 10, 600000, "MS",                 \
    "how long a server has to welcome the client")                                                 \
  X(task_timeout_ms, LT_OPT_UINT, task_timeout_ms, "0", 0, 86400000, "MS",                         \
    "an instruction running longer fails with LT_ETIMEDOUT, on the server or the client (0: "      \
    "none)")                                                                                       \
  X(idle_warn_ms, LT_OPT_UINT, idle_warn_ms, "10000", 0, 86400000, "MS",                           \
    "lt_eval_next waiting this long on an open stream with nothing pending warns once (0: never)") \
  X(journal, LT_OPT_PATH, journal, NULL, 0, 0, "FILE",                                             \
    "the results journal: finished tasks are not computed again")                                  \
  X(journal_mismatch, LT_OPT_ENUM, journal_mismatch, "rebuilt", 0, 0, "recompute|refuse|rebuilt",  \
    "a journal of another program or other module builds: start it again, refuse, or start "       \
    "it again for a rebuilt module and refuse another program's")                                  \
  X(trace, LT_OPT_PATH, trace, NULL, 0, 0, "FILE", "write a trace-event JSON of the run")          \
  X(stats_socket, LT_OPT_PATH, stats_socket, NULL, 0, 0, "PATH",                                   \
    "serve the live stats on this Unix socket (mode 0600) for lithium top")                        \
  X(curve_key, LT_OPT_KEY, curve_pub, NULL, 0, 0, "FILE",                                          \
    "the client's CURVE key pair file (lithium keygen)")                                           \
  X(curve_server, LT_OPT_KEY, curve_server, NULL, 0, 0, "KEY|FILE",                                \
    "the CURVE public key of hosts given without one")                                             \
  X(ship_modules, LT_OPT_BOOL, ship_modules, "off", 0, 0, "on|off",                                \
    "send the program's modules (from modules) to servers that lack them")

/* LT_OPTION_ENV_ALLOWED lists the LITHIUM_* variables that are not options by design (the
 * log level, `lithium up`'s ssh, the systemd unit's server flags): no warning for them. */
#define LT_OPTION_ENV_ALLOWED "LITHIUM_LOG", "LITHIUM_SSH", "LITHIUM_SERVER_FLAGS"

typedef struct lt_options {
  int mode;                    /* the last `mode` set: 0 optimized, 1 plain */
  int ordered;                 /* results in submission order */
  int nonblocking;             /* lt_eval_submit gives LT_EAGAIN instead of blocking */
  int normal_form;             /* fuse adjacent seq stages into one instruction */
  int pack;                    /* a group of seq instructions goes as one packed entry */
  int lookahead;               /* many instructions in flight per server */
  int lazy;                    /* values stay on servers; successors get references */
  uint32_t max_threads;        /* most instructions running at once per server */
  uint32_t min_threads;        /* throttle: the window never goes below this */
  int throttle;                /* adapt each server's thread window to its load */
  int placement;               /* lt_placement_t */
  int migrate;                 /* end of stream: move queued work from slow to idle servers */
  double locality;             /* the holder of the inputs may finish this much later (0 off) */
  int backup;                  /* end of stream: copies of stragglers on idle servers */
  double backup_factor;        /* a straggler has run this many times its expected time */
  int quarantine;              /* servers that crash for several tasks get a cool-down */
  uint32_t quarantine_crashes; /* crashes of distinct tasks within a minute that do it */
  uint32_t inline_max;         /* lazy: intermediate values up to this size also come back */
  uint32_t grain;              /* instructions of one chain sent as one group (run back to back
                                  on one worker); 0: auto, from the chain's service time */
  uint32_t max_pending;        /* unfinished tasks before submit blocks */
  uint32_t max_retries;        /* re-dispatches of one instruction after server loss */
  uint32_t heartbeat_ms;       /* heartbeat period; a server silent 3 periods is dead */
  uint32_t connect_timeout_ms; /* wait for a server's welcome */
  uint32_t task_timeout_ms;    /* an instruction running longer fails (LT_ETIMEDOUT); 0 none */
  uint32_t idle_warn_ms;   /* lt_eval_next idle on an open stream this long warns once; 0 never */
  uint32_t server_threads; /* --threads for spawned servers, 0 = server default */
  char *modules;           /* module directory handed to spawned servers */
  char *server;            /* lithium-server program for spawn_local */
  char *trace;             /* trace=FILE: trace-event JSON (trace.c); NULL = off */
  char *journal;           /* journal=FILE: the results journal (journal.c); NULL = off */
  char *stats_socket;      /* stats_socket=PATH: the live stats (stats_socket.c); NULL = off */
  int journal_mismatch;    /* an LT_JOURNAL_MISMATCH_* (journal.h) */
  char curve_pub[41];      /* curve_key: the client's key pair (Z85), "" when none */
  char curve_sec[41];
  char curve_server[41]; /* curve_server: the key of hosts given without one, or "" */
  char *hosts;           /* hosts file or announce directory (hosts.c); NULL = none */
  int ship_modules;      /* send the program's modules (from `modules`) to servers whose copy
                            differs or is missing, for this evaluation's sessions (ship.c) */
  uint64_t given;        /* bit i: option i of LT_OPTIONS was set (not a default) */
  char error[2048];      /* why the last set failed ("" before any failure) */
} lt_options_t;

/* lt_option_t describes one row of LT_OPTIONS. */
typedef struct lt_option {
  const char *key;
  lt_opt_type_t type;
  size_t offset; /* of the field in lt_options_t */
  const char *def;
  double lo, hi;
  const char *arg;
  const char *help;
} lt_option_t;

/* lt__options_table returns the rows of LT_OPTIONS (static; *n gets their count). */
const lt_option_t *lt__options_table(size_t *n);

/* lt__option_find returns the row of `key`, '-' and '_' alike, or NULL. */
const lt_option_t *lt__option_find(const char *key);
/* lt__option_given tells whether option `key` was set in o, not left at its default (0 for
 * a key that names no option). */
int lt__option_given(const lt_options_t *o, const char *key);
/* lt__option_follows_mode tells whether `key` is one of the switches `mode` sets when they
 * were not set themselves (lookahead, lazy, backup, quarantine, grain, throttle). */
int lt__option_follows_mode(const char *key);

/* lt__options_init sets the defaults. */
void lt__options_init(lt_options_t *o);

/* lt__options_set parses `value` for `key` ('-' and '_' alike) and checks it against the
 * options already set. LT_EINVAL for unknown keys or bad values, with the reason in
 * o->error; LT_ENOMEM. */
int lt__options_set(lt_options_t *o, const char *key, const char *value);

/* lt__options_check checks what set cannot (a set value against another's default):
 * LT_EINVAL with the reason in o->error. lt_eval_start calls it. */
int lt__options_check(lt_options_t *o);

/* lt__options_from_env applies every LITHIUM_<KEY> variable that names an option. LT_EINVAL
 * when one holds a bad value, with the reason (naming the variable) in o->error. A LITHIUM_*
 * variable that names no option and is not in LT_OPTION_ENV_ALLOWED is warned about, once a
 * process. */
int lt__options_from_env(lt_options_t *o);

/* lt__options_clear frees the strings. */
void lt__options_clear(lt_options_t *o);

#endif
