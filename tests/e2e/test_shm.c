/* test_shm.c: same-host transfers between real servers (server/shm.h). map(skelk:fill,
 * seq(skelk:csum), skelk:add) with placement=rr: the split makes both 4 MiB parts on one
 * server and round robin sends the csum of one of them to the other, which fetches that
 * part from its holder: by memfd over the holder's unix socket (the servers' stats say so),
 * by ZeroMQ when either side runs --no-shm. A holder killed with SIGKILL while transfers go
 * on costs nothing but recomputation, and nothing is left in /dev/shm or among the
 * survivor's descriptors; garbage on the unix socket costs the sender its message, never
 * the server its life. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define BIG_BYTES ((int64_t)4 << 20)
#define READ_MS   60000

/* start_pair starts the two unsupervised servers (the test signals them by pid), the first
 * with the extra flag `flag0` when it is not NULL. */
static void start_pair(lt_proc_t *p, const char *flag0) {
  const char *with[] = {"--no-supervise", "--shm", flag0, NULL},
             *plain[] = {"--no-supervise", "--shm", NULL};
  start_server_with(&p[0], "a", 2, with);
  start_server_with(&p[1], "b", 2, plain);
}

static lt_eval_t *start(const lt_proc_t *p) {
  const char *opts[] = {"mode", "optimized", "placement", "rr", "heartbeat_ms", "200", NULL};
  return eval_on_procs(lt_map("skelk:fill", lt_seq("skelk:csum"), "skelk:add"), p, 2, opts);
}

/* run_one runs one task of `bytes` and checks its result. */
static void run_one(lt_eval_t *ev, int64_t bytes) {
  lt_buf_t *r = one_result(ev, bytes, READ_MS);
  cr_assert_eq(lt_buf_error(r), LT_OK, "%s", lt_buf_errmsg(r));
  cr_assert_eq(lt_buf_len(r), 8);
  uint64_t want = skelk_fill_csum((uint64_t)bytes, 0) + skelk_fill_csum((uint64_t)bytes, 1);
  cr_assert_eq((uint64_t)get_i64(lt_buf_data(r)), want);
  lt_buf_free(r);
}

/* stats_until polls the stats (up to 5 s) until `key` adds up to at least `want` over the
 * servers; a report is as old as the server's last message. The caller frees the text. */
static char *stats_until(lt_eval_t *ev, const char *key, uint64_t want) {
  char *json = NULL;
  for (int tries = 0; tries < 100; tries++) {
    free(json);
    json = stats_of(ev);
    if (stats_sum(json, key) >= want) break;
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
  }
  return json;
}

/* dev_shm_entries counts the entries of /dev/shm that could be a server's: Criterion's own
 * arenas (BoxFort, "bxf...") come and go with the test processes, and other programs on
 * the machine may make theirs while the test runs, so only names with "lithium" count (the
 * servers' memfds are named so, and no server names anything in /dev/shm); that no server
 * keeps a memfd open is checked apart (fds_to). */
static int dev_shm_entries(void) {
  DIR *d = opendir("/dev/shm");
  if (d == NULL) return 0;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += strstr(e->d_name, "lithium") != NULL;
  closedir(d);
  return n;
}

/* fds_to counts the descriptors of process `pid` whose target contains `what`. */
static int fds_to(pid_t pid, const char *what) {
  char dir[64], path[320], target[512];
  snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(dir);
  cr_assert_not_null(d, "%s", dir);
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    ssize_t k = readlink(path, target, sizeof target - 1);
    if (k <= 0) continue;
    target[k] = '\0';
    n += strstr(target, what) != NULL;
  }
  closedir(d);
  return n;
}

Test(shm, a_big_value_moves_by_memfd, .timeout = 120) {
  int shm_before = dev_shm_entries();
  lt_proc_t p[2];
  start_pair(p, NULL);
  lt_eval_t *ev = start(p);
  run_one(ev, BIG_BYTES);
  free(stats_until(ev, "shm_values_in", 1));
  char *json = stats_until(ev, "shm_values_out", 1); /* the holder's report comes later */
  cr_assert_geq(stats_sum(json, "shm_values_in"), 1, "no value moved by memfd: %s", json);
  cr_assert_geq(stats_sum(json, "shm_values_out"), 1, "%s", json);
  cr_assert_geq(stats_sum(json, "bytes_shm_in"), (uint64_t)BIG_BYTES, "%s", json);
  cr_assert_eq(stats_sum(json, "shm_fallbacks"), 0, "%s", json);
  /* The memfd counts as peer bytes too (small values, such as a sum, go by ZeroMQ). */
  uint64_t peer = stats_sum(json, "bytes_peer_in"), shm = stats_sum(json, "bytes_shm_in");
  cr_assert(peer >= shm && peer - shm < 64 * 1024, "%s", json);
  free(json);
  /* lithium status says so too, from outside any session. */
  lt_server_status_t *st = NULL;
  size_t n = 0;
  const char *eps[2] = {p[0].endpoint, p[1].endpoint};
  cr_assert_eq(lt_status_query(&st, &n, eps, NULL, 2, NULL, NULL, 10000), LT_OK);
  cr_assert_eq(n, 2);
  cr_assert(st[0].answered && st[1].answered);
  cr_assert_geq(st[0].shm_in + st[1].shm_in, (uint64_t)BIG_BYTES);
  cr_assert_eq(st[0].shm_in + st[1].shm_in, st[0].shm_out + st[1].shm_out);
  cr_assert_geq(st[0].peer_in + st[1].peer_in, st[0].shm_in + st[1].shm_in);
  lt_status_free(st, n);
  cr_assert_eq(values_held_total(ev), 0);
  /* Released values leave no memfd open on either side, and nothing was named. */
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(fds_to(p[i].pid, "memfd:lithium-value"), 0, "server %d", i);
  }
  cr_assert_eq(dev_shm_entries(), shm_before);
  lt_eval_free(ev);
  lt__proc_stop(&p[0], 5000);
  lt__proc_stop(&p[1], 5000);
}

