/* examples/bench/wordcount.c: the `wordcount` benchmark (shared/BENCHMARKS.md, issue 32). A
 * map-reduce word count over 1 GiB of text generated at run time where it is counted,
 * map(data:wc_split, pipe(seq(data:wc_gen), seq(data:wc_count)), data:wc_merge), in 32 parts
 * of 32 MiB: one task, on 2 benchmark-owned local servers with the default options, against
 * the sequential evaluator (lt_eval_run_local) in the same run, alternately, --runs times
 * (default 3); the medians are reported with where the time goes (databench.h). Both sides
 * must give the same table of words and counts, whose counts must add up to the words of
 * the text; the checksum line (FNV-1a 64 of the table) is what scripts/bench/peers compares
 * with Dask's.
 *
 *   build/examples/bench/bench_wordcount [--runs 3]
 *   BENCH_WORDCOUNT_MIB and BENCH_WORDCOUNT_PARTS change the text's size and its parts
 *   (defaults 1024 and 32).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchlib.h"
#include "databench.h"

#define PROG "bench_wordcount"

static const char usage[] = "usage: bench_wordcount [--runs N]\n"
                            "  --runs N   runs of each side, the median is reported (default 3)\n";

/* The task, and the table each side gave. */
typedef struct wc {
  unsigned char task[16];
  uint64_t bytes;
  uint32_t parts;
  lt_buf_t *par; /* the servers' table of this round */
  lt_buf_t *result;
} wc_t;

static long env_long(const char *name, long def, long min, long max) {
  const char *v = getenv(name);
  long x = v != NULL && *v != '\0' ? strtol(v, NULL, 10) : def;
  return x < min ? min : x > max ? max : x;
}

static int work(lt_eval_t *ev, void *arg) {
  wc_t *w = arg;
  lt_future_t *f = NULL;
  int rc = lt_eval_submit(ev, w->task, sizeof w->task, &f);
  if (rc == LT_OK) rc = lt_future_wait(f, -1, &w->result);
  if (rc == LT_OK && lt_buf_error(w->result) != LT_OK) rc = lt_buf_error(w->result);
  if (rc != LT_OK)
    fprintf(stderr, "%s: %s %s\n", PROG, lt_strerror(rc),
            w->result != NULL ? lt_buf_errmsg(w->result) : "");
  lt_future_release(f);
  return rc == LT_OK ? 0 : -1;
}

static lt_skel_t *program(void) {
  return lt_map("data:wc_split", lt_pipeline(lt_seq("data:wc_gen"), lt_seq("data:wc_count"), NULL),
                "data:wc_merge");
}

/* words_of returns the sum of the counts of a table ("word\tcount\n" lines). */
static uint64_t words_of(const lt_buf_t *b) {
  const char *p = lt_buf_data(b);
  size_t len = lt_buf_len(b);
  uint64_t sum = 0;
  for (size_t i = 0; i < len; i++) {
    if (p[i] != '\t') continue;
    sum += strtoull(p + i + 1, NULL, 10);
  }
  return sum;
}

/* run_side runs one side; the sequential one must give the servers' table. */
static int run_side(bench_server_t *srv, const char *hosts, databench_run_t *x, void *arg) {
  wc_t *w = arg;
  w->result = NULL;
  if (databench_run(PROG, program(), NULL, srv, hosts, work, w, x) != 0) {
    lt_buf_free(w->result);
    return -1;
  }
  if (srv != NULL) {
    lt_buf_free(w->par);
    w->par = w->result;
    if (words_of(w->par) == 0) {
      fprintf(stderr, "%s: the table counts no words\n", PROG);
      return -1;
    }
    return 0;
  }
  int same = lt_buf_len(w->result) == lt_buf_len(w->par) &&
             memcmp(lt_buf_data(w->result), lt_buf_data(w->par), lt_buf_len(w->par)) == 0;
  lt_buf_free(w->result);
  if (!same) {
    fprintf(stderr, "%s: the servers' table differs from the sequential evaluator's\n", PROG);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  int runs = 3;
  int rc = bench_parse_args(argc, argv, usage, &runs, NULL);
  if (rc != 0) return rc > 0 ? 0 : 2;
  wc_t w = {.bytes = (uint64_t)env_long("BENCH_WORDCOUNT_MIB", 1024, 1, 65536) << 20,
            .parts = (uint32_t)env_long("BENCH_WORDCOUNT_PARTS", 32, 1, 4096)};
  uint64_t seed = 12345;
  memcpy(w.task, &w.bytes, 8);
  uint64_t ps = (uint64_t)w.parts | seed << 32;
  memcpy(w.task + 8, &ps, 8);
  databench_run_t par[runs], seq[runs];
  int status = databench_compare(PROG, runs, run_side, &w, par, seq) == 0 ? 0 : 1;
  if (status == 0) {
    printf("{\"bench\": \"wordcount\", \"detail\": \"note\", \"note\": \"map(wc_split, "
           "pipe(wc_gen, wc_count), wc_merge) over %llu MiB of text in %u parts, %llu words, "
           "%d local servers with the default options against the sequential evaluator, "
           "median of %d alternating runs\"}\n",
           (unsigned long long)(w.bytes >> 20), w.parts, (unsigned long long)words_of(w.par),
           DATABENCH_SERVERS, runs);
    databench_report("wordcount", par, seq, runs);
    databench_checksum("wordcount", databench_fnv1a(lt_buf_data(w.par), lt_buf_len(w.par)));
  }
  lt_buf_free(w.par);
  return status;
}
