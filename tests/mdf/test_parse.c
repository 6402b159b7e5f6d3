/* test_parse.c: the expression syntax (lt_skel_parse) and the canonical form
 * (lt_skel_format): each construct, whitespace, escapes and every byte value in parameters,
 * exact error messages with offsets, the nesting limit, and a property test over random
 * trees (format then parse gives the same tree; format is a fixed point). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "skel.h"

/* parse_ok parses `expr`, requires success and returns the tree. */
static lt_skel_t *parse_ok(const char *expr) {
  lt_skel_t *s = NULL;
  char err[256] = "";
  int rc = lt_skel_parse(expr, &s, err, sizeof err);
  cr_assert_eq(rc, LT_OK, "parse \"%s\": rc %d, %s", expr, rc, err);
  cr_assert_not_null(s);
  return s;
}

/* check_parse requires that `expr` parses to `want` and formats to `canon`; frees `want`. */
static void check_parse(const char *expr, lt_skel_t *want, const char *canon) {
  cr_assert_not_null(want);
  lt_skel_t *s = parse_ok(expr);
  cr_assert(lt_skel_equal(s, want), "parse \"%s\" gave another tree", expr);
  char *text = lt_skel_format(s);
  cr_assert_not_null(text);
  cr_assert_str_eq(text, canon);
  free(text);
  lt_skel_free(s);
  lt_skel_free(want);
}

/* check_error requires that `expr` fails with LT_EINVAL, no tree and message `msg`. */
static void check_error(const char *expr, const char *msg) {
  lt_skel_t *s = (lt_skel_t *)&s; /* not NULL, so the test sees it being cleared */
  char err[512];
  memset(err, 'x', sizeof err);
  int rc = lt_skel_parse(expr, &s, err, sizeof err);
  cr_assert_eq(rc, LT_EINVAL, "parse \"%s\": rc %d", expr, rc);
  cr_assert_null(s);
  cr_assert_str_eq(err, msg, "parse \"%s\"", expr);
}

Test(parse, reduce_ends_the_program_or_merges_a_map) {
  check_parse("pipe(m:f, reduce(m:c))", lt_pipeline(lt_seq("m:f"), lt_reduce("m:c"), NULL),
              "pipe(m:f, reduce(m:c))");
  check_parse("pipe(m:f, map(m:s, m:g, reduce(m:c)), reduce(m:d \"p\"))",
              lt_pipeline(lt_seq("m:f"), lt_map_reduce("m:s", lt_seq("m:g"), lt_reduce("m:c")),
                          lt_skel_param(lt_reduce("m:d"), "combine", "p", 1), NULL),
              "pipe(m:f, map(m:s, m:g, reduce(m:c)), reduce(m:d \"p\"))");
  const char *where = "expected a skeleton (reduce stands only as a map's merge, map(m:split, S, "
                      "reduce(m:combine)), or as the last stage of the program's pipe), found "
                      "'reduce'";
  char msg[256];
  snprintf(msg, sizeof msg, "offset 0: %s", where);
  check_error("reduce(m:c)", msg);
  snprintf(msg, sizeof msg, "offset 15: %s", where);
  check_error("farm(pipe(m:f, reduce(m:c)))", msg);
  check_error("pipe(pipe(m:f, reduce(m:c)))", msg);
  check_error("pipe(m:f, reduce(m:c), m:g)",
              "offset 21: expected ')' (a reduce is the program's last stage), found ','");
  check_error("pipe(reduce(m:c))", "offset 16: expected a stage before the reduce, as in "
                                   "pipe(m:f, reduce(m:combine)), found ')'");
  /* The builders make what the parser refuses; validation refuses it too. */
  lt_skel_t *s = lt_farm(lt_pipeline(lt_seq("m:f"), lt_reduce("m:c"), NULL));
  cr_assert_null(lt_skel_format(s));
  cr_assert(!lt_skel_reduces(s));
  lt_skel_free(s);
}

