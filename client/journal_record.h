/* journal_record.h: the file format of a results journal, shared by the journal of a run
 * (journal.c) and its compaction (journal_compact.c). A journal is a header then records:
 *   header: "lithium journal 2\n" | u32 text length | text | u32 CRC-32 of the text, where
 *           the text is "program EXPR\n" then one "module NAME SHA256\n" a module the
 *           program uses ("-" for a module without a local copy), sorted by name;
 *   record: magic "LTJR" | u32 status (two's complement) | u32 error length |
 *           u64 data length | 16-byte input digest | error text | data |
 *           u32 CRC-32 of everything before it,
 * integers little-endian. Format 1 had the program alone in its header. Reads are preads at
 * an offset, so that any thread may read back a record while another appends. */
#ifndef LT_JOURNAL_RECORD_H
#define LT_JOURNAL_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "value.h"

#define LT_JREC_HEAD    36    /* bytes of a record before its error text */
#define LT_JREC_MAX_ERR 65536 /* longest error text kept */

/* A 128-bit digest of a task's input. */
typedef struct lt_digest {
  uint64_t h[2];
} lt_digest_t;

/* lt__digest computes the digest of `len` bytes at `data`. */
lt_digest_t lt__digest(const void *data, size_t len);

/* The head of one record, as read from the file. */
typedef struct lt_jrec {
  uint64_t off;  /* where it starts */
  uint64_t size; /* its bytes, head to CRC */
  int status;    /* LT_OK, or the error of the result */
  uint32_t errlen;
  uint64_t datalen;
  lt_digest_t d;
} lt_jrec_t;

/* lt__jrec_head reads the head of the record at `off` of the file `fd` of `file_size`
 * bytes: 1 with *r filled; 0 at the end of the file; -1 for a record that is torn (it runs
 * past the end) or is not one (bad magic, impossible lengths). */
int lt__jrec_head(int fd, uint64_t off, uint64_t file_size, lt_jrec_t *r);

/* lt__jrec_peek reads the head at `off` without judging its lengths: 1 when it has the
 * record magic (*r filled, r->size unset), 0 when it has not or is cut short. */
int lt__jrec_peek(int fd, uint64_t off, uint64_t file_size, lt_jrec_t *r);

/* What lt__jrec_step found at its offset. */
enum {
  LT_JSTEP_END = 0,     /* the end of the file */
  LT_JSTEP_RECORD = 1,  /* a record whose head holds (its checksum is checked when read) */
  LT_JSTEP_DAMAGED = 2, /* damage to one record: see lt__jrec_step */
  LT_JSTEP_TORN = -1,   /* a torn tail: nothing intact from here to the end */
};

/* lt__jrec_step reads what starts at `off` of the file `fd` of `file_size` bytes and sets
 * *next to where the next thing starts. A head that runs past the end of the file, or that
 * is not a record's, is a torn tail only when no intact record (its head and its checksum
 * hold) follows it: with one after it, it is damage to that one record (its length field,
 * most likely), and so is a head whose lengths no record can have (over LT_JREC_MAX_ERR of
 * error text or 2^40 bytes of data: no write makes them, torn or not), wherever it is.
 * LT_JSTEP_DAMAGED then has r->off = off, r->size = *next - off (the damaged bytes, up to
 * the next intact record or the end) and r->d the digest the head still names, when it
 * still has the record magic (*has_digest; false for bytes that are no head at all).
 * Finding the next intact record reads the file on from `off` (only on damage). */
int lt__jrec_step(int fd, uint64_t off, uint64_t file_size, lt_jrec_t *r, uint64_t *next,
                  int *has_digest);

/* lt__jrec_body reads the error text (into *msg, malloc'd, NUL-terminated) and the data
 * (into *data, a new value) of record `r` and checks its CRC. LT_OK; LT_EIO for a record
 * that cannot be read or whose CRC does not hold; LT_ENOMEM. Nothing is returned on failure. */
int lt__jrec_body(int fd, const lt_jrec_t *r, char **msg, lt_value_t **data);

/* lt__jrec_write appends one record to `f` (buffered). LT_EIO. */
int lt__jrec_write(FILE *f, lt_digest_t d, int status, const char *msg, size_t errlen,
                   const void *data, size_t datalen);

/* lt__jheader_text returns the header text of `program` with the `n` modules `names`
 * (each with its hex SHA-256 in shas[i], "" when unknown), sorted by name; malloc'd, NULL
 * on out of memory. */
char *lt__jheader_text(const char *program, const char *const *names, const char *const *shas,
                       size_t n);

/* lt__jheader_write writes the header of `text` to `f` and makes it durable. LT_EIO. */
int lt__jheader_write(FILE *f, const char *text);

/* lt__jheader_read reads the header of the journal `fd` (at `path`, for messages): its text
 * into *text (malloc'd) and the offset of the first record into *end. LT_EINVAL with a
 * message in err for a file that is not a journal of this format (a journal of format 1
 * is named as such); LT_ENOMEM. */
int lt__jheader_read(int fd, const char *path, char **text, uint64_t *end, char *err,
                     size_t errlen);

/* lt__jheader_diff writes into err what differs between the header texts `theirs` (the
 * file's) and `ours` (this run's): the program, or the first module whose hash changed; it
 * returns 1 when the programs differ, 0 when only modules do. */
int lt__jheader_diff(const char *path, const char *theirs, const char *ours, char *err,
                     size_t errlen);

/* A journal is replaced whole (a new journal, a compacted copy): the new file is written
 * beside it, made durable and renamed over it, so that a crash leaves the old file or the new
 * one. lt__jfile_beside creates that file, `path`.`tag`-XXXXXX (its name into tmp, of
 * `tmplen` bytes), for reading and writing, close-on-exec (spawned servers must not hold a
 * journal's lock); its descriptor, or -1 with errno set. */
int lt__jfile_beside(const char *path, const char *tag, char *tmp, size_t tmplen);

/* lt__jfile_commit makes `f` (the file at tmp) durable with `mode` and renames it over
 * `path`, durably. f stays open; on failure (LT_EIO, errno set) tmp is removed. */
int lt__jfile_commit(FILE *f, const char *tmp, const char *path, unsigned mode);

#endif
