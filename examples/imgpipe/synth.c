/* synth.c: deterministic synthetic test images (synth.h). Integer arithmetic only, driven by a
 * splitmix64 generator seeded from the image index, so every host draws the same pixels. No
 * state: any thread. */
#include "synth.h"

#define SEED    0x6c697468696d6770ull /* "lithimgp" */
#define SHAPES  12
#define SPECKLE 64 /* one pixel in SPECKLE is salt or pepper */

/* next is splitmix64: a small, well-mixed generator whose whole state is one counter. */
static uint64_t next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* below returns a number in 0..n-1 (n > 0); the modulo bias is irrelevant for pictures. */
static uint32_t below(uint64_t *state, uint32_t n) {
  return (uint32_t)(next(state) % n);
}

static unsigned char clamp(int v) {
  return (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* gradient fills the image with a blend of two random colours along a random direction. */
static void gradient(unsigned char *rgb, uint32_t w, uint32_t h, uint64_t *st) {
  int c0[3], c1[3];
  for (int c = 0; c < 3; c++) {
    c0[c] = (int)below(st, 256);
    c1[c] = (int)below(st, 256);
  }
  /* Direction (dx, dy) with small integer weights; t runs over 0..span along it. */
  int64_t dx = (int64_t)below(st, 9) - 4, dy = (int64_t)below(st, 9) - 4;
  if (dx == 0 && dy == 0) dx = 1;
  int64_t lo = 0, hi = 0;
  int64_t corners[4] = {0, dx * (w - 1), dy * (h - 1), dx * (w - 1) + dy * (h - 1)};
  for (int i = 0; i < 4; i++) {
    lo = corners[i] < lo ? corners[i] : lo;
    hi = corners[i] > hi ? corners[i] : hi;
  }
  int64_t span = hi - lo > 0 ? hi - lo : 1;
  for (uint32_t y = 0; y < h; y++)
    for (uint32_t x = 0; x < w; x++) {
      int64_t t = dx * x + dy * y - lo;
      unsigned char *p = rgb + ((size_t)y * w + x) * 3;
      for (int c = 0; c < 3; c++)
        p[c] = (unsigned char)((c0[c] * (span - t) + c1[c] * t) / span);
    }
}

/* shapes draws filled circles and rectangles of random colours, sizes and places. */
static void shapes(unsigned char *rgb, uint32_t w, uint32_t h, uint64_t *st) {
  uint32_t minside = w < h ? w : h;
  for (int s = 0; s < SHAPES; s++) {
    unsigned char col[3] = {(unsigned char)below(st, 256), (unsigned char)below(st, 256),
                            (unsigned char)below(st, 256)};
    int64_t cx = below(st, w), cy = below(st, h);
    int64_t rad = 1 + below(st, minside / 4 + 1);
    int circle = below(st, 2) == 0;
    int64_t hw = circle ? rad : 1 + below(st, w / 3 + 1),
            hh = circle ? rad : 1 + below(st, h / 3 + 1);
    int64_t y0 = cy - hh < 0 ? 0 : cy - hh, y1 = cy + hh >= h ? h - 1 : cy + hh;
    int64_t x0 = cx - hw < 0 ? 0 : cx - hw, x1 = cx + hw >= w ? w - 1 : cx + hw;
    for (int64_t y = y0; y <= y1; y++)
      for (int64_t x = x0; x <= x1; x++) {
        if (circle && (x - cx) * (x - cx) + (y - cy) * (y - cy) > rad * rad) continue;
        unsigned char *p = rgb + ((size_t)y * w + (size_t)x) * 3;
        p[0] = col[0];
        p[1] = col[1];
        p[2] = col[2];
      }
  }
}

/* noise adds a little grain to every sample and salt-and-pepper speckles here and there. */
static void noise(unsigned char *rgb, uint32_t w, uint32_t h, uint64_t *st) {
  size_t n = (size_t)w * h;
  for (size_t i = 0; i < n; i++) {
    unsigned char *p = rgb + i * 3;
    uint64_t r = next(st);
    if (r % SPECKLE == 0) {
      unsigned char v = (r >> 8) & 1 ? 255 : 0;
      p[0] = p[1] = p[2] = v;
      continue;
    }
    for (int c = 0; c < 3; c++)
      p[c] = clamp(p[c] + (int)((r >> (16 + 8 * c)) % 25) - 12);
  }
}

void img_synth_fill(unsigned char *rgb, uint32_t width, uint32_t height, uint64_t index) {
  uint64_t st = SEED ^ (index * 0xd1b54a32d192ed03ull);
  gradient(rgb, width, height, &st);
  shapes(rgb, width, height, &st);
  noise(rgb, width, height, &st);
}