Test(parse, each_construct) {
  check_parse("m:f", lt_seq("m:f"), "m:f");
  check_parse("seq(m:f)", lt_seq("m:f"), "m:f");
  check_parse("seq(m:f, \"ab\")", lt_seq_with("m:f", "ab", 2), "seq(m:f, \"ab\")");
  check_parse("seq(m:f, \"\")", lt_seq("m:f"), "m:f");
  check_parse("farm(m:f)", lt_farm(lt_seq("m:f")), "farm(m:f)");
  check_parse("pipe(a:b)", lt_pipeline(lt_seq("a:b"), NULL), "pipe(a:b)");
  check_parse("pipe(a:b, c:d, e:f)", lt_pipeline(lt_seq("a:b"), lt_seq("c:d"), lt_seq("e:f"), NULL),
              "pipe(a:b, c:d, e:f)");
  check_parse("pipeline(a:b, c:d)", lt_pipeline(lt_seq("a:b"), lt_seq("c:d"), NULL),
              "pipe(a:b, c:d)");
  check_parse("map(m:split, w:f, m:merge)", lt_map("m:split", lt_seq("w:f"), "m:merge"),
              "map(m:split, w:f, m:merge)");
  check_parse("dc(m:c, m:d, m:b, m:k)", lt_dc("m:c", "m:d", lt_seq("m:b"), "m:k"),
              "dc(m:c, m:d, m:b, m:k)");
  check_parse("pipe(farm(seq(img-1.0:blur, \"r=3\")), map(s:s, dc(a:c, a:d, a:b, a:k), s:m))",
              lt_pipeline(lt_farm(lt_seq_with("img-1.0:blur", "r=3", 3)),
                          lt_map("s:s", lt_dc("a:c", "a:d", lt_seq("a:b"), "a:k"), "s:m"), NULL),
              "pipe(farm(seq(img-1.0:blur, \"r=3\")), map(s:s, dc(a:c, a:d, a:b, a:k), s:m))");
}

Test(parse, keywords_are_also_module_names) {
  check_parse("seq:f", lt_seq("seq:f"), "seq:f");
  check_parse("pipe(farm:x, pipeline:y)", lt_pipeline(lt_seq("farm:x"), lt_seq("pipeline:y"), NULL),
              "pipe(farm:x, pipeline:y)");
  check_parse("map(map:a, dc:b, seq:c)", lt_map("map:a", lt_seq("dc:b"), "seq:c"),
              "map(map:a, dc:b, seq:c)");
  check_parse("seq(seq:seq)", lt_seq("seq:seq"), "seq:seq");
}

Test(parse, whitespace_between_tokens) {
  check_parse("  \t\nm:f \n", lt_seq("m:f"), "m:f");
  check_parse("seq ( m:f , \"x y\" )", lt_seq_with("m:f", "x y", 3), "seq(m:f, \"x y\")");
  check_parse("farm\n(\tm:f\n)", lt_farm(lt_seq("m:f")), "farm(m:f)");
  check_parse("pipe(a:b,c:d)", lt_pipeline(lt_seq("a:b"), lt_seq("c:d"), NULL), "pipe(a:b, c:d)");
  check_parse("\r\npipe (\n  a:b ,\n  c:d\n)\r\n", lt_pipeline(lt_seq("a:b"), lt_seq("c:d"), NULL),
              "pipe(a:b, c:d)");
  check_parse("dc(a:c,a:d,a:b,a:k)", lt_dc("a:c", "a:d", lt_seq("a:b"), "a:k"),
              "dc(a:c, a:d, a:b, a:k)");
  check_parse(" map ( a:s ,\tfarm ( a:b ) ,\n a:m ) ", lt_map("a:s", lt_farm(lt_seq("a:b")), "a:m"),
              "map(a:s, farm(a:b), a:m)");
}

Test(parse, escapes_in_parameters) {
  const char want[] = "\"\\\n\t\r\0AJ\xfe\x7f\x01";
  check_parse("seq(m:f, \"\\\"\\\\\\n\\t\\r\\0\\x41\\x4a\\xFe\\x7f\\x01\")",
              lt_seq_with("m:f", want, sizeof want - 1),
              "seq(m:f, \"\\\"\\\\\\x0a\\x09\\x0d\\x00AJ\\xfe\\x7f\\x01\")");
  /* Raw bytes other than '"' and '\' stand for themselves, even non-ASCII and controls. */
  check_parse("seq(m:f, \"\xc3\xa9\x01\n'\")", lt_seq_with("m:f", "\xc3\xa9\x01\n'", 5),
              "seq(m:f, \"\\xc3\\xa9\\x01\\x0a'\")");
}

