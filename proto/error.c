/* proto/error.c: lt_strerror, the text of every lt_err code, generated from LT_ERRNO_MAP so
 * the enum and its messages cannot drift apart. Static strings only: any thread. */
#include <lithium/error.h>

#include <stddef.h>

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
