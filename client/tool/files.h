/* files.h: the input and output files of `lithium run`: checking the inputs and the output
 * names before anything starts, reading one input (a file or stdin) as one task, writing one
 * result (to --out DIR or to stdout). Problems are told as "NAME: why". Main thread only. */
#ifndef LT_FILES_H
#define LT_FILES_H

#include <stddef.h>

typedef struct lt_input {
  const char *path; /* borrowed from argv; "-" is stdin */
  const char *name; /* for messages: the path, or "stdin" */
  char *out_path;   /* owned: DIR/<base name>; NULL when results go to stdout */
} lt_input_t;

/* lt__files_plan checks `paths` (every one exists, is not a directory and is readable;
 * distinct base names under `out_dir`; no output would overwrite an input), creates
 * `out_dir` (with its parents) when not NULL, and returns the inputs in *out (caller frees
 * with lt__files_free). Returns 0, or 2 after writing every problem found to stderr. */
int lt__files_plan(lt_input_t **out, const char *const *paths, size_t n, const char *out_dir);

/* lt__files_read reads the whole input into *data (malloc'd, caller frees; never NULL on
 * success, also for an empty input). Returns 0, or -1 with "NAME: why" in `err`. */
int lt__files_read(const lt_input_t *in, void **data, size_t *len, char *err, size_t errlen);

/* lt__files_write writes a result to the input's output file, or to stdout when it has none
 * (unflushed). Returns 0, or an errno value with "NAME: why" in `err`; a partly written output file
 * is removed. */
int lt__files_write(const lt_input_t *in, const void *data, size_t len, char *err, size_t errlen);

/* lt__files_write_stdout writes `len` bytes to stdout (unflushed). Returns 0, or an errno
 * value with "stdout: why" in `err`. */
int lt__files_write_stdout(const void *data, size_t len, char *err, size_t errlen);

/* lt__files_free frees the inputs of lt__files_plan; accepts NULL. */
void lt__files_free(lt_input_t *ins, size_t n);

#endif