Test(parse, every_byte_value_round_trips) {
  unsigned char all[256];
  for (int i = 0; i < 256; i++)
    all[i] = (unsigned char)i;
  lt_skel_t *s = lt_seq_with("m:f", all, sizeof all);
  char *text = lt_skel_format(s);
  cr_assert_not_null(text);
  lt_skel_t *back = parse_ok(text);
  cr_assert(lt_skel_equal(s, back));
  cr_assert_eq(back->k[LT_SLOT_KERNEL].param_len, 256);
  cr_assert_eq(memcmp(back->k[LT_SLOT_KERNEL].param, all, 256), 0);
  free(text);
  lt_skel_free(back);
  lt_skel_free(s);

  for (int i = 0; i < 256; i++) {
    unsigned char c = (unsigned char)i;
    char want[32];
    if (c == '"' || c == '\\')
      snprintf(want, sizeof want, "seq(m:f, \"\\%c\")", c);
    else if (c >= 0x20 && c < 0x7f)
      snprintf(want, sizeof want, "seq(m:f, \"%c\")", c);
    else
      snprintf(want, sizeof want, "seq(m:f, \"\\x%02x\")", c);
    /* Also with the byte in the middle, where a \0 must not end the parameter. */
    unsigned char three[3] = {'a', c, 'b'};
    s = lt_seq_with("m:f", &c, 1);
    lt_skel_t *s3 = lt_seq_with("m:f", three, 3);
    text = lt_skel_format(s);
    char *text3 = lt_skel_format(s3);
    cr_assert_str_eq(text, want, "byte %d", i);
    back = parse_ok(text);
    lt_skel_t *back3 = parse_ok(text3);
    cr_assert(lt_skel_equal(s, back), "byte %d", i);
    cr_assert(lt_skel_equal(s3, back3), "byte %d", i);
    free(text);
    free(text3);
    lt_skel_free(back);
    lt_skel_free(back3);
    lt_skel_free(s);
    lt_skel_free(s3);
  }
}

Test(format, null_and_shapes) {
  cr_assert_null(lt_skel_format(NULL));
  lt_skel_t *s = lt_pipeline(lt_seq("a:b"), lt_farm(lt_seq_with("c:d", "\"q\"", 3)),
                             lt_dc("e:c", "e:d", lt_pipeline(lt_seq("f:g"), NULL), "e:k"), NULL);
  char *text = lt_skel_format(s);
  cr_assert_str_eq(text, "pipe(a:b, farm(seq(c:d, \"\\\"q\\\"\")), dc(e:c, e:d, pipe(f:g), e:k))");
  free(text);
  lt_skel_free(s);
}

