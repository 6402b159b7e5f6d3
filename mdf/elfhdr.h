/* elfhdr.h: the ELF header check of a kernel module before it is loaded: is it a shared object
 * for this machine (class, byte order, machine) — so that a module built for another
 * architecture is refused with a reason that says so, where dlopen would only say "No such
 * file or directory". No state of our own: any thread. */
#ifndef LT_ELFHDR_H
#define LT_ELFHDR_H

#include <stddef.h>

/* lt__elf_check tells whether the first `len` bytes of a file, `hdr`, begin a shared object
 * this process could load. LT_OK, or LT_ENOMODULE with the reason in err ("not an ELF
 * file", "built for aarch64 (ELF machine 183); this host is x86-64 (62)", ...). */
int lt__elf_check(const void *hdr, size_t len, char *err, size_t errlen);

/* lt__elf_check_file is lt__elf_check on the file at `path`; LT_EIO when it cannot be
 * read (with the reason). */
int lt__elf_check_file(const char *path, char *err, size_t errlen);

#endif
