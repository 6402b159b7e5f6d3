/* test_elfhdr.c: the ELF header check of kernel modules: a module for another machine or
 * another class, a file that is not ELF, one that is not a shared object. */
#include <criterion/criterion.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lithium/error.h>
#include "elfhdr.h"

#define SHIP_A LT_TEST_SHIP_DIR "/a/libshipk.so"

static size_t read_head(const char *path, unsigned char *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "%s", path);
  size_t n = fread(buf, 1, cap, f);
  fclose(f);
  return n;
}

Test(elfhdr, foreign_headers_refused) {
  unsigned char h[256];
  size_t n = read_head(SHIP_A, h, sizeof h);
  char err[300];
  cr_assert_eq(lt__elf_check(h, n, err, sizeof err), LT_OK, "%s", err);
  cr_assert_eq(lt__elf_check_file(SHIP_A, err, sizeof err), LT_OK, "%s", err);

  unsigned char x[256];
  memcpy(x, h, n);
  x[18] = x[18] == EM_X86_64 ? EM_AARCH64 : EM_X86_64; /* e_machine, little-endian */
  x[19] = 0;
  cr_assert_eq(lt__elf_check(x, n, err, sizeof err), LT_ENOMODULE);
  cr_assert_not_null(strstr(err, "another architecture"), "%s", err);
  cr_assert_not_null(strstr(err, "ELF machine"), "%s", err);

  memcpy(x, h, n);
  x[EI_CLASS] = x[EI_CLASS] == ELFCLASS64 ? ELFCLASS32 : ELFCLASS64;
  cr_assert_eq(lt__elf_check(x, n, err, sizeof err), LT_ENOMODULE);
  cr_assert_not_null(strstr(err, "-bit"), "%s", err);

  memcpy(x, h, n);
  x[16] = ET_EXEC; /* e_type */
  x[17] = 0;
  cr_assert_eq(lt__elf_check(x, n, err, sizeof err), LT_ENOMODULE);
  cr_assert_not_null(strstr(err, "not a shared object"), "%s", err);

  cr_assert_eq(lt__elf_check("#!/bin/sh\n", 10, err, sizeof err), LT_ENOMODULE);
  cr_assert_not_null(strstr(err, "not an ELF file"), "%s", err);
  cr_assert_eq(lt__elf_check(h, 8, err, sizeof err), LT_ENOMODULE); /* too short */
  cr_assert_eq(lt__elf_check_file("/nonexistent/libx.so", err, sizeof err), LT_EIO);
}
