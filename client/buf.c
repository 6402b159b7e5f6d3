/* buf.c: result buffers. A result borrows nothing: it holds its own reference to the value
 * and its own copy of an error's text (a result's empty text is one static string). Any
 * thread. */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "utf8.h"

/* no_error is the message of every result that carries a value (never freed). */
static char no_error[] = "";

lt_buf_t *lt__buf_ok(lt_value_t *v) {
  lt_buf_t *b = calloc(1, sizeof *b);
  if (b == NULL) return NULL;
  b->errmsg = no_error; /* not allocated: a result per task costs one allocation */
  b->value = lt__value_ref(v);
  return b;
}

lt_buf_t *lt__buf_fail(int err, const char *msg) {
  lt_buf_t *b = calloc(1, sizeof *b);
  if (b == NULL) return NULL;
  b->err = err;
  /* The message may be a server's, or read from a journal: never a control character. */
  b->errmsg = lt__text_escape_dup(msg != NULL && *msg != '\0' ? msg : lt_strerror(err));
  if (b->errmsg == NULL) {
    free(b);
    return NULL;
  }
  return b;
}

LT_API const void *lt_buf_data(const lt_buf_t *b) {
  return b != NULL && b->value != NULL ? b->value->data : NULL;
}

LT_API size_t lt_buf_len(const lt_buf_t *b) {
  return b != NULL && b->value != NULL ? b->value->len : 0;
}

LT_API int lt_buf_error(const lt_buf_t *b) {
  return b != NULL ? b->err : LT_EINVAL;
}

LT_API const char *lt_buf_errmsg(const lt_buf_t *b) {
  return b != NULL ? b->errmsg : "";
}

void lt__buf_set_task(lt_buf_t *b, uint64_t task) {
  if (b != NULL) b->task = task;
}

LT_API uint64_t lt_buf_task(const lt_buf_t *b) {
  return b != NULL ? b->task : UINT64_MAX;
}

LT_API void lt_buf_free(lt_buf_t *b) {
  if (b == NULL) return;
  lt__value_unref(b->value);
  if (b->errmsg != no_error) free(b->errmsg);
  free(b);
}
