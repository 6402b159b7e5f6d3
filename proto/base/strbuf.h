/* strbuf.h: a growable, always NUL-terminated string buffer. A failed allocation sets
 * `failed`, after which every append is a no-op and lt__strbuf_take gives NULL, so a writer
 * checks once at the end. Zero-initialise (`lt_strbuf_t b = {0};`) to start. One thread per
 * buffer. */
#ifndef LT_STRBUF_H
#define LT_STRBUF_H

#include <stddef.h>

typedef struct lt_strbuf {
  char *data; /* NUL-terminated once anything was appended; NULL before */
  size_t len, cap;
  int failed; /* out of memory */
} lt_strbuf_t;

/* lt__strbuf_put appends the `n` bytes at `s`. */
void lt__strbuf_put(lt_strbuf_t *b, const char *s, size_t n);

/* lt__strbuf_puts appends the NUL-terminated string `s`. */
void lt__strbuf_puts(lt_strbuf_t *b, const char *s);

/* lt__strbuf_printf appends the text of a printf format. */
__attribute__((format(printf, 2, 3))) void lt__strbuf_printf(lt_strbuf_t *b, const char *fmt, ...);

/* lt__strbuf_clear empties `b` for reuse, keeping its memory; a failure is forgotten. */
void lt__strbuf_clear(lt_strbuf_t *b);

/* lt__strbuf_take returns the text (caller frees; "" when nothing was appended), or NULL
 * after a failure; either way `b` is reset to empty. */
char *lt__strbuf_take(lt_strbuf_t *b);

/* lt__strbuf_reset frees the text and empties `b`, failure included. Accepts NULL. */
void lt__strbuf_reset(lt_strbuf_t *b);

#endif
