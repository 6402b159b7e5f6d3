/* journal.c: the results journal of a run (journal.h): opening (the header against this
 * run's, a torn tail cut off, damage in the middle told from it, the index of the records),
 * lookups, reading a result back and appending new ones. Records are appended with stdio and made
 * durable by lt__journal_sync, once per batch of results. The file format is journal_record.c's;
 * compaction is journal_compact.c's. Caller's lock (ev->mu), but for lt__journal_read. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lithium/error.h>
#include "buf.h"
#include "journal.h"
#include "journal_index.h"
#include "log.h"

struct lt_journal {
  FILE *f;
  int fd;
  uint64_t indexed_end; /* the records the index knows end here */
  lt_jidx_t index;
  int dirty;
  char path[4096];
};

/* start_again replaces j's file, another run's journal, with a journal holding only
 * `header`, without letting go of the lock: the new file is locked before it is renamed over
 * the old one, whose lock goes only then (another run that opened the old one has failed to
 * lock it; one that opens the path from then on finds the new one locked). */
static int start_again(lt_journal_t *j, const char *header, char *err, size_t errlen) {
  char tmp[4200];
  int fd = lt__jfile_beside(j->path, "new", tmp, sizeof tmp);
  FILE *f = fd >= 0 ? fdopen(fd, "a+b") : NULL;
  int rc = f != NULL && flock(fd, LOCK_EX | LOCK_NB) == 0 ? LT_OK : LT_EIO;
  if (rc == LT_OK) rc = lt__jheader_write(f, header);
  if (rc == LT_OK)
    rc = lt__jfile_commit(f, tmp, j->path, 0644);
  else if (fd >= 0)
    unlink(tmp);
  if (rc != LT_OK) {
    snprintf(err, errlen, "journal %s: cannot start it again: %s", j->path, strerror(errno));
    if (f != NULL)
      fclose(f);
    else if (fd >= 0)
      close(fd);
    return rc;
  }
  fclose(j->f); /* and the old file's lock with it */
  j->f = f;
  j->fd = fd;
  return LT_OK;
}

/* check_header compares the journal's header with `header`: LT_OK when they agree (or the
 * file was empty and got it); 1 when the journal is another run's and `policy` has it
 * replaced; LT_EINVAL with err set otherwise. *end gets the first record's offset. */
static int check_header(lt_journal_t *j, const char *header, int policy, uint64_t *end, char *err,
                        size_t errlen) {
  struct stat sb;
  if (fstat(j->fd, &sb) != 0) return LT_EIO;
  if (sb.st_size == 0) {
    if (lt__jheader_write(j->f, header) != LT_OK) return LT_EIO;
    *end = (uint64_t)ftello(j->f);
    return LT_OK;
  }
  char *theirs = NULL;
  int rc = lt__jheader_read(j->fd, j->path, &theirs, end, err, errlen);
  if (rc != LT_OK) return rc;
  int same = strcmp(theirs, header) == 0, other_program = 0;
  if (!same) other_program = lt__jheader_diff(j->path, theirs, header, err, errlen);
  free(theirs);
  if (same) return LT_OK;
  if (policy == LT_JOURNAL_MISMATCH_REFUSE) return LT_EINVAL;
  if (policy == LT_JOURNAL_MISMATCH_REBUILT && other_program) {
    size_t used = strlen(err);
    snprintf(err + used, errlen - used,
             ": refused, its results are another run's (journal_mismatch=recompute replaces "
             "it; or give this run another journal)");
    return LT_EINVAL;
  }
  lt__log(LT_LOG_WARN,
          "%s: its results are not used, the journal starts again "
          "(journal_mismatch=refuse refuses instead)",
          err);
  return 1;
}

/* load_index reads the head of every record from `off` on into the index. A torn tail (a
 * head that runs past the end with no intact record after it, or a last record whose
 * checksum fails) is cut off; damage to a record in the middle (lt__jrec_step) costs that
 * record alone: it is indexed under the digest its head still names, so that its task reads
 * it back as LT_EIO, and the records after it are indexed as usual. */
static int load_index(lt_journal_t *j, uint64_t off) {
  struct stat sb;
  if (fstat(j->fd, &sb) != 0) return LT_EIO;
  uint64_t size = (uint64_t)sb.st_size, next;
  lt_jrec_t r, last = {0};
  int got, any = 0, named, damaged = 0;
  while ((got = lt__jrec_step(j->fd, off, size, &r, &next, &named)) > 0) {
    if (got == LT_JSTEP_RECORD || named) {
      if (lt__jidx_add(&j->index, r.d.h[0], r.off) != LT_OK) return LT_ENOMEM;
    }
    any = got == LT_JSTEP_RECORD;
    if (any) last = r;
    damaged += got == LT_JSTEP_DAMAGED;
    off = next;
  }
  if (damaged > 0)
    lt__log(LT_LOG_WARN,
            "journal %s: %d damaged record%s in the middle (a length that does not hold): "
            "their tasks read back LT_EIO, the records after them are used; `lithium journal "
            "compact %s` drops them",
            j->path, damaged, damaged > 1 ? "s" : "", j->path);
  char *msg = NULL;
  lt_value_t *data = NULL;
  if (any && got == LT_JSTEP_END && lt__jrec_body(j->fd, &last, &msg, &data) == LT_EIO) {
    j->index.n--; /* the last record was torn inside: its bytes are not all there */
    off = last.off;
    got = LT_JSTEP_TORN;
  }
  free(msg);
  lt__value_unref(data);
  if (got == LT_JSTEP_TORN) {
    lt__log(LT_LOG_WARN, "journal %s: a torn record at its end (%llu bytes) is cut off", j->path,
            (unsigned long long)(size - off));
    if (ftruncate(j->fd, (off_t)off) != 0) return LT_EIO;
  }
  j->indexed_end = off;
  lt__jidx_seal(&j->index);
  return LT_OK;
}

