/* log.c: the shared stderr logger (see log.h). The level is one atomic int, read lazily
 * from LITHIUM_LOG; the name prefix is guarded by a mutex. Each line is formatted into a
 * stack buffer, its control characters escaped, and written with a single write(2). Any
 * thread. */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <lithium/error.h>

#include "clock.h"
#include "utf8.h"

#define LOG_LINE_MAX 2048
#define LOG_NAME_MAX 64
#define LEVEL_UNSET  (-1)

static atomic_int log_level = LEVEL_UNSET;
static pthread_mutex_t name_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_name[LOG_NAME_MAX];

static const char *const level_names[] = {"debug", "info", "warn", "error"};

int lt__log_parse_level(const char *s) {
  if (s == NULL) return LT_EINVAL;
  if (strcasecmp(s, "debug") == 0) return LT_LOG_DEBUG;
  if (strcasecmp(s, "info") == 0) return LT_LOG_INFO;
  if (strcasecmp(s, "warn") == 0 || strcasecmp(s, "warning") == 0) return LT_LOG_WARN;
  if (strcasecmp(s, "error") == 0) return LT_LOG_ERROR;
  if (strcasecmp(s, "off") == 0 || strcasecmp(s, "none") == 0) return LT_LOG_OFF;
  return LT_EINVAL;
}

/* current_level returns the level, reading LITHIUM_LOG the first time. Two threads may both
 * read the environment; they store the same value. */
static int current_level(void) {
  int lvl = atomic_load_explicit(&log_level, memory_order_relaxed);
  if (lvl != LEVEL_UNSET) return lvl;
  lvl = lt__log_parse_level(getenv("LITHIUM_LOG"));
  if (lvl < 0) lvl = LT_LOG_WARN;
  int expected = LEVEL_UNSET;
  atomic_compare_exchange_strong(&log_level, &expected, lvl);
  return atomic_load_explicit(&log_level, memory_order_relaxed);
}

bool lt__log_enabled(int level) {
  return level >= LT_LOG_DEBUG && level < LT_LOG_OFF && level >= current_level();
}

void lt__log_set_level(int level) {
  if (level < LT_LOG_DEBUG) level = LT_LOG_DEBUG;
  if (level > LT_LOG_OFF) level = LT_LOG_OFF;
  atomic_store(&log_level, level);
}

void lt__log_set_name(const char *name) {
  pthread_mutex_lock(&name_lock);
  if (name == NULL) name = "";
  snprintf(log_name, sizeof log_name, "%s", name);
  pthread_mutex_unlock(&name_lock);
}

static void vlog(int level, const char *fmt, va_list ap);

void lt__log(int level, const char *fmt, ...) {
  if (!lt__log_enabled(level)) return;
  va_list ap;
  va_start(ap, fmt);
  vlog(level, fmt, ap);
  va_end(ap);
}

static pthread_mutex_t limit_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t limit_second;  /* the second (lt__clock_ms / 1000) being counted */
static uint32_t limit_lines;  /* lines written in it */
static uint64_t limit_missed; /* lines left out since the last one written */

void lt__log_limited(int level, const char *fmt, ...) {
  if (!lt__log_enabled(level)) return;
  int64_t now = lt__clock_ms() / 1000;
  pthread_mutex_lock(&limit_lock);
  if (now != limit_second) {
    limit_second = now;
    limit_lines = 0;
  }
  bool write = limit_lines < LT_LOG_LIMIT_PER_S;
  uint64_t missed = 0;
  if (write) {
    limit_lines++;
    missed = limit_missed;
    limit_missed = 0;
  } else {
    limit_missed++;
  }
  pthread_mutex_unlock(&limit_lock);
  if (!write) return;
  if (missed > 0)
    lt__log(level, "%llu similar lines left out (at most %d a second)", (unsigned long long)missed,
            LT_LOG_LIMIT_PER_S);
  va_list ap;
  va_start(ap, fmt);
  vlog(level, fmt, ap);
  va_end(ap);
}

static void vlog_tail(int level, const char *tail, const char *fmt, va_list ap);

bool lt__log_rated(lt_log_rate_t *r, int64_t now_ms, int level, const char *fmt, ...) {
  if (!lt__log_enabled(level)) return false;
  if (r->until_ms != 0 && now_ms < r->until_ms) {
    r->missed++;
    return false;
  }
  char tail[96] = "";
  if (r->until_ms == 0 || r->missed == 0) {
    r->window_ms = LT_LOG_RATE_MIN_MS; /* the first, or after a quiet window */
  } else {
    snprintf(tail, sizeof tail, " (and %llu more like it in the last %lld s)",
             (unsigned long long)r->missed,
             (long long)((now_ms - (r->until_ms - r->window_ms) + 999) / 1000));
    r->window_ms = r->window_ms * 2 < LT_LOG_RATE_MAX_MS ? r->window_ms * 2 : LT_LOG_RATE_MAX_MS;
  }
  r->missed = 0;
  r->until_ms = now_ms + r->window_ms;
  va_list ap;
  va_start(ap, fmt);
  vlog_tail(level, tail, fmt, ap);
  va_end(ap);
  return true;
}

static void vlog(int level, const char *fmt, va_list ap) {
  vlog_tail(level, "", fmt, ap);
}

/* vlog_tail writes one line: the prefix, the message of fmt and ap, then `tail`. */
static void vlog_tail(int level, const char *tail, const char *fmt, va_list ap) {
  int saved_errno = errno;
  char line[LOG_LINE_MAX];
  struct timespec ts = lt__clock_wall();
  struct tm tm;
  localtime_r(&ts.tv_sec, &tm);
  size_t n = strftime(line, sizeof line, "%Y-%m-%d %H:%M:%S", &tm);
  pthread_mutex_lock(&name_lock);
  int k = snprintf(line + n, sizeof line - n, ".%03ld %-5s %s%s", ts.tv_nsec / 1000000L,
                   level_names[level], log_name, log_name[0] ? ": " : "");
  pthread_mutex_unlock(&name_lock);
  if (k > 0) n += (size_t)k < sizeof line - n ? (size_t)k : sizeof line - n - 1;
  /* The message names text from files and peers (error messages, names): its control
   * characters are escaped, so that none reaches a terminal. */
  char msg[LOG_LINE_MAX];
  vsnprintf(msg, sizeof msg, fmt, ap);
  n += lt__text_escape(msg, line + n, sizeof line - n);
  int t = snprintf(line + n, sizeof line - n, "%s", tail);
  if (t > 0) n += (size_t)t < sizeof line - n ? (size_t)t : sizeof line - n - 1;
  /* Room for the newline: overwrite the last byte of a cut line. */
  if (n >= sizeof line - 1) n = sizeof line - 2;
  line[n++] = '\n';
  const char *p = line;
  while (n > 0) {
    ssize_t w = write(STDERR_FILENO, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      break;
    }
    p += w;
    n -= (size_t)w;
  }
  errno = saved_errno;
}
