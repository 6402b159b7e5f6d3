/* json.h: a small JSON writer for lt_eval_stats_json: keys and scalar values into a
 * growing string, objects and arrays nested by open/close calls, commas handled. One
 * thread per writer. */
#ifndef LT_JSON_H
#define LT_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "strbuf.h"

typedef struct lt_json {
  lt_strbuf_t out; /* the text; out.failed after running out of memory */
  int need_comma;
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

/* lt__json_clear empties j for the next text, keeping its memory; a failure is forgotten. */
void lt__json_clear(lt_json_t *j);

/* lt__json_take returns the text (caller frees) or NULL after a failure; resets j. */
char *lt__json_take(lt_json_t *j);

#endif
