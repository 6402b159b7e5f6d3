/* utf8.c: the UTF-8 checks (see utf8.h). One decoder of a sequence's length, read by the
 * validator and the sanitizer. Touches nothing but the bytes given. */
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t lt__utf8_seq(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  size_t more;
  unsigned lo = 0x80, hi = 0xBF; /* range of the second byte */
  if (c >= 0xC2 && c <= 0xDF) {
    more = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    more = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    more = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (n <= more) return 0;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t k = 2; k <= more; k++)
    if ((s[k] & 0xC0) != 0x80) return 0;
  return more + 1;
}

bool lt__utf8_valid(const void *str, size_t n) {
  const unsigned char *s = str;
  size_t i = 0;
  while (i < n) {
    size_t k = lt__utf8_seq(s + i, n - i);
    if (k == 0) return false;
    i += k;
  }
  return true;
}

void lt__utf8_sanitize(char *str) {
  unsigned char *s = (unsigned char *)str;
  size_t n = strlen(str), i = 0;
  while (i < n) {
    size_t k = s[i] < 0x20 || s[i] == 0x7f ? 0 : lt__utf8_seq(s + i, n - i);
    if (k == 0) {
      s[i++] = '?'; /* a control character or a bad byte */
      continue;
    }
    i += k;
  }
}

/* escape_of writes the escape of the sequence at s (k bytes, k = 0: a bad byte) into e (8
 * bytes) and returns its length, or 0 when the sequence stands for itself. */
static size_t escape_of(const unsigned char *s, size_t k, char *e) {
  if (k == 0 || (k == 1 && (s[0] < 0x20 || s[0] == 0x7f)))
    return (size_t)snprintf(e, 8, "\\x%02x", s[0]);
  if (k == 2 && s[0] == 0xc2 && s[1] < 0xa0) return (size_t)snprintf(e, 8, "\\u%04x", s[1]);
  return 0;
}

size_t lt__text_escape(const char *in, char *out, size_t len) {
  if (len == 0) return 0;
  const unsigned char *s = (const unsigned char *)in;
  size_t n = strlen(in), i = 0, o = 0;
  while (i < n) {
    size_t k = lt__utf8_seq(s + i, n - i), w;
    char e[8];
    const char *from = e;
    if ((w = escape_of(s + i, k, e)) == 0) {
      from = in + i;
      w = k;
    }
    if (o + w >= len) break;
    memcpy(out + o, from, w);
    o += w;
    i += k > 0 ? k : 1;
  }
  out[o] = '\0';
  return o;
}

char *lt__text_escape_dup(const char *in) {
  size_t len = strlen(in) * 6 + 1; /* at most "\u009b" (6 bytes) for 2, "\xff" for 1 */
  char *out = malloc(len);
  if (out != NULL) lt__text_escape(in, out, len);
  return out;
}
