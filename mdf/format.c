/* format.c: lt_skel_format, the canonical expression of a skeleton tree, the inverse of
 * parse.c: a seq without parameter prints as a bare kernel name, parameters keep printable
 * ASCII and escape every other byte. Reads trees only. Any thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kind.h"
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

static void put_skel(lt_strbuf_t *b, const lt_skel_t *s);

/* put_arg writes argument `a` (kind.h) of `s`, with the ", " before it when not `first`. */
static void put_arg(lt_strbuf_t *b, const lt_skel_t *s, const lt_skel_arg_t *a, size_t *child,
                    int first) {
  if (a->kind == LT_ARG_PARAM && s->param_len == 0) return;
  if (!first) lt__strbuf_puts(b, ", ");
  switch (a->kind) {
  case LT_ARG_KERNEL:
    lt__strbuf_puts(b, lt__skel_slot_get(s, a->slot));
    return;
  case LT_ARG_PARAM:
    put_param(b, s->param, s->param_len);
    return;
  case LT_ARG_SKEL:
    put_skel(b, s->children[(*child)++]);
    return;
  case LT_ARG_SKELS:
    for (size_t i = *child; i < s->nchildren; i++) {
      if (i > *child) lt__strbuf_puts(b, ", ");
      put_skel(b, s->children[i]);
    }
    *child = s->nchildren;
    return;
  }
}

/* put_skel writes `s` as its keyword and arguments, or as its bare kernel name when its
 * kind allows one and it has no parameter. */
static void put_skel(lt_strbuf_t *b, const lt_skel_t *s) {
  const lt_skel_kind_desc_t *d = lt__skel_kind(s->kind);
  if (d->bare && s->param_len == 0) {
    lt__strbuf_puts(b, lt__skel_slot_get(s, d->args[0].slot));
    return;
  }
  size_t child = 0;
  lt__strbuf_puts(b, d->name);
  lt__strbuf_puts(b, "(");
  for (uint32_t i = 0; i < d->nargs; i++)
    put_arg(b, s, &d->args[i], &child, i == 0);
  lt__strbuf_puts(b, ")");
}

LT_API char *lt_skel_format(const lt_skel_t *s) {
  /* Trees come from the builders or the parser; a malformed one has no expression. */
  if (!lt__skel_valid(s)) return NULL;
  lt_strbuf_t b = {0};
  put_skel(&b, s);
  return lt__strbuf_take(&b);
}
