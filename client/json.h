/* json.h: a small JSON writer for lt_eval_stats_json: keys and scalar values into a
 * growing string, objects and arrays nested by open/close calls, commas handled. One
 * thread per writer. */
#ifndef LT_JSON_H
#define LT_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef struct lt_json {
  char *buf;
  size_t len, cap;
  int need_comma;
  int failed; /* out of memory: lt__json_take gives NULL */
} lt_json_t;

/* Each function writes `"key":` first when key is not NULL (inside an object). */
void lt__json_object_open(lt_json_t *j, const char *key);
void lt__json_object_close(lt_json_t *j);
void lt__json_array_open(lt_json_t *j, const char *key);
void lt__json_array_close(lt_json_t *j);
void lt__json_u64(lt_json_t *j, const char *key, uint64_t v);
void lt__json_double(lt_json_t *j, const char *key, double v);
void lt__json_bool(lt_json_t *j, const char *key, int v);
void lt__json_str(lt_json_t *j, const char *key, const char *v); /* escapes v */

/* lt__json_take returns the text (caller frees) or NULL after a failure; resets j. */
char *lt__json_take(lt_json_t *j);

#endif
