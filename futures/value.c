/* value.c: immutable reference-counted byte buffers, the payload of a set future. The
 * count is atomic so the store's loop thread, kernel workers and ZeroMQ's I/O thread (via
 * lt__value_zmq_free) may each hold and drop references: any thread. */
#include <stdlib.h>
#include <string.h>

#include "value.h"

lt_value_t *lt__value_wrap(void *data, size_t len) {
  lt_value_t *v = malloc(sizeof *v);
  if (v == NULL) {
    free(data);
    return NULL;
  }
  atomic_init(&v->refs, 1);
  v->len = len;
  v->data = data;
  return v;
}

lt_value_t *lt__value_new(size_t len) {
  /* malloc(0) may return NULL; a value always has a non-NULL data pointer. */
  void *data = malloc(len > 0 ? len : 1);
  if (data == NULL) return NULL;
  return lt__value_wrap(data, len);
}

lt_value_t *lt__value_copy(const void *data, size_t len) {
  lt_value_t *v = lt__value_new(len);
  if (v != NULL && len > 0) memcpy(v->data, data, len);
  return v;
}

lt_value_t *lt__value_ref(lt_value_t *v) {
  /* Taking a reference needs no ordering: the caller already holds one. */
  atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
  return v;
}

void lt__value_unref(lt_value_t *v) {
  if (v == NULL) return;
  /* Release on every drop and acquire on the last one, so the freeing thread sees every
   * other holder's accesses as done (the usual shared_ptr protocol). */
  if (atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) == 1) {
    free(v->data);
    free(v);
  }
}

void lt__value_zmq_free(void *data, void *hint) {
  (void)data; /* points into the value; the value owns it */
  lt__value_unref(hint);
}
