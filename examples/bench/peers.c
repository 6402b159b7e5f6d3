/* examples/bench/peers.c: our side of the `peers` benchmark (shared/BENCHMARKS.md), which
 * scripts/bench/peers runs against the same workloads on Dask distributed
 * (scripts/bench/peers.py). One run of one workload on 2 spawned local servers, mode=optimized
 * and normal_form=off (one instruction per kernel call, as Dask runs one task per call):
 *  - empty:  farm(seq(bench:noop "echo")), tasks of 16 bytes answered unchanged;
 *  - chain:  pipeline of 4 seq(bench:touch) over tasks of 1 MiB (each stage a new 1 MiB value);
 *  - images: pipe(farm(seq(filters:blur, "5")), farm(seq(filters:oil, "5"))) over synthetic
 *            640x480 RGB images (those of `imgpipe --generate`), drawn before the clock starts
 *            and kept in memory, results too (no files, no PNG).
 * The time runs from the first submit to the last result (the servers' start is not timed);
 * every result is checked. The images can be saved (inputs and results, for the Dask side to
 * read and compare with) or compared with saved results, byte for byte. Prints one JSON line
 * {"side": "lithium", "workload", "tasks", "seconds"[, "identical"]}.
 *
 *   build/examples/bench/bench_peers images --tasks 30 --save DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchlib.h"
#include "imgtoken.h"
#include "synth.h"

#define PROG       "bench_peers"
#define SERVERS    2
#define IMG_W      640
#define IMG_H      480
#define IMG_RADIUS "5"

/* The evaluator's options of every workload. */
static const char *const run_options[] = {"mode", "optimized", "normal_form", "off", NULL};

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_peers empty|chain|images [--tasks N] [--save DIR | --compare DIR]\n"
          "  empty   farm(seq(bench:noop \"echo\")), 16-byte tasks (default 20000)\n"
          "  chain   pipeline of 4 seq(bench:touch), 1 MiB tasks (default 200)\n"
          "  images  pipe(farm(seq(filters:blur, \"5\")), farm(seq(filters:oil, \"5\"))), "
          "synthetic %dx%d images (default 30)\n"
          "  --save DIR     (images) write the input tokens to DIR/inputs.bin and the results "
          "to DIR/outputs.bin, one after the other\n"
          "  --compare DIR  (images) compare every result with DIR/outputs.bin, byte for byte\n"
          "One run on %d spawned servers; prints one JSON line with the seconds from the first "
          "submit to the last result.\n",
          IMG_W, IMG_H, SERVERS);
}

/* The image stream: tokens made before the run, results kept in order. */
typedef struct images {
  size_t size;          /* bytes of one token */
  unsigned char *in;    /* the input tokens, one after the other */
  unsigned char *out;   /* the result tokens */
  unsigned char *saved; /* the results to compare with, or NULL */
} images_t;

static void image_make(long i, unsigned char *buf, void *arg) {
  const images_t *im = arg;
  memcpy(buf, im->in + (size_t)i * im->size, im->size);
}

static int image_keep(long i, const unsigned char *data, size_t len, void *arg) {
  images_t *im = arg;
  if (len != im->size || memcmp(data, im->in + (size_t)i * im->size, IMG_HEADER) != 0) return -1;
  memcpy(im->out + (size_t)i * im->size, data, len);
  return 0;
}

/* file_io writes (`save`) or reads `len` bytes at p to or from DIR/NAME. Returns 0, or -1
 * after printing why. */
static int file_io(const char *dir, const char *name, unsigned char *p, size_t len, int save) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, save ? "wb" : "rb");
  size_t n = 0;
  int extra = 0;
  if (f != NULL) {
    n = save ? fwrite(p, 1, len, f) : fread(p, 1, len, f);
    extra = !save && fgetc(f) != EOF;
    if (fclose(f) != 0) n = 0;
  }
  if (f == NULL || n != len || extra) {
    fprintf(stderr, "%s: cannot %s %s (%zu bytes)\n", PROG, save ? "write" : "read", path, len);
    return -1;
  }
  return 0;
}

/* images_run runs the image pipeline over `tasks` synthetic images; with `save` it writes
 * them and their results into DIR, with `compare` it counts the results equal to those
 * saved in DIR into *identical. */
