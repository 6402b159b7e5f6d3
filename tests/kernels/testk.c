/* testk.c: the kernel module "testk" used by the tests of every module (mdf, server,
 * client, e2e). Kernels are deliberately strict: a wrong input count or size fails the call
 * with a message, so a runtime bug that mangles values shows up as an error. Integers are
 * int64 little-endian, 8 bytes. Kernels run on any worker thread and keep no state.
 *
 *   echo       1 input; output: a copy of it.
 *   inc        1 input, int64; output: input + 1. Otherwise fails with
 *              "inc: expected 8 bytes, got N" (or "inc: expected 1 input, got N").
 *   dbl        1 input, int64; output: input * 2 ("dbl: expected 8 bytes, got N").
 *   neg_fails  1 input, int64; fails with "negative input -5" when it is < 0, else copies it.
 *   fail       always fails with "fail: asked to fail".
 *   concat     any number of inputs; output: all of them, concatenated in order.
 *   param      any inputs (ignored); output: a copy of the parameter bytes.
 *   sleep      1 input; param: milliseconds as decimal text; sleeps, then copies the input.
 *   spin       1 input; param: iterations as decimal text; runs a CPU loop, copies the input.
 *   work       1 input; param: milliseconds as decimal text; uses a tenth of them as thread
 *              CPU time, sleeps the rest, copies the input (a task that shares its host).
 *   busy       1 int64 input: milliseconds (0..60000) of thread CPU time it spins, then
 *              returns the input (a task whose time follows its input).
 *   noop       any inputs (ignored); one empty output.
 *   upper      1 input; output: its ASCII uppercase.
 *   two        1 input; two outputs, each a copy of it (arity tests).
 *   none       any inputs (ignored); no output at all (arity tests).
 *   positive   condition kernel: 1 input, int64; answers input > 0, no output.
 *   crash_on   1 input, int64; param "V" or "V:abort" / "V:segv" / "V:fault" / "V:exit": an
 *              input equal to V crashes the server (SIGSEGV by default, or abort(), or a real
 *              fault through a null pointer that signal handlers see, or _exit(0)); else
 *              copies it.
 *   stall_on   1 input, int64; param "V:MS": the input V sleeps MS milliseconds; copies it.
 *   forever    any inputs; never returns (sleeps in a loop: holds its thread for good).
 *   hog_mem    any inputs; param: MiB as decimal text; one output of that many bytes.
 *   abort_if   1 input, int64; param: the name of an environment variable: a server started
 *              with it set aborts on every call (a flaky host); elsewhere input + 1.
 *   inplace    1 input, int64; its output from the input (lt_call_output_from_input):
 *              input + 1000000 when made in the input's own buffer, input + 1 when copied;
 *              declared to write in place (LT_KERNEL_IN_PLACE).
 *   rewrite    the same, not declared so: always input + 1 (a copy).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <lithium/kernel.h>

static int64_t get_i64(const unsigned char *p) {
  uint64_t x = 0;
  for (int i = 7; i >= 0; i--)
    x = (x << 8) | p[i];
  return (int64_t)x;
}

static void put_i64(unsigned char *p, int64_t v) {
  uint64_t x = (uint64_t)v;
  for (int i = 0; i < 8; i++, x >>= 8)
    p[i] = (unsigned char)(x & 0xff);
}

/* one_input returns the only input (and its size), or NULL after failing the call. */
static const void *one_input(lt_call_t *call, const char *kernel, size_t *len) {
  int n = lt_call_ninputs(call);
  if (n != 1) {
    lt_call_fail(call, "%s: expected 1 input, got %d", kernel, n);
    return NULL;
  }
  return lt_call_input(call, 0, len);
}

/* int_input reads the only input as an int64; 0 on success, else the call has failed. */
static int int_input(lt_call_t *call, const char *kernel, int64_t *v) {
  size_t len;
  const void *p = one_input(call, kernel, &len);
  if (p == NULL) return 1;
  if (len != 8) return lt_call_fail(call, "%s: expected 8 bytes, got %zu", kernel, len);
  *v = get_i64(p);
  return 0;
}

static int int_output(lt_call_t *call, int64_t v) {
  unsigned char *out = lt_call_output(call, 8);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  put_i64(out, v);
  return 0;
}

static int copy_output(lt_call_t *call, const void *data, size_t len) {
  void *out = lt_call_output(call, len);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  if (len > 0) memcpy(out, data, len);
  return 0;
}

/* param_text copies the parameter into buf (len bytes) as a string; it fails the call with
 * "KERNEL: parameter must be WHAT" when the parameter is empty or does not fit. */
static int param_text(lt_call_t *call, const char *kernel, const char *what, char *buf,
                      size_t len) {
  size_t plen;
  const char *p = lt_call_param(call, &plen);
  if (plen == 0 || plen >= len) return lt_call_fail(call, "%s: parameter must be %s", kernel, what);
  memcpy(buf, p, plen);
  buf[plen] = '\0';
  return 0;
}

