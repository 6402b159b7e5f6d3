/* test_journal_cut.c: a results journal (client/journal.c) cut at every byte, as a client
 * killed mid-write leaves it. A journal of 12 records (values of 0 to 300 bytes, kernel
 * failures with messages, one input journaled twice) is cut at each offset from 0 to its
 * size; each cut copy is opened as a later run would open it. Cut inside the header: the
 * open refuses it with a message (the file is not a journal of this format), or takes it as
 * empty — never a record. Cut after the header: every record wholly before the cut reads
 * back exactly as written, none after it is found, the torn tail is cut off, and a record
 * appended then is found after a reopen. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lithium/error.h>
#include "buf.h"
#include "journal.h"
#include "log.h"

enum { NREC = 12 };

typedef struct rec {
  unsigned char in[16]; /* the input its digest is of */
  int err;              /* LT_OK: a value */
  char msg[64];
  unsigned char data[300];
  size_t len;
  uint64_t end; /* the journal's size once it was appended and synced */
} rec_t;

static rec_t recs[NREC];
static uint64_t header_end;
static char dir[] = "/tmp/lt-journal-cut-XXXXXX";
static char whole[256], cut[256];
static const char *const header_names[] = {"jk"};
static const char *const header_shas[] = {""};

static char *header(void) {
  return lt__jheader_text("farm(seq(jk:f))", header_names, header_shas, 1);
}

static uint64_t size_of(const char *path) {
  struct stat st;
  cr_assert_eq(stat(path, &st), 0, "%s", path);
  return (uint64_t)st.st_size;
}

static lt_digest_t digest_of(int i) {
  return lt__digest(recs[i].in, sizeof recs[i].in);
}

/* make_records fills recs: every third a kernel's failure, the others values of i * 27
 * bytes; record 9 is record 4's input again (a later result of the same input). */
static void make_records(void) {
  for (int i = 0; i < NREC; i++) {
    rec_t *r = &recs[i];
    memset(r->in, 'a' + (i == 9 ? 4 : i), sizeof r->in);
    if (i % 3 == 2) {
      r->err = LT_EKERNEL;
      snprintf(r->msg, sizeof r->msg, "jk:f: failure number %d", i);
    } else {
      r->len = (size_t)i * 27;
      for (size_t k = 0; k < r->len; k++)
        r->data[k] = (unsigned char)(i * 31 + (int)k);
    }
  }
}

static lt_buf_t *buf_of(const rec_t *r) {
  if (r->err != LT_OK) return lt__buf_fail(r->err, r->msg);
  lt_value_t *v = lt__value_copy(r->data, r->len);
  lt_buf_t *b = lt__buf_ok(v);
  lt__value_unref(v);
  return b;
}

static lt_journal_t *open_at(const char *path, int *rc, char *err, size_t errlen) {
  char *h = header();
  lt_journal_t *j = NULL;
  *rc = lt__journal_open(&j, path, h, LT_JOURNAL_MISMATCH_REFUSE, err, errlen);
  free(h);
  return j;
}

/* write_whole writes the journal, noting the size after the header and after each record. */
static void write_whole(void) {
  char err[256];
  int rc;
  lt_journal_t *j = open_at(whole, &rc, err, sizeof err);
  cr_assert_eq(rc, LT_OK, "%s", err);
  header_end = size_of(whole);
  for (int i = 0; i < NREC; i++) {
    lt_buf_t *b = buf_of(&recs[i]);
    cr_assert_eq(lt__journal_append(j, digest_of(i), b), LT_OK);
    cr_assert_eq(lt__journal_sync(j), LT_OK);
    lt_buf_free(b);
    recs[i].end = size_of(whole);
  }
  lt__journal_close(j);
}

static void copy_cut(uint64_t at) {
  FILE *in = fopen(whole, "rb"), *out = fopen(cut, "wb");
  cr_assert(in != NULL && out != NULL);
  unsigned char buf[4096];
  uint64_t left = at;
  while (left > 0) {
    size_t n = fread(buf, 1, left < sizeof buf ? (size_t)left : sizeof buf, in);
    cr_assert_gt(n, 0);
    cr_assert_eq(fwrite(buf, 1, n, out), n);
    left -= n;
  }
  fclose(in);
  cr_assert_eq(fclose(out), 0);
}

