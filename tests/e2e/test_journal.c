/* test_journal.c: the results journal (journal=FILE), with real servers and real files. A
 * client killed with SIGKILL halfway through a run is started again with the same journal:
 * it gets every result, in order, and computes again only what it had not been given. A
 * resume from the journal's index gives the fresh run's results, in order, unordered and
 * through futures; a torn tail (garbage, a record cut short, a last record whose checksum
 * fails) is cut off; a journal of another program is refused by default, naming both
 * programs and the option, and started again under journal_mismatch=recompute; one made
 * with another build of a module (the two copies of shipk) is started again by default and
 * refused under journal_mismatch=refuse; a journal of format 1 is refused; `lithium journal
 * compact` (lt_journal_compact) drops a torn tail, a damaged record and duplicates, atomically. A
 * damaged length in the middle (past the end with intact records after it, or over the
 * format's bounds anywhere) costs that record's task LT_EIO alone: the records after it are
 * replayed, and compact keeps them. A journal path that is a symbolic link is refused, and
 * the control characters of a journaled message are escaped when it is read back. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "harness.h"
#include "log.h"

#define SHIP_A LT_TEST_SHIP_DIR "/a/libshipk.so" /* shipk:tag adds 1000 */
#define SHIP_B LT_TEST_SHIP_DIR "/b/libshipk.so" /* shipk:tag adds 2000 */

#define N 3000

/* journal_path names a journal of this test process; a file left there by a killed run of
 * an earlier process with the same pid goes first (the journal must start empty). */
static void journal_path(char *buf, size_t len) {
  snprintf(buf, len, "/tmp/lt-journal-%d-%ld.jnl", (int)getpid(), (long)random());
  unlink(buf);
}

/* eval_with_journal starts a farm of testk:sleep 1 ms on 2 local servers with `journal`. */
static lt_eval_t *eval_with_journal(const char *journal) {
  /* No backup copies: the test counts the kernels the servers ran. */
  const char *opts[] = {"journal", journal, "backup", "off", NULL};
  return new_eval_with(lt_farm(lt_seq_with("testk:sleep", "1", 1)), 2, opts);
}

/* run_and_report is the child: it reads results in order and writes each count it reached
 * to `fd`, until it is killed. */
static void run_and_report(const char *journal, int fd) {
  lt_eval_t *ev = eval_with_journal(journal);
  submit_i64s(ev, N);
  lt_eval_close(ev);
  for (int i = 0; i < N; i++) {
    lt_buf_t *b = NULL;
    if (lt_eval_next_timeout(ev, 30000, &b) != LT_OK || lt_buf_error(b) != LT_OK ||
        get_i64(lt_buf_data(b)) != i)
      _exit(2);
    lt_buf_free(b);
    int32_t k = i + 1;
    if (write(fd, &k, sizeof k) != sizeof k) _exit(3);
  }
  _exit(0);
}

Test(journal, killed_client_resumes_and_redoes_only_what_was_in_flight, .timeout = 180) {
  char path[128];
  journal_path(path, sizeof path);
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  pid_t child = fork();
  cr_assert_geq(child, 0);
  if (child == 0) {
    close(fds[0]);
    run_and_report(path, fds[1]);
  }
  close(fds[1]);
  int32_t read_before = 0, k;
  while (read_before < N / 2 && read(fds[0], &k, sizeof k) == sizeof k)
    read_before = k;
  kill(child, SIGKILL);
  int status;
  waitpid(child, &status, 0);
  close(fds[0]);
  cr_assert_eq(read_before, N / 2, "the first run stopped early");
  /* Its servers were its children: SIGKILL left them to their idle timeout. The second run
   * spawns its own. */
  lt_eval_t *ev = eval_with_journal(path);
  submit_i64s(ev, N);
  lt_eval_close(ev);
  for (int i = 0; i < N; i++)
    cr_assert_eq(next_i64_within(ev, 30000), i);
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  uint64_t replayed = stats_u64(json, "journal_replayed");
  uint64_t computed = stats_sum(json, "executed"); /* kernels the (new) servers ran */
  /* Every result the first run had handed out was durable; what it had not is computed. */
  cr_assert_geq(replayed, (uint64_t)read_before, "%s", json);
  cr_assert_eq(replayed + computed, N, "%s", json);
  free(json);
  lt_eval_free(ev);
  unlink(path);
}

