/* utf8.c: the UTF-8 checks (see utf8.h). One decoder of a sequence's length, read by the
 * validator and the sanitizer. Touches nothing but the bytes given. */
#include "utf8.h"

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