/* latest_whole returns the last record of input i's digest wholly before `at`, or -1. */
static int latest_whole(int i, uint64_t at) {
  int found = -1;
  for (int k = 0; k < NREC; k++)
    if (recs[k].end <= at && memcmp(recs[k].in, recs[i].in, sizeof recs[i].in) == 0 && found < 0)
      found = k; /* the first journaled result of an input is the one read back */
  return found;
}

static void check_read(lt_journal_t *j, int i, uint64_t at) {
  uint64_t off = 0;
  int want = latest_whole(i, at);
  int got = lt__journal_find(j, digest_of(i), &off);
  cr_assert_eq(got, want >= 0, "cut at %llu: record %d %s", (unsigned long long)at, i,
               want >= 0 ? "not found" : "found, past the cut");
  if (want < 0) return;
  lt_buf_t *b = NULL;
  char err[256];
  cr_assert_eq(lt__journal_read(j, off, &b, err, sizeof err), LT_OK, "cut at %llu: %s",
               (unsigned long long)at, err);
  const rec_t *r = &recs[want];
  cr_assert_eq(lt_buf_error(b), r->err, "cut at %llu: record %d", (unsigned long long)at, i);
  if (r->err != LT_OK)
    cr_assert_str_eq(lt_buf_errmsg(b), r->msg);
  else
    cr_assert(lt_buf_len(b) == r->len && memcmp(lt_buf_data(b), r->data, r->len) == 0,
              "cut at %llu: record %d's value", (unsigned long long)at, i);
  lt_buf_free(b);
}

/* check_appendable appends a new record to the opened cut journal, reopens it and finds it,
 * with what was there before the cut. */
static void check_appendable(lt_journal_t *j, uint64_t at) {
  rec_t extra = {.err = LT_OK, .len = 5};
  memset(extra.in, 'z', sizeof extra.in);
  memcpy(extra.data, "extra", 5);
  lt_digest_t d = lt__digest(extra.in, sizeof extra.in);
  lt_buf_t *b = buf_of(&extra);
  cr_assert_eq(lt__journal_append(j, d, b), LT_OK);
  lt_buf_free(b);
  lt__journal_close(j);
  char err[256];
  int rc;
  j = open_at(cut, &rc, err, sizeof err);
  cr_assert_eq(rc, LT_OK, "cut at %llu, appended, reopened: %s", (unsigned long long)at, err);
  uint64_t off;
  cr_assert(lt__journal_find(j, d, &off), "cut at %llu: the record appended after it is lost",
            (unsigned long long)at);
  for (int i = 0; i < NREC; i++)
    check_read(j, i, at);
  lt__journal_close(j);
}

Test(journal_cut, every_cut_keeps_the_whole_records_before_it, .timeout = 300) {
  lt__log_set_level(LT_LOG_ERROR + 1); /* a torn tail is logged at every cut */
  cr_assert_not_null(mkdtemp(dir));
  snprintf(whole, sizeof whole, "%s/whole.journal", dir);
  snprintf(cut, sizeof cut, "%s/cut.journal", dir);
  make_records();
  write_whole();
  uint64_t size = size_of(whole);
  cr_assert_eq(recs[NREC - 1].end, size);
  for (uint64_t at = 0; at <= size; at++) {
    copy_cut(at);
    char err[256];
    int rc;
    lt_journal_t *j = open_at(cut, &rc, err, sizeof err);
    if (at < header_end) {
      /* Not a journal, or an empty one: no record either way. */
      cr_assert(rc == LT_EINVAL || rc == LT_OK, "cut at %llu in the header: %s",
                (unsigned long long)at, lt_strerror(rc));
      if (rc == LT_EINVAL)
        cr_assert_neq(err[0], '\0', "cut at %llu: no message", (unsigned long long)at);
      for (int i = 0; rc == LT_OK && i < NREC; i++) {
        uint64_t off;
        cr_assert(!lt__journal_find(j, digest_of(i), &off), "cut at %llu: a record found",
                  (unsigned long long)at);
      }
      lt__journal_close(j);
      continue;
    }
    cr_assert_eq(rc, LT_OK, "cut at %llu: %s", (unsigned long long)at, err);
    for (int i = 0; i < NREC; i++)
      check_read(j, i, at);
    if (at % 7 == 0 || at == size) /* appending after a cut: every seventh, and the whole */
      check_appendable(j, at);
    else
      lt__journal_close(j);
  }
  unlink(whole);
  unlink(cut);
  rmdir(dir);
}
