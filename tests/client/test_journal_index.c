/* test_journal_index.c: the index of a results journal (client/journal_index.c) on its own:
 * entries in file order, sealed (sorted by key, then offset, without a second copy), looked
 * up by key; equal keys side by side in file order; a missing key is not found; 16 bytes an
 * entry once sealed. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include <lithium/error.h>
#include "journal_index.h"

/* key_of spreads entry i over the keys, with every seventh one a repeat of an earlier key. */
static uint64_t key_of(uint64_t i) {
  uint64_t k = i % 7 == 6 ? i / 2 : i;
  k *= 0x9e3779b97f4a7c15ull;
  return k ^ (k >> 29);
}

Test(journal_index, lookups_after_seal_find_every_entry_in_file_order) {
  lt_jidx_t x = {0};
  enum { N = 100000 };
  for (uint64_t i = 0; i < N; i++)
    cr_assert_eq(lt__jidx_add(&x, key_of(i), 100 + 40 * i), LT_OK);
  lt__jidx_seal(&x);
  cr_assert_eq(x.n, N);
  cr_assert_eq(x.cap, N, "the spare capacity is given back: 16 bytes an entry");
  for (size_t i = 1; i < x.n; i++)
    cr_assert(x.v[i - 1].key < x.v[i].key ||
                  (x.v[i - 1].key == x.v[i].key && x.v[i - 1].off < x.v[i].off),
              "sorted at %zu", i);
  for (uint64_t i = 0; i < N; i++) {
    size_t at = lt__jidx_first(&x, key_of(i));
    cr_assert_lt(at, x.n, "entry %llu", (unsigned long long)i);
    cr_assert(at == 0 || x.v[at - 1].key != key_of(i), "the first of its key");
    int found = 0;
    for (size_t k = at; k < x.n && x.v[k].key == key_of(i); k++)
      found |= x.v[k].off == 100 + 40 * i;
    cr_assert(found, "entry %llu among those of its key", (unsigned long long)i);
  }
  /* A key repeated (entry 6 repeats entry 3's key): both, the older first. */
  size_t at = lt__jidx_first(&x, key_of(3));
  cr_assert_eq(key_of(6), key_of(3));
  cr_assert_eq(x.v[at].off, 100 + 40 * 3);
  cr_assert_eq(x.v[at + 1].off, 100 + 40 * 6);
  cr_assert_eq(lt__jidx_first(&x, 12345), x.n, "a key never added");
  lt__jidx_clear(&x);
  cr_assert_eq(x.n, 0);
  cr_assert_null(x.v);
}

Test(journal_index, an_empty_index_finds_nothing) {
  lt_jidx_t x = {0};
  lt__jidx_seal(&x);
  cr_assert_eq(lt__jidx_first(&x, 0), 0);
  cr_assert_eq(lt__jidx_add(&x, 5, 64), LT_OK);
  lt__jidx_seal(&x);
  cr_assert_eq(lt__jidx_first(&x, 5), 0);
  cr_assert_eq(lt__jidx_first(&x, 4), 1);
  cr_assert_eq(lt__jidx_first(&x, 6), 1);
  lt__jidx_clear(&x);
}
