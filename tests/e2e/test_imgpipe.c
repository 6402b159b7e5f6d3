/* test_imgpipe.c: the image-filter demo. The `filters` kernels against straightforward O(r^2)
 * references (small images of 1 to 4 channels, windows larger than the image, images full of
 * ties), their checks of malformed tokens, the `imgcodec` kernels (PNG round trips of grey,
 * grey+alpha, RGB and RGBA; bad files), byte-identical results on real spawned servers and in
 * the sequential evaluator, and the imgpipe program run as a subprocess on a temporary
 * directory: synthetic images with --verify; bad inputs (missing, corrupt, unsupported) that are
 * named while the other images finish; and real photos: a test set cut at test time from the
 * photos of Debian's mate-backgrounds (GPL-2+, installed by scripts/setup) — an RGBA PNG with
 * transparent areas, a grey+alpha PNG, a grey PNG, a JPEG — beside bad files, alpha and grey
 * kept and every output equal to the sequential evaluator and to the reference filters. */
#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include "harness.h"
#include "imgtoken.h"
#include "synth.h"

/* --- images and the reference filters ----------------------------------------------------- */

/* make_token_n returns a w x h token of c channels (caller frees) of pseudo-random samples
 * drawn from `levels` distinct values (2..256): few levels make many ties for oil. */
static unsigned char *make_token_n(uint32_t w, uint32_t h, uint32_t c, uint32_t seed,
                                   unsigned levels) {
  unsigned char *t = malloc(img_token_bytes(w, h, c));
  cr_assert_not_null(t);
  img_token_put_header_n(t, w, h, c);
  uint32_t x = seed * 2654435761u + 12345u;
  for (size_t i = 0; i < (size_t)w * h * c; i++) {
    x = x * 1103515245u + 12345u;
    unsigned v = (x >> 16) % levels;
    t[IMG_HEADER + i] = (unsigned char)(v * 255 / (levels - 1));
  }
  return t;
}

/* make_token is make_token_n for RGB. */
static unsigned char *make_token(uint32_t w, uint32_t h, uint32_t seed, unsigned levels) {
  return make_token_n(w, h, IMG_CHANNELS, seed, levels);
}

/* token_len returns the size of token t from its header. */
static size_t token_len(const unsigned char *t) {
  return img_token_bytes(ex_get_u32(t + 4), ex_get_u32(t + 8), ex_get_u32(t + 12));
}

/* ref_filter applies blur or oil to token t the obvious way, every window summed or counted
 * from scratch. Returns a new token (caller frees). */
static unsigned char *ref_filter(const unsigned char *t, uint32_t r, int oil) {
  uint32_t w = ex_get_u32(t + 4), h = ex_get_u32(t + 8), nc = ex_get_u32(t + 12);
  unsigned char *o = malloc(token_len(t));
  cr_assert_not_null(o);
  memcpy(o, t, IMG_HEADER);
  const unsigned char *in = t + IMG_HEADER;
  for (int64_t y = 0; y < h; y++)
    for (int64_t x = 0; x < w; x++)
      for (uint32_t c = 0; c < nc; c++) {
        uint64_t sum = 0, n = 0;
        unsigned count[256] = {0};
        for (int64_t yy = y - r; yy <= y + (int64_t)r; yy++)
          for (int64_t xx = x - r; xx <= x + (int64_t)r; xx++) {
            if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
            unsigned v = in[((size_t)yy * w + (size_t)xx) * nc + c];
            sum += v;
            n++;
            count[v]++;
          }
        unsigned out = 0;
        if (oil) {
          for (unsigned v = 1; v < 256; v++)
            if (count[v] > count[out]) out = v; /* strictly more: ties keep the smaller */
        } else {
          double mean = (double)sum / (double)n;
          out = (unsigned)(mean + 0.5); /* exact here: sums are small integers */
        }
        o[IMG_HEADER + ((size_t)y * w + (size_t)x) * nc + c] = (unsigned char)out;
      }
  return o;
}

/* first_diff returns the offset of the first byte where two tokens differ, -1 if none. */
static long first_diff(const unsigned char *a, const unsigned char *b, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (a[i] != b[i]) return (long)i;
  return -1;
}

/* --- evaluators ---------------------------------------------------------------------------- */

static lt_eval_t *local_eval(lt_skel_t *program) {
  cr_assert_not_null(program);
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, program), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "modules", LT_TEST_MODULES), LT_OK);
  cr_assert_eq(lt_eval_run_local(ev), LT_OK);
  return ev;
}

