/* test_crashlog.c: the supervisor's crash log without a server. A forked worker whose thread
 * in slot 3 dies of a fatal signal (abort, a segfault, a stack overflow) while another
 * thread runs an instruction beside it: the death names slot 3's instruction as the culprit,
 * and each client's take tells only what the crash is charged to, once. A death by SIGKILL
 * names nobody: every running instruction is listed, as before there was a culprit. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crashlog.h"

#define CLIENT_A 0xa11ce001ULL
#define CLIENT_B 0xb0b00002ULL

static atomic_int beside_in;

/* beside runs B's instruction 9 in slot 1 and stays in it. */
static void *beside(void *arg) {
  (void)arg;
  lt__crashlog_enter(1, CLIENT_B, 9);
  atomic_store(&beside_in, 1);
  for (;;)
    pause();
  return NULL;
}

/* overflow recurses until the stack runs out (the volatile array keeps each frame; the
 * volatile bound is never met). */
static volatile int never = -1;
static volatile uintptr_t nowhere = 64; /* unmapped, and not null (UBSan) */

static int overflow(int n) {
  if (n == never) return 0;
  volatile char pad[1024];
  pad[0] = (char)n;
  return overflow(n + 1) + pad[0];
}

typedef enum { DIE_ABORT, DIE_SEGV, DIE_OVERFLOW } how_t;

static how_t how;

/* culprit runs A's instruction 42 in slot 3 and dies there. */
static void *culprit(void *arg) {
  (void)arg;
  void *alt = lt__crashlog_thread_start();
  lt__crashlog_enter(3, CLIENT_A, 41);
  lt__crashlog_leave(3);
  lt__crashlog_enter(3, CLIENT_A, 42);
  if (how == DIE_ABORT) abort();
  if (how == DIE_SEGV) *(volatile int *)nowhere = 1;
  overflow(0);
  lt__crashlog_thread_end(alt);
  return NULL;
}

/* worker forks a child attached to cl that runs beside and culprit; returns its wait status.
 * With kill9 the culprit never dies by itself: the parent kills the child. */
static int worker(lt_crashlog_t *cl, how_t h, int kill9) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    lt__crashlog_attach(cl);
    lt__crashlog_catch_fatal();
    lt__crashlog_started(0x1234, "tcp://127.0.0.1:1");
    how = h;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t t1, t2;
    pthread_create(&t1, &attr, beside, NULL);
    while (!atomic_load(&beside_in))
      usleep(1000);
    if (kill9) {
      lt__crashlog_enter(3, CLIENT_A, 42);
      for (;;)
        pause();
    }
    pthread_create(&t2, &attr, culprit, NULL);
    pthread_join(t2, NULL);
    _exit(0);
  }
  if (kill9) {
    usleep(200 * 1000);
    kill(pid, SIGKILL);
  }
  int st;
  cr_assert_eq(waitpid(pid, &st, 0), pid);
  return st;
}

static void take(uint64_t client, int *sig, uint64_t *culprit, uint64_t seqs[4], uint32_t *n) {
  uint64_t inc, *s = NULL;
  lt__crashlog_take(client, sig, &inc, culprit, &s, n);
  cr_assert_leq(*n, 4);
  if (*n > 0) memcpy(seqs, s, *n * sizeof *s);
  free(s);
  cr_assert_eq(inc, 0x1234);
}

static void names_the_culprit(how_t h, int signo) {
  lt_crashlog_t *cl;
  cr_assert_eq(lt__crashlog_new(&cl), 0);
  int st = worker(cl, h, 0);
  cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == signo, "status %#x", st);
  lt__crashlog_record(cl, WTERMSIG(st));
  /* take reads the attached block, as the next worker does. */
  lt__crashlog_attach(cl);
  int sig;
  uint64_t culprit, seqs[4];
  uint32_t n;
  take(CLIENT_B, &sig, &culprit, seqs, &n);
  cr_assert_eq(sig, signo);
  cr_assert_eq(n, 0, "B's instruction ran beside the culprit: not charged");
  cr_assert_eq(culprit, 0);
  take(CLIENT_A, &sig, &culprit, seqs, &n);
  cr_assert_eq(n, 1);
  cr_assert_eq(seqs[0], 42);
  cr_assert_eq(culprit, 42);
  take(CLIENT_A, &sig, &culprit, seqs, &n);
  cr_assert_eq(n, 0, "told once");
  cr_assert_eq(culprit, 0);
  lt__crashlog_attach(NULL);
  lt__crashlog_free(cl);
}

Test(crashlog, abort_names_the_thread_that_called_it) {
  names_the_culprit(DIE_ABORT, SIGABRT);
}

Test(crashlog, segfault_names_the_faulting_thread) {
  names_the_culprit(DIE_SEGV, SIGSEGV);
}

Test(crashlog, stack_overflow_names_the_thread_on_its_alternate_stack) {
  names_the_culprit(DIE_OVERFLOW, SIGSEGV);
}

Test(crashlog, sigkill_names_nobody_and_lists_every_running_instruction) {
  lt_crashlog_t *cl;
  cr_assert_eq(lt__crashlog_new(&cl), 0);
  int st = worker(cl, DIE_ABORT, 1);
  cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %#x", st);
  lt__crashlog_record(cl, SIGKILL);
  lt__crashlog_attach(cl);
  int sig;
  uint64_t culprit, seqs[4];
  uint32_t n;
  take(CLIENT_B, &sig, &culprit, seqs, &n);
  cr_assert_eq(sig, SIGKILL);
  cr_assert_eq(n, 1);
  cr_assert_eq(seqs[0], 9);
  cr_assert_eq(culprit, 0);
  take(CLIENT_A, &sig, &culprit, seqs, &n);
  cr_assert_eq(n, 1);
  cr_assert_eq(seqs[0], 42);
  cr_assert_eq(culprit, 0);
  /* A recycle (no signal) after it: nothing is charged, and no culprit is left over. */
  lt__crashlog_record(cl, 0);
  take(CLIENT_A, &sig, &culprit, seqs, &n);
  cr_assert_eq(sig, 0);
  cr_assert_eq(n, 0);
  lt__crashlog_attach(NULL);
  lt__crashlog_free(cl);
}
