/* filters.c: the `filters` kernel module of the image-filter demo (tokens in imgtoken.h), the
 * two area filters of DESIGN.md §12 on images of 1 to 4 channels (grey, grey+alpha, RGB, RGBA;
 * alpha is filtered as one more channel). filters:blur makes each sample the rounded
 * mean of its channel over the (2r+1)x(2r+1) window, filters:oil the mode (ties to the smallest
 * value); windows are clipped at the borders. The radius r is the kernel's parameter, decimal
 * text ("5" when there is none). The kernels check their token and radius here and leave the
 * pixels to imgfilter.c. Kernels run on a server worker thread (or the client's, in local
 * mode) and touch nothing but their own call.
 *
 *   pipe(farm(seq(filters:blur, "5")), farm(seq(filters:oil, "5"))) */
#include <stdint.h>
#include <string.h>

#include <lithium/kernel.h>

#include "imgfilter.h"
#include "imgtoken.h"

#define DEFAULT_RADIUS 5 /* the paper's 11x11 window */

typedef int (*filter_fn)(const unsigned char *pixels, uint32_t w, uint32_t h, uint32_t channels,
                         uint32_t r, unsigned char *out);

/* parse_radius reads the kernel's parameter as a decimal radius in 0..IMG_MAX_RADIUS. */
static int parse_radius(lt_call_t *call, const char *name, uint32_t *r) {
  size_t len = 0;
  const char *p = lt_call_param(call, &len);
  if (p == NULL || len == 0) {
    *r = DEFAULT_RADIUS;
    return 0;
  }
  uint32_t v = 0;
  for (size_t i = 0; i < len; i++) {
    if (p[i] < '0' || p[i] > '9' || len > 4) goto bad;
    v = v * 10 + (uint32_t)(p[i] - '0');
  }
  if (v > IMG_MAX_RADIUS) goto bad;
  *r = v;
  return 0;
bad:
  return lt_call_fail(call,
                      "%s: the parameter must be a radius in 0..%d (decimal text), got '%.*s'",
                      name, IMG_MAX_RADIUS, (int)(len > 32 ? 32 : len), p);
}

/* run_filter checks the call's one input token and the radius, allocates the output token
 * with the same header and fills its pixels with `filter`. Returns 0, or the kernel's failure
 * status. */
static int run_filter(lt_call_t *call, const char *name, filter_fn filter) {
  int k = lt_call_ninputs(call);
  if (k != 1) return lt_call_fail(call, "%s: expects 1 input, got %d", name, k);
  uint32_t r = 0, w = 0, h = 0, c = 0;
  int rc = parse_radius(call, name, &r);
  if (rc != 0) return rc;
  size_t len = 0;
  const unsigned char *p = lt_call_input(call, 0, &len);
  char why[160];
  if (img_token_check(p, len, &w, &h, &c, why, sizeof why) != 0)
    return lt_call_fail(call, "%s: %s", name, why);
  unsigned char *out = lt_call_output(call, len);
  if (out == NULL) return lt_call_fail(call, "%s: out of memory for a %zu-byte image", name, len);
  memcpy(out, p, IMG_HEADER);
  if (filter(p + IMG_HEADER, w, h, c, r, out + IMG_HEADER) != 0)
    return lt_call_fail(call, "%s: out of memory", name);
  return 0;
}

/* blur: rounded mean (half up) per channel. */
LT_KERNEL(blur, call) {
  return run_filter(call, "filters:blur", img_filter_blur);
}

/* oil: mode per channel, ties to the smallest value. */
LT_KERNEL(oil, call) {
  return run_filter(call, "filters:oil", img_filter_oil);
}
