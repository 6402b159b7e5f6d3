/* option_set.c: the option table seen from outside the library: iteration over LT_OPTIONS
 * (a tool's --help) and lt_options_t, a set of values judged by options.c alone, without an
 * evaluator (a tool's command line checked before anything starts). Everything is parsed
 * and checked by options.c; this file only forwards and formats. Any thread; one thread per
 * set. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium.h>
#include "lasterr.h"
#include "options.h"

LT_API size_t lt_option_count(void) {
  size_t n;
  lt__options_table(&n);
  return n;
}

LT_API int lt_option_info(size_t i, const char **key, const char **arg, const char **def,
                          const char **help) {
  size_t n;
  const lt_option_t *t = lt__options_table(&n);
  if (i >= n)
    return lt__fail(LT_EINVAL, "lt_option_info: i %zu is out of range (%zu options)", i, n);
  if (key != NULL) *key = t[i].key;
  if (arg != NULL) *arg = t[i].arg;
  if (def != NULL) *def = t[i].def;
  if (help != NULL) *help = t[i].help;
  return LT_OK;
}

LT_API int lt_options_new(lt_options_t **out) {
  if (out == NULL) return lt__fail_null("lt_options_new", "out", 0);
  *out = malloc(sizeof **out);
  if (*out == NULL) return lt__fail(LT_ENOMEM, "lt_options_new: out of memory");
  lt__options_init(*out);
  return LT_OK;
}

LT_API int lt_options_from_env(lt_options_t *o) {
  return o != NULL ? lt__options_from_env(o) : lt__fail_null("lt_options_from_env", "o", 0);
}

LT_API int lt_options_set(lt_options_t *o, const char *key, const char *value) {
  return o != NULL ? lt__options_set(o, key, value) : lt__fail_null("lt_options_set", "o", 0);
}

LT_API int lt_options_check(lt_options_t *o) {
  return o != NULL ? lt__options_check(o) : lt__fail_null("lt_options_check", "o", 0);
}

/* enum_name writes the `index`th of the '|'-separated names of `arg` into buf. */
static void enum_name(const char *arg, int index, char *buf, size_t len) {
  for (int i = 0; i < index && arg != NULL; i++) {
    arg = strchr(arg, '|');
    if (arg != NULL) arg++;
  }
  snprintf(buf, len, "%.*s", arg != NULL ? (int)strcspn(arg, "|") : 0, arg != NULL ? arg : "");
}

LT_API int lt_options_get(lt_options_t *o, const char *key, char *buf, size_t len) {
  if (o == NULL || buf == NULL) return lt__fail_null("lt_options_get", o == NULL ? "o" : "buf", 0);
  if (len == 0) return lt__fail(LT_EINVAL, "lt_options_get: len is 0 (no room for the value)");
  buf[0] = '\0';
  const lt_option_t *r = key != NULL ? lt__option_find(key) : NULL;
  if (r == NULL) {
    snprintf(o->error, sizeof o->error, "unknown option '%.200s'", key != NULL ? key : "(null)");
    return lt__fail(LT_EINVAL, "lt_options_get: %s", o->error);
  }
  const void *f = (const char *)o + r->offset;
  switch (r->type) {
  case LT_OPT_BOOL:
    snprintf(buf, len, "%s", *(const int *)f ? "on" : "off");
    break;
  case LT_OPT_UINT:
    snprintf(buf, len, "%u", (unsigned)*(const uint32_t *)f);
    break;
  case LT_OPT_AUTO:
    if (*(const uint32_t *)f == 0)
      snprintf(buf, len, "auto");
    else
      snprintf(buf, len, "%u", (unsigned)*(const uint32_t *)f);
    break;
  case LT_OPT_DOUBLE:
    snprintf(buf, len, "%g", *(const double *)f);
    break;
  case LT_OPT_ENUM:
    enum_name(r->arg, *(const int *)f, buf, len);
    break;
  case LT_OPT_PATH:
    snprintf(buf, len, "%s", *(char *const *)f != NULL ? *(char *const *)f : "");
    break;
  case LT_OPT_KEY:
    snprintf(buf, len, "%s", (const char *)f);
    break;
  }
  return LT_OK;
}

LT_API const char *lt_options_error(const lt_options_t *o) {
  return o != NULL ? o->error : "";
}

LT_API void lt_options_free(lt_options_t *o) {
  if (o == NULL) return;
  lt__options_clear(o);
  free(o);
}