/* run_all submits n tokens, closes the input and returns the n results (caller frees each and
 * the array). */
static lt_buf_t **run_all(lt_eval_t *ev, unsigned char *const *toks, const size_t *lens, int n) {
  for (int i = 0; i < n; i++)
    cr_assert_eq(lt_eval_submit(ev, toks[i], lens[i], NULL), LT_OK);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  lt_buf_t **out = calloc((size_t)n, sizeof *out);
  cr_assert_not_null(out);
  for (int i = 0; i < n; i++) {
    int rc = lt_eval_next(ev, &out[i]);
    cr_assert_eq(rc, LT_OK, "result %d: %s", i, lt_strerror(rc));
  }
  lt_buf_t *extra = NULL;
  cr_assert_eq(lt_eval_next(ev, &extra), LT_ECLOSED);
  return out;
}

static void free_results(lt_buf_t **b, int n) {
  for (int i = 0; i < n; i++)
    lt_buf_free(b[i]);
  free(b);
}

#define NSIZES 6
static const uint32_t sizes[NSIZES][2] = {{7, 5}, {16, 9}, {1, 1}, {5, 12}, {33, 2}, {1, 9}};

/* check_kernel runs `kernel` with every radius on images of every size, once with full-range
 * samples and once with 3 levels, of 1 to 4 channels in turn, and compares each result with
 * the reference. */
static void check_kernel(const char *kernel, int oil) {
  const uint32_t radii[] = {0, 1, 2, 5, 9};
  for (size_t ri = 0; ri < sizeof radii / sizeof radii[0]; ri++) {
    char param[8];
    snprintf(param, sizeof param, "%u", radii[ri]);
    lt_eval_t *ev = local_eval(lt_seq_with(kernel, param, strlen(param)));
    enum { N = 2 * NSIZES };
    unsigned char *toks[N];
    size_t lens[N];
    for (int i = 0; i < N; i++) {
      const uint32_t *s = sizes[i % NSIZES];
      uint32_t c = 1 + (uint32_t)(i + ri) % IMG_MAX_CHANNELS;
      toks[i] = make_token_n(s[0], s[1], c, (uint32_t)(i + 7 * ri), i < NSIZES ? 256 : 3);
      lens[i] = img_token_bytes(s[0], s[1], c);
    }
    lt_buf_t **res = run_all(ev, toks, lens, N);
    for (int i = 0; i < N; i++) {
      cr_assert_eq(lt_buf_error(res[i]), LT_OK, "%s r=%u: %s", kernel, radii[ri],
                   lt_buf_errmsg(res[i]));
      cr_assert_eq(lt_buf_len(res[i]), lens[i]);
      unsigned char *want = ref_filter(toks[i], radii[ri], oil);
      long d = first_diff(lt_buf_data(res[i]), want, lens[i]);
      cr_assert_eq(d, -1, "%s r=%u on %ux%ux%u (image %d): first difference at byte %ld", kernel,
                   radii[ri], sizes[i % NSIZES][0], sizes[i % NSIZES][1], ex_get_u32(toks[i] + 12),
                   i, d);
      free(want);
      free(toks[i]);
    }
    free_results(res, N);
    lt_eval_free(ev);
  }
}

Test(imgpipe_filters, blur_is_the_rounded_window_mean, .timeout = 60) {
  check_kernel("filters:blur", 0);
}

Test(imgpipe_filters, oil_is_the_window_mode_ties_to_the_smallest, .timeout = 60) {
  check_kernel("filters:oil", 1);
}

Test(imgpipe_filters, no_parameter_means_radius_5, .timeout = 60) {
  lt_eval_t *ev = local_eval(lt_pipeline(lt_seq("filters:blur"), lt_seq("filters:oil"), NULL));
  unsigned char *tok = make_token(19, 13, 3, 256);
  size_t len = img_token_size(19, 13);
  lt_buf_t **res = run_all(ev, &tok, &len, 1);
  cr_assert_eq(lt_buf_error(res[0]), LT_OK, "%s", lt_buf_errmsg(res[0]));
  unsigned char *blurred = ref_filter(tok, 5, 0), *want = ref_filter(blurred, 5, 1);
  cr_assert_eq(first_diff(lt_buf_data(res[0]), want, len), -1);
  free(want);
  free(blurred);
  free(tok);
  free_results(res, 1);
  lt_eval_free(ev);
}

