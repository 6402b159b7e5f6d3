/* test_store.c: the value store: single assignment, parked waiters and how they are woken
 * (set, fail, release, release_client, free), unpark, re-entrant callbacks, accounting and
 * a large number of ids. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>

#include "oid.h"
#include "store.h"

enum {
  ACT_NONE,
  ACT_RELEASE_SELF,
  ACT_RELEASE_OTHER,
  ACT_UNPARK_SIBLING,
  ACT_FREE_SELF,
  ACT_PARK_OTHER,
  ACT_GET_OTHER
};

/* A reader: records every call of its waiter and may act on the store from the callback. */
typedef struct rec {
  lt_waiter_t w; /* first: the callback gets back to the rec with a cast */
  int calls;
  int order;
  lt_oid_t id;
  int status;
  lt_value_t *v; /* a reference taken in the callback */
  size_t vlen;
  char msg[128];
  int has_msg;
  /* re-entrance */
  int action;
  lt_store_t *st;
  lt_oid_t other;
  struct rec *sibling;
  lt_value_t *drop; /* a reference handed to the callback to drop */
  int other_rc;
} rec_t;

static int order_counter;

static void on_wake(lt_waiter_t *w, lt_oid_t id, int status, lt_value_t *v, const char *errmsg) {
  rec_t *r = (rec_t *)w;
  cr_assert_null(w->next, "waiter still linked during its callback");
  r->calls++;
  r->order = ++order_counter;
  r->id = id;
  r->status = status;
  if (v != NULL) {
    r->v = lt__value_ref(v);
    r->vlen = v->len;
  }
  if (errmsg != NULL) {
    snprintf(r->msg, sizeof r->msg, "%s", errmsg);
    r->has_msg = 1;
  }
  switch (r->action) {
  case ACT_RELEASE_SELF:
    /* drop every reference but the one the store holds while waking */
    lt__value_unref(r->v);
    r->v = NULL;
    lt__value_unref(r->drop);
    r->drop = NULL;
    r->other_rc = lt__store_release(r->st, id);
    break;
  case ACT_RELEASE_OTHER:
    r->other_rc = lt__store_release(r->st, r->other);
    break;
  case ACT_UNPARK_SIBLING:
    lt__store_unpark(r->st, &r->sibling->w);
    break;
  case ACT_FREE_SELF:
    lt__value_unref(r->v);
    free(r);
    break;
  case ACT_PARK_OTHER:
    r->action = ACT_NONE;
    r->other_rc = lt__store_get(r->st, r->other, NULL, &r->w, NULL);
    break;
  case ACT_GET_OTHER: {
    lt_value_t *got = NULL;
    r->other_rc = lt__store_get(r->st, r->other, &got, NULL, NULL);
    lt__value_unref(got);
    break;
  }
  default:
    break;
  }
}

static rec_t *rec_new(void) {
  rec_t *r = calloc(1, sizeof *r);
  cr_assert_not_null(r);
  r->w.cb = on_wake;
  r->w.data = r;
  return r;
}

static void rec_free(rec_t *r) {
  lt__value_unref(r->v);
  free(r);
}

static lt_store_t *store_new(void) {
  lt_store_t *st = NULL;
  cr_assert_eq(lt__store_new(&st), LT_OK);
  cr_assert_not_null(st);
  return st;
}

static lt_oid_t oid(uint64_t client, uint64_t seq) {
  return (lt_oid_t){client, seq};
}

Test(store, set_get) {
  lt_store_t *st = store_new();
  lt_value_t *v = lt__value_copy("hello", 5);
  cr_assert_eq(lt__store_set(st, oid(1, 1), v), LT_OK);
  cr_assert_eq(atomic_load(&v->refs), 2, "the store takes its own reference");
  lt_value_t *got = NULL;
  cr_assert_eq(lt__store_get(st, oid(1, 1), &got, NULL, NULL), LT_OK);
  cr_assert_eq(got, v);
  cr_assert_eq(atomic_load(&v->refs), 3, "get returns a new reference");
  lt__value_unref(got);
  cr_assert_eq(lt__store_count(st), 1);
  cr_assert_eq(lt__store_bytes(st), 5);
  cr_assert_eq(lt__store_get(st, oid(1, 2), &got, NULL, NULL), LT_ENOENT);
  cr_assert_null(got);
  cr_assert_eq(lt__store_get(st, oid(2, 1), &got, NULL, NULL), LT_ENOENT);
  lt__store_free(st);
  cr_assert_eq(atomic_load(&v->refs), 1, "free drops the store's reference");
  lt__value_unref(v);
}

