/* json.c: the JSON writer behind lt_eval_stats_json. Writes only what it is told; knows
 * nothing of evaluators. One thread per writer. */
#include "json.h"

static void put(lt_json_t *j, const char *s, size_t n) {
  lt__strbuf_put(&j->out, s, n);
}

static void put_string(lt_json_t *j, const char *s) {
  put(j, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
    if (*p == '"' || *p == '\\') {
      char esc[2] = {'\\', (char)*p};
      put(j, esc, 2);
    } else if (*p < 0x20) {
      lt__strbuf_printf(&j->out, "\\u%04x", *p);
    } else {
      put(j, (const char *)p, 1);
    }
  }
  put(j, "\"", 1);
}

/* begin writes the comma and the key of the next member. */
static void begin(lt_json_t *j, const char *key) {
  if (j->need_comma) put(j, ",", 1);
  if (key != NULL) {
    put_string(j, key);
    put(j, ":", 1);
  }
  j->need_comma = 1;
}

void lt__json_object_open(lt_json_t *j, const char *key) {
  begin(j, key);
  put(j, "{", 1);
  j->need_comma = 0;
}

void lt__json_object_close(lt_json_t *j) {
  put(j, "}", 1);
  j->need_comma = 1;
}

void lt__json_array_open(lt_json_t *j, const char *key) {
  begin(j, key);
  put(j, "[", 1);
  j->need_comma = 0;
}

void lt__json_array_close(lt_json_t *j) {
  put(j, "]", 1);
  j->need_comma = 1;
}

void lt__json_u64(lt_json_t *j, const char *key, uint64_t v) {
  begin(j, key);
  lt__strbuf_printf(&j->out, "%llu", (unsigned long long)v);
}

void lt__json_double(lt_json_t *j, const char *key, double v) {
  begin(j, key);
  lt__strbuf_printf(&j->out, "%.6g", v);
}

void lt__json_bool(lt_json_t *j, const char *key, int v) {
  begin(j, key);
  put(j, v ? "true" : "false", v ? 4 : 5);
}

void lt__json_str(lt_json_t *j, const char *key, const char *v) {
  begin(j, key);
  put_string(j, v);
}

void lt__json_clear(lt_json_t *j) {
  lt__strbuf_clear(&j->out);
  j->need_comma = 0;
}

char *lt__json_take(lt_json_t *j) {
  j->need_comma = 0;
  return lt__strbuf_take(&j->out);
}
