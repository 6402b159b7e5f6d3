/* shm_wire.c: the datagrams of the same-host unix socket (shm.h) and the host's identity:
 * sending one with a descriptor attached, receiving one and checking it before anyone reads
 * it, and the peer's uid. Knows nothing of servers or values. Any thread. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <lithium/error.h>
#include "shm.h"

bool lt__shm_host(char *buf, size_t len) {
  char boot[64] = "", ns[64] = "";
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, boot, sizeof boot - 1);
  close(fd);
  if (n < 32) return false;
  boot[strcspn(boot, "\n")] = '\0';
  /* Abstract unix sockets belong to a network namespace: two containers on one kernel share
   * a boot id but not their sockets. */
  ssize_t m = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  if (m <= 0) return false;
  ns[m] = '\0';
  int w = snprintf(buf, len, "%s:%s", boot, ns);
  return w > 0 && (size_t)w < len && strchr(buf, ' ') == NULL;
}

int lt__shm_send_msg(int fd, const lt_shm_msg_t *m, int pass) {
  struct iovec iov = {(void *)m, sizeof *m};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } ctl;
  memset(&ctl, 0, sizeof ctl);
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
  if (pass >= 0) {
    mh.msg_control = ctl.buf;
    mh.msg_controllen = sizeof ctl.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &pass, sizeof pass);
  }
  ssize_t n;
  do
    n = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n == (ssize_t)sizeof *m) return LT_OK;
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? LT_EAGAIN : LT_EIO;
}

/* take_fds closes every descriptor of the control data of `mh` but the first SCM_RIGHTS one,
 * which it returns (-1: none). */
static int take_fds(struct msghdr *mh) {
  int keep = -1;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < nfd; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (keep < 0)
        keep = fd;
      else
        close(fd);
    }
  }
  return keep;
}

int lt__shm_recv_msg(int fd, lt_shm_msg_t *m, int *got) {
  *got = -1;
  /* One byte more than a message, so that a longer datagram shows as such; room for a few
   * descriptors, so that a sender of several cannot leave any open here (the kernel closes
   * those that do not fit and says MSG_CTRUNC). */
  unsigned char data[sizeof *m + 1];
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(4 * sizeof(int))];
  } ctl;
  struct iovec iov = {data, sizeof data};
  struct msghdr mh = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
  ssize_t n;
  do
    n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? LT_EAGAIN : LT_EIO;
  int pass = take_fds(&mh);
  if (n == 0 && pass < 0) return LT_ECLOSED;
  if (n != (ssize_t)sizeof *m || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) goto bad;
  memcpy(m, data, sizeof *m);
  if (m->magic != LT_SHM_MAGIC || m->type < LT_SHM_ATTACH || m->type > LT_SHM_VALUE) goto bad;
  *got = pass;
  return LT_OK;
bad:
  if (pass >= 0) close(pass);
  return LT_EPROTO;
}

bool lt__shm_peer_uid_ok(int fd) {
  struct ucred cr;
  socklen_t len = sizeof cr;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || len != sizeof cr) return false;
  return cr.uid == geteuid();
}
