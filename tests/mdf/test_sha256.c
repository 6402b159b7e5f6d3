/* test_sha256.c: SHA-256 against the FIPS 180-4 examples (one block, two blocks, a million
 * 'a's across many updates via a file), and the hex digest of a file. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <lithium/error.h>
#include "sha256.h"

static void hex_of(const void *data, size_t len, char hex[LT_SHA256_HEX]) {
  uint8_t d[32];
  lt__sha256(data, len, d);
  for (int i = 0; i < 32; i++)
    snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

Test(sha256, fips_examples) {
  char hex[LT_SHA256_HEX];
  hex_of("", 0, hex);
  cr_expect_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  hex_of("abc", 3, hex);
  cr_expect_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 448 bits */
  hex_of(two, strlen(two), hex);
  cr_expect_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  /* lt__sha256_hex gives the same digits. */
  lt__sha256_hex("abc", 3, hex);
  cr_expect_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

Test(sha256, file_of_a_million_a) {
  char path[] = "/tmp/lt-sha256-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  char *a = malloc(1000000);
  memset(a, 'a', 1000000);
  cr_assert_eq(write(fd, a, 1000000), 1000000);
  close(fd);
  free(a);
  char hex[LT_SHA256_HEX];
  cr_assert_eq(lt__sha256_file(path, hex), LT_OK);
  cr_expect_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  unlink(path);
  cr_expect_eq(lt__sha256_file(path, hex), LT_ENOENT);
  cr_expect_str_eq(hex, "");
}
