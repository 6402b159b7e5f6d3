/* test_capture.c: what someone recording the client's link sees (issue 12), end to end.
 * Each test makes a network namespace joined to this one by a veth pair with private
 * addresses, runs a lithium-server inside it, and records the client's end of the link with
 * tcpdump while tasks carrying a random 64-byte marker go through testk:echo and come back.
 * Under CURVE the capture holds no copy of the marker; without CURVE (--insecure, the
 * control that lets the test fail) it does.
 *
 * Root, `ip netns` (iproute2) and tcpdump (Debian's, scripts/setup) are needed: without them
 * the tests skip, saying why. Everything a test makes (namespace, link, server, tcpdump, key
 * and capture files) is named after its pid and removed at its end, also when it fails
 * (.fini); what a killed test process left behind is removed by a later run, once that pid
 * is gone. Test process only. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h> /* memmem: the build defines _GNU_SOURCE */
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <lithium.h>
#include <lithium/error.h>
#include "curve.h"
#include "harness.h"
#include "server/srv_helper.h"

#define MARKER_LEN 64
#define TASKS      8
#define NS_PREFIX  "ltcap" /* namespaces: ltcap<pid> */
/* Files: /tmp/lt_capture-<pid>-XXXXXX. */
#define DIR_PREFIX "/tmp/lt_capture-"
#define CMD_MS     10000 /* the longest an ip command, a start or a stop may take */
#define NETS       16384 /* /30 networks in 10.213.0.0/16 */

typedef struct capture {
  char ip[256], tcpdump[256];  /* program paths */
  char ns[32];                 /* the server's namespace */
  char host_if[16], ns_if[16]; /* the veth ends: the client's (here) and the server's */
  char host_addr[16], ns_addr[16];
  char dir[64]; /* keys and the capture file */
  char pcap[96];
  bool ns_made, link_made;
  pid_t tcpdump_pid;  /* 0 when not running */
  int tcpdump_err;    /* tcpdump's stderr, -1 when closed */
  th_server_t server; /* pid 0 when not running */
  lt_eval_t *ev;
} capture_t;

static capture_t cap = {.tcpdump_err = -1};
static char ip_err[1024]; /* stderr of the last ip command */

/* find_program puts the path of `name` (searched on PATH, then in the sbin directories root's
 * PATH has) into out; false when there is none. */
