/* store.c: the server's value store: a uthash table from object id to entry. Each entry is
 * pending (an instruction will produce it), ready (a value) or failed (a status and a
 * message), and keeps its parked readers in an intrusive circular list whose sentinel lives
 * in the entry, so parking and unparking are O(1). Loop thread only; waiter callbacks run on
 * that thread and may re-enter the store. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>

#include "oid.h"
#include "store.h"

typedef struct entry entry_t;

/* uthash reports allocation failure through this hook instead of exiting the process. */
#define HASH_NONFATAL_OOM        1
#define uthash_nonfatal_oom(obj) ((obj)->oom = true)
/* Ids are a random client id plus a sequence: mixing the two words is a good hash and
 * cheaper than uthash's byte-wise default. */
#define HASH_FUNCTION(keyptr, keylen, hashv) ((hashv) = oid_hash(keyptr, keylen))
#include <uthash.h>

enum { PENDING, READY, FAILED };

struct entry {
  lt_oid_t id; /* hash key: two uint64_t, no padding */
  int state;
  int status;          /* FAILED: the lt_err code */
  lt_value_t *value;   /* READY: one reference held by the store */
  lt_value_t *msg;     /* FAILED: the message, NUL-terminated; refcounted so that waking can
                          keep it alive while a callback releases the id */
  lt_waiter_t waiters; /* sentinel of the circular list of parked waiters */
  entry_t *dead;       /* link while being dropped outside the table */
  bool oom;            /* set by uthash when adding failed */
  UT_hash_handle hh;
};

struct lt_store {
  entry_t *table;
  size_t bytes;
  lt_store_account_cb account; /* told every change of a client's bytes and ids, or NULL */
  void *account_data;
  lt_store_new_cb on_new; /* told of every new id, or NULL */
  void *on_new_data;
  bool closing; /* lt__store_free is running: refuse new entries */
};

static unsigned oid_hash(const void *key, size_t keylen) {
  lt_oid_t id;
  (void)keylen; /* always sizeof(lt_oid_t) */
  memcpy(&id, key, sizeof id);
  uint64_t x = id.client ^ (id.seq * 0x9e3779b97f4a7c15ULL);
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ULL;
  x ^= x >> 32;
  return (unsigned)x;
}

/* list_init makes an empty circular list with sentinel s. */
static void list_init(lt_waiter_t *s) {
  s->next = s->prev = s;
}

static bool list_empty(const lt_waiter_t *s) {
  return s->next == s;
}

/* list_push links w last (waiters are woken in the order they parked). */
static void list_push(lt_waiter_t *s, lt_waiter_t *w) {
  w->next = s;
  w->prev = s->prev;
  s->prev->next = w;
  s->prev = w;
}

/* list_unlink removes w and clears its links, so that a later unpark is a no-op. */
static void list_unlink(lt_waiter_t *w) {
  w->prev->next = w->next;
  w->next->prev = w->prev;
  w->next = w->prev = NULL;
}

/* list_move moves every waiter from sentinel `from` to the empty sentinel `to`. */
static void list_move(lt_waiter_t *from, lt_waiter_t *to) {
  if (list_empty(from)) {
    list_init(to);
    return;
  }
  to->next = from->next;
  to->prev = from->prev;
  to->next->prev = to;
  to->prev->next = to;
  list_init(from);
}

/* wake calls every waiter of the detached list `l`. The list lives on the caller's stack and
 * no longer in any entry, so a callback may release or set ids, park new waiters elsewhere,
 * or unpark (even free) waiters still on `l`: each one is unlinked before its call. */
static void wake(lt_waiter_t *l, lt_oid_t id, int status, lt_value_t *v, const char *errmsg) {
  while (!list_empty(l)) {
    lt_waiter_t *w = l->next;
    list_unlink(w);
    w->cb(w, id, status, v, errmsg);
  }
}

static entry_t *find(const lt_store_t *st, lt_oid_t id) {
  entry_t *e = NULL;
  HASH_FIND(hh, st->table, &id, sizeof(lt_oid_t), e);
  return e;
}

/* insert adds a new pending entry; NULL on out of memory. */
static entry_t *insert(lt_store_t *st, lt_oid_t id) {
  entry_t *e = calloc(1, sizeof *e);
  if (e == NULL) return NULL;
  e->id = id;
  e->state = PENDING;
  list_init(&e->waiters);
  HASH_ADD(hh, st->table, id, sizeof(lt_oid_t), e);
  if (e->oom) {
    free(e);
    return NULL;
  }
  if (st->account != NULL) st->account(id.client, 0, 1, st->account_data);
  if (st->on_new != NULL) st->on_new(id, st->on_new_data);
  return e;
}

/* account adds `delta` bytes to the store's total and tells the accounting callback. */
static void account(lt_store_t *st, uint64_t client, int64_t delta) {
  st->bytes += (size_t)delta;
  if (st->account != NULL) st->account(client, delta, 0, st->account_data);
}

/* account_out tells the accounting callback that entry e left the table. */
static void account_out(lt_store_t *st, const entry_t *e) {
  int64_t bytes = e->state == READY ? -(int64_t)e->value->len : 0;
  st->bytes += (size_t)bytes;
  if (st->account != NULL) st->account(e->id.client, bytes, -1, st->account_data);
}

void lt__store_set_account(lt_store_t *st, lt_store_account_cb cb, void *data) {
  st->account = cb;
  st->account_data = data;
}