/* param_number parses the parameter as a non-negative decimal number. */
static int param_number(lt_call_t *call, const char *kernel, unsigned long long *out) {
  char buf[32];
  if (param_text(call, kernel, "a decimal number", buf, sizeof buf) != 0) return 1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(buf, &end, 10);
  if (errno != 0 || *end != '\0' || buf[0] < '0' || buf[0] > '9')
    return lt_call_fail(call, "%s: parameter '%s' is not a decimal number", kernel, buf);
  *out = v;
  return 0;
}

LT_KERNEL(echo, call) {
  size_t len;
  const void *in = one_input(call, "echo", &len);
  if (in == NULL) return 1;
  return copy_output(call, in, len);
}

LT_KERNEL(inc, call) {
  int64_t v = 0;
  if (int_input(call, "inc", &v) != 0) return 1;
  return int_output(call, (int64_t)((uint64_t)v + 1));
}

LT_KERNEL(dbl, call) {
  int64_t v = 0;
  if (int_input(call, "dbl", &v) != 0) return 1;
  return int_output(call, (int64_t)((uint64_t)v * 2));
}

LT_KERNEL(neg_fails, call) {
  int64_t v = 0;
  if (int_input(call, "neg_fails", &v) != 0) return 1;
  if (v < 0) return lt_call_fail(call, "negative input %lld", (long long)v);
  return int_output(call, v);
}

LT_KERNEL(fail, call) {
  return lt_call_fail(call, "fail: asked to fail");
}

LT_KERNEL(concat, call) {
  int n = lt_call_ninputs(call);
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    size_t len;
    lt_call_input(call, i, &len);
    total += len;
  }
  unsigned char *out = lt_call_output(call, total);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  for (int i = 0; i < n; i++) {
    size_t len;
    const void *in = lt_call_input(call, i, &len);
    if (len > 0) memcpy(out, in, len);
    out += len;
  }
  return 0;
}

LT_KERNEL(param, call) {
  size_t len;
  const void *p = lt_call_param(call, &len);
  return copy_output(call, p, len);
}

LT_KERNEL(sleep, call) {
  unsigned long long ms;
  size_t len;
  if (param_number(call, "sleep", &ms) != 0) return 1;
  const void *in = one_input(call, "sleep", &len);
  if (in == NULL) return 1;
  struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  return copy_output(call, in, len);
}

LT_KERNEL(spin, call) {
  unsigned long long iters;
  size_t len;
  if (param_number(call, "spin", &iters) != 0) return 1;
  const void *in = one_input(call, "spin", &len);
  if (in == NULL) return 1;
  volatile uint64_t acc = 0;
  for (unsigned long long i = 0; i < iters; i++)
    acc = acc * 6364136223846793005ULL + i;
  return copy_output(call, in, len);
}

static uint64_t thread_cpu_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

LT_KERNEL(work, call) {
  unsigned long long ms;
  size_t len;
  if (param_number(call, "work", &ms) != 0) return 1;
  const void *in = one_input(call, "work", &len);
  if (in == NULL) return 1;
  /* CPU time, not wall time: a thread that gets less of the CPU takes longer. */
  uint64_t until = thread_cpu_us() + ms * 100u;
  volatile uint64_t acc = 0;
  while (thread_cpu_us() < until)
    for (int i = 0; i < 1000; i++)
      acc = acc * 6364136223846793005ULL + (uint64_t)i;
  uint64_t rest_us = ms * 900u;
  struct timespec ts = {.tv_sec = (time_t)(rest_us / 1000000u),
                        .tv_nsec = (long)(rest_us % 1000000u) * 1000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  return copy_output(call, in, len);
}

/* busy: spins for as many milliseconds of CPU time as its int64 input says (capped at 60 s),
 * then returns the input: a kernel whose time follows its input. */
LT_KERNEL(busy, call) {
  int64_t ms = 0;
  if (int_input(call, "busy", &ms) != 0) return 1;
  if (ms < 0 || ms > 60000)
    return lt_call_fail(call, "busy: %lld ms is not in 0..60000", (long long)ms);
  uint64_t until = thread_cpu_us() + (uint64_t)ms * 1000u;
  volatile uint64_t acc = 0;
  while (thread_cpu_us() < until)
    for (int i = 0; i < 1000; i++)
      acc = acc * 6364136223846793005ULL + (uint64_t)i;
  return int_output(call, ms);
}

LT_KERNEL(noop, call) {
  return lt_call_output(call, 0) != NULL ? 0 : lt_call_fail(call, "out of memory");
}

LT_KERNEL(upper, call) {
  size_t len;
  const unsigned char *in = one_input(call, "upper", &len);
  if (in == NULL) return 1;
  unsigned char *out = lt_call_output(call, len);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  for (size_t i = 0; i < len; i++)
    out[i] = (in[i] >= 'a' && in[i] <= 'z') ? (unsigned char)(in[i] - 'a' + 'A') : in[i];
  return 0;
}

LT_KERNEL(two, call) {
  size_t len;
  const void *in = one_input(call, "two", &len);
  if (in == NULL) return 1;
  if (copy_output(call, in, len) != 0) return 1;
  return copy_output(call, in, len);
}

LT_KERNEL(none, call) {
  (void)call;
  return 0;
}

LT_KERNEL(positive, call) {
  int64_t v = 0;
  if (int_input(call, "positive", &v) != 0) return 1;
  return lt_call_answer(call, v > 0);
}

/* die_of_segv kills the process with SIGSEGV, as a stray pointer would, without undefined
 * behaviour in the test and without a sanitizer's SIGSEGV handler turning the death into a
 * report and an exit: the default action is restored by the raw system call, which
 * sanitizers do not intercept. */
static void die_of_segv(void) {
  struct kernel_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    uint64_t mask;
  } dfl = {SIG_DFL, 0, NULL, 0};
  syscall(SYS_rt_sigaction, SIGSEGV, &dfl, NULL, sizeof dfl.mask);
  raise(SIGSEGV);
  _exit(139); /* not reached */
}