Test(store, single_assignment) {
  lt_store_t *st = store_new();
  lt_value_t *a = lt__value_copy("a", 1), *b = lt__value_copy("bb", 2);
  cr_assert_eq(lt__store_set(st, oid(1, 1), a), LT_OK);
  cr_assert_eq(lt__store_set(st, oid(1, 1), b), LT_EEXIST);
  cr_assert_eq(lt__store_fail(st, oid(1, 1), LT_EKERNEL, "late"), LT_EEXIST);
  cr_assert_eq(atomic_load(&b->refs), 1, "a refused set takes no reference");
  lt_value_t *got;
  cr_assert_eq(lt__store_get(st, oid(1, 1), &got, NULL, NULL), LT_OK);
  cr_assert_eq(got, a);
  lt__value_unref(got);

  cr_assert_eq(lt__store_fail(st, oid(1, 2), LT_EKERNEL, "boom"), LT_OK);
  cr_assert_eq(lt__store_set(st, oid(1, 2), b), LT_EEXIST);
  cr_assert_eq(lt__store_fail(st, oid(1, 2), LT_ELOST, "again"), LT_EEXIST);
  const char *msg = NULL;
  cr_assert_eq(lt__store_get(st, oid(1, 2), &got, NULL, &msg), LT_EKERNEL);
  cr_assert_null(got);
  cr_assert_str_eq(msg, "boom");
  cr_assert_eq(lt__store_bytes(st), 1, "failed ids hold no value bytes");

  /* expect on an existing id keeps it as it is */
  cr_assert_eq(lt__store_expect(st, oid(1, 1)), LT_OK);
  cr_assert_eq(lt__store_get(st, oid(1, 1), &got, NULL, NULL), LT_OK);
  lt__value_unref(got);
  cr_assert_eq(lt__store_count(st), 2);
  lt__store_free(st);
  lt__value_unref(a);
  lt__value_unref(b);
}

Test(store, pending_without_waiter) {
  lt_store_t *st = store_new();
  cr_assert_eq(lt__store_expect(st, oid(1, 7)), LT_OK);
  cr_assert_eq(lt__store_expect(st, oid(1, 7)), LT_OK);
  cr_assert_eq(lt__store_count(st), 1);
  lt_value_t *got = (lt_value_t *)0x1;
  cr_assert_eq(lt__store_get(st, oid(1, 7), &got, NULL, NULL), LT_EAGAIN);
  cr_assert_null(got);
  cr_assert_eq(lt__store_bytes(st), 0);
  lt__store_free(st);
}

Test(store, waiters_woken_on_set_in_order) {
  lt_store_t *st = store_new();
  rec_t *r[3];
  cr_assert_eq(lt__store_expect(st, oid(5, 1)), LT_OK);
  for (int i = 0; i < 3; i++) {
    r[i] = rec_new();
    cr_assert_eq(lt__store_get(st, oid(5, 1), NULL, &r[i]->w, NULL), LT_EAGAIN);
  }
  cr_assert_eq(r[0]->calls, 0, "parking must not call the waiter");
  lt_value_t *v = lt__value_copy("value", 5);
  cr_assert_eq(lt__store_set(st, oid(5, 1), v), LT_OK);
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(r[i]->calls, 1);
    cr_assert_eq(r[i]->status, LT_OK);
    cr_assert_eq(r[i]->v, v);
    cr_assert(lt__oid_eq(r[i]->id, oid(5, 1)));
    cr_assert_null(r[i]->w.next);
    if (i > 0) cr_assert_lt(r[i - 1]->order, r[i]->order, "waiters are woken in park order");
  }
  /* after the wake, readers see the value at once */
  lt_value_t *got;
  rec_t *late = rec_new();
  cr_assert_eq(lt__store_get(st, oid(5, 1), &got, &late->w, NULL), LT_OK);
  cr_assert_eq(got, v);
  cr_assert_eq(late->calls, 0);
  lt__value_unref(got);
  lt__store_free(st);
  cr_assert_eq(late->calls, 0, "a waiter that was not parked is never called");
  for (int i = 0; i < 3; i++)
    rec_free(r[i]);
  rec_free(late);
  cr_assert_eq(atomic_load(&v->refs), 1);
  lt__value_unref(v);
}

