/* shipk.c: the kernel module of the module-shipping tests. It is built twice, into two
 * directories, with the same file name and the same DT_SONAME (libshipk.so) but different
 * code: shipk:tag adds SHIPK_ADD to its int64 input (little-endian), so a result tells which
 * copy ran. */
#include <stdint.h>
#include <string.h>
#include <lithium/kernel.h>

#ifndef SHIPK_ADD
#error "build with -DSHIPK_ADD=N"
#endif

/* A global of the module: two copies loaded at once each have their own. */
static int64_t shipk_add = SHIPK_ADD;

LT_KERNEL(tag, call) {
  size_t len;
  const unsigned char *in = lt_call_input(call, 0, &len);
  if (lt_call_ninputs(call) != 1 || len != 8)
    return lt_call_fail(call, "tag: expected one 8-byte input");
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = (v << 8) | in[i];
  v += (uint64_t)shipk_add;
  unsigned char *out = lt_call_output(call, 8);
  if (out == NULL) return lt_call_fail(call, "tag: out of memory");
  for (int i = 0; i < 8; i++, v >>= 8)
    out[i] = (unsigned char)(v & 0xff);
  return 0;
}
