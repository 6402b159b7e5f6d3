/* journal.h: the results journal of an evaluation (option journal=FILE). Each finished
 * task appends its input's digest and its result; a later run of the same program, with the
 * same builds of its modules, takes the results of inputs already done from it instead of
 * computing them again, so a client killed mid-run redoes at most what was in flight.
 * Opening reads the records' heads only, into an index of 16 bytes a record
 * (journal_index.h); a result is read back from the file when it is wanted. The header
 * names the program and the SHA-256 of each module (journal_record.h): a journal made by
 * another program or other builds is refused, or replaced by a new one (journal_mismatch).
 * A torn tail is cut off when opened. Caller's lock: the evaluator calls it under ev->mu,
 * except lt__journal_read, which any thread may call while the journal is open. */
#ifndef LT_JOURNAL_H
#define LT_JOURNAL_H

#include <stddef.h>
#include <stdint.h>
#include <lithium.h>

#include "journal_record.h"

typedef struct lt_journal lt_journal_t;

/* What a run does with a journal whose header is not its own (option journal_mismatch, in
 * the order of its values). */
enum {
  LT_JOURNAL_MISMATCH_RECOMPUTE = 0, /* replace it with an empty one (logged) */
  LT_JOURNAL_MISMATCH_REFUSE = 1,    /* refuse it */
  LT_JOURNAL_MISMATCH_REBUILT = 2,   /* replace it when only module builds differ, refuse a
                                        journal of another program (the default: a path
                                        reused by another program is another run's work) */
};

/* lt__journal_open opens (or creates) the journal at `path` for a run whose header text is
 * `header` (lt__jheader_text). A journal with another header is refused with LT_EINVAL or
 * replaced by an empty one (logged), as `policy` (an LT_JOURNAL_MISMATCH_*) says. LT_EINVAL with a
 * message in err also for a file that is not a journal of this format; LT_EAGAIN when another run
 * has it open; LT_EIO when it cannot be read or written; LT_ENOMEM. */
int lt__journal_open(lt_journal_t **out, const char *path, const char *header, int policy,
                     char *err, size_t errlen);

/* lt__journal_find looks up a result journaled for an input with digest `d`: 1 with its
 * record's offset in *off, or 0. Every input with that digest gets the same record. */
int lt__journal_find(lt_journal_t *j, lt_digest_t d, uint64_t *off);

/* lt__journal_read reads back the result at `off` (from lt__journal_find) into *out (the
 * caller owns it). LT_EIO when the record cannot be read or its checksum fails (a message
 * in err), LT_ENOMEM. Any thread. */
int lt__journal_read(lt_journal_t *j, uint64_t off, lt_buf_t **out, char *err, size_t errlen);

/* lt__journal_append writes the result `b` of the input with digest `d` (buffered). */
int lt__journal_append(lt_journal_t *j, lt_digest_t d, const lt_buf_t *b);

/* lt__journal_sync makes what was appended durable (fflush + fsync), once per batch. */
int lt__journal_sync(lt_journal_t *j);

/* lt__journal_close syncs and frees; accepts NULL. */
void lt__journal_close(lt_journal_t *j);

#endif
