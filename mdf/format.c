/* format.c: lt_skel_format, the canonical expression of a skeleton tree, the inverse of
 * parse.c: a seq without parameter prints as a bare kernel name, a seq's parameter as its
 * second argument and any other kernel's after its name; parameters keep printable ASCII
 * and escape every other byte. Reads trees only. Any thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "kind.h"
#include "lasterr.h"
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

/* has_param_arg tells whether kind `d` writes its kernel's parameter as an argument of its
 * own (`seq(m:f, "p")`) rather than after the name (`m:f "p"`). */
static int has_param_arg(const lt_skel_kind_desc_t *d) {
  for (uint32_t i = 0; i < d->nargs; i++)
    if (d->args[i].kind == LT_ARG_PARAM) return 1;
  return 0;
}

/* put_kernel writes kernel argument `a` of `s`: the skeleton standing in its place, or the
 * name and, unless the kind writes it as an argument, its parameter. */
static void put_kernel(lt_strbuf_t *b, const lt_skel_t *s, const lt_skel_arg_t *a, size_t *child) {
  if (lt__skel_arg_instead(s, a)) {
    put_skel(b, s->children[(*child)++]);
    return;
  }
  const lt_skel_kernel_t *k = lt__skel_slot_get(s, a->slot);
  lt__strbuf_puts(b, k->name);
  if (k->param_len == 0 || has_param_arg(lt__skel_kind(s->kind))) return;
  lt__strbuf_puts(b, " ");
  put_param(b, k->param, k->param_len);
}

/* put_arg writes argument `a` (kind.h) of `s`, with the ", " before it when not `first`. */
static void put_arg(lt_strbuf_t *b, const lt_skel_t *s, const lt_skel_arg_t *a, size_t *child,
                    int first) {
  const lt_skel_kernel_t *k = lt__skel_slot_get(s, LT_SLOT_KERNEL);
  if (a->kind == LT_ARG_PARAM && k->param_len == 0) return;
  if (!first) lt__strbuf_puts(b, ", ");
  switch (a->kind) {
  case LT_ARG_KERNEL:
    put_kernel(b, s, a, child);
    return;
  case LT_ARG_PARAM:
    put_param(b, k->param, k->param_len);
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
  const lt_skel_kernel_t *k = lt__skel_slot_get(s, d->args[0].slot);
  if (d->bare && k->param_len == 0) {
    lt__strbuf_puts(b, k->name);
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
  if (s == NULL) return lt__fail_null("lt_skel_format", "s", 0), NULL;
  if (!lt__skel_valid(s)) {
    lt__fail(LT_EINVAL, "lt_skel_format: s is no valid skeleton tree");
    return NULL;
  }
  lt_strbuf_t b = {0};
  put_skel(&b, s);
  char *text = lt__strbuf_take(&b);
  if (text == NULL) lt__fail(LT_ENOMEM, "lt_skel_format: out of memory");
  return text;
}
