/* examples/arith/words.c: the `words` kernel module, kernels on text tokens (bytes, not
 * NUL-terminated). Kernels run on a server worker thread (or the client's, in local mode) and
 * touch nothing but their own call. */
#include <stddef.h>

#include <lithium/kernel.h>

/* upper: text -> the same text with ASCII letters in upper case; other bytes (UTF-8
 * included) pass unchanged. */
LT_KERNEL(upper, call) {
  int n = lt_call_ninputs(call);
  if (n != 1) return lt_call_fail(call, "expects 1 input, got %d", n);
  size_t len = 0;
  const unsigned char *in = lt_call_input(call, 0, &len);
  if (in == NULL && len != 0) return lt_call_fail(call, "missing input");
  /* An empty token still gets its (empty) output; NULL is an error only for len > 0. */
  unsigned char *out = lt_call_output(call, len);
  if (out == NULL && len != 0) return lt_call_fail(call, "out of memory for %zu bytes", len);
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = in[i];
    out[i] = (ch >= 'a' && ch <= 'z') ? (unsigned char)(ch - 'a' + 'A') : ch;
  }
  return 0;
}
