/* options.c: one table of option keys with their parsers. lt_eval_set, the environment and
 * the command-line tools all go through lt__options_set, so the keys are the same
 * everywhere. Evaluator thread only. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "options.h"
#include "curve.h"
#include "log.h"

static int parse_bool(const char *v, int *out) {
  if (strcmp(v, "on") == 0 || strcmp(v, "1") == 0 || strcmp(v, "true") == 0 ||
      strcmp(v, "yes") == 0) {
    *out = 1;
    return LT_OK;
  }
  if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0 || strcmp(v, "false") == 0 ||
      strcmp(v, "no") == 0) {
    *out = 0;
    return LT_OK;
  }
  return LT_EINVAL;
}

static int parse_u32(const char *v, uint32_t lo, uint32_t hi, uint32_t *out) {
  if (*v == '\0' || *v == '-' || *v == '+') return LT_EINVAL;
  char *end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (errno != 0 || *end != '\0' || n < lo || n > hi) return LT_EINVAL;
  *out = (uint32_t)n;
  return LT_OK;
}

/* parse_factor reads a number in [1, 1000]. */
static int parse_factor(const char *v, double *out) {
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (errno != 0 || end == v || *end != '\0' || !(d >= 1.0 && d <= 1000.0)) return LT_EINVAL;
  *out = d;
  return LT_OK;
}

static int parse_placement(const char *v, int *out) {
  if (strcmp(v, "eft") == 0) {
    *out = LT_PLACE_EFT;
    return LT_OK;
  }
  if (strcmp(v, "rr") == 0) {
    *out = LT_PLACE_RR;
    return LT_OK;
  }
  return LT_EINVAL;
}

static int set_string(char **dst, const char *v) {
  if (*v == '\0') return LT_EINVAL;
  char *copy = strdup(v);
  if (copy == NULL) return LT_ENOMEM;
  free(*dst);
  *dst = copy;
  return LT_OK;
}

/* set_mode sets every optimisation switch at once: "plain" is the original Lithium (one
 * instruction in flight per server, values through the client), "optimized" turns task
 * lookahead and lazy binding on. Single switches set later override it. */
static int set_mode(lt_options_t *o, const char *v) {
  if (strcmp(v, "plain") == 0) {
    o->lookahead = o->lazy = o->throttle = o->backup = 0;
    return LT_OK;
  }
  if (strcmp(v, "optimized") == 0) {
    /* Throttling stays a separate switch until it is validated on loaded grids. */
    o->lookahead = o->lazy = o->backup = 1;
    return LT_OK;
  }
  return LT_EINVAL;
}

void lt__options_init(lt_options_t *o) {
  memset(o, 0, sizeof *o);
  o->ordered = 1;
  o->max_pending = 1024;
  o->max_retries = 3;
  o->heartbeat_ms = 1000;
  o->connect_timeout_ms = 5000;
  o->max_threads = 6;
  o->min_threads = 2;
  o->inline_max = 64 * 1024;
  o->migrate = 1;
  o->backup_factor = 2.0;
  set_mode(o, "optimized");
}

/* set_curve_key loads the client's key pair now, so that a bad file is an error of
 * lt_eval_set, naming the reason; "" or "off" forgets it. */
static int set_curve_key(lt_options_t *o, const char *value) {
  if (value[0] == '\0' || strcmp(value, "off") == 0) {
    explicit_bzero(o->curve_sec, sizeof o->curve_sec);
    o->curve_pub[0] = '\0';
    return LT_OK;
  }
  char err[512];
  if (lt__curve_load_keypair(value, o->curve_pub, o->curve_sec, err, sizeof err) != LT_OK) {
    lt__log(LT_LOG_ERROR, "curve_key: %s", err);
    o->curve_pub[0] = o->curve_sec[0] = '\0';
    return LT_EINVAL;
  }
  return LT_OK;
}

static int set_curve_server(lt_options_t *o, const char *value) {
  if (value[0] == '\0' || strcmp(value, "off") == 0) {
    o->curve_server[0] = '\0';
    return LT_OK;
  }
  char err[512];
  if (lt__curve_read_public(value, o->curve_server, err, sizeof err) != LT_OK) {
    lt__log(LT_LOG_ERROR, "curve_server: %s", err);
    return LT_EINVAL;
  }
  return LT_OK;
}

