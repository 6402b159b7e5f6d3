/* imgfilter.c: the blur and oil-paint filters of imgfilter.h on bare pixels of 1 to 4 channels,
 * every channel (alpha too) filtered alike: blur in O(1)
 * per sample from a summed-area table, oil in O(r) from a sliding-window histogram that keeps
 * its mode. Integer arithmetic only, so every host gives the same bytes. Nothing here knows of
 * tokens or kernel calls (filters.c wraps these for the `filters` module). */
#include <stdlib.h>

#include "imgfilter.h"
#include "imgtoken.h"

/* The blur sums of a window are differences of a summed-area table kept modulo 2^32 (unsigned
 * wrap-around is defined). The difference is exact as long as the true window sum fits:
 * (2r+1)^2 * 255 < 2^32 for every allowed radius. */
_Static_assert((uint64_t)(2 * IMG_MAX_RADIUS + 1) * (2 * IMG_MAX_RADIUS + 1) * 255 < (1ull << 32),
               "window sums must fit in uint32");

typedef struct image {
  const unsigned char *in; /* the input's pixels */
  unsigned char *out;      /* the output's pixels */
  uint32_t w, h, c, r;     /* c: channels per pixel */
} image_t;

int img_filter_blur(const unsigned char *pixels, uint32_t w, uint32_t h, uint32_t channels,
                    uint32_t r, unsigned char *out) {
  const image_t im = {.in = pixels, .out = out, .w = w, .h = h, .c = channels, .r = r};
  const uint32_t nc = im.c;
  const size_t stride = ((size_t)im.w + 1) * nc;
  /* sat[(y * (w+1) + x) * nc + c]: sum of channel c over the rows < y and columns < x. */
  uint32_t *sat = calloc(((size_t)im.h + 1) * stride, sizeof *sat);
  if (sat == NULL) return -1;
  for (uint32_t y = 0; y < im.h; y++) {
    const unsigned char *row = im.in + (size_t)y * im.w * nc;
    uint32_t *above = sat + (size_t)y * stride, *cur = above + stride;
    uint32_t acc[IMG_MAX_CHANNELS] = {0};
    for (uint32_t x = 0; x < im.w; x++)
      for (uint32_t c = 0; c < nc; c++) {
        acc[c] += row[(size_t)x * nc + c];
        size_t i = ((size_t)x + 1) * nc + c;
        cur[i] = above[i] + acc[c];
      }
  }
  for (uint32_t y = 0; y < im.h; y++) {
    uint32_t y0 = y > im.r ? y - im.r : 0, y1 = im.h - 1 - y > im.r ? y + im.r : im.h - 1;
    const uint32_t *top = sat + (size_t)y0 * stride, *bot = sat + ((size_t)y1 + 1) * stride;
    unsigned char *orow = im.out + (size_t)y * im.w * nc;
    for (uint32_t x = 0; x < im.w; x++) {
      uint32_t x0 = x > im.r ? x - im.r : 0, x1 = im.w - 1 - x > im.r ? x + im.r : im.w - 1;
      uint64_t n = (uint64_t)(x1 - x0 + 1) * (y1 - y0 + 1);
      size_t a = (size_t)x0 * nc, b = ((size_t)x1 + 1) * nc;
      for (uint32_t c = 0; c < nc; c++) {
        uint32_t sum = bot[b + c] - top[b + c] - bot[a + c] + top[a + c];
        orow[(size_t)x * nc + c] = (unsigned char)((2 * (uint64_t)sum + n) / (2 * n));
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

/* mh_column adds (sign > 0) or removes the samples of channel c in column x, rows y0..y1, of
 * an image of nc channels. */
static inline __attribute__((always_inline)) void mh_column(modehist_t *m, const image_t *im,
                                                            uint32_t nc, uint32_t c, uint32_t x,
                                                            uint32_t y0, uint32_t y1, int sign) {
  const unsigned char *p = im->in + ((size_t)y0 * im->w + x) * nc + c;
  const size_t step = (size_t)im->w * nc;
  for (uint32_t y = y0; y <= y1; y++, p += step) {
    if (sign > 0)
      mh_add(m, *p);
    else
      mh_remove(m, *p);
  }
}

/* oil_channel paints channel c of an image of nc channels. Each row slides its window to the
 * right, adding the entering column and removing the leaving one: O(r) per sample. Always
 * inlined, so that each channel count gets its own code with nc a constant (as fast as the
 * RGB-only code was). */
static inline __attribute__((always_inline)) void oil_channel(modehist_t *m, const image_t *im,
                                                              uint32_t nc, uint32_t c) {
  for (uint32_t y = 0; y < im->h; y++) {
    uint32_t y0 = y > im->r ? y - im->r : 0, y1 = im->h - 1 - y > im->r ? y + im->r : im->h - 1;
    uint32_t last = im->w - 1 > im->r ? im->r : im->w - 1; /* the window of x = 0 */
    for (uint32_t x = 0; x <= last; x++)
      mh_column(m, im, nc, c, x, y0, y1, +1);
    unsigned char *o = im->out + (size_t)y * im->w * nc + c;
    for (uint32_t x = 0; x < im->w; x++) {
      o[(size_t)x * nc] = mh_mode(m);
      if (x >= im->r) mh_column(m, im, nc, c, x - im->r, y0, y1, -1);
      if (im->w - 1 - x > im->r) mh_column(m, im, nc, c, x + im->r + 1, y0, y1, +1);
    }
    /* Only the columns still in the window are left; they go so the next row starts empty. */
    for (uint32_t x = im->w > im->r ? im->w - im->r : 0; x < im->w; x++)
      mh_column(m, im, nc, c, x, y0, y1, -1);
  }
}

int img_filter_oil(const unsigned char *pixels, uint32_t w, uint32_t h, uint32_t channels,
                   uint32_t r, unsigned char *out) {
  const image_t im = {.in = pixels, .out = out, .w = w, .h = h, .c = channels, .r = r};
  uint64_t side_w = im.w < 2 * (uint64_t)im.r + 1 ? im.w : 2 * (uint64_t)im.r + 1;
  uint64_t side_h = im.h < 2 * (uint64_t)im.r + 1 ? im.h : 2 * (uint64_t)im.r + 1;
  size_t nlevels = (size_t)(side_w * side_h) + 1; /* counts 0..window size */
  modehist_t m = {.top = 0};
  m.level = calloc(nlevels, sizeof *m.level);
  if (m.level == NULL) return -1;
  for (unsigned v = 0; v < 256; v++)
    bit_set(m.level[0], v);
  for (uint32_t c = 0; c < im.c; c++)
    switch (im.c) {
    case 1:
      oil_channel(&m, &im, 1, c);
      break;
    case 2:
      oil_channel(&m, &im, 2, c);
      break;
    case 3:
      oil_channel(&m, &im, 3, c);
      break;
    default:
      oil_channel(&m, &im, 4, c);
      break;
    }
  free(m.level);
  return 0;
}
