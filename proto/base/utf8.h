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

/* lt__text_escape copies `in` into out (`len` bytes, NUL-terminated, cut short at a whole
 * escape when too long) with every control character — C0, DEL, and C1 (U+0080..U+009F,
 * whose CSI a terminal obeys as ESC [) — and every byte that is no well-formed UTF-8 written
 * as a visible escape ("\x1b", "\u009b"): text from files and peers is printed this way,
 * never raw (an escape sequence in it would reach the terminal). Returns the length
 * written. */
size_t lt__text_escape(const char *in, char *out, size_t len);

/* lt__text_escape_dup returns lt__text_escape of `in` in a new string (malloc'd, the caller
 * frees it), NULL when out of memory. */
char *lt__text_escape_dup(const char *in);

#endif
