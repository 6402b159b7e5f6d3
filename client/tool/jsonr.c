/* jsonr.c: the tool's JSON reader (jsonr.h): a recursive descent over the text, at most
 * MAX_DEPTH deep, that builds the tree as it goes. Any thread. */
#include "jsonr.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

typedef struct reader {
  const char *p, *start;
  char *err;
  size_t len;
  int failed;
} reader_t;

static int fault(reader_t *r, const char *what) {
  if (!r->failed) snprintf(r->err, r->len, "%s at byte %zu", what, (size_t)(r->p - r->start));
  r->failed = 1;
  return -1;
}

static void skip_ws(reader_t *r) {
  while (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')
    r->p++;
}

static int value(reader_t *r, lt_jv_t *v, int depth);

/* put_utf8 writes code point cp (at most 0xFFFF) as UTF-8 at *o. */
static void put_utf8(char **o, unsigned cp) {
  if (cp < 0x80) {
    *(*o)++ = (char)cp;
  } else if (cp < 0x800) {
    *(*o)++ = (char)(0xC0 | cp >> 6);
    *(*o)++ = (char)(0x80 | (cp & 0x3F));
  } else {
    *(*o)++ = (char)(0xE0 | cp >> 12);
    *(*o)++ = (char)(0x80 | (cp >> 6 & 0x3F));
    *(*o)++ = (char)(0x80 | (cp & 0x3F));
  }
}

/* string reads a string (the reader at its opening quote) into a new *out. */
static int string(reader_t *r, char **out) {
  const char *q = ++r->p;
  size_t n = 0;
  while (*q != '"') {
    if (*q == '\0' || (unsigned char)*q < 0x20) return fault(r, "unterminated string");
    if (*q == '\\' && q[1] != '\0') q++;
    q++;
    n++;
  }
  char *s = malloc(3 * n + 1), *o = s; /* \uXXXX takes at most 3 bytes */
  if (s == NULL) return fault(r, "out of memory");
  while (*r->p != '"') {
    char c = *r->p++;
    if (c != '\\') {
      *o++ = c;
      continue;
    }
    c = *r->p++;
    const char *esc = strchr("\"\\/bfnrt", c);
    if (c != '\0' && esc != NULL) {
      *o++ = "\"\\/\b\f\n\r\t"[esc - "\"\\/bfnrt"];
    } else if (c == 'u') {
      char hex[5] = {0};
      int ok = 1;
      for (int k = 0; k < 4 && ok; k++)
        ok = isxdigit((unsigned char)(hex[k] = r->p[k]));
      unsigned cp = ok ? (unsigned)strtoul(hex, NULL, 16) : 0;
      if (!ok) {
        free(s);
        return fault(r, "bad \\u escape");
      }
      r->p += 4;
      put_utf8(&o, cp);
    } else {
      free(s);
      return fault(r, "bad escape");
    }
  }
  r->p++;
  *o = '\0';
  *out = s;
  return 0;
}

/* elements reads the members of an object or the elements of an array (the reader past
 * its opening bracket) up to `close`. */
static int elements(reader_t *r, lt_jv_t *v, char close, int depth) {
  skip_ws(r);
  if (*r->p == close) {
    r->p++;
    return 0;
  }
  for (;;) {
    lt_jv_t *kids = realloc(v->kids, (v->n + 1) * sizeof *kids);
    if (kids == NULL) return fault(r, "out of memory");
    v->kids = kids;
    memset(&kids[v->n], 0, sizeof kids[0]);
    if (close == '}') {
      char **keys = realloc(v->keys, (v->n + 1) * sizeof *keys);
      if (keys == NULL) return fault(r, "out of memory");
      v->keys = keys;
      keys[v->n] = NULL;
      skip_ws(r);
      if (*r->p != '"') return fault(r, "expected a member name");
      int rc = string(r, &keys[v->n]);
      v->n++; /* freed with the rest from now on */
      if (rc != 0) return -1;
      skip_ws(r);
      if (*r->p++ != ':') return fault(r, "expected ':'");
      if (value(r, &kids[v->n - 1], depth + 1) != 0) return -1;
    } else {
      v->n++;
      if (value(r, &kids[v->n - 1], depth + 1) != 0) return -1;
    }
    skip_ws(r);
    if (*r->p == ',') {
      r->p++;
      continue;
    }
    if (*r->p++ == close) return 0;
    return fault(r, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static int literal(reader_t *r, const char *word) {
  size_t n = strlen(word);
  if (strncmp(r->p, word, n) != 0) return fault(r, "unexpected text");
  r->p += n;
  return 0;
}

static int number(reader_t *r, lt_jv_t *v) {
  char *end;
  errno = 0;
  double d = strtod(r->p, &end);
  if (end == r->p || !isfinite(d) || strchr("-0123456789", *r->p) == NULL ||
      strspn(r->p, "-+.eE0123456789") < (size_t)(end - r->p))
    return fault(r, "bad number");
  r->p = end;
  v->type = LT_JV_NUM;
  v->num = d;
  return 0;
}

static int value(reader_t *r, lt_jv_t *v, int depth) {
  if (depth > MAX_DEPTH) return fault(r, "nested too deep");
  skip_ws(r);
  switch (*r->p) {
  case '{':
  case '[':
    v->type = *r->p == '{' ? LT_JV_OBJ : LT_JV_ARR;
    r->p++;
    return elements(r, v, v->type == LT_JV_OBJ ? '}' : ']', depth);
  case '"':
    v->type = LT_JV_STR;
    return string(r, &v->str);
  case 't':
  case 'f':
    v->type = LT_JV_BOOL;
    v->num = *r->p == 't';
    return literal(r, *r->p == 't' ? "true" : "false");
  case 'n':
    v->type = LT_JV_NULL;
    return literal(r, "null");
  default:
    return number(r, v);
  }
}

int lt__jv_parse(const char *text, lt_jv_t *out, char *err, size_t len) {
  memset(out, 0, sizeof *out);
  reader_t r = {text, text, err, len, 0};
  if (value(&r, out, 0) == 0) {
    skip_ws(&r);
    if (*r.p == '\0') return 0;
    fault(&r, "text after the value");
  }
  lt__jv_free(out);
  return -1;
}

void lt__jv_free(lt_jv_t *v) {
  for (size_t i = 0; i < v->n; i++) {
    lt__jv_free(&v->kids[i]);
    if (v->keys != NULL) free(v->keys[i]);
  }
  free(v->kids);
  free(v->keys);
  free(v->str);
  memset(v, 0, sizeof *v);
}

const lt_jv_t *lt__jv_get(const lt_jv_t *o, const char *key) {
  if (o == NULL || o->type != LT_JV_OBJ) return NULL;
  for (size_t i = 0; i < o->n; i++)
    if (strcmp(o->keys[i], key) == 0) return &o->kids[i];
  return NULL;
}

double lt__jv_num(const lt_jv_t *o, const char *key, double dflt) {
  const lt_jv_t *v = lt__jv_get(o, key);
  return v != NULL && (v->type == LT_JV_NUM || v->type == LT_JV_BOOL) ? v->num : dflt;
}

const char *lt__jv_str(const lt_jv_t *o, const char *key, const char *dflt) {
  const lt_jv_t *v = lt__jv_get(o, key);
  return v != NULL && v->type == LT_JV_STR ? v->str : dflt;
}
