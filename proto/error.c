/* proto/error.c: lt_strerror, the text of every lt_err code, generated from LT_ERRNO_MAP so
 * the enum and its messages cannot drift apart (static strings), and the thread's last
 * failure text behind lt_last_error (lasterr.h, thread-local). Any thread. */
#include <lithium/error.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "lasterr.h"

/* The thread's last failure (lt_last_error), how many failures it has seen and which of
 * them was the last builder's. */
static _Thread_local char last[LT_LASTERR_MAX];
static _Thread_local unsigned long fails, skel_fail;

static int vfail(int err, int skel, const char *fmt, va_list ap) {
  char text[LT_LASTERR_MAX];
  vsnprintf(text, sizeof text, fmt, ap);
  memcpy(last, text, sizeof last);
  fails++;
  if (skel) skel_fail = fails;
  return err;
}

int lt__fail(int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(err, 0, fmt, ap);
  va_end(ap);
  return err;
}

int lt__fail_skel(int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(err, 1, fmt, ap);
  va_end(ap);
  return err;
}

int lt__fail_null(const char *fn, const char *arg, int skel) {
  if (fails > 0 && skel_fail == fails)
    return skel ? lt__fail_skel(LT_EINVAL, "%s: %s is NULL: %s", fn, arg, last)
                : lt__fail(LT_EINVAL, "%s: %s is NULL: %s", fn, arg, last);
  return skel ? lt__fail_skel(LT_EINVAL, "%s: %s is NULL", fn, arg)
              : lt__fail(LT_EINVAL, "%s: %s is NULL", fn, arg);
}

LT_API const char *lt_last_error(void) {
  return last;
}

LT_API const char *lt_strerror(int err) {
  switch (err) {
  case LT_OK:
    return "success";
#define LT_ERR_CASE_(name, val, msg)                                                               \
  case LT_##name:                                                                                  \
    return msg;
    LT_ERRNO_MAP(LT_ERR_CASE_)
#undef LT_ERR_CASE_
  default:
    return "unknown error";
  }
}
