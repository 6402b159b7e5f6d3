/* pngenc.c: PNG encoding (pngenc.h) with zlib directly: stb_image_write's own deflate took
 * about 100 ms for a 640x480 image, more than the filters themselves. The file is assembled
 * in one buffer: signature, IHDR, one IDAT deflated in place, IEND. */
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "pngenc.h"

#define PNG_FILTER_UP 2
#define CHUNK_EXTRA   12 /* length, type and CRC around a chunk's data */

static void put_be32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

/* put_chunk writes the chunk `type` whose len data bytes are already at p + 8: its length, type
 * and the CRC of type and data. Returns the chunk's size. */
static size_t put_chunk(unsigned char *p, const char *type, uint32_t len) {
  put_be32(p, len);
  memcpy(p + 4, type, 4);
  put_be32(p + 8 + len, (uint32_t)crc32(0, p + 4, 4 + len));
  return (size_t)len + CHUNK_EXTRA;
}

/* filter_rows returns the rows of the image each behind its filter byte, "Up" filtered (the
 * difference from the row above, which suits smooth filtered images); caller frees. */
static unsigned char *filter_rows(const unsigned char *px, uint32_t h, size_t stride) {
  unsigned char *raw = malloc((size_t)h * (stride + 1));
  if (raw == NULL) return NULL;
  for (uint32_t y = 0; y < h; y++) {
    unsigned char *o = raw + (size_t)y * (stride + 1);
    const unsigned char *row = px + (size_t)y * stride, *up = row - stride;
    o[0] = PNG_FILTER_UP;
    if (y == 0)
      memcpy(o + 1, row, stride);
    else
      for (size_t i = 0; i < stride; i++)
        o[1 + i] = (unsigned char)(row[i] - up[i]);
  }
  return raw;
}

int img_png_encode(const unsigned char *pixels, uint32_t w, uint32_t h, uint32_t c,
                   unsigned char **png, size_t *len) {
  static const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  static const unsigned char colour_type[5] = {0, 0, 4, 2, 6}; /* by channel count */
  size_t stride = (size_t)w * c, rawlen = (size_t)h * (stride + 1);
  unsigned char *raw = filter_rows(pixels, h, stride);
  uLongf zlen = compressBound((uLong)rawlen);
  size_t cap = 8 + (13 + CHUNK_EXTRA) + (zlen + CHUNK_EXTRA) + CHUNK_EXTRA;
  unsigned char *buf = raw != NULL ? malloc(cap) : NULL;
  if (buf == NULL) {
    free(raw);
    return -1;
  }
  size_t n = 0;
  memcpy(buf, signature, 8);
  n += 8;
  /* IHDR: size, 8 bits per sample, colour type, deflate, adaptive filters, no interlace. */
  unsigned char *ihdr = buf + n + 8;
  memset(ihdr, 0, 13);
  put_be32(ihdr, w);
  put_be32(ihdr + 4, h);
  ihdr[8] = 8;
  ihdr[9] = colour_type[c <= 4 ? c : 2];
  n += put_chunk(buf + n, "IHDR", 13);
  /* The largest image deflates to well under the 2^31 - 1 bytes a chunk may hold. */
  int rc = compress2(buf + n + 8, &zlen, raw, (uLong)rawlen, Z_BEST_SPEED);
  free(raw);
  if (rc != Z_OK) {
    free(buf);
    return -1;
  }
  n += put_chunk(buf + n, "IDAT", (uint32_t)zlen);
  n += put_chunk(buf + n, "IEND", 0);
  *png = buf;
  *len = n;
  return 0;
}
