/* store.h: the server's value store (DESIGN.md 4): id -> {pending|ready|failed, value,
 * parked waiters}. Single assignment: set or fail happens once. A get on a pending id parks
 * the caller's waiter, which is called when the value is set or failed; nothing blocks and
 * nothing spins. Loop thread only (the store is not locked); values themselves are
 * reference counted and may be read by any thread. */
#ifndef LT_STORE_H
#define LT_STORE_H

#include <stddef.h>
#include <stdint.h>
#include "msg.h"
#include "value.h"

typedef struct lt_store lt_store_t;
typedef struct lt_waiter lt_waiter_t;

/* A waiter callback: `status` is LT_OK with `v` borrowed (take a reference to keep it), or
 * an error (LT_EKERNEL and friends for a failed value with its message in `errmsg`,
 * LT_ECANCELED when the id was released, LT_ESHUTDOWN when the store is freed). The waiter
 * is unlinked before the call, so the callback may free it or park it again. */
typedef void (*lt_waiter_cb)(lt_waiter_t *w, lt_oid_t id, int status, lt_value_t *v,
                             const char *errmsg);

/* Embed in the reader's own struct; the store links it, never allocates or frees it. */
struct lt_waiter {
  lt_waiter_cb cb;
  void *data;
  lt_waiter_t *next; /* store-private */
  lt_waiter_t *prev; /* store-private */
};

/* Told every change of what is held under one client id: `bytes` of ready values (+len
 * when a value is set, -len when it leaves the store) and `ids` (+1 when an id enters the
 * store, pending, ready or failed; -1 when it leaves). */
typedef void (*lt_store_account_cb)(uint64_t client, int64_t bytes, int64_t ids, void *data);

/* Told that `id` entered the store (expected, set or failed while unknown). The store is
 * in the middle of that operation: the callback may not call the store. */
typedef void (*lt_store_new_cb)(lt_oid_t id, void *data);

/* lt__store_set_on_new sets the callback told of every new id (NULL: none). */
void lt__store_set_on_new(lt_store_t *st, lt_store_new_cb cb, void *data);

/* lt__store_set_account sets the accounting callback (NULL: none). */
void lt__store_set_account(lt_store_t *st, lt_store_account_cb cb, void *data);

/* lt__store_new creates an empty store. */
int lt__store_new(lt_store_t **out);

/* lt__store_free calls every parked waiter with LT_ESHUTDOWN, drops every value and frees
 * the store; accepts NULL. */
void lt__store_free(lt_store_t *st);

/* lt__store_expect creates a pending entry for `id` (an instruction will produce it), so
 * that readers park instead of getting LT_ENOENT. LT_OK also when it exists already. */
int lt__store_expect(lt_store_t *st, lt_oid_t id);

/* lt__store_set binds `v` to `id` (the store takes its own reference) and wakes the
 * waiters. LT_EEXIST when the id is already ready or failed (single assignment). */
int lt__store_set(lt_store_t *st, lt_oid_t id, lt_value_t *v);

/* lt__store_fail marks `id` failed with `status` (< 0) and `errmsg` (copied) and wakes the
 * waiters. LT_EEXIST when already ready or failed. */
int lt__store_fail(lt_store_t *st, lt_oid_t id, int status, const char *errmsg);

/* lt__store_get looks `id` up. Ready: LT_OK and *out is a new reference (caller unrefs).
 * Pending: with `w` the waiter is parked and LT_EAGAIN returned; without, LT_EAGAIN.
 * Failed: its status, and *errmsg (if not NULL) points at its message (borrowed, valid
 * while the id is held). Unknown: LT_ENOENT. */
int lt__store_get(lt_store_t *st, lt_oid_t id, lt_value_t **out, lt_waiter_t *w,
                  const char **errmsg);

/* lt__store_unpark removes a parked waiter without calling it (its reader went away). */
void lt__store_unpark(lt_store_t *st, lt_waiter_t *w);

/* lt__store_release drops `id`: its value reference, and its parked waiters, which are called
 * with LT_ECANCELED. LT_ENOENT when unknown. */
int lt__store_release(lt_store_t *st, lt_oid_t id);

/* lt__store_release_client drops every id of client `client` (its session ended) and
 * returns how many. */
size_t lt__store_release_client(lt_store_t *st, uint64_t client);

/* lt__store_count returns the number of ids held (pending, ready or failed). */
size_t lt__store_count(const lt_store_t *st);

/* lt__store_bytes returns the bytes of all ready values. */
size_t lt__store_bytes(const lt_store_t *st);

#endif
