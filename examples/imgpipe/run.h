/* run.h: one pass of imgpipe over its images: a feeder thread loads each image (a file's bytes,
 * or a synthetic image drawn) and submits it while the calling thread reads the results in
 * order and either writes them as PNG files or, for --verify, compares them with the PNG files
 * an earlier pass wrote. The result of a file is the PNG file's bytes (the program decodes and
 * encodes on the servers), written and compared as they are; the result of a synthetic image
 * is a token, encoded here and compared pixel by pixel. At most IMG_RUN_WINDOW images (and
 * 256 MiB of input) are between load and result, so the image list can be long. The thread
 * that owns the evaluator calls img_run. */
#ifndef LT_EXAMPLE_RUN_H
#define LT_EXAMPLE_RUN_H

#include <stddef.h>

#include <lithium.h>

#include "inputs.h"

#define IMG_RUN_WINDOW 32

/* What became of an image; img_run(IMG_RUN_WRITE) fills one per input. */
enum { IMG_PENDING = 0, IMG_WRITTEN, IMG_FAILED };

typedef enum img_run_kind {
  IMG_RUN_WRITE,  /* write every result as a PNG, set status[i] */
  IMG_RUN_VERIFY, /* compare every result with the PNG of an image whose status is written */
} img_run_kind_t;

typedef struct img_run_result {
  size_t images;   /* images the pass took on */
  size_t ok;       /* written, or (verify) identical */
  size_t failed;   /* could not be loaded, computed, written or read back */
  size_t differed; /* verify: the file's pixels differ from the result */
  double seconds;  /* from the first load to the last result */
} img_run_result_t;

/* img_run runs one pass of `kind` over the images of `l` through the started evaluator `ev`
 * (ordered results; it closes the input). `status` has one entry per image. Every failure is
 * printed, naming the image, and the pass goes on. Returns 0 when the pass ran to its end
 * (whatever became of the images), -1 when the evaluator failed (printed). */
int img_run(lt_eval_t *ev, const img_inputs_t *l, img_run_kind_t kind, unsigned char *status,
            img_run_result_t *res);

#endif
