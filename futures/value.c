/* value.c: immutable reference-counted byte buffers, the payload of a set future: a
 * malloc'd buffer, a kernel's output buffer from the pool, a received ZeroMQ message kept whole, or
 * a user's buffer with its free callback. The count is atomic so the store's loop thread, kernel
 * workers, the client's threads and ZeroMQ's I/O thread (via lt__value_zmq_free) may each hold and
 * drop references: any thread. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bufpool.h"
#include "value.h"

/* A value of kind LT_VALUE_MSG: the message sits beside the header, in one allocation, so
 * that data (which may point into the message) never moves. */
typedef struct msg_value {
  lt_value_t v; /* first: an lt_value_t * of this kind casts back */
  zmq_msg_t msg;
} msg_value_t;

/* A value of kind LT_VALUE_INLINE: its bytes follow the header in the same allocation,
 * aligned as malloc's would be. */
typedef struct inline_value {
  lt_value_t v; /* first: an lt_value_t * of this kind casts back */
  _Alignas(max_align_t) unsigned char bytes[];
} inline_value_t;

/* A value of kind LT_VALUE_USER: the user's buffer and how to give it back. */
typedef struct user_value {
  lt_value_t v; /* first: an lt_value_t * of this kind casts back */
  void *data;   /* as the user gave it (v.data is a static empty buffer for NULL) */
  lt_value_free_fn *free_fn;
  void *hint;
} user_value_t;

lt_value_t *lt__value_user(void *data, size_t len, lt_value_free_fn *free_fn, void *hint) {
  static char empty[1];
  user_value_t *uv = malloc(sizeof *uv);
  if (uv == NULL) {
    if (free_fn != NULL) free_fn(data, hint);
    return NULL;
  }
  atomic_init(&uv->v.refs, 1);
  uv->v.kind = LT_VALUE_USER;
  uv->v.len = len;
  uv->v.data = data != NULL ? data : empty;
  uv->data = data;
  uv->free_fn = free_fn;
  uv->hint = hint;
  return &uv->v;
}

/* wrap makes a value of kind `kind` (HEAP or POOL) owning `data`; on out of memory frees
 * data the way that kind would and returns NULL. */
static lt_value_t *wrap(void *data, size_t len, lt_value_kind_t kind) {
  lt_value_t *v = malloc(sizeof *v);
  if (v == NULL) {
    if (kind == LT_VALUE_POOL)
      lt__bufpool_free(data);
    else
      free(data);
    return NULL;
  }
  atomic_init(&v->refs, 1);
  v->kind = kind;
  v->len = len;
  v->data = data;
  return v;
}

lt_value_t *lt__value_wrap(void *data, size_t len) {
  return wrap(data, len, LT_VALUE_HEAP);
}

lt_value_t *lt__value_pooled(void *data, size_t len) {
  return wrap(data, len, LT_VALUE_POOL);
}

void *lt__value_take_pooled(lt_value_t *v) {
  assert(v->kind == LT_VALUE_POOL && atomic_load(&v->refs) == 1);
  void *data = v->data;
  free(v);
  return data;
}

lt_value_t *lt__value_new(size_t len) {
  /* One allocation for the header and the bytes (a value a task costs one malloc, not two);
   * never 0 bytes of data, so data is never NULL. */
  if (len > SIZE_MAX - sizeof(inline_value_t) - 1) return NULL;
  inline_value_t *iv = malloc(sizeof *iv + (len > 0 ? len : 1));
  if (iv == NULL) return NULL;
  atomic_init(&iv->v.refs, 1);
  iv->v.kind = LT_VALUE_INLINE;
  iv->v.len = len;
  iv->v.data = iv->bytes;
  return &iv->v;
}

lt_value_t *lt__value_copy(const void *data, size_t len) {
  lt_value_t *v = lt__value_new(len);
  if (v != NULL && len > 0) memcpy(v->data, data, len);
  return v;
}

/* wrap_msg moves msg's contents into a new value of kind LT_VALUE_MSG; NULL (msg untouched)
 * on out of memory. */
static lt_value_t *wrap_msg(zmq_msg_t *msg) {
  msg_value_t *mv = malloc(sizeof *mv);
  if (mv == NULL) return NULL;
  zmq_msg_init(&mv->msg);
  zmq_msg_move(&mv->msg, msg);
  atomic_init(&mv->v.refs, 1);
  mv->v.kind = LT_VALUE_MSG;
  mv->v.len = zmq_msg_size(&mv->msg);
  mv->v.data = zmq_msg_data(&mv->msg);
  return &mv->v;
}

lt_value_t *lt__value_from_msg(zmq_msg_t *msg) {
  lt_value_t *v = zmq_msg_size(msg) >= LT_VALUE_MSG_MIN
                      ? wrap_msg(msg)
                      : lt__value_copy(zmq_msg_data(msg), zmq_msg_size(msg));
  /* Taken in every case: what the message still holds (a small one, or one whose wrapper
   * could not be allocated) goes now. */
  zmq_msg_close(msg);
  zmq_msg_init(msg);
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
  if (atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) != 1) return;
  switch (v->kind) {
  case LT_VALUE_MSG: {
    msg_value_t *mv = (msg_value_t *)v;
    zmq_msg_close(&mv->msg);
    free(mv);
    return;
  }
  case LT_VALUE_USER: {
    user_value_t *uv = (user_value_t *)v;
    if (uv->free_fn != NULL) uv->free_fn(uv->data, uv->hint);
    free(uv);
    return;
  }
  case LT_VALUE_POOL:
    lt__bufpool_free(v->data);
    free(v);
    return;
  case LT_VALUE_INLINE:
    free(v); /* the bytes with it */
    return;
  case LT_VALUE_HEAP:
    break;
  }
  free(v->data);
  free(v);
}

void lt__value_zmq_free(void *data, void *hint) {
  (void)data; /* points into the value; the value owns it */
  lt__value_unref(hint);
}

int lt__value_msg_init(zmq_msg_t *msg, lt_value_t *v) {
  if (v->len <= LT_VALUE_COPY_MAX) {
    if (zmq_msg_init_size(msg, v->len) != 0) return -1;
    if (v->len > 0) memcpy(zmq_msg_data(msg), v->data, v->len);
    return 0;
  }
  lt__value_ref(v);
  if (zmq_msg_init_data(msg, v->data, v->len, lt__value_zmq_free, v) != 0) {
    lt__value_unref(v);
    return -1;
  }
  return 0;
}