Test(parse, errors_have_offsets_and_messages) {
  static const char skel[] =
      "expected a skeleton (module:function, seq, farm, pipe, map, dc, while or if), found ";
  static const char kern[] = "expected a kernel name module:function, found ";
  static const char esc[] = "expected an escape \\\" \\\\ \\n \\t \\r \\0 or \\xHH, found ";
  static const struct {
    const char *expr, *prefix, *rest;
  } cases[] = {
      /* empty input and unknown words */
      {"", "offset 0: ", "S end of input"},
      {" \n\t", "offset 3: ", "S end of input"},
      {"foo(m:f)", "offset 0: ", "S 'foo'"},
      {"farmer(m:f)", "offset 0: ", "S 'farmer'"},
      {"Farm(m:f)", "offset 0: ", "S 'Farm'"},
      {"m.x", "offset 0: ", "S 'm.x'"},
      {"(m:f)", "offset 0: ", "S '('"},
      {"\x01", "offset 0: ", "S '\\x01'"},
      {"farm(\"x\")", "offset 5: ", "S '\"'"},
      /* missing parentheses */
      {"farm m:f", "offset 5: ", "expected '(' after farm, found 'm:f'"},
      {"seq", "offset 3: ", "expected '(' after seq, found end of input"},
      {"pipeline m:f", "offset 9: ", "expected '(' after pipeline, found 'm:f'"},
      {"map[a:s, b:f, a:m]", "offset 3: ", "expected '(' after map, found '['"},
      {"dc", "offset 2: ", "expected '(' after dc, found end of input"},
      {"farm(m:f", "offset 8: ", "expected ')', found end of input"},
      {"farm(m:f, n:g)", "offset 8: ", "expected ')', found ','"},
      {"map(a:s, b:f, a:m", "offset 17: ", "expected ')', found end of input"},
      /* missing commas */
      {"map(m:s m:f, m:m)", "offset 8: ", "expected ',', found 'm:f'"},
      {"map(m:s, m:f m:m)", "offset 13: ", "expected ',', found 'm:m'"},
      {"dc(m:c, m:d, m:f m:k)", "offset 17: ", "expected ',', found 'm:k'"},
      {"dc(m:c m:d, m:f, m:k)", "offset 7: ", "expected ',', found 'm:d'"},
      {"pipe(m:f m:g)", "offset 9: ", "expected ',' or ')', found 'm:g'"},
      {"seq(m:f m:g)", "offset 8: ", "expected ',' or ')', found 'm:g'"},
      {"seq(m:f, \"x\" \"y\")", "offset 13: ", "expected ')', found '\"'"},
      {"seq(m:f, 3)", "offset 9: ", "expected a string parameter \"...\", found '3'"},
      {"seq(m:f,)", "offset 8: ", "expected a string parameter \"...\", found ')'"},
      /* bad kernel names */
      {"farm(m:f-g)", "offset 5: ", "K 'm:f-g'"},
      {"seq(m)", "offset 4: ", "K 'm'"},
      {"seq(:f)", "offset 4: ", "K ':f'"},
      {"m:", "offset 0: ", "K 'm:'"},
      {"m:f:g", "offset 0: ", "K 'm:f:g'"},
      {"map(m.x:s, a:b, m:)", "offset 16: ", "K 'm:'"},
      {"dc(a:c, farm(a:d), a:b, a:k)", "offset 8: ", "K 'farm'"},
      {"map(a:s, b:f, )", "offset 14: ", "K ')'"},
      {"seq(farm(a:b))", "offset 4: ", "K 'farm'"},
      /* strings */
      {"seq(m:f, \"abc",
       "offset 13: ", "expected '\"' closing the string opened at offset 9, found end of input"},
      {"seq(m:f, \"abc\\\"",
       "offset 15: ", "expected '\"' closing the string opened at offset 9, found end of input"},
      {"seq(m:f, \"abc\\",
       "offset 14: ", "expected '\"' closing the string opened at offset 9, found end of input"},
      {"seq(m:f, \"a\\qb\")", "offset 11: ", "E '\\q'"},
      {"seq(m:f, \"\\x4g\")", "offset 10: ", "E '\\x4g'"},
      {"seq(m:f, \"\\x\")", "offset 10: ", "E '\\x\"'"},
      {"seq(m:f, \"\\u0041\")", "offset 10: ", "E '\\u'"},
      {"seq(m:f, \"\\\xff\")", "offset 10: ", "E '\\\\xff'"},
      /* trailing garbage */
      {"m:f)", "offset 3: ", "expected end of input, found ')'"},
      {"farm(m:f) x", "offset 10: ", "expected end of input, found 'x'"},
      {"m:f m:g", "offset 4: ", "expected end of input, found 'm:g'"},
      {"m:f,", "offset 3: ", "expected end of input, found ','"},
      /* empty pipe */
      {"pipe()", "offset 5: ", "S ')'"},
      {"pipe( )", "offset 6: ", "S ')'"},
      {"pipe(m:f,)", "offset 9: ", "S ')'"},
      {"pipeline()", "offset 9: ", "S ')'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char msg[512];
    const char *rest = cases[i].rest;
    const char *lead = "";
    if (rest[0] != '\0' && rest[1] == ' ' && (rest[0] == 'S' || rest[0] == 'K' || rest[0] == 'E')) {
      lead = rest[0] == 'S' ? skel : rest[0] == 'K' ? kern : esc;
      rest += 2;
    }
    snprintf(msg, sizeof msg, "%s%s%s", cases[i].prefix, lead, rest);
    check_error(cases[i].expr, msg);
  }
}

Test(parse, long_names_and_tokens) {
  /* A kernel name has at most 255 bytes. */
  char expr[400];
  memset(expr, 'a', 300);
  expr[1] = ':';
  expr[255] = '\0';
  lt_skel_t *s = parse_ok(expr);
  lt_skel_free(s);
  expr[255] = 'a';
  expr[256] = '\0';
  char msg[512];
  snprintf(msg, sizeof msg, "offset 0: expected a kernel name module:function, found 'a:%.38s...'",
           expr + 2);
  check_error(expr, msg);
}

/* nest returns `n` farms around m:f. */
static char *nest(int n) {
  char *e = malloc((size_t)n * 6 + 4);
  cr_assert_not_null(e);
  size_t len = 0;
  for (int i = 0; i < n; i++)
    len += (size_t)sprintf(e + len, "farm(");
  len += (size_t)sprintf(e + len, "m:f");
  for (int i = 0; i < n; i++)
    e[len++] = ')';
  e[len] = '\0';
  return e;
}

Test(parse, nesting_limit) {
  char *e = nest(999); /* 1000 skeletons deep: the limit */
  lt_skel_t *s = parse_ok(e);
  char *text = lt_skel_format(s);
  cr_assert_str_eq(text, e);
  free(text);
  lt_skel_free(s);
  free(e);

  e = nest(1000);
  check_error(e, "offset 5000: expected nesting at most 1000 deep, found 'm:f'");
  free(e);

  /* A hostile expression much deeper than the limit fails at the same place, quickly. */
  size_t n = 1000000;
  e = malloc(n + 1);
  cr_assert_not_null(e);
  for (size_t i = 0; i < n; i++)
    e[i] = "pipe("[i % 5];
  e[n] = '\0';
  check_error(e, "offset 5000: expected nesting at most 1000 deep, found 'pipe'");
  free(e);
}

Test(parse, bad_arguments_and_short_buffers) {
  lt_skel_t *s = NULL;
  char err[64];
  cr_assert_eq(lt_skel_parse(NULL, &s, err, sizeof err), LT_EINVAL);
  cr_assert_null(s);
  cr_assert_str_eq(err, "offset 0: expected an expression, found NULL");
  cr_assert_eq(lt_skel_parse("m:f", NULL, err, sizeof err), LT_EINVAL);
  cr_assert_eq(lt_skel_parse("m:f", &s, NULL, 0), LT_OK);
  lt_skel_free(s);
  cr_assert_eq(lt_skel_parse("farm(", &s, NULL, 0), LT_EINVAL);
  cr_assert_null(s);
  cr_assert_eq(lt_skel_parse("farm(", &s, NULL, 5), LT_EINVAL);

  /* errlen 0 leaves err untouched; a short buffer gets a truncated, terminated message. */
  memset(err, 'x', sizeof err);
  cr_assert_eq(lt_skel_parse("farm(", &s, err, 0), LT_EINVAL);
  cr_assert_eq(err[0], 'x');
  cr_assert_eq(lt_skel_parse("farm(", &s, err, 10), LT_EINVAL);
  cr_assert_str_eq(err, "offset 5:");
  cr_assert_eq(err[10], 'x');
  cr_assert_eq(lt_skel_parse("farm(", &s, err, 1), LT_EINVAL);
  cr_assert_str_eq(err, "");
}

/* The property test: random trees over every kind, kernel names drawn from the full
 * alphabets (keywords included) and random parameters. */

static uint64_t rng_state;

static uint32_t rnd(uint32_t n) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state % n);
}

