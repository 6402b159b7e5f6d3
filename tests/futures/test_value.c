/* test_value.c: reference-counted values, also shared across threads; values kept in a
 * received ZeroMQ message (LT_VALUE_MSG) free the message, and values in a user's buffer
 * (LT_VALUE_USER) call its free callback, exactly once, at the last unref, whichever thread
 * or path drops it. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "value.h"

/* A new value's bytes share its allocation, aligned as malloc's would be, for any length
 * (none included: data is never NULL), and are writable to their last byte. */
Test(value, new_is_one_aligned_allocation) {
  size_t lens[] = {0, 1, 7, 16, 4096, 1u << 20};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    lt_value_t *v = lt__value_new(lens[i]);
    cr_assert_not_null(v);
    cr_assert_eq(v->kind, LT_VALUE_INLINE);
    cr_assert_not_null(v->data);
    cr_assert_eq((uintptr_t)v->data % _Alignof(max_align_t), 0, "len %zu", lens[i]);
    cr_assert_eq((char *)v->data - (char *)v < 64, 1, "the bytes follow the header");
    memset(v->data, 0xa5, lens[i]);
    lt__value_unref(v);
  }
  cr_assert_null(lt__value_new(SIZE_MAX - 8), "an impossible size fails, not wraps");
}

Test(value, new_copy_wrap) {
  lt_value_t *v = lt__value_new(16);
  cr_assert_not_null(v);
  cr_assert_eq(v->len, 16);
  cr_assert_not_null(v->data);
  cr_assert_eq(atomic_load(&v->refs), 1);
  lt__value_unref(v);

  lt_value_t *c = lt__value_copy("hello", 5);
  cr_assert_not_null(c);
  cr_assert_eq(c->len, 5);
  cr_assert_arr_eq(c->data, "hello", 5);
  lt__value_unref(c);

  char *data = strdup("wrapped");
  lt_value_t *w = lt__value_wrap(data, 7);
  cr_assert_not_null(w);
  cr_assert_eq(w->data, data, "wrap must not copy");
  lt__value_unref(w);
}

Test(value, empty_has_data) {
  lt_value_t *v = lt__value_copy(NULL, 0);
  cr_assert_not_null(v);
  cr_assert_eq(v->len, 0);
  cr_assert_not_null(v->data);
  lt__value_unref(v);
}

Test(value, ref_unref) {
  lt_value_t *v = lt__value_copy("x", 1);
  cr_assert_eq(lt__value_ref(v), v);
  cr_assert_eq(atomic_load(&v->refs), 2);
  lt__value_unref(v);
  cr_assert_eq(atomic_load(&v->refs), 1);
  lt__value_unref(v);
  lt__value_unref(NULL);
}

Test(value, zmq_free_unrefs_hint) {
  lt_value_t *v = lt__value_copy("abc", 3);
  lt__value_ref(v);
  lt__value_zmq_free(v->data, v);
  cr_assert_eq(atomic_load(&v->refs), 1);
  lt__value_zmq_free(v->data, v); /* the last reference: frees (checked by ASan/valgrind) */
}

enum { NTHREADS = 8, ROUNDS = 200000 };

static void *hammer(void *arg) {
  lt_value_t *v = arg; /* this thread owns one reference */
  for (int i = 0; i < ROUNDS; i++) {
    lt__value_ref(v);
    lt__value_ref(v);
    lt__value_unref(v);
    lt__value_unref(v);
  }
  lt__value_unref(v);
  return NULL;
}

Test(value, refcount_across_threads) {
  lt_value_t *v = lt__value_copy("shared", 6);
  pthread_t t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    lt__value_ref(v);
    cr_assert_eq(pthread_create(&t[i], NULL, hammer, v), 0);
  }
  for (int i = 0; i < NTHREADS; i++)
    pthread_join(t[i], NULL);
  cr_assert_eq(atomic_load(&v->refs), 1, "lost or extra references: %d", atomic_load(&v->refs));
  cr_assert_arr_eq(v->data, "shared", 6);
  lt__value_unref(v);
}

static void *drop_last(void *arg) {
  lt__value_unref(arg);
  return NULL;
}

Test(value, last_unref_on_other_thread) {
  lt_value_t *v = lt__value_new(1 << 20);
  memset(v->data, 7, v->len);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, drop_last, v), 0);
  pthread_join(t, NULL);
}

/* ---- values kept in a ZeroMQ message ----------------------------------------------- */

#define BIG ((size_t)LT_VALUE_MSG_MIN * 4)

/* A buffer whose free function counts its calls: freed exactly once, never early. */
static atomic_int freed;

static void count_free(void *data, void *hint) {
  (void)hint;
  atomic_fetch_add(&freed, 1);
  free(data);
}

/* big_msg makes a message of `len` bytes i % 251 that counts its free in `freed`. */
static void big_msg(zmq_msg_t *m, size_t len) {
  unsigned char *b = malloc(len);
  cr_assert_not_null(b);
  for (size_t i = 0; i < len; i++)
    b[i] = (unsigned char)(i % 251);
  cr_assert_eq(zmq_msg_init_data(m, b, len, count_free, NULL), 0);
}

