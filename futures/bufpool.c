/* bufpool.c: the output buffer pool (bufpool.h). Every buffer starts with a header of HDR
 * bytes that says how it was made: malloc'd (small ones, or the pool off), or a mapped region
 * of a size class. Idle regions sit on two doubly linked lists at once: their class's (newest
 * first, so the warmest is reused) and the pool's (oldest first, so the bound and the trim
 * unmap the coldest). One mutex guards the lists; mapping and unmapping happen outside it.
 * A request takes an idle buffer of its class or of one up to a power of two larger (so at
 * most half of a reused buffer is slack). Knows nothing of values, calls or servers. Any
 * thread. */
#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bufpool.h"

#if defined(__SANITIZE_ADDRESS__)
#define LT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LT_ASAN 1
#endif
#endif
#ifdef LT_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define HDR       64                    /* keeps the data of a mapped region 64-byte aligned */
#define MAGIC_MAP 0x6c74706f6f6c6d70ULL /* "ltpoolmp" */
#define MAGIC_MEM 0x6c74706f6f6c6d6dULL /* "ltpoolmm" */
#define KMIN      16                    /* classes start above 2^16 bytes (LT_BUFPOOL_MIN + HDR) */
#define KMAX      47                    /* and end at 2^48 */
#define STEPS     4                     /* classes per power of two */
#define NCLASS    ((KMAX - KMIN + 1) * STEPS)

typedef struct hdr hdr_t;
struct hdr {
  uint64_t magic;
  size_t size;          /* MAP: the region's bytes, header included; MEM: the usable bytes */
  hdr_t *next, *prev;   /* idle: its class's list, newest first */
  hdr_t *newer, *older; /* idle: the pool's list */
  uint64_t tick;        /* idle: the tick it went idle at */
  uint32_t cls;
};
_Static_assert(sizeof(hdr_t) <= HDR, "the header fits in HDR bytes");

static struct {
  pthread_mutex_t mu;
  hdr_t *idle[NCLASS]; /* newest first */
  hdr_t *oldest, *newest;
  uint64_t idle_bytes, nidle, max_bytes, ticks;
  uint64_t reused, mapped, unmapped;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER}; /* off until configured */

static hdr_t *hdr_of(const void *p) {
  return (hdr_t *)((char *)p - HDR);
}

/* class_of gives the class of a region of at least `bytes` and its size: STEPS sizes between
 * 2^k (excluded) and 2^(k+1), each a multiple of 2^(k-2), so at most a quarter is slack (and
 * slack never touched is never faulted in). -1 when too large. */
static int class_of(size_t bytes, size_t *size) {
  int k = 63 - __builtin_clzll((unsigned long long)(bytes - 1)); /* 2^k < bytes <= 2^(k+1) */
  if (k < KMIN || k > KMAX) return -1;
  size_t step = (size_t)1 << (k - 2);
  size_t m = (bytes + step - 1) / step; /* 5..8 */
  *size = m * step;
  return (k - KMIN) * STEPS + (int)(m - 5);
}

/* idle_unlink takes h off both idle lists. Under the lock. */
static void idle_unlink(hdr_t *h) {
  if (h->prev != NULL)
    h->prev->next = h->next;
  else
    pool.idle[h->cls] = h->next;
  if (h->next != NULL) h->next->prev = h->prev;
  if (h->newer != NULL)
    h->newer->older = h->older;
  else
    pool.newest = h->older;
  if (h->older != NULL)
    h->older->newer = h->newer;
  else
    pool.oldest = h->newer;
  pool.idle_bytes -= h->size;
  pool.nidle--;
}

/* evict_oldest moves the oldest idle region onto *victims (linked by next). Under the lock. */
static void evict_oldest(hdr_t **victims) {
  hdr_t *h = pool.oldest;
  idle_unlink(h);
  h->next = *victims;
  *victims = h;
}

/* unmap_all gives the regions of `victims` back to the kernel; returns their bytes. Outside
 * the lock. */
static uint64_t unmap_all(hdr_t *victims) {
  uint64_t bytes = 0, n = 0;
  while (victims != NULL) {
    hdr_t *next = victims->next;
    bytes += victims->size;
    n++;
    UNPOISON(victims, victims->size);
    munmap(victims, victims->size);
    victims = next;
  }
  if (n > 0) {
    pthread_mutex_lock(&pool.mu);
    pool.unmapped += n;
    pthread_mutex_unlock(&pool.mu);
  }
  return bytes;
}

