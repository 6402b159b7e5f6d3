/* curve.h: the text forms of CURVE security that client and server share: Z85 public keys,
 * host strings ("ENDPOINT [Z85 server public key]", as lt_eval_add_host, hosts files and
 * PROGRAM.peers carry them), and the key files `lithium keygen` writes. Nothing here opens
 * a socket. Any thread. */
#ifndef LT_CURVE_H
#define LT_CURVE_H

#include <stdbool.h>
#include <stddef.h>

#define LT_Z85_KEY_LEN 40  /* a 32-byte CURVE key in Z85 text */
#define LT_HOST_EP_MAX 255 /* the longest endpoint of a host string */

/* lt__z85_key_ok tells whether `key` is exactly one Z85-encoded 32-byte key. */
bool lt__z85_key_ok(const char *key);

/* lt__host_parse splits host string `host` into its endpoint `ep` (LT_HOST_EP_MAX + 1
 * bytes) and its key `key` (LT_Z85_KEY_LEN + 1 bytes; "" when the string has none).
 * LT_EINVAL when the endpoint is not tcp://, is too long, the key is not a Z85 key, or
 * more words follow. */
int lt__host_parse(const char *host, char *ep, char *key);

/* lt__curve_load_keypair reads a key file of `lithium keygen` ("public KEY" and "secret
 * KEY" lines, '#' comments; the public key is derived when only the secret is there) into
 * pub and sec (LT_Z85_KEY_LEN + 1 bytes each). LT_EIO (cannot read), LT_EINVAL (no valid
 * secret key; a file readable by others is refused too), with a message in err. */
int lt__curve_load_keypair(const char *path, char *pub, char *sec, char *err, size_t errlen);

/* lt__curve_read_public reads a public key given as Z85 text or as a file whose first word
 * (after '#' comment lines) is one, into pub; an existing file of that name is read even
 * when the name itself would pass for a key. LT_EINVAL / LT_EIO with a message in err. */
int lt__curve_read_public(const char *text_or_path, char *pub, char *err, size_t errlen);

/* lt__curve_keygen writes a new key pair: NAME.key (public and secret, mode 0600) and
 * NAME.pub (the public key). Never overwrites: LT_EEXIST when either exists; LT_EIO. The
 * message goes into err. */
int lt__curve_keygen(const char *name, char *err, size_t errlen);

#endif
