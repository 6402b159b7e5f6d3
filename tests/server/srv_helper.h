/* srv_helper.h: test helpers for talking to a real lithium-server: start one with
 * posix_spawn and read its READY line, stop and reap it, run it to completion capturing its
 * output, and a raw DEALER client that sends and receives lt_msg_t messages. Used by
 * tests/server and tests/e2e. One thread per helper object. */
#ifndef LT_TEST_SRV_HELPER_H
#define LT_TEST_SRV_HELPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <zmq.h>
#include "codec.h"
#include "msg.h"

typedef struct th_server {
  pid_t pid;
  int out_fd; /* the server's stdout (after READY) */
  char endpoint[256];
} th_server_t;

/* th_server_start spawns LT_TEST_SERVER with `args` (NULL-terminated, without argv[0]) and
 * waits up to timeout_ms for "READY <endpoint>". 0 on success; -1 (the process, if any, is
 * killed and reaped). */
int th_server_start(th_server_t *s, const char *const *args, int timeout_ms);

/* th_server_start_argv is th_server_start with the whole command line: argv[0] is the path
 * of LT_TEST_SERVER or of a program that execs it (`ip netns exec NS SERVER ...`), so that
 * the pid is the server's. */
int th_server_start_argv(th_server_t *s, const char *const *argv, int timeout_ms);

/* th_server_start_default starts one on tcp://127.0.0.1:0 with LT_TEST_MODULES, 2 threads
 * and the extra args (may be NULL). */
int th_server_start_default(th_server_t *s, const char *const *extra);

/* th_server_stop sends `sig` and waits up to timeout_ms. Returns the exit status, 128+N
 * when killed by signal N, or -1 on timeout (it is then SIGKILLed and reaped). A clean
 * SIGTERM may take the server up to 10 s to free itself (server/main.c, SHUTDOWN_S) on a
 * slow machine, so tests wait 15 s for one: a bound on hanging, not on speed. */
int th_server_stop(th_server_t *s, int sig, int timeout_ms);

/* th_run runs `argv` (argv[0] is the program path) to completion within timeout_ms,
 * capturing stdout and stderr (NUL-terminated, cut to the buffer). Returns the exit status,
 * or -1 on timeout/failure. */
int th_run(const char *const *argv, int timeout_ms, char *out, size_t outlen, char *err,
           size_t errlen);

/* A raw DEALER client. */
typedef struct th_client {
  void *ctx;
  void *sock;
} th_client_t;

/* A received message: the decoded header plus the frames it borrows. */
typedef struct th_rx {
  lt_msg_t m;
  zmq_msg_t *parts;
  size_t nparts;
  lt_bytes_t *frames;
} th_rx_t;

/* th_client_open connects a DEALER (linger 0) to `endpoint`; 0 or -1. */
int th_client_open(th_client_t *c, const char *endpoint);

/* th_client_close closes the socket and terminates the context. */
void th_client_close(th_client_t *c);

/* th_send encodes `m` with payload frames `pay` (n of them) and sends it; 0 or an lt_err. */
int th_send(th_client_t *c, lt_msg_t *m, const lt_bytes_t *pay, uint32_t n);

/* th_send_raw sends `n` frames as one message; 0 or -1. */
int th_send_raw(th_client_t *c, const lt_bytes_t *frames, size_t n);

/* th_recv waits up to timeout_ms for one message and decodes it into r (clear with
 * th_rx_clear). 0, LT_ETIMEDOUT, or the decoder's error. */
int th_recv(th_client_t *c, th_rx_t *r, int timeout_ms);

/* th_rx_decode decodes the r->nparts parts received into r (header first). 0 or the
 * decoder's error. */
int th_rx_decode(th_rx_t *r);

/* th_rx_clear frees a received message; accepts a zeroed one. */
void th_rx_clear(th_rx_t *r);

/* Message builders (strings and arrays are borrowed). */
int th_hello(th_client_t *c, uint64_t client_id, uint32_t version);
int th_program(th_client_t *c, const char *const *kernels, uint32_t n);

/* th_program_peers sends PROGRAM with the session's servers `peers` ("ENDPOINT [KEY]"):
 * the holders its REF inputs may name. */
int th_program_peers(th_client_t *c, const char *const *kernels, uint32_t n,
                     const char *const *peers, uint32_t npeers);

/* The secret every th_hello presents: sessions of one test client on several servers
 * share it, as a real client's do. */
#define TH_SECRET UINT64_C(0x5ec7e75ec7e75ec7)

/* th_hello_ok says hello and expects a welcome; 0 or -1. */
int th_hello_ok(th_client_t *c, uint64_t client_id);

/* th_recv_type receives until a message of `type` comes (heartbeats, errors and the like
 * are skipped) and leaves it in r; 0, or -1 when none came within `timeout_ms` each. */
int th_recv_type(th_client_t *c, lt_msg_type_t type, th_rx_t *r, int timeout_ms);

/* TH_NO_DONE is th_exec1's answer when no single completion of the instruction came. */
#define TH_NO_DONE 1000

/* th_exec1 runs the session's kernel 0 on `in` (inline int64 `v` when in is NULL) with
 * output `out` and `flags`, and returns the completion's status (TH_NO_DONE without one),
 * its message in msg (may be NULL) and, when returned, the value in *val (may be NULL). */
int th_exec1(th_client_t *c, uint64_t seq, const lt_input_t *in, int64_t v, lt_oid_t out,
             uint32_t flags, int64_t *val, char *msg, size_t msglen);

/* th_i64 encodes/decodes an int64 little-endian. */
void th_put_i64(unsigned char *p, int64_t v);
int64_t th_get_i64(const void *p);

/* th_conn_ended reads socket `fd` (discarding what comes) until its peer's end, for up to
 * timeout_ms: 1 when the peer closed it (end of file or reset), 0 when it is still open. */
int th_conn_ended(int fd, int timeout_ms);

/* th_now_ms returns CLOCK_MONOTONIC in milliseconds. */
int64_t th_now_ms(void);

#endif