static bool find_program(const char *name, char *out, size_t outlen) {
  const char *env = getenv("PATH");
  char path[4096];
  snprintf(path, sizeof path, "%s:/usr/sbin:/sbin:/usr/bin:/bin", env != NULL ? env : "");
  char *save = NULL;
  for (char *d = strtok_r(path, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
    snprintf(out, outlen, "%s/%s", d, name);
    if (access(out, X_OK) == 0) return true;
  }
  return false;
}

/* ip runs `ip ARG...` (NULL-terminated) within CMD_MS and returns its exit status (-1 when it
 * could not run or timed out); its stdout goes to out (may be NULL), its stderr to ip_err. */
static int ip(char *out, size_t outlen, ...) {
  const char *argv[16] = {cap.ip};
  size_t n = 1;
  va_list ap;
  va_start(ap, outlen);
  for (const char *a; n < 15 && (a = va_arg(ap, const char *)) != NULL;)
    argv[n++] = a;
  va_end(ap);
  argv[n] = NULL;
  char none[512];
  if (out == NULL) {
    out = none;
    outlen = sizeof none;
  }
  int rc = th_run(argv, CMD_MS, out, outlen, ip_err, sizeof ip_err);
  ip_err[strcspn(ip_err, "\n")] = '\0';
  return rc;
}

static bool pid_gone(long pid) {
  return pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

static void remove_dir(const char *dir) {
  char out[64], err[256];
  const char *argv[] = {"/bin/rm", "-rf", dir, NULL};
  if (th_run(argv, CMD_MS, out, sizeof out, err, sizeof err) != 0)
    cr_log_warn("cannot remove %s: %s", dir, err);
}

/* reap_stale removes what test processes that are gone left behind: the processes in their
 * namespaces, the namespaces, their links and their files. */
static void reap_stale(void) {
  char out[16384], *save = NULL;
  if (ip(out, sizeof out, "netns", "list", NULL) == 0) {
    for (char *l = strtok_r(out, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save)) {
      long pid;
      char ns[32], pids[4096], *psave = NULL;
      if (sscanf(l, NS_PREFIX "%ld", &pid) != 1 || !pid_gone(pid)) continue;
      snprintf(ns, sizeof ns, NS_PREFIX "%ld", pid);
      cr_log_warn("removing namespace %s, left by a test process that is gone", ns);
      if (ip(pids, sizeof pids, "netns", "pids", ns, NULL) == 0)
        for (char *p = strtok_r(pids, "\n", &psave); p != NULL; p = strtok_r(NULL, "\n", &psave))
          kill((pid_t)atol(p), SIGKILL);
      ip(NULL, 0, "netns", "delete", ns, NULL);
    }
  }
  /* A link outlives its namespace while a process still holds the namespace. */
  if (ip(out, sizeof out, "-o", "link", "show", "type", "veth", NULL) == 0) {
    for (char *l = strtok_r(out, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save)) {
      long pid;
      char name[16];
      if (sscanf(l, "%*d: lc%ld%1[h]", &pid, name) != 2 || !pid_gone(pid)) continue;
      snprintf(name, sizeof name, "lc%ldh", pid);
      ip(NULL, 0, "link", "delete", name, NULL);
    }
  }
  glob_t g;
  if (glob(DIR_PREFIX "*", 0, NULL, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; i++)
      if (pid_gone(atol(g.gl_pathv[i] + strlen(DIR_PREFIX)))) remove_dir(g.gl_pathv[i]);
    globfree(&g);
  }
}

/* net_taken tells whether a route other than the default one covers `addr`: another
 * interface (another run of this test, a container bridge) already uses that network. */
static bool net_taken(const char *addr) {
  char out[4096], *save = NULL;
  if (ip(out, sizeof out, "-4", "route", "show", "to", "match", addr, NULL) != 0) return true;
  for (char *l = strtok_r(out, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save))
    if (strncmp(l, "default", 7) != 0) return true;
  return false;
}

/* choose_addresses picks a free /30 in 10.213.0.0/16, starting from this process's pid so
 * that concurrent runs start apart: .1 for the client's end, .2 for the server's. */
static void choose_addresses(void) {
  for (int k = 0; k < 64; k++) {
    unsigned net = ((unsigned)getpid() + (unsigned)k) % NETS;
    snprintf(cap.host_addr, sizeof cap.host_addr, "10.213.%u.%u", net >> 6, (net & 63) * 4 + 1);
    snprintf(cap.ns_addr, sizeof cap.ns_addr, "10.213.%u.%u", net >> 6, (net & 63) * 4 + 2);
    if (!net_taken(cap.host_addr) && !net_taken(cap.ns_addr)) return;
  }
  cr_assert_fail("no free /30 in 10.213.0.0/16 near %s", cap.host_addr);
}

/* setup_link makes the namespace and the veth pair between it and this namespace, or skips
 * the test when this machine cannot (not root, no ip or tcpdump, no namespaces). */
static void setup_link(void) {
  if (geteuid() != 0) cr_skip_test("not root: network namespaces and tcpdump need root");
  if (!find_program("ip", cap.ip, sizeof cap.ip))
    cr_skip_test("no ip program (iproute2): cannot make a network namespace");
  if (!find_program("tcpdump", cap.tcpdump, sizeof cap.tcpdump))
    cr_skip_test("no tcpdump (scripts/setup installs Debian's)");
  reap_stale();
  long pid = (long)getpid();
  snprintf(cap.ns, sizeof cap.ns, NS_PREFIX "%ld", pid);
  snprintf(cap.host_if, sizeof cap.host_if, "lc%ldh", pid);
  snprintf(cap.ns_if, sizeof cap.ns_if, "lc%ldn", pid);
  snprintf(cap.dir, sizeof cap.dir, DIR_PREFIX "%ld-XXXXXX", pid);
  cr_assert_not_null(mkdtemp(cap.dir), "mkdtemp: %s", strerror(errno));
  snprintf(cap.pcap, sizeof cap.pcap, "%s/link.pcap", cap.dir);
  if (ip(NULL, 0, "netns", "add", cap.ns, NULL) != 0)
    cr_skip_test("ip netns add fails here: %s", ip_err);
  cap.ns_made = true;
  if (ip(NULL, 0, "link", "add", cap.host_if, "type", "veth", "peer", "name", cap.ns_if, "netns",
         cap.ns, NULL) != 0)
    cr_skip_test("cannot make a veth pair into a namespace: %s", ip_err);
  cap.link_made = true;
  choose_addresses();
  char host_net[24], ns_net[24];
  snprintf(host_net, sizeof host_net, "%s/30", cap.host_addr);
  snprintf(ns_net, sizeof ns_net, "%s/30", cap.ns_addr);
  cr_assert_eq(ip(NULL, 0, "addr", "add", host_net, "dev", cap.host_if, NULL), 0, "%s", ip_err);
  cr_assert_eq(ip(NULL, 0, "link", "set", cap.host_if, "up", NULL), 0, "%s", ip_err);
  cr_assert_eq(ip(NULL, 0, "-n", cap.ns, "addr", "add", ns_net, "dev", cap.ns_if, NULL), 0, "%s",
               ip_err);
  cr_assert_eq(ip(NULL, 0, "-n", cap.ns, "link", "set", cap.ns_if, "up", NULL), 0, "%s", ip_err);
  cr_assert_eq(ip(NULL, 0, "-n", cap.ns, "link", "set", "lo", "up", NULL), 0, "%s", ip_err);
}

/* read_some appends what fd has within `ms` to buf (NUL-terminated, cut to its size); false
 * at end of file. */
static bool read_some(int fd, int ms, char *buf, size_t size) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, ms) <= 0) return true;
  size_t used = strlen(buf);
  char tmp[1024];
  ssize_t r = read(fd, tmp, sizeof tmp);
  if (r <= 0) return false;
  size_t k = (size_t)r < size - 1 - used ? (size_t)r : size - 1 - used;
  memcpy(buf + used, tmp, k);
  buf[used + k] = '\0';
  return true;
}

