/* sha256.h: SHA-256 (FIPS 180-4, libsodium's) of a byte string or a file, for naming kernel
 * modules by their content (`lithium status` and welcomes show each module's hash; shipped
 * modules are stored and verified by it). No state: any thread. */
#ifndef LT_SHA256_H
#define LT_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define LT_SHA256_HEX (64 + 1) /* hex digest and its NUL */

/* lt__sha256 writes the 32-byte digest of data[0..len) into out. */
void lt__sha256(const void *data, size_t len, uint8_t out[32]);

/* lt__sha256_hex writes the hex digest (64 lowercase digits) of data[0..len) into hex. */
void lt__sha256_hex(const void *data, size_t len, char hex[LT_SHA256_HEX]);

/* lt__sha256_file writes the hex digest of the file at `path` into hex; LT_ENOENT or LT_EIO
 * (hex is then ""). */
int lt__sha256_file(const char *path, char hex[LT_SHA256_HEX]);

#endif
