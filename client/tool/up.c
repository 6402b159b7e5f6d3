/* up.c: `lithium up HOSTS` and `lithium down HOSTS` over plain OpenSSH. `up` runs, on every
 * host at once, a small sh script (sent on ssh's stdin) that starts lithium-server detached
 * (nohup, its output in a state directory on that host), records its pid there and prints
 * "PID <pid>" and the server's "READY <endpoint>"; the tool waits for every host and prints
 * a hosts file, naming each host that failed with what ssh (or the server) said. `down`
 * sends SIGTERM to the servers `up` recorded on each host and waits for them to exit (a
 * graceful stop: running kernels finish). Main thread only. */
#include "up.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lithium.h>
#include "cli.h"

#define DEFAULT_TIMEOUT_S 60
#define DEFAULT_STATE     "$HOME/.lithium/up"
#define OUT_MAX           4096

/* The remote side of `up`: $1 state dir, $2 server program, $3 name, $4 1 to add --insecure
 * when the server knows it, then the server's flags. The output files are opened by this
 * shell before the server starts, so renaming them after its pid cannot race the server's
 * own redirection (which would otherwise create the old name after the rename). */
static const char up_script[] =
    "set -u\n"
    "dir=$1; prog=$2; name=$3; insecure=$4; shift 4\n"
    "case $dir in '$HOME'/*) dir=$HOME/${dir#'$HOME'/} ;; esac\n"
    "mkdir -p \"$dir\" || exit 1\n"
    "if [ \"$insecure\" = 1 ] && \"$prog\" --help 2>/dev/null | grep -q -e '--insecure'; then\n"
    "  set -- \"$@\" --insecure\n"
    "fi\n"
    "out=$dir/$name.sh$$.out; err=$dir/$name.sh$$.err\n"
    "exec 3>\"$out\" 4>\"$err\"\n"
    "nohup \"$prog\" --name \"$name\" \"$@\" >&3 2>&4 3>&- 4>&- </dev/null &\n"
    "pid=$!\n"
    "exec 3>&- 4>&-\n"
    "mv \"$out\" \"$dir/$name.$pid.out\"; mv \"$err\" \"$dir/$name.$pid.err\"\n"
    "out=$dir/$name.$pid.out; err=$dir/$name.$pid.err\n"
    "echo \"$pid\" >\"$dir/$name.$pid.pid\"\n"
    "i=0\n"
    "while [ $i -lt 600 ]; do\n"
    "  r=$(sed -n 's/^READY //p' \"$out\" | head -n 1)\n"
    "  if [ -n \"$r\" ]; then echo \"PID $pid\"; echo \"READY $r\"; exit 0; fi\n"
    "  if ! kill -0 \"$pid\" 2>/dev/null; then\n"
    "    cat \"$err\" >&2; rm -f \"$dir/$name.$pid.pid\"; exit 1\n"
    "  fi\n"
    "  sleep 0.1; i=$((i + 1))\n"
    "done\n"
    "echo \"no READY line from $prog within 60 s\" >&2; kill -TERM \"$pid\"; exit 1\n";

/* The remote side of `down`: $1 state dir, $2 name. Only processes that still run
 * lithium-server are signalled (a recorded pid may have been reused). */
static const char down_script[] =
    "set -u\n"
    "dir=$1; name=$2; n=0; fail=0\n"
    "case $dir in '$HOME'/*) dir=$HOME/${dir#'$HOME'/} ;; esac\n"
    "for f in \"$dir/$name\".*.pid; do\n"
    "  [ -e \"$f\" ] || continue\n"
    "  pid=$(cat \"$f\"); base=${f%.pid}\n"
    "  if [ -r /proc/$pid/cmdline ] && tr '\\000' ' ' </proc/$pid/cmdline | grep -q "
    "lithium-server; then\n"
    "    kill -TERM \"$pid\" 2>/dev/null\n"
    "    i=0\n"
    "    while kill -0 \"$pid\" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); "
    "done\n"
    "    if kill -0 \"$pid\" 2>/dev/null; then\n"
    "      echo \"server $pid did not stop within 30 s\" >&2; fail=1; continue\n"
    "    fi\n"
    "    n=$((n + 1))\n"
    "  fi\n"
    "  rm -f \"$f\" \"$base.out\" \"$base.err\"\n"
    "done\n"
    "echo \"STOPPED $n\"\n"
    "exit $fail\n";

