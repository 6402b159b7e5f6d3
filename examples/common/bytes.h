/* bytes.h: little-endian encoding of the integers and doubles in the example tokens, shared
 * by the example programs and their kernel modules so both sides agree on every byte on any
 * host. Header-only, no state: any thread. */
#ifndef LT_EXAMPLE_BYTES_H
#define LT_EXAMPLE_BYTES_H

#include <stdint.h>
#include <string.h>

/* ex_get_u32 reads 4 little-endian bytes. */
static inline uint32_t ex_get_u32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ex_put_u32 writes v as 4 little-endian bytes. */
static inline void ex_put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++, v >>= 8)
    p[i] = (unsigned char)(v & 0xff);
}

/* ex_get_u64 reads 8 little-endian bytes. */
static inline uint64_t ex_get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

/* ex_put_u64 writes v as 8 little-endian bytes. */
static inline void ex_put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++, v >>= 8)
    p[i] = (unsigned char)(v & 0xff);
}

/* ex_get_i64 reads a two's complement int64 from 8 little-endian bytes. */
static inline int64_t ex_get_i64(const unsigned char *p) {
  return (int64_t)ex_get_u64(p);
}

/* ex_put_i64 writes v as 8 little-endian bytes. */
static inline void ex_put_i64(unsigned char *p, int64_t v) {
  ex_put_u64(p, (uint64_t)v);
}

/* ex_get_f64 reads an IEEE 754 double from its 8 little-endian bytes. */
static inline double ex_get_f64(const unsigned char *p) {
  uint64_t bits = ex_get_u64(p);
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

/* ex_put_f64 writes the IEEE 754 bits of d as 8 little-endian bytes. */
static inline void ex_put_f64(unsigned char *p, double d) {
  uint64_t bits;
  memcpy(&bits, &d, sizeof bits);
  ex_put_u64(p, bits);
}

#endif
