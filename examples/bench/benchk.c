/* examples/bench/benchk.c: the `bench` kernel module, the kernels of the benchmark programs
 * (examples/bench/): `noop` (a 16-byte task, answered with nothing or 16 bytes), `sleep`
 * (waits the milliseconds given as its text parameter, then copies its input) and `touch`
 * (a new value of the size of its input: the input with its first byte changed), `spin` (a
 * CPU-bound busy loop of a given number of iterations, for the heterogeneity benchmarks),
 * `busy` (a spin of a given number of microseconds of the thread's CPU time, for METG), and
 * `fill`, `sum` and `add` (large values made from nothing, each read down to 8 bytes,
 * and the counts added: the memory benchmark's peer fetch).
 * Kernels run on a server worker thread (or the client's, in local mode) and touch nothing
 * but their own call. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lithium/kernel.h>

#include "busy.h"

#define NOOP_SIZE    16
#define PARAM_MAX    32
#define SLEEP_MAX_MS 3600000L
#define SPIN_SEED    8
#define SPIN_MAX     1000000000000ULL
#define BUSY_MAX_US  60000000ULL
#define FILL_MAX     (16ULL << 30)
#define FILL_PARTS   64

/* one_input returns the single input of kernel `name` and its size, or NULL after failing
 * the call (*rc holds the value to return). */
static const unsigned char *one_input(lt_call_t *call, const char *name, size_t *len, int *rc) {
  int n = lt_call_ninputs(call);
  if (n != 1) {
    *rc = lt_call_fail(call, "bench:%s expects 1 input, got %d", name, n);
    return NULL;
  }
  const unsigned char *p = lt_call_input(call, 0, len);
  if (p == NULL && *len != 0) {
    *rc = lt_call_fail(call, "bench:%s: missing input", name);
    return NULL;
  }
  return p;
}

/* copy_out makes one output of `len` bytes holding `src` (NULL when len is 0). */
static unsigned char *copy_out(lt_call_t *call, const unsigned char *src, size_t len) {
  unsigned char *out = lt_call_output(call, len);
  if (out != NULL && len > 0) memcpy(out, src, len);
  return out;
}

/* bench:noop takes a 16-byte task. Parameter "echo" makes it answer with those 16 bytes;
 * without a parameter its output is empty. */
LT_KERNEL(noop, call) {
  size_t len = 0;
  int rc = 0;
  const unsigned char *in = one_input(call, "noop", &len, &rc);
  if (rc != 0) return rc;
  if (len != NOOP_SIZE)
    return lt_call_fail(call, "bench:noop: input must be %d bytes, got %zu", NOOP_SIZE, len);
  size_t plen = 0;
  const char *param = lt_call_param(call, &plen);
  int echo = param != NULL && plen == 4 && memcmp(param, "echo", 4) == 0;
  if (param != NULL && plen > 0 && !echo)
    return lt_call_fail(call, "bench:noop: the parameter must be \"echo\" or absent");
  if (copy_out(call, in, echo ? len : 0) == NULL)
    return lt_call_fail(call, "bench:noop: out of memory");
  return 0;
}

/* parse_count reads a kernel's decimal parameter (not NUL-terminated) from 0 to max into
 * *out: the milliseconds of sleep, the iterations of spin, the microseconds of busy. */
static int parse_count(const char *param, size_t plen, unsigned long long max,
                       unsigned long long *out) {
  char text[PARAM_MAX];
  if (param == NULL || plen == 0 || plen >= sizeof text || param[0] == '-') return -1;
  memcpy(text, param, plen);
  text[plen] = '\0';
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v > max) return -1;
  *out = v;
  return 0;
}

/* seeded_len is seeded taking an input of 8 bytes or, with `chained`, also of 16 (the output
 * of a bench:spin before it in a pipeline); *len gets its size. */
