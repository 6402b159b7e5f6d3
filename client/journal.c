/* journal.c: the results journal (journal.h). The file is a header — a magic line and the
 * program's canonical expression — then one record a finished task:
 *   magic "LTJR" | u32 status (two's complement) | u32 error length | u64 data length |
 *   16-byte input digest | error text | data | u32 CRC-32 of everything before it
 * (integers little-endian). Records are appended with stdio and made durable by
 * lt__journal_sync, once per batch of results. Opening reads every record whose CRC holds
 * and cuts the file after the last one (a record torn by a crash is dropped). Results are
 * kept in memory by digest, a list per digest, until a submission takes them.
 * Caller's lock (ev->mu). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uthash.h>

#include <lithium/error.h>
#include "buf.h"
#include "journal.h"
#include "queue.h"
#include "value.h"

#define MAGIC_LINE "lithium journal 1\n"
#define REC_MAGIC  0x524a544cu /* "LTJR" little-endian */
#define REC_HEAD   (4 + 4 + 4 + 8 + 16)
#define MAX_ERRMSG 65536

/* One journaled result, in the list of its digest. */
typedef struct entry {
  int status;
  char *errmsg;
  lt_value_t *value; /* NULL for an error */
  struct entry *next;
} entry_t;

typedef struct bucket {
  lt_digest_t d; /* key */
  entry_t *head, *tail;
  UT_hash_handle hh;
} bucket_t;

struct lt_journal {
  FILE *f;
  bucket_t *buckets;
  uint64_t taken;
  int dirty;
};

/* ---- digests and checksums ---------------------------------------------------------- */

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

lt_digest_t lt__digest(const void *data, size_t len) {
  /* Two independent 64-bit hashes: FNV-1a, and a multiply-mix over 8-byte words. */
  const unsigned char *p = data;
  uint64_t a = 0xcbf29ce484222325ull, b = 0x9e3779b97f4a7c15ull ^ len;
  for (size_t i = 0; i < len; i++) {
    a ^= p[i];
    a *= 0x100000001b3ull;
  }
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    b = mix64(b ^ w) + 0x9e3779b97f4a7c15ull;
  }
  uint64_t tail = 0;
  memcpy(&tail, p + i, len - i);
  b = mix64(b ^ tail ^ ((uint64_t)(len - i) << 56));
  return (lt_digest_t){{mix64(a ^ len), b}};
}