Test(store, waiters_woken_on_fail) {
  lt_store_t *st = store_new();
  rec_t *a = rec_new(), *b = rec_new();
  lt__store_expect(st, oid(5, 2));
  cr_assert_eq(lt__store_get(st, oid(5, 2), NULL, &a->w, NULL), LT_EAGAIN);
  cr_assert_eq(lt__store_get(st, oid(5, 2), NULL, &b->w, NULL), LT_EAGAIN);
  cr_assert_eq(lt__store_fail(st, oid(5, 2), LT_EKERNEL, "inc: expected 8 bytes, got 3"), LT_OK);
  for (rec_t *r = a; r != NULL; r = (r == a ? b : NULL)) {
    cr_assert_eq(r->calls, 1);
    cr_assert_eq(r->status, LT_EKERNEL);
    cr_assert_null(r->v);
    cr_assert(r->has_msg);
    cr_assert_str_eq(r->msg, "inc: expected 8 bytes, got 3");
  }
  const char *msg;
  cr_assert_eq(lt__store_get(st, oid(5, 2), NULL, NULL, &msg), LT_EKERNEL);
  cr_assert_str_eq(msg, "inc: expected 8 bytes, got 3");
  /* failing an id nobody expected works too, with a NULL message read as "" */
  cr_assert_eq(lt__store_fail(st, oid(5, 3), LT_ELOST, NULL), LT_OK);
  cr_assert_eq(lt__store_get(st, oid(5, 3), NULL, NULL, &msg), LT_ELOST);
  cr_assert_str_eq(msg, "");
  lt__store_free(st);
  rec_free(a);
  rec_free(b);
}

Test(store, unpark) {
  lt_store_t *st = store_new();
  rec_t *r[4];
  lt__store_expect(st, oid(1, 1));
  for (int i = 0; i < 4; i++) {
    r[i] = rec_new();
    lt__store_get(st, oid(1, 1), NULL, &r[i]->w, NULL);
  }
  lt__store_unpark(st, &r[1]->w); /* middle */
  lt__store_unpark(st, &r[0]->w); /* head */
  lt__store_unpark(st, &r[3]->w); /* tail */
  cr_assert_null(r[1]->w.next);
  lt__store_unpark(st, &r[1]->w); /* twice: no-op */
  lt_value_t *v = lt__value_copy("x", 1);
  lt__store_set(st, oid(1, 1), v);
  cr_assert_eq(r[0]->calls, 0);
  cr_assert_eq(r[1]->calls, 0);
  cr_assert_eq(r[2]->calls, 1);
  cr_assert_eq(r[3]->calls, 0);
  lt__store_unpark(st, &r[2]->w); /* already woken: no-op */
  /* the only waiter of a second id, unparked: the id's list is empty again */
  lt__store_expect(st, oid(1, 2));
  lt__store_get(st, oid(1, 2), NULL, &r[0]->w, NULL);
  lt__store_unpark(st, &r[0]->w);
  lt__store_set(st, oid(1, 2), v);
  cr_assert_eq(r[0]->calls, 0);
  lt__store_free(st);
  for (int i = 0; i < 4; i++)
    rec_free(r[i]);
  lt__value_unref(v);
}