int lt__options_set(lt_options_t *o, const char *key, const char *value) {
  if (key == NULL || value == NULL) return LT_EINVAL;
  if (strcmp(key, "mode") == 0) return set_mode(o, value);
  if (strcmp(key, "ordered") == 0) return parse_bool(value, &o->ordered);
  if (strcmp(key, "nonblocking") == 0) return parse_bool(value, &o->nonblocking);
  if (strcmp(key, "normal_form") == 0) return parse_bool(value, &o->normal_form);
  if (strcmp(key, "lookahead") == 0) return parse_bool(value, &o->lookahead);
  if (strcmp(key, "lazy") == 0) return parse_bool(value, &o->lazy);
  if (strcmp(key, "max_threads") == 0) return parse_u32(value, 1, 4096, &o->max_threads);
  if (strcmp(key, "min_threads") == 0) return parse_u32(value, 1, 4096, &o->min_threads);
  if (strcmp(key, "throttle") == 0) return parse_bool(value, &o->throttle);
  if (strcmp(key, "migrate") == 0) return parse_bool(value, &o->migrate);
  if (strcmp(key, "backup") == 0) return parse_bool(value, &o->backup);
  if (strcmp(key, "backup_factor") == 0) return parse_factor(value, &o->backup_factor);
  if (strcmp(key, "placement") == 0) return parse_placement(value, &o->placement);
  if (strcmp(key, "inline_max") == 0) return parse_u32(value, 0, 1u << 30, &o->inline_max);
  if (strcmp(key, "max_pending") == 0) return parse_u32(value, 1, 1u << 30, &o->max_pending);
  if (strcmp(key, "max_retries") == 0) return parse_u32(value, 0, 1000, &o->max_retries);
  if (strcmp(key, "heartbeat_ms") == 0) return parse_u32(value, 10, 600000, &o->heartbeat_ms);
  if (strcmp(key, "connect_timeout_ms") == 0)
    return parse_u32(value, 10, 600000, &o->connect_timeout_ms);
  if (strcmp(key, "task_timeout_ms") == 0)
    return parse_u32(value, 0, 86400000, &o->task_timeout_ms);
  if (strcmp(key, "server_threads") == 0) return parse_u32(value, 0, 4096, &o->server_threads);
  if (strcmp(key, "modules") == 0) return set_string(&o->modules, value);
  if (strcmp(key, "server") == 0) return set_string(&o->server, value);
  if (strcmp(key, "trace") == 0) return set_string(&o->trace, value);
  if (strcmp(key, "journal") == 0) return set_string(&o->journal, value);
  if (strcmp(key, "curve_key") == 0) return set_curve_key(o, value);
  if (strcmp(key, "curve_server") == 0) return set_curve_server(o, value);
  if (strcmp(key, "hosts") == 0) return set_string(&o->hosts, value);
  if (strcmp(key, "ship_modules") == 0) return parse_bool(value, &o->ship_modules);
  return LT_EINVAL;
}

static const char *const env_keys[] = {"mode",
                                       "ordered",
                                       "nonblocking",
                                       "normal_form",
                                       "lookahead",
                                       "lazy",
                                       "max_threads",
                                       "max_pending",
                                       "max_retries",
                                       "heartbeat_ms",
                                       "connect_timeout_ms",
                                       "task_timeout_ms",
                                       "server_threads",
                                       "modules",
                                       "server",
                                       "inline_max",
                                       "min_threads",
                                       "throttle",
                                       "placement",
                                       "migrate",
                                       "backup",
                                       "backup_factor",
                                       "trace",
                                       "journal",
                                       "curve_key",
                                       "curve_server",
                                       "hosts",
                                       "ship_modules"};

int lt__options_from_env(lt_options_t *o) {
  for (size_t i = 0; i < sizeof env_keys / sizeof env_keys[0]; i++) {
    char name[64] = "LITHIUM_";
    size_t n = strlen(name);
    for (const char *k = env_keys[i]; *k != '\0' && n + 1 < sizeof name; k++)
      name[n++] = (char)((*k >= 'a' && *k <= 'z') ? *k - 'a' + 'A' : *k);
    name[n] = '\0';
    const char *v = getenv(name);
    if (v == NULL) continue;
    int rc = lt__options_set(o, env_keys[i], v);
    if (rc != LT_OK) {
      fprintf(stderr, "lithium: bad value '%s' in %s\n", v, name);
      return rc;
    }
  }
  return LT_OK;
}

void lt__options_clear(lt_options_t *o) {
  free(o->modules);
  free(o->server);
  free(o->trace);
  free(o->journal);
  o->modules = o->server = o->trace = o->journal = NULL;
  explicit_bzero(o->curve_sec, sizeof o->curve_sec);
  free(o->hosts);
  o->hosts = NULL;
}