/* fault stores through a pointer into the unmapped first page that the compiler cannot see
 * through (not null: UBSan would report that first): a real SIGSEGV on this thread,
 * delivered to whatever handler the server installed. */
static volatile uintptr_t nowhere = 64;

static void fault(void) {
  *(volatile int *)nowhere = 1;
  _exit(139); /* not reached */
}

LT_KERNEL(crash_on, call) {
  char buf[64];
  if (param_text(call, "crash_on", "V, V:abort, V:segv, V:fault or V:exit", buf, sizeof buf) != 0)
    return 1;
  char *end;
  long long at = strtoll(buf, &end, 10);
  int how_abort = strcmp(end, ":abort") == 0, how_fault = strcmp(end, ":fault") == 0;
  int how_exit = strcmp(end, ":exit") == 0;
  if (end == buf ||
      (*end != '\0' && !how_abort && !how_fault && !how_exit && strcmp(end, ":segv") != 0))
    return lt_call_fail(
        call, "crash_on: parameter '%s' is not V, V:abort, V:segv, V:fault or V:exit", buf);
  int64_t v = 0;
  if (int_input(call, "crash_on", &v) != 0) return 1;
  if (v == at) {
    if (how_exit) _exit(0);
    if (how_abort) abort();
    if (how_fault) fault();
    die_of_segv();
  }
  return int_output(call, v);
}

/* stall_on: parameter "V:MS": the input V sleeps MS milliseconds, every input is echoed. */
LT_KERNEL(stall_on, call) {
  char buf[64];
  if (param_text(call, "stall_on", "V:MS", buf, sizeof buf) != 0) return 1;
  char *end, *rest = buf;
  long long at = strtoll(buf, &end, 10);
  unsigned long long ms = *end == ':' ? strtoull(end + 1, &rest, 10) : 0;
  if (end == buf || *end != ':' || *rest != '\0')
    return lt_call_fail(call, "stall_on: parameter '%s' is not V:MS", buf);
  int64_t v = 0;
  if (int_input(call, "stall_on", &v) != 0) return 1;
  struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (v == at && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  return int_output(call, v);
}

LT_KERNEL(forever, call) {
  (void)call;
  for (;;) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 10000000L};
    nanosleep(&ts, NULL);
  }
  return 0;
}

LT_KERNEL(hog_mem, call) {
  unsigned long long mib;
  if (param_number(call, "hog_mem", &mib) != 0) return 1;
  size_t len = (size_t)mib << 20;
  unsigned char *out = lt_call_output(call, len);
  if (out == NULL) return lt_call_fail(call, "hog_mem: out of memory for %llu MiB", mib);
  memset(out, 0xa5, len);
  return 0;
}

LT_KERNEL(abort_if, call) {
  char name[64];
  if (param_text(call, "abort_if", "the name of an environment variable", name, sizeof name) != 0)
    return 1;
  if (getenv(name) != NULL) abort();
  int64_t v = 0;
  if (int_input(call, "abort_if", &v) != 0) return 1;
  return int_output(call, (int64_t)((uint64_t)v + 1));
}

/* The mark testk:inplace adds when its output is its input's own buffer. */
#define INPLACE_MARK 1000000

LT_KERNEL_IN_PLACE(inplace, call) {
  int64_t v = 0;
  if (int_input(call, "inplace", &v) != 0) return 1;
  const void *in = lt_call_input(call, 0, NULL);
  unsigned char *out = lt_call_output_from_input(call, 0, 8);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  if (get_i64(out) != v) return lt_call_fail(call, "inplace: the output does not hold the input");
  put_i64(out, (int64_t)((uint64_t)v + ((const void *)out == in ? INPLACE_MARK : 1)));
  return 0;
}

/* testk:rewrite is testk:inplace not declared to write in place: its output is a copy. */
LT_KERNEL(rewrite, call) {
  int64_t v = 0;
  if (int_input(call, "rewrite", &v) != 0) return 1;
  const void *in = lt_call_input(call, 0, NULL);
  unsigned char *out = lt_call_output_from_input(call, 0, 8);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  if (get_i64(out) != v) return lt_call_fail(call, "rewrite: the output does not hold the input");
  put_i64(out, (int64_t)((uint64_t)v + ((const void *)out == in ? INPLACE_MARK : 1)));
  return 0;
}