typedef struct host {
  char *dest; /* ssh destination as given: [user@]host */
  char *name; /* host part, also the server's name */
  pid_t pid;
  int out_fd, err_fd;
  char out[OUT_MAX], err[OUT_MAX];
  size_t nout, nerr;
  int status; /* exit status of ssh, -1 before */
} host_t;

typedef struct opts {
  int down;
  const char *key, *allow, *modules, *server, *state, *ssh;
  const char *port;
  int timeout_s;
  host_t *hosts;
  size_t nhosts;
} opts_t;

static void usage(FILE *f) {
  fputs("usage: lithium up HOSTS [--key FILE] [--allow FILE] [--modules DIR] [--port P]\n"
        "                  [--server PROGRAM] [--ssh CMD] [--state DIR] [--timeout S]\n"
        "       lithium down HOSTS [--ssh CMD] [--state DIR] [--timeout S]\n"
        "  HOSTS: a file with one ssh destination ([user@]host) a line (# comments), or\n"
        "  a comma-separated list. `up` starts one lithium-server a host over ssh,\n"
        "  listening on tcp://*:P (default 0: a free port), waits for every READY line and\n"
        "  prints a hosts file on stdout; `down` stops those servers gracefully (SIGTERM).\n"
        "  --key, --allow    CURVE key and allowed-clients files on the hosts, handed to\n"
        "                    lithium-server as --curve-key FILE and --allow FILE; the\n"
        "                    public key next to FILE (NAME.pub), when readable here, goes\n"
        "                    into the hosts file; without --key the server gets\n"
        "                    --insecure where it knows that flag\n"
        "  --modules DIR     the servers' module directory (a path on the hosts)\n"
        "  --server PROGRAM  lithium-server on the hosts (default: lithium-server on PATH)\n"
        "  --ssh CMD         the ssh command, split at spaces (default: ssh; also\n"
        "                    $LITHIUM_SSH), run as CMD -o BatchMode=yes HOST sh -s\n"
        "  --state DIR       where the hosts keep pids and logs (default ~/.lithium/up)\n"
        "  --timeout S       give up on a host after S seconds (default 60)\n"
        "Exit status: 0 every host did it, 1 one failed (named on stderr), 2 bad usage.\n",
        f);
}

/* add_host appends ssh destination `d` (length n), skipping blanks. */
static int add_host(opts_t *o, const char *d, size_t n) {
  while (n > 0 && (*d == ' ' || *d == '\t'))
    d++, n--;
  while (n > 0 && (d[n - 1] == ' ' || d[n - 1] == '\t' || d[n - 1] == '\r'))
    n--;
  if (n == 0) return 0;
  host_t *h = realloc(o->hosts, (o->nhosts + 1) * sizeof *h);
  if (h == NULL) return -1;
  o->hosts = h;
  h = &h[o->nhosts];
  memset(h, 0, sizeof *h);
  h->status = -1;
  h->out_fd = h->err_fd = -1;
  if ((h->dest = strndup(d, n)) == NULL) return -1;
  const char *at = strrchr(h->dest, '@');
  h->name = strdup(at != NULL ? at + 1 : h->dest);
  if (h->name == NULL) return -1;
  for (char *c = h->name; *c != '\0'; c++)
    if (*c == '/' || *c == ' ' || *c == '*' || *c == '?') *c = '_';
  o->nhosts++;
  return 0;
}

/* read_hosts takes HOSTS: a readable file, else a comma-separated list. */
static int read_hosts(opts_t *o, const char *arg) {
  FILE *f = strchr(arg, ',') == NULL ? fopen(arg, "r") : NULL;
  if (f == NULL) {
    for (;;) {
      size_t n = strcspn(arg, ",");
      if (add_host(o, arg, n) != 0) return -1;
      if (arg[n] == '\0') return 0;
      arg += n + 1;
    }
  }
  char line[1024];
  int rc = 0;
  while (rc == 0 && fgets(line, sizeof line, f) != NULL) {
    line[strcspn(line, "#\n")] = '\0';
    size_t n = strcspn(line, " \t"); /* the first word; a hosts file's endpoint is not one */
    if (strncmp(line, "tcp://", 6) == 0) {
      char *host = line + 6;
      host[strcspn(host, ":")] = '\0';
      rc = add_host(o, host, strlen(host));
    } else {
      rc = add_host(o, line, n);
    }
  }
  fclose(f);
  return rc;
}

