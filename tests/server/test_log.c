/* test_log.c: the shared logger (proto/base/log.c): level names, LITHIUM_LOG read on first use,
 * filtering, the name prefix, one whole line per call from many threads at once. stderr is
 * redirected to a temporary file for each test. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <lithium/error.h>
#include "clock.h"
#include "log.h"

static int saved_fd = -1;
static FILE *capture;

static void capture_start(void) {
  capture = tmpfile();
  cr_assert_not_null(capture);
  fflush(stderr);
  saved_fd = dup(STDERR_FILENO);
  dup2(fileno(capture), STDERR_FILENO);
}

/* capture_end restores stderr and returns what was written (caller frees). */
static char *capture_end(void) {
  fflush(stderr);
  dup2(saved_fd, STDERR_FILENO);
  close(saved_fd);
  long n = ftell(capture);
  char *buf = calloc(1, (size_t)n + 1);
  rewind(capture);
  cr_assert_eq(fread(buf, 1, (size_t)n, capture), (size_t)n);
  fclose(capture);
  return buf;
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++)
    n += *s == '\n';
  return n;
}

Test(log, parse_level) {
  cr_assert_eq(lt__log_parse_level("debug"), LT_LOG_DEBUG);
  cr_assert_eq(lt__log_parse_level("INFO"), LT_LOG_INFO);
  cr_assert_eq(lt__log_parse_level("warn"), LT_LOG_WARN);
  cr_assert_eq(lt__log_parse_level("warning"), LT_LOG_WARN);
  cr_assert_eq(lt__log_parse_level("error"), LT_LOG_ERROR);
  cr_assert_eq(lt__log_parse_level("off"), LT_LOG_OFF);
  cr_assert_eq(lt__log_parse_level("loud"), LT_EINVAL);
  cr_assert_eq(lt__log_parse_level(""), LT_EINVAL);
  cr_assert_eq(lt__log_parse_level(NULL), LT_EINVAL);
}

Test(log, default_is_warn) {
  unsetenv("LITHIUM_LOG");
  cr_assert(!lt__log_enabled(LT_LOG_INFO));
  cr_assert(lt__log_enabled(LT_LOG_WARN));
  cr_assert(lt__log_enabled(LT_LOG_ERROR));
  cr_assert(!lt__log_enabled(LT_LOG_OFF));
}

Test(log, env_level_and_filtering) {
  setenv("LITHIUM_LOG", "info", 1);
  capture_start();
  lt__log(LT_LOG_DEBUG, "hidden %d", 1);
  lt__log(LT_LOG_INFO, "shown %d", 2);
  lt__log(LT_LOG_ERROR, "also %s", "shown");
  char *out = capture_end();
  cr_assert_eq(count_lines(out), 2, "%s", out);
  cr_assert_null(strstr(out, "hidden"));
  cr_assert_not_null(strstr(out, "info  shown 2\n"), "%s", out);
  cr_assert_not_null(strstr(out, "error also shown\n"), "%s", out);
  /* "YYYY-MM-DD HH:MM:SS.mmm " */
  cr_assert_eq(out[4], '-');
  cr_assert_eq(out[10], ' ');
  cr_assert_eq(out[19], '.');
  free(out);
}

Test(log, set_level_overrides_env_and_name_prefix) {
  setenv("LITHIUM_LOG", "error", 1);
  lt__log_set_level(LT_LOG_DEBUG);
  lt__log_set_name("srv-9");
  capture_start();
  lt__log(LT_LOG_DEBUG, "x=%d", 7);
  lt__log_set_name(NULL);
  lt__log(LT_LOG_DEBUG, "plain");
  lt__log_set_level(LT_LOG_OFF);
  lt__log(LT_LOG_ERROR, "silenced");
  char *out = capture_end();
  cr_assert_not_null(strstr(out, "debug srv-9: x=7\n"), "%s", out);
  cr_assert_not_null(strstr(out, "debug plain\n"), "%s", out);
  cr_assert_null(strstr(out, "silenced"));
  free(out);
}

