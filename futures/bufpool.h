/* bufpool.h: the buffers kernels write their outputs into (lt_call_output). Buffers of a size
 * seen again come from a per-process pool of kept-mapped regions in size classes (4 per power
 * of two, from LT_BUFPOOL_MIN up), so that a kernel making a 16 MiB output does not fault
 * 4096 fresh pages each time (STYLE 27); an idle buffer up to twice the size asked for
 * serves too. Smaller ones come from malloc. The idle bytes kept
 * are bounded (the oldest idle buffers are unmapped first) and trimmed when idle: a buffer
 * not reused for LT_BUFPOOL_IDLE_TICKS calls of lt__bufpool_tick is unmapped. Under
 * AddressSanitizer an idle buffer is poisoned, so a use after lt__bufpool_free is reported;
 * The pool is off (every buffer from malloc and freed at once) until lt__bufpool_configure
 * turns it on: lithium-server does (--pool-bytes), a client process does not, since nothing
 * there ticks its clock (its sequential evaluator's outputs are malloc'd as before).
 * Every buffer of lt__bufpool_alloc is freed with lt__bufpool_free, never with free().
 * Any thread. */
#ifndef LT_BUFPOOL_H
#define LT_BUFPOOL_H

#include <stddef.h>
#include <stdint.h>

/* The smallest pooled size: below it malloc is as fast and keeps no pages of ours. */
#define LT_BUFPOOL_MIN ((size_t)64 << 10)
/* The idle bytes a server keeps by default (--pool-bytes). */
#define LT_BUFPOOL_DEFAULT_MAX ((uint64_t)256 << 20)
/* Ticks an idle buffer survives; the server ticks every 250 ms: about 2 s. */
#define LT_BUFPOOL_IDLE_TICKS 8

/* What the pool did since the process started (lt__bufpool_stats). */
typedef struct lt_bufpool_stats {
  uint64_t reused;     /* allocations served by a kept buffer */
  uint64_t mapped;     /* allocations that mapped a new region */
  uint64_t unmapped;   /* regions given back to the kernel (bound, trim, too large) */
  uint64_t idle_bytes; /* bytes kept idle now */
  uint64_t idle;       /* buffers kept idle now */
  uint64_t max_bytes;  /* the bound on idle bytes; 0: the pool is off */
} lt_bufpool_stats_t;

/* lt__bufpool_alloc returns a buffer of at least `len` bytes (len 0 gives a valid pointer),
 * owned by the caller until lt__bufpool_free; NULL when out of memory. */
void *lt__bufpool_alloc(size_t len);

/* lt__bufpool_free gives back a buffer of lt__bufpool_alloc; NULL is ignored. */
void lt__bufpool_free(void *p);

/* lt__bufpool_capacity returns the bytes usable at p (at least what was asked for). */
size_t lt__bufpool_capacity(const void *p);

/* lt__bufpool_configure turns the pool on and bounds the idle bytes kept to `max_bytes`
 * (unmapping the oldest idle buffers beyond it now); 0 turns it off again: every later
 * buffer is malloc'd and freed. */
void lt__bufpool_configure(uint64_t max_bytes);

/* lt__bufpool_tick counts one tick of the caller's clock and unmaps the buffers idle for
 * LT_BUFPOOL_IDLE_TICKS of them; returns the bytes unmapped. */
uint64_t lt__bufpool_tick(void);

/* lt__bufpool_trim unmaps every idle buffer; returns the bytes unmapped. */
uint64_t lt__bufpool_trim(void);

/* lt__bufpool_stats fills *st. */
void lt__bufpool_stats(lt_bufpool_stats_t *st);

#endif