/* ---------------------------------------------------------------------------------------
 * Helpers of the tests below. */

/* run_inc_eio runs tasks 0..n-1 through farm(testk:inc) on 2 servers with `journal` (and
 * the options `opts`, may be NULL), checks every result in order — input `bad` and `bad2`
 * (-1: none) must read back LT_EIO naming the compaction — and returns the stats. */
static char *run_inc_eio(const char *journal, int n, const char *const *opts, int bad, int bad2) {
  const char *o[16] = {"journal", journal, "backup", "off"};
  int k = 4;
  for (int i = 0; opts != NULL && opts[i] != NULL && k < 14; i++)
    o[k++] = opts[i];
  o[k] = NULL;
  lt_eval_t *ev = new_eval_with(lt_farm(lt_seq("testk:inc")), 2, o);
  submit_i64s(ev, n);
  lt_eval_close(ev);
  for (int i = 0; i < n; i++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next_timeout(ev, 30000, &b), LT_OK, "result %d", i);
    cr_assert_eq(lt_buf_task(b), (uint64_t)i);
    if (i == bad || i == bad2) {
      cr_assert_eq(lt_buf_error(b), LT_EIO, "result %d: %s", i, lt_buf_errmsg(b));
      cr_assert_not_null(strstr(lt_buf_errmsg(b), "journal compact"), "%s", lt_buf_errmsg(b));
    } else {
      cr_assert_eq(lt_buf_error(b), LT_OK, "result %d: %s", i, lt_buf_errmsg(b));
      cr_assert_eq(get_i64(lt_buf_data(b)), i + 1, "result %d", i);
    }
    lt_buf_free(b);
  }
  char *json = stats_of(ev);
  lt_eval_free(ev);
  return json;
}

/* run_inc is run_inc_eio with every result expected right. */
static char *run_inc(const char *journal, int n, const char *const *opts) {
  return run_inc_eio(journal, n, opts, -1, -1);
}

/* expect_counts checks that the run of `json` took `replayed` results from the journal and
 * had the servers compute `computed`. */
static void expect_counts(char *json, uint64_t replayed, uint64_t computed) {
  cr_assert_eq(stats_u64(json, "journal_replayed"), replayed, "%s", json);
  cr_assert_eq(stats_sum(json, "executed"), computed, "%s", json);
  free(json);
}

/* record_offsets reads the journal's layout (journal_record.h): the offset of each record
 * into offs (at most max) and returns how many there are. */
static int record_offsets(const char *path, long *offs, int max) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f);
  unsigned char b[36];
  cr_assert_eq(fseek(f, 18, SEEK_SET), 0);
  cr_assert_eq(fread(b, 1, 4, f), 4);
  long off = 18 + 4 + (long)(b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24) + 4;
  int n = 0;
  while (fseek(f, off, SEEK_SET) == 0 && fread(b, 1, 36, f) == 36 && n < max) {
    uint32_t errlen = b[8] | b[9] << 8 | b[10] << 16 | (uint32_t)b[11] << 24;
    uint64_t datalen = 0;
    for (int i = 19; i >= 12; i--)
      datalen = datalen << 8 | b[i];
    offs[n++] = off;
    off += 36 + (long)errlen + (long)datalen + 4;
  }
  fclose(f);
  return n;
}

static long file_size(const char *path) {
  struct stat sb;
  cr_assert_eq(stat(path, &sb), 0, "%s", path);
  return (long)sb.st_size;
}