Test(log, long_messages_are_cut_to_one_line) {
  lt__log_set_level(LT_LOG_INFO);
  char big[5000];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  capture_start();
  lt__log(LT_LOG_INFO, "%s", big);
  char *out = capture_end();
  cr_assert_eq(count_lines(out), 1);
  cr_assert_lt(strlen(out), 2100);
  cr_assert_eq(out[strlen(out) - 1], '\n');
  free(out);
}

static void *spam(void *arg) {
  long id = (long)arg;
  for (int i = 0; i < 200; i++)
    lt__log(LT_LOG_WARN, "thread %ld line %d %s", id, i, "tail");
  return NULL;
}

Test(log, threads_never_interleave) {
  lt__log_set_level(LT_LOG_WARN);
  capture_start();
  pthread_t t[4];
  for (long i = 0; i < 4; i++)
    pthread_create(&t[i], NULL, spam, (void *)i);
  for (int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
  char *out = capture_end();
  cr_assert_eq(count_lines(out), 800);
  for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    cr_assert_not_null(strstr(line, " warn  thread "), "%s", line);
    cr_assert_eq(strcmp(line + strlen(line) - 5, " tail"), 0, "%s", line);
  }
  free(out);
}

/* Lines a network peer can cause at will (issue 22, case 7: 131 000 refused requests in
 * 10 s) are limited: 1000 in a row write at most LT_LOG_LIMIT_PER_S a second, and the next
 * second's first line says how many were left out. */
Test(log, limited_lines) {
  lt__log_set_level(LT_LOG_WARN);
  capture_start();
  int64_t t0 = lt__clock_ms();
  for (int i = 0; i < 1000; i++)
    lt__log_limited(LT_LOG_WARN, "refused %d", i);
  int64_t t1 = lt__clock_ms();
  /* The next second (wait for it: the limit is per calendar second of the clock). */
  while (lt__clock_ms() / 1000 == t1 / 1000)
    usleep(10 * 1000);
  lt__log_limited(LT_LOG_WARN, "refused again");
  char *out = capture_end();
  int seconds = (int)(t1 / 1000 - t0 / 1000) + 1;
  cr_assert_leq(count_lines(out), LT_LOG_LIMIT_PER_S * (seconds + 1) + 2, "%s", out);
  cr_assert_not_null(strstr(out, "similar lines left out"), "%s", out);
  cr_assert_not_null(strstr(out, "refused again"));
  free(out);
}

/* A warning that repeats (issue 36 item 5: one attack's 320 cuts of idle connections logged
 * 320 lines) writes its first line, then one a window that doubles while lines keep coming
 * (1, 2, 4, 8 s), each saying how many were left out; after a quiet window it starts again
 * at 1 s, with nothing to say. Times are given: no clock, no sleep. Control characters of
 * the message are escaped. */
Test(log, rated_repeats_say_how_many_were_left_out) {
  lt__log_set_level(LT_LOG_WARN);
  capture_start();
  lt_log_rate_t r = {0};
  const int64_t t = 1000000;
  int written = 0;
  for (int i = 0; i < 320; i++) /* 20 a second for 16 s */
    written += lt__log_rated(&r, t + 50 * i, LT_LOG_WARN, "cut %d", i);
  cr_assert_eq(written, 5, "at 0, 1, 3, 7 and 15 s");
  cr_assert(lt__log_rated(&r, t + 40000, LT_LOG_WARN, "cut late"));
  cr_assert(lt__log_rated(&r, t + 200000, LT_LOG_WARN, "cut \x1b[2J after a quiet while"));
  cr_assert_eq(r.window_ms, LT_LOG_RATE_MIN_MS);
  char *out = capture_end();
  cr_assert_eq(count_lines(out), 7, "%s", out);
  cr_assert_not_null(strstr(out, "cut 0\n"), "%s", out);
  cr_assert_not_null(strstr(out, "cut 20 (and 19 more like it in the last 1 s)\n"), "%s", out);
  cr_assert_not_null(strstr(out, "cut 300 (and 159 more like it in the last 8 s)\n"), "%s", out);
  cr_assert_not_null(strstr(out, "cut late (and 19 more like it in the last 25 s)\n"), "%s", out);
  cr_assert_not_null(strstr(out, "cut \\x1b[2J after a quiet while\n"), "%s", out);
  cr_assert_null(strchr(out, '\x1b'), "%s", out);
  free(out);
}