Test(store, release) {
  lt_store_t *st = store_new();
  rec_t *a = rec_new(), *b = rec_new();
  lt__store_expect(st, oid(3, 1));
  lt__store_get(st, oid(3, 1), NULL, &a->w, NULL);
  lt__store_get(st, oid(3, 1), NULL, &b->w, NULL);
  cr_assert_eq(lt__store_release(st, oid(3, 1)), LT_OK);
  cr_assert_eq(a->calls, 1);
  cr_assert_eq(a->status, LT_ECANCELED);
  cr_assert_eq(b->calls, 1);
  cr_assert_eq(b->status, LT_ECANCELED);
  cr_assert_eq(lt__store_get(st, oid(3, 1), NULL, NULL, NULL), LT_ENOENT);
  cr_assert_eq(lt__store_release(st, oid(3, 1)), LT_ENOENT);

  lt_value_t *v = lt__value_copy("12345678", 8);
  lt__store_set(st, oid(3, 2), v);
  lt__store_fail(st, oid(3, 3), LT_EKERNEL, "x");
  cr_assert_eq(lt__store_bytes(st), 8);
  cr_assert_eq(lt__store_count(st), 2);
  cr_assert_eq(lt__store_release(st, oid(3, 2)), LT_OK);
  cr_assert_eq(atomic_load(&v->refs), 1, "release drops the store's reference");
  cr_assert_eq(lt__store_bytes(st), 0);
  cr_assert_eq(lt__store_release(st, oid(3, 3)), LT_OK);
  cr_assert_eq(lt__store_count(st), 0);
  /* a released id may be produced again (a new instruction names it) */
  cr_assert_eq(lt__store_set(st, oid(3, 2), v), LT_OK);
  lt__store_free(st);
  rec_free(a);
  rec_free(b);
  lt__value_unref(v);
}

Test(store, release_client) {
  lt_store_t *st = store_new();
  lt_value_t *v = lt__value_copy("abc", 3);
  rec_t *wa = rec_new(), *wb = rec_new();
  for (uint64_t s = 0; s < 10; s++) {
    lt__store_set(st, oid(0xA, s), v);
    lt__store_set(st, oid(0xB, s), v);
  }
  lt__store_expect(st, oid(0xA, 100));
  lt__store_get(st, oid(0xA, 100), NULL, &wa->w, NULL);
  lt__store_expect(st, oid(0xB, 100));
  lt__store_get(st, oid(0xB, 100), NULL, &wb->w, NULL);
  lt__store_fail(st, oid(0xA, 101), LT_EKERNEL, "failed");
  cr_assert_eq(lt__store_count(st), 23);
  cr_assert_eq(lt__store_bytes(st), 60);

  cr_assert_eq(lt__store_release_client(st, 0xA), 12);
  cr_assert_eq(wa->calls, 1);
  cr_assert_eq(wa->status, LT_ECANCELED);
  cr_assert_eq(wb->calls, 0);
  cr_assert_eq(lt__store_count(st), 11);
  cr_assert_eq(lt__store_bytes(st), 30);
  cr_assert_eq(atomic_load(&v->refs), 11);
  cr_assert_eq(lt__store_get(st, oid(0xA, 3), NULL, NULL, NULL), LT_ENOENT);
  lt_value_t *got;
  cr_assert_eq(lt__store_get(st, oid(0xB, 3), &got, NULL, NULL), LT_OK);
  lt__value_unref(got);
  cr_assert_eq(lt__store_release_client(st, 0xA), 0);
  cr_assert_eq(lt__store_release_client(st, 0xC), 0);
  cr_assert_eq(lt__store_release_client(st, 0xB), 11);
  cr_assert_eq(wb->status, LT_ECANCELED);
  cr_assert_eq(lt__store_count(st), 0);
  cr_assert_eq(lt__store_bytes(st), 0);
  lt__store_free(st);
  rec_free(wa);
  rec_free(wb);
  cr_assert_eq(atomic_load(&v->refs), 1);
  lt__value_unref(v);
}

Test(store, free_wakes_with_shutdown) {
  lt_store_t *st = store_new();
  rec_t *r[6];
  for (int i = 0; i < 6; i++) {
    r[i] = rec_new();
    lt__store_expect(st, oid(1, (uint64_t)i / 2));
    cr_assert_eq(lt__store_get(st, oid(1, (uint64_t)i / 2), NULL, &r[i]->w, NULL), LT_EAGAIN);
  }
  lt__store_free(st);
  for (int i = 0; i < 6; i++) {
    cr_assert_eq(r[i]->calls, 1);
    cr_assert_eq(r[i]->status, LT_ESHUTDOWN);
    cr_assert(lt__oid_eq(r[i]->id, oid(1, (uint64_t)i / 2)));
    rec_free(r[i]);
  }
  lt__store_free(NULL);
}