static void random_kernel(char *out) {
  static const char *const words[] = {"seq", "farm", "pipe", "pipeline", "map", "dc"};
  static const char mod[] = "abcxyzABCXYZ0189_.-";
  static const char fn[] = "abcxyzABCXYZ0189_";
  size_t n = 0;
  if (rnd(4) == 0) {
    n = (size_t)sprintf(out, "%s", words[rnd(6)]);
  } else {
    for (uint32_t i = 0, len = 1 + rnd(8); i < len; i++)
      out[n++] = mod[rnd(sizeof mod - 1)];
  }
  out[n++] = ':';
  if (rnd(4) == 0) {
    n += (size_t)sprintf(out + n, "%s", words[rnd(6)]);
  } else {
    for (uint32_t i = 0, len = 1 + rnd(8); i < len; i++)
      out[n++] = fn[rnd(sizeof fn - 1)];
  }
  out[n] = '\0';
}

/* random_bytes fills p with up to `max` mostly printable bytes (so both escaped and plain
 * runs occur); returns how many. */
static size_t random_bytes(unsigned char *p, size_t max) {
  size_t len = rnd((uint32_t)max + 1);
  for (size_t i = 0; i < len; i++)
    p[i] = (unsigned char)(rnd(3) == 0 ? rnd(256) : 0x20 + rnd(0x5f));
  return len;
}