static const unsigned char *seeded_len(lt_call_t *call, const char *name, const char *what,
                                       unsigned long long max, unsigned long long *count,
                                       int chained, size_t *len, int *rc) {
  size_t plen = 0;
  const char *param = lt_call_param(call, &plen);
  if (parse_count(param, plen, max, count) != 0) {
    *rc = lt_call_fail(call, "bench:%s: the parameter must be %s from 0 to %llu", name, what, max);
    return NULL;
  }
  const unsigned char *in = one_input(call, name, len, rc);
  if (in == NULL && *rc != 0) return NULL;
  if (*len != SPIN_SEED && !(chained && *len == 2 * SPIN_SEED)) {
    *rc = lt_call_fail(call, "bench:%s: input must be %d bytes%s, got %zu", name, SPIN_SEED,
                       chained ? " (or 16: a bench:spin output)" : "", *len);
    return NULL;
  }
  return in;
}

/* seeded reads the count of kernel `name` (`what`, from 0 to max) from its text parameter into
 * *count and returns its single 8-byte input, the seed of bench:busy, or NULL after failing
 * the call (*rc holds the value to return). */
static const unsigned char *seeded(lt_call_t *call, const char *name, const char *what,
                                   unsigned long long max, unsigned long long *count, int *rc) {
  size_t len = 0;
  return seeded_len(call, name, what, max, count, 0, &len, rc);
}

/* bench:sleep waits the number of milliseconds in its text parameter ("2"), as a task that
 * computes for that long would occupy its worker, and makes a copy of its input. */
LT_KERNEL(sleep, call) {
  size_t plen = 0;
  const char *param = lt_call_param(call, &plen);
  unsigned long long ms = 0;
  if (parse_count(param, plen, SLEEP_MAX_MS, &ms) != 0)
    return lt_call_fail(call, "bench:sleep: the parameter must be milliseconds from 0 to %ld",
                        SLEEP_MAX_MS);
  size_t len = 0;
  int rc = 0;
  const unsigned char *in = one_input(call, "sleep", &len, &rc);
  if (rc != 0) return rc;
  struct timespec left = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&left, &left) != 0) {
    if (errno != EINTR) return lt_call_fail(call, "bench:sleep: nanosleep: %s", strerror(errno));
  }
  if (copy_out(call, in, len) == NULL && len > 0)
    return lt_call_fail(call, "bench:sleep: out of memory");
  return 0;
}

/* bench:touch makes a new value of the size of its input: the input with its first byte
 * incremented (an empty input gives an empty output). The whole input is copied, so the
 * result really is a new value of that size. */
LT_KERNEL(touch, call) {
  size_t len = 0;
  int rc = 0;
  const unsigned char *in = one_input(call, "touch", &len, &rc);
  if (rc != 0) return rc;
  unsigned char *out = copy_out(call, in, len);
  if (out == NULL && len > 0) return lt_call_fail(call, "bench:touch: out of memory");
  if (len > 0) out[0] = (unsigned char)(in[0] + 1);
  return 0;
}

/* bench:spin is a CPU-bound task: a xorshift generator seeded by its 8-byte input runs for the
 * number of iterations in its text parameter ("20000000"), and the output is the input
 * followed by the 8-byte sum of the generated numbers. It also takes the 16-byte output of a
 * spin before it (a pipeline of spins): the seed goes on, the sum before mixed into the start. The
 * sum depends on every step, so the loop cannot be optimised away, and equal inputs give equal
 * outputs on every host. */
LT_KERNEL(spin, call) {
  unsigned long long n = 0;
  int rc = 0;
  size_t len = 0;
  const unsigned char *in = seeded_len(call, "spin", "iterations", SPIN_MAX, &n, 1, &len, &rc);
  if (in == NULL) return rc;
  uint64_t x, sum = 0, before = 0;
  memcpy(&x, in, sizeof x);
  if (len == 2 * SPIN_SEED) memcpy(&before, in + SPIN_SEED, sizeof before);
  x ^= 0x9e3779b97f4a7c15u ^ before; /* xorshift must not start at 0 */
  if (x == 0) x = 1;
  for (unsigned long long i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    sum += x;
  }
  unsigned char *out = lt_call_output(call, 2 * SPIN_SEED);
  if (out == NULL) return lt_call_fail(call, "bench:spin: out of memory");
  memcpy(out, in, SPIN_SEED);
  memcpy(out + SPIN_SEED, &sum, sizeof sum);
  return 0;
}