/* expect_failure checks that a result failed in a kernel with a message containing `what`. */
static void expect_failure(const lt_buf_t *b, const char *kernel, const char *what) {
  cr_assert_eq(lt_buf_error(b), LT_EKERNEL, "expected a kernel failure about '%s', got %s", what,
               lt_strerror(lt_buf_error(b)));
  cr_assert_not_null(strstr(lt_buf_errmsg(b), kernel), "%s", lt_buf_errmsg(b));
  cr_assert_not_null(strstr(lt_buf_errmsg(b), what), "'%s' not in '%s'", what, lt_buf_errmsg(b));
}

Test(imgpipe_filters, malformed_tokens_fail_with_a_clear_message, .timeout = 60) {
  lt_eval_t *ev = local_eval(lt_seq_with("filters:blur", "2", 1));
  enum { N = 6 };
  unsigned char *toks[N];
  size_t lens[N];
  for (int i = 0; i < N; i++) {
    toks[i] = make_token(4, 4, (uint32_t)i, 256);
    lens[i] = img_token_size(4, 4);
  }
  lens[0] = 10;                  /* shorter than the header */
  toks[1][0] ^= 0xff;            /* bad magic */
  ex_put_u32(toks[2] + 12, 5);   /* five channels */
  lens[3] -= 8;                  /* pixels missing */
  ex_put_u32(toks[4] + 4, 0);    /* zero width */
  ex_put_u32(toks[5] + 4, 8192); /* over the pixel limit */
  ex_put_u32(toks[5] + 8, 8192);
  lt_buf_t **res = run_all(ev, toks, lens, N);
  expect_failure(res[0], "filters:blur", "16-byte header, got 10 bytes");
  expect_failure(res[1], "filters:blur", "not an image token");
  expect_failure(res[2], "filters:blur", "5 channels, 1 to 4");
  expect_failure(res[3], "filters:blur", "a 4x4 RGB token is 64 bytes, got 56");
  expect_failure(res[4], "filters:blur", "width and height must be in 1..");
  expect_failure(res[5], "filters:blur", "8192x8192 is more than");
  free_results(res, N);
  for (int i = 0; i < N; i++)
    free(toks[i]);
  lt_eval_free(ev);
}

Test(imgpipe_filters, bad_radius_parameters_are_refused, .timeout = 60) {
  const char *bad[] = {"abc", "1001", "-1", "12345"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    lt_eval_t *ev = local_eval(lt_seq_with("filters:oil", bad[i], strlen(bad[i])));
    unsigned char *tok = make_token(3, 3, 1, 256);
    size_t len = img_token_size(3, 3);
    lt_buf_t **res = run_all(ev, &tok, &len, 1);
    expect_failure(res[0], "filters:oil", "radius in 0..1000");
    cr_assert_not_null(strstr(lt_buf_errmsg(res[0]), bad[i]), "%s", lt_buf_errmsg(res[0]));
    free_results(res, 1);
    free(tok);
    lt_eval_free(ev);
  }
}

Test(imgpipe_filters, servers_give_the_sequential_bytes, .timeout = 60) {
  const uint32_t dims[3][2] = {{23, 17}, {40, 30}, {9, 31}};
  unsigned char *toks[3];
  size_t lens[3];
  for (int i = 0; i < 3; i++) {
    toks[i] = make_token(dims[i][0], dims[i][1], (uint32_t)(100 + i), i == 2 ? 4 : 256);
    lens[i] = img_token_size(dims[i][0], dims[i][1]);
  }
#define PROGRAM                                                                                    \
  lt_pipeline(lt_farm(lt_seq_with("filters:blur", "2", 1)),                                        \
              lt_farm(lt_seq_with("filters:oil", "2", 1)), NULL)
  lt_eval_t *par = new_eval(PROGRAM, 2);
  lt_buf_t **pres = run_all(par, toks, lens, 3);
  lt_eval_t *seq = local_eval(PROGRAM);
  lt_buf_t **sres = run_all(seq, toks, lens, 3);
#undef PROGRAM
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(lt_buf_error(pres[i]), LT_OK, "%s", lt_buf_errmsg(pres[i]));
    cr_assert_eq(lt_buf_error(sres[i]), LT_OK, "%s", lt_buf_errmsg(sres[i]));
    cr_assert_eq(lt_buf_len(pres[i]), lens[i]);
    cr_assert_eq(lt_buf_len(sres[i]), lens[i]);
    cr_assert_eq(memcmp(lt_buf_data(pres[i]), lt_buf_data(sres[i]), lens[i]), 0, "image %d", i);
    unsigned char *blurred = ref_filter(toks[i], 2, 0), *want = ref_filter(blurred, 2, 1);
    cr_assert_eq(first_diff(lt_buf_data(pres[i]), want, lens[i]), -1, "image %d", i);
    free(want);
    free(blurred);
    free(toks[i]);
  }
  free_results(pres, 3);
  free_results(sres, 3);
  lt_eval_free(par);
  lt_eval_free(seq);
}

