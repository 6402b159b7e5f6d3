/* format.c: lt_skel_format, the canonical expression of a skeleton tree, the inverse of
 * parse.c: a seq without parameter prints as a bare kernel name, parameters keep printable
 * ASCII and escape every other byte. Reads trees only. Any thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "skel.h"
#include "strbuf.h"

/* put_param writes a parameter as a double-quoted string: printable ASCII other than '"'
 * and '\' as is, those two as \" and \\, and any other byte as \xHH. */
static void put_param(lt_strbuf_t *b, const unsigned char *p, size_t n) {
  static const char hex[] = "0123456789abcdef";
  lt__strbuf_put(b, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    char esc[4] = {'\\', (char)p[i], 0, 0};
    if (p[i] == '"' || p[i] == '\\')
      lt__strbuf_put(b, esc, 2);
    else if (p[i] >= 0x20 && p[i] < 0x7f)
      lt__strbuf_put(b, esc + 1, 1);
    else {
      esc[1] = 'x';
      esc[2] = hex[p[i] >> 4];
      esc[3] = hex[p[i] & 0xf];
      lt__strbuf_put(b, esc, 4);
    }
  }
  lt__strbuf_put(b, "\"", 1);
}

static void put_skel(lt_strbuf_t *b, const lt_skel_t *s) {
  switch (s->kind) {
  case LT_SKEL_SEQ:
    if (s->param_len == 0) {
      lt__strbuf_puts(b, s->kernel);
      return;
    }
    lt__strbuf_puts(b, "seq(");
    lt__strbuf_puts(b, s->kernel);
    lt__strbuf_puts(b, ", ");
    put_param(b, s->param, s->param_len);
    lt__strbuf_puts(b, ")");
    return;
  case LT_SKEL_FARM:
    lt__strbuf_puts(b, "farm(");
    put_skel(b, s->children[0]);
    lt__strbuf_puts(b, ")");
    return;
  case LT_SKEL_PIPE:
    lt__strbuf_puts(b, "pipe(");
    for (size_t i = 0; i < s->nchildren; i++) {
      if (i > 0) lt__strbuf_puts(b, ", ");
      put_skel(b, s->children[i]);
    }
    lt__strbuf_puts(b, ")");
    return;
  case LT_SKEL_MAP:
  case LT_SKEL_DC:
    lt__strbuf_puts(b, s->kind == LT_SKEL_MAP ? "map(" : "dc(");
    lt__strbuf_puts(b, s->kernel);
    lt__strbuf_puts(b, ", ");
    if (s->kind == LT_SKEL_DC) {
      lt__strbuf_puts(b, s->divide);
      lt__strbuf_puts(b, ", ");
    }
    put_skel(b, s->children[0]);
    lt__strbuf_puts(b, ", ");
    lt__strbuf_puts(b, s->combine);
    lt__strbuf_puts(b, ")");
    return;
  }
}

LT_API char *lt_skel_format(const lt_skel_t *s) {
  /* Trees come from the builders or the parser; a malformed one has no expression. */
  if (!lt__skel_valid(s)) return NULL;
  lt_strbuf_t b = {0};
  put_skel(&b, s);
  return lt__strbuf_take(&b);
}
