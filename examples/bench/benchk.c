/* examples/bench/benchk.c: the `bench` kernel module, the kernels of the benchmark programs
 * (examples/bench/): `noop` (a 16-byte task, answered with nothing or 16 bytes), `sleep`
 * (waits the milliseconds given as its text parameter, then copies its input) and `touch`
 * (a new value of the size of its input: the input with its first byte changed). Kernels run
 * on a server worker thread (or the client's, in local mode) and touch nothing but their own
 * call. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lithium/kernel.h>

#define NOOP_SIZE    16
#define PARAM_MAX    32
#define SLEEP_MAX_MS 3600000L

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

/* parse_ms reads the sleep kernel's decimal parameter (not NUL-terminated) into *ms. */
static int parse_ms(const char *param, size_t plen, long *ms) {
  char text[PARAM_MAX];
  if (param == NULL || plen == 0 || plen >= sizeof text) return -1;
  memcpy(text, param, plen);
  text[plen] = '\0';
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < 0 || v > SLEEP_MAX_MS) return -1;
  *ms = v;
  return 0;
}

/* bench:sleep waits the number of milliseconds in its text parameter ("2"), as a task that
 * computes for that long would occupy its worker, and makes a copy of its input. */
LT_KERNEL(sleep, call) {
  size_t plen = 0;
  const char *param = lt_call_param(call, &plen);
  long ms = 0;
  if (parse_ms(param, plen, &ms) != 0)
    return lt_call_fail(call, "bench:sleep: the parameter must be milliseconds from 0 to %ld",
                        SLEEP_MAX_MS);
  size_t len = 0;
  int rc = 0;
  const unsigned char *in = one_input(call, "sleep", &len, &rc);
  if (rc != 0) return rc;
  struct timespec left = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
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
