/* synth.h: the deterministic synthetic images of `imgpipe --generate N`: a colour gradient,
 * filled circles and rectangles, and noise from a fixed-seed PRNG, so that the filters have
 * edges to soften and speckles to remove. Image i is the same on every run and host. No
 * state: any thread. */
#ifndef LT_EXAMPLE_SYNTH_H
#define LT_EXAMPLE_SYNTH_H

#include <stddef.h>
#include <stdint.h>

/* img_synth_fill writes synthetic image `index` of width x height pixels as RGB bytes into
 * rgb (width * height * 3 bytes, row by row). */
void img_synth_fill(unsigned char *rgb, uint32_t width, uint32_t height, uint64_t index);

#endif