/* flip_byte inverts the byte at `off` of the file. */
static void flip_byte(const char *path, long off) {
  int fd = open(path, O_RDWR);
  cr_assert_geq(fd, 0);
  unsigned char c;
  cr_assert_eq(pread(fd, &c, 1, off), 1);
  c ^= 0xff;
  cr_assert_eq(pwrite(fd, &c, 1, off), 1);
  close(fd);
}

static void append_bytes(const char *path, const void *data, size_t len) {
  int fd = open(path, O_WRONLY | O_APPEND);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, data, len), (ssize_t)len);
  close(fd);
}

/* copy_file copies `from` to `to` through a temporary file and a rename, as a build does. */
static void copy_file(const char *from, const char *to) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s.tmp' && mv '%s.tmp' '%s'", from, to, to, to);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* local_start returns what lt_eval_run_local says for `program` with `journal` and the
 * journal_mismatch `policy` (NULL: the default), in module directory `modules`. */
static int local_start(lt_skel_t *program, const char *journal, const char *policy,
                       const char *modules) {
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, program), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "journal", journal), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "modules", modules), LT_OK);
  if (policy != NULL) cr_assert_eq(lt_eval_set(ev, "journal_mismatch", policy), LT_OK);
  int rc = lt_eval_run_local(ev);
  lt_eval_free(ev);
  return rc;
}

/* local_start_logged is local_start with what the run logs on stderr meanwhile copied into
 * out (at most len bytes, NUL-terminated). */
static int local_start_logged(lt_skel_t *program, const char *journal, const char *policy,
                              const char *modules, char *out, size_t len) {
  stderr_capture_t cap;
  stderr_capture_begin(&cap);
  int rc = local_start(program, journal, policy, modules);
  stderr_capture_end(&cap, out, len);
  return rc;
}

/* files_beside counts the files named `path`.* in path's directory (what a replacement of
 * the journal writes beside it, and must rename). */
static int files_beside(const char *path) {
  char pattern[200];
  snprintf(pattern, sizeof pattern, "%s.*", path);
  glob_t g;
  int n = glob(pattern, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
  globfree(&g);
  return n;
}

/* record_of returns the index (in offs, of n) of the record whose result is input v's
 * (v + 1, from testk:inc). */
static int record_of(const char *path, const long *offs, int n, int64_t v) {
  for (int r = 0; r < n; r++) {
    unsigned char b[8];
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    cr_assert_eq(fseek(f, offs[r] + 36, SEEK_SET), 0);
    cr_assert_eq(fread(b, 1, 8, f), 8);
    fclose(f);
    if (get_i64(b) == v + 1) return r;
  }
  cr_assert_fail("no record of input %lld", (long long)v);
  return -1;
}

/* poke writes the `len`-byte little-endian integer x at `off` of the file. */
static void poke(const char *path, long off, uint64_t x, int len) {
  unsigned char b[8];
  for (int i = 0; i < len; i++)
    b[i] = (unsigned char)(x >> (8 * i));
  int fd = open(path, O_RDWR);
  cr_assert_geq(fd, 0);
  cr_assert_eq(pwrite(fd, b, (size_t)len, off), len);
  close(fd);
}

/* ---------------------------------------------------------------------------------------
 * The tests. */

Test(journal, resume_from_the_index_gives_the_fresh_results, .timeout = 120) {
  char path[128];
  journal_path(path, sizeof path);
  enum { M = 2000 };
  expect_counts(run_inc(path, M, NULL), 0, M);
  /* In order, from the file. */
  expect_counts(run_inc(path, M, NULL), M, 0);
  /* As they complete: every result once, each naming its task. No backup copies or reruns
   * here either: the counts below are of the kernels the servers ran (under ASan a slow first
   * run was once rerun as a straggler). */
  const char *unordered[] = {"journal", path, "ordered", "off", "backup", "off", NULL};
  lt_eval_t *ev = new_eval_with(lt_farm(lt_seq("testk:inc")), 2, unordered);
  submit_i64s(ev, M + 10);
  lt_eval_close(ev);
  static unsigned char seen[M + 10];
  for (int i = 0; i < M + 10; i++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next_timeout(ev, 30000, &b), LT_OK);
    cr_assert_eq(lt_buf_error(b), LT_OK, "%s", lt_buf_errmsg(b));
    uint64_t task = lt_buf_task(b);
    cr_assert_lt(task, (uint64_t)(M + 10));
    cr_assert_eq(get_i64(lt_buf_data(b)), (int64_t)task + 1);
    cr_assert_eq(seen[task]++, 0, "task %llu twice", (unsigned long long)task);
    lt_buf_free(b);
  }
  expect_counts(stats_of(ev), M, 10);
  lt_eval_free(ev);
  /* Through futures. */
  const char *plain[] = {"journal", path, "backup", "off", NULL};
  ev = new_eval_with(lt_farm(lt_seq("testk:inc")), 2, plain);
  static lt_future_t *fs[M];
  for (int i = 0; i < M; i++) {
    unsigned char tok[8];
    put_i64(tok, i);
    cr_assert_eq(lt_eval_submit(ev, tok, 8, &fs[i]), LT_OK);
  }
  for (int i = 0; i < M; i++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_future_wait(fs[i], 30000, &b), LT_OK);
    cr_assert_eq(get_i64(lt_buf_data(b)), i + 1);
    lt_buf_free(b);
    lt_future_release(fs[i]);
  }
  expect_counts(stats_of(ev), M, 0);
  lt_eval_free(ev);
  unlink(path);
}

