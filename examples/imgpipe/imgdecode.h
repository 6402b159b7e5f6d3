/* imgdecode.h: an encoded image file (PNG, JPEG, PPM/PGM, BMP, GIF, TGA, PSD, HDR, PIC) decoded
 * into an image token (imgtoken.h) with stb_image, keeping its channels: grey stays grey, grey
 * and alpha stays grey+alpha, RGB stays RGB, RGBA stays RGBA (16-bit samples become 8-bit).
 * The `imgcodec` kernel module's decode kernel calls it on the servers. Any thread, many at
 * once (stb_image keeps its failure reason per thread). */
#ifndef LT_EXAMPLE_IMGDECODE_H
#define LT_EXAMPLE_IMGDECODE_H

#include <stddef.h>

#include <stdint.h>

/* A decoded image: w * h pixels of c channels, row by row (stb_image's buffer). */
typedef struct img_decoded {
  unsigned char *pixels;
  uint32_t w, h, c;
} img_decoded_t;

/* img_decode decodes the `len` bytes of an image file at data into *out (free its pixels with
 * img_decoded_free). The size announced by the header is checked against the demo's limits
 * (imgtoken.h) before any pixel is allocated. Returns 0, or -1 with the reason in err (e.g.
 * "corrupt or truncated PNG file (bad header)", "unsupported format: ...", "6000x6000 is more
 * than 33554432 pixels"). */
int img_decode(const unsigned char *data, size_t len, img_decoded_t *out, char *err, size_t errlen);

/* img_decoded_free frees the pixels of an image img_decode filled in. */
void img_decoded_free(img_decoded_t *im);

#endif
