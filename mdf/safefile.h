/* safefile.h: opening a file that will run inside the process (a kernel module) so that
 * nobody but root and this process's user could have put it there: the file is opened
 * without following a link, relative to its directory's own descriptor, and checked on the
 * descriptors (fstat), the directory and each one above it up to the root. The caller then
 * loads the file through its descriptor, so what was checked is what runs. No state of our
 * own: any thread. */
#ifndef LT_SAFEFILE_H
#define LT_SAFEFILE_H

#include <stddef.h>
#include <sys/stat.h>

/* lt__safe_stat_why tells why a file or directory with status `sb` is unsafe to load code
 * from, or returns NULL: owned by another user than this process's or root, writable by
 * everyone, or by a group other than this process's. A directory that is writable by
 * others but sticky (like /tmp) is safe as a parent: its entries stay their owners'. */
const char *lt__safe_stat_why(const struct stat *sb, int is_parent);

/* lt__safe_dir checks the directory open as `dfd` and every directory above it (through
 * "..", not through names) up to the root. LT_OK, or LT_EAUTH with the reason in why
 * (naming the directory at fault by its depth). */
int lt__safe_dir(int dfd, char *why, size_t len);

/* lt__safe_open opens `file` (a name, no '/') in directory `dir` for reading, refusing a
 * symbolic link, and checks the file (a regular file, lt__safe_stat_why) and the directory
 * chain (lt__safe_dir). *fd gets the open descriptor (O_CLOEXEC; the caller closes it).
 * LT_OK; LT_EAUTH with the reason in why; LT_ENOMODULE when it cannot be opened. */
int lt__safe_open(const char *dir, const char *file, int *fd, char *why, size_t len);

#endif
