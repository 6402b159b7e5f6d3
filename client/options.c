/* options.c: the option table (LT_OPTIONS in options.h) and the one parser behind it.
 * lt_eval_set, the LITHIUM_* environment and the command-line tools all go through
 * lt__options_set, so keys, values and messages are the same everywhere. Evaluator thread
 * only (the warning about unknown environment variables is once a process, any thread). */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <lithium/error.h>
#include "lasterr.h"
#include "options.h"
#include "curve.h"
#include "log.h"

extern char **environ;

static const lt_option_t table[] = {
#define ROW(key, type, field, def, lo, hi, arg, help)                                              \
  {#key, type, offsetof(lt_options_t, field), def, lo, hi, arg, help},
    LT_OPTIONS(ROW)
#undef ROW
};

enum { NOPTIONS = sizeof table / sizeof table[0] };
_Static_assert(NOPTIONS <= 64, "lt_options_t.given has one bit per option");

/* Every field has the C type its row's type says. */
#define FIELD_TYPE_OK(key, type, field, def, lo, hi, arg, help)                                    \
  _Static_assert(                                                                              \
      _Generic(((lt_options_t *)0)->field,                                                     \
          int: (type) == LT_OPT_BOOL || (type) == LT_OPT_ENUM,                                 \
          uint32_t: (type) == LT_OPT_UINT || (type) == LT_OPT_AUTO,                                                  \
          double: (type) == LT_OPT_DOUBLE,                                                     \
          char *: ((type) == LT_OPT_PATH &&                                                    \
                   sizeof(((lt_options_t *)0)->field) == sizeof(char *)) ||                    \
              ((type) == LT_OPT_KEY && sizeof(((lt_options_t *)0)->field) == 41),              \
          default: 0),                                                                         \
      "option " #key ": the field's type does not match the row");
LT_OPTIONS(FIELD_TYPE_OK)
#undef FIELD_TYPE_OK

/* Pairs of options where the first may not exceed the second. */
static const struct { const char *lo, *hi; } ordered_pairs[] = {{"min_threads", "max_threads"}};

const lt_option_t *lt__options_table(size_t *n) {
  *n = NOPTIONS;
  return table;
}

/* key_eq compares keys with '-' and '_' alike. */
static int key_eq(const char *a, const char *b) {
  for (; *a != '\0' && *b != '\0'; a++, b++) {
    int ua = *a == '-' ? '_' : *a, ub = *b == '-' ? '_' : *b;
    if (ua != ub) return 0;
  }
  return *a == *b;
}

const lt_option_t *lt__option_find(const char *key) {
  for (size_t i = 0; i < NOPTIONS; i++)
    if (key_eq(table[i].key, key)) return &table[i];
  return NULL;
}

static void *field(lt_options_t *o, const lt_option_t *r) {
  return (char *)o + r->offset;
}

/* expected describes the values `r` takes, for messages. */
static void expected(const lt_option_t *r, char *buf, size_t len) {
  switch (r->type) {
  case LT_OPT_BOOL:
    snprintf(buf, len, "on/off, true/false, yes/no or 1/0");
    break;
  case LT_OPT_UINT:
    snprintf(buf, len, "an integer from %.0f to %.0f", r->lo, r->hi);
    break;
  case LT_OPT_AUTO:
    snprintf(buf, len, "auto or an integer from %.0f to %.0f", r->lo, r->hi);
    break;
  case LT_OPT_DOUBLE:
    snprintf(buf, len, "a number from %g to %g", r->lo, r->hi);
    break;
  case LT_OPT_ENUM: {
    const char *last = strrchr(r->arg, '|');
    snprintf(buf, len, "%.*s or %s", (int)(last - r->arg), r->arg, last + 1);
    for (char *c = buf; *c != '\0'; c++)
      if (*c == '|') *c = ',';
    break;
  }
  default:
    snprintf(buf, len, "a non-empty %s", r->arg);
  }
}

__attribute__((format(printf, 2, 3))) static int fail(lt_options_t *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(o->error, sizeof o->error, fmt, ap);
  va_end(ap);
  return lt__fail(LT_EINVAL, "%s", o->error); /* also the thread's (lt_last_error) */
}

static int bad_value(lt_options_t *o, const lt_option_t *r, const char *name, const char *v) {
  char want[128];
  expected(r, want, sizeof want);
  return fail(o, "bad value '%.200s' for %s (expected %s)", v, name, want);
}

static int parse_bool(const char *v, int *out) {
  static const char *const words[][2] = {
      {"off", "on"}, {"false", "true"}, {"no", "yes"}, {"0", "1"}};
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    for (int b = 0; b < 2; b++)
      if (strcasecmp(v, words[i][b]) == 0) {
        *out = b;
        return LT_OK;
      }
  return LT_EINVAL;
}

static int parse_uint(const char *v, const lt_option_t *r, uint32_t *out) {
  if (*v == '\0' || *v == '-' || *v == '+') return LT_EINVAL;
  char *end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (errno != 0 || *end != '\0' || n < (unsigned long long)r->lo || n > (unsigned long long)r->hi)
    return LT_EINVAL;
  *out = (uint32_t)n;
  return LT_OK;
}

static int parse_double(const char *v, const lt_option_t *r, double *out) {
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (errno != 0 || end == v || *end != '\0' || !(d >= r->lo && d <= r->hi)) return LT_EINVAL;
  *out = d;
  return LT_OK;
}

/* parse_enum finds `v` (any case) among the '|'-separated values of `arg`. */
static int parse_enum(const char *v, const char *arg, int *out) {
  size_t vlen = strlen(v);
  for (int i = 0;; i++) {
    size_t n = strcspn(arg, "|");
    if (n == vlen && strncasecmp(arg, v, n) == 0) {
      *out = i;
      return LT_OK;
    }
    if (arg[n] == '\0') return LT_EINVAL;
    arg += n + 1;
  }
}

/* The switches a mode sets, with their values under plain and optimized (-1: left as it
 * is). Throttling stays a separate switch until it is validated on loaded grids: plain turns
 * it off, optimized leaves it. */
static const struct {
  const char *key;
  int plain, optimized;
} mode_switches[] = {
    {"lookahead", 0, 1},  {"lazy", 0, 1},  {"backup", 0, 1},
    {"quarantine", 0, 1}, {"grain", 1, 0}, {"throttle", 0, -1},
};

int lt__option_follows_mode(const char *key) {
  const lt_option_t *r = lt__option_find(key);
  for (size_t i = 0; r != NULL && i < sizeof mode_switches / sizeof mode_switches[0]; i++)
    if (lt__option_find(mode_switches[i].key) == r) return 1;
  return 0;
}

/* apply_mode sets every switch of mode_switches that was not set itself (through
 * lt_eval_set, a LITHIUM_<KEY> variable or the tool's --key, before the mode or after) to
 * the mode's value: "plain" is the original Lithium (one instruction in flight per server,
 * values through the client, one task an instruction), "optimized" turns task lookahead,
 * lazy binding, backups and quarantine on and grain to auto. A switch the user set wins
 * whatever the order, so a program's mode does not undo LITHIUM_GRAIN=8 read before it. */
static void apply_mode(lt_options_t *o) {
  for (size_t i = 0; i < sizeof mode_switches / sizeof mode_switches[0]; i++) {
    const lt_option_t *r = lt__option_find(mode_switches[i].key);
    assert(r != NULL && (r->type == LT_OPT_BOOL || r->type == LT_OPT_AUTO));
    int v = o->mode == 1 ? mode_switches[i].plain : mode_switches[i].optimized;
    if (v < 0 || (o->given >> (r - table) & 1)) continue;
    if (r->type == LT_OPT_BOOL)
      *(int *)field(o, r) = v;
    else
      *(uint32_t *)field(o, r) = (uint32_t)v;
  }
}

/* set_key reads a CURVE key now, so that a bad file is an error of the set naming the
 * reason: the client's key pair (curve_key) or a server's public key (curve_server). */
static int set_key(lt_options_t *o, const lt_option_t *r, const char *name, const char *v) {
  int pair = r->offset == offsetof(lt_options_t, curve_pub);
  if (v[0] == '\0' || strcmp(v, "off") == 0) {
    if (pair) explicit_bzero(o->curve_sec, sizeof o->curve_sec);
    ((char *)field(o, r))[0] = '\0';
    return LT_OK;
  }
  char err[512];
  int rc = pair ? lt__curve_load_keypair(v, o->curve_pub, o->curve_sec, err, sizeof err)
                : lt__curve_read_public(v, o->curve_server, err, sizeof err);
  if (rc == LT_OK) return LT_OK;
  lt__log(LT_LOG_ERROR, "%s: %s", r->key, err);
  if (pair) o->curve_pub[0] = o->curve_sec[0] = '\0';
  return fail(o, "bad value '%.200s' for %s (%s)", v, name, err);
}

int lt__option_given(const lt_options_t *o, const char *key) {
  const lt_option_t *r = lt__option_find(key);
  return r != NULL && (o->given >> (r - table) & 1);
}

/* check_order refuses `v` for `r` when it contradicts an ordered pair's other option that
 * was set (a default that contradicts it waits for lt__options_check). */
static int check_order(lt_options_t *o, const lt_option_t *r, const char *name, const char *v,
                       uint32_t n) {
  for (size_t i = 0; i < sizeof ordered_pairs / sizeof ordered_pairs[0]; i++) {
    int is_lo = strcmp(r->key, ordered_pairs[i].lo) == 0;
    if (!is_lo && strcmp(r->key, ordered_pairs[i].hi) != 0) continue;
    const char *key = is_lo ? ordered_pairs[i].hi : ordered_pairs[i].lo;
    if (!lt__option_given(o, key)) continue;
    const lt_option_t *other = lt__option_find(key);
    uint32_t m = *(uint32_t *)field(o, other);
    if (is_lo ? n > m : n < m)
      return fail(o, "bad value '%.200s' for %s (expected at %s %s, %u)", v, name,
                  is_lo ? "most" : "least", other->key, (unsigned)m);
  }
  return LT_OK;
}

/* set_row parses `v` into the field of `r`; `name` is how messages call the option. */
static int set_row(lt_options_t *o, const lt_option_t *r, const char *name, const char *v) {
  void *f = field(o, r);
  int rc = LT_OK;
  switch (r->type) {
  case LT_OPT_BOOL:
    rc = parse_bool(v, f);
    break;
  case LT_OPT_UINT: {
    uint32_t n;
    rc = parse_uint(v, r, &n);
    if (rc == LT_OK) {
      if ((rc = check_order(o, r, name, v, n)) != LT_OK) return rc;
      *(uint32_t *)f = n;
    }
    break;
  }
  case LT_OPT_AUTO:
    if (strcasecmp(v, "auto") == 0)
      *(uint32_t *)f = 0;
    else
      rc = parse_uint(v, r, f);
    break;
  case LT_OPT_DOUBLE:
    rc = parse_double(v, r, f);
    break;
  case LT_OPT_ENUM:
    rc = parse_enum(v, r->arg, f);
    if (rc == LT_OK && r->offset == offsetof(lt_options_t, mode)) apply_mode(o);
    break;
  case LT_OPT_PATH: {
    if (*v == '\0') return bad_value(o, r, name, v);
    char *copy = strdup(v);
    if (copy == NULL) {
      fail(o, "%s: out of memory", name);
      return lt__fail(LT_ENOMEM, "%s", o->error);
    }
    free(*(char **)f);
    *(char **)f = copy;
    return LT_OK;
  }
  case LT_OPT_KEY:
    return set_key(o, r, name, v);
  }
  return rc == LT_OK ? LT_OK : bad_value(o, r, name, v);
}

void lt__options_init(lt_options_t *o) {
  memset(o, 0, sizeof *o);
  for (size_t i = 0; i < NOPTIONS; i++)
    if (table[i].def != NULL) set_row(o, &table[i], table[i].key, table[i].def);
  o->given = 0;
  o->error[0] = '\0';
}

int lt__options_set(lt_options_t *o, const char *key, const char *value) {
  if (key == NULL || value == NULL) return fail(o, "option key or value is NULL");
  const lt_option_t *r = lt__option_find(key);
  if (r == NULL) return fail(o, "unknown option '%.200s'", key);
  int rc = set_row(o, r, r->key, value);
  if (rc == LT_OK) o->given |= UINT64_C(1) << (r - table);
  return rc;
}

int lt__options_check(lt_options_t *o) {
  for (size_t i = 0; i < sizeof ordered_pairs / sizeof ordered_pairs[0]; i++) {
    const lt_option_t *lo = lt__option_find(ordered_pairs[i].lo);
    const lt_option_t *hi = lt__option_find(ordered_pairs[i].hi);
    uint32_t a = *(uint32_t *)field(o, lo), b = *(uint32_t *)field(o, hi);
    if (a <= b) continue;
    int lo_default = !lt__option_given(o, lo->key);
    return fail(o, "%s %u%s is above %s %u: set %s too", lo->key, (unsigned)a,
                lo_default ? " (the default)" : "", hi->key, (unsigned)b,
                lo_default ? lo->key : hi->key);
  }
  return LT_OK;
}

/* env_name writes LITHIUM_<KEY> for `key`. */
static void env_name(const char *key, char *buf, size_t len) {
  size_t n = (size_t)snprintf(buf, len, "LITHIUM_");
  for (; *key != '\0' && n + 1 < len; key++)
    buf[n++] = (char)((*key >= 'a' && *key <= 'z') ? *key - 'a' + 'A' : *key);
  buf[n] = '\0';
}

/* warn_unknown_env warns about every LITHIUM_* variable that names no option. */
static void warn_unknown_env(void) {
  static atomic_int warned;
  if (atomic_exchange(&warned, 1) != 0) return;
  static const char *const allowed[] = {LT_OPTION_ENV_ALLOWED};
  for (char **e = environ; e != NULL && *e != NULL; e++) {
    if (strncmp(*e, "LITHIUM_", 8) != 0) continue;
    size_t n = strcspn(*e, "=");
    int known = 0;
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0] && !known; i++)
      known = strlen(allowed[i]) == n && strncmp(*e, allowed[i], n) == 0;
    for (size_t i = 0; i < NOPTIONS && !known; i++) {
      char name[64];
      env_name(table[i].key, name, sizeof name);
      known = strlen(name) == n && strncmp(*e, name, n) == 0;
    }
    if (!known)
      lt__log(LT_LOG_WARN, "environment variable %.*s names no option; ignored", (int)n, *e);
  }
}

int lt__options_from_env(lt_options_t *o) {
  warn_unknown_env();
  for (size_t i = 0; i < NOPTIONS; i++) {
    char name[64];
    env_name(table[i].key, name, sizeof name);
    const char *v = getenv(name);
    if (v == NULL) continue;
    int rc = set_row(o, &table[i], name, v);
    if (rc != LT_OK) return rc;
    o->given |= UINT64_C(1) << i;
  }
  return LT_OK;
}

void lt__options_clear(lt_options_t *o) {
  for (size_t i = 0; i < NOPTIONS; i++)
    if (table[i].type == LT_OPT_PATH) {
      free(*(char **)field(o, &table[i]));
      *(char **)field(o, &table[i]) = NULL;
    }
  explicit_bzero(o->curve_sec, sizeof o->curve_sec);
}