/* from_heap makes a malloc'd buffer of len bytes. */
static void *from_heap(size_t len) {
  if (len > SIZE_MAX - HDR) return NULL;
  hdr_t *h = malloc(HDR + (len > 0 ? len : 1));
  if (h == NULL) return NULL;
  h->magic = MAGIC_MEM;
  h->size = len;
  return (char *)h + HDR;
}

void *lt__bufpool_alloc(size_t len) {
  pthread_mutex_lock(&pool.mu);
  bool on = pool.max_bytes > 0;
  pthread_mutex_unlock(&pool.mu);
  size_t size = 0;
  int cls = on && len >= LT_BUFPOOL_MIN && len <= SIZE_MAX - HDR ? class_of(len + HDR, &size) : -1;
  if (cls < 0) return from_heap(len);
  pthread_mutex_lock(&pool.mu);
  /* Its own class, or one up to a power of two larger: sizes that halve and double (a divide
   * and its merges) find the buffers of their neighbours. */
  hdr_t *h = NULL;
  for (int c = cls; h == NULL && c <= cls + STEPS && c < NCLASS; c++)
    h = pool.idle[c];
  if (h != NULL) {
    idle_unlink(h);
    pool.reused++;
  }
  pthread_mutex_unlock(&pool.mu);
  if (h != NULL) {
    UNPOISON((char *)h + HDR, h->size - HDR);
    return (char *)h + HDR;
  }
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  h = p;
  h->magic = MAGIC_MAP;
  h->size = size;
  h->cls = (uint32_t)cls;
  pthread_mutex_lock(&pool.mu);
  pool.mapped++;
  pthread_mutex_unlock(&pool.mu);
  return (char *)h + HDR;
}

void lt__bufpool_free(void *p) {
  if (p == NULL) return;
  hdr_t *h = hdr_of(p);
  if (h->magic == MAGIC_MEM) {
    free(h);
    return;
  }
  assert(h->magic == MAGIC_MAP);
  /* Poisoned before it is linked: once linked, another thread may take it. */
  POISON(p, h->size - HDR);
  hdr_t *victims = NULL;
  pthread_mutex_lock(&pool.mu);
  if (h->size > pool.max_bytes) {
    h->next = NULL;
    victims = h;
  } else {
    while (pool.idle_bytes + h->size > pool.max_bytes)
      evict_oldest(&victims);
    h->prev = NULL;
    h->next = pool.idle[h->cls];
    if (h->next != NULL) h->next->prev = h;
    pool.idle[h->cls] = h;
    h->older = pool.newest;
    h->newer = NULL;
    if (h->older != NULL)
      h->older->newer = h;
    else
      pool.oldest = h;
    pool.newest = h;
    h->tick = pool.ticks;
    pool.idle_bytes += h->size;
    pool.nidle++;
  }
  pthread_mutex_unlock(&pool.mu);
  unmap_all(victims);
}

size_t lt__bufpool_capacity(const void *p) {
  const hdr_t *h = hdr_of(p);
  return h->magic == MAGIC_MEM ? h->size : h->size - HDR;
}

void lt__bufpool_configure(uint64_t max_bytes) {
  hdr_t *victims = NULL;
  pthread_mutex_lock(&pool.mu);
  pool.max_bytes = max_bytes;
  while (pool.oldest != NULL && pool.idle_bytes > max_bytes)
    evict_oldest(&victims);
  pthread_mutex_unlock(&pool.mu);
  unmap_all(victims);
}

uint64_t lt__bufpool_tick(void) {
  hdr_t *victims = NULL;
  pthread_mutex_lock(&pool.mu);
  pool.ticks++;
  while (pool.oldest != NULL && pool.oldest->tick + LT_BUFPOOL_IDLE_TICKS <= pool.ticks)
    evict_oldest(&victims);
  pthread_mutex_unlock(&pool.mu);
  return unmap_all(victims);
}

uint64_t lt__bufpool_trim(void) {
  hdr_t *victims = NULL;
  pthread_mutex_lock(&pool.mu);
  while (pool.oldest != NULL)
    evict_oldest(&victims);
  pthread_mutex_unlock(&pool.mu);
  return unmap_all(victims);
}

void lt__bufpool_stats(lt_bufpool_stats_t *st) {
  pthread_mutex_lock(&pool.mu);
  *st = (lt_bufpool_stats_t){pool.reused,     pool.mapped, pool.unmapped,
                             pool.idle_bytes, pool.nidle,  pool.max_bytes};
  pthread_mutex_unlock(&pool.mu);
}
