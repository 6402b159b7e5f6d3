/* filters.c: the `filters` kernel module of the image-filter demo (tokens in imgtoken.h), the
 * two area filters of DESIGN.md §12 on RGB images. filters:blur makes each sample the rounded
 * mean of its channel over the (2r+1)x(2r+1) window, filters:oil the mode (ties to the smallest
 * value); windows are clipped at the borders. The radius r is the kernel's parameter, decimal
 * text ("5" when there is none). Kernels run on a server worker thread (or the client's, in
 * local mode) and touch nothing but their own call.
 *
 *   pipe(farm(seq(filters:blur, "5")), farm(seq(filters:oil, "5"))) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/kernel.h>

#include "imgtoken.h"

#define DEFAULT_RADIUS 5 /* the paper's 11x11 window */

/* The blur sums of a window are differences of a summed-area table kept modulo 2^32 (unsigned
 * wrap-around is defined). The difference is exact as long as the true window sum fits:
 * (2r+1)^2 * 255 < 2^32 for every allowed radius. */
_Static_assert((uint64_t)(2 * IMG_MAX_RADIUS + 1) * (2 * IMG_MAX_RADIUS + 1) * 255 < (1ull << 32),
               "window sums must fit in uint32");

typedef struct image {
  const unsigned char *in; /* the input's pixels */
  unsigned char *out;      /* the output's pixels */
  uint32_t w, h, r;
} image_t;

/* parse_radius reads the kernel's parameter as a decimal radius in 0..IMG_MAX_RADIUS. */
static int parse_radius(lt_call_t *call, const char *name, uint32_t *r) {
  size_t len = 0;
  const char *p = lt_call_param(call, &len);
  if (p == NULL || len == 0) {
    *r = DEFAULT_RADIUS;
    return 0;
  }
  uint32_t v = 0;
  for (size_t i = 0; i < len; i++) {
    if (p[i] < '0' || p[i] > '9' || len > 4) goto bad;
    v = v * 10 + (uint32_t)(p[i] - '0');
  }
  if (v > IMG_MAX_RADIUS) goto bad;
  *r = v;
  return 0;
bad:
  return lt_call_fail(call,
                      "%s: the parameter must be a radius in 0..%d (decimal text), got '%.*s'",
                      name, IMG_MAX_RADIUS, (int)(len > 32 ? 32 : len), p);
}

/* open_image checks the call's one input token and the radius, and allocates the output token
 * with the same header. Returns 0, or the kernel's failure status. */
static int open_image(lt_call_t *call, const char *name, image_t *im) {
  int k = lt_call_ninputs(call);
  if (k != 1) return lt_call_fail(call, "%s: expects 1 input, got %d", name, k);
  int rc = parse_radius(call, name, &im->r);
  if (rc != 0) return rc;
  size_t len = 0;
  const unsigned char *p = lt_call_input(call, 0, &len);
  char why[160];
  if (img_token_check(p, len, &im->w, &im->h, why, sizeof why) != 0)
    return lt_call_fail(call, "%s: %s", name, why);
  unsigned char *out = lt_call_output(call, len);
  if (out == NULL) return lt_call_fail(call, "%s: out of memory for a %zu-byte image", name, len);
  memcpy(out, p, IMG_HEADER);
  im->in = p + IMG_HEADER;
  im->out = out + IMG_HEADER;
  return 0;
}

/* blur: rounded mean (half up) per channel, O(1) per sample from a summed-area table. */
LT_KERNEL(blur, call) {
  image_t im;
  int rc = open_image(call, "filters:blur", &im);
  if (rc != 0) return rc;
  const size_t stride = ((size_t)im.w + 1) * IMG_CHANNELS;
  /* sat[(y * (w+1) + x) * 3 + c]: sum of channel c over the rows < y and columns < x. */
  uint32_t *sat = calloc(((size_t)im.h + 1) * stride, sizeof *sat);
  if (sat == NULL) return lt_call_fail(call, "filters:blur: out of memory");
  for (uint32_t y = 0; y < im.h; y++) {
    const unsigned char *row = im.in + (size_t)y * im.w * IMG_CHANNELS;
    uint32_t *above = sat + (size_t)y * stride, *cur = above + stride;
    uint32_t acc[IMG_CHANNELS] = {0};
    for (uint32_t x = 0; x < im.w; x++)
      for (int c = 0; c < IMG_CHANNELS; c++) {
        acc[c] += row[(size_t)x * IMG_CHANNELS + c];
        size_t i = ((size_t)x + 1) * IMG_CHANNELS + c;
        cur[i] = above[i] + acc[c];
      }
  }
  for (uint32_t y = 0; y < im.h; y++) {
    uint32_t y0 = y > im.r ? y - im.r : 0, y1 = im.h - 1 - y > im.r ? y + im.r : im.h - 1;
    const uint32_t *top = sat + (size_t)y0 * stride, *bot = sat + ((size_t)y1 + 1) * stride;
    unsigned char *orow = im.out + (size_t)y * im.w * IMG_CHANNELS;
    for (uint32_t x = 0; x < im.w; x++) {
      uint32_t x0 = x > im.r ? x - im.r : 0, x1 = im.w - 1 - x > im.r ? x + im.r : im.w - 1;
      uint64_t n = (uint64_t)(x1 - x0 + 1) * (y1 - y0 + 1);
      size_t a = (size_t)x0 * IMG_CHANNELS, b = ((size_t)x1 + 1) * IMG_CHANNELS;
      for (int c = 0; c < IMG_CHANNELS; c++) {
        uint32_t sum = bot[b + c] - top[b + c] - bot[a + c] + top[a + c];
        orow[(size_t)x * IMG_CHANNELS + c] = (unsigned char)((2 * (uint64_t)sum + n) / (2 * n));
      }
    }
  }
  free(sat);
  return 0;
}

