/* inputs.h: the images of an imgpipe run: files (every file of an --in directory, or named on
 * the command line) or synthetic images, each with the PNG path its result goes to, and the
 * loading of one of them: a file's bytes as they are (the servers decode them, module
 * imgcodec), a synthetic image as an RGB image token (imgtoken.h). The list is built by the
 * main thread before the run; afterwards img_inputs_load may be called from any thread. */
#ifndef LT_EXAMPLE_INPUTS_H
#define LT_EXAMPLE_INPUTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct img_input {
  char *name;     /* for messages: the file's path, or "synthetic-0001" (owned) */
  char *path;     /* the file to read, or NULL for a synthetic image (owned) */
  char *out_path; /* where the PNG goes, set by img_inputs_plan (owned) */
  uint64_t synth; /* which synthetic image, when path is NULL */
} img_input_t;

typedef struct img_inputs {
  img_input_t *v;
  size_t n, cap;
  uint32_t synth_w, synth_h; /* size of the synthetic images */
} img_inputs_t;

/* img_inputs_init makes an empty list whose synthetic images are width x height. */
void img_inputs_init(img_inputs_t *l, uint32_t synth_w, uint32_t synth_h);

/* img_inputs_free frees the list's entries (not `l` itself). */
void img_inputs_free(img_inputs_t *l);

/* img_inputs_add_dir adds every entry of directory `dir` that is not a directory and whose
 * name does not start with '.', sorted by name (dangling links too: they fail when loaded).
 * Returns 0, or -1 with the reason (naming dir) in err. */
int img_inputs_add_dir(img_inputs_t *l, const char *dir, char *err, size_t errlen);

/* img_inputs_add_file adds one file (which need not exist yet). Returns 0, or -1 when out of
 * memory. */
int img_inputs_add_file(img_inputs_t *l, const char *path);

/* img_inputs_add_synth adds `count` synthetic images named synthetic-0001, ... Returns 0, or
 * -1 when out of memory. */
int img_inputs_add_synth(img_inputs_t *l, size_t count);

/* img_inputs_plan creates directory `out_dir` (and its parents) and gives every input its
 * output path: out_dir/<base name without extension>.png. Refuses (-1, reason in err) two
 * inputs with one output path and an output that would overwrite its own input. */
int img_inputs_plan(img_inputs_t *l, const char *out_dir, char *err, size_t errlen);

/* img_inputs_load reads input i into *data (caller frees) of *len bytes: the whole file, which
 * must be a non-empty regular file of at most 512 MiB, or the synthetic image as a token.
 * Returns 0, or -1 with the reason in err (without the name: the caller adds it). */
int img_inputs_load(const img_inputs_t *l, size_t i, unsigned char **data, size_t *len, char *err,
                    size_t errlen);

#endif
