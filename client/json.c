/* json.c: the JSON writer behind lt_eval_stats_json. Writes only what it is told; knows
 * nothing of evaluators. One thread per writer. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static void put(lt_json_t *j, const char *s, size_t n) {
  if (j->failed) return;
  if (j->len + n + 1 > j->cap) {
    size_t cap = j->cap ? j->cap : 256;
    while (cap < j->len + n + 1)
      cap *= 2;
    char *b = realloc(j->buf, cap);
    if (b == NULL) {
      j->failed = 1;
      return;
    }
    j->buf = b;
    j->cap = cap;
  }
  memcpy(j->buf + j->len, s, n);
  j->len += n;
  j->buf[j->len] = '\0';
}

static void putf(lt_json_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(lt_json_t *j, const char *fmt, ...) {
  char tmp[64];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) put(j, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void put_string(lt_json_t *j, const char *s) {
  put(j, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
    if (*p == '"' || *p == '\\') {
      char esc[2] = {'\\', (char)*p};
      put(j, esc, 2);
    } else if (*p < 0x20) {
      putf(j, "\\u%04x", *p);
    } else {
      put(j, (const char *)p, 1);
    }
  }
  put(j, "\"", 1);
}

/* begin writes the comma and the key of the next member. */
static void begin(lt_json_t *j, const char *key) {
  if (j->need_comma) put(j, ",", 1);
  if (key != NULL) {
    put_string(j, key);
    put(j, ":", 1);
  }
  j->need_comma = 1;
}

void lt__json_object_open(lt_json_t *j, const char *key) {
  begin(j, key);
  put(j, "{", 1);
  j->need_comma = 0;
}

void lt__json_object_close(lt_json_t *j) {
  put(j, "}", 1);
  j->need_comma = 1;
}

void lt__json_array_open(lt_json_t *j, const char *key) {
  begin(j, key);
  put(j, "[", 1);
  j->need_comma = 0;
}

void lt__json_array_close(lt_json_t *j) {
  put(j, "]", 1);
  j->need_comma = 1;
}

void lt__json_u64(lt_json_t *j, const char *key, uint64_t v) {
  begin(j, key);
  putf(j, "%llu", (unsigned long long)v);
}

void lt__json_double(lt_json_t *j, const char *key, double v) {
  begin(j, key);
  putf(j, "%.6g", v);
}

void lt__json_bool(lt_json_t *j, const char *key, int v) {
  begin(j, key);
  put(j, v ? "true" : "false", v ? 4 : 5);
}

void lt__json_str(lt_json_t *j, const char *key, const char *v) {
  begin(j, key);
  put_string(j, v);
}

char *lt__json_take(lt_json_t *j) {
  char *out = j->failed ? NULL : j->buf;
  if (j->failed) free(j->buf);
  memset(j, 0, sizeof *j);
  return out;
}