/* A callback drops every other reference and releases the id it was woken for: the other
 * waiters still get a valid value (the store holds a reference while waking). */
Test(store, reentrant_release_self_on_set) {
  lt_store_t *st = store_new();
  rec_t *a = rec_new(), *b = rec_new();
  a->action = ACT_RELEASE_SELF;
  a->st = st;
  lt__store_expect(st, oid(1, 1));
  lt__store_get(st, oid(1, 1), NULL, &a->w, NULL);
  lt__store_get(st, oid(1, 1), NULL, &b->w, NULL);
  lt_value_t *v = lt__value_copy("payload", 7);
  a->drop = v; /* a's callback drops the test's reference, then releases the id */
  cr_assert_eq(lt__store_set(st, oid(1, 1), v), LT_OK);
  cr_assert_eq(a->other_rc, LT_OK);
  cr_assert_eq(b->calls, 1);
  cr_assert_eq(b->vlen, 7);
  cr_assert_arr_eq(b->v->data, "payload", 7);
  cr_assert_eq(lt__store_count(st), 0);
  lt__store_free(st);
  rec_free(a);
  rec_free(b);
}

Test(store, reentrant_release_self_on_fail) {
  lt_store_t *st = store_new();
  rec_t *a = rec_new(), *b = rec_new();
  a->action = ACT_RELEASE_SELF;
  a->st = st;
  lt__store_expect(st, oid(1, 1));
  lt__store_get(st, oid(1, 1), NULL, &a->w, NULL);
  lt__store_get(st, oid(1, 1), NULL, &b->w, NULL);
  cr_assert_eq(lt__store_fail(st, oid(1, 1), LT_EKERNEL, "negative input -5"), LT_OK);
  cr_assert_eq(b->calls, 1);
  cr_assert_str_eq(b->msg, "negative input -5");
  lt__store_free(st);
  rec_free(a);
  rec_free(b);
}

/* A callback unparks a sibling waiting on the same id: the sibling is not called. */
Test(store, reentrant_unpark_sibling) {
  lt_store_t *st = store_new();
  rec_t *a = rec_new(), *b = rec_new(), *c = rec_new();
  a->action = ACT_UNPARK_SIBLING;
  a->st = st;
  a->sibling = b;
  lt__store_expect(st, oid(1, 1));
  lt__store_get(st, oid(1, 1), NULL, &a->w, NULL);
  lt__store_get(st, oid(1, 1), NULL, &b->w, NULL);
  lt__store_get(st, oid(1, 1), NULL, &c->w, NULL);
  lt_value_t *v = lt__value_copy("v", 1);
  lt__store_set(st, oid(1, 1), v);
  cr_assert_eq(a->calls, 1);
  cr_assert_eq(b->calls, 0);
  cr_assert_eq(c->calls, 1);
  lt__store_free(st);
  rec_free(a);
  rec_free(b);
  rec_free(c);
  lt__value_unref(v);
}

/* A callback releases another pending id and re-parks itself elsewhere; another frees its
 * own waiter. */
Test(store, reentrant_release_other_park_free) {
  lt_store_t *st = store_new();
  rec_t *a = rec_new(), *b = rec_new(), *c = rec_new(), *d = rec_new();
  a->action = ACT_RELEASE_OTHER;
  a->st = st;
  a->other = oid(1, 2);
  b->action = ACT_PARK_OTHER;
  b->st = st;
  b->other = oid(1, 3);
  c->action = ACT_FREE_SELF;
  lt__store_expect(st, oid(1, 1));
  lt__store_expect(st, oid(1, 2));
  lt__store_expect(st, oid(1, 3));
  lt__store_get(st, oid(1, 1), NULL, &a->w, NULL);
  lt__store_get(st, oid(1, 1), NULL, &b->w, NULL);
  lt__store_get(st, oid(1, 1), NULL, &c->w, NULL);
  lt__store_get(st, oid(1, 2), NULL, &d->w, NULL);
  lt_value_t *v = lt__value_copy("v", 1);
  lt__store_set(st, oid(1, 1), v);
  cr_assert_eq(a->other_rc, LT_OK);
  cr_assert_eq(d->calls, 1);
  cr_assert_eq(d->status, LT_ECANCELED);
  cr_assert_eq(b->calls, 1);
  cr_assert_eq(b->other_rc, LT_EAGAIN, "re-parked on the pending id 3");
  lt__value_unref(b->v);
  b->v = NULL;
  lt__store_fail(st, oid(1, 3), LT_EKERNEL, "third");
  cr_assert_eq(b->calls, 2);
  cr_assert_str_eq(b->msg, "third");
  lt__store_free(st);
  rec_free(a);
  rec_free(b);
  rec_free(d);
  lt__value_unref(v);
}

