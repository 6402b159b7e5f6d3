/* sha256.c: SHA-256 of a byte string or a file, with libsodium's crypto_hash_sha256 (a
 * well-kept implementation rather than one of our own), and its hex form. No state of our
 * own: any thread (sodium_init runs once, under pthread_once). */
#include "sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <unistd.h>

#include <lithium/error.h>

static pthread_once_t sodium_once = PTHREAD_ONCE_INIT;

/* init_sodium picks libsodium's implementations; libsodium asks for it before any other
 * call. Its failure (no entropy source for its random numbers) does not concern hashing. */
static void init_sodium(void) {
  if (sodium_init() < 0) return;
}

void lt__sha256(const void *data, size_t len, uint8_t out[32]) {
  pthread_once(&sodium_once, init_sodium);
  crypto_hash_sha256(out, data, len);
}

/* to_hex writes the 32-byte digest as 64 lowercase hex digits and a NUL. */
static void to_hex(const uint8_t d[32], char hex[LT_SHA256_HEX]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    hex[2 * i] = digits[d[i] >> 4];
    hex[2 * i + 1] = digits[d[i] & 15];
  }
  hex[64] = '\0';
}

void lt__sha256_hex(const void *data, size_t len, char hex[LT_SHA256_HEX]) {
  uint8_t d[32];
  lt__sha256(data, len, d);
  to_hex(d, hex);
}

int lt__sha256_file(const char *path, char hex[LT_SHA256_HEX]) {
  hex[0] = '\0';
  pthread_once(&sodium_once, init_sodium);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? LT_ENOENT : LT_EIO;
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  unsigned char buf[65536];
  int rc = LT_OK;
  for (;;) {
    ssize_t got = read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) rc = LT_EIO;
    if (got <= 0) break;
    crypto_hash_sha256_update(&st, buf, (unsigned long long)got);
  }
  close(fd);
  if (rc != LT_OK) return rc;
  uint8_t d[32];
  crypto_hash_sha256_final(&st, d);
  to_hex(d, hex);
  return LT_OK;
}
