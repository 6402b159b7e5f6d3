/* examples/bench/wordk.c: the word-count kernels of the `data` module (the wordcount
 * benchmark, issue 32): a map-reduce over text generated where it is counted,
 *
 *   map(data:wc_split, pipe(seq(data:wc_gen), seq(data:wc_count)), data:wc_merge)
 *
 * A task is 16 bytes: the text's total size (uint64) and the parts (uint32) and seed
 * (uint32), little-endian. wc_split makes each part's 16 bytes (its size and seed), wc_gen
 * makes a part's text (words of a vocabulary of VOCAB pseudo-words, spaces and newlines),
 * wc_count counts its words with a hash table into a table of "word\tcount\n" lines sorted
 * by word, and wc_merge adds tables up into one, sorted the same way, so any evaluation
 * order gives the same bytes. Kernels run on a server worker thread (or the client's, in
 * local mode) and touch nothing but their own call. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/kernel.h>

#define TASK      16
#define VOCAB     4096
#define WORD_MAX  12
#define MAX_PARTS 4096

static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

/* data:wc_split cuts the task into its parts: each gets its share of the bytes and a seed. */
LT_KERNEL(wc_split, call) {
  size_t len = 0;
  const unsigned char *t = lt_call_input(call, 0, &len);
  if (lt_call_ninputs(call) != 1 || len != TASK)
    return lt_call_fail(call, "data:wc_split expects one 16-byte task");
  uint64_t bytes = get_u64(t), parts = get_u64(t + 8) & 0xffffffffu, seed = get_u64(t + 8) >> 32;
  if (parts == 0 || parts > MAX_PARTS)
    return lt_call_fail(call, "data:wc_split: 1..%d parts, not %llu", MAX_PARTS,
                        (unsigned long long)parts);
  for (uint64_t i = 0; i < parts; i++) {
    unsigned char *out = lt_call_output(call, TASK);
    if (out == NULL) return lt_call_fail(call, "data:wc_split: out of memory");
    put_u64(out, bytes / parts + (i < bytes % parts ? 1 : 0));
    put_u64(out + 8, (seed * 2654435761u + i + 1) & 0xffffffffu);
  }
  return 0;
}

/* vocab_word writes word w of the vocabulary (2..WORD_MAX lowercase letters) into buf and
 * returns its length. */
static size_t vocab_word(uint32_t w, char *buf) {
  uint32_t h = w * 2654435761u ^ 0x5bd1e995u;
  size_t n = 2 + h % (WORD_MAX - 1);
  for (size_t i = 0; i < n; i++) {
    h = h * 1103515245u + 12345u;
    buf[i] = (char)('a' + (h >> 16) % 26);
  }
  return n;
}

/* data:wc_gen makes a part's text: words drawn with a skew towards the first ones (the
 * square of a uniform draw), separated by spaces, a newline after every 12th. */
LT_KERNEL(wc_gen, call) {
  size_t len = 0;
  const unsigned char *t = lt_call_input(call, 0, &len);
  if (lt_call_ninputs(call) != 1 || len != TASK)
    return lt_call_fail(call, "data:wc_gen expects one 16-byte part");
  size_t bytes = (size_t)get_u64(t);
  uint32_t x = (uint32_t)get_u64(t + 8) | 1u;
  char *out = lt_call_output(call, bytes);
  if (out == NULL) return lt_call_fail(call, "data:wc_gen: out of memory for %zu bytes", bytes);
  char words[VOCAB][WORD_MAX];
  size_t lens[VOCAB];
  for (uint32_t w = 0; w < VOCAB; w++)
    lens[w] = vocab_word(w, words[w]);
  size_t o = 0;
  for (unsigned k = 1; o < bytes; k++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    uint64_t u = x % VOCAB;
    uint32_t w = (uint32_t)(u * u / VOCAB);
    size_t n = lens[w] < bytes - o ? lens[w] : bytes - o;
    memcpy(out + o, words[w], n);
    o += n;
    if (o < bytes) out[o++] = k % 12 == 0 ? '\n' : ' ';
  }
  return 0;
}

/* A hash table of words and their counts (open addressing, keys borrowed from the text). */
typedef struct slot {
  const char *word;
  uint32_t len;
  uint64_t count;
} slot_t;

typedef struct table {
  slot_t *slot;
  size_t cap, used;
} table_t;

static uint64_t hash(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
  return h;
}

