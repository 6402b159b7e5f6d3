/* examples/bench/datak.c: the `data` kernel module, the kernels of the data-heavy benchmarks
 * (shared/BENCHMARKS.md: msort, bigpipe): few instructions over large values, where the
 * cost of moving and allocating bytes shows beside the kernels' own work.
 *
 *   msort: dc(data:small, data:halve, seq(data:sort), data:merge) over a task that is a
 *   little-endian uint32 cut-off followed by uint32 values; a task of at most cut-off
 *   values is a leaf, sorted with qsort. A result is the sorted values alone.
 *
 *   bigpipe: pipe(seq(data:gen), seq(data:xform), seq(data:sum)): gen makes the words of a
 *   16 MiB value (the size in MiB is its text parameter, default 16) from an 8-byte seed,
 *   xform maps each word to a new one (xform_inplace the same, over its input when it may:
 *   lt_call_output_from_input), sum adds the words into 8 bytes.
 *
 * Kernels run on a server worker thread (or the client's, in local mode) and touch nothing
 * but their own call. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/kernel.h>

#define WORD        4
#define HEADER      4 /* msort's cut-off */
#define GEN_MIB     16
#define GEN_MAX_MIB 4096
#define PARAM_MAX   16

static uint32_t get_u32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
  p[2] = (unsigned char)(v >> 16);
  p[3] = (unsigned char)(v >> 24);
}

/* A task of msort: its cut-off and values, borrowed from the call's input. */
typedef struct sort_task {
  uint32_t cutoff;
  size_t count;
  const unsigned char *values;
} sort_task_t;

/* read_task reads msort's single task input, or fails the call (returns its status). */
static int read_task(lt_call_t *call, const char *name, sort_task_t *t) {
  int k = lt_call_ninputs(call);
  if (k != 1) return lt_call_fail(call, "data:%s expects 1 input, got %d", name, k);
  size_t len = 0;
  const unsigned char *p = lt_call_input(call, 0, &len);
  if (len < HEADER || (len - HEADER) % WORD != 0)
    return lt_call_fail(
        call, "data:%s: a task is a uint32 cut-off and uint32 values, got %zu bytes", name, len);
  t->cutoff = get_u32(p);
  if (t->cutoff == 0) return lt_call_fail(call, "data:%s: the cut-off must be >= 1", name);
  t->count = (len - HEADER) / WORD;
  t->values = p + HEADER;
  return 0;
}

/* data:small is msort's condition: a task of at most cut-off values is a leaf. */
LT_KERNEL(small, call) {
  sort_task_t t = {0, 0, NULL};
  int rc = read_task(call, "small", &t);
  return rc != 0 ? rc : lt_call_answer(call, t.count <= t.cutoff);
}

/* part makes one half of a divide: the cut-off and `count` values. */
static int part(lt_call_t *call, uint32_t cutoff, const unsigned char *values, size_t count) {
  unsigned char *out = lt_call_output(call, HEADER + count * WORD);
  if (out == NULL) return lt_call_fail(call, "data:halve: out of memory for %zu values", count);
  put_u32(out, cutoff);
  memcpy(out + HEADER, values, count * WORD);
  return 0;
}

/* data:halve is msort's divide: the first half and the second. */
LT_KERNEL(halve, call) {
  sort_task_t t = {0, 0, NULL};
  int rc = read_task(call, "halve", &t);
  if (rc != 0) return rc;
  if (t.count < 2) return lt_call_fail(call, "data:halve: %zu values cannot be halved", t.count);
  size_t first = t.count / 2;
  rc = part(call, t.cutoff, t.values, first);
  return rc != 0 ? rc : part(call, t.cutoff, t.values + first * WORD, t.count - first);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* data:sort is msort's leaf: the values sorted with qsort (host order is little-endian on
 * every machine the benchmarks run on; the values are copied out whole and sorted there). */
LT_KERNEL(sort, call) {
  sort_task_t t = {0, 0, NULL};
  int rc = read_task(call, "sort", &t);
  if (rc != 0) return rc;
  uint32_t *out = lt_call_output(call, t.count * WORD);
  if (out == NULL) return lt_call_fail(call, "data:sort: out of memory for %zu values", t.count);
  for (size_t i = 0; i < t.count; i++)
    out[i] = get_u32(t.values + i * WORD);
  qsort(out, t.count, WORD, cmp_u32);
  return 0;
}

/* data:merge is msort's combine: two sorted arrays merged into one. */
LT_KERNEL(merge, call) {
  int k = lt_call_ninputs(call);
  if (k != 2) return lt_call_fail(call, "data:merge expects 2 inputs, got %d", k);
  size_t la = 0, lb = 0;
  const uint32_t *a = lt_call_input(call, 0, &la), *b = lt_call_input(call, 1, &lb);
  if (la % WORD != 0 || lb % WORD != 0)
    return lt_call_fail(call, "data:merge: inputs of %zu and %zu bytes are not uint32 arrays", la,
                        lb);
  size_t na = la / WORD, nb = lb / WORD, i = 0, j = 0, o = 0;
  uint32_t *out = lt_call_output(call, la + lb);
  if (out == NULL) return lt_call_fail(call, "data:merge: out of memory for %zu bytes", la + lb);
  while (i < na && j < nb)
    out[o++] = b[j] < a[i] ? b[j++] : a[i++];
  memcpy(out + o, a + i, (na - i) * WORD);
  memcpy(out + o + (na - i), b + j, (nb - j) * WORD);
  return 0;
}