static void check_bytes(const lt_value_t *v, size_t len) {
  cr_assert_eq(v->len, len);
  const unsigned char *b = v->data;
  for (size_t i = 0; i < len; i++)
    cr_assert_eq(b[i], (unsigned char)(i % 251), "byte %zu", i);
}

Test(value_msg, large_message_is_kept_without_a_copy) {
  atomic_store(&freed, 0);
  zmq_msg_t m;
  big_msg(&m, BIG);
  void *bytes = zmq_msg_data(&m);
  lt_value_t *v = lt__value_from_msg(&m);
  cr_assert_not_null(v);
  cr_assert_eq(v->kind, LT_VALUE_MSG);
  cr_assert_eq(v->data, bytes, "the value must be the message's bytes, not a copy");
  check_bytes(v, BIG);
  cr_assert_eq(zmq_msg_size(&m), 0, "the message must be left empty");
  zmq_msg_close(&m); /* its owner closes it as before: frees nothing */
  cr_assert_eq(atomic_load(&freed), 0);
  lt__value_ref(v);
  lt__value_unref(v);
  cr_assert_eq(atomic_load(&freed), 0, "freed while a reference is held");
  lt__value_unref(v);
  cr_assert_eq(atomic_load(&freed), 1);
}

Test(value_msg, small_message_is_copied_and_released_at_once) {
  atomic_store(&freed, 0);
  zmq_msg_t m;
  big_msg(&m, LT_VALUE_MSG_MIN - 1);
  void *bytes = zmq_msg_data(&m);
  lt_value_t *v = lt__value_from_msg(&m);
  cr_assert_not_null(v);
  cr_assert_eq(v->kind, LT_VALUE_INLINE);
  cr_assert_neq(v->data, bytes);
  cr_assert_eq(atomic_load(&freed), 1, "a copied message is released at once");
  check_bytes(v, LT_VALUE_MSG_MIN - 1);
  zmq_msg_close(&m);
  lt__value_unref(v);
  cr_assert_eq(atomic_load(&freed), 1);
}

Test(value_msg, empty_message) {
  zmq_msg_t m;
  zmq_msg_init(&m);
  lt_value_t *v = lt__value_from_msg(&m);
  cr_assert_not_null(v);
  cr_assert_eq(v->len, 0);
  cr_assert_not_null(v->data);
  zmq_msg_close(&m);
  lt__value_unref(v);
}

/* A message received on a socket (over inproc it shares the sender's buffer) outlives the
 * sockets and the context, and is freed by the value's last unref. */
Test(value_msg, received_message_outlives_its_socket) {
  atomic_store(&freed, 0);
  void *ctx = zmq_ctx_new();
  void *a = zmq_socket(ctx, ZMQ_PAIR), *b = zmq_socket(ctx, ZMQ_PAIR);
  cr_assert_eq(zmq_bind(a, "inproc://value"), 0);
  cr_assert_eq(zmq_connect(b, "inproc://value"), 0);
  zmq_msg_t m;
  big_msg(&m, BIG);
  cr_assert_eq(zmq_msg_send(&m, a, 0), (int)BIG);
  zmq_msg_t r;
  zmq_msg_init(&r);
  cr_assert_eq(zmq_msg_recv(&r, b, 0), (int)BIG);
  lt_value_t *v = lt__value_from_msg(&r);
  zmq_msg_close(&r);
  zmq_close(a);
  zmq_close(b);
  cr_assert_eq(zmq_ctx_term(ctx), 0);
  cr_assert_eq(atomic_load(&freed), 0);
  check_bytes(v, BIG);
  lt__value_unref(v);
  cr_assert_eq(atomic_load(&freed), 1);
}

/* Sent on (zmq_msg_init_data with lt__value_zmq_free, as servers send values), a value kept
 * in a message is freed when both the sent message and the store's reference are gone, in
 * either order. */
Test(value_msg, sent_on_then_dropped_in_either_order) {
  for (int order = 0; order < 2; order++) {
    atomic_store(&freed, 0);
    zmq_msg_t m;
    big_msg(&m, BIG);
    lt_value_t *v = lt__value_from_msg(&m);
    zmq_msg_close(&m);
    zmq_msg_t out;
    lt_value_t *held = lt__value_ref(v);
    cr_assert_eq(zmq_msg_init_data(&out, v->data, v->len, lt__value_zmq_free, held), 0);
    if (order == 0) lt__value_unref(v);
    zmq_msg_close(&out);
    cr_assert_eq(atomic_load(&freed), order == 0 ? 1 : 0);
    if (order == 1) lt__value_unref(v);
    cr_assert_eq(atomic_load(&freed), 1);
  }
}

/* drop_across_threads hands v (its one reference) to threads that take and drop references
 * at once, and to one more that drops the last, and waits for them all. */
