/* test_value.c: reference-counted values, also shared across threads. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "value.h"

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
