/* options.h: the evaluator's options (lt_eval_set keys, LITHIUM_<KEY> environment
 * variables, `--key value` of the tools). Parsing and validation only; unknown keys and bad
 * values are LT_EINVAL, never ignored. Owned by the evaluator's thread. */
#ifndef LT_OPTIONS_H
#define LT_OPTIONS_H

#include <stdint.h>

/* Placement of new work (option `placement`). */
typedef enum lt_placement {
  LT_PLACE_EFT = 0, /* earliest estimated finish (DESIGN.md 7) */
  LT_PLACE_RR       /* round robin over the servers with room: the baseline */
} lt_placement_t;

typedef struct lt_options {
  int ordered;                 /* results in submission order */
  int nonblocking;             /* lt_eval_submit gives LT_EAGAIN instead of blocking */
  int normal_form;             /* fuse adjacent seq stages into one instruction */
  int lookahead;               /* many instructions in flight per server */
  int lazy;                    /* values stay on servers; successors get references */
  uint32_t max_threads;        /* most instructions running at once per server */
  uint32_t min_threads;        /* throttle: the window never goes below this */
  int throttle;                /* adapt each server's thread window to its load */
  int placement;               /* lt_placement_t */
  int migrate;                 /* end of stream: move queued work from slow to idle servers */
  int backup;                  /* end of stream: copies of stragglers on idle servers */
  double backup_factor;        /* a straggler has run this many times its expected time */
  uint32_t inline_max;         /* lazy: intermediate values up to this size also come back */
  uint32_t max_pending;        /* unfinished tasks before submit blocks */
  uint32_t max_retries;        /* re-dispatches of one instruction after server loss */
  uint32_t heartbeat_ms;       /* heartbeat period; a server silent 3 periods is dead */
  uint32_t connect_timeout_ms; /* wait for a server's welcome */
  uint32_t task_timeout_ms;    /* an instruction running longer fails (LT_ETIMEDOUT); 0 none */
  uint32_t server_threads;     /* --threads for spawned servers, 0 = server default */
  char *modules;               /* module directory handed to spawned servers */
  char *server;                /* lithium-server program for spawn_local */
  char *trace;                 /* trace=FILE: trace-event JSON (trace.c); NULL = off */
  char *journal;               /* journal=FILE: the results journal (journal.c); NULL = off */
  char curve_pub[41];          /* curve_key: the client's key pair (Z85), "" when none */
  char curve_sec[41];
  char curve_server[41]; /* curve_server: the key of hosts given without one, or "" */
  char *hosts;           /* hosts file or announce directory (hosts.c); NULL = none */
  int ship_modules;      /* send the program's modules (from `modules`) to servers whose copy
                            differs or is missing, for this evaluation's sessions (ship.c) */
} lt_options_t;

/* lt__options_init sets the defaults. */
void lt__options_init(lt_options_t *o);

/* lt__options_set parses `value` for `key`. LT_EINVAL for unknown keys or bad values. */
int lt__options_set(lt_options_t *o, const char *key, const char *value);

/* lt__options_from_env applies every LITHIUM_<KEY> variable that names a known key.
 * LT_EINVAL (naming nothing) when one holds a bad value. */
int lt__options_from_env(lt_options_t *o);

/* lt__options_clear frees the strings. */
void lt__options_clear(lt_options_t *o);

#endif
