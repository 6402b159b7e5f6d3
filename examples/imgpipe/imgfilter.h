/* imgfilter.h: the two area filters of the image-filter demo as plain C functions on pixels of
 * 1 to 4 channels (grey, grey+alpha, RGB, RGBA; alpha is filtered like the others), with no
 * token and no kernel call around them: blur makes each sample the mean of its channel over
 * the (2r+1)x(2r+1) window, rounded half up, and oil the most frequent value
 * (ties to the smallest); windows are clipped at the borders. The `filters` kernel module
 * (filters.c) checks its tokens and calls these; the same source also builds
 * liblt_filters_plain.so, which exports them for callers outside Lithium (the Dask side of
 * scripts/bench/peers, through ctypes). No state: any thread, many at once. */
#ifndef LT_EXAMPLE_IMGFILTER_H
#define LT_EXAMPLE_IMGFILTER_H

#include <stdint.h>

/* Hidden in the kernel module (it exports kernels only), exported from the plain library. */
#ifdef IMG_FILTER_EXPORT
#define IMG_FILTER_API __attribute__((visibility("default")))
#else
#define IMG_FILTER_API
#endif

/* img_filter_blur writes the blur of radius r of the w x h image `pixels` of `channels`
 * channels (w * h * channels bytes, row by row, a pixel's channels together) into `out` (as
 * many bytes, not overlapping `pixels`). w and h must be at least 1, channels 1..4, r at most
 * IMG_MAX_RADIUS (imgtoken.h). Returns 0, or -1 when out of memory. */
IMG_FILTER_API int img_filter_blur(const unsigned char *pixels, uint32_t w, uint32_t h,
                                   uint32_t channels, uint32_t r, unsigned char *out);

/* img_filter_oil is the oil-paint filter of radius r, with the arguments and results of
 * img_filter_blur. */
IMG_FILTER_API int img_filter_oil(const unsigned char *pixels, uint32_t w, uint32_t h,
                                  uint32_t channels, uint32_t r, unsigned char *out);

#endif
