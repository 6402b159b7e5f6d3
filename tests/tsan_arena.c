/* tsan_arena.c: lets Criterion's sandbox start under ThreadSanitizer; linked into every test
 * executable of an LT_SANITIZE=thread build and nowhere else.
 *
 * Criterion 2.4 runs each test through BoxFort, which keeps its state in "inheritable arenas":
 * shared memory that the re-executed child maps at the same fixed address. BoxFort picks
 * that address as 0x200000000000 + ((rand_r(&seed) & 0x3fffff) << 24), skips candidates that
 * mincore() reports as mapped, and gives up after 10 tries. ThreadSanitizer reserves almost
 * all of [0x200000000000, 0x600000000000) for its shadow, its metadata and the protected
 * gaps between them; only 0x550000000000-0x568000000000 (where PIE executables go) stays
 * free. So nearly every try fails: the runner stops with "Could not initialize inheritable
 * arena: Resource temporarily unavailable", or, when its first arena found a place, crashes
 * with a SEGV on address 0x80 when a later one (a test's context) did not.
 *
 * This rand_r, which the executable exports and so interposes for libcriterion, is a
 * xorshift generator whose low 22 bits always name a 16 MiB slot inside that free range; the
 * other bits stay random. Candidates still go through BoxFort's mincore check, so a slot
 * taken by the executable itself is skipped like before. Test processes only. */
#include <stdlib.h>

/* The free application range of ThreadSanitizer's x86-64 layout, in BoxFort's 16 MiB slots
 * counted from its base 0x200000000000. */
#define SLOT_FIRST 0x350000u /* 0x550000000000 */
#define SLOT_COUNT 0x018000u /* up to 0x568000000000 */

__attribute__((visibility("default"))) int rand_r(unsigned *seedp) {
  unsigned x = *seedp != 0 ? *seedp : 0x9e3779b9u;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  *seedp = x;
  unsigned slot = SLOT_FIRST + (x >> 8) % SLOT_COUNT;
  return (int)(((x & 0x1ffu) << 22) | slot);
}
