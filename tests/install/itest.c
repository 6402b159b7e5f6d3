/* tests/install/itest.c: the `itest` kernel module, built out of tree against an installed
 * Lithium-C with nothing but `pkg-config --cflags lithium`. Kernels run on a server worker
 * thread and touch nothing but their own call. */
#include <stddef.h>
#include <string.h>

#include <lithium/kernel.h>

/* rev: text -> the same bytes reversed. */
LT_KERNEL(rev, call) {
  if (lt_call_ninputs(call) != 1)
    return lt_call_fail(call, "expects 1 input, got %d", lt_call_ninputs(call));
  size_t len = 0;
  const unsigned char *in = lt_call_input(call, 0, &len);
  unsigned char *out = lt_call_output(call, len);
  if (len > 0 && (in == NULL || out == NULL))
    return lt_call_fail(call, "no memory for %zu bytes", len);
  for (size_t i = 0; i < len; i++)
    out[i] = in[len - 1 - i];
  return 0;
}

/* tag: text -> the text followed by the parameter bytes. */
LT_KERNEL(tag, call) {
  if (lt_call_ninputs(call) != 1)
    return lt_call_fail(call, "expects 1 input, got %d", lt_call_ninputs(call));
  size_t len = 0, plen = 0;
  const void *in = lt_call_input(call, 0, &len);
  const void *param = lt_call_param(call, &plen);
  unsigned char *out = lt_call_output(call, len + plen);
  if (len + plen > 0 && out == NULL)
    return lt_call_fail(call, "no memory for %zu bytes", len + plen);
  if (len > 0) memcpy(out, in, len);
  if (plen > 0) memcpy(out + len, param, plen);
  return 0;
}

/* fail: always fails, with a message the client checks (the runtime prefixes the kernel's
 * name). */
LT_KERNEL(fail, call) {
  return lt_call_fail(call, "called on %d input(s)", lt_call_ninputs(call));
}
