/* journal.h: the results journal of an evaluation (option journal=FILE). Each finished
 * task appends its input's digest and its result; a later run of the same program with the
 * same journal takes the results of inputs already done from it instead of computing them
 * again, so a client killed mid-run redoes at most what was in flight. The file is checked
 * when opened: a torn last record is cut off, a journal of another program is refused.
 * Caller's lock: the evaluator calls it under ev->mu. */
#ifndef LT_JOURNAL_H
#define LT_JOURNAL_H

#include <stddef.h>
#include <stdint.h>
#include <lithium.h>

typedef struct lt_journal lt_journal_t;

/* A 128-bit digest of a task's input. */
typedef struct lt_digest {
  uint64_t h[2];
} lt_digest_t;

/* lt__digest computes the digest of `len` bytes at `data`. */
lt_digest_t lt__digest(const void *data, size_t len);

/* lt__journal_open opens (or creates) the journal at `path` for the program whose canonical
 * expression is `program` and loads the results it holds. LT_EINVAL with a message in err
 * for a file that is not a journal or belongs to another program; LT_EIO when it cannot be
 * read or written; LT_ENOMEM. */
int lt__journal_open(lt_journal_t **out, const char *path, const char *program, char *err,
                     size_t errlen);

/* lt__journal_take returns (and forgets) a result journaled for an input with digest `d`,
 * or NULL when there is none; the caller owns it. Inputs seen more than once are matched one
 * journaled result each. */
lt_buf_t *lt__journal_take(lt_journal_t *j, lt_digest_t d);

/* lt__journal_append writes the result `b` of the input with digest `d` (buffered). */
int lt__journal_append(lt_journal_t *j, lt_digest_t d, const lt_buf_t *b);

/* lt__journal_sync makes what was appended durable (fflush + fsync), once per batch. */
int lt__journal_sync(lt_journal_t *j);

/* lt__journal_taken returns how many results the journal has given back. */
uint64_t lt__journal_taken(const lt_journal_t *j);

/* lt__journal_close syncs and frees; accepts NULL. */
void lt__journal_close(lt_journal_t *j);

#endif
