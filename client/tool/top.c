/* top.c: `lithium top [--once] [--json] [--interval MS] [--timeout MS] [SOCKET]`: reads the
 * stats of a running evaluation from its stats_socket (the line "stats\n" asked, the
 * snapshot read to the end of the connection, every step within --timeout) and shows them
 * each --interval (top_screen.c), or prints one snapshot. Main thread only. */
#include "top.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define DEFAULT_TIMEOUT_MS  3000
#define DEFAULT_INTERVAL_MS 1000
#define ANSWER_MAX          (64u << 20) /* bytes of a snapshot, at most */

static void usage(FILE *f) {
  fputs("usage: lithium top [--once] [--json] [--interval MS] [--timeout MS] [SOCKET]\n"
        "  shows a running evaluation, refreshed every second: per server its state, window,\n"
        "  queued and running instructions, done, done/s, mean and p95 service time,\n"
        "  copies, quarantine, bytes in and out; the evaluation's throughput, pending,\n"
        "  failed tasks and ETA. SOCKET is the evaluation's option stats_socket (default:\n"
        "  $LITHIUM_STATS_SOCKET)\n"
        "  --once         one frame, then exit\n"
        "  --json         with --once: the snapshot as JSON (lt_eval_stats_json's keys)\n"
        "  --interval MS  between frames (default 1000)\n"
        "  --timeout MS   wait this long for an answer (default 3000)\n"
        "Exit status: 0 success (also when the evaluation ends while shown), 1 no answer,\n"
        "2 bad usage.\n",
        f);
}

/* left_ms returns the milliseconds left until `until_us`, at least 0. */
static int left_ms(int64_t until_us) {
  int64_t left = (until_us - lt__cli_clock_us()) / 1000;
  return left > 0 ? (int)left : 0;
}

/* await waits until fd is ready for `events` or `until_us`; 0, or -1 on the timeout. */
static int await(int fd, short events, int64_t until_us) {
  for (;;) {
    struct pollfd p = {.fd = fd, .events = events};
    int n = poll(&p, 1, left_ms(until_us));
    if (n > 0) return 0;
    if (n == 0 || errno != EINTR) return -1;
  }
}

/* connect_to connects to the socket at `path` within until_us; the fd, or -1 with why. */
static int connect_to(const char *path, int64_t until_us, char *err, size_t len) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (path[0] == '\0' || strlen(path) >= sizeof sa.sun_path) {
    snprintf(err, len, "'%s': not a socket path", path);
    return -1;
  }
  memcpy(sa.sun_path, path, strlen(path));
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    snprintf(err, len, "socket: %s", strerror(errno));
    return -1;
  }
  /* A full backlog answers EAGAIN: try again until the deadline. */
  while (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int e = errno;
    if (e == EINPROGRESS && await(fd, POLLOUT, until_us) == 0) break;
    if (e == EAGAIN && left_ms(until_us) > 0) {
      poll(NULL, 0, 10);
      continue;
    }
    if (e == ENOENT)
      snprintf(err, len, "%s: no such socket: is an evaluation running with stats_socket=%s?", path,
               path);
    else if (e == ECONNREFUSED)
      snprintf(err, len, "%s: nothing listens there: the evaluation has ended, or never started",
               path);
    else
      snprintf(err, len, "%s: %s", path, e == EAGAIN ? "busy: no room to connect" : strerror(e));
    close(fd);
    return -1;
  }
  return fd;
}

/* exchange sends the request on fd and reads the answer to the end of the connection into
 * *out (NUL-terminated); 0, or -1 with why. */
static int exchange(int fd, const char *path, int64_t until_us, char **out, char *err, size_t len) {
  const char req[] = "stats\n";
  size_t sent = 0;
  while (sent < sizeof req - 1) {
    ssize_t n = send(fd, req + sent, sizeof req - 1 - sent, MSG_NOSIGNAL);
    if (n > 0) sent += (size_t)n;
    if (n < 0 && (errno != EAGAIN || await(fd, POLLOUT, until_us) != 0)) {
      snprintf(err, len, "%s: cannot ask: %s", path,
               errno == EAGAIN ? "timed out" : strerror(errno));
      return -1;
    }
  }
  size_t got = 0, cap = 65536;
  char *buf = malloc(cap);
  for (;;) {
    if (buf != NULL && got + 1 == cap && cap < ANSWER_MAX) {
      char *more = realloc(buf, cap * 2);
      if (more == NULL) free(buf);
      buf = more;
      cap *= 2;
    }
    if (buf == NULL || got + 1 == cap) {
      snprintf(err, len, "%s: %s", path, buf == NULL ? "out of memory" : "answer too long");
      free(buf);
      return -1;
    }
    ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);
    if (n > 0) got += (size_t)n;
    if (n == 0) break;
    if (n < 0 && (errno != EAGAIN || await(fd, POLLIN, until_us) != 0)) {
      snprintf(err, len, "%s: no answer: %s", path,
               errno == EAGAIN ? "timed out" : strerror(errno));
      free(buf);
      return -1;
    }
  }
  buf[got] = '\0';
  *out = buf;
  return 0;
}

