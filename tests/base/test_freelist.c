/* test_freelist.c: objects kept for reuse (proto/base/freelist.c): a kept object comes back
 * zeroed, at most `max` are kept, clear frees them; under ASan nothing is kept. */
#include <criterion/criterion.h>
#include <string.h>

#include "freelist.h"

typedef struct obj {
  void *link;
  char bytes[40];
} obj_t;

#if defined(__SANITIZE_ADDRESS__)
#define KEEPS 0
#else
#define KEEPS 1
#endif

Test(freelist, a_kept_object_comes_back_zeroed) {
  lt_freelist_t fl = LT_FREELIST_INIT(sizeof(obj_t), 2);
  obj_t *a = lt__freelist_get(&fl);
  cr_assert_not_null(a);
  memset(a, 0x5a, sizeof *a);
  lt__freelist_put(&fl, a);
  cr_assert_eq(fl.n, (size_t)KEEPS);
  obj_t *b = lt__freelist_get(&fl);
  cr_assert_not_null(b);
  if (KEEPS) cr_assert_eq(b, a, "the kept object is reused");
  obj_t zero;
  memset(&zero, 0, sizeof zero);
  cr_assert_eq(memcmp(b, &zero, sizeof zero), 0, "zeroed as calloc would");
  cr_assert_eq(fl.n, 0);
  lt__freelist_put(&fl, b);
  lt__freelist_clear(&fl);
  cr_assert_eq(fl.n, 0);
  cr_assert_null(fl.head);
}

Test(freelist, at_most_max_are_kept) {
  lt_freelist_t fl = LT_FREELIST_INIT(sizeof(obj_t), 2);
  obj_t *o[4];
  for (int i = 0; i < 4; i++)
    o[i] = lt__freelist_get(&fl);
  for (int i = 0; i < 4; i++)
    lt__freelist_put(&fl, o[i]);
  cr_assert_eq(fl.n, KEEPS ? 2u : 0u);
  lt__freelist_put(&fl, NULL);
  cr_assert_eq(fl.n, KEEPS ? 2u : 0u);
  lt__freelist_clear(&fl);
}