Test(journal, a_torn_tail_is_cut_off, .timeout = 120) {
  char path[128];
  journal_path(path, sizeof path);
  expect_counts(run_inc(path, 100, NULL), 0, 100);
  /* Half a record's head at the end. */
  long intact = file_size(path);
  append_bytes(path, "LTJR\x01\x02\x03", 7);
  expect_counts(run_inc(path, 110, NULL), 100, 10);
  long offs[200];
  cr_assert_eq(record_offsets(path, offs, 200), 110);
  cr_assert_gt(file_size(path), intact);
  /* The last record cut short: it runs past the end of the file. */
  cr_assert_eq(truncate(path, file_size(path) - 3), 0);
  expect_counts(run_inc(path, 110, NULL), 109, 1);
  /* The last record whole in length but not in content: its checksum fails. */
  cr_assert_eq(record_offsets(path, offs, 200), 110);
  flip_byte(path, offs[109] + 36 + 2);
  expect_counts(run_inc(path, 110, NULL), 109, 1);
  cr_assert_eq(record_offsets(path, offs, 200), 110);
  unlink(path);
}

Test(journal, another_program_is_refused_or_started_again, .timeout = 120) {
  char path[128];
  journal_path(path, sizeof path);
  expect_counts(run_inc(path, 50, NULL), 0, 50);
  long size = file_size(path);
  cr_assert_eq(local_start(lt_farm(lt_seq("testk:dbl")), path, "refuse", LT_TEST_MODULES),
               LT_EINVAL);
  cr_assert_eq(file_size(path), size, "a refused journal is left as it was");
  /* By default too (issue 36 item 5: a path reused by another program is another run's
   * work), with both programs and the option named. */
  char log[4096];
  cr_assert_eq(local_start_logged(lt_farm(lt_seq("testk:dbl")), path, NULL, LT_TEST_MODULES, log,
                                  sizeof log),
               LT_EINVAL);
  cr_assert_eq(file_size(path), size, "a refused journal is left as it was");
  cr_assert_not_null(strstr(log, "testk:inc"), "%s", log);
  cr_assert_not_null(strstr(log, "testk:dbl"), "%s", log);
  cr_assert_not_null(strstr(log, "journal_mismatch=recompute"), "%s", log);
  /* Under journal_mismatch=recompute the other program's results are not used: a new
   * journal takes its place. */
  const char *dbl[] = {"journal", path, "journal_mismatch", "recompute", "backup", "off", NULL};
  lt_eval_t *ev = new_eval_with(lt_farm(lt_seq("testk:dbl")), 2, dbl);
  /* The journal that took the old one's place is this run's alone from the start: it was
   * locked before it was renamed into place. */
  char err[600];
  cr_assert_eq(lt_journal_compact(path, NULL, err, sizeof err), LT_EAGAIN, "%s", err);
  cr_assert_eq(local_start(lt_farm(lt_seq("testk:dbl")), path, NULL, LT_TEST_MODULES), LT_EAGAIN);
  submit_i64s(ev, 50);
  lt_eval_close(ev);
  for (int i = 0; i < 50; i++)
    cr_assert_eq(next_i64_within(ev, 30000), 2 * i);
  expect_counts(stats_of(ev), 0, 50);
  lt_eval_free(ev);
  cr_assert_eq(files_beside(path), 0,
               "the new journal was written beside the old one, then renamed");
  cr_assert_lt(file_size(path), size + 50 * 48, "the old records are gone");
  /* And it is testk:dbl's journal now. */
  cr_assert_eq(local_start(lt_farm(lt_seq("testk:dbl")), path, "refuse", LT_TEST_MODULES), LT_OK);
  unlink(path);
}

