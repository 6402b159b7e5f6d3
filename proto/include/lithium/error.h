/* lithium/error.h: the one error enum of Lithium-C, generated from LT_ERRNO_MAP.
 * LT_OK is 0; every error is negative. Codes travel on the wire, so values never change.
 * Any thread. */
#ifndef LITHIUM_ERROR_H
#define LITHIUM_ERROR_H

#include <lithium/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* XX(name, value, message) */
#define LT_ERRNO_MAP(XX)                                                                           \
  XX(EINVAL, -1, "invalid argument")                                                               \
  XX(ENOMEM, -2, "out of memory")                                                                  \
  XX(ECLOSED, -3, "stream closed")                                                                 \
  XX(EAGAIN, -4, "resource temporarily unavailable")                                               \
  XX(ETIMEDOUT, -5, "timed out")                                                                   \
  XX(EPROTO, -6, "protocol error")                                                                 \
  XX(ETOOBIG, -7, "message too large")                                                             \
  XX(ENOKERNEL, -8, "unknown kernel")                                                              \
  XX(ENOMODULE, -9, "unknown module")                                                              \
  XX(EKERNEL, -10, "kernel failed")                                                                \
  XX(ELOST, -11, "lost: server failed")                                                            \
  XX(ENOSERVER, -12, "no server available")                                                        \
  XX(ESTATE, -13, "operation not valid in this state")                                             \
  XX(EIO, -14, "input/output error")                                                               \
  XX(ENOENT, -15, "not found")                                                                     \
  XX(EVERSION, -16, "protocol version mismatch")                                                   \
  XX(ESHUTDOWN, -17, "server shutting down")                                                       \
  XX(ESPAWN, -18, "cannot start server")                                                           \
  XX(ECANCELED, -19, "canceled")                                                                   \
  XX(EEXIST, -20, "already exists")                                                                \
  XX(EAUTH, -21, "authentication failed")                                                          \
  XX(ECRASH, -22, "a kernel crashed its server")                                                   \
  XX(EQUOTA, -23, "over a quota of the server")

typedef enum lt_err {
  LT_OK = 0,
#define LT_ERR_ENUM_(name, val, msg) LT_##name = (val),
  LT_ERRNO_MAP(LT_ERR_ENUM_)
#undef LT_ERR_ENUM_
} lt_err;

/* lt_strerror returns a static description of `err` (an lt_err value); never NULL. */
LT_API const char *lt_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif
