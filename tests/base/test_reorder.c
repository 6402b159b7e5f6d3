/* test_reorder.c: the reorder buffer (proto/base/reorder.c): items put out of order come back
 * in order, whatever the distance ahead; a reader that keeps up never makes it grow; a
 * reserved position is held without growing; a wrong position is refused and what is held
 * stays; draining gives every item back once. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "reorder.h"

/* item makes a distinct non-NULL pointer for position p (never dereferenced). */
static void *item(uint64_t p) {
  return (void *)(uintptr_t)(p * 2 + 1);
}

Test(reorder, out_of_order_comes_back_in_order) {
  lt_reorder_t r = LT_REORDER_INIT;
  uint64_t next = 0;
  enum { N = 5000 };
  /* Positions arrive in blocks of 700 reversed: up to 699 ahead of the reader. */
  for (uint64_t b = 0; b < N; b += 700) {
    for (uint64_t k = 700; k-- > 0;)
      if (b + k < N) cr_assert_eq(lt__reorder_put(&r, b + k, next, item(b + k)), 0);
    void *it;
    while ((it = lt__reorder_take(&r, next)) != NULL) {
      cr_assert_eq(it, item(next));
      next++;
    }
  }
  cr_assert_eq(next, N, "every item came back");
  cr_assert_eq(r.n, 0);
  cr_assert_leq(r.cap, 1024, "the ring grew only to the distance ahead");
  lt__reorder_free(&r);
}

Test(reorder, a_reader_that_keeps_up_never_grows_it) {
  lt_reorder_t r = LT_REORDER_INIT;
  for (uint64_t p = 0; p < 100000; p++) {
    cr_assert_eq(lt__reorder_put(&r, p, p, item(p)), 0);
    cr_assert_eq(lt__reorder_take(&r, p), item(p));
  }
  cr_assert_eq(r.cap, 64, "the first ring serves the whole stream");
  cr_assert_null(lt__reorder_take(&r, 100000), "nothing is there");
  lt__reorder_free(&r);
}

Test(reorder, a_reserved_position_is_held_without_growing) {
  lt_reorder_t r = LT_REORDER_INIT;
  cr_assert_eq(lt__reorder_reserve(&r, 500, 10), 0);
  size_t cap = r.cap;
  cr_assert_geq(cap, 491);
  for (uint64_t p = 500; p >= 10; p--)
    cr_assert_eq(lt__reorder_put(&r, p, 10, item(p)), 0);
  cr_assert_eq(r.cap, cap, "every reserved position had its slot");
  cr_assert_eq(r.n, 491);
  for (uint64_t p = 10; p <= 500; p++)
    cr_assert_eq(lt__reorder_take(&r, p), item(p));
  lt__reorder_free(&r);
}

Test(reorder, a_wrong_position_is_refused_not_lost) {
  lt_reorder_t r = LT_REORDER_INIT;
  cr_assert_eq(lt__reorder_put(&r, 67, 10, item(67)), 0);
  cr_assert_eq(lt__reorder_put(&r, 67, 10, item(1)), -1, "held already");
  cr_assert_eq(lt__reorder_put(&r, 3, 10, item(3)), -1, "below the first not taken");
  cr_assert_eq(lt__reorder_put(&r, 12, 10, NULL), -1, "no item");
  cr_assert_eq(lt__reorder_reserve(&r, 5, 10), -1);
  cr_assert_eq(lt__reorder_put(&r, UINT64_MAX, 0, item(9)), -1, "no ring that large");
  cr_assert_eq(r.n, 1);
  cr_assert_eq(lt__reorder_take(&r, 67), item(67));
  cr_assert_null(lt__reorder_take(&r, 3));
  lt__reorder_free(&r);
}

Test(reorder, drain_gives_every_item_back_once) {
  lt_reorder_t r = LT_REORDER_INIT;
  uint64_t sum = 0, got = 0;
  for (uint64_t p = 5; p < 300; p += 3) {
    cr_assert_eq(lt__reorder_put(&r, p, 5, item(p)), 0);
    sum += p;
  }
  cr_assert_eq(lt__reorder_put(&r, 5 + 3 * 99, 5, item(5 + 3 * 99)), 0);
  sum += 5 + 3 * 99;
  void *it;
  size_t n = 0;
  while ((it = lt__reorder_pop(&r)) != NULL) {
    got += ((uintptr_t)it - 1) / 2;
    n++;
  }
  cr_assert_eq(n, 100);
  cr_assert_eq(got, sum);
  cr_assert_null(lt__reorder_pop(&r));
  lt__reorder_free(&r);
}