/* Callbacks run by release_client and free may use the store. */
Test(store, reentrant_release_client_and_free) {
  lt_store_t *st = store_new();
  rec_t *a = rec_new(), *b = rec_new(), *c = rec_new();
  lt_value_t *v = lt__value_copy("v", 1);
  a->action = ACT_RELEASE_OTHER; /* releases an id of the same client, already dropped */
  a->st = st;
  a->other = oid(7, 2);
  b->action = ACT_RELEASE_OTHER; /* releases an id of another client */
  b->st = st;
  b->other = oid(8, 1);
  lt__store_expect(st, oid(7, 1));
  lt__store_expect(st, oid(7, 2));
  lt__store_set(st, oid(8, 1), v);
  lt__store_get(st, oid(7, 1), NULL, &a->w, NULL);
  lt__store_get(st, oid(7, 2), NULL, &b->w, NULL);
  cr_assert_eq(lt__store_release_client(st, 7), 2);
  cr_assert_eq(a->calls, 1);
  cr_assert_eq(b->calls, 1);
  cr_assert_eq(a->other_rc, LT_ENOENT);
  cr_assert_eq(b->other_rc, LT_OK);
  cr_assert_eq(lt__store_count(st), 0);

  c->action = ACT_GET_OTHER;
  c->st = st;
  c->other = oid(9, 2);
  lt__store_expect(st, oid(9, 1));
  lt__store_set(st, oid(9, 2), v);
  lt__store_get(st, oid(9, 1), NULL, &c->w, NULL);
  lt__store_free(st);
  cr_assert_eq(c->calls, 1);
  cr_assert_eq(c->status, LT_ESHUTDOWN);
  cr_assert(c->other_rc == LT_OK || c->other_rc == LT_ENOENT);
  rec_free(a);
  rec_free(b);
  rec_free(c);
  cr_assert_eq(atomic_load(&v->refs), 1);
  lt__value_unref(v);
}

Test(store, many_ids) {
  enum { N = 100000 };
  lt_store_t *st = store_new();
  uint64_t client = 0x5eed5eed5eedULL;
  for (uint64_t i = 0; i < N; i++) {
    lt_value_t *v = lt__value_new(i % 17);
    cr_assert_not_null(v);
    cr_assert_eq(lt__store_set(st, oid(client, i), v), LT_OK);
    lt__value_unref(v);
    /* a second client with the same sequence numbers */
    cr_assert_eq(lt__store_expect(st, oid(client + 1, i)), LT_OK);
  }
  size_t bytes = 0;
  for (uint64_t i = 0; i < N; i++)
    bytes += i % 17;
  cr_assert_eq(lt__store_count(st), 2 * N);
  cr_assert_eq(lt__store_bytes(st), bytes);
  for (uint64_t i = 0; i < N; i++) {
    lt_value_t *got = NULL;
    cr_assert_eq(lt__store_get(st, oid(client, i), &got, NULL, NULL), LT_OK);
    cr_assert_eq(got->len, i % 17);
    lt__value_unref(got);
    cr_assert_eq(lt__store_get(st, oid(client + 1, i), NULL, NULL, NULL), LT_EAGAIN);
  }
  for (uint64_t i = 0; i < N; i += 2)
    cr_assert_eq(lt__store_release(st, oid(client, i)), LT_OK);
  cr_assert_eq(lt__store_count(st), N + N / 2);
  cr_assert_eq(lt__store_release_client(st, client + 1), N);
  cr_assert_eq(lt__store_release_client(st, client), N / 2);
  cr_assert_eq(lt__store_count(st), 0);
  cr_assert_eq(lt__store_bytes(st), 0);
  lt__store_free(st);
}