static int images_run(long tasks, const char *save, const char *compare, double *secs,
                      long *identical) {
  images_t im = {.size = img_token_size(IMG_W, IMG_H)};
  size_t all = (size_t)tasks * im.size;
  im.in = malloc(all);
  im.out = malloc(all);
  if (compare != NULL) im.saved = malloc(all);
  int rc = -1;
  if (im.in == NULL || im.out == NULL || (compare != NULL && im.saved == NULL)) {
    fprintf(stderr, "%s: out of memory for %ld images\n", PROG, tasks);
    goto out;
  }
  if (compare != NULL && file_io(compare, "outputs.bin", im.saved, all, 0) != 0) goto out;
  for (long i = 0; i < tasks; i++) {
    unsigned char *t = im.in + (size_t)i * im.size;
    img_token_put_header(t, IMG_W, IMG_H);
    img_synth_fill(t + IMG_HEADER, IMG_W, IMG_H, (uint64_t)i);
  }
  lt_eval_t *ev =
      bench_eval_open(PROG,
                      lt_pipeline(lt_farm(lt_seq_with("filters:blur", IMG_RADIUS, 1)),
                                  lt_farm(lt_seq_with("filters:oil", IMG_RADIUS, 1)), NULL),
                      run_options, SERVERS);
  if (ev == NULL) goto out;
  rc = bench_eval_stream(PROG, ev, tasks, im.size, image_make, image_keep, &im, secs);
  lt_eval_free(ev);
  if (rc != 0) goto out;
  if (save != NULL && (file_io(save, "inputs.bin", im.in, all, 1) != 0 ||
                       file_io(save, "outputs.bin", im.out, all, 1) != 0))
    rc = -1;
  for (long i = 0; compare != NULL && i < tasks; i++) {
    size_t at = (size_t)i * im.size;
    if (memcmp(im.out + at, im.saved + at, im.size) == 0)
      ++*identical;
    else
      fprintf(stderr, "%s: image %ld differs from %s/outputs.bin\n", PROG, i, compare);
  }
out:
  free(im.in);
  free(im.out);
  free(im.saved);
  return rc;
}

int main(int argc, char **argv) {
  ex_opts_t o;
  ex_opts_init(&o, PROG);
  long long tasks = 0;
  const char *workload = NULL, *save = NULL, *compare = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(a, "--tasks") == 0 && i + 1 < argc) {
      if (ex_parse_num(&o, a, argv[++i], 1, 100000000, &tasks) != 0) return 2;
    } else if (strcmp(a, "--save") == 0 && i + 1 < argc) {
      save = argv[++i];
    } else if (strcmp(a, "--compare") == 0 && i + 1 < argc) {
      compare = argv[++i];
    } else if (workload == NULL &&
               (strcmp(a, "empty") == 0 || strcmp(a, "chain") == 0 || strcmp(a, "images") == 0)) {
      workload = a;
    } else {
      fprintf(stderr, "%s: bad argument '%s'\n", PROG, a);
      usage(stderr);
      return 2;
    }
  }
  int images = workload != NULL && strcmp(workload, "images") == 0;
  if (workload == NULL || (!images && (save != NULL || compare != NULL)) ||
      (save != NULL && compare != NULL)) {
    fprintf(stderr, "%s: %s\n", PROG,
            workload == NULL ? "which workload?" : "--save or --compare, with images only");
    usage(stderr);
    return 2;
  }
  double secs = 0;
  long identical = 0;
  int rc;
  if (strcmp(workload, "empty") == 0) {
    tasks = tasks > 0 ? tasks : 20000;
    lt_eval_t *ev =
        bench_eval_open(PROG, lt_farm(lt_seq_with("bench:noop", "echo", 4)), run_options, SERVERS);
    rc = ev != NULL ? bench_eval_stream(PROG, ev, tasks, BENCH_NOOP_SIZE, bench_noop_make,
                                        bench_noop_check, NULL, &secs)
                    : -1;
    lt_eval_free(ev);
  } else if (strcmp(workload, "chain") == 0) {
    tasks = tasks > 0 ? tasks : 200;
    unsigned char *want = malloc(BENCH_CHAIN_SIZE);
    if (want == NULL) fprintf(stderr, "%s: out of memory\n", PROG);
    lt_eval_t *ev =
        want != NULL ? bench_eval_open(PROG, bench_chain_program(), run_options, SERVERS) : NULL;
    rc = ev != NULL ? bench_eval_stream(PROG, ev, tasks, BENCH_CHAIN_SIZE, bench_chain_make,
                                        bench_chain_check, want, &secs)
                    : -1;
    lt_eval_free(ev);
    free(want);
  } else {
    tasks = tasks > 0 ? tasks : 30;
    rc = images_run(tasks, save, compare, &secs, &identical);
  }
  if (rc != 0) return 1;
  fprintf(stderr, "%s: %s: %lld tasks in %.3f s on %d servers\n", PROG, workload, tasks, secs,
          SERVERS);
  printf("{\"side\": \"lithium\", \"workload\": \"%s\", \"tasks\": %lld, \"seconds\": %.6f",
         workload, tasks, secs);
  if (compare != NULL) printf(", \"identical\": %ld", identical);
  printf("}\n");
  return compare != NULL && identical != tasks ? 1 : 0;
}