/* quote appends `s` to buf as one single-quoted sh word. */
static int quote(char *buf, size_t len, size_t *at, const char *s) {
  size_t need = 3 + strlen(s) * 4;
  if (*at + need + 1 >= len) return -1;
  buf[(*at)++] = ' ';
  buf[(*at)++] = '\'';
  for (; *s != '\0'; s++) {
    if (*s == '\'') {
      memcpy(buf + *at, "'\\''", 4);
      *at += 4;
    } else {
      buf[(*at)++] = *s;
    }
  }
  buf[(*at)++] = '\'';
  buf[*at] = '\0';
  return 0;
}

/* remote_command builds "sh -s -- 'arg' ..." for host h: ssh hands the remote shell one
 * command line, so every argument is quoted. */
static int remote_command(const opts_t *o, const host_t *h, char *buf, size_t len) {
  size_t at = (size_t)snprintf(buf, len, "sh -s --");
  if (quote(buf, len, &at, o->state != NULL ? o->state : DEFAULT_STATE) != 0) return -1;
  if (o->down) return quote(buf, len, &at, h->name);
  char listen[64];
  snprintf(listen, sizeof listen, "tcp://*:%s", o->port != NULL ? o->port : "0");
  const char *args[16];
  int n = 0;
  args[n++] = o->server != NULL ? o->server : "lithium-server";
  args[n++] = h->name;
  args[n++] = o->key == NULL ? "1" : "0"; /* --insecure where the server knows it */
  args[n++] = "--listen";
  args[n++] = listen;
  if (o->modules != NULL) args[n++] = "--modules", args[n++] = o->modules;
  if (o->key != NULL) args[n++] = "--curve-key", args[n++] = o->key;
  if (o->allow != NULL) args[n++] = "--allow", args[n++] = o->allow;
  for (int i = 0; i < n; i++)
    if (quote(buf, len, &at, args[i]) != 0) return -1;
  return 0;
}

/* start runs ssh for host h with the script on its stdin. */
static int start(const opts_t *o, host_t *h) {
  char cmd[8192];
  if (remote_command(o, h, cmd, sizeof cmd) != 0) return -1;
  const char *ssh = o->ssh != NULL ? o->ssh : getenv("LITHIUM_SSH");
  char *words = strdup(ssh != NULL && ssh[0] != '\0' ? ssh : "ssh");
  if (words == NULL) return -1;
  char *argv[64];
  int argc = 0;
  for (char *save = NULL, *w = strtok_r(words, " \t", &save); w != NULL && argc < 56;
       w = strtok_r(NULL, " \t", &save))
    argv[argc++] = w;
  argv[argc++] = "-o";
  argv[argc++] = "BatchMode=yes";
  argv[argc++] = h->dest;
  argv[argc++] = cmd;
  argv[argc] = NULL;
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) {
    free(words);
    return -1;
  }
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    free(words);
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    execvp(argv[0], argv);
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  free(words);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    close(in[1]);
    close(out[0]);
    close(err[0]);
    return -1;
  }
  const char *script = o->down ? down_script : up_script;
  size_t left = strlen(script);
  while (left > 0) {
    ssize_t w = write(in[1], script, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break; /* ssh is gone: its stderr says why */
    script += w;
    left -= (size_t)w;
  }
  close(in[1]);
  h->pid = pid;
  h->out_fd = out[0];
  h->err_fd = err[0];
  return 0;
}

