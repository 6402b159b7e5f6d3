/* mandel.h: the tokens of the Mandelbrot map example, shared by the program and the `mandel`
 * kernel module. An image task is MANDEL_IMAGE_SIZE bytes: width, height, iteration limit and
 * band count (little-endian uint32), then the region of the complex plane (re_min, re_max,
 * im_min, im_max as little-endian doubles). Header-only, no state: any thread. */
#ifndef LT_EXAMPLE_MANDEL_H
#define LT_EXAMPLE_MANDEL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bytes.h"

#define MANDEL_IMAGE_SIZE 48 /* an image task */
#define MANDEL_BAND_SIZE  56 /* a band task: the image task, first row, number of rows */
#define MANDEL_PIX_HEADER 12 /* a band's pixels: width, first row, rows, then the pixels */
#define MANDEL_OUT_HEADER 8  /* the image: width, height, then the pixels row by row */

#define MANDEL_MAX_SIDE   16384
#define MANDEL_MAX_PIXELS (1u << 26)
#define MANDEL_MAX_ITER   1000000

typedef struct mandel_image {
  uint32_t width, height, max_iter, bands;
  double re_min, re_max, im_min, im_max;
} mandel_image_t;

/* mandel_image_encode writes `m` into MANDEL_IMAGE_SIZE bytes at p. */
static inline void mandel_image_encode(unsigned char *p, const mandel_image_t *m) {
  ex_put_u32(p, m->width);
  ex_put_u32(p + 4, m->height);
  ex_put_u32(p + 8, m->max_iter);
  ex_put_u32(p + 12, m->bands);
  ex_put_f64(p + 16, m->re_min);
  ex_put_f64(p + 24, m->re_max);
  ex_put_f64(p + 32, m->im_min);
  ex_put_f64(p + 40, m->im_max);
}

/* mandel_image_decode reads MANDEL_IMAGE_SIZE bytes at p into *m (unchecked). */
static inline void mandel_image_decode(const unsigned char *p, mandel_image_t *m) {
  m->width = ex_get_u32(p);
  m->height = ex_get_u32(p + 4);
  m->max_iter = ex_get_u32(p + 8);
  m->bands = ex_get_u32(p + 12);
  m->re_min = ex_get_f64(p + 16);
  m->re_max = ex_get_f64(p + 24);
  m->im_min = ex_get_f64(p + 32);
  m->im_max = ex_get_f64(p + 40);
}

/* mandel_image_check returns 0 when `m` is a valid image, else -1 with the reason in why. */
static inline int mandel_image_check(const mandel_image_t *m, char *why, size_t len) {
  if (m->width < 1 || m->width > MANDEL_MAX_SIDE || m->height < 1 || m->height > MANDEL_MAX_SIDE)
    snprintf(why, len, "width and height must be in 1..%d, got %ux%u", MANDEL_MAX_SIDE, m->width,
             m->height);
  else if ((uint64_t)m->width * m->height > MANDEL_MAX_PIXELS)
    snprintf(why, len, "%ux%u is more than %u pixels", m->width, m->height, MANDEL_MAX_PIXELS);
  else if (m->max_iter < 1 || m->max_iter > MANDEL_MAX_ITER)
    snprintf(why, len, "the iteration limit must be in 1..%d, got %u", MANDEL_MAX_ITER,
             m->max_iter);
  else if (m->bands < 1 || m->bands > m->height)
    snprintf(why, len, "the band count must be in 1..height (%u), got %u", m->height, m->bands);
  else if (!isfinite(m->re_min) || !isfinite(m->re_max) || !(m->re_min < m->re_max))
    snprintf(why, len, "the real range must be finite and increasing, got [%g, %g]", m->re_min,
             m->re_max);
  else if (!isfinite(m->im_min) || !isfinite(m->im_max) || !(m->im_min < m->im_max))
    snprintf(why, len, "the imaginary range must be finite and increasing, got [%g, %g]", m->im_min,
             m->im_max);
  else
    return 0;
  return -1;
}

/* mandel_band_rows gives band `i`'s first row and row count: bands split the rows evenly,
 * and each has at least one since bands <= height. */
static inline void mandel_band_rows(const mandel_image_t *m, uint32_t i, uint32_t *row0,
                                    uint32_t *nrows) {
  uint32_t a = (uint32_t)((uint64_t)i * m->height / m->bands);
  uint32_t b = (uint32_t)((uint64_t)(i + 1) * m->height / m->bands);
  *row0 = a;
  *nrows = b - a;
}

#endif
