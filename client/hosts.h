/* hosts.h: hosts files and announce directories (option `hosts`). A hosts file holds one
 * server a line, `ENDPOINT [PUBLIC_KEY]`, with `#` comments and blank lines; an announce
 * directory holds one such file per server, `<name>.endpoint`, written by `lithium-server
 * --announce DIR`. The parser knows nothing of evaluators; the loaders hand each entry to
 * lt_eval_add_host. */
#ifndef LT_HOSTS_H
#define LT_HOSTS_H

#include <stddef.h>
#include <stdint.h>
#include <lithium.h>

/* Longest endpoint, and the length of a Z85 CURVE public key. */
#define LT_HOSTS_ENDPOINT_MAX 255
#define LT_HOSTS_KEY_LEN      40

/* lt__hosts_key_valid tells whether t[0..n) is a Z85 CURVE public key (40 characters). */
int lt__hosts_key_valid(const char *t, size_t n);

/* The callback of the readers, lt_hosts_fn, is public (lithium.h). */

/* lt__hosts_parse reads the text `text` (`len` bytes, not NUL-terminated) line by line and
 * calls `fn` for each entry. A malformed line is LT_EINVAL with "line N: why" in `err`.
 * Any thread. */
int lt__hosts_parse(const char *text, size_t len, lt_hosts_fn fn, void *ud, char *err,
                    size_t errlen);

/* lt__hosts_read calls `fn` for every entry of `path`: a hosts file, or each `*.endpoint`
 * file of a directory (a malformed one is skipped with a warning). LT_ENOENT, LT_EINVAL (a
 * malformed hosts file: its name and line in `err`), LT_EIO, or what `fn` returned. Any
 * thread. */
int lt__hosts_read(const char *path, lt_hosts_fn fn, void *ud, char *err, size_t errlen);

/* How the servers read are added: `add` is called with each host string ("ENDPOINT" or
 * "ENDPOINT KEY") and its `ud`; it returns LT_OK or an error code. */
typedef int (*lt_host_add_fn)(void *ud, const char *host);

/* lt__hosts_load adds the servers of `path` with `add`: every entry of a hosts file, or of each
 * `*.endpoint` file of a directory (a malformed one is skipped with a warning, a half-written
 * one cannot be seen: servers rename it into place). Returns the number of entries read
 * (>= 0), or LT_ENOENT (no such file), LT_EINVAL (a malformed hosts file, with its name and
 * line in `err`), LT_EIO. Any thread. */
int lt__hosts_load(lt_host_add_fn add, void *ud, const char *path, char *err, size_t errlen);

/* lt__hosts_is_dir tells whether `path` is a directory (an announce directory). */
int lt__hosts_is_dir(const char *path);

/* A watch on an announce directory: lt__hosts_watch_poll re-reads it at most every
 * LT_HOSTS_WATCH_MS and adds the servers that announced since (elastic join). */
#define LT_HOSTS_WATCH_MS 500
typedef struct lt_hosts_watch lt_hosts_watch_t;

/* lt__hosts_watch_new watches directory `dir` (copied). LT_ENOMEM. */
int lt__hosts_watch_new(lt_hosts_watch_t **out, const char *dir);

/* lt__hosts_watch_poll reads the files that are new or changed since the last read when
 * LT_HOSTS_WATCH_MS have passed since then (`now_ms`: CLOCK_MONOTONIC), adds their servers
 * with `add` and returns how many entries it read. */
int lt__hosts_watch_poll(lt_hosts_watch_t *w, lt_host_add_fn add, void *ud, int64_t now_ms);

/* lt__hosts_watch_free frees the watch; accepts NULL. */
void lt__hosts_watch_free(lt_hosts_watch_t *w);

#endif
