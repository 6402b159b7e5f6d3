/* journal_compact.c: lt_journal_compact (lithium.h), `lithium journal compact FILE`. The
 * journal is copied record by record into a new file beside it — the records whose checksum
 * holds, the first of each input, none of a torn tail, every intact one after damage in the
 * middle — which is made durable and renamed
 * over it, so that a crash leaves the old journal or the new one. It holds the journal's
 * lock meanwhile: a run cannot append to it. Memory: the index (16 bytes a record) and the
 * largest record. Any thread. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lithium.h>
#include "lasterr.h"
#include <lithium/error.h>
#include "journal_index.h"
#include "journal_record.h"

#define KEPT (UINT64_C(1) << 63) /* an index entry whose record went to the new file */

typedef struct compact {
  const char *path;
  int fd;
  uint64_t first, end; /* the records: from the header's end to a torn tail or the end */
  lt_jidx_t index;
  FILE *out;
  lt_journal_stats_t *st;
} compact_t;

/* index_all reads every record's head up to a torn tail; damage in the middle
 * (lt__jrec_step) is skipped, and the records after it are indexed. */
static int index_all(compact_t *c, uint64_t size) {
  uint64_t off = c->first, next;
  lt_jrec_t r;
  int got, named;
  while ((got = lt__jrec_step(c->fd, off, size, &r, &next, &named)) > 0) {
    if (got == LT_JSTEP_RECORD && lt__jidx_add(&c->index, r.d.h[0], off) != LT_OK) return LT_ENOMEM;
    off = next;
  }
  c->end = off;
  c->st->torn_bytes = size - off;
  lt__jidx_seal(&c->index);
  return LT_OK;
}

/* seen_before tells whether a record of the same input as `r` was kept already, and marks
 * `r`'s entry kept when not. */
static int seen_before(compact_t *c, const lt_jrec_t *r) {
  size_t mine = c->index.n;
  for (size_t i = lt__jidx_first(&c->index, r->d.h[0]);
       i < c->index.n && c->index.v[i].key == r->d.h[0]; i++) {
    uint64_t off = c->index.v[i].off & ~KEPT;
    lt_jrec_t other;
    if (off == r->off) mine = i;
    if ((c->index.v[i].off & KEPT) && lt__jrec_head(c->fd, off, c->end, &other) == 1 &&
        memcmp(other.d.h, r->d.h, sizeof r->d.h) == 0)
      return 1;
  }
  if (mine < c->index.n) c->index.v[mine].off |= KEPT;
  return 0;
}

/* copy_records copies the records worth keeping to c->out. */
static int copy_records(compact_t *c) {
  lt_jrec_t r;
  uint64_t next;
  int got, named;
  for (uint64_t off = c->first; (got = lt__jrec_step(c->fd, off, c->end, &r, &next, &named)) > 0;
       off = next) {
    if (got == LT_JSTEP_DAMAGED) {
      c->st->damaged++;
      continue;
    }
    char *msg = NULL;
    lt_value_t *data = NULL;
    int rc = lt__jrec_body(c->fd, &r, &msg, &data);
    if (rc == LT_ENOMEM) return rc;
    if (rc != LT_OK) {
      c->st->damaged++;
      continue;
    }
    if (seen_before(c, &r)) {
      c->st->duplicates++;
    } else {
      rc = lt__jrec_write(c->out, r.d, r.status, msg, r.errlen, data->data, data->len);
      c->st->records++;
    }
    free(msg);
    lt__value_unref(data);
    if (rc != LT_OK) return rc;
  }
  return LT_OK;
}

/* rewrite writes the new journal beside the old one and renames it over it. */
static int rewrite(compact_t *c, const char *header, mode_t mode, char *err, size_t errlen) {
  char tmp[4200];
  int fd = lt__jfile_beside(c->path, "compact", tmp, sizeof tmp);
  if (fd < 0 || (c->out = fdopen(fd, "wb")) == NULL) {
    snprintf(err, errlen, "journal %s: cannot write %s: %s", c->path, tmp, strerror(errno));
    if (fd >= 0) {
      close(fd);
      unlink(tmp);
    }
    return LT_EIO;
  }
  int rc = lt__jheader_write(c->out, header);
  if (rc == LT_OK) rc = copy_records(c);
  if (rc == LT_OK)
    rc = lt__jfile_commit(c->out, tmp, c->path, mode);
  else
    unlink(tmp);
  struct stat sb;
  if (rc == LT_OK && fstat(fd, &sb) == 0) c->st->bytes_after = (uint64_t)sb.st_size;
  fclose(c->out); /* what matters was flushed and synced by the commit */
  if (rc != LT_OK)
    snprintf(err, errlen, "journal %s: cannot write the compacted copy: %s", c->path,
             rc == LT_EIO ? strerror(errno) : lt_strerror(rc));
  return rc;
}

/* journal_compact is lt_journal_compact but for the thread's last failure. */
static int journal_compact(const char *path, lt_journal_stats_t *stats, char *err, size_t errlen) {
  lt_journal_stats_t dummy;
  if (stats == NULL) stats = &dummy;
  memset(stats, 0, sizeof *stats);
  if (path == NULL) {
    snprintf(err, errlen, "journal: no path");
    return LT_EINVAL;
  }
  compact_t c = {.path = path, .st = stats};
  c.fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (c.fd < 0 && errno == ELOOP) {
    snprintf(err, errlen, "journal %s is a symbolic link: refused (name the file itself)", path);
    return LT_EINVAL;
  }
  if (c.fd < 0) {
    snprintf(err, errlen, "journal %s: %s", path, strerror(errno));
    return errno == ENOENT ? LT_ENOENT : LT_EIO;
  }
  struct stat sb;
  char *header = NULL;
  int rc = LT_OK;
  if (flock(c.fd, LOCK_EX | LOCK_NB) != 0) {
    snprintf(err, errlen, "journal %s is in use by a run", path);
    rc = LT_EAGAIN;
  } else if (fstat(c.fd, &sb) != 0) {
    snprintf(err, errlen, "journal %s: %s", path, strerror(errno));
    rc = LT_EIO;
  }
  if (rc == LT_OK) rc = lt__jheader_read(c.fd, path, &header, &c.first, err, errlen);
  if (rc == LT_OK) {
    stats->bytes_before = (uint64_t)sb.st_size;
    rc = index_all(&c, (uint64_t)sb.st_size);
    if (rc != LT_OK) snprintf(err, errlen, "journal %s: %s", path, lt_strerror(rc));
  }
  if (rc == LT_OK) rc = rewrite(&c, header, sb.st_mode & 07777, err, errlen);
  free(header);
  lt__jidx_clear(&c.index);
  close(c.fd);
  return rc;
}

LT_API int lt_journal_compact(const char *path, lt_journal_stats_t *stats, char *err,
                              size_t errlen) {
  /* The caller's buffer, or one of the thread's size when it gave none. */
  char *mine = err != NULL && errlen > 0 ? NULL : calloc(1, LT_LASTERR_MAX);
  if (mine != NULL) {
    err = mine;
    errlen = LT_LASTERR_MAX;
  }
  int rc = err != NULL ? journal_compact(path, stats, err, errlen) : LT_ENOMEM;
  if (rc != LT_OK) lt__fail(rc, "lt_journal_compact: %s", err != NULL ? err : "out of memory");
  free(mine);
  return rc;
}
