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

#ifdef __cplusplus
extern "C" {
#endif

#define LT_KERNEL_ABI        1
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