static uint32_t crc32_update(uint32_t crc, const void *data, size_t len) {
  static uint32_t table[256];
  if (table[1] == 0) {
    for (uint32_t n = 0; n < 256; n++) {
      uint32_t c = n;
      for (int k = 0; k < 8; k++)
        c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      table[n] = c;
    }
  }
  const unsigned char *p = data;
  crc = ~crc;
  for (size_t i = 0; i < len; i++)
    crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

static uint64_t get64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

/* ---- the index ---------------------------------------------------------------------- */

static int index_add(lt_journal_t *j, lt_digest_t d, entry_t *e) {
  bucket_t *b;
  HASH_FIND(hh, j->buckets, &d, sizeof d, b);
  if (b == NULL) {
    if ((b = calloc(1, sizeof *b)) == NULL) return LT_ENOMEM;
    b->d = d;
    HASH_ADD(hh, j->buckets, d, sizeof b->d, b);
  }
  LT_QUEUE_PUSH(b->head, b->tail, e, next);
  return LT_OK;
}

static void entry_free(entry_t *e) {
  if (e == NULL) return;
  free(e->errmsg);
  lt__value_unref(e->value);
  free(e);
}

/* ---- reading -------------------------------------------------------------------------- */

/* read_record reads the record at the file position into a new entry; 0 at a clean end, 1
 * with *out and *d set, -1 for a torn or corrupt record (or no memory). */
static int read_record(FILE *f, entry_t **out, lt_digest_t *d) {
  unsigned char head[REC_HEAD];
  size_t n = fread(head, 1, sizeof head, f);
  if (n == 0 && feof(f)) return 0;
  if (n != sizeof head || get32(head) != REC_MAGIC) return -1;
  uint32_t errlen = get32(head + 8);
  uint64_t datalen = get64(head + 12);
  if (errlen > MAX_ERRMSG || datalen > ((uint64_t)1 << 40)) return -1;
  entry_t *e = calloc(1, sizeof *e);
  char *msg = malloc((size_t)errlen + 1);
  lt_value_t *v = lt__value_new((size_t)datalen);
  if (e == NULL || msg == NULL || v == NULL || fread(msg, 1, errlen, f) != errlen ||
      fread(v->data, 1, (size_t)datalen, f) != datalen) {
    free(e);
    free(msg);
    lt__value_unref(v);
    return -1;
  }
  unsigned char crcb[4];
  uint32_t crc = crc32_update(0, head, sizeof head);
  crc = crc32_update(crc, msg, errlen);
  crc = crc32_update(crc, v->data, (size_t)datalen);
  if (fread(crcb, 1, 4, f) != 4 || get32(crcb) != crc) {
    free(e);
    free(msg);
    lt__value_unref(v);
    return -1;
  }
  msg[errlen] = '\0';
  e->status = (int)(int32_t)get32(head + 4);
  e->errmsg = msg;
  if (e->status == LT_OK) {
    e->value = v;
  } else {
    lt__value_unref(v);
  }
  memcpy(d->h, head + 20, 16);
  *out = e;
  return 1;
}

/* check_header reads or writes the header; LT_EINVAL for another program's journal. */
static int check_header(FILE *f, const char *program, const char *path, char *err, size_t errlen) {
  size_t plen = strlen(program);
  fseek(f, 0, SEEK_END);
  if (ftell(f) == 0) {
    unsigned char lenb[4];
    put32(lenb, (uint32_t)plen);
    if (fputs(MAGIC_LINE, f) < 0 || fwrite(lenb, 1, 4, f) != 4 ||
        fwrite(program, 1, plen, f) != plen || fflush(f) != 0 || fsync(fileno(f)) != 0) {
      snprintf(err, errlen, "journal %s: cannot write: %s", path, strerror(errno));
      return LT_EIO;
    }
    return LT_OK;
  }
  rewind(f);
  char line[sizeof MAGIC_LINE];
  unsigned char lenb[4];
  if (fread(line, 1, sizeof MAGIC_LINE - 1, f) != sizeof MAGIC_LINE - 1 ||
      memcmp(line, MAGIC_LINE, sizeof MAGIC_LINE - 1) != 0 || fread(lenb, 1, 4, f) != 4) {
    snprintf(err, errlen, "journal %s: not a lithium journal", path);
    return LT_EINVAL;
  }
  uint32_t n = get32(lenb);
  char *theirs = n <= (1u << 20) ? malloc((size_t)n + 1) : NULL;
  int same = theirs != NULL && fread(theirs, 1, n, f) == n && n == plen &&
             memcmp(theirs, program, plen) == 0;
  if (!same) {
    if (theirs != NULL) theirs[n < 200 ? n : 200] = '\0';
    snprintf(err, errlen, "journal %s belongs to another program (%s), not %s", path,
             theirs != NULL ? theirs : "unreadable", program);
    free(theirs);
    return LT_EINVAL;
  }
  free(theirs);
  return LT_OK;
}

int lt__journal_open(lt_journal_t **out, const char *path, const char *program, char *err,
                     size_t errlen) {
  *out = NULL;
  FILE *f = fopen(path, "a+b");
  if (f == NULL) {
    snprintf(err, errlen, "journal %s: %s", path, strerror(errno));
    return LT_EIO;
  }
  int rc = check_header(f, program, path, err, errlen);
  lt_journal_t *j = rc == LT_OK ? calloc(1, sizeof *j) : NULL;
  if (rc == LT_OK && j == NULL) rc = LT_ENOMEM;
  if (rc != LT_OK) {
    fclose(f);
    return rc;
  }
  j->f = f;
  long good = ftell(f);
  for (;;) {
    entry_t *e = NULL;
    lt_digest_t d;
    int r = read_record(f, &e, &d);
    if (r <= 0) {
      if (r < 0 && ftruncate(fileno(f), good) != 0) rc = LT_EIO; /* cut a torn record */
      break;
    }
    if (index_add(j, d, e) != LT_OK) {
      entry_free(e);
      rc = LT_ENOMEM;
      break;
    }
    good = ftell(f);
  }
  fseek(f, 0, SEEK_END); /* appends go after the last good record ("a" mode anyway) */
  if (rc != LT_OK) {
    snprintf(err, errlen, "journal %s: %s", path, lt_strerror(rc));
    lt__journal_close(j);
    return rc;
  }
  *out = j;
  return LT_OK;
}

/* ---- use ------------------------------------------------------------------------------ */

lt_buf_t *lt__journal_take(lt_journal_t *j, lt_digest_t d) {
  bucket_t *b;
  HASH_FIND(hh, j->buckets, &d, sizeof d, b);
  if (b == NULL || b->head == NULL) return NULL;
  entry_t *e;
  LT_QUEUE_POP(b->head, b->tail, e, next);
  if (b->head == NULL) {
    HASH_DEL(j->buckets, b);
    free(b);
  }
  lt_buf_t *out = e->status == LT_OK ? lt__buf_ok(e->value) : lt__buf_fail(e->status, e->errmsg);
  entry_free(e);
  if (out != NULL) j->taken++;
  return out;
}

int lt__journal_append(lt_journal_t *j, lt_digest_t d, const lt_buf_t *b) {
  const char *msg = lt_buf_error(b) == LT_OK ? "" : lt_buf_errmsg(b);
  size_t errlen = strlen(msg);
  if (errlen > MAX_ERRMSG) errlen = MAX_ERRMSG;
  const void *data = lt_buf_data(b);
  size_t datalen = lt_buf_len(b);
  unsigned char head[REC_HEAD], crcb[4];
  put32(head, REC_MAGIC);
  put32(head + 4, (uint32_t)lt_buf_error(b));
  put32(head + 8, (uint32_t)errlen);
  put64(head + 12, datalen);
  memcpy(head + 20, d.h, 16);
  uint32_t crc = crc32_update(0, head, sizeof head);
  crc = crc32_update(crc, msg, errlen);
  if (datalen > 0) crc = crc32_update(crc, data, datalen);
  put32(crcb, crc);
  if (fwrite(head, 1, sizeof head, j->f) != sizeof head || fwrite(msg, 1, errlen, j->f) != errlen ||
      (datalen > 0 && fwrite(data, 1, datalen, j->f) != datalen) || fwrite(crcb, 1, 4, j->f) != 4)
    return LT_EIO;
  j->dirty = 1;
  return LT_OK;
}

int lt__journal_sync(lt_journal_t *j) {
  if (j == NULL || !j->dirty) return LT_OK;
  j->dirty = 0;
  return fflush(j->f) == 0 && fsync(fileno(j->f)) == 0 ? LT_OK : LT_EIO;
}

uint64_t lt__journal_taken(const lt_journal_t *j) {
  return j != NULL ? j->taken : 0;
}

void lt__journal_close(lt_journal_t *j) {
  if (j == NULL) return;
  lt__journal_sync(j);
  fclose(j->f);
  bucket_t *b, *tmp;
  HASH_ITER(hh, j->buckets, b, tmp) {
    HASH_DEL(j->buckets, b);
    for (entry_t *e = b->head, *next; e != NULL; e = next) {
      next = e->next;
      entry_free(e);
    }
    free(b);
  }
  free(j);
}
