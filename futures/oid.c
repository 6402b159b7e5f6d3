/* oid.c: object ids: the random client id that makes ids unique across evaluations, and
 * their printable form for logs and error messages. Pure functions of their arguments
 * (plus the kernel's random source): any thread. */
#include <inttypes.h>
#include <stdio.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "oid.h"
#include "clock.h"

/* mix64 is the splitmix64 finaliser: spreads the bits of a weak seed over the whole word. */
static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/* fallback_seed mixes the clock, the pid and a per-process counter, for systems where
 * getrandom() fails (very old kernels, seccomp filters). */
static uint64_t fallback_seed(void) {
  static _Atomic uint64_t counter;
  struct timespec ts = lt__clock_wall();
  uint64_t x = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
  x ^= (uint64_t)getpid() << 32;
  x ^= counter++ * 0x2545f4914f6cdd1dULL;
  return mix64(x);
}

uint64_t lt__oid_client_random(void) {
  uint64_t id = 0;
  while (id == 0) {
    ssize_t n = getrandom(&id, sizeof id, GRND_NONBLOCK);
    if (n != (ssize_t)sizeof id) id = fallback_seed();
  }
  return id;
}

char *lt__oid_format(lt_oid_t id, char *buf, size_t len) {
  if (buf == NULL || len == 0) return buf;
  /* The client id is not written in full: logs and error texts must not hand it out. */
  snprintf(buf, len, "%04x...:%016" PRIx64, (unsigned)(id.client >> 48), id.seq);
  return buf;
}