/* collect reads every host's output until all ssh processes ended or the deadline. */
static void collect(opts_t *o) {
  int64_t deadline = lt__cli_clock_us() / 1000 + (int64_t)o->timeout_s * 1000;
  struct pollfd *p = calloc(2 * o->nhosts + 1, sizeof *p);
  if (p == NULL) return;
  for (;;) {
    size_t n = 0;
    for (size_t i = 0; i < o->nhosts; i++) {
      host_t *h = &o->hosts[i];
      p[n++] = (struct pollfd){.fd = h->out_fd, .events = POLLIN};
      p[n++] = (struct pollfd){.fd = h->err_fd, .events = POLLIN};
    }
    int open_fds = 0;
    for (size_t i = 0; i < n; i++)
      open_fds += p[i].fd >= 0;
    int64_t left = deadline - lt__cli_clock_us() / 1000;
    if (open_fds == 0 || left <= 0) break;
    if (poll(p, n, (int)left) < 0 && errno != EINTR) break;
    for (size_t i = 0; i < n; i++) {
      if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      host_t *h = &o->hosts[i / 2];
      char *buf = i % 2 ? h->err : h->out;
      size_t *have = i % 2 ? &h->nerr : &h->nout;
      char junk[512];
      ssize_t got = *have + 1 < OUT_MAX ? read(p[i].fd, buf + *have, OUT_MAX - 1 - *have)
                                        : read(p[i].fd, junk, sizeof junk);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        close(p[i].fd);
        if (i % 2)
          h->err_fd = -1;
        else
          h->out_fd = -1;
        continue;
      }
      if (*have + 1 < OUT_MAX) {
        *have += (size_t)got;
        buf[*have] = '\0';
      }
    }
  }
  free(p);
  for (size_t i = 0; i < o->nhosts; i++) {
    host_t *h = &o->hosts[i];
    if (h->out_fd >= 0 || h->err_fd >= 0) {
      kill(h->pid, SIGTERM); /* timed out */
      snprintf(h->err + h->nerr, OUT_MAX - h->nerr, "\nno answer within %d s\n", o->timeout_s);
      h->nerr = strlen(h->err);
    }
    if (h->out_fd >= 0) close(h->out_fd);
    if (h->err_fd >= 0) close(h->err_fd);
    h->out_fd = h->err_fd = -1;
    int st = 0;
    if (h->pid > 0 && waitpid(h->pid, &st, 0) == h->pid)
      h->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
}

/* line_value finds "KEY value" in text and copies the value. */
static int line_value(const char *text, const char *key, char *out, size_t len) {
  size_t k = strlen(key);
  for (const char *l = text; l != NULL && *l != '\0'; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
    if (strncmp(l, key, k) == 0 && l[k] == ' ') {
      size_t n = strcspn(l + k + 1, "\r\n");
      if (n == 0 || n >= len) return -1;
      memcpy(out, l + k + 1, n);
      out[n] = '\0';
      return 0;
    }
  }
  return -1;
}

/* server_pubkey reads the public key that goes with --key FILE (FILE.pub, or NAME.pub for
 * NAME.key, as `lithium keygen NAME` writes them) when this machine can read it, so that
 * the hosts file names each server's key. Returns 0 with the key in out. */
static int server_pubkey(const char *keyfile, char out[LT_KEY_LEN + 1]) {
  char path[4096];
  size_t n = strlen(keyfile);
  if (n > 4 && strcmp(keyfile + n - 4, ".key") == 0)
    snprintf(path, sizeof path, "%.*s.pub", (int)(n - 4), keyfile);
  else
    snprintf(path, sizeof path, "%s.pub", keyfile);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  char line[256] = "";
  int ok = fgets(line, sizeof line, f) != NULL;
  fclose(f);
  line[strcspn(line, " \t\r\n")] = '\0';
  if (!ok || !lt_key_valid(line)) return -1;
  memcpy(out, line, LT_KEY_LEN + 1);
  return 0;
}

/* endpoint_for makes the endpoint a client uses: the READY line's port on the host's name
 * (the server listens on every interface; its READY line says 0.0.0.0). */
static int endpoint_for(const host_t *h, const char *ready, char *out, size_t len) {
  const char *colon = strrchr(ready, ':');
  if (strncmp(ready, "tcp://", 6) != 0 || colon == NULL) return -1;
  int ipv6 = strchr(h->name, ':') != NULL;
  size_t n = (size_t)snprintf(out, len, "tcp://%s%s%s%s", ipv6 ? "[" : "", h->name, ipv6 ? "]" : "",
                              colon);
  return n < len ? 0 : -1;
}

/* why gives the last non-empty line of a host's stderr: ssh's (or the server's) message. */
static const char *why(host_t *h) {
  while (h->nerr > 0 && (h->err[h->nerr - 1] == '\n' || h->err[h->nerr - 1] == '\r'))
    h->err[--h->nerr] = '\0';
  if (h->nerr == 0) return h->status == 255 ? "ssh failed" : "failed";
  char *nl = strrchr(h->err, '\n');
  return nl != NULL ? nl + 1 : h->err;
}

