/* pngfile.h: the output side of imgpipe: an image token written as a PNG file, and a PNG file
 * compared, pixel byte for pixel byte, with a token (the --verify check of synthetic images);
 * for files, whose results come from the servers already encoded, the bytes written as they
 * are and compared as they are. Any thread; each call touches only its own file. */
#ifndef LT_EXAMPLE_PNGFILE_H
#define LT_EXAMPLE_PNGFILE_H

#include <stddef.h>

/* img_file_write writes the len bytes at data to path, replacing it. Returns 0, or -1 with the
 * reason in err (a failed write removes the partial file). */
int img_file_write(const char *path, const unsigned char *data, size_t len, char *err,
                   size_t errlen);

/* img_file_compare compares the file at path with the len bytes at data. Returns 0 when they
 * are identical, 1 when they differ (err says where first), -1 when the file cannot be read
 * (err says why). */
int img_file_compare(const char *path, const unsigned char *data, size_t len, char *err,
                     size_t errlen);

/* img_png_write writes the pixels of image token `token` (len bytes, already validated by
 * img_token_check) as a PNG file at path (pngenc.h), replacing it. Returns 0, or -1 with the
 * reason in err. */
int img_png_write(const char *path, const unsigned char *token, size_t len, char *err,
                  size_t errlen);

/* img_png_compare decodes the PNG at path and compares its size and every pixel byte with
 * token. Returns 0 when they are identical, 1 when they differ (err says where first), -1 when
 * the file cannot be read (err says why). */
int img_png_compare(const char *path, const unsigned char *token, size_t len, char *err,
                    size_t errlen);

#endif