/* open_file opens `path` for appending and reading, locked against other runs. A symbolic
 * link is refused (O_NOFOLLOW), dangling or not: a journal is written, and a link planted at
 * its path would have the run write wherever it points. */
static int open_file(lt_journal_t *j, char *err, size_t errlen) {
  /* Close-on-exec: spawned servers must not hold the lock. */
  int fd = open(j->path, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0 && errno == ELOOP) {
    snprintf(err, errlen,
             "journal %s is a symbolic link: refused (a journal is written; name the file "
             "itself)",
             j->path);
    return LT_EINVAL;
  }
  j->f = fd >= 0 ? fdopen(fd, "a+b") : NULL;
  if (j->f == NULL) {
    snprintf(err, errlen, "journal %s: %s", j->path, strerror(errno));
    if (fd >= 0) close(fd);
    return LT_EIO;
  }
  j->fd = fd;
  if (flock(j->fd, LOCK_EX | LOCK_NB) != 0) {
    snprintf(err, errlen, "journal %s is in use by another run", j->path);
    return errno == EWOULDBLOCK ? LT_EAGAIN : LT_EIO;
  }
  return LT_OK;
}

int lt__journal_open(lt_journal_t **out, const char *path, const char *header, int policy,
                     char *err, size_t errlen) {
  *out = NULL;
  err[0] = '\0';
  lt_journal_t *j = calloc(1, sizeof *j);
  if (j == NULL) return LT_ENOMEM;
  snprintf(j->path, sizeof j->path, "%s", path);
  uint64_t end = 0;
  int rc = open_file(j, err, errlen);
  if (rc == LT_OK) rc = check_header(j, header, policy, &end, err, errlen);
  if (rc == 1) { /* another run's journal, not refused: a new one takes its place */
    err[0] = '\0';
    rc = start_again(j, header, err, errlen);
    if (rc == LT_OK) rc = check_header(j, header, LT_JOURNAL_MISMATCH_REFUSE, &end, err, errlen);
  }
  if (rc == LT_OK) rc = load_index(j, end);
  if (rc == LT_OK && fseeko(j->f, 0, SEEK_END) != 0) rc = LT_EIO;
  if (rc != LT_OK) {
    if (err[0] == '\0') snprintf(err, errlen, "journal %s: %s", path, lt_strerror(rc));
    lt__journal_close(j);
    return rc;
  }
  *out = j;
  return LT_OK;
}

int lt__journal_find(lt_journal_t *j, lt_digest_t d, uint64_t *off) {
  /* An intact record of the input first; one whose head is damaged only when there is no
   * other (its task then reads back LT_EIO). */
  int found = 0;
  for (size_t i = lt__jidx_first(&j->index, d.h[0]); i < j->index.n && j->index.v[i].key == d.h[0];
       i++) {
    lt_jrec_t r;
    if (lt__jrec_peek(j->fd, j->index.v[i].off, j->indexed_end, &r) != 1 ||
        memcmp(r.d.h, d.h, sizeof d.h) != 0)
      continue;
    if (lt__jrec_head(j->fd, r.off, j->indexed_end, &r) == 1) {
      *off = r.off;
      return 1;
    }
    if (!found) *off = j->index.v[i].off;
    found = 1;
  }
  return found;
}

int lt__journal_read(lt_journal_t *j, uint64_t off, lt_buf_t **out, char *err, size_t errlen) {
  *out = NULL;
  lt_jrec_t r;
  char *msg = NULL;
  lt_value_t *data = NULL;
  int rc = lt__jrec_head(j->fd, off, j->indexed_end, &r) == 1 ? LT_OK : LT_EIO;
  if (rc == LT_OK) rc = lt__jrec_body(j->fd, &r, &msg, &data);
  if (rc == LT_OK) {
    *out = r.status == LT_OK ? lt__buf_ok(data) : lt__buf_fail(r.status, msg);
    if (*out == NULL) rc = LT_ENOMEM;
  }
  free(msg);
  lt__value_unref(data);
  if (rc == LT_EIO)
    snprintf(err, errlen,
             "journal %s: the record at offset %llu is damaged (its length or its checksum "
             "does not hold): "
             "`lithium journal compact %s` drops it",
             j->path, (unsigned long long)off, j->path);
  return rc;
}

int lt__journal_append(lt_journal_t *j, lt_digest_t d, const lt_buf_t *b) {
  const char *msg = lt_buf_error(b) == LT_OK ? "" : lt_buf_errmsg(b);
  int rc =
      lt__jrec_write(j->f, d, lt_buf_error(b), msg, strlen(msg), lt_buf_data(b), lt_buf_len(b));
  if (rc == LT_OK) j->dirty = 1;
  return rc;
}

int lt__journal_sync(lt_journal_t *j) {
  if (j == NULL || !j->dirty) return LT_OK;
  j->dirty = 0;
  return fflush(j->f) == 0 && fsync(j->fd) == 0 ? LT_OK : LT_EIO;
}

void lt__journal_close(lt_journal_t *j) {
  if (j == NULL) return;
  if (j->f != NULL) {
    lt__journal_sync(j);
    fclose(j->f); /* and the lock with it */
  }
  lt__jidx_clear(&j->index);
  free(j);
}
