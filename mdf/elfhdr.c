/* elfhdr.c: the ELF header check of kernel modules (elfhdr.h). This process's own header, found
 * in memory with dladdr, says what "this machine" is, so no table of architectures decides
 * what loads; the table below only names machines in messages. Any thread. */
#include "elfhdr.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <lithium/error.h>

/* machine_name names a few ELF machines for messages; NULL for the others. */
static const char *machine_name(unsigned m) {
  switch (m) {
  case EM_386:
    return "i386";
  case EM_X86_64:
    return "x86-64";
  case EM_ARM:
    return "arm";
  case EM_AARCH64:
    return "aarch64";
  case EM_PPC64:
    return "ppc64";
  case EM_S390:
    return "s390";
  case EM_RISCV:
    return "riscv";
  case EM_MIPS:
    return "mips";
  default:
    return NULL;
  }
}

/* host_header returns this process's own ELF header (mapped with the object holding this
 * function), or NULL when it cannot be found. */
static const unsigned char *host_header(void) {
  Dl_info info;
  if (dladdr((void *)host_header, &info) == 0 || info.dli_fbase == NULL) return NULL;
  const unsigned char *h = info.dli_fbase;
  return memcmp(h, ELFMAG, SELFMAG) == 0 ? h : NULL;
}

/* machine_of reads e_machine (at the same offset in both classes) in the file's byte order. */
static unsigned machine_of(const unsigned char *h) {
  const unsigned char *p = h + offsetof(Elf64_Ehdr, e_machine);
  return h[EI_DATA] == ELFDATA2MSB ? (unsigned)(p[0] << 8 | p[1]) : (unsigned)(p[1] << 8 | p[0]);
}

/* type_of reads e_type likewise. */
static unsigned type_of(const unsigned char *h) {
  const unsigned char *p = h + offsetof(Elf64_Ehdr, e_type);
  return h[EI_DATA] == ELFDATA2MSB ? (unsigned)(p[0] << 8 | p[1]) : (unsigned)(p[1] << 8 | p[0]);
}

/* describe writes "aarch64 (ELF machine 183)" or "ELF machine 4242". */
static void describe(unsigned m, char *buf, size_t len) {
  const char *name = machine_name(m);
  if (name != NULL)
    snprintf(buf, len, "%s (ELF machine %u)", name, m);
  else
    snprintf(buf, len, "ELF machine %u", m);
}

int lt__elf_check(const void *hdr, size_t len, char *err, size_t errlen) {
  const unsigned char *h = hdr;
  if (len < sizeof(Elf32_Ehdr) || memcmp(h, ELFMAG, SELFMAG) != 0) {
    snprintf(err, errlen, "not an ELF file (no ELF header)");
    return LT_ENOMODULE;
  }
  const unsigned char *self = host_header();
  if (self == NULL) return LT_OK; /* nothing to compare with: dlopen decides */
  if (h[EI_CLASS] != self[EI_CLASS] || h[EI_DATA] != self[EI_DATA]) {
    snprintf(err, errlen,
             "built for another architecture: %d-bit %s-endian, this host is %d-bit %s-endian",
             h[EI_CLASS] == ELFCLASS64 ? 64 : 32, h[EI_DATA] == ELFDATA2MSB ? "big" : "little",
             self[EI_CLASS] == ELFCLASS64 ? 64 : 32,
             self[EI_DATA] == ELFDATA2MSB ? "big" : "little");
    return LT_ENOMODULE;
  }
  if (len < sizeof(Elf64_Ehdr) && h[EI_CLASS] == ELFCLASS64) {
    snprintf(err, errlen, "truncated ELF header");
    return LT_ENOMODULE;
  }
  unsigned mine = machine_of(self), theirs = machine_of(h);
  if (mine != theirs) {
    char a[64], b[64];
    describe(theirs, a, sizeof a);
    describe(mine, b, sizeof b);
    snprintf(err, errlen, "built for another architecture: %s; this host is %s", a, b);
    return LT_ENOMODULE;
  }
  if (type_of(h) != ET_DYN) {
    snprintf(err, errlen, "not a shared object (ELF type %u)", type_of(h));
    return LT_ENOMODULE;
  }
  return LT_OK;
}

int lt__elf_check_file(const char *path, char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
    return LT_EIO;
  }
  unsigned char h[sizeof(Elf64_Ehdr)];
  ssize_t got;
  do
    got = read(fd, h, sizeof h);
  while (got < 0 && errno == EINTR);
  int e = errno;
  close(fd);
  if (got < 0) {
    snprintf(err, errlen, "cannot read %s: %s", path, strerror(e));
    return LT_EIO;
  }
  return lt__elf_check(h, (size_t)got, err, errlen);
}