/* bench:busy uses the microseconds of CPU time in its text parameter ("100") on its thread
 * (busy.h: measured by CLOCK_THREAD_CPUTIME_ID, not a calibrated loop count), seeded by its
 * 8-byte input, and answers with that input unchanged: the task of Task Bench's METG. */
LT_KERNEL(busy, call) {
  unsigned long long us = 0;
  int rc = 0;
  const unsigned char *in = seeded(call, "busy", "microseconds", BUSY_MAX_US, &us, &rc);
  if (in == NULL) return rc;
  uint64_t seed;
  memcpy(&seed, in, sizeof seed);
  volatile uint64_t sum = bench_busy_spin((double)us, seed);
  (void)sum;
  if (copy_out(call, in, SPIN_SEED) == NULL) return lt_call_fail(call, "bench:busy: out of memory");
  return 0;
}

/* bench:fill makes PARTS values (1 to 64) of BYTES bytes each, every byte 0x5a, from the
 * text "BYTES,PARTS" ("1000000000,2"; ",PARTS" may be left out: one value) of its parameter
 * or, without one, of its input (a map's split takes no parameter). As the split of a map it
 * makes large parts that only its server holds. */
LT_KERNEL(fill, call) {
  size_t plen = 0;
  const char *param = lt_call_param(call, &plen);
  if (param == NULL || plen == 0) param = (const char *)lt_call_input(call, 0, &plen);
  const char *comma = param != NULL ? memchr(param, ',', plen) : NULL;
  size_t blen = comma != NULL ? (size_t)(comma - param) : plen;
  unsigned long long n = 0, parts = 1;
  if (parse_count(param, blen, FILL_MAX, &n) != 0 ||
      (comma != NULL &&
       (parse_count(comma + 1, plen - blen - 1, FILL_PARTS, &parts) != 0 || parts == 0)))
    return lt_call_fail(call,
                        "bench:fill: the parameter must be BYTES (0 to %llu) or BYTES,PARTS "
                        "(1 to %d)",
                        FILL_MAX, FILL_PARTS);
  for (unsigned long long k = 0; k < parts; k++) {
    unsigned char *out = lt_call_output(call, (size_t)n);
    if (out == NULL && n > 0) return lt_call_fail(call, "bench:fill: out of memory");
    if (n > 0) memset(out, 0x5a, (size_t)n);
  }
  return 0;
}

/* bench:sum reads its whole input and answers with 8 bytes: the sum of its bytes. A value
 * read this way must really be where the kernel runs, and the output adds nothing. */
LT_KERNEL(sum, call) {
  size_t len = 0;
  int rc = 0;
  const unsigned char *in = one_input(call, "sum", &len, &rc);
  if (rc != 0) return rc;
  uint64_t sum = 0;
  for (size_t i = 0; i < len; i++)
    sum += in[i];
  unsigned char *out = lt_call_output(call, sizeof sum);
  if (out == NULL) return lt_call_fail(call, "bench:sum: out of memory");
  memcpy(out, &sum, sizeof sum);
  return 0;
}

/* bench:add answers with the 8-byte sum of its inputs, each 8 bytes (the merge of the sums
 * bench:sum makes). */
LT_KERNEL(add, call) {
  uint64_t total = 0;
  for (int i = 0; i < lt_call_ninputs(call); i++) {
    size_t len = 0;
    const unsigned char *in = lt_call_input(call, i, &len);
    uint64_t v;
    if (in == NULL || len != sizeof v)
      return lt_call_fail(call, "bench:add: input %d must be 8 bytes, got %zu", i, len);
    memcpy(&v, in, sizeof v);
    total += v;
  }
  unsigned char *out = lt_call_output(call, sizeof total);
  if (out == NULL) return lt_call_fail(call, "bench:add: out of memory");
  memcpy(out, &total, sizeof total);
  return 0;
}
