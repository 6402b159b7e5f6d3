/* test_journal.c: the results journal (journal=FILE). A client killed with SIGKILL halfway
 * through a run is started again with the same journal: it gets every result, in order,
 * and computes again only what it had not been given; a torn last record is ignored, and a
 * journal of another program is refused. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define N 3000

static void journal_path(char *buf, size_t len) {
  snprintf(buf, len, "/tmp/lt-journal-%d-%ld.jnl", (int)getpid(), (long)random());
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

Test(journal, torn_record_is_ignored_and_another_program_refused, .timeout = 60) {
  char path[128];
  journal_path(path, sizeof path);
  lt_eval_t *ev = eval_with_journal(path);
  submit_i64s(ev, 100);
  lt_eval_close(ev);
  for (int i = 0; i < 100; i++)
    cr_assert_eq(next_i64(ev), i);
  lt_eval_free(ev);
  /* A record torn by a crash: half a header at the end. */
  int fd = open(path, O_WRONLY | O_APPEND);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, "LTJR\x01\x02\x03", 7), 7);
  close(fd);
  struct stat before;
  cr_assert_eq(stat(path, &before), 0);
  ev = eval_with_journal(path);
  submit_i64s(ev, 110);
  lt_eval_close(ev);
  for (int i = 0; i < 110; i++)
    cr_assert_eq(next_i64(ev), i);
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  cr_assert_eq(stats_u64(json, "journal_replayed"), 100, "%s", json);
  cr_assert_eq(stats_sum(json, "executed"), 10, "%s", json);
  free(json);
  lt_eval_free(ev);
  /* Another program must not take these results. */
  lt_eval_t *other = NULL;
  cr_assert_eq(lt_eval_new(&other, lt_farm(lt_seq("testk:inc"))), LT_OK);
  cr_assert_eq(lt_eval_set(other, "journal", path), LT_OK);
  cr_assert_eq(lt_eval_set(other, "modules", LT_TEST_MODULES), LT_OK);
  cr_assert_eq(lt_eval_run_local(other), LT_EINVAL);
  lt_eval_free(other);
  unlink(path);
}