/* fetch reads one snapshot from `path` into *text and *snap within timeout_ms; 0, or -1
 * with why in err. */
static int fetch(const char *path, int timeout_ms, char **text, lt_jv_t *snap, char *err,
                 size_t len) {
  int64_t until_us = lt__cli_clock_us() + (int64_t)timeout_ms * 1000;
  int fd = connect_to(path, until_us, err, len);
  if (fd < 0) return -1;
  int rc = exchange(fd, path, until_us, text, err, len);
  close(fd);
  if (rc != 0) return -1;
  char why[128];
  if (lt__jv_parse(*text, snap, why, sizeof why) != 0 || snap->type != LT_JV_OBJ) {
    snprintf(err, len, "%s: not a stats snapshot (%s)", path,
             snap->type != LT_JV_OBJ ? "not a JSON object" : why);
  } else if (lt__jv_get(snap, "error") != NULL) {
    snprintf(err, len, "%s: %s", path, lt__jv_str(snap, "error", "error"));
  } else {
    return 0;
  }
  lt__jv_free(snap);
  free(*text);
  *text = NULL;
  return -1;
}

/* show_frames shows a frame each interval until the evaluation ends: 0 once it did (after a
 * first frame), 1 when there was none. */
static int show_frames(const char *path, int once, int json, int interval_ms, int timeout_ms) {
  lt_top_prev_t prev = {0};
  int frames = 0, tty = isatty(STDOUT_FILENO);
  char err[512];
  for (;;) {
    char *text = NULL;
    lt_jv_t snap;
    if (fetch(path, timeout_ms, &text, &snap, err, sizeof err) != 0) {
      if (frames > 0 && !once) {
        printf("lithium top: the evaluation ended (%s)\n", err);
        break;
      }
      fprintf(stderr, "lithium top: %s\n", err);
      lt__top_prev_free(&prev);
      return LT_EXIT_FAILED;
    }
    if (json) {
      fputs(text, stdout);
    } else {
      if (tty && !once) fputs("\033[H\033[J", stdout); /* home, clear */
      lt__top_screen(stdout, path, &snap, &prev);
    }
    lt__jv_free(&snap);
    free(text);
    frames++;
    if (fflush(stdout) != 0 || ferror(stdout)) {
      fprintf(stderr, "lithium top: stdout: write failed\n");
      lt__top_prev_free(&prev);
      return LT_EXIT_FAILED;
    }
    if (once) break;
    poll(NULL, 0, interval_ms);
  }
  lt__top_prev_free(&prev);
  return LT_EXIT_OK;
}

/* ms_arg reads a positive count of milliseconds; 0 when it is not one. */
static int ms_arg(const char *s) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  return errno == 0 && *end == '\0' && v > 0 && v <= 3600000 ? (int)v : 0;
}

int lt__top_main(int argc, char **argv) {
  int once = 0, json = 0, interval_ms = DEFAULT_INTERVAL_MS, timeout_ms = DEFAULT_TIMEOUT_MS;
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return LT_EXIT_OK;
    } else if (strcmp(a, "--once") == 0) {
      once = 1;
    } else if (strcmp(a, "--json") == 0) {
      json = 1;
    } else if ((strcmp(a, "--interval") == 0 || strcmp(a, "--timeout") == 0) && i + 1 < argc) {
      int v = ms_arg(argv[++i]);
      if (v == 0) {
        fprintf(stderr, "lithium top: %s %s: expected milliseconds (1 to 3600000)\n", a, argv[i]);
        return LT_EXIT_USAGE;
      }
      *(a[2] == 'i' ? &interval_ms : &timeout_ms) = v;
    } else if (a[0] != '-' && path == NULL) {
      path = a;
    } else {
      fprintf(stderr, "lithium top: unexpected argument '%s'\n", a);
      usage(stderr);
      return LT_EXIT_USAGE;
    }
  }
  if (path == NULL) path = getenv("LITHIUM_STATS_SOCKET");
  if (path == NULL || path[0] == '\0') {
    fputs("lithium top: which evaluation? give its stats_socket path (or set "
          "LITHIUM_STATS_SOCKET)\n",
          stderr);
    usage(stderr);
    return LT_EXIT_USAGE;
  }
  if (json && !once) {
    fputs("lithium top: --json needs --once (one snapshot for a script)\n", stderr);
    return LT_EXIT_USAGE;
  }
  return show_frames(path, once, json, interval_ms, timeout_ms);
}
