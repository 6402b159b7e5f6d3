/* imgtoken.h: the image token of the image-filter demo, shared by the imgpipe program, the
 * `filters` and `imgcodec` kernel modules and the tests. A token is a 16-byte header of
 * little-endian uint32 (magic "LTIM", width, height, channels) followed by width * height *
 * channels bytes, row by row, top to bottom, the channels of a pixel together: 1 grey, 2 grey
 * and alpha, 3 RGB (the paper's images, and every synthetic one), 4 RGBA. Header-only, no
 * state: any thread. */
#ifndef LT_EXAMPLE_IMGTOKEN_H
#define LT_EXAMPLE_IMGTOKEN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bytes.h"

#define IMG_MAGIC        0x4d49544cu /* the bytes "LTIM" read as a little-endian uint32 */
#define IMG_HEADER       16
#define IMG_CHANNELS     3 /* RGB: the synthetic images and the paper's experiment */
#define IMG_MAX_CHANNELS 4
#define IMG_MAX_SIDE     16384
#define IMG_MAX_PIXELS   (1u << 25) /* 32 Mpixel: a 128 MiB RGBA token */
#define IMG_MAX_RADIUS   1000

/* img_token_bytes returns the token size of a width x height image of `channels` channels
 * (unchecked sizes). */
static inline size_t img_token_bytes(uint32_t width, uint32_t height, uint32_t channels) {
  return IMG_HEADER + (size_t)width * height * channels;
}

/* img_token_size returns the token size of a width x height RGB image (unchecked sizes). */
static inline size_t img_token_size(uint32_t width, uint32_t height) {
  return img_token_bytes(width, height, IMG_CHANNELS);
}

/* img_size_check returns 0 when width x height is an image size the demo accepts, else -1
 * with the reason in why. */
static inline int img_size_check(uint32_t width, uint32_t height, char *why, size_t len) {
  if (width < 1 || width > IMG_MAX_SIDE || height < 1 || height > IMG_MAX_SIDE)
    snprintf(why, len, "width and height must be in 1..%d, got %ux%u", IMG_MAX_SIDE, width, height);
  else if ((uint64_t)width * height > IMG_MAX_PIXELS)
    snprintf(why, len, "%ux%u is more than %u pixels", width, height, IMG_MAX_PIXELS);
  else
    return 0;
  return -1;
}

/* img_token_put_header_n writes the header of a width x height token of `channels` channels
 * at p. */
static inline void img_token_put_header_n(unsigned char *p, uint32_t width, uint32_t height,
                                          uint32_t channels) {
  ex_put_u32(p, IMG_MAGIC);
  ex_put_u32(p + 4, width);
  ex_put_u32(p + 8, height);
  ex_put_u32(p + 12, channels);
}

/* img_token_put_header writes the header of a width x height RGB token at p. */
static inline void img_token_put_header(unsigned char *p, uint32_t width, uint32_t height) {
  img_token_put_header_n(p, width, height, IMG_CHANNELS);
}

/* img_channels_name names a channel count for messages: "grey", "grey+alpha", "RGB", "RGBA". */
static inline const char *img_channels_name(uint32_t channels) {
  static const char *const names[] = {"grey", "grey+alpha", "RGB", "RGBA"};
  return channels >= 1 && channels <= IMG_MAX_CHANNELS ? names[channels - 1] : "?";
}

/* img_token_check validates the `len` bytes at p as an image token: magic, channel count
 * (1..4), size limits and a length that matches the header. Returns 0 with the size in *width,
 * *height and *channels, or -1 with the reason in why. */
static inline int img_token_check(const unsigned char *p, size_t len, uint32_t *width,
                                  uint32_t *height, uint32_t *channels, char *why, size_t whylen) {
  if (p == NULL || len < IMG_HEADER) {
    snprintf(why, whylen, "an image token has a %d-byte header, got %zu bytes", IMG_HEADER, len);
    return -1;
  }
  uint32_t magic = ex_get_u32(p), w = ex_get_u32(p + 4), h = ex_get_u32(p + 8);
  uint32_t c = ex_get_u32(p + 12);
  if (magic != IMG_MAGIC) {
    snprintf(why, whylen, "not an image token (magic 0x%08x, expected 0x%08x)", magic, IMG_MAGIC);
    return -1;
  }
  if (c < 1 || c > IMG_MAX_CHANNELS) {
    snprintf(why, whylen, "%u channels, 1 to %d (grey, grey+alpha, RGB, RGBA) are supported", c,
             IMG_MAX_CHANNELS);
    return -1;
  }
  if (img_size_check(w, h, why, whylen) != 0) return -1;
  if (len != img_token_bytes(w, h, c)) {
    snprintf(why, whylen, "a %ux%u %s token is %zu bytes, got %zu", w, h, img_channels_name(c),
             img_token_bytes(w, h, c), len);
    return -1;
  }
  *width = w;
  *height = h;
  *channels = c;
  return 0;
}

#endif
