/* examples/mandelbrot/mandelbrot.c: data parallelism with map. Computes a Mandelbrot image
 * with map(mandel:split, mandel:band, mandel:merge): the split cuts the image into bands of
 * rows, every band is computed on some server, and the merge concatenates them in order.
 * Writes the image as a PGM file (--out) and, with --verify, checks it byte for byte against
 * the sequential evaluator. Run `mandelbrot --help` for the options. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium.h>

#include "mandel.h"
#include "runner.h"

#define PROG "mandelbrot"

typedef struct options {
  ex_opts_t common;
  mandel_image_t image;
  const char *out; /* PGM file, or NULL */
  int verify;
} options_t;

static void usage(FILE *f, const char *argv0) {
  fprintf(f,
          "usage: %s [--width W] [--height H] [--iter N] [--bands B] [--out FILE] [--verify]\n"
          "       [--servers N | --hosts EP,... | --local] [--stats]\n"
          "  --width W     image width in pixels, 1..%d (default 800)\n"
          "  --height H    image height in pixels, 1..%d (default 600)\n"
          "  --iter N      iteration limit, 1..%d (default 256)\n"
          "  --bands B     bands of rows computed in parallel, 1..H (default 16)\n"
          "  --out FILE    write the image as a binary PGM file\n"
          "  --verify      check the result against the sequential evaluator\n",
          argv0, MANDEL_MAX_SIDE, MANDEL_MAX_SIDE, MANDEL_MAX_ITER);
  ex_opts_usage(f);
}

static int parse_args(int argc, char **argv, options_t *opt) {
  ex_opts_init(&opt->common, PROG);
  opt->image = (mandel_image_t){.width = 800,
                                .height = 600,
                                .max_iter = 256,
                                .bands = 16,
                                .re_min = -2.25,
                                .re_max = 0.75,
                                .im_min = -1.125,
                                .im_max = 1.125};
  opt->out = NULL;
  opt->verify = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    long long v;
    int rc = ex_opts_parse(&opt->common, argc, argv, &i);
    if (rc < 0) return -1;
    if (rc > 0) continue;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout, argv[0]);
      exit(0);
    } else if (strcmp(a, "--verify") == 0) {
      opt->verify = 1;
    } else if (strcmp(a, "--out") == 0 && i + 1 < argc) {
      opt->out = argv[++i];
    } else if (strcmp(a, "--width") == 0 && i + 1 < argc) {
      if (ex_parse_num(&opt->common, a, argv[++i], 1, MANDEL_MAX_SIDE, &v) != 0) return -1;
      opt->image.width = (uint32_t)v;
    } else if (strcmp(a, "--height") == 0 && i + 1 < argc) {
      if (ex_parse_num(&opt->common, a, argv[++i], 1, MANDEL_MAX_SIDE, &v) != 0) return -1;
      opt->image.height = (uint32_t)v;
    } else if (strcmp(a, "--iter") == 0 && i + 1 < argc) {
      if (ex_parse_num(&opt->common, a, argv[++i], 1, MANDEL_MAX_ITER, &v) != 0) return -1;
      opt->image.max_iter = (uint32_t)v;
    } else if (strcmp(a, "--bands") == 0 && i + 1 < argc) {
      if (ex_parse_num(&opt->common, a, argv[++i], 1, MANDEL_MAX_SIDE, &v) != 0) return -1;
      opt->image.bands = (uint32_t)v;
    } else {
      fprintf(stderr, "%s: bad argument '%s'\n", PROG, a);
      usage(stderr, argv[0]);
      return -1;
    }
  }
  char why[160];
  if (mandel_image_check(&opt->image, why, sizeof why) != 0) {
    fprintf(stderr, "%s: %s\n", PROG, why);
    return -1;
  }
  return 0;
}

static lt_skel_t *make_program(void) {
  return lt_map("mandel:split", lt_seq("mandel:band"), "mandel:merge");
}

/* compute runs the image task on the servers of `co`, or sequentially when `local`, and
 * returns the result (caller frees) after checking its shape; NULL after printing why. */