/* gen_bytes reads data:gen's parameter: the size in MiB (default GEN_MIB). */
static int gen_bytes(lt_call_t *call, size_t *bytes) {
  size_t plen = 0;
  const char *p = lt_call_param(call, &plen);
  if (plen == 0) {
    *bytes = (size_t)GEN_MIB << 20;
    return 0;
  }
  char text[PARAM_MAX];
  if (plen >= sizeof text) return lt_call_fail(call, "data:gen: parameter too long");
  memcpy(text, p, plen);
  text[plen] = '\0';
  char *end = NULL;
  unsigned long mib = strtoul(text, &end, 10);
  if (*end != '\0' || mib == 0 || mib > GEN_MAX_MIB)
    return lt_call_fail(call, "data:gen: the size is 1..%d MiB, not '%s'", GEN_MAX_MIB, text);
  *bytes = (size_t)mib << 20;
  return 0;
}

/* gen_words makes `parts` outputs of uint32 words of data:gen's size from the 8-byte seed
 * input (xorshift32 of the seed's low word, never 0, running on from one part to the next). */
static int gen_words(lt_call_t *call, const char *name, int parts) {
  size_t len = 0, bytes = 0;
  const unsigned char *seed = lt_call_input(call, 0, &len);
  if (lt_call_ninputs(call) != 1 || len != 8)
    return lt_call_fail(call, "data:%s expects one 8-byte seed", name);
  int rc = gen_bytes(call, &bytes);
  if (rc != 0) return rc;
  uint32_t x = get_u32(seed) | 1u;
  for (int p = 0; p < parts; p++) {
    uint32_t *out = lt_call_output(call, bytes);
    if (out == NULL) return lt_call_fail(call, "data:%s: out of memory for %zu bytes", name, bytes);
    for (size_t i = 0; i < bytes / WORD; i++) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      out[i] = x;
    }
  }
  return 0;
}

/* data:gen makes a value of uint32 words from its 8-byte seed. */
LT_KERNEL(gen, call) {
  return gen_words(call, "gen", 1);
}

/* data:gen2 is gen as a map's split: two such values (the shmcopy benchmark: round robin
 * places the reader of the second on the other server, which fetches it). */
LT_KERNEL(gen2, call) {
  return gen_words(call, "gen2", 2);
}

/* data:add adds its inputs, little-endian uint64s (data:sum's), into one. */
LT_KERNEL(add, call) {
  uint64_t s = 0;
  for (int k = 0; k < lt_call_ninputs(call); k++) {
    size_t len = 0;
    const unsigned char *in = lt_call_input(call, k, &len);
    if (len != 8) return lt_call_fail(call, "data:add expects uint64 inputs");
    s += (uint64_t)get_u32(in) | (uint64_t)get_u32(in + 4) << 32;
  }
  unsigned char *out = lt_call_output(call, 8);
  if (out == NULL) return lt_call_fail(call, "data:add: out of memory");
  put_u32(out, (uint32_t)s);
  put_u32(out + 4, (uint32_t)(s >> 32));
  return 0;
}

/* data:xform maps each word w of its input to w * 2654435761 + 1 (a new value of the same
 * size). */
LT_KERNEL(xform, call) {
  size_t len = 0;
  const uint32_t *in = lt_call_input(call, 0, &len);
  if (lt_call_ninputs(call) != 1 || len % WORD != 0)
    return lt_call_fail(call, "data:xform expects one array of uint32");
  uint32_t *out = lt_call_output(call, len);
  if (out == NULL) return lt_call_fail(call, "data:xform: out of memory for %zu bytes", len);
  for (size_t i = 0; i < len / WORD; i++)
    out[i] = in[i] * 2654435761u + 1u;
  return 0;
}

/* data:xform_inplace is data:xform written over its input when the call owns it
 * (lt_call_output_from_input; a copy otherwise). */
LT_KERNEL_IN_PLACE(xform_inplace, call) {
  size_t len = 0;
  lt_call_input(call, 0, &len);
  if (lt_call_ninputs(call) != 1 || len % WORD != 0)
    return lt_call_fail(call, "data:xform_inplace expects one array of uint32");
  uint32_t *w = lt_call_output_from_input(call, 0, len);
  if (w == NULL) return lt_call_fail(call, "data:xform_inplace: out of memory for %zu bytes", len);
  for (size_t i = 0; i < len / WORD; i++)
    w[i] = w[i] * 2654435761u + 1u;
  return 0;
}

/* data:sum adds the words of its input into a little-endian uint64. */
LT_KERNEL(sum, call) {
  size_t len = 0;
  const uint32_t *in = lt_call_input(call, 0, &len);
  if (lt_call_ninputs(call) != 1 || len % WORD != 0)
    return lt_call_fail(call, "data:sum expects one array of uint32");
  uint64_t s = 0;
  for (size_t i = 0; i < len / WORD; i++)
    s += in[i];
  unsigned char *out = lt_call_output(call, 8);
  if (out == NULL) return lt_call_fail(call, "data:sum: out of memory");
  put_u32(out, (uint32_t)s);
  put_u32(out + 4, (uint32_t)(s >> 32));
  return 0;
}
