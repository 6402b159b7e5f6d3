/* imgdecode.c: image files into tokens with stb_image (imgdecode.h; Debian's libstb carries the
 * implementation). stb_image tries every decoder in turn and reports the last one's complaint,
 * so the format is sniffed here first to say what is wrong with a file. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <stb/stb_image.h>

#include "imgdecode.h"
#include "imgtoken.h"

/* sniff names the format of an encoded image from its first bytes, or NULL when it is none of
 * the common ones. */
static const char *sniff(const unsigned char *d, size_t n) {
  if (n >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0) return "PNG";
  if (n >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff) return "JPEG";
  if (n >= 2 && d[0] == 'P' && (d[1] == '5' || d[1] == '6')) return "PPM";
  if (n >= 2 && d[0] == 'B' && d[1] == 'M') return "BMP";
  if (n >= 4 && memcmp(d, "GIF8", 4) == 0) return "GIF";
  return NULL;
}

/* unreadable says why stbi_info refused the bytes: a known format with a bad header, or no
 * format stb_image reads. */
static void unreadable(const unsigned char *data, size_t len, char *err, size_t errlen) {
  const char *format = sniff(data, len);
  if (format != NULL)
    snprintf(err, errlen, "corrupt or truncated %s file (bad header)", format);
  else if (len >= 2 && data[0] == 'P' && data[1] >= '1' && data[1] <= '4')
    snprintf(err, errlen, "unsupported format: plain-text PNM (P%c); only binary P5/P6 is read",
             data[1]);
  else
    snprintf(err, errlen,
             "unsupported format: not PNG, JPEG, binary PPM/PGM, BMP, GIF, TGA, PSD, HDR or PIC");
}

int img_decode(const unsigned char *data, size_t len, img_decoded_t *out, char *err,
               size_t errlen) {
  int w = 0, h = 0, comp = 0;
  *out = (img_decoded_t){0};
  if (len > INT_MAX) {
    snprintf(err, errlen, "%zu bytes, more than the %d an image file may have", len, INT_MAX);
    return -1;
  }
  /* The size is checked before decoding, so a hostile header cannot make us allocate. */
  if (!stbi_info_from_memory(data, (int)len, &w, &h, &comp)) {
    unreadable(data, len, err, errlen);
    return -1;
  }
  char why[160];
  if (w <= 0 || h <= 0 || img_size_check((uint32_t)w, (uint32_t)h, why, sizeof why) != 0) {
    snprintf(err, errlen, "%s", why);
    return -1;
  }
  /* comp is the file's own channel count (1..4); asking for it keeps grey and alpha. */
  if (comp < 1 || comp > IMG_MAX_CHANNELS) comp = IMG_CHANNELS;
  int got = 0;
  unsigned char *px = stbi_load_from_memory(data, (int)len, &w, &h, &got, comp);
  if (px == NULL) {
    const char *format = sniff(data, len);
    snprintf(err, errlen, "corrupt or truncated %s file (%dx%d pixels announced)",
             format != NULL ? format : "image", w, h);
    return -1;
  }
  *out = (img_decoded_t){.pixels = px, .w = (uint32_t)w, .h = (uint32_t)h, .c = (uint32_t)comp};
  return 0;
}

void img_decoded_free(img_decoded_t *im) {
  stbi_image_free(im->pixels);
  im->pixels = NULL;
}