/* --- the imgcodec kernels ------------------------------------------------------------------ */

/* run_one runs `kernel` on one input in the sequential evaluator; the caller frees the result. */
static lt_buf_t *run_one(const char *kernel, const void *in, size_t len) {
  lt_eval_t *ev = local_eval(lt_seq(kernel));
  unsigned char *tok = (unsigned char *)in;
  lt_buf_t **res = run_all(ev, &tok, &len, 1);
  lt_buf_t *b = res[0];
  free(res);
  lt_eval_free(ev);
  return b;
}

Test(imgpipe_codec, png_round_trips_keep_grey_alpha_and_colour, .timeout = 60) {
  for (uint32_t c = 1; c <= IMG_MAX_CHANNELS; c++) {
    unsigned char *t = make_token_n(23, 17, c, 40 + c, c == 2 ? 4 : 256);
    size_t len = img_token_bytes(23, 17, c);
    lt_buf_t *png = run_one("imgcodec:encode", t, len);
    cr_assert_eq(lt_buf_error(png), LT_OK, "%s", lt_buf_errmsg(png));
    int w = 0, h = 0, comp = 0;
    unsigned char *px =
        stbi_load_from_memory(lt_buf_data(png), (int)lt_buf_len(png), &w, &h, &comp, 0);
    cr_assert_not_null(px, "%u channels: stb_image cannot read the PNG", c);
    cr_assert_eq(w, 23);
    cr_assert_eq(h, 17);
    cr_assert_eq((uint32_t)comp, c, "encoded %u channels as %d", c, comp);
    cr_assert_eq(memcmp(px, t + IMG_HEADER, len - IMG_HEADER), 0, "%u channels", c);
    stbi_image_free(px);
    lt_buf_t *back = run_one("imgcodec:decode", lt_buf_data(png), lt_buf_len(png));
    cr_assert_eq(lt_buf_error(back), LT_OK, "%s", lt_buf_errmsg(back));
    cr_assert_eq(lt_buf_len(back), len, "%u channels", c);
    cr_assert_eq(first_diff(lt_buf_data(back), t, len), -1, "%u channels", c);
    lt_buf_free(back);
    lt_buf_free(png);
    free(t);
  }
}

typedef struct membuf {
  unsigned char *p;
  size_t n;
} membuf_t;

/* append is stb_image_write's output function: it appends to a membuf_t. */
static void append(void *ctx, void *data, int size) {
  membuf_t *m = ctx;
  m->p = realloc(m->p, m->n + (size_t)size);
  cr_assert_not_null(m->p);
  memcpy(m->p + m->n, data, (size_t)size);
  m->n += (size_t)size;
}

/* png_file returns the bytes of a w x h PNG of c channels written by stb (caller frees). */
static unsigned char *png_file(uint32_t w, uint32_t h, uint32_t c, size_t *len) {
  unsigned char *t = make_token_n(w, h, c, 9, 256);
  membuf_t m = {0};
  cr_assert(
      stbi_write_png_to_func(append, &m, (int)w, (int)h, (int)c, t + IMG_HEADER, (int)(w * c)));
  free(t);
  *len = m.n;
  return m.p;
}

Test(imgpipe_codec, bad_files_and_tokens_fail_with_a_clear_message, .timeout = 60) {
  const char *text = "these are notes, not a picture\n";
  lt_buf_t *b = run_one("imgcodec:decode", text, strlen(text));
  expect_failure(b, "imgcodec:decode", "unsupported format: not PNG, JPEG");
  lt_buf_free(b);
  size_t len = 0;
  unsigned char *png = png_file(40, 30, 4, &len);
  b = run_one("imgcodec:decode", png, len / 2);
  expect_failure(b, "imgcodec:decode", "corrupt or truncated PNG file (40x30 pixels announced)");
  lt_buf_free(b);
  b = run_one("imgcodec:decode", png, 20); /* the IHDR chunk cut */
  expect_failure(b, "imgcodec:decode", "corrupt or truncated PNG file (bad header)");
  lt_buf_free(b);
  ex_put_u32(png + 16, 0x401f0000u); /* IHDR width and height, big-endian: 8000 x 8000 */
  ex_put_u32(png + 20, 0x401f0000u);
  b = run_one("imgcodec:decode", png, len);
  expect_failure(b, "imgcodec:decode", "8000x8000 is more than 33554432 pixels");
  lt_buf_free(b);
  free(png);
  unsigned char *t = make_token_n(4, 4, 4, 1, 256);
  ex_put_u32(t + 12, 0); /* no channel */
  b = run_one("imgcodec:encode", t, img_token_bytes(4, 4, 4));
  expect_failure(b, "imgcodec:encode", "0 channels, 1 to 4");
  lt_buf_free(b);
  free(t);
}