/* start_tcpdump records the client's end of the link into cap.pcap, taking every packet as
 * it comes (--immediate-mode) and writing it at once (-U), as root (-Z root: the capture directory
 * is root's), and returns once tcpdump says it is listening. tcpdump gets SIGKILL if this process
 * dies first. */
static void start_tcpdump(void) {
  int pe[2];
  cr_assert_eq(pipe2(pe, O_CLOEXEC), 0);
  const char *argv[] = {cap.tcpdump, "-i", cap.host_if, "-n", "--immediate-mode", "-U", "-s",
                        "0",         "-Z", "root",      "-w", cap.pcap,           NULL};
  pid_t parent = getpid();
  pid_t pid = fork();
  cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int null = open("/dev/null", O_RDWR);
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    dup2(pe[1], STDERR_FILENO);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  close(pe[1]);
  cap.tcpdump_pid = pid;
  cap.tcpdump_err = pe[0];
  char said[2048] = "";
  int64_t until = th_now_ms() + CMD_MS;
  while (strstr(said, "listening on") == NULL && th_now_ms() < until)
    if (!read_some(cap.tcpdump_err, 100, said, sizeof said)) break;
  cr_assert_not_null(strstr(said, "listening on"), "tcpdump did not start: %s", said);
}

/* stop_tcpdump stops tcpdump with SIGINT (it then writes what it holds and its counts) and
 * waits for it, within CMD_MS, then SIGKILL. Returns its exit status (-1 when killed) and its
 * last words in said. */
static int stop_tcpdump(char *said, size_t size) {
  if (cap.tcpdump_pid <= 0) return -1;
  said[0] = '\0';
  kill(cap.tcpdump_pid, SIGINT);
  int64_t until = th_now_ms() + CMD_MS;
  bool open = true;
  while (open && th_now_ms() < until)
    open = read_some(cap.tcpdump_err, 100, said, size);
  int st = 0, rc = -1;
  pid_t r;
  while ((r = waitpid(cap.tcpdump_pid, &st, WNOHANG)) == 0 && th_now_ms() < until)
    usleep(5000);
  if (r != cap.tcpdump_pid) {
    kill(cap.tcpdump_pid, SIGKILL);
    waitpid(cap.tcpdump_pid, &st, 0);
  } else if (WIFEXITED(st)) {
    rc = WEXITSTATUS(st);
  }
  cap.tcpdump_pid = 0;
  close(cap.tcpdump_err);
  cap.tcpdump_err = -1;
  return rc;
}