/* with_random_param gives the kernel of `s` named `role` a random parameter half the time. */
static lt_skel_t *with_random_param(lt_skel_t *s, const char *role) {
  unsigned char p[24];
  if (s == NULL || rnd(2) == 0) return s;
  return lt_skel_param(s, role, p, random_bytes(p, sizeof p));
}

static lt_skel_t *random_tree(int depth) {
  char a[32], b[32], c[32];
  random_kernel(a);
  random_kernel(b);
  random_kernel(c);
  uint32_t kind = depth <= 0 ? 0 : rnd(8);
  switch (kind) {
  case 0: {
    if (rnd(2) == 0) return lt_seq(a);
    unsigned char p[24];
    size_t len = random_bytes(p, sizeof p);
    return lt_seq_with(a, p, len);
  }
  case 1:
    return lt_farm(random_tree(depth - 1));
  case 2: {
    lt_skel_t *st[4];
    uint32_t n = 1 + rnd(4);
    for (uint32_t i = 0; i < n; i++)
      st[i] = random_tree(depth - 1);
    switch (n) {
    case 1:
      return lt_pipeline(st[0], NULL);
    case 2:
      return lt_pipeline(st[0], st[1], NULL);
    case 3:
      return lt_pipeline(st[0], st[1], st[2], NULL);
    default:
      return lt_pipeline(st[0], st[1], st[2], st[3], NULL);
    }
  }
  case 3:
    return with_random_param(with_random_param(lt_map(a, random_tree(depth - 1), c), "split"),
                             "merge");
  case 4:
    return with_random_param(
        with_random_param(with_random_param(lt_dc(a, b, random_tree(depth - 1), c), "cond"),
                          "divide"),
        "combine");
  case 5:
    return with_random_param(
        lt_map_reduce(a, random_tree(depth - 1), with_random_param(lt_reduce(c), "combine")),
        "split");
  case 6:
    return with_random_param(lt_while(a, random_tree(depth - 1)), "cond");
  default:
    return with_random_param(lt_if(a, random_tree(depth - 1), random_tree(depth - 1)), "cond");
  }
}

/* Loose printing: the same tree in a non-canonical spelling (random whitespace, seq(...)
 * around bare kernels, "pipeline", other escapes, raw bytes) that must parse the same. */

static void loose_space(char **p) {
  static const char ws[] = " \t\n\r";
  for (uint32_t i = 0, n = rnd(3) == 0 ? rnd(3) : 0; i < n; i++)
    *(*p)++ = ws[rnd(4)];
}

static void loose_put(char **p, const char *s) {
  loose_space(p);
  size_t n = strlen(s);
  memcpy(*p, s, n);
  *p += n;
}

static void loose_param(char **p, const unsigned char *b, size_t n) {
  loose_space(p);
  *(*p)++ = '"';
  for (size_t i = 0; i < n; i++) {
    unsigned char c = b[i];
    if (c == '"' || c == '\\')
      *p += sprintf(*p, "\\%c", c);
    else if (c == '\n' && rnd(2))
      *p += sprintf(*p, "\\n");
    else if (c == '\t' && rnd(2))
      *p += sprintf(*p, "\\t");
    else if (c == '\r' && rnd(2))
      *p += sprintf(*p, "\\r");
    else if (c == 0 && rnd(2))
      *p += sprintf(*p, "\\0");
    else if (c != 0 && rnd(2))
      *(*p)++ = (char)c; /* raw byte */
    else
      *p += sprintf(*p, rnd(2) ? "\\x%02x" : "\\x%02X", c);
  }
  *(*p)++ = '"';
}

/* loose_kernel writes kernel slot `k`: its name, and its parameter after it when it has
 * one (always for `forced`, a seq's parameter written `m:f "p"`). */
static void loose_kernel(char **p, const lt_skel_kernel_t *k) {
  loose_put(p, k->name);
  if (k->param_len > 0) loose_param(p, k->param, k->param_len);
}