/* --- the imgpipe program ------------------------------------------------------------------- */

static char tmp[64]; /* this test's temporary directory, removed by cleanup */

static void make_tmp(void) {
  snprintf(tmp, sizeof tmp, "/tmp/lt_imgpipe_XXXXXX");
  cr_assert_not_null(mkdtemp(tmp));
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void cleanup(void) {
  if (tmp[0] != '\0') nftw(tmp, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  tmp[0] = '\0';
}

/* path_in returns "<tmp>/<name>" in a static buffer of its own per call slot. */
static const char *path_in(int slot, const char *name) {
  static char buf[8][256];
  snprintf(buf[slot], sizeof buf[slot], "%s/%s", tmp, name);
  return buf[slot];
}

/* slurp reads a whole file as a NUL-terminated string (caller frees); NULL if it is missing. */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  cr_assert_not_null(s);
  cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
  s[n] = '\0';
  fclose(f);
  if (len != NULL) *len = (size_t)n;
  return s;
}

/* run_imgpipe runs the program with `args` (NULL-terminated) plus this build's server and
 * modules, stdout and stderr going to <tmp>/stdout.txt and stderr.txt, checks that it exits
 * with status `want` and returns what it printed in *out and *err (caller frees). */
static void run_imgpipe(const char *const *args, int want, char **out, char **err) {
  const char *argv[64] = {LT_TEST_IMGPIPE};
  int n = 1;
  for (; args[n - 1] != NULL; n++)
    argv[n] = args[n - 1];
  const char *fixed[] = {"--set", "server=" LT_TEST_SERVER, "--set", "modules=" LT_TEST_MODULES,
                         "--set", "server_threads=2"};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    argv[n++] = fixed[i];
  argv[n] = NULL;
  pid_t pid = fork();
  cr_assert_neq(pid, -1);
  if (pid == 0) {
    int fo = open(path_in(0, "stdout.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fe = open(path_in(1, "stderr.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) _exit(126);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  *out = slurp(path_in(0, "stdout.txt"), NULL);
  *err = slurp(path_in(1, "stderr.txt"), NULL);
  cr_assert_not_null(*out);
  cr_assert_not_null(*err);
  cr_assert(WIFEXITED(status), "imgpipe died with signal %d\nstderr:\n%s", WTERMSIG(status), *err);
  cr_assert_eq(WEXITSTATUS(status), want, "exit status %d, expected %d\nstdout:\n%s\nstderr:\n%s",
               WEXITSTATUS(status), want, *out, *err);
}

/* load_token decodes an image file into a token of the file's own channels (caller frees); the
 * test fails when it cannot. */
static unsigned char *load_token(const char *path) {
  int w = 0, h = 0, comp = 0;
  unsigned char *px = stbi_load(path, &w, &h, &comp, 0);
  cr_assert_not_null(px, "cannot decode %s", path);
  unsigned char *t = malloc(img_token_bytes((uint32_t)w, (uint32_t)h, (uint32_t)comp));
  cr_assert_not_null(t);
  img_token_put_header_n(t, (uint32_t)w, (uint32_t)h, (uint32_t)comp);
  memcpy(t + IMG_HEADER, px, (size_t)w * (size_t)h * (size_t)comp);
  stbi_image_free(px);
  return t;
}

/* expect_output checks that `out` holds blur-then-oil of radius r of the token `in`, with its
 * size and channels. */
static void expect_output(const char *out, const unsigned char *in, uint32_t r) {
  unsigned char *got = load_token(out);
  uint32_t w = ex_get_u32(in + 4), h = ex_get_u32(in + 8), c = ex_get_u32(in + 12);
  cr_assert_eq(ex_get_u32(got + 4), w, "%s", out);
  cr_assert_eq(ex_get_u32(got + 8), h, "%s", out);
  cr_assert_eq(ex_get_u32(got + 12), c, "%s: %u channels, the input %u", out, ex_get_u32(got + 12),
               c);
  unsigned char *blurred = ref_filter(in, r, 0), *want = ref_filter(blurred, r, 1);
  cr_assert_eq(first_diff(got, want, token_len(in)), -1, "%s", out);
  free(want);
  free(blurred);
  free(got);
}

static void expect_in(const char *text, const char *what, const char *where) {
  cr_assert_not_null(strstr(text, what), "'%s' not in the %s:\n%s", what, where, text);
}

Test(imgpipe_program, synthetic_images_with_verify, .init = make_tmp, .fini = cleanup,
     .timeout = 60) {
  const char *args[] = {"--generate", "3", "--size",   "48x32", "--radius",        "2",
                        "--servers",  "2", "--verify", "--out", path_in(2, "out"), NULL};
  char *out, *err;
  run_imgpipe(args, 0, &out, &err);
  expect_in(out, "3 images in", "stdout");
  expect_in(out, "on 2 spawned servers; client->servers", "stdout");
  expect_in(out, "verify: all 3 images written are byte-identical", "stdout");
  for (uint64_t i = 0; i < 3; i++) {
    unsigned char *in = malloc(img_token_size(48, 32));
    cr_assert_not_null(in);
    img_token_put_header(in, 48, 32);
    img_synth_fill(in + IMG_HEADER, 48, 32, i);
    char name[64];
    snprintf(name, sizeof name, "out/synthetic-%04u.png", (unsigned)(i + 1));
    expect_output(path_in(3, name), in, 2);
    free(in);
  }
  free(out);
  free(err);
}

/* write_file writes n bytes to <tmp>/name. */
static void write_file(const char *name, const void *data, size_t n) {
  FILE *f = fopen(path_in(4, name), "wb");
  cr_assert_not_null(f, "%s", name);
  cr_assert_eq(fwrite(data, 1, n, f), n);
  cr_assert_eq(fclose(f), 0);
}

Test(imgpipe_program, bad_inputs_are_named_and_the_others_finish, .init = make_tmp, .fini = cleanup,
     .timeout = 60) {
  cr_assert_eq(mkdir(path_in(2, "in"), 0755), 0);
  /* Three good images: a PNG, a JPEG (checked against what the decoder gives) and a PPM. */
  unsigned char *png = make_token(20, 15, 1, 256), *jpg = make_token(12, 10, 2, 256);
  unsigned char *ppm = make_token(9, 7, 3, 5);
  cr_assert(stbi_write_png(path_in(3, "in/good.png"), 20, 15, 3, png + IMG_HEADER, 20 * 3));
  cr_assert(stbi_write_jpg(path_in(3, "in/photo.jpg"), 12, 10, 3, jpg + IMG_HEADER, 95));
  char head[32];
  int hl = snprintf(head, sizeof head, "P6\n9 7\n255\n");
  size_t ppm_len = (size_t)hl + 9 * 7 * 3;
  unsigned char *ppm_file = malloc(ppm_len);
  cr_assert_not_null(ppm_file);
  memcpy(ppm_file, head, (size_t)hl);
  memcpy(ppm_file + hl, ppm + IMG_HEADER, 9 * 7 * 3);
  write_file("in/pic.ppm", ppm_file, ppm_len);
  /* Three bad ones: text named .png, a PNG cut in half, a link to nothing. */
  const char *text = "these are notes, not a picture\n";
  write_file("in/notes.png", text, strlen(text));
  size_t good_len = 0;
  char *good = slurp(path_in(3, "in/good.png"), &good_len);
  cr_assert_not_null(good);
  write_file("in/trunc.png", good, good_len / 2);
  cr_assert_eq(symlink(path_in(3, "in/nowhere.png"), path_in(4, "in/gone.png")), 0);

  const char *args[] = {"--in", path_in(2, "in"), "--radius",        "1", "--servers",
                        "2",    "--out",          path_in(5, "out"), NULL};
  char *out, *err;
  run_imgpipe(args, 1, &out, &err);
  expect_in(err, "in/gone.png: No such file or directory", "stderr");
  expect_in(err, "in/notes.png: imgcodec:decode: unsupported format", "stderr");
  expect_in(err, "in/trunc.png: imgcodec:decode: corrupt or truncated PNG file", "stderr");
  expect_in(err, "3 of 6 images failed", "stderr");
  expect_in(out, "3 images (3 failed) in", "stdout");

  expect_output(path_in(6, "out/good.png"), png, 1);
  expect_output(path_in(6, "out/pic.png"), ppm, 1);
  unsigned char *decoded_jpg = load_token(path_in(3, "in/photo.jpg"));
  expect_output(path_in(6, "out/photo.png"), decoded_jpg, 1);
  struct stat st;
  cr_assert_neq(stat(path_in(6, "out/notes.png"), &st), 0);
  cr_assert_neq(stat(path_in(6, "out/trunc.png"), &st), 0);
  cr_assert_neq(stat(path_in(6, "out/gone.png"), &st), 0);
  free(decoded_jpg);
  free(good);
  free(ppm_file);
  free(png);
  free(jpg);
  free(ppm);
  free(out);
  free(err);
}

Test(imgpipe_program, two_inputs_for_one_output_are_refused, .init = make_tmp, .fini = cleanup,
     .timeout = 30) {
  cr_assert_eq(mkdir(path_in(2, "in"), 0755), 0);
  unsigned char *t = make_token(4, 4, 1, 256);
  cr_assert(stbi_write_png(path_in(3, "in/a.png"), 4, 4, 3, t + IMG_HEADER, 12));
  cr_assert(stbi_write_jpg(path_in(3, "in/a.jpg"), 4, 4, 3, t + IMG_HEADER, 90));
  const char *args[] = {"--in", path_in(2, "in"), "--out", path_in(5, "out"), NULL};
  char *out, *err;
  run_imgpipe(args, 2, &out, &err);
  expect_in(err, "in/a.jpg and ", "stderr");
  expect_in(err, "in/a.png would both be written to ", "stderr");
  free(out);
  free(err);
  free(t);
}

/* --- real photos ---------------------------------------------------------------------------- */

/* photo_crop returns the w x h piece at (x, y) of photo `rel` of mate-backgrounds as a token of
 * the photo's own channels (caller frees). */
static unsigned char *photo_crop(const char *rel, uint32_t x, uint32_t y, uint32_t w, uint32_t h) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", LT_TEST_PHOTOS, rel);
  int pw = 0, ph = 0, comp = 0;
  unsigned char *px = stbi_load(path, &pw, &ph, &comp, 0);
  cr_assert_not_null(px,
                     "cannot read %s: the real-photo tests need Debian's mate-backgrounds "
                     "(scripts/setup installs it)",
                     path);
  cr_assert((uint32_t)pw >= x + w && (uint32_t)ph >= y + h, "%s is only %dx%d", path, pw, ph);
  unsigned char *t = malloc(img_token_bytes(w, h, (uint32_t)comp));
  cr_assert_not_null(t);
  img_token_put_header_n(t, w, h, (uint32_t)comp);
  size_t row = (size_t)w * (size_t)comp;
  for (uint32_t r = 0; r < h; r++)
    memcpy(t + IMG_HEADER + r * row, px + (((size_t)(y + r) * (size_t)pw) + x) * (size_t)comp, row);
  stbi_image_free(px);
  return t;
}

/* to_grey returns the luma of RGB token t as a grey token (caller frees). */
static unsigned char *to_grey(const unsigned char *t) {
  uint32_t w = ex_get_u32(t + 4), h = ex_get_u32(t + 8);
  unsigned char *g = malloc(img_token_bytes(w, h, 1));
  cr_assert_not_null(g);
  img_token_put_header_n(g, w, h, 1);
  for (size_t i = 0; i < (size_t)w * h; i++) {
    const unsigned char *p = t + IMG_HEADER + 3 * i;
    g[IMG_HEADER + i] = (unsigned char)((77u * p[0] + 150u * p[1] + 29u * p[2] + 128u) >> 8);
  }
  return g;
}

/* write_png writes token t as the PNG file <tmp>/name with stb_image_write. */
static void write_png(const char *name, const unsigned char *t) {
  uint32_t w = ex_get_u32(t + 4), h = ex_get_u32(t + 8), c = ex_get_u32(t + 12);
  cr_assert(stbi_write_png(path_in(4, name), (int)w, (int)h, (int)c, t + IMG_HEADER, (int)(w * c)),
            "%s", name);
}

/* alpha_zeros counts the fully transparent pixels of token t (0 when it has no alpha). */
static size_t alpha_zeros(const unsigned char *t) {
  uint32_t w = ex_get_u32(t + 4), h = ex_get_u32(t + 8), c = ex_get_u32(t + 12);
  size_t n = 0;
  for (size_t i = 0; (c == 2 || c == 4) && i < (size_t)w * h; i++)
    n += t[IMG_HEADER + i * c + c - 1] == 0;
  return n;
}

Test(imgpipe_program, real_photos_keep_alpha_and_grey_and_equal_the_sequential_evaluator,
     .init = make_tmp, .fini = cleanup, .timeout = 120) {
  cr_assert_eq(mkdir(path_in(2, "in"), 0755), 0);
  /* An RGBA piece of Spring.png across the edge of its transparent area, a grey+alpha piece of
   * Stripes.png, a piece of the Aqua.jpg photo turned grey, a piece of FreshFlower.jpg saved
   * again as JPEG, and the whole GreenTraditional.jpg (1900x1200) as it is. */
  unsigned char *rgba = photo_crop("abstract/Spring.png", 700, 400, 96, 72);
  unsigned char *ga = photo_crop("desktop/Stripes.png", 100, 100, 80, 60);
  unsigned char *aqua = photo_crop("nature/Aqua.jpg", 1000, 600, 90, 70);
  unsigned char *grey = to_grey(aqua);
  unsigned char *flower = photo_crop("nature/FreshFlower.jpg", 700, 500, 64, 48);
  cr_assert_eq(ex_get_u32(rgba + 12), 4);
  cr_assert_eq(ex_get_u32(ga + 12), 2);
  size_t clear = alpha_zeros(rgba);
  cr_assert(clear > 0 && clear < 96 * 72, "the RGBA piece must be partly transparent: %zu", clear);
  write_png("in/rgba.png", rgba);
  write_png("in/greyalpha.png", ga);
  write_png("in/grey.png", grey);
  cr_assert(stbi_write_jpg(path_in(3, "in/flower.jpg"), 64, 48, 3, flower + IMG_HEADER, 90));
  size_t jlen = 0;
  char *jpeg = slurp(LT_TEST_PHOTOS "/desktop/GreenTraditional.jpg", &jlen);
  cr_assert_not_null(jpeg, "mate-backgrounds is missing (scripts/setup installs it)");
  write_file("in/green.jpg", jpeg, jlen);
  /* Bad files: text named .jpg, a JPEG cut in half, a PNG announcing 9000x9000 pixels. */
  const char *text = "not a photo\n";
  write_file("in/notes.jpg", text, strlen(text));
  write_file("in/cut.jpg", jpeg, jlen / 2);
  size_t plen = 0;
  unsigned char *big = (unsigned char *)slurp(path_in(3, "in/rgba.png"), &plen);
  cr_assert_not_null(big);
  ex_put_u32(big + 16, 0x28230000u); /* IHDR width and height, big-endian: 9000 x 9000 */
  ex_put_u32(big + 20, 0x28230000u);
  write_file("in/big.png", big, plen);

  const char *args[] = {"--in",     path_in(2, "in"), "--radius",        "2", "--servers", "2",
                        "--verify", "--out",          path_in(5, "out"), NULL};
  char *out, *err;
  run_imgpipe(args, 1, &out, &err);
  expect_in(err, "in/notes.jpg: imgcodec:decode: unsupported format", "stderr");
  expect_in(err, "in/cut.jpg: imgcodec:decode: corrupt or truncated JPEG file", "stderr");
  expect_in(err, "in/big.png: imgcodec:decode: 9000x9000 is more than", "stderr");
  expect_in(err, "3 of 8 images failed", "stderr");
  expect_in(out, "5 images (3 failed) in", "stdout");
  expect_in(out, "verify: all 5 images written are byte-identical", "stdout");

  expect_output(path_in(6, "out/rgba.png"), rgba, 2);
  expect_output(path_in(6, "out/greyalpha.png"), ga, 2);
  expect_output(path_in(6, "out/grey.png"), grey, 2);
  unsigned char *flower_in = load_token(path_in(3, "in/flower.jpg"));
  expect_output(path_in(6, "out/flower.png"), flower_in, 2);
  unsigned char *rgba_out = load_token(path_in(6, "out/rgba.png"));
  cr_assert_gt(alpha_zeros(rgba_out), 0, "the transparent area is gone");
  unsigned char *green = load_token(path_in(6, "out/green.png"));
  cr_assert_eq(ex_get_u32(green + 4), 1900);
  cr_assert_eq(ex_get_u32(green + 8), 1200);
  cr_assert_eq(ex_get_u32(green + 12), 3);
  struct stat st;
  cr_assert_neq(stat(path_in(6, "out/notes.png"), &st), 0);
  cr_assert_neq(stat(path_in(6, "out/cut.png"), &st), 0);
  cr_assert_neq(stat(path_in(6, "out/big.png"), &st), 0);
  free(green);
  free(rgba_out);
  free(flower_in);
  free(big);
  free(jpeg);
  free(flower);
  free(grey);
  free(aqua);
  free(ga);
  free(rgba);
  free(out);
  free(err);
}
