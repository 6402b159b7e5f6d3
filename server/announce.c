/* announce.c: the announce file of `lithium-server --announce DIR` (announce.h). Knows
 * nothing of the server's loop: main.c calls it once bound and again at exit. */
#include "announce.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <lithium/error.h>

/* first_ipv4 writes the first non-loopback IPv4 address of an interface that is up. */
static int first_ipv4(char *out, size_t len) {
  struct ifaddrs *ifs;
  if (getifaddrs(&ifs) != 0) return -1;
  int found = -1;
  for (struct ifaddrs *i = ifs; i != NULL && found != 0; i = i->ifa_next) {
    if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET) continue;
    if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
    const struct sockaddr_in *a = (const struct sockaddr_in *)i->ifa_addr;
    if (inet_ntop(AF_INET, &a->sin_addr, out, (socklen_t)len) != NULL) found = 0;
  }
  freeifaddrs(ifs);
  return found;
}

int lt__announce_endpoint(const char *bound, const char *advertise, char *out, size_t len) {
  if (advertise != NULL && strstr(advertise, "://") != NULL)
    return (size_t)snprintf(out, len, "%s", advertise) < len ? LT_OK : LT_EINVAL;
  if (strncmp(bound, "tcp://", 6) != 0) return LT_EINVAL;
  const char *host = bound + 6;
  const char *colon = strrchr(host, ':');
  if (colon == NULL || colon == host) return LT_EINVAL;
  size_t hlen = (size_t)(colon - host);
  char addr[64];
  const char *use;
  int wildcard = (hlen == 7 && strncmp(host, "0.0.0.0", 7) == 0) ||
                 (hlen == 4 && strncmp(host, "[::]", 4) == 0) || (hlen == 1 && host[0] == '*');
  if (advertise != NULL) {
    use = advertise;
  } else if (wildcard) {
    use = first_ipv4(addr, sizeof addr) == 0 ? addr : "127.0.0.1";
  } else {
    return (size_t)snprintf(out, len, "%s", bound) < len ? LT_OK : LT_EINVAL;
  }
  int ipv6 = strchr(use, ':') != NULL && use[0] != '[';
  size_t n =
      (size_t)snprintf(out, len, "tcp://%s%s%s%s", ipv6 ? "[" : "", use, ipv6 ? "]" : "", colon);
  return n < len ? LT_OK : LT_EINVAL;
}

int lt__announce_write(const char *dir, const char *name, const char *line, char *path,
                       size_t pathlen, char *err, size_t errlen) {
  char safe[256];
  snprintf(safe, sizeof safe, "%s", name);
  for (char *c = safe; *c != '\0'; c++)
    if (*c == '/' || (c == safe && *c == '.') || (unsigned char)*c < 0x20) *c = '_';
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    snprintf(err, errlen, "--announce %s: %s", dir, strerror(errno));
    return LT_EIO;
  }
  char tmp[4096];
  if ((size_t)snprintf(path, pathlen, "%s/%s.endpoint", dir, safe) >= pathlen ||
      (size_t)snprintf(tmp, sizeof tmp, "%s/.%s.endpoint.%ld.tmp", dir, safe, (long)getpid()) >=
          sizeof tmp) {
    snprintf(err, errlen, "--announce %s: path too long", dir);
    return LT_EIO;
  }
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    snprintf(err, errlen, "--announce: cannot create %s: %s", tmp, strerror(errno));
    path[0] = '\0';
    return LT_EIO;
  }
  char text[600];
  int n = snprintf(text, sizeof text, "%s\n", line);
  int ok = n > 0 && (size_t)n < sizeof text && write(fd, text, (size_t)n) == n;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    snprintf(err, errlen, "--announce: cannot write %s: %s", path, strerror(errno));
    unlink(tmp);
    path[0] = '\0';
    return LT_EIO;
  }
  return LT_OK;
}

void lt__announce_remove(const char *path) {
  if (path != NULL && path[0] != '\0') unlink(path);
}
