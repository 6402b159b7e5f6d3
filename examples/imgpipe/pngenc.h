/* pngenc.h: an image token's pixels encoded as the bytes of a PNG file, in memory: 8 bits per
 * sample, colour type grey, grey+alpha, RGB or RGBA after the token's channels, every row "Up"
 * filtered, deflate (zlib) at its fastest level. The same pixels give the same bytes on every
 * host with the same zlib. Used by the imgpipe program (synthetic images, written by the
 * client) and by the `imgcodec` module's encode kernel (files, encoded on the servers). No
 * state: any thread. */
#ifndef LT_EXAMPLE_PNGENC_H
#define LT_EXAMPLE_PNGENC_H

#include <stddef.h>
#include <stdint.h>

/* img_png_encode encodes the w x h image `pixels` of c channels (1..4; w * h * c bytes, row by
 * row) as a PNG file in *png (caller frees) of *len bytes. Returns 0, or -1 when out of
 * memory. */
int img_png_encode(const unsigned char *pixels, uint32_t w, uint32_t h, uint32_t c,
                   unsigned char **png, size_t *len);

#endif