Test(journal, a_rebuilt_module_is_recomputed_or_refused, .timeout = 120) {
  char dir[] = "/tmp/lt-journal-mod-XXXXXX", path[128], so[200];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/run.jnl", dir);
  snprintf(so, sizeof so, "%s/libshipk.so", dir);
  const char *opts[] = {"journal", path, "modules", dir, "backup", "off", NULL};
  enum { M = 40 };
  /* The first build: shipk:tag adds 1000. */
  copy_file(SHIP_A, so);
  lt_eval_t *ev = new_eval_with(lt_farm(lt_seq("shipk:tag")), 2, opts);
  submit_i64s(ev, M);
  lt_eval_close(ev);
  for (int i = 0; i < M; i++)
    cr_assert_eq(next_i64_within(ev, 30000), 1000 + i);
  expect_counts(stats_of(ev), 0, M);
  lt_eval_free(ev);
  /* Rebuilt (it adds 2000 now): refused under journal_mismatch=refuse, with the module named. */
  copy_file(SHIP_B, so);
  cr_assert_eq(local_start(lt_farm(lt_seq("shipk:tag")), path, "refuse", dir), LT_EINVAL);
  /* Recomputed by default: every result from the new build, none from the journal. */
  ev = new_eval_with(lt_farm(lt_seq("shipk:tag")), 2, opts);
  submit_i64s(ev, M);
  lt_eval_close(ev);
  for (int i = 0; i < M; i++)
    cr_assert_eq(next_i64_within(ev, 30000), 2000 + i);
  expect_counts(stats_of(ev), 0, M);
  lt_eval_free(ev);
  /* The same build again: everything from the journal. */
  ev = new_eval_with(lt_farm(lt_seq("shipk:tag")), 2, opts);
  submit_i64s(ev, M);
  lt_eval_close(ev);
  for (int i = 0; i < M; i++)
    cr_assert_eq(next_i64_within(ev, 30000), 2000 + i);
  expect_counts(stats_of(ev), M, 0);
  lt_eval_free(ev);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

Test(journal, a_journal_of_format_1_is_refused, .timeout = 60) {
  char path[128];
  journal_path(path, sizeof path);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  fputs("lithium journal 1\n", f);
  fwrite("\x10\0\0\0farm(testk:inc)", 1, 20, f);
  fclose(f);
  cr_assert_eq(local_start(lt_farm(lt_seq("testk:inc")), path, NULL, LT_TEST_MODULES), LT_EINVAL);
  char err[600];
  cr_assert_eq(lt_journal_compact(path, NULL, err, sizeof err), LT_EINVAL);
  cr_assert_not_null(strstr(err, "format 1"), "%s", err);
  cr_assert_eq(file_size(path), 38, "left as it was");
  unlink(path);
}

/* tool_compact runs `lithium journal compact PATH` and returns its output's first line. */
static void tool_compact(const char *path, char *out, size_t len) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "'%s' journal compact '%s'", LT_TEST_TOOL, path);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  out[0] = '\0';
  cr_assert_not_null(fgets(out, (int)len, p));
  cr_assert_eq(pclose(p), 0, "%s", cmd);
}