void lt__store_set_on_new(lt_store_t *st, lt_store_new_cb cb, void *data) {
  st->on_new = cb;
  st->on_new_data = data;
}

/* unlink_entry takes e out of the table and moves its waiters to `l`. */
static void unlink_entry(lt_store_t *st, entry_t *e, lt_waiter_t *l) {
  HASH_DEL(st->table, e);
  account_out(st, e);
  list_move(&e->waiters, l);
}

static void free_entry(entry_t *e) {
  lt__value_unref(e->value);
  lt__value_unref(e->msg);
  free(e);
}

int lt__store_new(lt_store_t **out) {
  lt_store_t *st = calloc(1, sizeof *st);
  if (st == NULL) return LT_ENOMEM;
  *out = st;
  return LT_OK;
}

void lt__store_free(lt_store_t *st) {
  if (st == NULL) return;
  st->closing = true;
  /* One entry at a time: callbacks may release other ids, so no iterator is kept across
   * a call. */
  entry_t *e;
  while ((e = st->table) != NULL) {
    lt_waiter_t l;
    lt_oid_t id = e->id;
    unlink_entry(st, e, &l);
    free_entry(e);
    wake(&l, id, LT_ESHUTDOWN, NULL, NULL);
  }
  free(st);
}

int lt__store_expect(lt_store_t *st, lt_oid_t id) {
  if (st->closing) return LT_ESHUTDOWN;
  if (find(st, id) != NULL) return LT_OK;
  return insert(st, id) != NULL ? LT_OK : LT_ENOMEM;
}

int lt__store_set(lt_store_t *st, lt_oid_t id, lt_value_t *v) {
  if (st->closing) return LT_ESHUTDOWN;
  entry_t *e = find(st, id);
  if (e != NULL && e->state != PENDING) return LT_EEXIST;
  if (e == NULL && (e = insert(st, id)) == NULL) return LT_ENOMEM;
  e->state = READY;
  e->value = lt__value_ref(v);
  account(st, id.client, (int64_t)v->len);
  lt_waiter_t l;
  list_move(&e->waiters, &l);
  /* A callback may release the id and drop the store's reference: hold one meanwhile. */
  lt__value_ref(v);
  wake(&l, id, LT_OK, v, NULL);
  lt__value_unref(v);
  return LT_OK;
}

int lt__store_fail(lt_store_t *st, lt_oid_t id, int status, const char *errmsg) {
  if (status >= 0) return LT_EINVAL;
  if (st->closing) return LT_ESHUTDOWN;
  if (errmsg == NULL) errmsg = "";
  entry_t *e = find(st, id);
  if (e != NULL && e->state != PENDING) return LT_EEXIST;
  lt_value_t *msg = lt__value_copy(errmsg, strlen(errmsg) + 1);
  if (msg == NULL) return LT_ENOMEM;
  if (e == NULL && (e = insert(st, id)) == NULL) {
    lt__value_unref(msg);
    return LT_ENOMEM;
  }
  e->state = FAILED;
  e->status = status;
  e->msg = msg;
  lt_waiter_t l;
  list_move(&e->waiters, &l);
  lt__value_ref(msg);
  wake(&l, id, status, NULL, msg->data);
  lt__value_unref(msg);
  return LT_OK;
}

int lt__store_get(lt_store_t *st, lt_oid_t id, lt_value_t **out, lt_waiter_t *w,
                  const char **errmsg) {
  if (out != NULL) *out = NULL;
  if (errmsg != NULL) *errmsg = NULL;
  entry_t *e = find(st, id);
  if (e == NULL) return LT_ENOENT;
  switch (e->state) {
  case READY:
    if (out != NULL) *out = lt__value_ref(e->value);
    return LT_OK;
  case FAILED:
    if (errmsg != NULL) *errmsg = e->msg->data;
    return e->status;
  default:
    if (w != NULL) list_push(&e->waiters, w);
    return LT_EAGAIN;
  }
}

void lt__store_unpark(lt_store_t *st, lt_waiter_t *w) {
  (void)st; /* the list is circular through the entry's sentinel: no lookup needed */
  if (w->next != NULL) list_unlink(w);
}

int lt__store_release(lt_store_t *st, lt_oid_t id) {
  entry_t *e = find(st, id);
  if (e == NULL) return LT_ENOENT;
  lt_waiter_t l;
  unlink_entry(st, e, &l);
  free_entry(e);
  wake(&l, id, LT_ECANCELED, NULL, NULL);
  return LT_OK;
}

size_t lt__store_release_client(lt_store_t *st, uint64_t client) {
  /* First take every matching entry out of the table, with no callback running, so the
   * iteration cannot be disturbed; then wake their waiters one entry at a time. */
  entry_t *dead = NULL, *e, *tmp;
  size_t n = 0;
  HASH_ITER(hh, st->table, e, tmp) {
    if (e->id.client != client) continue;
    HASH_DEL(st->table, e);
    account_out(st, e);
    e->dead = dead;
    dead = e;
    n++;
  }
  while ((e = dead) != NULL) {
    dead = e->dead;
    lt_waiter_t l;
    lt_oid_t id = e->id;
    list_move(&e->waiters, &l);
    free_entry(e);
    wake(&l, id, LT_ECANCELED, NULL, NULL);
  }
  return n;
}

size_t lt__store_count(const lt_store_t *st) {
  return HASH_COUNT(st->table);
}

size_t lt__store_bytes(const lt_store_t *st) {
  return st->bytes;
}