static int parse(opts_t *o, int argc, char **argv) {
  o->timeout_s = DEFAULT_TIMEOUT_S;
  const char *hosts = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char **dst = NULL;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return LT_EXIT_OK;
    }
    if (strcmp(a, "--key") == 0 && !o->down)
      dst = &o->key;
    else if (strcmp(a, "--allow") == 0 && !o->down)
      dst = &o->allow;
    else if (strcmp(a, "--modules") == 0 && !o->down)
      dst = &o->modules;
    else if (strcmp(a, "--port") == 0 && !o->down)
      dst = &o->port;
    else if (strcmp(a, "--server") == 0 && !o->down)
      dst = &o->server;
    else if (strcmp(a, "--ssh") == 0)
      dst = &o->ssh;
    else if (strcmp(a, "--state") == 0)
      dst = &o->state;
    if (dst != NULL || strcmp(a, "--timeout") == 0) {
      if (i + 1 >= argc || argv[i + 1][0] == '\0') {
        fprintf(stderr, "lithium %s: %s needs a value\n", o->down ? "down" : "up", a);
        return LT_EXIT_USAGE;
      }
      if (dst != NULL) {
        *dst = argv[++i];
        continue;
      }
      char *end;
      long v = strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < 1 || v > 3600) {
        fprintf(stderr, "lithium: bad --timeout '%s' (1..3600 s)\n", argv[i]);
        return LT_EXIT_USAGE;
      }
      o->timeout_s = (int)v;
      continue;
    }
    if (a[0] == '-' || hosts != NULL) {
      fprintf(stderr, "lithium %s: bad argument '%s'\n", o->down ? "down" : "up", a);
      usage(stderr);
      return LT_EXIT_USAGE;
    }
    hosts = a;
  }
  if (o->port != NULL) {
    char *end;
    long p = strtol(o->port, &end, 10);
    if (*end != '\0' || p < 0 || p > 65535) {
      fprintf(stderr, "lithium up: bad --port '%s' (0..65535)\n", o->port);
      return LT_EXIT_USAGE;
    }
  }
  if (hosts == NULL) {
    usage(stderr);
    return LT_EXIT_USAGE;
  }
  if (read_hosts(o, hosts) != 0 || o->nhosts == 0) {
    fprintf(stderr, "lithium %s: no hosts in '%s'\n", o->down ? "down" : "up", hosts);
    return LT_EXIT_USAGE;
  }
  return LT_CLI_GO;
}

int lt__up_main(int argc, char **argv, int down) {
  opts_t o;
  memset(&o, 0, sizeof o);
  o.down = down;
  int status = parse(&o, argc, argv);
  if (status == LT_CLI_GO) {
    status = LT_EXIT_OK;
    for (size_t i = 0; i < o.nhosts; i++) {
      if (start(&o, &o.hosts[i]) != 0) {
        snprintf(o.hosts[i].err, OUT_MAX, "cannot run ssh: %s\n", strerror(errno));
        o.hosts[i].nerr = strlen(o.hosts[i].err);
      }
    }
    collect(&o);
    char key[LT_KEY_LEN + 1] = "";
    if (!down && o.key != NULL && server_pubkey(o.key, key) != 0) {
      fprintf(stderr,
              "lithium up: no public key readable here next to %s: the hosts file "
              "names none\n",
              o.key);
      key[0] = '\0';
    }
    if (!down) printf("# lithium up: one server a line (a hosts file for hosts=FILE)\n");
    for (size_t i = 0; i < o.nhosts; i++) {
      host_t *h = &o.hosts[i];
      char ready[512], ep[600], stopped[32];
      if (!down && h->status == 0 && line_value(h->out, "READY", ready, sizeof ready) == 0 &&
          endpoint_for(h, ready, ep, sizeof ep) == 0) {
        printf("%s%s%s\n", ep, key[0] != '\0' ? " " : "", key);
      } else if (down && h->status == 0 &&
                 line_value(h->out, "STOPPED", stopped, sizeof stopped) == 0) {
        fprintf(stderr, "lithium down: %s: stopped %s server%s\n", h->dest, stopped,
                strcmp(stopped, "1") == 0 ? "" : "s");
      } else {
        fprintf(stderr, "lithium %s: %s: %s\n", down ? "down" : "up", h->dest, why(h));
        status = LT_EXIT_FAILED;
      }
    }
    if (fflush(stdout) != 0) status = LT_EXIT_FAILED;
  }
  for (size_t i = 0; i < o.nhosts; i++) {
    free(o.hosts[i].dest);
    free(o.hosts[i].name);
  }
  free(o.hosts);
  return status;
}
