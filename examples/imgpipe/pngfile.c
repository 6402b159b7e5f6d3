/* pngfile.c: output files and their check (pngfile.h). Encoding is pngenc.c's, reading back
 * stb_image's. Any thread. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <stb/stb_image.h>

#include "imgtoken.h"
#include "pngenc.h"
#include "pngfile.h"

int img_file_write(const char *path, const unsigned char *data, size_t len, char *err,
                   size_t errlen) {
  FILE *f = fopen(path, "wb");
  if (f == NULL) {
    snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
    return -1;
  }
  int bad = fwrite(data, 1, len, f) != len;
  int saved = errno;
  if (fclose(f) != 0 && !bad) {
    bad = 1;
    saved = errno;
  }
  if (bad) {
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(saved));
    remove(path);
    return -1;
  }
  return 0;
}

int img_file_compare(const char *path, const unsigned char *data, size_t len, char *err,
                     size_t errlen) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (f == NULL || fstat(fileno(f), &st) != 0) {
    snprintf(err, errlen, "cannot read back %s: %s", path, strerror(errno));
    if (f != NULL) fclose(f);
    return -1;
  }
  int rc = 0;
  if ((uint64_t)st.st_size != len) {
    snprintf(err, errlen, "%s is %lld bytes, the sequential result %zu", path,
             (long long)st.st_size, len);
    rc = 1;
  }
  unsigned char buf[65536];
  size_t off = 0, n;
  while (rc == 0 && off < len && (n = fread(buf, 1, sizeof buf, f)) > 0) {
    size_t same = 0, cmp = n < len - off ? n : len - off;
    while (same < cmp && buf[same] == data[off + same])
      same++;
    if (same < cmp) {
      snprintf(err, errlen, "%s: first difference at byte %zu of %zu", path, off + same, len);
      rc = 1;
    }
    off += cmp;
  }
  if (rc == 0 && off != len) {
    snprintf(err, errlen, "cannot read back %s: %s", path,
             ferror(f) ? strerror(errno) : "the file shrank");
    rc = -1;
  }
  fclose(f);
  return rc;
}

int img_png_write(const char *path, const unsigned char *token, size_t len, char *err,
                  size_t errlen) {
  (void)len;
  uint32_t w = ex_get_u32(token + 4), h = ex_get_u32(token + 8), c = ex_get_u32(token + 12);
  unsigned char *png = NULL;
  size_t n = 0;
  if (img_png_encode(token + IMG_HEADER, w, h, c, &png, &n) != 0) {
    snprintf(err, errlen, "cannot encode a %ux%u PNG (out of memory)", w, h);
    return -1;
  }
  int rc = img_file_write(path, png, n, err, errlen);
  free(png);
  return rc;
}

int img_png_compare(const char *path, const unsigned char *token, size_t len, char *err,
                    size_t errlen) {
  uint32_t w = ex_get_u32(token + 4), h = ex_get_u32(token + 8), c = ex_get_u32(token + 12);
  int fw = 0, fh = 0, comp = 0;
  unsigned char *px = stbi_load(path, &fw, &fh, &comp, (int)c);
  if (px == NULL) {
    snprintf(err, errlen, "cannot read back %s", path);
    return -1;
  }
  int rc = 0;
  if ((uint32_t)fw != w || (uint32_t)fh != h || (uint32_t)comp != c) {
    snprintf(err, errlen, "%s is %dx%d of %d channels, the sequential result %ux%u of %u", path, fw,
             fh, comp, w, h, c);
    rc = 1;
  } else {
    const unsigned char *want = token + IMG_HEADER;
    size_t n = len - IMG_HEADER;
    for (size_t i = 0; i < n; i++)
      if (px[i] != want[i]) {
        size_t pixel = i / c;
        snprintf(err, errlen,
                 "%s: first difference at pixel (%zu, %zu) channel %zu: %u, the "
                 "sequential result %u",
                 path, pixel % w, pixel / w, i % c, px[i], want[i]);
        rc = 1;
        break;
      }
  }
  stbi_image_free(px);
  return rc;
}
