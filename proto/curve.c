/* curve.c: Z85 keys, host strings and key files (see curve.h). Key material is read and
 * written with plain stdio and libzmq's Z85 and CURVE helpers; nothing is logged here, and
 * secret keys never leave the buffers the caller gives. Any thread. */
#include "curve.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>
#include <lithium/error.h>

bool lt__z85_key_ok(const char *key) {
  if (key == NULL || strlen(key) != LT_Z85_KEY_LEN) return false;
  uint8_t raw[32];
  return zmq_z85_decode(raw, key) != NULL;
}

static bool space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* word copies the next whitespace-separated word of *p into out (cap bytes); false when
 * it does not fit. */
static bool word(const char **p, char *out, size_t cap) {
  const char *s = *p;
  while (space(*s))
    s++;
  size_t n = 0;
  while (s[n] != '\0' && !space(s[n]))
    n++;
  if (n >= cap) return false;
  memcpy(out, s, n);
  out[n] = '\0';
  *p = s + n;
  return true;
}

int lt__host_parse(const char *host, char *ep, char *key) {
  ep[0] = key[0] = '\0';
  if (host == NULL) return LT_EINVAL;
  const char *p = host;
  if (!word(&p, ep, LT_HOST_EP_MAX + 1) || strncmp(ep, "tcp://", 6) != 0 || strlen(ep) <= 6)
    return LT_EINVAL;
  char k[LT_Z85_KEY_LEN + 2];
  if (!word(&p, k, sizeof k)) return LT_EINVAL;
  if (k[0] != '\0' && !lt__z85_key_ok(k)) return LT_EINVAL;
  char more[2];
  if (!word(&p, more, sizeof more) || more[0] != '\0') return LT_EINVAL;
  memcpy(key, k, strlen(k) + 1);
  return LT_OK;
}

int lt__curve_load_keypair(const char *path, char *pub, char *sec, char *err, size_t errlen) {
  pub[0] = sec[0] = '\0';
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    snprintf(err, errlen, "cannot read key file %s: %s", path, strerror(errno));
    return LT_EIO;
  }
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077) != 0) {
    fclose(f);
    snprintf(err, errlen, "key file %s is readable by others (mode %03o): chmod 600 it", path,
             (unsigned)(st.st_mode & 0777));
    return LT_EINVAL;
  }
  char line[256];
  while (fgets(line, sizeof line, f) != NULL) {
    const char *p = line;
    char name[16], val[LT_Z85_KEY_LEN + 2];
    if (!word(&p, name, sizeof name) || name[0] == '#' || name[0] == '\0') continue;
    if (!word(&p, val, sizeof val) || !lt__z85_key_ok(val)) continue;
    if (strcmp(name, "public") == 0) memcpy(pub, val, LT_Z85_KEY_LEN + 1);
    if (strcmp(name, "secret") == 0) memcpy(sec, val, LT_Z85_KEY_LEN + 1);
  }
  fclose(f);
  explicit_bzero(line, sizeof line);
  if (sec[0] == '\0') {
    snprintf(err, errlen, "key file %s has no 'secret <Z85 key>' line", path);
    return LT_EINVAL;
  }
  char derived[LT_Z85_KEY_LEN + 1];
  if (zmq_curve_public(derived, sec) != 0) {
    snprintf(err, errlen, "key file %s: cannot derive the public key: %s", path,
             zmq_strerror(zmq_errno()));
    return LT_EINVAL;
  }
  if (pub[0] != '\0' && strcmp(pub, derived) != 0) {
    snprintf(err, errlen, "key file %s: the public key does not match the secret key", path);
    return LT_EINVAL;
  }
  memcpy(pub, derived, sizeof derived);
  return LT_OK;
}

int lt__curve_read_public(const char *text_or_path, char *pub, char *err, size_t errlen) {
  pub[0] = '\0';
  /* A file of that name wins: a 40-character path such as /tmp/grid.lt1234/keys/server.pub
   * is also 40 characters of the Z85 alphabet. */
  struct stat st;
  if (stat(text_or_path, &st) != 0 && lt__z85_key_ok(text_or_path)) {
    memcpy(pub, text_or_path, LT_Z85_KEY_LEN + 1);
    return LT_OK;
  }
  FILE *f = fopen(text_or_path, "r");
  if (f == NULL) {
    snprintf(err, errlen, "'%.64s' is neither a Z85 public key nor a readable file: %s",
             text_or_path, strerror(errno));
    return LT_EINVAL;
  }
  char line[256];
  int rc = LT_EINVAL;
  while (rc != LT_OK && fgets(line, sizeof line, f) != NULL) {
    const char *p = line;
    char val[LT_Z85_KEY_LEN + 2];
    if (!word(&p, val, sizeof val) || val[0] == '#' || val[0] == '\0') continue;
    if (!lt__z85_key_ok(val)) break;
    memcpy(pub, val, LT_Z85_KEY_LEN + 1);
    rc = LT_OK;
  }
  fclose(f);
  if (rc != LT_OK) snprintf(err, errlen, "%s does not start with a Z85 public key", text_or_path);
  return rc;
}

/* write_new creates `path` (never overwriting) with `mode` and writes `text`. */
static int write_new(const char *path, mode_t mode, const char *text, char *err, size_t errlen) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    int e = errno;
    snprintf(err, errlen, "cannot create %s: %s", path, strerror(e));
    return e == EEXIST ? LT_EEXIST : LT_EIO;
  }
  size_t len = strlen(text);
  ssize_t n = write(fd, text, len);
  if (fchmod(fd, mode) != 0 || n != (ssize_t)len || close(fd) != 0) {
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
    unlink(path);
    return LT_EIO;
  }
  return LT_OK;
}

int lt__curve_keygen(const char *name, char *err, size_t errlen) {
  char kpath[4096], ppath[4096];
  if (snprintf(kpath, sizeof kpath, "%s.key", name) >= (int)sizeof kpath ||
      snprintf(ppath, sizeof ppath, "%s.pub", name) >= (int)sizeof ppath) {
    snprintf(err, errlen, "name too long");
    return LT_EINVAL;
  }
  struct stat st;
  if (lstat(kpath, &st) == 0 || lstat(ppath, &st) == 0) {
    snprintf(err, errlen, "%s exists: not overwritten", lstat(kpath, &st) == 0 ? kpath : ppath);
    return LT_EEXIST;
  }
  char pub[LT_Z85_KEY_LEN + 1], sec[LT_Z85_KEY_LEN + 1];
  if (zmq_curve_keypair(pub, sec) != 0) {
    snprintf(err, errlen, "cannot make a key pair: %s", zmq_strerror(zmq_errno()));
    return LT_EIO;
  }
  char text[256];
  snprintf(text, sizeof text,
           "# Lithium-C CURVE key pair (lithium keygen): keep this file secret\n"
           "public %s\nsecret %s\n",
           pub, sec);
  int rc = write_new(kpath, 0600, text, err, errlen);
  explicit_bzero(text, sizeof text);
  explicit_bzero(sec, sizeof sec);
  if (rc != LT_OK) return rc;
  snprintf(text, sizeof text, "%s\n", pub);
  if ((rc = write_new(ppath, 0644, text, err, errlen)) != LT_OK) unlink(kpath);
  return rc;
}
