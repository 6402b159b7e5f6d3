/* jsonr.h: a small JSON reader for the tool (`lithium top` reads the evaluation's stats): text
 * to a tree of values, and lookups that give a default when a key is missing or of another
 * type. It takes text from another process: depth, numbers and escapes are checked, and a
 * malformed text is refused with the offset of the fault. Any thread; a tree is not shared. */
#ifndef LT_TOOL_JSONR_H
#define LT_TOOL_JSONR_H

#include <stddef.h>

typedef enum lt_jv_type {
  LT_JV_NULL,
  LT_JV_BOOL,
  LT_JV_NUM,
  LT_JV_STR,
  LT_JV_ARR,
  LT_JV_OBJ
} lt_jv_type_t;

typedef struct lt_jv {
  lt_jv_type_t type;
  double num;         /* NUM; BOOL: 0 or 1 */
  char *str;          /* STR: decoded, NUL-terminated (owned) */
  char **keys;        /* OBJ: the member names (owned), parallel to kids */
  struct lt_jv *kids; /* ARR, OBJ: the elements (owned) */
  size_t n;
} lt_jv_t;

/* lt__jv_parse reads `text` (one value, white space around it allowed) into *out (free it
 * with lt__jv_free); 0, or -1 with why in err (len bytes). */
int lt__jv_parse(const char *text, lt_jv_t *out, char *err, size_t len);

/* lt__jv_free frees what a parse made of v (not v itself). */
void lt__jv_free(lt_jv_t *v);

/* lt__jv_get returns member `key` of object o (borrowed), or NULL. */
const lt_jv_t *lt__jv_get(const lt_jv_t *o, const char *key);

/* lt__jv_num returns number (or boolean) `key` of o, else dflt. */
double lt__jv_num(const lt_jv_t *o, const char *key, double dflt);

/* lt__jv_str returns string `key` of o (borrowed), else dflt. */
const char *lt__jv_str(const lt_jv_t *o, const char *key, const char *dflt);

#endif
