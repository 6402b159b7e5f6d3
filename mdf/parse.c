/* parse.c: lt_skel_parse, a recursive-descent parser from the expression syntax (DESIGN.md
 * §8) to a skeleton tree. It only builds trees (skel.c) and never touches modules, so the
 * names it accepts are checked for form, not for existence. Any thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "kind.h"
#include "lasterr.h"
#include "module.h"
#include "skel.h"
#include "vec.h"

/* MAX_DEPTH bounds the nesting of skeletons so that a hostile expression cannot exhaust the
 * stack of the parser (or of the recursive code that later walks the tree). */
#define MAX_DEPTH 1000
/* TOKEN_SHOW bounds how much of a found token an error message quotes. */
#define TOKEN_SHOW 40

typedef struct parser {
  const char *start; /* the whole expression, for offsets */
  const char *p;     /* next unread byte */
  char *err;
  size_t errlen;
  int failed; /* an error has been reported; later reports are ignored */
} parser_t;

static int is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* is_name is any byte of a kernel name or keyword: the union of module and function
 * bytes, and the colon between them. */
static int is_name(char c) {
  return is_word(c) || c == '-' || c == '.' || c == ':';
}

static void skip_space(parser_t *ps) {
  while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
    ps->p++;
}

/* name_len is the length of the run of name bytes at `p`. */
static size_t name_len(const char *p) {
  size_t n = 0;
  while (is_name(p[n]))
    n++;
  return n;
}

/* show_bytes appends `n` bytes of `s` to `out` (of size `size`, already holding `*used`),
 * printable ASCII as is and any other byte as \xHH, so messages stay one readable line. */
static void show_bytes(char *out, size_t size, size_t *used, const char *s, size_t n) {
  for (size_t i = 0; i < n && *used + 5 < size; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c < 0x7f)
      out[(*used)++] = (char)c;
    else
      *used += (size_t)snprintf(out + *used, size - *used, "\\x%02x", c);
  }
  out[*used] = '\0';
}

/* describe writes what sits at `at` for an error message: "end of input", a quoted run of
 * name bytes (truncated), or one quoted byte. `n` > 0 quotes exactly n bytes instead. */
static void describe(const char *at, size_t n, char *out, size_t size) {
  if (*at == '\0') {
    snprintf(out, size, "end of input");
    return;
  }
  if (n == 0) n = is_name(*at) ? name_len(at) : 1;
  size_t used = 0;
  out[used++] = '\'';
  show_bytes(out, size, &used, at, n < TOKEN_SHOW ? n : TOKEN_SHOW);
  if (n > TOKEN_SHOW && used + 4 < size) used += (size_t)snprintf(out + used, size - used, "...");
  if (used + 2 <= size) {
    out[used++] = '\'';
    out[used] = '\0';
  }
}

/* fail_at reports "offset N: expected X, found Y" for position `at`, where Y describes the
 * `n` bytes at `at` (see describe). Only the first report is kept. */
static void fail_at(parser_t *ps, const char *at, size_t n, const char *expected) {
  if (ps->failed) return;
  ps->failed = 1;
  if (ps->err == NULL || ps->errlen == 0) return;
  char found[TOKEN_SHOW * 4 + 16];
  describe(at, n, found, sizeof found);
  snprintf(ps->err, ps->errlen, "offset %zu: expected %s, found %s", (size_t)(at - ps->start),
           expected, found);
}

