/* mandel.c: the `mandel` kernel module, a Mandelbrot image by map (tokens in mandel.h).
 * mandel:split cuts an image task into band tasks, mandel:band computes a band's pixels,
 * mandel:merge checks that the bands tile the image in order and concatenates them. Kernels
 * run on a server worker thread (or the client's, in local mode) and touch nothing but their
 * own call.
 *
 *   map(mandel:split, mandel:band, mandel:merge) */
#include <stdint.h>
#include <string.h>

#include <lithium/kernel.h>

#include "mandel.h"

/* read_image checks the image header at p, or fails the call. */
static int read_image(lt_call_t *call, const unsigned char *p, mandel_image_t *m) {
  char why[160];
  mandel_image_decode(p, m);
  if (mandel_image_check(m, why, sizeof why) != 0) return lt_call_fail(call, "%s", why);
  return 0;
}

/* one_input returns the single input if it has exactly `size` bytes, else
 * NULL after failing the call. */
static const unsigned char *one_input(lt_call_t *call, size_t size, const char *what) {
  int k = lt_call_ninputs(call);
  if (k != 1) {
    lt_call_fail(call, "expects 1 input, got %d", k);
    return NULL;
  }
  size_t len = 0;
  const unsigned char *p = lt_call_input(call, 0, &len);
  if (p == NULL || len != size) {
    lt_call_fail(call, "%s is %zu bytes, got %zu", what, size, len);
    return NULL;
  }
  return p;
}

/* split: image task -> one band task per band, top to bottom. */
LT_KERNEL(split, call) {
  const unsigned char *p = one_input(call, MANDEL_IMAGE_SIZE, "an image task");
  if (p == NULL) return 1;
  mandel_image_t m;
  int rc = read_image(call, p, &m);
  if (rc != 0) return rc;
  for (uint32_t i = 0; i < m.bands; i++) {
    uint32_t row0, nrows;
    mandel_band_rows(&m, i, &row0, &nrows);
    unsigned char *out = lt_call_output(call, MANDEL_BAND_SIZE);
    if (out == NULL) return lt_call_fail(call, "out of memory");
    memcpy(out, p, MANDEL_IMAGE_SIZE);
    ex_put_u32(out + MANDEL_IMAGE_SIZE, row0);
    ex_put_u32(out + MANDEL_IMAGE_SIZE + 4, nrows);
  }
  return 0;
}

/* shade maps an escape time to a grey level: 0 inside the set, brighter the slower a point
 * escapes. */
static unsigned char shade(uint32_t it, uint32_t max_iter) {
  if (it >= max_iter) return 0;
  double t = (double)it / ((double)it + 16.0);
  return (unsigned char)(1 + (unsigned)(254.0 * t));
}

/* escape_time iterates z <- z^2 + c from 0 until |z| > 2 or max_iter steps. */
static uint32_t escape_time(double cr, double ci, uint32_t max_iter) {
  double zr = 0, zi = 0, zr2 = 0, zi2 = 0;
  uint32_t it = 0;
  while (it < max_iter && zr2 + zi2 <= 4.0) {
    zi = 2.0 * zr * zi + ci;
    zr = zr2 - zi2 + cr;
    zr2 = zr * zr;
    zi2 = zi * zi;
    it++;
  }
  return it;
}

/* band: band task -> its pixels, after a header naming width, first row and row count. */
LT_KERNEL(band, call) {
  const unsigned char *p = one_input(call, MANDEL_BAND_SIZE, "a band task");
  if (p == NULL) return 1;
  mandel_image_t m;
  int rc = read_image(call, p, &m);
  if (rc != 0) return rc;
  uint32_t row0 = ex_get_u32(p + MANDEL_IMAGE_SIZE), nrows = ex_get_u32(p + MANDEL_IMAGE_SIZE + 4);
  if (nrows < 1 || row0 >= m.height || nrows > m.height - row0)
    return lt_call_fail(call, "rows %u..%u+%u are not inside the image's %u rows", row0, row0,
                        nrows, m.height);
  size_t npix = (size_t)m.width * nrows;
  unsigned char *out = lt_call_output(call, MANDEL_PIX_HEADER + npix);
  if (out == NULL) return lt_call_fail(call, "out of memory for %zu pixels", npix);
  ex_put_u32(out, m.width);
  ex_put_u32(out + 4, row0);
  ex_put_u32(out + 8, nrows);
  unsigned char *pix = out + MANDEL_PIX_HEADER;
  double dx = (m.re_max - m.re_min) / m.width, dy = (m.im_max - m.im_min) / m.height;
  for (uint32_t y = 0; y < nrows; y++) {
    double ci = m.im_max - dy * ((double)(row0 + y) + 0.5); /* row 0 is the top */
    for (uint32_t x = 0; x < m.width; x++) {
      double cr = m.re_min + dx * ((double)x + 0.5);
      *pix++ = shade(escape_time(cr, ci, m.max_iter), m.max_iter);
    }
  }
  return 0;
}

/* merge: the bands' pixels, which must tile the image from row 0 in order, -> the image:
 * width, height, then every row. */
LT_KERNEL(merge, call) {
  int k = lt_call_ninputs(call);
  if (k < 1) return lt_call_fail(call, "expects at least 1 band, got 0");
  uint32_t width = 0, rows = 0;
  size_t total = 0;
  for (int i = 0; i < k; i++) {
    size_t len = 0;
    const unsigned char *p = lt_call_input(call, i, &len);
    if (p == NULL || len < MANDEL_PIX_HEADER)
      return lt_call_fail(call, "band %d has %zu bytes, less than its header", i, len);
    uint32_t w = ex_get_u32(p), row0 = ex_get_u32(p + 4), nrows = ex_get_u32(p + 8);
    if (i == 0) width = w;
    if (w != width || w < 1 || w > MANDEL_MAX_SIDE)
      return lt_call_fail(call, "band %d is %u pixels wide, band 0 is %u", i, w, width);
    if (row0 != rows)
      return lt_call_fail(call, "band %d starts at row %u, expected row %u", i, row0, rows);
    if (nrows < 1 || nrows > MANDEL_MAX_SIDE - rows)
      return lt_call_fail(call, "band %d has %u rows", i, nrows);
    if (len != MANDEL_PIX_HEADER + (size_t)w * nrows)
      return lt_call_fail(call, "band %d has %zu bytes, expected %zu for %ux%u", i, len,
                          MANDEL_PIX_HEADER + (size_t)w * nrows, w, nrows);
    rows += nrows;
    total += len - MANDEL_PIX_HEADER;
  }
  unsigned char *out = lt_call_output(call, MANDEL_OUT_HEADER + total);
  if (out == NULL) return lt_call_fail(call, "out of memory for %zu pixels", total);
  ex_put_u32(out, width);
  ex_put_u32(out + 4, rows);
  out += MANDEL_OUT_HEADER;
  for (int i = 0; i < k; i++) {
    size_t len = 0;
    const unsigned char *p = lt_call_input(call, i, &len);
    memcpy(out, p + MANDEL_PIX_HEADER, len - MANDEL_PIX_HEADER);
    out += len - MANDEL_PIX_HEADER;
  }
  return 0;
}
