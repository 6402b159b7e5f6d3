/* format.c: lt_skel_format, the canonical expression of a skeleton tree, the inverse of
 * parse.c: a seq without parameter prints as a bare kernel name, parameters keep printable
 * ASCII and escape every other byte. Reads trees only. Any thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "skel.h"

typedef struct strbuf {
  char *data;
  size_t len, cap;
  int oom;
} strbuf_t;

static void put(strbuf_t *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap == 0 ? 64 : b->cap;
    while (b->len + n + 1 > cap)
      cap *= 2;
    char *d = realloc(b->data, cap);
    if (d == NULL) {
      b->oom = 1;
      return;
    }
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static void puts_(strbuf_t *b, const char *s) {
  put(b, s, strlen(s));
}

/* put_param writes a parameter as a double-quoted string: printable ASCII other than '"'
 * and '\' as is, those two as \" and \\, and any other byte as \xHH. */
static void put_param(strbuf_t *b, const unsigned char *p, size_t n) {
  static const char hex[] = "0123456789abcdef";
  put(b, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    char esc[4] = {'\\', (char)p[i], 0, 0};
    if (p[i] == '"' || p[i] == '\\')
      put(b, esc, 2);
    else if (p[i] >= 0x20 && p[i] < 0x7f)
      put(b, esc + 1, 1);
    else {
      esc[1] = 'x';
      esc[2] = hex[p[i] >> 4];
      esc[3] = hex[p[i] & 0xf];
      put(b, esc, 4);
    }
  }
  put(b, "\"", 1);
}

static void put_skel(strbuf_t *b, const lt_skel_t *s) {
  switch (s->kind) {
  case LT_SKEL_SEQ:
    if (s->param_len == 0) {
      puts_(b, s->kernel);
      return;
    }
    puts_(b, "seq(");
    puts_(b, s->kernel);
    puts_(b, ", ");
    put_param(b, s->param, s->param_len);
    puts_(b, ")");
    return;
  case LT_SKEL_FARM:
    puts_(b, "farm(");
    put_skel(b, s->children[0]);
    puts_(b, ")");
    return;
  case LT_SKEL_PIPE:
    puts_(b, "pipe(");
    for (size_t i = 0; i < s->nchildren; i++) {
      if (i > 0) puts_(b, ", ");
      put_skel(b, s->children[i]);
    }
    puts_(b, ")");
    return;
  case LT_SKEL_MAP:
  case LT_SKEL_DC:
    puts_(b, s->kind == LT_SKEL_MAP ? "map(" : "dc(");
    puts_(b, s->kernel);
    puts_(b, ", ");
    if (s->kind == LT_SKEL_DC) {
      puts_(b, s->divide);
      puts_(b, ", ");
    }
    put_skel(b, s->children[0]);
    puts_(b, ", ");
    puts_(b, s->combine);
    puts_(b, ")");
    return;
  }
}

LT_API char *lt_skel_format(const lt_skel_t *s) {
  /* Trees come from the builders or the parser; a malformed one has no expression. */
  if (!lt__skel_valid(s)) return NULL;
  strbuf_t b = {0};
  put_skel(&b, s);
  if (b.oom) {
    free(b.data);
    return NULL;
  }
  return b.data;
}