static lt_buf_t *compute(const ex_opts_t *co, const options_t *opt, int local,
                         const unsigned char *task, double *seconds) {
  lt_eval_t *ev = ex_eval_open(co, make_program(), local);
  if (ev == NULL) return NULL;
  lt_buf_t *r = NULL;
  double t0 = ex_now();
  if (ex_eval_run(co, ev, task, MANDEL_IMAGE_SIZE, &r) != 0) goto fail;
  *seconds = ex_now() - t0;
  ex_eval_report(co, ev, local, *seconds);
  size_t want = MANDEL_OUT_HEADER + (size_t)opt->image.width * opt->image.height;
  const unsigned char *p = lt_buf_data(r);
  if (lt_buf_len(r) != want || ex_get_u32(p) != opt->image.width ||
      ex_get_u32(p + 4) != opt->image.height) {
    printf("%s: WRONG: the result has %zu bytes, expected %zu for %ux%u\n", PROG, lt_buf_len(r),
           want, opt->image.width, opt->image.height);
    goto fail;
  }
  lt_eval_free(ev);
  return r;
fail:
  lt_buf_free(r);
  lt_eval_free(ev);
  return NULL;
}

static int write_pgm(const char *path, const mandel_image_t *m, const unsigned char *pix) {
  FILE *f = fopen(path, "wb");
  if (f == NULL) {
    perror(path);
    return -1;
  }
  size_t n = (size_t)m->width * m->height;
  fprintf(f, "P5\n%u %u\n255\n", m->width, m->height);
  int bad = fwrite(pix, 1, n, f) != n;
  if (fclose(f) != 0) bad = 1;
  if (bad) perror(path);
  return bad ? -1 : 0;
}

int main(int argc, char **argv) {
  options_t opt;
  if (parse_args(argc, argv, &opt) != 0) return 2;
  const ex_opts_t *co = &opt.common;
  const mandel_image_t *m = &opt.image;

  lt_skel_t *shown = make_program();
  char *text = lt_skel_format(shown);
  printf("%s: %s\n", PROG, text != NULL ? text : "?");
  free(text);
  lt_skel_free(shown);
  printf("%s: %ux%u pixels, %u iterations, %u bands\n", PROG, m->width, m->height, m->max_iter,
         m->bands);

  unsigned char task[MANDEL_IMAGE_SIZE];
  mandel_image_encode(task, m);
  double seconds = 0, local_seconds = 0;
  lt_buf_t *r = compute(co, &opt, co->local, task, &seconds);
  if (r == NULL) return 1;
  const unsigned char *pix = (const unsigned char *)lt_buf_data(r) + MANDEL_OUT_HEADER;
  size_t npix = (size_t)m->width * m->height, inside = 0;
  for (size_t i = 0; i < npix; i++)
    inside += pix[i] == 0;
  printf("%s: %zu of %zu pixels inside the set\n", PROG, inside, npix);

  int status = 0;
  if (opt.out != NULL) {
    if (write_pgm(opt.out, m, pix) == 0)
      printf("%s: wrote %s\n", PROG, opt.out);
    else
      status = 1;
  }
  if (opt.verify) {
    lt_buf_t *ref = compute(co, &opt, 1, task, &local_seconds);
    if (ref == NULL) {
      status = 1;
    } else if (memcmp(lt_buf_data(ref), lt_buf_data(r), lt_buf_len(r)) != 0) {
      const unsigned char *q = (const unsigned char *)lt_buf_data(ref) + MANDEL_OUT_HEADER;
      size_t i = 0;
      while (pix[i] == q[i])
        i++;
      printf("%s: WRONG: pixel (%zu, %zu) is %u, the sequential evaluator says %u\n", PROG,
             i % m->width, i / m->width, pix[i], q[i]);
      status = 1;
    } else {
      printf("%s: verified: byte-identical with the sequential evaluator\n", PROG);
    }
    lt_buf_free(ref);
  }
  if (status == 0) printf("%s: done\n", PROG);
  lt_buf_free(r);
  return status;
}
