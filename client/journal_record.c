/* journal_record.c: the journal's file format (journal_record.h): digests, checksums, the
 * header and the records, read with pread and written with stdio. Knows nothing of the
 * index, of the evaluator or of what a run does with a record; replaces a journal file whole
 * (a new one, a compacted copy) durably. */
#include "journal_record.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lithium/error.h>

#define MAGIC_LINE    "lithium journal 2\n"
#define MAGIC_LINE_V1 "lithium journal 1\n"
#define MAGIC_LEN     (sizeof MAGIC_LINE - 1)
#define REC_MAGIC     0x524a544cu /* "LTJR" little-endian */
#define MAX_HEADER    (1u << 24)
#define MAX_DATA      ((uint64_t)1 << 40)

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

/* read_at reads exactly `len` bytes at `off`: LT_OK or LT_EIO (an error, or the end). */
static int read_at(int fd, void *buf, size_t len, uint64_t off) {
  char *p = buf;
  while (len > 0) {
    ssize_t n = pread(fd, p, len, (off_t)off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return LT_EIO;
    p += n;
    len -= (size_t)n;
    off += (uint64_t)n;
  }
  return LT_OK;
}

/* ---- records -------------------------------------------------------------------------- */

static void encode_head(unsigned char *head, lt_digest_t d, int status, size_t errlen,
                        size_t datalen) {
  put32(head, REC_MAGIC);
  put32(head + 4, (uint32_t)status);
  put32(head + 8, (uint32_t)errlen);
  put64(head + 12, datalen);
  memcpy(head + 20, d.h, 16);
}

int lt__jrec_head(int fd, uint64_t off, uint64_t file_size, lt_jrec_t *r) {
  if (off == file_size) return 0;
  unsigned char head[LT_JREC_HEAD];
  if (file_size - off < sizeof head || read_at(fd, head, sizeof head, off) != LT_OK) return -1;
  r->off = off;
  r->status = (int)(int32_t)get32(head + 4);
  r->errlen = get32(head + 8);
  r->datalen = get64(head + 12);
  memcpy(r->d.h, head + 20, 16);
  if (get32(head) != REC_MAGIC || r->errlen > LT_JREC_MAX_ERR || r->datalen > MAX_DATA) return -1;
  r->size = LT_JREC_HEAD + (uint64_t)r->errlen + r->datalen + 4;
  return r->size <= file_size - off ? 1 : -1;
}

int lt__jrec_peek(int fd, uint64_t off, uint64_t file_size, lt_jrec_t *r) {
  unsigned char head[LT_JREC_HEAD];
  if (off > file_size || file_size - off < sizeof head ||
      read_at(fd, head, sizeof head, off) != LT_OK || get32(head) != REC_MAGIC)
    return 0;
  r->off = off;
  r->status = (int)(int32_t)get32(head + 4);
  r->errlen = get32(head + 8);
  r->datalen = get64(head + 12);
  memcpy(r->d.h, head + 20, 16);
  return 1;
}

/* intact_at tells whether a whole record whose checksum holds starts at `off`. */
static int intact_at(int fd, uint64_t off, uint64_t file_size) {
  lt_jrec_t r;
  if (lt__jrec_head(fd, off, file_size, &r) != 1) return 0;
  char *msg = NULL;
  lt_value_t *data = NULL;
  int ok = lt__jrec_body(fd, &r, &msg, &data) == LT_OK;
  free(msg);
  lt__value_unref(data);
  return ok;
}

/* next_intact returns the offset of the first intact record that starts after `off`, or
 * file_size when there is none: it looks for the record magic block by block and checks
 * each candidate whole (a result's data may hold the magic, not a record whose checksum
 * holds but by a 2^-32 chance). */
static uint64_t next_intact(int fd, uint64_t off, uint64_t file_size) {
  static const unsigned char magic[4] = {'L', 'T', 'J', 'R'};
  unsigned char buf[65536];
  for (uint64_t at = off + 1; at + LT_JREC_HEAD <= file_size;) {
    uint64_t want = file_size - at < sizeof buf ? file_size - at : sizeof buf;
    if (read_at(fd, buf, (size_t)want, at) != LT_OK) return file_size;
    size_t i = 0;
    for (; i + sizeof magic <= want; i++)
      if (memcmp(buf + i, magic, sizeof magic) == 0 && intact_at(fd, at + i, file_size))
        return at + i;
    at += i; /* the last 3 bytes are looked at again with what follows */
  }
  return file_size;
}

int lt__jrec_step(int fd, uint64_t off, uint64_t file_size, lt_jrec_t *r, uint64_t *next,
                  int *has_digest) {
  *has_digest = 0;
  int got = lt__jrec_head(fd, off, file_size, r);
  if (got == 0) {
    *next = off;
    return LT_JSTEP_END;
  }
  if (got == 1) {
    *next = off + r->size;
    return LT_JSTEP_RECORD;
  }
  lt_jrec_t h;
  int magic = lt__jrec_peek(fd, off, file_size, &h);
  int impossible = magic && (h.errlen > LT_JREC_MAX_ERR || h.datalen > MAX_DATA);
  uint64_t after = next_intact(fd, off, file_size);
  if (after == file_size && !impossible) {
    *next = off;
    return LT_JSTEP_TORN;
  }
  if (magic) *r = h;
  r->off = off;
  r->size = after - off;
  *has_digest = magic;
  *next = after;
  return LT_JSTEP_DAMAGED;
}

int lt__jrec_body(int fd, const lt_jrec_t *r, char **msg, lt_value_t **data) {
  *msg = NULL;
  *data = NULL;
  unsigned char head[LT_JREC_HEAD], crcb[4];
  char *m = malloc((size_t)r->errlen + 1);
  lt_value_t *v = lt__value_new((size_t)r->datalen);
  if (m == NULL || v == NULL) {
    free(m);
    lt__value_unref(v);
    return LT_ENOMEM;
  }
  uint64_t at = r->off;
  int rc = read_at(fd, head, sizeof head, at);
  if (rc == LT_OK) rc = read_at(fd, m, r->errlen, at += sizeof head);
  if (rc == LT_OK) rc = read_at(fd, v->data, (size_t)r->datalen, at += r->errlen);
  if (rc == LT_OK) rc = read_at(fd, crcb, 4, at + r->datalen);
  if (rc == LT_OK) {
    uint32_t crc = crc32_update(0, head, sizeof head);
    crc = crc32_update(crc, m, r->errlen);
    crc = crc32_update(crc, v->data, (size_t)r->datalen);
    if (get32(crcb) != crc) rc = LT_EIO;
  }
  if (rc != LT_OK) {
    free(m);
    lt__value_unref(v);
    return rc;
  }
  m[r->errlen] = '\0';
  *msg = m;
  *data = v;
  return LT_OK;
}

int lt__jrec_write(FILE *f, lt_digest_t d, int status, const char *msg, size_t errlen,
                   const void *data, size_t datalen) {
  if (errlen > LT_JREC_MAX_ERR) errlen = LT_JREC_MAX_ERR;
  unsigned char head[LT_JREC_HEAD], crcb[4];
  encode_head(head, d, status, errlen, datalen);
  uint32_t crc = crc32_update(0, head, sizeof head);
  crc = crc32_update(crc, msg, errlen);
  if (datalen > 0) crc = crc32_update(crc, data, datalen);
  put32(crcb, crc);
  if (fwrite(head, 1, sizeof head, f) != sizeof head || fwrite(msg, 1, errlen, f) != errlen ||
      (datalen > 0 && fwrite(data, 1, datalen, f) != datalen) || fwrite(crcb, 1, 4, f) != 4)
    return LT_EIO;
  return LT_OK;
}

/* ---- the header ----------------------------------------------------------------------- */

typedef struct module_line {
  const char *name, *sha;
} module_line_t;

static int by_name(const void *a, const void *b) {
  return strcmp(((const module_line_t *)a)->name, ((const module_line_t *)b)->name);
}

char *lt__jheader_text(const char *program, const char *const *names, const char *const *shas,
                       size_t n) {
  module_line_t *m = calloc(n ? n : 1, sizeof *m);
  size_t len = strlen("program \n") + strlen(program) + 1;
  for (size_t i = 0; m != NULL && i < n; i++) {
    m[i] = (module_line_t){names[i], shas[i][0] != '\0' ? shas[i] : "-"};
    len += strlen("module  \n") + strlen(m[i].name) + strlen(m[i].sha);
  }
  char *text = m != NULL ? malloc(len) : NULL;
  if (text == NULL) {
    free(m);
    return NULL;
  }
  qsort(m, n, sizeof *m, by_name);
  size_t at = (size_t)snprintf(text, len, "program %s\n", program);
  for (size_t i = 0; i < n; i++)
    at += (size_t)snprintf(text + at, len - at, "module %s %s\n", m[i].name, m[i].sha);
  free(m);
  return text;
}

int lt__jheader_write(FILE *f, const char *text) {
  size_t len = strlen(text);
  unsigned char lenb[4], crcb[4];
  put32(lenb, (uint32_t)len);
  put32(crcb, crc32_update(0, text, len));
  if (fwrite(MAGIC_LINE, 1, MAGIC_LEN, f) != MAGIC_LEN || fwrite(lenb, 1, 4, f) != 4 ||
      fwrite(text, 1, len, f) != len || fwrite(crcb, 1, 4, f) != 4 || fflush(f) != 0 ||
      fsync(fileno(f)) != 0)
    return LT_EIO;
  return LT_OK;
}

int lt__jheader_read(int fd, const char *path, char **text, uint64_t *end, char *err,
                     size_t errlen) {
  *text = NULL;
  unsigned char line[MAGIC_LEN], lenb[4], crcb[4];
  if (read_at(fd, line, MAGIC_LEN, 0) != LT_OK ||
      (memcmp(line, MAGIC_LINE, MAGIC_LEN) != 0 && memcmp(line, MAGIC_LINE_V1, MAGIC_LEN) != 0)) {
    snprintf(err, errlen, "journal %s: not a lithium journal", path);
    return LT_EINVAL;
  }
  if (memcmp(line, MAGIC_LINE_V1, MAGIC_LEN) == 0) {
    snprintf(err, errlen,
             "journal %s has format 1 (lithium before issue 25): it does not say which "
             "builds of the modules made its results; move it away or delete it to start a "
             "new journal",
             path);
    return LT_EINVAL;
  }
  uint32_t len = 0;
  if (read_at(fd, lenb, 4, MAGIC_LEN) == LT_OK) len = get32(lenb);
  char *t = len > 0 && len <= MAX_HEADER ? malloc((size_t)len + 1) : NULL;
  if (t == NULL && len > 0 && len <= MAX_HEADER) return LT_ENOMEM;
  if (t == NULL || read_at(fd, t, len, MAGIC_LEN + 4) != LT_OK ||
      read_at(fd, crcb, 4, MAGIC_LEN + 4 + len) != LT_OK ||
      get32(crcb) != crc32_update(0, t, len)) {
    free(t);
    snprintf(err, errlen, "journal %s: its header is damaged", path);
    return LT_EINVAL;
  }
  t[len] = '\0';
  *text = t;
  *end = MAGIC_LEN + 4 + (uint64_t)len + 4;
  return LT_OK;
}

/* line_of copies the line of `text` that starts with `prefix` (without its newline) into
 * buf; "" when there is none. */
static void line_of(const char *text, const char *prefix, char *buf, size_t len) {
  buf[0] = '\0';
  size_t plen = strlen(prefix);
  for (const char *p = text; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p) {
    if (strncmp(p, prefix, plen) != 0) continue;
    const char *nl = strchr(p, '\n');
    size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
    snprintf(buf, len, "%.*s", (int)n, p);
    return;
  }
}

int lt__jheader_diff(const char *path, const char *theirs, const char *ours, char *err,
                     size_t errlen) {
  char a[512], b[512];
  line_of(theirs, "program ", a, sizeof a);
  line_of(ours, "program ", b, sizeof b);
  if (strcmp(a, b) != 0) {
    snprintf(err, errlen, "journal %s belongs to another program (%.200s), not %.200s", path,
             a + (a[0] ? 8 : 0), b + 8);
    return 1;
  }
  /* The first module line of ours that the journal does not have word for word. */
  for (const char *p = strstr(ours, "\nmodule "); p != NULL; p = strstr(p + 1, "\nmodule ")) {
    const char *name = p + 8, *sp = strchr(name, ' ');
    if (sp == NULL) break;
    char prefix[300], mine[512];
    snprintf(prefix, sizeof prefix, "module %.*s ", (int)(sp - name), name);
    line_of(theirs, prefix, a, sizeof a);
    line_of(ours, prefix, mine, sizeof mine);
    if (strcmp(a, mine) == 0) continue;
    size_t plen = strlen(prefix);
    snprintf(err, errlen,
             "journal %s: module '%.*s' is not the build that made its results (sha256 %.16s "
             "in the journal, %.16s now)",
             path, (int)(sp - name), name, a[0] ? a + plen : "none", mine + plen);
    return 0;
  }
  snprintf(err, errlen, "journal %s was made with other modules than this run uses", path);
  return 0;
}

/* ---- replacing a journal file ------------------------------------------------------------- */

int lt__jfile_beside(const char *path, const char *tag, char *tmp, size_t tmplen) {
  if ((size_t)snprintf(tmp, tmplen, "%s.%s-XXXXXX", path, tag) >= tmplen) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return mkostemp(tmp, O_CLOEXEC);
}

/* sync_dir makes a rename in the directory of `path` durable. */
static void sync_dir(const char *path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  int fd = open(dirname(buf), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)fsync(fd);
  close(fd);
}

int lt__jfile_commit(FILE *f, const char *tmp, const char *path, unsigned mode) {
  int fd = fileno(f);
  if (fflush(f) != 0 || fsync(fd) != 0 || fchmod(fd, (mode_t)mode) != 0 || rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    errno = e;
    return LT_EIO;
  }
  sync_dir(path);
  return LT_OK;
}