/* add counts `count` more of word p[0..n) (at most WORD_MAX * 4 bytes); -1 when full. */
static int add(table_t *t, const char *p, size_t n, uint64_t count) {
  if (t->used * 2 >= t->cap) return -1;
  for (size_t i = hash(p, n) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
    slot_t *s = &t->slot[i];
    if (s->word == NULL) {
      *s = (slot_t){p, (uint32_t)n, count};
      t->used++;
      return 0;
    }
    if (s->len == n && memcmp(s->word, p, n) == 0) {
      s->count += count;
      return 0;
    }
  }
}

static int by_word(const void *a, const void *b) {
  const slot_t *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->word, y->word, n);
  return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

/* digits returns the decimal digits of v. */
static size_t digits(uint64_t v) {
  size_t n = 1;
  while (v >= 10) {
    v /= 10;
    n++;
  }
  return n;
}

/* emit makes the call's output: the table's words sorted, one "word\tcount\n" line each. */
static int emit(lt_call_t *call, table_t *t, const char *name) {
  size_t n = 0, bytes = 0;
  for (size_t i = 0; i < t->cap; i++)
    if (t->slot[i].word != NULL) {
      t->slot[n] = t->slot[i];
      bytes += t->slot[n].len + 2 + digits(t->slot[n].count);
      n++;
    }
  qsort(t->slot, n, sizeof *t->slot, by_word);
  char *out = lt_call_output(call, bytes);
  if (out == NULL) return lt_call_fail(call, "%s: out of memory", name);
  for (size_t i = 0, o = 0; i < n; i++) {
    memcpy(out + o, t->slot[i].word, t->slot[i].len);
    o += t->slot[i].len;
    out[o++] = '\t';
    size_t d = digits(t->slot[i].count);
    for (uint64_t v = t->slot[i].count, k = d; k > 0; k--, v /= 10)
      out[o + k - 1] = (char)('0' + v % 10);
    o += d;
    out[o++] = '\n';
  }
  return 0;
}

static int table_new(lt_call_t *call, table_t *t, size_t cap, const char *name) {
  t->cap = cap;
  t->used = 0;
  t->slot = calloc(cap, sizeof *t->slot);
  return t->slot != NULL ? 0 : lt_call_fail(call, "%s: out of memory", name);
}

/* data:wc_count counts the words of a text (runs of bytes other than space and newline). */
LT_KERNEL(wc_count, call) {
  size_t len = 0;
  const char *p = lt_call_input(call, 0, &len);
  if (lt_call_ninputs(call) != 1) return lt_call_fail(call, "data:wc_count expects one text");
  table_t t;
  if (table_new(call, &t, 4 * VOCAB, "data:wc_count") != 0) return 1;
  int rc = 0;
  for (size_t i = 0; i < len && rc == 0;) {
    while (i < len && (p[i] == ' ' || p[i] == '\n'))
      i++;
    size_t start = i;
    while (i < len && p[i] != ' ' && p[i] != '\n')
      i++;
    if (i > start && (i - start > WORD_MAX * 4 || add(&t, p + start, i - start, 1) != 0))
      rc = lt_call_fail(call, "data:wc_count: too many distinct or too long words");
  }
  if (rc == 0) rc = emit(call, &t, "data:wc_count");
  free(t.slot);
  return rc;
}

/* data:wc_merge adds its inputs, tables of wc_count or wc_merge, into one. */
LT_KERNEL(wc_merge, call) {
  int k = lt_call_ninputs(call);
  table_t t;
  if (table_new(call, &t, 4 * VOCAB, "data:wc_merge") != 0) return 1;
  int rc = 0;
  for (int j = 0; j < k && rc == 0; j++) {
    size_t len = 0;
    const char *p = lt_call_input(call, j, &len);
    for (size_t i = 0; i < len && rc == 0;) {
      size_t start = i;
      while (i < len && p[i] != '\t')
        i++;
      size_t n = i - start;
      uint64_t count = 0;
      for (i++; i < len && p[i] >= '0' && p[i] <= '9'; i++)
        count = count * 10 + (uint64_t)(p[i] - '0');
      if (i >= len || p[i] != '\n' || n == 0 || n > WORD_MAX * 4 ||
          add(&t, p + start, n, count) != 0)
        rc = lt_call_fail(call, "data:wc_merge: input %d is not a table of words", j);
      i++;
    }
  }
  if (rc == 0) rc = emit(call, &t, "data:wc_merge");
  free(t.slot);
  return rc;
}
