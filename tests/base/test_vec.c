/* tests/base/test_vec.c: the growable array (proto/base/vec.h): appends and their indices,
 * geometric growth, zeroed new room, reserve, clear and reuse, arrays sharing one capacity,
 * free, and that a size overflow or a failed allocation leaves the array as it was. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <lithium/error.h>
#include "vec.h"

typedef struct pair {
  int a;
  double b;
} pair_t;

Test(vec, push_appends_in_order) {
  pair_t *v = NULL;
  uint32_t n = 0;
  size_t cap = 0;
  for (int i = 0; i < 1000; i++) {
    pair_t *p = LT_VEC_PUSH(v, n, cap);
    cr_assert_not_null(p);
    cr_assert_eq(p, &v[i]);
    cr_assert_eq(n, (uint32_t)i + 1);
    cr_assert_eq(p->a, 0);
    cr_assert_eq(p->b, 0.0);
    p->a = i;
  }
  for (int i = 0; i < 1000; i++)
    cr_assert_eq(v[i].a, i);
  LT_VEC_FREE(v, n, cap);
  cr_assert_null(v);
  cr_assert_eq(n, 0);
  cr_assert_eq(cap, 0);
}

Test(vec, grows_geometrically) {
  int *v = NULL;
  size_t n = 0, cap = 0, grew = 0, last = 0;
  for (int i = 0; i < 100000; i++) {
    cr_assert_not_null(LT_VEC_PUSH(v, n, cap));
    if (cap != last) grew++;
    cr_assert(last == 0 || cap == 2 * last || cap == last);
    last = cap;
  }
  cr_assert_leq(grew, 15); /* 8 doubled up to 131072 */
  cr_assert_geq(cap, n);
  LT_VEC_FREE(v, n, cap);
}

Test(vec, reserve_zeroes_new_room) {
  unsigned char *v = NULL;
  size_t cap = 0;
  cr_assert_eq(LT_VEC_RESERVE(v, cap, 5), LT_OK);
  cr_assert_eq(cap, 8);
  memset(v, 0xff, cap);
  cr_assert_eq(LT_VEC_RESERVE(v, cap, 8), LT_OK);
  cr_assert_eq(cap, 8);
  cr_assert_eq(LT_VEC_RESERVE(v, cap, 100), LT_OK);
  cr_assert_eq(cap, 128);
  for (size_t i = 0; i < cap; i++)
    cr_assert_eq(v[i], i < 8 ? 0xff : 0);
  free(v);
}

Test(vec, clear_keeps_memory_and_push_zeroes) {
  pair_t *v = NULL;
  size_t n = 0, cap = 0;
  for (int i = 0; i < 3; i++)
    LT_VEC_PUSH(v, n, cap)->a = 7;
  pair_t *before = v;
  size_t cap_before = cap;
  n = 0; /* clear */
  pair_t *p = LT_VEC_PUSH(v, n, cap);
  cr_assert_eq(v, before);
  cr_assert_eq(cap, cap_before);
  cr_assert_eq(p->a, 0);
  cr_assert_eq(n, 1);
  LT_VEC_FREE(v, n, cap);
}

Test(vec, resize_shared_capacity) {
  int *a = NULL;
  char **b = NULL;
  size_t cap = 0;
  cr_assert_eq(LT_VEC_RESIZE(a, cap, 4), LT_OK);
  cr_assert_eq(LT_VEC_RESIZE(b, cap, 4), LT_OK);
  cap = 4;
  a[3] = 3;
  b[3] = "x";
  cr_assert_eq(LT_VEC_RESIZE(a, cap, 16), LT_OK);
  cr_assert_eq(LT_VEC_RESIZE(b, cap, 16), LT_OK);
  cap = 16;
  cr_assert_eq(a[3], 3);
  cr_assert_str_eq(b[3], "x");
  for (size_t i = 4; i < cap; i++) {
    cr_assert_eq(a[i], 0);
    cr_assert_null(b[i]);
  }
  cr_assert_eq(LT_VEC_RESIZE(a, cap, 2), LT_OK);
  cr_assert_eq(LT_VEC_RESIZE(a, 2, 0), LT_OK);
  cr_assert_null(a);
  free(b);
}

Test(vec, size_overflow_is_refused) {
  uint64_t *v = NULL;
  size_t n = 0, cap = 0;
  for (int i = 0; i < 3; i++)
    *LT_VEC_PUSH(v, n, cap) = 42;
  uint64_t *before = v;
  /* need * 8 overflows size_t; PTRDIFF_MAX / 8 + 1 elements are no object either. */
  cr_assert_eq(LT_VEC_RESERVE(v, cap, SIZE_MAX / 4), LT_ENOMEM);
  cr_assert_eq(LT_VEC_RESERVE(v, cap, SIZE_MAX), LT_ENOMEM);
  cr_assert_eq(LT_VEC_RESERVE(v, cap, (size_t)PTRDIFF_MAX / 8 + 1), LT_ENOMEM);
  cr_assert_eq(LT_VEC_RESIZE(v, cap, SIZE_MAX / 2), LT_ENOMEM);
  cr_assert_eq(v, before);
  cr_assert_eq(cap, 8);
  cr_assert_eq(v[2], 42);
  LT_VEC_FREE(v, n, cap);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

#ifndef UNDER_SANITIZER
/* limit_memory caps this test process's address space 16 MiB above what it uses, so a
 * larger allocation fails for real. Criterion runs each test in a process of its own. */
static void limit_memory(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  cr_assert_not_null(f);
  unsigned long pages = 0;
  cr_assert_eq(fscanf(f, "%lu", &pages), 1);
  fclose(f);
  rlim_t lim = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)16 << 20);
  struct rlimit rl = {lim, lim};
  cr_assert_eq(setrlimit(RLIMIT_AS, &rl), 0);
}
#endif

Test(vec, out_of_memory_keeps_the_array) {
#ifdef UNDER_SANITIZER
  cr_skip_test("the sanitizer's shadow memory needs the address space");
#else
  char *v = NULL;
  size_t n = 0, cap = 0;
  cr_assert_eq(LT_VEC_RESERVE(v, cap, (size_t)32 << 20), LT_OK);
  memset(v, 'x', cap);
  n = cap;
  char *before = v;
  size_t cap_before = cap;
  limit_memory();
  /* Doubling to 64 MiB needs 32 MiB more than the limit leaves. */
  cr_assert_null(LT_VEC_PUSH(v, n, cap));
  cr_assert_eq(n, cap_before);
  cr_assert_eq(LT_VEC_RESERVE(v, cap, (size_t)1 << 30), LT_ENOMEM);
  cr_assert_eq(LT_VEC_RESIZE(v, cap, (size_t)1 << 30), LT_ENOMEM);
  cr_assert_eq(v, before);
  cr_assert_eq(cap, cap_before);
  cr_assert_eq(v[n - 1], 'x');
  free(v);
#endif
}