/* teardown stops and removes whatever the test made, in the order that lets each step
 * succeed: the client, the server (it holds the namespace), tcpdump, the link, the namespace,
 * the files. Safe to call more than once; false when something could not be removed. */
static bool teardown(void) {
  bool ok = true;
  char said[2048];
  lt_eval_free(cap.ev);
  cap.ev = NULL;
  if (cap.server.pid > 0) th_server_stop(&cap.server, SIGKILL, CMD_MS);
  stop_tcpdump(said, sizeof said);
  if (cap.link_made && ip(NULL, 0, "link", "delete", cap.host_if, NULL) != 0) {
    cr_log_error("cannot delete link %s: %s", cap.host_if, ip_err);
    ok = false;
  }
  cap.link_made = false;
  if (cap.ns_made && ip(NULL, 0, "netns", "delete", cap.ns, NULL) != 0) {
    cr_log_error("cannot delete namespace %s: %s", cap.ns, ip_err);
    ok = false;
  }
  cap.ns_made = false;
  if (cap.dir[0] != '\0') remove_dir(cap.dir);
  cap.dir[0] = '\0';
  return ok;
}

static void fini(void) {
  teardown();
}

/* make_marker fills m with MARKER_LEN random letters and digits. */
static void make_marker(char *m) {
  static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char r[MARKER_LEN];
  cr_assert_eq(getrandom(r, sizeof r, 0), (ssize_t)sizeof r);
  for (int i = 0; i < MARKER_LEN; i++)
    m[i] = alnum[r[i] % (sizeof alnum - 1)];
  m[MARKER_LEN] = '\0';
}

/* start_server starts lithium-server in the namespace on its veth address, port 0, with
 * CURVE (a fresh key pair, the client's key allowed) or --insecure, and returns the client's
 * host string (with the server's key under CURVE) and its key file in cli_key. */
static void start_server_in_ns(bool curve, char *host, size_t hostlen, char *cli_key) {
  char listen[64], srv_key[128], allow[128], srv_pub[LT_Z85_KEY_LEN + 1] = "";
  snprintf(listen, sizeof listen, "tcp://%s:0", cap.ns_addr);
  const char *argv[24] = {cap.ip,          "netns",     "exec", cap.ns,
                          LT_TEST_SERVER,  "--listen",  listen, "--modules",
                          LT_TEST_MODULES, "--threads", "2"};
  size_t n = 11;
  if (curve) {
    char base[96], err[300], cli_pub[LT_Z85_KEY_LEN + 1];
    snprintf(base, sizeof base, "%s/server", cap.dir);
    cr_assert_eq(lt__curve_keygen(base, err, sizeof err), LT_OK, "%s", err);
    snprintf(srv_key, sizeof srv_key, "%s.key", base);
    snprintf(allow, sizeof allow, "%s.pub", base);
    cr_assert_eq(lt__curve_read_public(allow, srv_pub, err, sizeof err), LT_OK, "%s", err);
    snprintf(base, sizeof base, "%s/client", cap.dir);
    cr_assert_eq(lt__curve_keygen(base, err, sizeof err), LT_OK, "%s", err);
    snprintf(cli_key, 128, "%s.key", base);
    snprintf(allow, sizeof allow, "%s.pub", base);
    cr_assert_eq(lt__curve_read_public(allow, cli_pub, err, sizeof err), LT_OK, "%s", err);
    snprintf(allow, sizeof allow, "%s/allow", cap.dir);
    FILE *f = fopen(allow, "w");
    cr_assert_not_null(f);
    fprintf(f, "%s capture-test\n", cli_pub);
    cr_assert_eq(fclose(f), 0);
    argv[n++] = "--curve-key";
    argv[n++] = srv_key;
    argv[n++] = "--allow";
    argv[n++] = allow;
  } else {
    /* A listen on anything but loopback without a key needs --insecure. */
    argv[n++] = "--insecure";
  }
  argv[n] = NULL;
  cr_assert_eq(th_server_start_argv(&cap.server, argv, CMD_MS), 0,
               "lithium-server did not start in namespace %s", cap.ns);
  snprintf(host, hostlen, "%s%s%s", cap.server.endpoint, curve ? " " : "", srv_pub);
}