Test(shm, no_shm_on_one_side_falls_back_to_zeromq, .timeout = 120) {
  lt_proc_t p[2];
  start_pair(p, "--no-shm");
  lt_eval_t *ev = start(p);
  run_one(ev, BIG_BYTES);
  char *json = stats_until(ev, "bytes_peer_in", (uint64_t)BIG_BYTES);
  cr_assert_geq(stats_sum(json, "bytes_peer_in"), (uint64_t)BIG_BYTES, "%s", json);
  cr_assert_eq(stats_sum(json, "shm_values_in"), 0, "%s", json);
  cr_assert_eq(stats_sum(json, "bytes_shm_in"), 0, "%s", json);
  free(json);
  lt_eval_free(ev);
  lt__proc_stop(&p[0], 5000);
  lt__proc_stop(&p[1], 5000);
}

Test(shm, a_holder_killed_loses_nothing_and_leaves_nothing, .timeout = 180) {
  int shm_before = dev_shm_entries();
  lt_proc_t p[2];
  start_pair(p, NULL);
  lt_eval_t *ev = start(p);
  enum { TASKS = 12 };
  int64_t sizes[TASKS];
  for (int i = 0; i < TASKS; i++)
    sizes[i] = BIG_BYTES;
  submit_values(ev, sizes, TASKS);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  /* Transfers are going on: kill whichever server has sent a memfd. */
  int victim = -1;
  for (int tries = 0; tries < 600 && victim < 0; tries++) {
    for (int i = 0; i < 2 && victim < 0; i++)
      if (server_stat(ev, "shm_values_out", i) > 0) victim = i;
    if (victim < 0) usleep(20 * 1000);
  }
  cr_assert_geq(victim, 0, "no server sent a memfd");
  /* The stats list the servers in the order they were added. */
  kill(p[victim].pid, SIGKILL);
  uint64_t want = skelk_fill_csum((uint64_t)BIG_BYTES, 0) + skelk_fill_csum((uint64_t)BIG_BYTES, 1);
  for (int i = 0; i < TASKS; i++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next_timeout(ev, READ_MS, &b), LT_OK, "task %d", i);
    cr_assert_eq(lt_buf_error(b), LT_OK, "task %d: %s", i, lt_buf_errmsg(b));
    cr_assert_eq((uint64_t)get_i64(lt_buf_data(b)), want, "task %d", i);
    lt_buf_free(b);
  }
  int survivor = 1 - victim;
  cr_assert_eq(values_held_total(ev), 0);
  cr_assert_eq(fds_to(p[survivor].pid, "memfd:lithium-value"), 0);
  cr_assert_eq(dev_shm_entries(), shm_before, "something was left in /dev/shm");
  lt_eval_free(ev);
  lt__proc_stop(&p[0], 1000);
  lt__proc_stop(&p[1], 5000);
}

/* worker_of returns the worker process of supervised server `p` (its only child). */
static pid_t worker_of(const lt_proc_t *p) {
  char path[96];
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)p->pid, (int)p->pid);
  long w = 0;
  for (int tries = 0; tries < 500 && w == 0; tries++) {
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    if (fscanf(f, "%ld", &w) != 1) w = 0;
    fclose(f);
    if (w == 0) usleep(10 * 1000);
  }
  cr_assert_gt(w, 0, "no worker under supervisor %d", (int)p->pid);
  return (pid_t)w;
}

/* b_shm_in runs one task on the servers `p` with a new evaluator and returns the second
 * server's shm_values_in (a count since its worker started) once a value moved by memfd. */
static uint64_t b_shm_in(const lt_proc_t *p) {
  lt_eval_t *ev = start(p);
  run_one(ev, BIG_BYTES);
  char *json = stats_until(ev, "shm_values_in", 1);
  uint64_t in[2] = {0, 0};
  cr_assert_eq(stats_each(json, "shm_values_in", in, 2), 2, "%s", json);
  free(json);
  lt_eval_free(ev);
  return in[1];
}

/* A holder whose worker is killed and restarted by its supervisor on the same endpoint
 * listens on a new unix socket: its peer greets it again over ZeroMQ, learns the new name
 * from the welcome and attaches to it, and values move by memfd again. */
