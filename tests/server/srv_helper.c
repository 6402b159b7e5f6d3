/* srv_helper.c: spawning, stopping and talking to a real lithium-server in tests (see
 * srv_helper.h). Processes are started with posix_spawn and always reaped; sockets use
 * linger 0 so that a test never hangs on close. */
#include "srv_helper.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <lithium/error.h>

extern char **environ;

int64_t th_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int th_conn_ended(int fd, int timeout_ms) {
  int64_t until = th_now_ms() + timeout_ms;
  char buf[512];
  for (;;) {
    int left = (int)(until - th_now_ms());
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (left <= 0 || poll(&p, 1, left) <= 0) return 0;
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return 1;
  }
}

static int spawn(const char *const *argv, int *out_fd, int *err_fd, pid_t *pid) {
  int po[2], pe[2] = {-1, -1};
  if (pipe2(po, O_CLOEXEC) != 0) return -1;
  if (err_fd != NULL && pipe2(pe, O_CLOEXEC) != 0) {
    close(po[0]);
    close(po[1]);
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, po[1], STDOUT_FILENO);
  if (err_fd != NULL) posix_spawn_file_actions_adddup2(&fa, pe[1], STDERR_FILENO);
  int rc = posix_spawn(pid, argv[0], &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(po[1]);
  if (err_fd != NULL) close(pe[1]);
  if (rc != 0) {
    close(po[0]);
    if (err_fd != NULL) close(pe[0]);
    return -1;
  }
  *out_fd = po[0];
  if (err_fd != NULL) *err_fd = pe[0];
  return 0;
}

/* reap waits up to timeout_ms for pid; the exit status, 128+signal, or -1 on timeout. */
static int reap(pid_t pid, int timeout_ms) {
  int64_t until = th_now_ms() + timeout_ms;
  for (;;) {
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (r < 0 && errno != EINTR) return -1;
    if (th_now_ms() >= until) return -1;
    usleep(5000);
  }
}

static void kill_reap(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

/* Servers still running when the test process exits (a failed assertion ends the test
 * early) are killed and reaped, so no test leaves a server behind. */
#define MAX_LIVE 16
static pid_t live[MAX_LIVE];
static bool atexit_set;

static void reap_live(void) {
  for (int i = 0; i < MAX_LIVE; i++) {
    if (live[i] > 0) {
      kill(live[i], SIGKILL);
      waitpid(live[i], NULL, 0);
      live[i] = 0;
    }
  }
}

static void live_add(pid_t pid) {
  if (!atexit_set) {
    atexit(reap_live);
    atexit_set = true;
  }
  for (int i = 0; i < MAX_LIVE; i++) {
    if (live[i] == 0) {
      live[i] = pid;
      return;
    }
  }
}

static void live_del(pid_t pid) {
  for (int i = 0; i < MAX_LIVE; i++)
    if (live[i] == pid) live[i] = 0;
}

int th_server_start(th_server_t *s, const char *const *args, int timeout_ms) {
  const char *argv[64];
  size_t n = 0;
  argv[n++] = LT_TEST_SERVER;
  for (size_t i = 0; args != NULL && args[i] != NULL && n < 63; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  return th_server_start_argv(s, argv, timeout_ms);
}

int th_server_start_argv(th_server_t *s, const char *const *argv, int timeout_ms) {
  memset(s, 0, sizeof *s);
  if (spawn(argv, &s->out_fd, NULL, &s->pid) != 0) return -1;
  live_add(s->pid);
  char line[512];
  size_t used = 0;
  int64_t until = th_now_ms() + timeout_ms;
  while (used < sizeof line - 1) {
    int left = (int)(until - th_now_ms());
    if (left <= 0) break;
    struct pollfd p = {.fd = s->out_fd, .events = POLLIN};
    if (poll(&p, 1, left) <= 0) continue;
    ssize_t r = read(s->out_fd, line + used, 1);
    if (r <= 0) break;
    if (line[used] == '\n') {
      line[used] = '\0';
      if (strncmp(line, "READY ", 6) != 0) break;
      snprintf(s->endpoint, sizeof s->endpoint, "%.255s", line + 6);
      return 0;
    }
    used++;
  }
  close(s->out_fd);
  kill_reap(s->pid);
  live_del(s->pid);
  s->pid = 0;
  return -1;
}

int th_server_start_default(th_server_t *s, const char *const *extra) {
  const char *args[48] = {"--listen",      "tcp://127.0.0.1:0", "--modules",
                          LT_TEST_MODULES, "--threads",         "2"};
  size_t n = 6;
  for (size_t i = 0; extra != NULL && extra[i] != NULL && n < 47; i++)
    args[n++] = extra[i];
  args[n] = NULL;
  return th_server_start(s, args, 10000);
}

int th_server_stop(th_server_t *s, int sig, int timeout_ms) {
  if (s->pid <= 0) return -1;
  kill(s->pid, sig);
  int rc = reap(s->pid, timeout_ms);
  if (rc < 0) kill_reap(s->pid);
  live_del(s->pid);
  close(s->out_fd);
  s->pid = 0;
  return rc;
}

int th_run(const char *const *argv, int timeout_ms, char *out, size_t outlen, char *err,
           size_t errlen) {
  int ofd, efd;
  pid_t pid;
  if (spawn(argv, &ofd, &efd, &pid) != 0) return -1;
  size_t no = 0, ne = 0;
  int64_t until = th_now_ms() + timeout_ms;
  bool oopen = true, eopen = true;
  while ((oopen || eopen) && th_now_ms() < until) {
    struct pollfd p[2] = {{.fd = oopen ? ofd : -1, .events = POLLIN},
                          {.fd = eopen ? efd : -1, .events = POLLIN}};
    if (poll(p, 2, 50) <= 0) continue;
    char buf[4096];
    for (int i = 0; i < 2; i++) {
      if (!(p[i].revents & (POLLIN | POLLHUP))) continue;
      ssize_t r = read(p[i].fd, buf, sizeof buf);
      if (r <= 0) {
        if (i == 0)
          oopen = false;
        else
          eopen = false;
        continue;
      }
      char *dst = i == 0 ? out : err;
      size_t *used = i == 0 ? &no : &ne;
      size_t cap = i == 0 ? outlen : errlen;
      size_t k = (size_t)r;
      if (*used + k > cap - 1) k = cap - 1 - *used;
      memcpy(dst + *used, buf, k);
      *used += k;
    }
  }
  out[no] = '\0';
  err[ne] = '\0';
  close(ofd);
  close(efd);
  int rc = reap(pid, (int)(until - th_now_ms() > 0 ? until - th_now_ms() : 1));
  if (rc < 0) kill_reap(pid);
  return rc;
}

int th_client_open(th_client_t *c, const char *endpoint) {
  c->ctx = zmq_ctx_new();
  c->sock = zmq_socket(c->ctx, ZMQ_DEALER);
  int zero = 0;
  zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof zero);
  if (zmq_connect(c->sock, endpoint) != 0) {
    th_client_close(c);
    return -1;
  }
  return 0;
}

void th_client_close(th_client_t *c) {
  if (c->sock) zmq_close(c->sock);
  if (c->ctx) zmq_ctx_term(c->ctx);
  c->sock = c->ctx = NULL;
}

int th_send_raw(th_client_t *c, const lt_bytes_t *frames, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (zmq_send(c->sock, frames[i].data, frames[i].len, i + 1 < n ? ZMQ_SNDMORE : 0) < 0)
      return -1;
  }
  return 0;
}

int th_send(th_client_t *c, lt_msg_t *m, const lt_bytes_t *pay, uint32_t n) {
  m->nframes = n;
  m->frames = (lt_bytes_t *)pay;
  void *hdr;
  size_t len;
  int rc = lt__msg_encode(m, &hdr, &len);
  if (rc != LT_OK) return rc;
  lt_bytes_t *fr = calloc(n + 1, sizeof *fr);
  fr[0] = (lt_bytes_t){hdr, len};
  for (uint32_t i = 0; i < n; i++)
    fr[i + 1] = pay[i];
  rc = th_send_raw(c, fr, n + 1) == 0 ? LT_OK : LT_EIO;
  free(fr);
  free(hdr);
  return rc;
}

int th_recv(th_client_t *c, th_rx_t *r, int timeout_ms) {
  memset(r, 0, sizeof *r);
  zmq_pollitem_t it = {.socket = c->sock, .events = ZMQ_POLLIN};
  if (zmq_poll(&it, 1, timeout_ms) <= 0) return LT_ETIMEDOUT;
  size_t cap = 4;
  r->parts = calloc(cap, sizeof *r->parts);
  for (;;) {
    if (r->nparts == cap) {
      cap *= 2;
      r->parts = realloc(r->parts, cap * sizeof *r->parts);
    }
    zmq_msg_t *p = &r->parts[r->nparts];
    zmq_msg_init(p);
    if (zmq_msg_recv(p, c->sock, 0) < 0) {
      zmq_msg_close(p);
      return LT_EIO;
    }
    r->nparts++;
    if (!zmq_msg_more(p)) break;
  }
  return th_rx_decode(r);
}

int th_rx_decode(th_rx_t *r) {
  r->frames = calloc(r->nparts, sizeof *r->frames);
  for (size_t i = 0; i < r->nparts; i++)
    r->frames[i] = (lt_bytes_t){zmq_msg_data(&r->parts[i]), zmq_msg_size(&r->parts[i])};
  lt_codec_limits_t lim;
  lt__codec_limits_default(&lim);
  return lt__msg_decode(&r->m, r->frames, r->nparts, &lim);
}

void th_rx_clear(th_rx_t *r) {
  lt__msg_clear(&r->m);
  for (size_t i = 0; i < r->nparts; i++)
    zmq_msg_close(&r->parts[i]);
  free(r->parts);
  free(r->frames);
  memset(r, 0, sizeof *r);
}

int th_hello(th_client_t *c, uint64_t client_id, uint32_t version) {
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_HELLO;
  m.u.hello.version = version;
  m.u.hello.client_id = client_id;
  m.u.hello.secret = TH_SECRET;
  m.u.hello.name = "test";
  return th_send(c, &m, NULL, 0);
}

int th_hello_ok(th_client_t *c, uint64_t client_id) {
  if (th_hello(c, client_id, LT_PROTO_VERSION) != 0) return -1;
  th_rx_t r;
  int rc = th_recv(c, &r, 5000);
  bool ok = rc == 0 && r.m.type == LT_MSG_WELCOME;
  th_rx_clear(&r);
  return ok ? 0 : -1;
}

int th_recv_type(th_client_t *c, lt_msg_type_t type, th_rx_t *r, int timeout_ms) {
  for (int i = 0; i < 50; i++) {
    if (th_recv(c, r, timeout_ms) != 0) return -1;
    if (r->m.type == type) return 0;
    th_rx_clear(r);
  }
  return -1;
}

int th_exec1(th_client_t *c, uint64_t seq, const lt_input_t *in, int64_t v, lt_oid_t out,
             uint32_t flags, int64_t *val, char *msg, size_t msglen) {
  unsigned char buf[8];
  th_put_i64(buf, v);
  lt_bytes_t pay = {buf, 8};
  lt_input_t inl = {.kind = LT_INPUT_INLINE, .frame = 0, .holder = ""};
  lt_instr_t ins = {.seq = seq,
                    .kernel = 0,
                    .ninputs = 1,
                    .inputs = in != NULL ? (lt_input_t *)in : &inl,
                    .noutputs = 1,
                    .outputs = &out,
                    .flags = flags};
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_EXECUTE;
  m.u.execute.ninstrs = 1;
  m.u.execute.instrs = &ins;
  th_rx_t r;
  if (th_send(c, &m, in != NULL ? NULL : &pay, in != NULL ? 0 : 1) != 0 ||
      th_recv_type(c, LT_MSG_DONE, &r, 10000) != 0)
    return TH_NO_DONE;
  int st = TH_NO_DONE;
  const lt_completion_t *k = r.m.u.done.ncompl == 1 ? &r.m.u.done.compl [0] : NULL;
  if (k != NULL && k->seq == seq) {
    st = k->status;
    if (msg != NULL) snprintf(msg, msglen, "%s", k->errmsg != NULL ? k->errmsg : "");
    if (st == LT_OK && val != NULL && k->noutputs == 1 && k->outputs[0].frame >= 0)
      *val = th_get_i64(r.frames[1 + k->outputs[0].frame].data);
  }
  th_rx_clear(&r);
  return st;
}

int th_program(th_client_t *c, const char *const *kernels, uint32_t n) {
  return th_program_peers(c, kernels, n, NULL, 0);
}

int th_program_peers(th_client_t *c, const char *const *kernels, uint32_t n,
                     const char *const *peers, uint32_t npeers) {
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_PROGRAM;
  m.u.program.nkernels = n;
  m.u.program.kernels = (const char **)kernels;
  m.u.program.npeers = npeers;
  m.u.program.peers = (const char **)peers;
  return th_send(c, &m, NULL, 0);
}

void th_put_i64(unsigned char *p, int64_t v) {
  uint64_t x = (uint64_t)v;
  for (int i = 0; i < 8; i++, x >>= 8)
    p[i] = (unsigned char)(x & 0xff);
}

int64_t th_get_i64(const void *p) {
  const unsigned char *b = p;
  uint64_t x = 0;
  for (int i = 7; i >= 0; i--)
    x = (x << 8) | b[i];
  return (int64_t)x;
}
