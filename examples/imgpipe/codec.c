/* codec.c: the `imgcodec` kernel module of the image-filter demo: the file formats at both ends
 * of the image job, so that the client of `imgpipe --in DIR` only reads and writes file bytes
 * and the servers do all the pixel work.
 *   imgcodec:decode  the bytes of an image file (PNG, JPEG, PPM/PGM, BMP, GIF, TGA, ...) into
 *                    an image token (imgtoken.h) of the file's channels: grey, grey+alpha, RGB
 *                    or RGBA (imgdecode.c)
 *   imgcodec:encode  an image token into the bytes of a PNG file of the same channels
 *                    (pngenc.c)
 * A file that is not an image, is truncated or announces too many pixels fails its decode with
 * the reason (e.g. "imgcodec:decode: corrupt or truncated PNG file (bad header)"); the other
 * images of the stream go on. Kernels run on a server worker thread (or the client's, in local
 * mode) and touch nothing but their own call.
 *
 *   pipe(farm(seq(imgcodec:decode)), farm(seq(filters:blur, "5")),
 *        farm(seq(filters:oil, "5")), farm(seq(imgcodec:encode))) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/kernel.h>

#include "imgdecode.h"
#include "imgtoken.h"
#include "pngenc.h"

/* one_input returns the call's only input in *p and *len, or fails the call. */
static int one_input(lt_call_t *call, const char *name, const unsigned char **p, size_t *len) {
  int k = lt_call_ninputs(call);
  if (k != 1) return lt_call_fail(call, "%s: expects 1 input, got %d", name, k);
  *p = lt_call_input(call, 0, len);
  return 0;
}

/* decode: image file bytes -> token. */
LT_KERNEL(decode, call) {
  const unsigned char *p = NULL;
  size_t len = 0;
  int rc = one_input(call, "imgcodec:decode", &p, &len);
  if (rc != 0) return rc;
  img_decoded_t im;
  char why[256];
  if (img_decode(p, len, &im, why, sizeof why) != 0)
    return lt_call_fail(call, "imgcodec:decode: %s", why);
  size_t n = img_token_bytes(im.w, im.h, im.c);
  unsigned char *out = lt_call_output(call, n);
  if (out == NULL) {
    img_decoded_free(&im);
    return lt_call_fail(call, "imgcodec:decode: out of memory for a %zu-byte image", n);
  }
  img_token_put_header_n(out, im.w, im.h, im.c);
  memcpy(out + IMG_HEADER, im.pixels, n - IMG_HEADER);
  img_decoded_free(&im);
  return 0;
}

/* encode: token -> PNG file bytes. */
LT_KERNEL(encode, call) {
  const unsigned char *p = NULL;
  size_t len = 0;
  int rc = one_input(call, "imgcodec:encode", &p, &len);
  if (rc != 0) return rc;
  uint32_t w = 0, h = 0, c = 0;
  char why[160];
  if (img_token_check(p, len, &w, &h, &c, why, sizeof why) != 0)
    return lt_call_fail(call, "imgcodec:encode: %s", why);
  unsigned char *png = NULL;
  size_t n = 0;
  if (img_png_encode(p + IMG_HEADER, w, h, c, &png, &n) != 0)
    return lt_call_fail(call, "imgcodec:encode: out of memory for a %ux%u PNG", w, h);
  unsigned char *out = lt_call_output(call, n);
  if (out != NULL) memcpy(out, png, n);
  free(png);
  if (out == NULL) return lt_call_fail(call, "imgcodec:encode: out of memory for %zu bytes", n);
  return 0;
}