/* run_tasks sends TASKS tasks through testk:echo, one at a time (each message stands alone
 * on the link, not cut across TCP segments by a batch), each the marker and its number, and
 * checks that every one comes back unchanged. */
static void run_tasks(const char *host, const char *cli_key, const char *marker) {
  cr_assert_eq(lt_eval_new(&cap.ev, lt_farm(lt_seq("testk:echo"))), LT_OK);
  cr_assert_eq(lt_eval_set(cap.ev, "connect_timeout_ms", "8000"), LT_OK);
  if (cli_key != NULL) cr_assert_eq(lt_eval_set(cap.ev, "curve_key", cli_key), LT_OK);
  cr_assert_eq(lt_eval_add_host(cap.ev, host), LT_OK, "%s", host);
  int rc = lt_eval_start(cap.ev);
  cr_assert_eq(rc, LT_OK, "start on %s: %s", host, lt_strerror(rc));
  for (int i = 0; i < TASKS; i++) {
    char task[MARKER_LEN + 16];
    int len = snprintf(task, sizeof task, "%s task %d", marker, i);
    cr_assert_eq(lt_eval_submit(cap.ev, task, (size_t)len, NULL), LT_OK);
    lt_buf_t *b = NULL;
    rc = lt_eval_next_timeout(cap.ev, CMD_MS, &b);
    cr_assert_eq(rc, LT_OK, "task %d: %s", i, lt_strerror(rc));
    cr_assert_eq(lt_buf_error(b), LT_OK, "task %d failed: %s", i, lt_buf_errmsg(b));
    cr_assert(lt_buf_len(b) == (size_t)len && memcmp(lt_buf_data(b), task, (size_t)len) == 0,
              "task %d came back changed (%zu bytes)", i, lt_buf_len(b));
    lt_buf_free(b);
  }
  cr_assert_eq(lt_eval_close(cap.ev), LT_OK);
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next_timeout(cap.ev, CMD_MS, &b), LT_ECLOSED);
  /* Freeing the evaluator ends its session: the goodbye is on the capture too. */
  lt_eval_free(cap.ev);
  cap.ev = NULL;
}

static unsigned char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "%s: %s", path, strerror(errno));
  size_t cap_bytes = 1 << 16, used = 0;
  unsigned char *data = malloc(cap_bytes);
  cr_assert_not_null(data);
  size_t r;
  while ((r = fread(data + used, 1, cap_bytes - used, f)) > 0) {
    used += r;
    if (used == cap_bytes) {
      cap_bytes *= 2;
      data = realloc(data, cap_bytes);
      cr_assert_not_null(data);
    }
  }
  fclose(f);
  *len = used;
  return data;
}

/* count counts the places where `needle` stands in data. */
static int count(const unsigned char *data, size_t len, const void *needle, size_t n) {
  int k = 0;
  for (const unsigned char *p = data; (p = memmem(p, len - (size_t)(p - data), needle, n)) != NULL;
       p += n)
    k++;
  return k;
}

/* The security mechanism of a ZMTP 3 greeting: its name, NUL-padded to 20 bytes. It travels
 * in clear, so it shows which link the capture recorded and how it was secured. */
static int mechanism(const unsigned char *data, size_t len, const char *name) {
  char field[20] = {0};
  memcpy(field, name, strlen(name));
  return count(data, len, field, sizeof field);
}

/* flush_capture sends a UDP datagram holding a fresh marker over the link and waits until
 * tcpdump has written it to the file. tcpdump writes packets in the order they came, so every
 * packet of the session is in the file by then; stopped earlier, tcpdump would lose those it
 * had received and not yet written ("received by filter" but not "captured"). */
