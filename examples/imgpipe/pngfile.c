/* pngfile.c: PNG output and its check (pngfile.h). Writing uses zlib directly (each row "Up"
 * filtered, deflate at its fastest level): stb_image_write's own deflate takes about 100 ms for
 * a 640x480 image, more than the filters themselves, and this program writes every image on
 * one thread. Reading back uses stb_image. Any thread. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb/stb_image.h>
#include <zlib.h>

#include "imgtoken.h"
#include "pngfile.h"

#define PNG_FILTER_UP 2

static void put_be32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

/* write_chunk writes one PNG chunk: length, type, data and the CRC of type and data. */
static int write_chunk(FILE *f, const char *type, const unsigned char *data, uint32_t len) {
  unsigned char head[8], tail[4];
  put_be32(head, len);
  memcpy(head + 4, type, 4);
  uLong crc = crc32(0, head + 4, 4);
  if (len > 0) crc = crc32(crc, data, len);
  put_be32(tail, (uint32_t)crc);
  return fwrite(head, 1, 8, f) == 8 && (len == 0 || fwrite(data, 1, len, f) == len) &&
                 fwrite(tail, 1, 4, f) == 4
             ? 0
             : -1;
}

/* deflate_rows filters every row with "Up" (the difference from the row above, which suits
 * smooth filtered images) and compresses the lot into *out (caller frees). */
static int deflate_rows(const unsigned char *px, uint32_t w, uint32_t h, unsigned char **out,
                        uLongf *outlen) {
  size_t stride = (size_t)w * IMG_CHANNELS, rawlen = (size_t)h * (stride + 1);
  unsigned char *raw = malloc(rawlen);
  uLongf bound = compressBound((uLong)rawlen);
  unsigned char *z = malloc(bound);
  int rc = -1;
  if (raw != NULL && z != NULL) {
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
    if (compress2(z, &bound, raw, (uLong)rawlen, Z_BEST_SPEED) == Z_OK) rc = 0;
  }
  free(raw);
  if (rc != 0) {
    free(z);
    return -1;
  }
  *out = z;
  *outlen = bound;
  return 0;
}

int img_png_write(const char *path, const unsigned char *token, size_t len, char *err,
                  size_t errlen) {
  (void)len;
  uint32_t w = ex_get_u32(token + 4), h = ex_get_u32(token + 8);
  unsigned char *z = NULL;
  uLongf zlen = 0;
  if (deflate_rows(token + IMG_HEADER, w, h, &z, &zlen) != 0) {
    snprintf(err, errlen, "cannot encode a %ux%u PNG (out of memory)", w, h);
    return -1;
  }
  /* IHDR: size, 8 bits per sample, colour type 2 (RGB), deflate, adaptive filters, no
   * interlace. */
  unsigned char ihdr[13] = {0};
  put_be32(ihdr, w);
  put_be32(ihdr + 4, h);
  ihdr[8] = 8;
  ihdr[9] = 2;
  FILE *f = fopen(path, "wb");
  if (f == NULL) {
    snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
    free(z);
    return -1;
  }
  static const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  /* The largest image deflates to well under the 2^31 - 1 bytes a chunk may hold. */
  int bad = fwrite(signature, 1, 8, f) != 8 || write_chunk(f, "IHDR", ihdr, 13) != 0 ||
            write_chunk(f, "IDAT", z, (uint32_t)zlen) != 0 || write_chunk(f, "IEND", NULL, 0) != 0;
  int saved = errno;
  if (fclose(f) != 0 && !bad) {
    bad = 1;
    saved = errno;
  }
  free(z);
  if (bad) {
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(saved));
    remove(path);
    return -1;
  }
  return 0;
}

int img_png_compare(const char *path, const unsigned char *token, size_t len, char *err,
                    size_t errlen) {
  uint32_t w = ex_get_u32(token + 4), h = ex_get_u32(token + 8);
  int fw = 0, fh = 0, comp = 0;
  unsigned char *px = stbi_load(path, &fw, &fh, &comp, IMG_CHANNELS);
  if (px == NULL) {
    snprintf(err, errlen, "cannot read back %s", path);
    return -1;
  }
  int rc = 0;
  if ((uint32_t)fw != w || (uint32_t)fh != h) {
    snprintf(err, errlen, "%s is %dx%d, the sequential result %ux%u", path, fw, fh, w, h);
    rc = 1;
  } else {
    const unsigned char *want = token + IMG_HEADER;
    size_t n = len - IMG_HEADER;
    for (size_t i = 0; i < n; i++)
      if (px[i] != want[i]) {
        size_t pixel = i / IMG_CHANNELS;
        snprintf(err, errlen,
                 "%s: first difference at pixel (%zu, %zu) channel %zu: %u, the "
                 "sequential result %u",
                 path, pixel % w, pixel / w, i % IMG_CHANNELS, px[i], want[i]);
        rc = 1;
        break;
      }
  }
  stbi_image_free(px);
  return rc;
}