Test(journal, compact_drops_a_torn_tail_damaged_records_and_duplicates, .timeout = 120) {
  char path[128];
  journal_path(path, sizeof path);
  /* Inputs 0..59 and then 0..39 again: the second ones are computed and journaled too. */
  const char *opts[] = {"journal", path, "backup", "off", NULL};
  lt_eval_t *ev = new_eval_with(lt_farm(lt_seq("testk:inc")), 2, opts);
  submit_i64s(ev, 60);
  submit_i64s(ev, 40);
  lt_eval_close(ev);
  for (int i = 0; i < 100; i++)
    cr_assert_eq(next_i64_within(ev, 30000), (i < 60 ? i : i - 60) + 1);
  lt_eval_free(ev);
  long offs[200];
  cr_assert_eq(record_offsets(path, offs, 200), 100);
  /* A damaged record among them (the first run's of some input in 40..59, which has no
   * duplicate), and a torn tail. */
  int damaged = record_of(path, offs, 100, 50); /* the first run's: it comes first */
  flip_byte(path, offs[damaged] + 36 + 1);
  append_bytes(path, "LTJR\x01\x02\x03\x04\x05", 9);
  /* Read back in its turn, the damaged record is an error naming the fix. */
  ev = new_eval_with(lt_farm(lt_seq("testk:inc")), 2, opts);
  submit_i64s(ev, 60);
  lt_eval_close(ev);
  for (int i = 0; i < 60; i++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next_timeout(ev, 30000, &b), LT_OK);
    if (i == 50) {
      cr_assert_eq(lt_buf_error(b), LT_EIO);
      cr_assert_not_null(strstr(lt_buf_errmsg(b), "journal compact"), "%s", lt_buf_errmsg(b));
    } else {
      cr_assert_eq(get_i64(lt_buf_data(b)), i + 1);
    }
    lt_buf_free(b);
  }
  /* A journal in use is not compacted. */
  char err[600];
  cr_assert_eq(lt_journal_compact(path, NULL, err, sizeof err), LT_EAGAIN, "%s", err);
  /* Nor is it used by a second run at once. */
  cr_assert_eq(local_start(lt_farm(lt_seq("testk:inc")), path, NULL, LT_TEST_MODULES), LT_EAGAIN);
  lt_eval_free(ev);
  append_bytes(path, "LTJR\x01\x02\x03\x04\x05", 9);
  long before = file_size(path);
  lt_journal_stats_t st;
  cr_assert_eq(lt_journal_compact(path, &st, err, sizeof err), LT_OK, "%s", err);
  cr_assert_eq(st.records, 59);
  cr_assert_eq(st.duplicates, 40);
  cr_assert_eq(st.damaged, 1);
  cr_assert_eq(st.torn_bytes, 9);
  cr_assert_eq(st.bytes_before, (uint64_t)before);
  cr_assert_eq(st.bytes_after, (uint64_t)file_size(path));
  cr_assert_eq(record_offsets(path, offs, 200), 59);
  /* Compacted, it gives every result; the damaged one is computed again. */
  expect_counts(run_inc(path, 60, NULL), 59, 1);
  /* The tool: a second copy of input 0 and a torn tail, dropped. */
  ev = new_eval_with(lt_farm(lt_seq("testk:inc")), 2, opts);
  lt_eval_free(ev);
  append_bytes(path, "LT", 2);
  char line[300];
  tool_compact(path, line, sizeof line);
  cr_assert_not_null(strstr(line, "60 records kept; dropped 0 duplicates, 0 damaged, a torn tail "
                                  "of 2 bytes"),
                     "%s", line);
  expect_counts(run_inc(path, 60, NULL), 60, 0);
  unlink(path);
}