static void flush_capture(void) {
  char sentinel[MARKER_LEN + 1];
  make_marker(sentinel);
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(9)}; /* discard */
  cr_assert_eq(inet_pton(AF_INET, cap.ns_addr, &to.sin_addr), 1);
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  cr_assert_geq(fd, 0, "socket: %s", strerror(errno));
  ssize_t sent = sendto(fd, sentinel, MARKER_LEN, 0, (struct sockaddr *)&to, sizeof to);
  close(fd);
  cr_assert_eq(sent, MARKER_LEN, "sendto %s: %s", cap.ns_addr, strerror(errno));
  int64_t until = th_now_ms() + CMD_MS;
  for (;;) {
    size_t len;
    unsigned char *pcap = read_file(cap.pcap, &len);
    int seen = count(pcap, len, sentinel, MARKER_LEN);
    free(pcap);
    if (seen > 0) return;
    cr_assert_lt(th_now_ms(), until, "tcpdump did not write the sentinel in %d ms", CMD_MS);
    usleep(20 * 1000);
  }
}

/* capture_run runs the whole test once, with or without CURVE, and returns how many copies of
 * the marker the capture holds; everything made is removed before it returns. */
static int capture_run(bool curve) {
  setup_link();
  char marker[MARKER_LEN + 1], host[400], cli_key[128];
  make_marker(marker);
  start_tcpdump();
  start_server_in_ns(curve, host, sizeof host, cli_key);
  run_tasks(host, curve ? cli_key : NULL, marker);
  cr_assert_eq(th_server_stop(&cap.server, SIGTERM, CMD_MS), 0, "the server did not stop well");
  flush_capture();
  char said[2048];
  int rc = stop_tcpdump(said, sizeof said);
  cr_assert_eq(rc, 0, "tcpdump exit status %d: %s", rc, said);
  /* Every packet must be in the file: a dropped one could hide the marker. */
  const char *drop = strstr(said, "packets dropped by kernel");
  cr_assert_not_null(drop, "tcpdump did not count its packets: %s", said);
  while (drop > said && drop[-1] == ' ')
    drop--;
  while (drop > said && drop[-1] >= '0' && drop[-1] <= '9')
    drop--;
  cr_assert_eq(atol(drop), 0, "tcpdump dropped packets: %s", said);
  size_t len;
  unsigned char *pcap = read_file(cap.pcap, &len);
  int found = count(pcap, len, marker, MARKER_LEN);
  int curve_greetings = mechanism(pcap, len, "CURVE");
  int null_greetings = mechanism(pcap, len, "NULL");
  free(pcap);
  cr_log_info("%s: %zu bytes captured on %s (%s -> %s), %d copies of the marker, greetings "
              "CURVE %d NULL %d",
              curve ? "CURVE" : "no CURVE", len, cap.host_if, cap.host_addr, cap.ns_addr, found,
              curve_greetings, null_greetings);
  /* The capture is of this session's link: both greetings (client's and server's) are on it,
   * with the mechanism the test asked for, and more bytes than the markers alone. */
  cr_assert_geq(curve ? curve_greetings : null_greetings, 2, "no greeting on the capture");
  cr_assert_eq(curve ? null_greetings : curve_greetings, 0, "a greeting of the other mechanism");
  cr_assert_gt(len, (size_t)(2 * TASKS * MARKER_LEN), "the capture is too small: %zu bytes", len);
  cr_assert(teardown(), "teardown failed");
  char named[64]; /* where ip netns keeps a namespace's name */
  snprintf(named, sizeof named, "/run/netns/%s", cap.ns);
  cr_assert_neq(access(named, F_OK), 0, "namespace %s is still there", cap.ns);
  cr_assert_neq(ip(NULL, 0, "link", "show", cap.host_if, NULL), 0, "link %s is still there",
                cap.host_if);
  return found;
}

Test(capture, curve_hides_the_payload, .fini = fini, .timeout = 120) {
  cr_assert_eq(capture_run(true), 0, "the marker is on the capture of a CURVE link");
}

/* The control: the same capture without CURVE shows the marker, going out in every task and
 * coming back in every result. */
Test(capture, plaintext_without_curve, .fini = fini, .timeout = 120) {
  int found = capture_run(false);
  cr_assert_geq(found, 2 * TASKS, "only %d copies of the marker on a plaintext link", found);
}