Test(shm, a_restarted_holder_is_attached_again, .timeout = 180) {
  lt_proc_t p[2];
  const char *shm[] = {"--shm", NULL};
  start_server_with(&p[0], "a", 2, shm);
  start_server_with(&p[1], "b", 2, shm);
  uint64_t before = b_shm_in(p);
  pid_t old = worker_of(&p[0]);
  kill(old, SIGKILL);
  pid_t now = old;
  for (int tries = 0; tries < 500 && now == old; tries++) {
    usleep(10 * 1000);
    now = worker_of(&p[0]);
  }
  cr_assert_neq(now, old, "the supervisor did not restart the worker");
  /* b fetches from a in about half of the runs (round robin): until one value came by memfd
   * to b, a's new socket is not proven attached. */
  uint64_t after = before;
  for (int t = 0; t < 20 && after == before; t++)
    after = b_shm_in(p);
  cr_assert_gt(after, before, "b never received a value of the restarted a by memfd");
  lt__proc_stop(&p[0], 5000);
  lt__proc_stop(&p[1], 5000);
}

/* shm_name finds the abstract unix socket of server `pid` in /proc/net/unix. */
static void shm_name(pid_t pid, char *out, size_t len) {
  char want[64], line[512];
  snprintf(want, sizeof want, "@lithium-shm-%d-", (int)pid);
  FILE *f = fopen("/proc/net/unix", "r");
  cr_assert_not_null(f);
  out[0] = '\0';
  while (fgets(line, sizeof line, f) != NULL) {
    char *at = strstr(line, want);
    if (at == NULL) continue;
    at[strcspn(at, " \n")] = '\0';
    snprintf(out, len, "%s", at + 1);
    break;
  }
  fclose(f);
  cr_assert_neq(out[0], '\0', "no unix socket of server %d", (int)pid);
}

static int connect_name(const char *name) {
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  size_t n = strlen(name);
  memcpy(a.sun_path + 1, name, n);
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  cr_assert_geq(fd, 0);
  cr_assert_eq(connect(fd, (struct sockaddr *)&a,
                       (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)),
               0, "%s", strerror(errno));
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

/* send_with sends `len` bytes with `nfds` copies of descriptor `fd` attached. */
static void send_with(int sock, const void *data, size_t len, int fd, int nfds) {
  struct iovec iov = {(void *)data, len};
  char ctl[CMSG_SPACE(8 * sizeof(int))];
  memset(ctl, 0, sizeof ctl);
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
  if (nfds > 0) {
    mh.msg_control = ctl;
    mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
    for (int i = 0; i < nfds; i++)
      memcpy(CMSG_DATA(c) + (size_t)i * sizeof(int), &fd, sizeof fd);
  }
  sendmsg(sock, &mh, MSG_NOSIGNAL); /* the server may have closed us already */
}

Test(shm, garbage_on_the_unix_socket_costs_only_the_sender, .timeout = 120) {
  lt_proc_t p[2];
  start_pair(p, NULL);
  char name[128];
  shm_name(p[0].pid, name, sizeof name);
  int mfd = memfd_create("lt-test-garbage", MFD_CLOEXEC);
  cr_assert_geq(mfd, 0);
  static unsigned char big[70000];
  memset(big, 0xab, sizeof big);
  struct {
    uint32_t magic, type;
    uint64_t a, b, len;
  } msg = {0x4c54534du, 3, 1, 2, 1u << 20}; /* a VALUE: holders never take one */
  int s = connect_name(name);
  send_with(s, "short", 5, -1, 0);
  send_with(s, big, sizeof big, mfd, 3);
  send_with(s, &msg, sizeof msg, mfd, 8);
  msg.magic = 0xdeadbeef;
  send_with(s, &msg, sizeof msg, -1, 0);
  msg.magic = 0x4c54534du;
  msg.type = 1; /* an attach with a made-up id and secret: the connection is closed */
  send_with(s, &msg, sizeof msg, -1, 0);
  char buf[64];
  cr_assert_eq(recv(s, buf, sizeof buf, 0), 0, "the forged attach did not close the link");
  close(s);
  /* A connection that never attaches is closed too, in a few seconds. */
  s = connect_name(name);
  cr_assert_eq(recv(s, buf, sizeof buf, 0), 0, "a silent connection stayed open");
  close(s);
  cr_assert_eq(lt__proc_exited(&p[0]), 0, "the server died");
  cr_assert_eq(fds_to(p[0].pid, "memfd:lt-test-garbage"), 0, "descriptors sent were kept");
  close(mfd);
  /* And it still moves values by memfd. */
  lt_eval_t *ev = start(p);
  run_one(ev, BIG_BYTES);
  char *json = stats_until(ev, "shm_values_in", 1);
  cr_assert_geq(stats_sum(json, "shm_values_in"), 1, "%s", json);
  free(json);
  lt_eval_free(ev);
  lt__proc_stop(&p[0], 5000);
  lt__proc_stop(&p[1], 5000);
}
