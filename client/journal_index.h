/* journal_index.h: the index of a results journal: for every record of the file, a 64-bit key
 * (the first half of its input's digest) and the record's offset, 16 bytes a record, sorted
 * once the file has been read so that a lookup is a binary search. Resuming a journal of N
 * results holds N entries, not the results: those are read back from the file when their
 * turn comes. Equal keys (an input journaled twice, or two inputs whose digests share a
 * first half) stay side by side in file order; the caller tells them apart by the record's
 * full digest. Caller's lock (the journal's). */
#ifndef LT_JOURNAL_INDEX_H
#define LT_JOURNAL_INDEX_H

#include <stddef.h>
#include <stdint.h>

typedef struct lt_jidx_entry {
  uint64_t key; /* first half of the input's digest */
  uint64_t off; /* the record's offset in the file */
} lt_jidx_entry_t;

typedef struct lt_jidx {
  lt_jidx_entry_t *v;
  size_t n, cap;
} lt_jidx_t;

/* lt__jidx_add appends an entry (file order). LT_ENOMEM. */
int lt__jidx_add(lt_jidx_t *x, uint64_t key, uint64_t off);

/* lt__jidx_seal sorts the entries by key, then offset, in place (no second copy of the
 * index at any time), and gives back the unused capacity. */
void lt__jidx_seal(lt_jidx_t *x);

/* lt__jidx_first returns the position of the first entry with `key` in a sealed index, or
 * x->n when there is none; the entries with that key follow it. */
size_t lt__jidx_first(const lt_jidx_t *x, uint64_t key);

/* lt__jidx_clear frees the entries; the index is empty again. */
void lt__jidx_clear(lt_jidx_t *x);

#endif