/* expect_char skips whitespace and consumes `c`, or reports that `what` was expected. */
static int expect_char(parser_t *ps, char c, const char *what) {
  skip_space(ps);
  if (*ps->p != c) {
    fail_at(ps, ps->p, 0, what);
    return LT_EINVAL;
  }
  ps->p++;
  return LT_OK;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* escape decodes the escape sequence at `q` (a backslash): the byte it stands for, or -1
 * when it is not one of \" \\ \n \t \r \0 \xHH. */
static int escape(const char *q) {
  switch (q[1]) {
  case '"':
  case '\\':
    return (unsigned char)q[1];
  case 'n':
    return '\n';
  case 't':
    return '\t';
  case 'r':
    return '\r';
  case '0':
    return 0;
  case 'x': {
    int hi = hex_digit(q[2]);
    int lo = hi >= 0 ? hex_digit(q[3]) : -1;
    return lo >= 0 ? hi << 4 | lo : -1;
  }
  default:
    return -1;
  }
}

/* parse_string reads a double-quoted string with escapes \" \\ \n \t \r \0 \xHH into a new
 * buffer *out of *len bytes (NULL when empty). */
static int parse_string(parser_t *ps, char **out, size_t *len) {
  skip_space(ps);
  const char *open = ps->p;
  if (*open != '"') {
    fail_at(ps, open, 0, "a string parameter \"...\"");
    return LT_EINVAL;
  }
  const char *q = open + 1;
  size_t raw = 0; /* the decoded string is never longer than its source */
  while (q[raw] != '\0' && q[raw] != '"')
    raw += q[raw] == '\\' && q[raw + 1] != '\0' ? 2 : 1;
  char *buf = malloc(raw + 1);
  if (buf == NULL) return LT_ENOMEM;
  size_t n = 0;
  for (;;) {
    char c = *q;
    if (c == '\0' || (c == '\\' && q[1] == '\0')) {
      char what[64];
      snprintf(what, sizeof what, "'\"' closing the string opened at offset %zu",
               (size_t)(open - ps->start));
      fail_at(ps, q + (c == '\\'), 0, what);
      free(buf);
      return LT_EINVAL;
    }
    if (c == '"') break;
    if (c != '\\') {
      buf[n++] = c;
      q++;
      continue;
    }
    int byte = escape(q);
    if (byte < 0) {
      size_t shown = 2; /* the backslash and its letter; for \x up to the first non-hex */
      while (q[1] == 'x' && shown < 4 && q[shown] != '\0')
        if (hex_digit(q[shown++]) < 0) break;
      fail_at(ps, q, shown, "an escape \\\" \\\\ \\n \\t \\r \\0 or \\xHH");
      free(buf);
      return LT_EINVAL;
    }
    buf[n++] = (char)byte;
    q += q[1] == 'x' ? 4 : 2;
  }
  ps->p = q + 1;
  if (n == 0) {
    free(buf);
    buf = NULL;
  }
  *out = buf;
  *len = n;
  return LT_OK;
}

/* parse_kernel reads a kernel name "module:function" and the parameter that may follow it
 * (`m:f "bytes"`) into the empty slot `k`. */
static int parse_kernel(parser_t *ps, lt_skel_kernel_t *k) {
  skip_space(ps);
  size_t n = name_len(ps->p);
  char *name = n > 0 ? strndup(ps->p, n) : NULL;
  if (n > 0 && name == NULL) return LT_ENOMEM;
  if (name == NULL || !lt__kernel_name_valid(name)) {
    free(name);
    fail_at(ps, ps->p, 0, "a kernel name module:function");
    return LT_EINVAL;
  }
  ps->p += n;
  k->name = name;
  skip_space(ps);
  if (*ps->p != '"') return LT_OK;
  char *param = NULL;
  int rc = parse_string(ps, &param, &k->param_len);
  k->param = param;
  return rc;
}

static int parse_skel(parser_t *ps, int depth, lt_skel_kind_t instead, lt_skel_t **out);

/* parse_child reads one skeleton and appends it to the children of `s` (`*cap` of them
 * allocated). */
static int parse_child(parser_t *ps, int depth, lt_skel_kind_t instead, lt_skel_t *s, size_t *cap) {
  if (LT_VEC_RESERVE(s->children, *cap, s->nchildren + 1) != LT_OK) return LT_ENOMEM;
  lt_skel_t *child = NULL;
  int rc = parse_skel(ps, depth + 1, instead, &child);
  if (rc == LT_OK) s->children[s->nchildren++] = child;
  return rc;
}

/* keyword_at tells whether the word at the parser's position is the keyword of `kind`. */
static int keyword_at(parser_t *ps, lt_skel_kind_t kind) {
  skip_space(ps);
  return lt__skel_kind_by_name(ps->p, name_len(ps->p)) == lt__skel_kind(kind);
}

/* parse_arg reads argument `a` (kind.h) of node `s`, at nesting `depth`. An argument that
 * may be followed by more of itself sets *closing to what the closing parenthesis is
 * expected as. */
static int parse_arg(parser_t *ps, int depth, const lt_skel_arg_t *a, lt_skel_t *s, size_t *cap,
                     const char **closing) {
  int rc;
  switch (a->kind) {
  case LT_ARG_KERNEL:
    if (a->instead != 0 && keyword_at(ps, a->instead))
      return parse_child(ps, depth, a->instead, s, cap);
    return parse_kernel(ps, lt__skel_slot(s, a->slot));
  case LT_ARG_PARAM: {
    lt_skel_kernel_t *k = lt__skel_slot(s, LT_SLOT_KERNEL);
    char *param = NULL;
    skip_space(ps);
    if (*ps->p != ',' || k->param_len > 0) {
      *closing = k->param_len > 0 ? "')' (the kernel has its parameter)" : "',' or ')'";
      return LT_OK;
    }
    ps->p++;
    rc = parse_string(ps, &param, &k->param_len);
    k->param = param;
    return rc;
  }
  case LT_ARG_SKEL:
    return parse_child(ps, depth, 0, s, cap);
  case LT_ARG_SKELS: {
    /* The program's own pipe may end with a reduce of its stream. */
    lt_skel_kind_t last = depth == 1 && s->kind == LT_SKEL_PIPE ? LT_SKEL_REDUCE : 0;
    *closing = "',' or ')'";
    while ((rc = parse_child(ps, depth, last, s, cap)) == LT_OK) {
      skip_space(ps);
      if (*ps->p != ',') break;
      if (s->children[s->nchildren - 1]->kind == LT_SKEL_REDUCE) {
        fail_at(ps, ps->p, 0, "')' (a reduce is the program's last stage)");
        return LT_EINVAL;
      }
      ps->p++;
    }
    if (rc == LT_OK && s->nchildren == 1 && s->children[0]->kind == LT_SKEL_REDUCE) {
      fail_at(ps, ps->p, 0, "a stage before the reduce, as in pipe(m:f, reduce(m:combine))");
      return LT_EINVAL;
    }
    return rc;
  }
  }
  return LT_EINVAL;
}

/* parse_node reads the rest of a skeleton of kind `d` after its keyword `word`: its
 * arguments in the order of the kinds table, comma-separated, in parentheses. */
static int parse_node(parser_t *ps, int depth, const lt_skel_kind_desc_t *d, const char *word,
                      lt_skel_t **out) {
  char what[48];
  snprintf(what, sizeof what, "'(' after %s", word);
  int rc = expect_char(ps, '(', what);
  if (rc != LT_OK) return rc;
  lt_skel_t *s = calloc(1, sizeof *s);
  if (s == NULL) return LT_ENOMEM;
  s->kind = d->kind;
  size_t cap = 0;
  const char *closing = "')'";
  for (uint32_t i = 0; i < d->nargs && rc == LT_OK; i++) {
    if (i > 0 && d->args[i].kind != LT_ARG_PARAM) rc = expect_char(ps, ',', "','");
    if (rc == LT_OK) rc = parse_arg(ps, depth, &d->args[i], s, &cap, &closing);
  }
  if (rc == LT_OK) rc = expect_char(ps, ')', closing);
  if (rc != LT_OK) {
    lt_skel_free(s);
    return rc;
  }
  *out = s;
  return LT_OK;
}

/* parse_bare reads a bare kernel name as a node of the kind that stands for one. */
static int parse_bare(parser_t *ps, lt_skel_t **out) {
  const lt_skel_kind_desc_t *d = lt__skel_kind_bare();
  lt_skel_t *s = calloc(1, sizeof *s);
  if (s == NULL) return LT_ENOMEM;
  s->kind = d->kind;
  int rc = parse_kernel(ps, lt__skel_slot(s, d->args[0].slot));
  if (rc != LT_OK) {
    lt_skel_free(s);
    return rc;
  }
  *out = s;
  return LT_OK;
}

/* parse_skel reads one skeleton: a bare kernel name (a name run holding ':') or a keyword
 * and its arguments. `depth` is the nesting level of this skeleton, 1 at the top; `instead`
 * the kind it stands for in place of a kernel (0: none), the only place a kind that stands
 * only for a kernel (reduce) is accepted. */
static int parse_skel(parser_t *ps, int depth, lt_skel_kind_t instead, lt_skel_t **out) {
  skip_space(ps);
  const char *at = ps->p;
  if (depth > MAX_DEPTH) {
    char what[64];
    snprintf(what, sizeof what, "nesting at most %d deep", MAX_DEPTH);
    fail_at(ps, at, 0, what);
    return LT_EINVAL;
  }
  size_t n = name_len(at);
  if (memchr(at, ':', n) != NULL) return parse_bare(ps, out);
  const lt_skel_kind_desc_t *d = lt__skel_kind_by_name(at, n);
  if (d != NULL && d->only_instead && d->kind != instead) {
    fail_at(ps, at, 0,
            "a skeleton (reduce stands only as a map's merge, map(m:split, S, "
            "reduce(m:combine)), or as the last stage of the program's pipe)");
    return LT_EINVAL;
  }
  if (d != NULL) {
    char word[32];
    snprintf(word, sizeof word, "%.*s", (int)n, at);
    ps->p += n;
    return parse_node(ps, depth, d, word, out);
  }
  char kinds[96], expected[128];
  lt__skel_kind_list(kinds, sizeof kinds);
  snprintf(expected, sizeof expected, "a skeleton (module:function, %s)", kinds);
  fail_at(ps, at, 0, expected);
  return LT_EINVAL;
}

LT_API int lt_skel_parse(const char *expr, lt_skel_t **out, char *err, size_t errlen) {
  if (out != NULL) *out = NULL;
  if (err != NULL && errlen > 0) err[0] = '\0';
  if (expr == NULL || out == NULL) {
    if (err != NULL && errlen > 0)
      snprintf(err, errlen, "offset 0: expected an expression, found %s",
               expr == NULL ? "NULL" : "a NULL result pointer");
    return lt__fail_null("lt_skel_parse", expr == NULL ? "expr" : "out", 1);
  }
  char mine[512]; /* the message, also when the caller wants none */
  mine[0] = '\0';
  parser_t ps = {.start = expr, .p = expr, .err = mine, .errlen = sizeof mine};
  lt_skel_t *s = NULL;
  int rc = parse_skel(&ps, 1, 0, &s);
  if (rc == LT_OK) {
    skip_space(&ps);
    if (*ps.p != '\0') {
      fail_at(&ps, ps.p, 0, "end of input");
      rc = LT_EINVAL;
    }
  }
  if (rc != LT_OK) {
    lt_skel_free(s);
    if (rc == LT_ENOMEM) snprintf(mine, sizeof mine, "out of memory");
    if (err != NULL && errlen > 0) snprintf(err, errlen, "%s", mine);
    return lt__fail_skel(rc, "lt_skel_parse: expr '%.200s%s': %s", expr,
                         strlen(expr) > 200 ? "..." : "", mine);
  }
  *out = s;
  return LT_OK;
}
