/* log.h: the shared logger of lithium-server and the client library. One line per call on
 * stderr: timestamp, level, a process name prefix and the message. The level comes from
 * LITHIUM_LOG (debug|info|warn|error|off, read on first use; default warn) unless set with
 * lt__log_set_level. Thread-safe: any thread. */
#ifndef LT_LOG_H
#define LT_LOG_H

#include <stdbool.h>
#include <stdint.h>

typedef enum lt_log_level {
  LT_LOG_DEBUG = 0,
  LT_LOG_INFO = 1,
  LT_LOG_WARN = 2,
  LT_LOG_ERROR = 3,
  LT_LOG_OFF = 4
} lt_log_level_t;

/* lt__log writes one line at `level` when that level is enabled; the line is written with
 * one write(2), so lines of concurrent threads never interleave. Long messages are cut at
 * about 2 KiB. */
__attribute__((format(printf, 2, 3))) void lt__log(int level, const char *fmt, ...);

/* Lines written through lt__log_limited, all callers together, per second. */
#define LT_LOG_LIMIT_PER_S 20

/* lt__log_limited is lt__log for lines a peer on the network can cause at will (refused
 * requests and connections): at most LT_LOG_LIMIT_PER_S of them a second; the rest are
 * counted, and the next one written says how many were left out. */
__attribute__((format(printf, 2, 3))) void lt__log_limited(int level, const char *fmt, ...);

/* A warning that repeats (one site, the same kind of event: the cuts of idle connections):
 * its first line is written, then at most one a window, saying how many were left out
 * since. The window starts at LT_LOG_RATE_MIN_MS, doubles each time lines were left out in
 * it, up to LT_LOG_RATE_MAX_MS, and starts again after a window without any. Zero it before
 * use; one per site, guarded by the caller (or used by one thread). */
typedef struct lt_log_rate {
  int64_t until_ms;  /* the current window's end; 0: none open */
  int64_t window_ms; /* its length */
  uint64_t missed;   /* lines left out in it */
} lt_log_rate_t;

#define LT_LOG_RATE_MIN_MS 1000
#define LT_LOG_RATE_MAX_MS 60000

/* lt__log_rated is lt__log under the repeat limit `r`, at time `now_ms` (the caller's
 * clock, e.g. its loop's). A line written after some were left out ends with "(and N more
 * like it in the last T s)". Returns whether it wrote. */
__attribute__((format(printf, 4, 5))) bool lt__log_rated(lt_log_rate_t *r, int64_t now_ms,
                                                         int level, const char *fmt, ...);

/* lt__log_enabled tells whether `level` would be written; cheap (one atomic load), for
 * guarding expensive formatting. */
bool lt__log_enabled(int level);

/* lt__log_set_level sets the level (LT_LOG_DEBUG..LT_LOG_OFF), overriding LITHIUM_LOG. */
void lt__log_set_level(int level);

/* lt__log_parse_level maps "debug", "info", "warn" (or "warning"), "error", "off" (any case)
 * to a level; LT_EINVAL for anything else. */
int lt__log_parse_level(const char *s);

/* lt__log_set_name sets the prefix shown on every line (copied, cut at 63 bytes); NULL or
 * "" shows none. */
void lt__log_set_name(const char *name);

#endif