/* Issue 36 item 3. In a journal of 40 records: one in the middle given a data length that
 * runs past the end (intact records follow it, so it is no torn tail), and one given an error
 * length over the format's bound (65536: no write makes it, torn or not), the last record of
 * the file. A resume replays all 40: those two tasks read back LT_EIO and the other 38 their
 * results, nothing is computed, nothing is cut off; compact keeps the 38 intact records and
 * counts 2 damaged; the next run computes those 2 alone. */
Test(journal, a_damaged_length_costs_that_record_alone, .timeout = 120) {
  char path[128];
  journal_path(path, sizeof path);
  enum { M = 40 };
  expect_counts(run_inc(path, M, NULL), 0, M);
  long offs[64];
  cr_assert_eq(record_offsets(path, offs, 64), M);
  int64_t mid_input = 9;
  int mid = record_of(path, offs, M, mid_input);
  /* One in the middle: an intact record must follow it (the last is damaged below), else it
   * is a torn tail (completion order decides where input 9's record is: once in 30 runs under
   * load it was the second to last, and both were cut off). */
  while (mid >= M - 2)
    mid = record_of(path, offs, M, ++mid_input);
  unsigned char last_b[8];
  FILE *f = fopen(path, "rb");
  cr_assert_eq(fseek(f, offs[M - 1] + 36, SEEK_SET), 0);
  cr_assert_eq(fread(last_b, 1, 8, f), 8);
  fclose(f);
  int last_input = (int)get_i64(last_b) - 1;
  long size = file_size(path);
  poke(path, offs[mid] + 12, (uint64_t)1 << 39, 8); /* data length: 512 GiB */
  poke(path, offs[M - 1] + 8, 1u << 30, 4);         /* error length: 1 GiB */
  expect_counts(run_inc_eio(path, M, NULL, (int)mid_input, last_input), M, 0);
  cr_assert_eq(file_size(path), size, "nothing cut off");
  lt_journal_stats_t st;
  char err[600];
  cr_assert_eq(lt_journal_compact(path, &st, err, sizeof err), LT_OK, "%s", err);
  cr_assert_eq(st.records, M - 2);
  cr_assert_eq(st.damaged, 2);
  cr_assert_eq(st.torn_bytes, 0);
  cr_assert_eq(record_offsets(path, offs, 64), M - 2);
  expect_counts(run_inc(path, M, NULL), M - 2, 2);
  unlink(path);
}

/* A head in the middle that is no record's head at all (its magic overwritten), with intact
 * records after it, is damage too: its own task finds no record and is computed again, the
 * others are replayed; the tool's compaction keeps every intact record. */
Test(journal, garbage_in_the_middle_is_no_torn_tail, .timeout = 120) {
  char path[128];
  journal_path(path, sizeof path);
  enum { M = 40 };
  expect_counts(run_inc(path, M, NULL), 0, M);
  long offs[64];
  cr_assert_eq(record_offsets(path, offs, 64), M);
  poke(path, offs[M / 2], 0x21212121u, 4);
  expect_counts(run_inc(path, M, NULL), M - 1, 1);
  char line[300];
  tool_compact(path, line, sizeof line);
  cr_assert_not_null(strstr(line, "40 records kept; dropped 0 duplicates, 1 damaged"), "%s", line);
  expect_counts(run_inc(path, M, NULL), M, 0);
  unlink(path);
}

/* A journal path that is a symbolic link is refused (issue 36 item 5), dangling or to an
 * empty file: nothing is written where it points, and compact refuses it too, saying so. */