/* A window histogram that knows its mode in O(1): hist[v] counts value v, and level[k] is the
 * set of values (256 bits) counted exactly k times. The mode is the lowest value of the highest
 * non-empty level, so ties go to the smallest value. */
typedef struct modehist {
  uint32_t hist[256];
  uint64_t (*level)[4]; /* levels 0..nlevels-1 */
  uint32_t top;         /* the highest non-empty level; 0 when the window is empty */
} modehist_t;

static inline void bit_set(uint64_t *set, unsigned v) {
  set[v >> 6] |= 1ull << (v & 63);
}

static inline void bit_clear(uint64_t *set, unsigned v) {
  set[v >> 6] &= ~(1ull << (v & 63));
}

static inline void mh_add(modehist_t *m, unsigned v) {
  uint32_t k = m->hist[v]++;
  bit_clear(m->level[k], v);
  bit_set(m->level[k + 1], v);
  if (k + 1 > m->top) m->top = k + 1;
}

static inline void mh_remove(modehist_t *m, unsigned v) {
  uint32_t k = m->hist[v]--;
  bit_clear(m->level[k], v);
  bit_set(m->level[k - 1], v);
  /* v was alone on the top level: it now heads level k - 1. */
  if (k == m->top && (m->level[k][0] | m->level[k][1] | m->level[k][2] | m->level[k][3]) == 0)
    m->top = k - 1;
}

static inline unsigned char mh_mode(const modehist_t *m) {
  const uint64_t *set = m->level[m->top];
  for (unsigned i = 0; i < 4; i++)
    if (set[i] != 0) return (unsigned char)(i * 64 + (unsigned)__builtin_ctzll(set[i]));
  return 0; /* not reached: a window holds at least its own pixel */
}

/* mh_column adds (sign > 0) or removes the samples of channel c in column x, rows y0..y1. */
static void mh_column(modehist_t *m, const image_t *im, int c, uint32_t x, uint32_t y0, uint32_t y1,
                      int sign) {
  const unsigned char *p = im->in + ((size_t)y0 * im->w + x) * IMG_CHANNELS + c;
  const size_t step = (size_t)im->w * IMG_CHANNELS;
  for (uint32_t y = y0; y <= y1; y++, p += step) {
    if (sign > 0)
      mh_add(m, *p);
    else
      mh_remove(m, *p);
  }
}

/* oil: mode per channel, ties to the smallest value. Each row slides its window to the right,
 * adding the entering column and removing the leaving one: O(r) per sample. */
LT_KERNEL(oil, call) {
  image_t im;
  int rc = open_image(call, "filters:oil", &im);
  if (rc != 0) return rc;
  uint64_t side_w = im.w < 2 * (uint64_t)im.r + 1 ? im.w : 2 * (uint64_t)im.r + 1;
  uint64_t side_h = im.h < 2 * (uint64_t)im.r + 1 ? im.h : 2 * (uint64_t)im.r + 1;
  size_t nlevels = (size_t)(side_w * side_h) + 1; /* counts 0..window size */
  modehist_t m = {.top = 0};
  m.level = calloc(nlevels, sizeof *m.level);
  if (m.level == NULL) return lt_call_fail(call, "filters:oil: out of memory");
  for (unsigned v = 0; v < 256; v++)
    bit_set(m.level[0], v);
  for (int c = 0; c < IMG_CHANNELS; c++)
    for (uint32_t y = 0; y < im.h; y++) {
      uint32_t y0 = y > im.r ? y - im.r : 0, y1 = im.h - 1 - y > im.r ? y + im.r : im.h - 1;
      uint32_t last = im.w - 1 > im.r ? im.r : im.w - 1; /* the window of x = 0 */
      for (uint32_t x = 0; x <= last; x++)
        mh_column(&m, &im, c, x, y0, y1, +1);
      unsigned char *out = im.out + (size_t)y * im.w * IMG_CHANNELS + c;
      for (uint32_t x = 0; x < im.w; x++) {
        out[(size_t)x * IMG_CHANNELS] = mh_mode(&m);
        if (x >= im.r) mh_column(&m, &im, c, x - im.r, y0, y1, -1);
        if (im.w - 1 - x > im.r) mh_column(&m, &im, c, x + im.r + 1, y0, y1, +1);
      }
      /* Only the columns still in the window are left; they go so the next row starts empty. */
      for (uint32_t x = im.w > im.r ? im.w - im.r : 0; x < im.w; x++)
        mh_column(&m, &im, c, x, y0, y1, -1);
    }
  free(m.level);
  return 0;
}
