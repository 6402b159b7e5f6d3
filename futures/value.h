/* value.h: an immutable, reference-counted byte buffer: the payload of a future once set.
 * Shared without copying between the store (loop thread), workers running kernels that read
 * it, and ZeroMQ sending it (zmq_msg_init_data with lt__value_unref as the free function).
 * Reference counting is atomic: any thread. */
#ifndef LT_VALUE_H
#define LT_VALUE_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct lt_value {
  atomic_int refs;
  size_t len;
  void *data; /* owned; freed with free() at the last unref */
} lt_value_t;

/* lt__value_new allocates a value of `len` bytes (uninitialised) with one reference; NULL on
 * out of memory. */
lt_value_t *lt__value_new(size_t len);

/* lt__value_copy allocates a value holding a copy of data[0..len); NULL on out of memory. */
lt_value_t *lt__value_copy(const void *data, size_t len);

/* lt__value_wrap takes ownership of malloc'd `data` (also on failure) and returns a value
 * with one reference; NULL on out of memory. */
lt_value_t *lt__value_wrap(void *data, size_t len);

/* lt__value_ref adds a reference and returns v. */
lt_value_t *lt__value_ref(lt_value_t *v);

/* lt__value_unref drops a reference, freeing at zero; accepts NULL. */
void lt__value_unref(lt_value_t *v);

/* lt__value_zmq_free has the signature of zmq_free_fn (data, hint): it unrefs `hint`. */
void lt__value_zmq_free(void *data, void *hint);

#endif
