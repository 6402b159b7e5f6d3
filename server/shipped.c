/* shipped.c: the content-addressed store of shipped kernel modules and the modules loaded
 * from it (shipped.h). Touches no session and no socket: server.c hands it what a MODULE
 * message brought, session.c holds what it loaded. Loop thread only. */
#include "shipped.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <lithium/error.h>
#include "elfhdr.h"
#include "sha256.h"

struct lt_shipstore {
  char *dir;
};

struct lt_shipped {
  unsigned refs;
  void *handle;
  char sha256[LT_SHA256_HEX];
};

int lt__shipstore_open(lt_shipstore_t **out, const char *dir, char *err, size_t errlen) {
  *out = NULL;
  if (dir == NULL || dir[0] == '\0') {
    snprintf(err, errlen, "--accept-modules: an empty directory name");
    return LT_EINVAL;
  }
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    snprintf(err, errlen, "--accept-modules %s: cannot create it: %s", dir, strerror(errno));
    return LT_EINVAL;
  }
  struct stat sb;
  if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    snprintf(err, errlen, "--accept-modules %s: not a directory", dir);
    return LT_EINVAL;
  }
  /* Shipped code is loaded from here: nobody else may write it, or read the clients' code. */
  if (sb.st_uid != geteuid()) {
    snprintf(err, errlen,
             "--accept-modules %s: owned by another user (uid %u): refused, since a library "
             "dropped there would run inside the server",
             dir, (unsigned)sb.st_uid);
    return LT_EAUTH;
  }
  if ((sb.st_mode & 0777) != 0700 && chmod(dir, 0700) != 0) {
    snprintf(err, errlen, "--accept-modules %s: cannot make it mode 0700: %s", dir,
             strerror(errno));
    return LT_EAUTH;
  }
  lt_shipstore_t *st = calloc(1, sizeof *st);
  if (st == NULL || (st->dir = strdup(dir)) == NULL) {
    free(st);
    snprintf(err, errlen, "out of memory");
    return LT_ENOMEM;
  }
  *out = st;
  return LT_OK;
}

void lt__shipstore_free(lt_shipstore_t *st) {
  if (st == NULL) return;
  free(st->dir);
  free(st);
}

/* write_all writes data[0..len) to fd. */
static int write_all(int fd, const unsigned char *data, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    data += n;
    len -= (size_t)n;
  }
  return 0;
}

/* store writes the module to `path` through a temporary file in the same directory and a
 * rename, so that a reader never sees half a file; a stored file whose hash is right is
 * kept as it is. */
static int store(const lt_shipstore_t *st, const char *path, const char *sha, const void *data,
                 size_t len, char *err, size_t errlen) {
  char have[LT_SHA256_HEX];
  if (lt__sha256_file(path, have) == LT_OK && strcmp(have, sha) == 0) return LT_OK;
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s/.%.16s.XXXXXX", st->dir, sha);
  int fd = mkostemp(tmp, O_CLOEXEC); /* mode 0600 */
  if (fd < 0) {
    snprintf(err, errlen, "cannot write to the store %s: %s", st->dir, strerror(errno));
    return LT_EIO;
  }
  int bad = write_all(fd, data, len) != 0 || fchmod(fd, 0600) != 0;
  int e = errno;
  if (close(fd) != 0 && !bad) bad = 1, e = errno;
  if (!bad && rename(tmp, path) != 0) bad = 1, e = errno;
  if (bad) {
    unlink(tmp);
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
    return LT_EIO;
  }
  return LT_OK;
}

int lt__shipstore_load(lt_shipstore_t *st, const char *name, const char *sha, const void *data,
                       size_t len, lt_shipped_t **out, char *err, size_t errlen) {
  *out = NULL;
  char got[LT_SHA256_HEX];
  lt__sha256_hex(data, len, got);
  if (strcmp(got, sha) != 0) {
    snprintf(err, errlen,
             "the SHA-256 of the %zu bytes received (%.16s...) is not the one announced "
             "(%.16s...)",
             len, got, sha);
    return LT_ENOMODULE;
  }
  /* What could never load is not stored. */
  char why[512];
  if (lt__elf_check(data, len, why, sizeof why) != LT_OK) {
    snprintf(err, errlen, "cannot load module '%s': %s", name, why);
    return LT_ENOMODULE;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.so", st->dir, sha);
  int rc = store(st, path, sha, data, len, err, errlen);
  if (rc != LT_OK) return rc;
  lt_shipped_t *m = calloc(1, sizeof *m);
  if (m == NULL) {
    snprintf(err, errlen, "out of memory");
    return LT_ENOMEM;
  }
  if ((rc = lt__module_open(path, name, &m->handle, err, errlen)) != LT_OK) {
    free(m);
    return rc;
  }
  m->refs = 1;
  memcpy(m->sha256, sha, LT_SHA256_HEX);
  *out = m;
  return LT_OK;
}

lt_shipped_t *lt__shipped_ref(lt_shipped_t *m) {
  if (m != NULL) m->refs++;
  return m;
}

void lt__shipped_unref(lt_shipped_t *m) {
  if (m == NULL || --m->refs > 0) return;
  dlclose(m->handle);
  free(m);
}

const char *lt__shipped_sha256(const lt_shipped_t *m) {
  return m->sha256;
}

int lt__shipped_kernel(lt_shipped_t *m, const char *kernel, lt_kernel_fn *fn, char *err,
                       size_t errlen) {
  return lt__module_kernel(m->handle, kernel, fn, err, errlen);
}

int lt__shipped_in_place(lt_shipped_t *m, const char *kernel) {
  return lt__module_in_place(m->handle, kernel);
}
