/* examples/bench/journal.c: the `journal` benchmark (issue 25): 1 000 000 tasks of 4 KiB
 * through farm(seq(bench:touch)) on 2 spawned servers with journal=FILE — a journal of about
 * 4 GB — fed by a thread while the results are read in order, then the same run again on the
 * full journal (a resume: every result from the file, none computed). Each run is a child
 * process of its own, so that its peak RSS (VmHWM) is the run's alone; the parent prints the
 * fresh and the resumed run's peak RSS (target: the resume under 128 MiB and within 2 x the
 * fresh run's), their times and the journal's size. The journal goes to
 * LT_BENCH_JOURNAL_DIR (default /tmp), which must have room for it (checked first), and is
 * removed at the end.
 *
 *   build/examples/bench/bench_journal [--tasks 1000000]
 *   BENCH_JOURNAL_SIZE: bytes a task (default 4096).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchlib.h"

#define PROG "bench_journal"

static const char usage[] =
    "usage: bench_journal [--tasks N]\n"
    "  N tasks of BENCH_JOURNAL_SIZE bytes (default 4096) with a journal\n"
    "  in LT_BENCH_JOURNAL_DIR (default /tmp): a fresh run, then a resume\n";

/* What a run's child reports to the parent. */
typedef struct report {
  int ok;
  double seconds;
  double peak_mib; /* VmHWM */
  unsigned long long replayed, executed;
} report_t;

/* Task i: i in its first 8 bytes (little-endian), the rest a byte that depends on i. */
static void make(long i, unsigned char *buf, void *arg) {
  size_t size = *(const size_t *)arg;
  for (int k = 0; k < 8; k++)
    buf[k] = (unsigned char)((unsigned long)i >> (8 * k));
  memset(buf + 8, (int)(i * 31 + 7) & 0xff, size - 8);
}

/* bench:touch adds one to the first byte and copies the rest. */
static int check(long i, const unsigned char *data, size_t len, void *arg) {
  size_t size = *(const size_t *)arg;
  if (len != size || data[0] != (unsigned char)((unsigned char)i + 1)) return -1;
  for (int k = 1; k < 8; k++)
    if (data[k] != (unsigned char)((unsigned long)i >> (8 * k))) return -1;
  return data[size - 1] == ((i * 31 + 7) & 0xff) ? 0 : -1;
}

static double vmhwm_mib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  double kb = 0;
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "VmHWM:", 6) == 0) kb = strtod(line + 6, NULL);
  if (f != NULL) fclose(f);
  return kb / 1024.0;
}

/* run is a child's body: one run with the journal at `path`, its report to `fd`. */
static void run(const char *path, long tasks, size_t size, int fd) {
  report_t r = {0};
  const char *kv[] = {"journal", path, "backup", "off", NULL};
  lt_eval_t *ev = bench_eval_open(PROG, lt_farm(lt_seq("bench:touch")), kv, 2);
  if (ev != NULL && bench_eval_stream(PROG, ev, tasks, size, make, check, &size, &r.seconds) == 0) {
    char *json = NULL;
    if (lt_eval_stats_json(ev, &json) == LT_OK) {
      r.replayed = (unsigned long long)ex_stat_u64(json, "journal_replayed");
      r.executed = (unsigned long long)ex_stat_sum(json, "executed");
      r.ok = 1;
    }
    free(json);
  }
  lt_eval_free(ev);
  r.peak_mib = vmhwm_mib();
  _exit(write(fd, &r, sizeof r) == (ssize_t)sizeof r && r.ok ? 0 : 1);
}

/* in_child runs one run in a child process and returns its report (ok 0 when it failed). */
static report_t in_child(const char *path, long tasks, size_t size) {
  report_t r = {0};
  int fds[2];
  if (pipe(fds) != 0) return r;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    run(path, tasks, size, fds[1]);
  }
  close(fds[1]);
  if (pid > 0 && read(fds[0], &r, sizeof r) != (ssize_t)sizeof r) r.ok = 0;
  close(fds[0]);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) r.ok = 0;
  return r;
}

int main(int argc, char **argv) {
  long tasks = 1000000;
  int a = bench_parse_args(argc, argv, usage, NULL, &tasks);
  if (a != 0) return a > 0 ? 0 : 2;
  const char *s = getenv("BENCH_JOURNAL_SIZE");
  size_t size = s != NULL ? (size_t)strtoul(s, NULL, 10) : 4096;
  if (size < 8) size = 8;
  const char *dir = getenv("LT_BENCH_JOURNAL_DIR");
  if (dir == NULL || dir[0] == '\0') dir = "/tmp";
  char path[4096];
  snprintf(path, sizeof path, "%s/bench-journal-%d.jnl", dir, (int)getpid());
  /* Each record: the result, a 36-byte head and a 4-byte checksum. */
  double need = (double)tasks * (double)(size + 40);
  struct statvfs vfs;
  if (statvfs(dir, &vfs) != 0 || (double)vfs.f_bavail * (double)vfs.f_frsize < need * 1.1) {
    fprintf(stderr, "%s: %s has not %.1f GB free for the journal (LT_BENCH_JOURNAL_DIR)\n", PROG,
            dir, need * 1.1 / 1e9);
    return 1;
  }
  unlink(path);
  report_t fresh = in_child(path, tasks, size);
  struct stat sb;
  double journal_gb = stat(path, &sb) == 0 ? (double)sb.st_size / 1e9 : 0;
  report_t resume = fresh.ok ? in_child(path, tasks, size) : (report_t){0};
  unlink(path);
  if (!fresh.ok || !resume.ok) {
    fprintf(stderr, "%s: the %s run failed\n", PROG, fresh.ok ? "resumed" : "fresh");
    return 1;
  }
  if (resume.replayed != (unsigned long long)tasks || resume.executed != 0)
    fprintf(stderr, "%s: the resume replayed %llu and computed %llu of %ld tasks\n", PROG,
            resume.replayed, resume.executed, tasks);
  bench_json("journal", "fresh_peak_rss", fresh.peak_mib, 0, "MiB");
  bench_json("journal", "resume_peak_rss", resume.peak_mib, fresh.peak_mib, "MiB");
  bench_json("journal", "fresh_time", fresh.seconds, 0, "s");
  bench_json("journal", "resume_time", resume.seconds, fresh.seconds, "s");
  bench_json("journal", "journal_size", journal_gb, 0, "GB");
  bench_json("journal", "resume_replayed", (double)resume.replayed, (double)tasks, "tasks");
  printf("\n| run | tasks | peak RSS (MiB) | time (s) | replayed | computed |\n"
         "|---|---|---|---|---|---|\n"
         "| fresh | %ld | %.1f | %.1f | %llu | %llu |\n"
         "| resume | %ld | %.1f | %.1f | %llu | %llu |\n"
         "journal: %.2f GB, %zu-byte tasks; resume / fresh peak RSS %.2f\n",
         tasks, fresh.peak_mib, fresh.seconds, fresh.replayed, fresh.executed, tasks,
         resume.peak_mib, resume.seconds, resume.replayed, resume.executed, journal_gb, size,
         resume.peak_mib / fresh.peak_mib);
  return 0;
}
