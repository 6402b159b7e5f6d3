/* lithium/kernel.h: what a kernel module sees. A kernel is a sequential C function
 * `int f(lt_call_t *)` defined with LT_KERNEL and named "module:function" by programs.
 *
 * The accessors are inline calls through a table the runtime provides, so a kernel module
 * links against nothing: the same .so loads into lithium-server and into a client process.
 * A kernel runs on one worker thread; it may call these functions only on its own call. */
#ifndef LITHIUM_KERNEL_H
#define LITHIUM_KERNEL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: lt_call_output_from_input (ops.output_from_input); a kernel built against this header
 * still runs on a runtime of ABI 1, where it falls back to a fresh output and a copy. */
#define LT_KERNEL_ABI        2
#define LT_KERNEL_ERRMSG_MAX 512

typedef struct lt_call lt_call_t;

/* The runtime's side of a call. Kernels never use it directly. */
typedef struct lt_call_ops {
  int abi;
  int (*ninputs)(const lt_call_t *c);
  const void *(*input)(const lt_call_t *c, int i, size_t *len);
  const void *(*param)(const lt_call_t *c, size_t *len);
  void *(*output)(lt_call_t *c, size_t len);
  int (*answer)(lt_call_t *c, int truth);
  int (*fail)(lt_call_t *c, const char *msg);
  void *(*output_from_input)(lt_call_t *c, int i, size_t len); /* abi >= 2 */
} lt_call_ops_t;

struct lt_call {
  const lt_call_ops_t *ops;
};

#define LT_KERNEL_EXPORT __attribute__((visibility("default")))

/* LT_KERNEL(name, call) { ... } defines the kernel "name" of this module; `call` names its
 * lt_call_t * parameter. The function returns 0 on success. */
#define LT_KERNEL(name, call)                                                                      \
  LT_KERNEL_EXPORT int lt_kernel_##name(lt_call_t *call);                                          \
  LT_KERNEL_EXPORT int lt_kernel_##name(lt_call_t *call)

/* LT_KERNEL_IN_PLACE(name, call) { ... } defines the kernel "name" as LT_KERNEL does, and
 * declares that it writes its output over an input (lt_call_output_from_input): a server may
 * then give it, when it is an input's last reader, that input's buffer as soon as it is
 * queued (the value leaves the store then). Only kernels declared so get their inputs' own
 * buffers; any other kernel's lt_call_output_from_input gets a fresh output holding a copy,
 * and the values it reads stay readable until it has run (a copy of a straggler elsewhere
 * may still fetch them). */
#define LT_KERNEL_IN_PLACE(name, call)                                                             \
  LT_KERNEL_EXPORT extern const int lt_in_place__##name;                                           \
  LT_KERNEL_EXPORT const int lt_in_place__##name = 1;                                              \
  LT_KERNEL(name, call)

/* lt_call_ninputs returns the number of input tokens. */
static inline int lt_call_ninputs(const lt_call_t *c) {
  return c->ops->ninputs(c);
}

/* lt_call_input returns input `i` (borrowed, valid until the kernel returns) and its size
 * in *len (len may be NULL); NULL with *len = 0 when `i` is out of range. */
static inline const void *lt_call_input(const lt_call_t *c, int i, size_t *len) {
  return c->ops->input(c, i, len);
}

/* lt_call_param returns the constant parameter given with lt_seq_with (borrowed). Without
 * one it returns a valid, non-NULL pointer to no bytes, with *len = 0. */
static inline const void *lt_call_param(const lt_call_t *c, size_t *len) {
  return c->ops->param(c, len);
}

/* lt_call_output allocates the next output of `len` bytes and returns it for the kernel to
 * fill; the runtime owns it. A stage makes one output; split/divide make k. `len` 0 makes an
 * empty output and returns a valid pointer not to be written. NULL when out of memory (the
 * kernel should then fail). */
static inline void *lt_call_output(lt_call_t *c, size_t len) {
  return c->ops->output(c, len);
}

/* lt_call_output_from_input makes the next output, of `len` bytes, holding input `i`'s bytes
 * (its first min(len, input size) bytes as they are now; the rest uninitialised), for a
 * kernel that transforms its input in place. When the call owns input i's buffer (the call
 * is the value's last reader, nobody else holds it, and it is a kernel's output with room
 * for len bytes), the output is that very buffer, without a copy: the pointer returned is
 * then lt_call_input(c, i), and writing the output changes what the input shows. Otherwise
 * the runtime makes a fresh output and copies the input into it. Either way the kernel may
 * write the output at once, element by element over what it reads. The runtime owns it, as
 * with lt_call_output. NULL when `i` is out of range or out of memory (the kernel should
 * then fail). */
static inline void *lt_call_output_from_input(lt_call_t *c, int i, size_t len) {
  if (c->ops->abi >= 2) return c->ops->output_from_input(c, i, len);
  /* A runtime older than this header: a fresh output and a copy. */
  size_t n = 0;
  const void *in = c->ops->input(c, i, &n);
  void *out = in != NULL ? c->ops->output(c, len) : NULL;
  if (out != NULL && n > 0) memcpy(out, in, n < len ? n : len);
  return out;
}

/* lt_call_answer records the truth value of a condition kernel; returns 0. */
static inline int lt_call_answer(lt_call_t *c, int truth) {
  return c->ops->answer(c, truth);
}

/* lt_call_fail records a printf-style error message and returns the non-zero value the
 * kernel should return: `return lt_call_fail(call, "bad size %zu", n);` */
__attribute__((format(printf, 2, 3))) static inline int lt_call_fail(lt_call_t *c, const char *fmt,
                                                                     ...) {
  char msg[LT_KERNEL_ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return c->ops->fail(c, msg);
}

#ifdef __cplusplus
}
#endif
#endif
