/* value.h: an immutable, reference-counted byte buffer: the payload of a future once set.
 * Shared without copying between the store (loop thread), workers running kernels that read
 * it, and ZeroMQ sending it (zmq_msg_init_data with lt__value_unref as the free function).
 * Its bytes live after its header in one allocation (lt__value_new), in a malloc'd buffer,
 * in a kernel's output buffer from the pool (bufpool.h), in a received ZeroMQ message itself
 * (a large value from the network: no copy), or in a buffer of the user's with its free
 * callback (lt_eval_submit_owned: no copy). Reference counting is atomic: any thread. */
#ifndef LT_VALUE_H
#define LT_VALUE_H

#include <stdatomic.h>
#include <stddef.h>
#include <zmq.h>

/* Where a value's bytes live, and so how the last unref frees them. */
typedef enum lt_value_kind {
  LT_VALUE_HEAP,  /* a malloc'd buffer: free() */
  LT_VALUE_MSG,   /* the data of a ZeroMQ message the value holds: zmq_msg_close() */
  LT_VALUE_USER,  /* a buffer of the user's: its free callback, if any */
  LT_VALUE_POOL,  /* a kernel's output buffer (bufpool.h): lt__bufpool_free() */
  LT_VALUE_INLINE /* bytes in the value's own allocation (lt__value_new): free() of both */
} lt_value_kind_t;

/* The free callback of a user's buffer (zmq_free_fn's signature): called once with the
 * buffer and the hint it was given with. */
typedef void lt_value_free_fn(void *data, void *hint);

/* A received message at least this large becomes a value without a copy; a smaller one is
 * copied, as it may share a receive buffer of ZeroMQ's that it would keep alive. */
#define LT_VALUE_MSG_MIN (64u * 1024u)

typedef struct lt_value {
  atomic_int refs;
  lt_value_kind_t kind;
  size_t len;
  void *data; /* owned (see kind); freed at the last unref */
} lt_value_t;

/* lt__value_new allocates a value of `len` bytes (uninitialised) with one reference; NULL on
 * out of memory. */
lt_value_t *lt__value_new(size_t len);

/* lt__value_copy allocates a value holding a copy of data[0..len); NULL on out of memory. */
lt_value_t *lt__value_copy(const void *data, size_t len);

/* lt__value_wrap takes ownership of malloc'd `data` (also on failure) and returns a value
 * with one reference; NULL on out of memory. */
lt_value_t *lt__value_wrap(void *data, size_t len);

/* lt__value_pooled takes ownership of `data`, a buffer of lt__bufpool_alloc (also on
 * failure), and returns a value with one reference (kind LT_VALUE_POOL: the buffer goes back
 * to the pool at the last unref); NULL on out of memory. */
lt_value_t *lt__value_pooled(void *data, size_t len);

/* lt__value_take_pooled takes the buffer of v, a value of kind LT_VALUE_POOL whose only
 * reference the caller holds: v is freed and its data returned, the caller's from then on
 * (lt__bufpool_free). */
void *lt__value_take_pooled(lt_value_t *v);

/* lt__value_user makes a value of the user's buffer data[0..len) without copying it (kind
 * LT_VALUE_USER): free_fn(data, hint) is called exactly once, by whichever thread drops the
 * last reference, or before this returns NULL on out of memory (ownership is taken also on
 * failure). A NULL free_fn leaves the buffer the caller's. `data` may be NULL only when len
 * is 0 (the value's data is then a static empty buffer). One reference. Any thread. */
lt_value_t *lt__value_user(void *data, size_t len, lt_value_free_fn *free_fn, void *hint);

/* lt__value_from_msg makes a value of the bytes of the received message `msg`, taking its
 * contents also on failure: *msg is left an empty message that its owner closes as before.
 * A message of at least LT_VALUE_MSG_MIN bytes becomes the value's storage (kind
 * LT_VALUE_MSG, data points into it, closed at the last unref); a smaller one is copied
 * (LT_VALUE_HEAP). One reference; NULL on out of memory. Any thread. */
lt_value_t *lt__value_from_msg(zmq_msg_t *msg);

/* lt__value_ref adds a reference and returns v. */
lt_value_t *lt__value_ref(lt_value_t *v);

/* lt__value_unref drops a reference, freeing at zero; accepts NULL. */
void lt__value_unref(lt_value_t *v);

/* lt__value_zmq_free has the signature of zmq_free_fn (data, hint): it unrefs `hint`. */
void lt__value_zmq_free(void *data, void *hint);

/* A value up to this size is copied into the message that sends it: a copy of a few hundred
 * bytes (none at all for ZeroMQ's very small messages, which live in the message itself)
 * costs less than a reference handed to ZeroMQ's I/O thread and dropped there. */
#define LT_VALUE_COPY_MAX 1024u

/* lt__value_msg_init makes *msg, uninitialised, a message of v's bytes for sending: a copy up
 * to LT_VALUE_COPY_MAX bytes, else zero copy, holding a reference of its own that ZeroMQ drops
 * once sent (the caller keeps its own). 0, or -1 without memory (then *msg needs no close).
 * Any thread. */
int lt__value_msg_init(zmq_msg_t *msg, lt_value_t *v);

#endif
