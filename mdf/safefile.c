/* safefile.c: the checks of safefile.h on open descriptors: O_NOFOLLOW for the file,
 * openat(.., "..") for the walk up the directory chain, so that renaming or relinking
 * anything between the check and the load changes nothing that was checked. It may not
 * load anything itself. Any thread. */
#include "safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <lithium/error.h>

/* The deepest directory chain walked before giving up (a loop through bind mounts). */
#define MAX_DEPTH 256

const char *lt__safe_stat_why(const struct stat *sb, int is_parent) {
  if (sb->st_uid != geteuid() && sb->st_uid != 0) return "owned by another user";
  if (is_parent && S_ISDIR(sb->st_mode) && (sb->st_mode & S_ISVTX)) return NULL;
  if (sb->st_mode & S_IWOTH) return "writable by everyone";
  if ((sb->st_mode & S_IWGRP) && sb->st_gid != getegid()) return "writable by another group";
  return NULL;
}

int lt__safe_dir(int dfd, char *why, size_t len) {
  int cur = dup(dfd);
  if (cur < 0) {
    snprintf(why, len, "cannot check the directory: %s", strerror(errno));
    return LT_EAUTH;
  }
  int rc = LT_OK;
  for (int depth = 0; rc == LT_OK; depth++) {
    struct stat sb, up;
    const char *bad;
    if (depth == MAX_DEPTH || fstat(cur, &sb) != 0) {
      snprintf(why, len, "cannot check the directories above it");
      rc = LT_EAUTH;
      break;
    }
    if ((bad = lt__safe_stat_why(&sb, depth > 0)) != NULL) {
      if (depth == 0)
        snprintf(why, len, "its directory is %s (mode %03o)", bad, (unsigned)(sb.st_mode & 0777));
      else
        snprintf(why, len, "the directory %d level%s above its own is %s (mode %03o)", depth,
                 depth > 1 ? "s" : "", bad, (unsigned)(sb.st_mode & 07777));
      rc = LT_EAUTH;
      break;
    }
    int parent = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (parent < 0 || fstat(parent, &up) != 0) {
      if (parent >= 0) close(parent);
      snprintf(why, len, "cannot check the directories above it");
      rc = LT_EAUTH;
      break;
    }
    close(cur);
    cur = parent;
    if (up.st_dev == sb.st_dev && up.st_ino == sb.st_ino) break; /* the root */
  }
  close(cur);
  return rc;
}

int lt__safe_open(const char *dir, const char *file, int *fd, char *why, size_t len) {
  *fd = -1;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    snprintf(why, len, "cannot open its directory: %s", strerror(errno));
    return LT_ENOMODULE;
  }
  int rc = lt__safe_dir(dfd, why, len);
  if (rc != LT_OK) {
    close(dfd);
    return rc;
  }
  int f = openat(dfd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  int e = errno;
  close(dfd);
  if (f < 0) {
    if (e == ELOOP) {
      snprintf(why, len,
               "a symbolic link: refused (modules are opened without following links; "
               "put the file itself there, or --allow-unsafe-modules)");
      return LT_EAUTH;
    }
    snprintf(why, len, "cannot open it: %s", strerror(e));
    return LT_ENOMODULE;
  }
  struct stat sb;
  const char *bad = NULL;
  if (fstat(f, &sb) != 0 || !S_ISREG(sb.st_mode))
    bad = "not a regular file";
  else
    bad = lt__safe_stat_why(&sb, 0);
  if (bad != NULL) {
    snprintf(why, len, "%s (mode %03o): refused", bad, (unsigned)(sb.st_mode & 0777));
    close(f);
    return LT_EAUTH;
  }
  *fd = f;
  return LT_OK;
}