static void loose_print(char **p, const lt_skel_t *s) {
  const lt_skel_kernel_t *k0 = &s->k[LT_SLOT_KERNEL];
  switch (s->kind) {
  case LT_SKEL_SEQ:
    if (rnd(3) == 0) { /* the parameter after the name, bare or in seq(...) */
      int bare = rnd(2);
      if (!bare) loose_put(p, "seq(");
      loose_kernel(p, k0);
      if (!bare) loose_put(p, ")");
      return;
    }
    if (k0->param_len == 0 && rnd(2)) {
      loose_put(p, k0->name);
      return;
    }
    loose_put(p, "seq");
    loose_put(p, "(");
    loose_put(p, k0->name);
    if (k0->param_len > 0 || rnd(4) == 0) {
      loose_put(p, ",");
      loose_param(p, k0->param, k0->param_len);
    }
    loose_put(p, ")");
    return;
  case LT_SKEL_FARM:
    loose_put(p, "farm");
    loose_put(p, "(");
    loose_print(p, s->children[0]);
    loose_put(p, ")");
    return;
  case LT_SKEL_PIPE:
    loose_put(p, rnd(2) ? "pipe" : "pipeline");
    loose_put(p, "(");
    for (size_t i = 0; i < s->nchildren; i++) {
      if (i > 0) loose_put(p, ",");
      loose_print(p, s->children[i]);
    }
    loose_put(p, ")");
    return;
  case LT_SKEL_MAP:
  case LT_SKEL_DC:
    loose_put(p, s->kind == LT_SKEL_MAP ? "map" : "dc");
    loose_put(p, "(");
    loose_kernel(p, k0);
    loose_put(p, ",");
    if (s->kind == LT_SKEL_DC) {
      loose_kernel(p, &s->k[LT_SLOT_DIVIDE]);
      loose_put(p, ",");
    }
    loose_print(p, s->children[0]);
    loose_put(p, ",");
    if (s->nchildren == 2)
      loose_print(p, s->children[1]);
    else
      loose_kernel(p, &s->k[LT_SLOT_COMBINE]);
    loose_put(p, ")");
    return;
  case LT_SKEL_REDUCE:
    loose_put(p, "reduce(");
    loose_kernel(p, &s->k[LT_SLOT_COMBINE]);
    loose_put(p, ")");
    return;
  case LT_SKEL_WHILE:
  case LT_SKEL_IF:
    loose_put(p, s->kind == LT_SKEL_WHILE ? "while(" : "if(");
    loose_kernel(p, k0);
    for (size_t i = 0; i < s->nchildren; i++) {
      loose_put(p, ",");
      loose_print(p, s->children[i]);
    }
    loose_put(p, ")");
    return;
  }
}

static size_t count_nodes(const lt_skel_t *s) {
  size_t n = 1;
  for (size_t i = 0; i < s->nchildren; i++)
    n += count_nodes(s->children[i]);
  return n;
}

Test(parse, random_trees_round_trip) {
  rng_state = 0x9e3779b97f4a7c15u;
  static char loose[1 << 20];
  int kinds[LT_SKEL_IF + 1] = {0};
  for (int iter = 0; iter < 6000; iter++) {
    lt_skel_t *s = random_tree((int)rnd(6));
    cr_assert_not_null(s);
    kinds[s->kind]++;
    char *text = lt_skel_format(s);
    cr_assert_not_null(text);
    lt_skel_t *back = NULL;
    char err[256] = "";
    cr_assert_eq(lt_skel_parse(text, &back, err, sizeof err), LT_OK, "%s: %s", text, err);
    cr_assert(lt_skel_equal(s, back), "round trip changed %s", text);
    char *again = lt_skel_format(back);
    cr_assert_str_eq(again, text);

    cr_assert_lt(count_nodes(s), 2000);
    char *p = loose;
    loose_print(&p, s);
    loose_space(&p);
    *p = '\0';
    cr_assert_lt((size_t)(p - loose), sizeof loose);
    /* A raw NUL cannot occur: loose_param escapes it always. */
    lt_skel_t *lb = NULL;
    cr_assert_eq(lt_skel_parse(loose, &lb, err, sizeof err), LT_OK, "%s: %s", loose, err);
    cr_assert(lt_skel_equal(s, lb), "loose spelling %s gave another tree than %s", loose, text);

    free(text);
    free(again);
    lt_skel_free(back);
    lt_skel_free(lb);
    lt_skel_free(s);
  }
  for (int k = LT_SKEL_SEQ; k <= LT_SKEL_IF; k++)
    if (k != LT_SKEL_REDUCE) cr_assert_gt(kinds[k], 100, "kind %d", k);
}
