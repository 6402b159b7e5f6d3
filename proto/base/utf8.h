/* utf8.h: UTF-8 checks shared by the codec (strings on the wire must be well-formed) and
 * the server (every string it sends must be). Well-formed means no overlong forms, no
 * surrogates, nothing above U+10FFFF. Pure functions; any thread. */
#ifndef LT_UTF8_H
#define LT_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* lt__utf8_seq returns the length (1..4) of the well-formed sequence at s, which has `n`
 * bytes left (n >= 1), or 0 when the bytes there are not one. */
size_t lt__utf8_seq(const unsigned char *s, size_t n);

/* lt__utf8_valid says whether s[0..n) is well-formed UTF-8. */
bool lt__utf8_valid(const void *s, size_t n);

/* lt__utf8_sanitize rewrites `s` in place into valid UTF-8 without control characters
 * (each bad byte becomes '?'), as every string the server sends must be. */
void lt__utf8_sanitize(char *s);

#endif