static void drop_across_threads(lt_value_t *v) {
  pthread_t t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    lt__value_ref(v);
    cr_assert_eq(pthread_create(&t[i], NULL, hammer, v), 0);
  }
  pthread_t last;
  cr_assert_eq(pthread_create(&last, NULL, drop_last, v), 0);
  for (int i = 0; i < NTHREADS; i++)
    pthread_join(t[i], NULL);
  pthread_join(last, NULL);
}

Test(value_msg, last_unref_on_other_thread) {
  atomic_store(&freed, 0);
  zmq_msg_t m;
  big_msg(&m, BIG);
  lt_value_t *v = lt__value_from_msg(&m);
  zmq_msg_close(&m);
  drop_across_threads(v);
  cr_assert_eq(atomic_load(&freed), 1);
}

/* ---- values in a user's buffer (lt_eval_submit_owned) ------------------------------- */

/* The hint a user buffer is given with: its free callback records what it was called with. */
typedef struct user_hint {
  atomic_int calls;
  void *data; /* what the last call freed */
} user_hint_t;

static void user_free(void *data, void *hint) {
  user_hint_t *h = hint;
  h->data = data;
  atomic_fetch_add(&h->calls, 1);
  free(data);
}

Test(value_user, kept_without_a_copy_and_freed_once_at_the_last_unref) {
  user_hint_t h = {0};
  char *buf = strdup("user bytes");
  lt_value_t *v = lt__value_user(buf, 10, user_free, &h);
  cr_assert_not_null(v);
  cr_assert_eq(v->kind, LT_VALUE_USER);
  cr_assert_eq(v->data, buf, "the value must be the user's bytes, not a copy");
  cr_assert_eq(v->len, 10);
  lt__value_ref(v);
  lt__value_unref(v);
  cr_assert_eq(atomic_load(&h.calls), 0, "freed while a reference is held");
  lt__value_unref(v);
  cr_assert_eq(atomic_load(&h.calls), 1);
  cr_assert_eq(h.data, buf, "the callback gets the user's pointer");
}

Test(value_user, no_free_callback_leaves_the_buffer_to_its_owner) {
  char buf[4] = "abc";
  lt_value_t *v = lt__value_user(buf, 3, NULL, NULL);
  cr_assert_not_null(v);
  cr_assert_eq(v->data, buf);
  lt__value_unref(v);
  cr_assert_str_eq(buf, "abc");
}

Test(value_user, empty_buffer_has_data_and_is_given_back_as_given) {
  user_hint_t h = {0};
  h.data = &h;
  lt_value_t *v = lt__value_user(NULL, 0, user_free, &h);
  cr_assert_not_null(v);
  cr_assert_eq(v->len, 0);
  cr_assert_not_null(v->data, "a value always has a data pointer");
  lt__value_unref(v);
  cr_assert_eq(atomic_load(&h.calls), 1);
  cr_assert_null(h.data, "the callback gets NULL back, as it was given");
}

/* Sent as a frame of its own (zmq_msg_init_data with lt__value_zmq_free, as conn.c sends an
 * input) and dropped by its owner first, a user's buffer is freed once the receiver closes
 * the message (inproc passes the buffer itself). */
Test(value_user, freed_once_the_sent_message_is_done) {
  user_hint_t h = {0};
  void *ctx = zmq_ctx_new();
  void *a = zmq_socket(ctx, ZMQ_PAIR), *b = zmq_socket(ctx, ZMQ_PAIR);
  cr_assert_eq(zmq_bind(a, "inproc://user"), 0);
  cr_assert_eq(zmq_connect(b, "inproc://user"), 0);
  unsigned char *buf = malloc(BIG);
  cr_assert_not_null(buf);
  memset(buf, 0x33, BIG);
  lt_value_t *v = lt__value_user(buf, BIG, user_free, &h);
  zmq_msg_t out, in;
  cr_assert_eq(zmq_msg_init_data(&out, v->data, v->len, lt__value_zmq_free, lt__value_ref(v)), 0);
  cr_assert_eq(zmq_msg_send(&out, a, 0), (int)BIG);
  lt__value_unref(v);
  cr_assert_eq(atomic_load(&h.calls), 0, "freed while the message is in flight");
  zmq_msg_init(&in);
  cr_assert_eq(zmq_msg_recv(&in, b, 0), (int)BIG);
  cr_assert_eq(zmq_msg_data(&in), (void *)buf, "inproc passes the buffer itself");
  zmq_msg_close(&in);
  cr_assert_eq(atomic_load(&h.calls), 1);
  zmq_close(a);
  zmq_close(b);
  cr_assert_eq(zmq_ctx_term(ctx), 0);
  cr_assert_eq(atomic_load(&h.calls), 1);
}

Test(value_user, last_unref_on_other_thread) {
  user_hint_t h = {0};
  lt_value_t *v = lt__value_user(malloc(64), 64, user_free, &h);
  cr_assert_not_null(v);
  drop_across_threads(v);
  cr_assert_eq(atomic_load(&h.calls), 1);
}
