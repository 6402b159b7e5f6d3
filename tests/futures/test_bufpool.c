/* test_bufpool.c: the output buffer pool (bufpool.h): a buffer of a size seen again is the
 * same mapping, reused without new pages; small ones are malloc'd; the idle bytes stay under
 * the bound (the oldest go first); idle buffers are unmapped after LT_BUFPOOL_IDLE_TICKS
 * ticks or by a trim; the pool turned off keeps nothing; a pooled value gives its buffer
 * back at the last unref; under AddressSanitizer an idle buffer is poisoned. The pool is off
 * until configured, as in a client process. Criterion runs each test in a process of its
 * own, so each starts with an empty pool, turned on by the suite's init. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "bufpool.h"
#include "value.h"

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#ifdef TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

#define MIB ((size_t)1 << 20)

static lt_bufpool_stats_t stats(void) {
  lt_bufpool_stats_t st;
  lt__bufpool_stats(&st);
  return st;
}

static void pool_on(void) {
  lt__bufpool_configure(LT_BUFPOOL_DEFAULT_MAX);
}

TestSuite(bufpool, .init = pool_on);

/* Not configured (a client process): every buffer is malloc'd and nothing is kept. */
Test(bufpool_off, off_until_configured) {
  cr_assert_eq(stats().max_bytes, 0);
  void *p = lt__bufpool_alloc(4 * MIB);
  cr_assert_not_null(p);
  memset(p, 3, 4 * MIB);
  lt__bufpool_free(p);
  lt_bufpool_stats_t st = stats();
  cr_assert_eq(st.mapped, 0);
  cr_assert_eq(st.idle, 0);
}

Test(bufpool, reuse_same_class) {
  unsigned char *a = lt__bufpool_alloc(MIB);
  cr_assert_not_null(a);
  cr_assert_geq(lt__bufpool_capacity(a), MIB);
  memset(a, 0xab, MIB);
  lt__bufpool_free(a);
  cr_assert_eq(stats().idle, 1);
  /* A little larger, in the same class: the same mapping, its pages already there. */
  unsigned char *b = lt__bufpool_alloc(MIB + 1000);
  cr_assert_eq(b, a, "a size seen again reuses the kept buffer");
  cr_assert_eq(b[MIB - 1], 0xab, "the pages were kept, not mapped again");
  lt_bufpool_stats_t st = stats();
  cr_assert_eq(st.mapped, 1);
  cr_assert_eq(st.reused, 1);
  cr_assert_eq(st.idle, 0);
  /* Twice the size is another class: a new mapping. */
  unsigned char *c = lt__bufpool_alloc(2 * MIB);
  cr_assert_neq(c, b);
  cr_assert_eq(stats().mapped, 2);
  lt__bufpool_free(b);
  lt__bufpool_free(c);
  cr_assert_eq(stats().idle, 2);
}

Test(bufpool, larger_idle_serves_within_a_power_of_two) {
  void *big = lt__bufpool_alloc(2 * MIB);
  lt__bufpool_free(big);
  /* Half the size: the idle 2 MiB buffer serves it. */
  void *half = lt__bufpool_alloc(MIB + 4096);
  cr_assert_eq(half, big);
  cr_assert_geq(lt__bufpool_capacity(half), 2 * MIB);
  lt__bufpool_free(half);
  /* A quarter: more than a power of two smaller, a mapping of its own. */
  void *quarter = lt__bufpool_alloc(MIB / 2);
  cr_assert_neq(quarter, big);
  lt_bufpool_stats_t st = stats();
  cr_assert_eq(st.mapped, 2);
  cr_assert_eq(st.reused, 1);
  lt__bufpool_free(quarter);
}

Test(bufpool, small_from_malloc) {
  char *p = lt__bufpool_alloc(100);
  cr_assert_not_null(p);
  cr_assert_eq(lt__bufpool_capacity(p), 100);
  memset(p, 1, 100);
  char *z = lt__bufpool_alloc(0);
  cr_assert_not_null(z, "a zero-length buffer is a valid pointer");
  lt__bufpool_free(p);
  lt__bufpool_free(z);
  lt__bufpool_free(NULL);
  lt_bufpool_stats_t st = stats();
  cr_assert_eq(st.mapped, 0);
  cr_assert_eq(st.idle, 0);
}

Test(bufpool, bounded_oldest_first) {
  lt__bufpool_configure(3 * MIB);
  void *b[4];
  for (int i = 0; i < 4; i++) {
    b[i] = lt__bufpool_alloc(MIB);
    cr_assert_not_null(b[i]);
  }
  for (int i = 0; i < 4; i++)
    lt__bufpool_free(b[i]);
  lt_bufpool_stats_t st = stats();
  cr_assert_leq(st.idle_bytes, 3 * MIB, "idle bytes %llu over the bound",
                (unsigned long long)st.idle_bytes);
  cr_assert_eq(st.idle + st.unmapped, 4);
  cr_assert_geq(st.unmapped, 1);
  /* The newest idle buffer is the one reused; the oldest were unmapped. */
  void *again = lt__bufpool_alloc(MIB);
  cr_assert_eq(again, b[3]);
  lt__bufpool_free(again);
  /* A buffer larger than the bound is never kept. */
  lt__bufpool_configure(MIB);
  cr_assert_leq(stats().idle_bytes, MIB);
  void *big = lt__bufpool_alloc(2 * MIB);
  uint64_t before = stats().unmapped;
  lt__bufpool_free(big);
  cr_assert_eq(stats().unmapped, before + 1);
}