Test(journal, a_symbolic_link_is_refused, .timeout = 60) {
  char path[128], target[160];
  journal_path(path, sizeof path);
  snprintf(target, sizeof target, "%s.target", path);
  unlink(target);
  cr_assert_eq(symlink(target, path), 0);
  cr_assert_eq(local_start(lt_farm(lt_seq("testk:inc")), path, NULL, LT_TEST_MODULES), LT_EINVAL);
  struct stat sb;
  cr_assert_neq(stat(target, &sb), 0, "the dangling link's target was created");
  int fd = open(target, O_WRONLY | O_CREAT | O_EXCL, 0644);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(local_start(lt_farm(lt_seq("testk:inc")), path, NULL, LT_TEST_MODULES), LT_EINVAL);
  cr_assert_eq(file_size(target), 0, "the link's target was written");
  char err[600];
  cr_assert_eq(lt_journal_compact(path, NULL, err, sizeof err), LT_EINVAL, "%s", err);
  cr_assert_not_null(strstr(err, "symbolic link"), "%s", err);
  unlink(path);
  unlink(target);
}

/* Text read back from a journal reaches no terminal raw (issue 36 item 5: an ESC sequence in
 * an error message got through): a journaled failure whose message is given "\x1b[2J" (its
 * checksum made right again, so the record is intact) reads back with the control
 * character escaped, in the result's message and in what the run logs. */
Test(journal, control_characters_from_a_journal_are_escaped, .timeout = 60) {
  char path[128];
  journal_path(path, sizeof path);
  const char *o[] = {"journal", path, "backup", "off", NULL};
  for (int run = 0; run < 2; run++) {
    if (run == 1) {
      long offs[4];
      cr_assert_eq(record_offsets(path, offs, 4), 1);
      FILE *f = fopen(path, "r+b");
      cr_assert_not_null(f);
      static unsigned char rec[4096];
      cr_assert_eq(fseek(f, offs[0], SEEK_SET), 0);
      size_t len = fread(rec, 1, sizeof rec, f);
      uint32_t errlen = rec[8] | rec[9] << 8 | rec[10] << 16 | (uint32_t)rec[11] << 24;
      cr_assert_eq(len, 36 + errlen + 4, "a failure: no data");
      char *at = memmem(rec + 36, errlen, "aske", 4);
      cr_assert_not_null(at);
      memcpy(at, "\x1b[2J", 4);
      uLong crc = crc32(0, rec, 36 + errlen);
      for (int i = 0; i < 4; i++)
        rec[36 + errlen + i] = (unsigned char)(crc >> (8 * i));
      cr_assert_eq(fseek(f, offs[0], SEEK_SET), 0);
      cr_assert_eq(fwrite(rec, 1, len, f), len);
      fclose(f);
    }
    stderr_capture_t cap;
    stderr_capture_begin(&cap);
    lt_eval_t *ev = new_eval_with(lt_farm(lt_seq("testk:fail")), 2, o);
    submit_i64s(ev, 1);
    lt_eval_close(ev);
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next_timeout(ev, 30000, &b), LT_OK);
    char msg[600];
    snprintf(msg, sizeof msg, "%s", lt_buf_errmsg(b));
    lt__log(LT_LOG_WARN, "the result: %s", msg); /* as a program would print it */
    cr_assert_eq(lt_buf_error(b), LT_EKERNEL);
    lt_buf_free(b);
    char *json = stats_of(ev);
    lt_eval_free(ev);
    static char log[1 << 16];
    stderr_capture_end(&cap, log, sizeof log);
    cr_assert_eq(stats_u64(json, "journal_replayed"), (uint64_t)run, "%s", json);
    free(json);
    if (run == 0) continue;
    cr_assert_null(strchr(msg, '\x1b'), "%s", msg);
    cr_assert_not_null(strstr(msg, "fail: \\x1b[2Jd to fail"), "%s", msg);
    cr_assert_null(strchr(log, '\x1b'), "%s", log);
  }
  unlink(path);
}
