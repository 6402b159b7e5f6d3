/* wire.h: helpers of the codec that need no protobuf-c types: the per-message bump arena,
 * the UTF-8 check and the pre-scan that bounds repeated fields before anything is
 * allocated. Internal to proto/ (only codec.c uses it). Any thread; an arena belongs to one
 * thread at a time. */
#ifndef LT_WIRE_H
#define LT_WIRE_H

#include "utf8.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A bump allocator: every allocation lives until lt__arena_free frees them all at once. */
typedef struct lt__arena lt__arena_t;

/* lt__arena_new returns an arena whose first region holds about `hint` bytes (clamped to
 * 1 KiB..256 KiB) in the same malloc as the arena itself; NULL when out of memory. Caller
 * owns the result and frees it with lt__arena_free. */
lt__arena_t *lt__arena_new(size_t hint);

/* lt__arena_alloc returns `n` bytes aligned for any scalar or pointer, valid until the
 * arena is freed; NULL when out of memory (then lt__arena_oom says so). Never returns
 * NULL for n == 0. */
void *lt__arena_alloc(lt__arena_t *a, size_t n);

/* lt__arena_oom says whether an allocation of `a` has failed. */
bool lt__arena_oom(const lt__arena_t *a);

/* lt__arena_free frees `a` and everything allocated from it; accepts NULL. */
void lt__arena_free(lt__arena_t *a);

/* lt__wire_prescan walks the protobuf wire format of an Envelope in p[0..len) without
 * allocating, counting the elements of every repeated field of its bodies (kernels,
 * instructions and their inputs/outputs/stages/pack fields, completions and their
 * outputs/pack fields, ids, seqs).
 * Returns 0, LT_ETOOBIG when a count exceeds `max_items`, LT_EPROTO for broken framing. */
int lt__wire_prescan(const uint8_t *p, size_t len, uint32_t max_items);

#endif
