/* strbuf.c: the growable string buffer (see strbuf.h). Capacity doubles from 64 bytes.
 * Knows nothing of what is written into it. One thread per buffer. */
#include "strbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* reserve makes room for `n` more bytes and the NUL; 0 on success, -1 (and `failed`) when
 * memory runs out. */
static int reserve(lt_strbuf_t *b, size_t n) {
  if (b->failed) return -1;
  if (n > SIZE_MAX - b->len - 1) {
    b->failed = 1;
    return -1;
  }
  if (b->len + n + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < b->len + n + 1)
    cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
  char *d = realloc(b->data, cap);
  if (d == NULL) {
    b->failed = 1;
    return -1;
  }
  b->data = d;
  b->cap = cap;
  return 0;
}

void lt__strbuf_put(lt_strbuf_t *b, const char *s, size_t n) {
  if (reserve(b, n) != 0) return;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void lt__strbuf_puts(lt_strbuf_t *b, const char *s) {
  lt__strbuf_put(b, s, strlen(s));
}

void lt__strbuf_printf(lt_strbuf_t *b, const char *fmt, ...) {
  if (b->failed) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->failed = 1;
    return;
  }
  if (reserve(b, (size_t)n) != 0) return;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void lt__strbuf_clear(lt_strbuf_t *b) {
  b->len = 0;
  b->failed = 0;
  if (b->data != NULL) b->data[0] = '\0';
}

char *lt__strbuf_take(lt_strbuf_t *b) {
  if (!b->failed && b->data == NULL) lt__strbuf_put(b, "", 0);
  char *out = b->failed ? NULL : b->data;
  if (b->failed) free(b->data);
  memset(b, 0, sizeof *b);
  return out;
}

void lt__strbuf_reset(lt_strbuf_t *b) {
  if (b == NULL) return;
  free(b->data);
  memset(b, 0, sizeof *b);
}
