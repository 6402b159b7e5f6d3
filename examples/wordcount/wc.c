/* examples/wordcount/wc.c: the `wc` kernel module, word count as map-reduce:
 *
 *   pipe(map(wc:split "8", wc:count, reduce(wc:merge)), wc:top "10")
 *
 * A text is cut into pieces of whole words, each piece counted, the counts merged two at a
 * time where they are (a reduce), and the most frequent words kept. A word is a maximal run
 * of ASCII letters, in lower case; a count table is lines "word count\n" sorted by word.
 * Kernels run on a server worker thread (or the client's, in local mode) and touch nothing
 * but their own call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/kernel.h>

#define MAX_WORD 64

static int is_letter(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* param_num reads the kernel's parameter as a decimal number, `dflt` without one. */
static long param_num(lt_call_t *call, long dflt) {
  size_t len;
  const char *p = lt_call_param(call, &len);
  char buf[24];
  if (p == NULL || len == 0 || len >= sizeof buf) return dflt;
  memcpy(buf, p, len);
  buf[len] = '\0';
  return strtol(buf, NULL, 10);
}

/* split: text -> at most N pieces (param, default 4) of whole words, cut at the first
 * non-letter after each N-th of the text; an empty text is one empty piece. */
LT_KERNEL(split, call) {
  size_t n;
  const unsigned char *in = lt_call_input(call, 0, &n);
  long parts = param_num(call, 4);
  if (lt_call_ninputs(call) != 1) return lt_call_fail(call, "wc:split: expects 1 input");
  if (parts < 1 || parts > 4096) return lt_call_fail(call, "wc:split: pieces must be 1..4096");
  size_t start = 0;
  for (long k = 1; k <= parts && (start < n || k == 1); k++) {
    size_t end = k == parts ? n : n * (size_t)k / (size_t)parts;
    if (end < start) end = start;
    while (end < n && is_letter(in[end]))
      end++;
    void *out = lt_call_output(call, end - start);
    if (out == NULL && end > start) return lt_call_fail(call, "wc:split: out of memory");
    if (end > start) memcpy(out, in + start, end - start);
    start = end;
  }
  return 0;
}

typedef struct entry {
  char word[MAX_WORD + 1];
  long count;
} entry_t;

static int by_word(const void *a, const void *b) {
  return strcmp(((const entry_t *)a)->word, ((const entry_t *)b)->word);
}

/* emit_table writes `n` entries sorted by word, equal words summed, as the output. */
static int emit_table(lt_call_t *call, entry_t *e, size_t n) {
  qsort(e, n, sizeof *e, by_word);
  size_t cap = 1, used = 0;
  for (size_t i = 0; i < n; i++)
    cap += strlen(e[i].word) + 24;
  char *text = malloc(cap);
  if (text == NULL) return lt_call_fail(call, "wc: out of memory");
  for (size_t i = 0; i < n;) {
    size_t j = i;
    long sum = 0;
    while (j < n && strcmp(e[j].word, e[i].word) == 0)
      sum += e[j++].count;
    used += (size_t)snprintf(text + used, cap - used, "%s %ld\n", e[i].word, sum);
    i = j;
  }
  void *out = lt_call_output(call, used);
  if (out != NULL && used > 0) memcpy(out, text, used);
  free(text);
  return out == NULL && used > 0 ? lt_call_fail(call, "wc: out of memory") : 0;
}

/* count: a piece of text -> its count table. */
LT_KERNEL(count, call) {
  size_t n;
  const unsigned char *in = lt_call_input(call, 0, &n);
  entry_t *e = calloc(n / 2 + 1, sizeof *e);
  if (e == NULL) return lt_call_fail(call, "wc:count: out of memory");
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    if (!is_letter(in[i])) {
      i++;
      continue;
    }
    size_t len = 0;
    for (; i < n && is_letter(in[i]); i++)
      if (len < MAX_WORD) e[k].word[len++] = (char)(in[i] | 0x20);
    e[k++].count = 1;
  }
  int rc = emit_table(call, e, k);
  free(e);
  return rc;
}

/* read_table appends the lines of a count table to e (room for them is the caller's). */
static size_t read_table(const char *t, size_t len, entry_t *e) {
  size_t k = 0;
  for (size_t i = 0; i < len; k++) {
    size_t w = 0;
    while (i < len && t[i] != ' ' && w < MAX_WORD)
      e[k].word[w++] = t[i++];
    e[k].count = 0;
    for (i++; i < len && t[i] != '\n'; i++)
      e[k].count = e[k].count * 10 + (t[i] - '0');
    i++;
  }
  return k;
}

/* lines counts the lines of a table. */
static size_t lines(const char *t, size_t len) {
  size_t k = 0;
  for (size_t i = 0; i < len; i++)
    k += t[i] == '\n';
  return k;
}

/* merge: count tables (two, from a reduce) -> one table with the counts summed. */
LT_KERNEL(merge, call) {
  size_t total = 0;
  for (int i = 0; i < lt_call_ninputs(call); i++) {
    size_t len;
    const char *t = lt_call_input(call, i, &len);
    total += lines(t, len);
  }
  entry_t *e = calloc(total + 1, sizeof *e);
  if (e == NULL) return lt_call_fail(call, "wc:merge: out of memory");
  size_t k = 0;
  for (int i = 0; i < lt_call_ninputs(call); i++) {
    size_t len;
    const char *t = lt_call_input(call, i, &len);
    k += read_table(t, len, e + k);
  }
  int rc = emit_table(call, e, k);
  free(e);
  return rc;
}

static int by_count(const void *a, const void *b) {
  const entry_t *x = a, *y = b;
  if (x->count != y->count) return x->count < y->count ? 1 : -1;
  return strcmp(x->word, y->word);
}

/* top: a count table -> its K most frequent words (param, default 10), most frequent first,
 * ties by word. */
LT_KERNEL(top, call) {
  size_t len;
  const char *t = lt_call_input(call, 0, &len);
  long want = param_num(call, 10);
  entry_t *e = calloc(lines(t, len) + 1, sizeof *e);
  if (e == NULL) return lt_call_fail(call, "wc:top: out of memory");
  size_t k = read_table(t, len, e);
  qsort(e, k, sizeof *e, by_count);
  if (want >= 0 && (size_t)want < k) k = (size_t)want;
  char *text = malloc(k * (MAX_WORD + 24) + 1);
  size_t used = 0;
  for (size_t i = 0; text != NULL && i < k; i++)
    used += (size_t)sprintf(text + used, "%s %ld\n", e[i].word, e[i].count);
  void *out = text != NULL ? lt_call_output(call, used) : NULL;
  if (out != NULL) memcpy(out, text, used);
  free(text);
  free(e);
  return out == NULL && used > 0 ? lt_call_fail(call, "wc:top: out of memory") : 0;
}
