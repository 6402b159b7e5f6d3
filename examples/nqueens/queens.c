/* queens.c: the `queens` kernel module, counting the solutions of the n-queens problem by
 * divide and conquer. A task is a partial board: byte 0 is n (1..32), byte 1 the cut-off
 * depth (boards with that many queens are counted sequentially), then one byte per placed
 * queen, the column of the queen in rows 0, 1, ...; the queens must not attack each other.
 * A result is a solution count, one little-endian int64. Kernels run on a server worker
 * thread (or the client's, in local mode) and touch nothing but their own call.
 *
 *   dc(queens:deep, queens:place, queens:count, queens:sum) */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include <lithium/kernel.h>

#include "bytes.h"

#define HEADER      2
#define MAX_N       32
#define RESULT_SIZE 8

typedef struct board {
  unsigned n, depth, placed;
  const unsigned char *raw;  /* the task, borrowed */
  const unsigned char *cols; /* its `placed` columns */
  /* Attacked squares of the next row, as bit masks over the columns. */
  uint64_t cols_used, diag_left, diag_right;
} board_t;

/* read_board reads and checks the single task input, or fails the call. */
static int read_board(lt_call_t *call, board_t *b) {
  int k = lt_call_ninputs(call);
  if (k != 1) return lt_call_fail(call, "expects 1 input, got %d", k);
  size_t len = 0;
  const unsigned char *p = lt_call_input(call, 0, &len);
  if (p == NULL || len < HEADER)
    return lt_call_fail(call, "a task is n, cut-off depth, placed columns (2+ bytes), got %zu",
                        len);
  *b = (board_t){
      .n = p[0], .depth = p[1], .placed = (unsigned)(len - HEADER), .raw = p, .cols = p + HEADER};
  if (b->n < 1 || b->n > MAX_N)
    return lt_call_fail(call, "n must be in 1..%d, got %u", MAX_N, b->n);
  if (b->placed > b->n)
    return lt_call_fail(call, "%u queens placed on a board of %u rows", b->placed, b->n);
  uint64_t all = (1ULL << b->n) - 1;
  for (unsigned row = 0; row < b->placed; row++) {
    unsigned c = b->cols[row];
    if (c >= b->n)
      return lt_call_fail(call, "the queen of row %u is in column %u of %u", row, c, b->n);
    uint64_t bit = 1ULL << c;
    if ((b->cols_used | b->diag_left | b->diag_right) & bit)
      return lt_call_fail(call, "the queen of row %u (column %u) is attacked", row, c);
    b->cols_used |= bit;
    b->diag_left = ((b->diag_left | bit) << 1) & all;
    b->diag_right = (b->diag_right | bit) >> 1;
  }
  return 0;
}

/* free_columns returns the columns of the next row no queen attacks. */
static uint64_t free_columns(const board_t *b) {
  uint64_t all = (1ULL << b->n) - 1;
  return ~(b->cols_used | b->diag_left | b->diag_right) & all;
}

/* deep: the condition; a board with `depth` queens (or a full one) is a base case. */
LT_KERNEL(deep, call) {
  board_t b;
  int rc = read_board(call, &b);
  if (rc != 0) return rc;
  return lt_call_answer(call, b.placed >= b.depth || b.placed == b.n);
}

/* place: the divide; one part per safe column of the next row, which may be none. */
LT_KERNEL(place, call) {
  board_t b;
  int rc = read_board(call, &b);
  if (rc != 0) return rc;
  if (b.placed == b.n) return lt_call_fail(call, "the board is full");
  size_t len = HEADER + b.placed;
  for (uint64_t avail = free_columns(&b); avail != 0; avail &= avail - 1) {
    unsigned char *out = lt_call_output(call, len + 1);
    if (out == NULL) return lt_call_fail(call, "out of memory");
    memcpy(out, b.raw, len);
    out[len] = (unsigned char)__builtin_ctzll(avail);
  }
  return 0;
}

/* count_from counts the ways to complete rows `row`.. given the attacked columns. */
static int64_t count_from(unsigned n, unsigned row, uint64_t cols, uint64_t left, uint64_t right) {
  if (row == n) return 1;
  uint64_t all = (1ULL << n) - 1;
  int64_t total = 0;
  for (uint64_t avail = ~(cols | left | right) & all; avail != 0; avail &= avail - 1) {
    uint64_t bit = avail & -avail;
    total += count_from(n, row + 1, cols | bit, ((left | bit) << 1) & all, (right | bit) >> 1);
  }
  return total;
}

/* count: the base case, the number of solutions that extend the board, sequentially. */
LT_KERNEL(count, call) {
  board_t b;
  int rc = read_board(call, &b);
  if (rc != 0) return rc;
  unsigned char *out = lt_call_output(call, RESULT_SIZE);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  ex_put_i64(out, count_from(b.n, b.placed, b.cols_used, b.diag_left, b.diag_right));
  return 0;
}

/* sum: the combine; the counts of the parts added (0 parts: 0). */
LT_KERNEL(sum, call) {
  int k = lt_call_ninputs(call);
  int64_t total = 0;
  for (int i = 0; i < k; i++) {
    size_t len = 0;
    const unsigned char *p = lt_call_input(call, i, &len);
    if (p == NULL || len != RESULT_SIZE)
      return lt_call_fail(call, "input %d must be %d bytes (int64), got %zu", i, RESULT_SIZE, len);
    int64_t x = ex_get_i64(p);
    if (x < 0) return lt_call_fail(call, "input %d is negative: %" PRId64, i, x);
    if (__builtin_add_overflow(total, x, &total))
      return lt_call_fail(call, "the total overflows int64");
  }
  unsigned char *out = lt_call_output(call, RESULT_SIZE);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  ex_put_i64(out, total);
  return 0;
}