Test(bufpool, trimmed_when_idle) {
  void *a = lt__bufpool_alloc(MIB), *b = lt__bufpool_alloc(4 * MIB);
  lt__bufpool_free(a);
  for (int i = 0; i < LT_BUFPOOL_IDLE_TICKS / 2; i++)
    cr_assert_eq(lt__bufpool_tick(), 0);
  lt__bufpool_free(b); /* idle since a later tick */
  for (int i = LT_BUFPOOL_IDLE_TICKS / 2; i < LT_BUFPOOL_IDLE_TICKS - 1; i++)
    cr_assert_eq(lt__bufpool_tick(), 0);
  cr_assert_eq(stats().idle, 2);
  cr_assert_geq(lt__bufpool_tick(), MIB, "a, idle for LT_BUFPOOL_IDLE_TICKS ticks, goes");
  cr_assert_eq(stats().idle, 1);
  /* b went idle later and is not due yet: only the trim takes it now. */
  cr_assert_geq(lt__bufpool_trim(), 4 * MIB);
  lt_bufpool_stats_t st = stats();
  cr_assert_eq(st.idle, 0);
  cr_assert_eq(st.idle_bytes, 0);
  cr_assert_eq(st.unmapped, 2);
}

Test(bufpool, off_keeps_nothing) {
  void *kept = lt__bufpool_alloc(MIB);
  lt__bufpool_configure(0);
  void *p = lt__bufpool_alloc(MIB);
  cr_assert_not_null(p);
  memset(p, 2, MIB);
  lt__bufpool_free(p);
  lt__bufpool_free(kept); /* mapped before: unmapped now */
  lt_bufpool_stats_t st = stats();
  cr_assert_eq(st.mapped, 1, "with the pool off, buffers are malloc'd");
  cr_assert_eq(st.unmapped, 1);
  cr_assert_eq(st.idle, 0);
  cr_assert_eq(st.max_bytes, 0);
}

Test(bufpool, pooled_value_gives_back) {
  void *p = lt__bufpool_alloc(MIB);
  lt_value_t *v = lt__value_pooled(p, MIB);
  cr_assert_not_null(v);
  cr_assert_eq(v->kind, LT_VALUE_POOL);
  cr_assert_eq(v->data, p);
  lt__value_ref(v);
  lt__value_unref(v);
  cr_assert_eq(stats().idle, 0, "still referenced");
  lt__value_unref(v);
  cr_assert_eq(stats().idle, 1, "the last unref gives the buffer back");
  cr_assert_eq(lt__bufpool_alloc(MIB), p);
}

static void *churn(void *arg) {
  size_t size = (size_t)(uintptr_t)arg;
  for (int i = 0; i < 500; i++) {
    unsigned char *p = lt__bufpool_alloc(size);
    if (p == NULL) return (void *)1;
    p[0] = p[size - 1] = (unsigned char)i;
    lt__bufpool_free(p);
  }
  return NULL;
}

Test(bufpool, threads) {
  pthread_t t[4];
  for (uintptr_t i = 0; i < 4; i++)
    cr_assert_eq(pthread_create(&t[i], NULL, churn, (void *)((i % 2 + 1) * MIB)), 0);
  for (int i = 0; i < 4; i++) {
    void *ret = (void *)1;
    pthread_join(t[i], &ret);
    cr_assert_null(ret);
  }
  lt_bufpool_stats_t st = stats();
  cr_assert_eq(st.reused + st.mapped, 2000);
  /* A class gets a new mapping only while every buffer that could serve is held, and at most
   * 4 are held at once: at most 4 per class. */
  cr_assert_leq(st.mapped, 8, "the others are reuses");
}

#ifdef TEST_ASAN
Test(bufpool, idle_is_poisoned) {
  unsigned char *p = lt__bufpool_alloc(MIB);
  cr_assert_eq(__asan_address_is_poisoned(p), 0);
  lt__bufpool_free(p);
  cr_assert_neq(__asan_address_is_poisoned(p), 0, "an idle buffer is poisoned");
  cr_assert_neq(__asan_address_is_poisoned(p + MIB - 1), 0);
  unsigned char *q = lt__bufpool_alloc(MIB);
  cr_assert_eq(q, p);
  cr_assert_eq(__asan_address_is_poisoned(q + MIB - 1), 0, "a reused buffer is usable");
  lt__bufpool_free(q);
}
#endif
