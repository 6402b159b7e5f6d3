/* ship.h: the client's side of module shipping (option ship_modules). When an evaluation
 * starts it finds the local copy of every module the program names — in the `modules`
 * directory, as the servers and the sequential evaluator look for them (lib<m>.so, <m>.so)
 * — and hashes it. Each welcome states the server's copy of those modules; a copy that
 * differs from the local one gets a warning, once per module per evaluation, or, under
 * ship_modules=on and when the server accepts modules, the local copy goes to that server in
 * a MODULE message for this session, ahead of any instruction (a DEALER keeps the messages of
 * a connection in order). Dispatcher thread only, except lt__ship_new and lt__ship_free
 * (evaluator thread, while no dispatcher runs) and the evaluator's journal, which hashes
 * the local copies through them (lt__ship_modules, lt__ship_sha256) before a run. */
#ifndef LT_SHIP_H
#define LT_SHIP_H

#include <stdint.h>
#include "conn.h"

typedef struct lt_ship lt_ship_t;

/* lt__ship_new lists the modules of `kernels` and finds and hashes their local copies in
 * `moddir` (may be NULL: none); under `ship` it also reads them (what is hashed is what is
 * sent). A local copy that cannot be read counts as none (logged). LT_ENOMEM. */
int lt__ship_new(lt_ship_t **out, const char *moddir, char *const *kernels, uint32_t nkernels,
                 int ship);

/* lt__ship_modules gives the module names, for the hello (borrowed). */
void lt__ship_modules(const lt_ship_t *sh, const char *const **names, uint32_t *n);

/* lt__ship_sha256 returns the hex SHA-256 of the local copy of module `i` (of
 * lt__ship_modules), "" when there is none (borrowed). */
const char *lt__ship_sha256(const lt_ship_t *sh, uint32_t i);

/* lt__ship_welcome compares the server's copies stated in welcome `w` with the local ones
 * and warns or ships (see above) on connection `c`. */
void lt__ship_welcome(lt_ship_t *sh, lt_conn_t *c, const lt_msg_t *w, int64_t now_ms);

/* lt__ship_lacking writes into buf (len bytes) the names, comma-separated, of the program's
 * modules that welcome `w` says the server has no copy of and that will not be shipped to it
 * (ship_modules off, the server does not accept modules, or there is no local copy), and
 * returns how many. */
uint32_t lt__ship_lacking(const lt_ship_t *sh, const lt_msg_t *w, char *buf, size_t len);

/* lt__ship_free frees it; accepts NULL. */
void lt__ship_free(lt_ship_t *sh);

#endif
