/* test_options.c: the option table (client/options.h): defaults, every key, '-' and '_'
 * alike, booleans in any case, the messages of bad keys and values, the check of
 * min_threads against max_threads, LITHIUM_* variables (applied, bad, unknown), the public
 * lt_eval_error; and that docs/guide.md's Options table and `lithium --help` list every option
 * of the table, so the three cannot drift apart. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lithium.h>
#include "log.h"
#include "options.h"

/* slurp reads a whole file, NUL-terminated; NULL when it cannot. */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return NULL;
  char *s = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 8192;
      char *t = realloc(s, cap);
      cr_assert_not_null(t);
      s = t;
    }
    size_t n = fread(s + len, 1, 4096, f);
    len += n;
    if (n == 0) break;
  }
  fclose(f);
  s[len] = '\0';
  return s;
}

/* The defaults are those lt__options_init set by hand before the table. */
Test(options, defaults_are_the_old_ones) {
  lt_options_t want, o;
  memset(&want, 0, sizeof want);
  want.ordered = want.lookahead = want.lazy = want.migrate = want.backup = want.pack = 1;
  want.quarantine = 1, want.quarantine_crashes = 3;
  want.max_threads = 6, want.min_threads = 2, want.backup_factor = 2.0;
  want.inline_max = 64 * 1024, want.max_pending = 1024, want.max_retries = 3;
  want.heartbeat_ms = 1000, want.connect_timeout_ms = 5000, want.idle_warn_ms = 10000;
  want.journal_mismatch = 2; /* rebuilt (issue 36): another program's journal is refused */
  lt__options_init(&o);
  size_t n;
  const lt_option_t *t = lt__options_table(&n);
  for (size_t i = 0; i < n; i++) {
    size_t size = t[i].type == LT_OPT_PATH                               ? sizeof(char *)
                  : t[i].type == LT_OPT_KEY                              ? 41
                  : t[i].type == LT_OPT_DOUBLE                           ? sizeof(double)
                  : t[i].type == LT_OPT_UINT || t[i].type == LT_OPT_AUTO ? sizeof(uint32_t)
                                                                         : sizeof(int);
    cr_expect(memcmp((char *)&o + t[i].offset, (char *)&want + t[i].offset, size) == 0,
              "the default of %s changed", t[i].key);
  }
  cr_expect(memcmp(&o, &want, sizeof o) == 0, "every field as before, given 0, error \"\"");
  lt__options_clear(&o);
}

/* Every row: its default parses, the key is found in both spellings, and a value of its
 * type is taken. */
Test(options, every_row) {
  size_t n;
  const lt_option_t *t = lt__options_table(&n);
  cr_assert_gt(n, 20);
  for (size_t i = 0; i < n; i++) {
    lt_options_t o;
    lt__options_init(&o);
    if (t[i].def != NULL)
      cr_expect_eq(lt__options_set(&o, t[i].key, t[i].def), LT_OK, "%s: %s", t[i].key, o.error);
    char dashed[64];
    snprintf(dashed, sizeof dashed, "%s", t[i].key);
    for (char *c = dashed; *c != '\0'; c++)
      if (*c == '_') *c = '-';
    cr_expect_eq(lt__option_find(dashed), &t[i], "%s", dashed);
    cr_expect_eq(lt__option_find(t[i].key), &t[i]);
    cr_expect_not_null(t[i].help);
    cr_expect_not_null(t[i].arg);
    const char *v = t[i].type == LT_OPT_BOOL   ? "YES"
                    : t[i].type == LT_OPT_UINT ? "10"
                    : t[i].type == LT_OPT_AUTO ? "10"
                    : t[i].type == LT_OPT_ENUM ? "plain"
                    : t[i].type == LT_OPT_KEY  ? "off"
                                               : "1.5";
    if (t[i].type == LT_OPT_ENUM && strcmp(t[i].key, "placement") == 0) v = "RR";
    if (t[i].type == LT_OPT_ENUM && strcmp(t[i].key, "journal_mismatch") == 0) v = "Refuse";
    if (t[i].type == LT_OPT_PATH) v = "/some/path";
    cr_expect_eq(lt__options_set(&o, dashed, v), LT_OK, "%s=%s: %s", dashed, v, o.error);
    if (t[i].type != LT_OPT_KEY)
      cr_expect_eq(o.given, UINT64_C(1) << i, "%s counts as given", t[i].key);
    lt__options_clear(&o);
  }
}

/* grain: auto (any case) is 0, N is N, 0 and junk are refused naming the shape; plain
 * mode turns it off (1) and optimized back to auto, when it was not set itself. */
Test(options, grain_auto_or_n) {
  lt_options_t o;
  lt__options_init(&o);
  cr_expect_eq(o.grain, 0u, "auto by default");
  cr_expect_eq(lt__options_set(&o, "grain", "8"), LT_OK);
  cr_expect_eq(o.grain, 8u);
  cr_expect_eq(lt__options_set(&o, "grain", "AUTO"), LT_OK);
  cr_expect_eq(o.grain, 0u);
  cr_expect_eq(lt__options_set(&o, "grain", "0"), LT_EINVAL);
  cr_expect(strstr(o.error, "auto or an integer from 1 to 1024") != NULL, "%s", o.error);
  cr_expect_eq(lt__options_set(&o, "grain", "lots"), LT_EINVAL);
  char buf[32];
  cr_expect_eq(lt_options_get(&o, "grain", buf, sizeof buf), LT_OK);
  cr_expect_str_eq(buf, "auto");
  lt__options_clear(&o);
  /* Not set by itself: the mode's. */
  lt__options_init(&o);
  cr_expect_eq(lt__options_set(&o, "mode", "plain"), LT_OK);
  cr_expect_eq(o.grain, 1u, "plain: one instruction a hand-off");
  cr_expect_eq(lt__options_set(&o, "mode", "optimized"), LT_OK);
  cr_expect_eq(o.grain, 0u);
  cr_expect_eq(lt_options_get(&o, "grain", buf, sizeof buf), LT_OK);
  cr_expect_str_eq(buf, "auto");
  lt__options_clear(&o);
}

Test(options, booleans_any_case) {
  lt_options_t o;
  lt__options_init(&o);
  const char *on[] = {"on", "ON", "True", "yes", "YES", "1"};
  const char *off[] = {"off", "Off", "FALSE", "no", "No", "0"};
  for (size_t i = 0; i < 6; i++) {
    cr_expect_eq(lt__options_set(&o, "ordered", off[i]), LT_OK, "%s", off[i]);
    cr_expect_eq(o.ordered, 0, "%s", off[i]);
    cr_expect_eq(lt__options_set(&o, "ordered", on[i]), LT_OK, "%s", on[i]);
    cr_expect_eq(o.ordered, 1, "%s", on[i]);
  }
  cr_expect_eq(lt__options_set(&o, "ordered", "onn"), LT_EINVAL);
  cr_expect_eq(lt__options_set(&o, "ordered", ""), LT_EINVAL);
  lt__options_clear(&o);
}

Test(options, messages) {
  lt_options_t o;
  lt__options_init(&o);
  cr_expect_eq(lt__options_set(&o, "no_such", "1"), LT_EINVAL);
  cr_expect_str_eq(o.error, "unknown option 'no_such'");
  cr_expect_eq(lt__options_set(&o, "lazy", "maybe"), LT_EINVAL);
  cr_expect_str_eq(o.error,
                   "bad value 'maybe' for lazy (expected on/off, true/false, yes/no or 1/0)");
  cr_expect_eq(lt__options_set(&o, "max-retries", "1001"), LT_EINVAL);
  cr_expect_str_eq(o.error,
                   "bad value '1001' for max_retries (expected an integer from 0 to 1000)");
  cr_expect_eq(lt__options_set(&o, "max_pending", "-1"), LT_EINVAL);
  cr_expect_eq(lt__options_set(&o, "max_pending", "12x"), LT_EINVAL);
  cr_expect_eq(lt__options_set(&o, "backup_factor", "0.5"), LT_EINVAL);
  cr_expect_str_eq(o.error, "bad value '0.5' for backup_factor (expected a number from 1 to 1000)");
  cr_expect_eq(lt__options_set(&o, "placement", "fifo"), LT_EINVAL);
  cr_expect_str_eq(o.error, "bad value 'fifo' for placement (expected eft or rr)");
  cr_expect_eq(lt__options_set(&o, "mode", "fast"), LT_EINVAL);
  cr_expect_str_eq(o.error, "bad value 'fast' for mode (expected optimized or plain)");
  cr_expect_eq(lt__options_set(&o, "modules", ""), LT_EINVAL);
  cr_expect_str_eq(o.error, "bad value '' for modules (expected a non-empty DIR)");
  cr_expect_eq(lt__options_set(&o, "curve_key", "/no/such/key/file"), LT_EINVAL);
  cr_expect(strncmp(o.error, "bad value '/no/such/key/file' for curve_key (", 45) == 0, "%s",
            o.error);
  cr_expect_eq(lt__options_set(&o, NULL, "1"), LT_EINVAL);
  /* A bad value leaves the option as it was. */
  cr_expect_eq(o.max_retries, 3);
  cr_expect_eq(o.lazy, 1);
  cr_expect_eq(o.placement, LT_PLACE_EFT);
  lt__options_clear(&o);
}

Test(options, mode_then_switches) {
  lt_options_t o;
  lt__options_init(&o);
  cr_expect_eq(lt__options_set(&o, "mode", "PLAIN"), LT_OK);
  cr_expect(o.lookahead == 0 && o.lazy == 0 && o.backup == 0 && o.throttle == 0);
  cr_expect(o.quarantine == 0 && o.grain == 1);
  cr_expect_eq(lt__options_set(&o, "lookahead", "on"), LT_OK);
  cr_expect(o.lookahead == 1 && o.lazy == 0);
  cr_expect_eq(lt__options_set(&o, "mode", "optimized"), LT_OK);
  cr_expect(o.lookahead == 1 && o.lazy == 1 && o.backup == 1 && o.throttle == 0);
  cr_expect(o.quarantine == 1 && o.grain == 0);
  /* A switch set by itself stays so through a mode set later: plain leaves lookahead on. */
  cr_expect_eq(lt__options_set(&o, "mode", "plain"), LT_OK);
  cr_expect(o.lookahead == 1 && o.lazy == 0 && o.grain == 1);
  lt__options_clear(&o);
}

/* Switches set before the mode, whatever set them, are kept: a program's mode does not undo
 * the user's grain or throttle; the rest follow the mode. */
Test(options, switches_then_mode) {
  lt_options_t o;
  lt__options_init(&o);
  cr_expect_eq(lt__options_set(&o, "grain", "8"), LT_OK);
  cr_expect_eq(lt__options_set(&o, "throttle", "on"), LT_OK);
  cr_expect_eq(lt__options_set(&o, "backup", "off"), LT_OK);
  cr_expect_eq(lt__options_set(&o, "mode", "plain"), LT_OK);
  cr_expect(o.grain == 8 && o.throttle == 1 && o.backup == 0);
  cr_expect(o.lookahead == 0 && o.lazy == 0 && o.quarantine == 0);
  cr_expect_eq(lt__options_set(&o, "mode", "optimized"), LT_OK);
  cr_expect(o.grain == 8 && o.throttle == 1 && o.backup == 0);
  cr_expect(o.lookahead == 1 && o.lazy == 1 && o.quarantine == 1);
  lt__options_clear(&o);

  /* Through the environment, read before the program's own settings (lt_eval_new). */
  setenv("LITHIUM_GRAIN", "4", 1);
  setenv("LITHIUM_LAZY", "off", 1);
  lt__options_init(&o);
  cr_expect_eq(lt__options_from_env(&o), LT_OK, "%s", o.error);
  cr_expect_eq(lt__options_set(&o, "mode", "optimized"), LT_OK);
  cr_expect(o.grain == 4 && o.lazy == 0 && o.lookahead == 1, "grain %u lazy %d", o.grain, o.lazy);
  unsetenv("LITHIUM_GRAIN");
  unsetenv("LITHIUM_LAZY");
  lt__options_clear(&o);
  cr_expect(lt__option_follows_mode("lookahead") && lt__option_follows_mode("grain"));
  cr_expect(!lt__option_follows_mode("max-threads") && !lt__option_follows_mode("mode"));
  cr_expect(!lt__option_follows_mode("no_such"));
}

Test(options, min_threads_at_most_max_threads) {
  lt_options_t o;
  lt__options_init(&o);
  cr_expect_eq(lt__options_set(&o, "max_threads", "2"), LT_OK);
  cr_expect_eq(lt__options_set(&o, "min_threads", "3"), LT_EINVAL);
  cr_expect_str_eq(o.error, "bad value '3' for min_threads (expected at most max_threads, 2)");
  cr_expect_eq(o.min_threads, 2);
  cr_expect_eq(lt__options_set(&o, "min_threads", "2"), LT_OK);
  cr_expect_eq(lt__options_set(&o, "max_threads", "1"), LT_EINVAL);
  cr_expect_str_eq(o.error, "bad value '1' for max_threads (expected at least min_threads, 2)");
  cr_expect_eq(o.max_threads, 2);
  cr_expect_eq(lt__options_check(&o), LT_OK);
  lt__options_clear(&o);

  /* Against a default: taken, so that either order of the two works, and checked at start. */
  lt__options_init(&o);
  cr_expect_eq(lt__options_set(&o, "max_threads", "1"), LT_OK);
  cr_expect_eq(lt__options_check(&o), LT_EINVAL);
  cr_expect_str_eq(o.error, "min_threads 2 (the default) is above max_threads 1: set "
                            "min_threads too");
  cr_expect_eq(lt__options_set(&o, "min_threads", "1"), LT_OK);
  cr_expect_eq(lt__options_check(&o), LT_OK);
  lt__options_clear(&o);

  lt__options_init(&o);
  cr_expect_eq(lt__options_set(&o, "min_threads", "8"), LT_OK);
  cr_expect_eq(lt__options_check(&o), LT_EINVAL);
  cr_expect_str_eq(o.error, "min_threads 8 is above max_threads 6: set max_threads too");
  lt__options_clear(&o);
}

/* with_stderr_to runs lt__options_from_env with stderr on a file and returns what it wrote. */
static char *from_env_stderr(lt_options_t *o, int *rc) {
  char path[] = "/tmp/lt_options_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  int saved = dup(2);
  dup2(fd, 2);
  *rc = lt__options_from_env(o);
  dup2(saved, 2);
  close(saved);
  close(fd);
  char *text = slurp(path);
  unlink(path);
  cr_assert_not_null(text);
  return text;
}

Test(options, environment) {
  lt__log_set_level(LT_LOG_WARN);
  setenv("LITHIUM_MAX_PENDING", "8", 1);
  setenv("LITHIUM_PLACEMENT", "rr", 1);
  setenv("LITHIUM_MAX_PENDNG", "9", 1); /* a typo: warned about */
  setenv("LITHIUM_LOG", "warn", 1);     /* not an option, by design: no warning */
  setenv("LITHIUM_SSH", "ssh", 1);
  lt_options_t o;
  lt__options_init(&o);
  int rc;
  char *err = from_env_stderr(&o, &rc);
  cr_expect_eq(rc, LT_OK, "%s", o.error);
  cr_expect_eq(o.max_pending, 8);
  cr_expect_eq(o.placement, LT_PLACE_RR);
  cr_expect(strstr(err, "environment variable LITHIUM_MAX_PENDNG names no option") != NULL, "%s",
            err);
  cr_expect(strstr(err, "LITHIUM_LOG") == NULL && strstr(err, "LITHIUM_SSH") == NULL, "%s", err);
  free(err);
  /* Once a process. */
  err = from_env_stderr(&o, &rc);
  cr_expect_str_empty(err);
  free(err);
  /* A bad value names the variable. */
  setenv("LITHIUM_ORDERED", "Maybe", 1);
  err = from_env_stderr(&o, &rc);
  free(err);
  cr_expect_eq(rc, LT_EINVAL);
  cr_expect_str_eq(o.error,
                   "bad value 'Maybe' for LITHIUM_ORDERED (expected on/off, true/false, yes/no "
                   "or 1/0)");
  lt__options_clear(&o);
}

Test(options, public_api) {
  lt_eval_t *ev;
  cr_assert_eq(lt_eval_new(&ev, lt_seq("m:f")), LT_OK);
  cr_expect_str_empty(lt_eval_error(ev));
  cr_expect_eq(lt_eval_set(ev, "max-pending", "8"), LT_OK);
  cr_expect_eq(lt_eval_set(ev, "Ordered", "on"), LT_EINVAL, "keys keep their case");
  cr_expect_str_eq(lt_eval_error(ev), "unknown option 'Ordered'");
  cr_expect_eq(lt_eval_set(ev, "ordered", "OFF"), LT_OK);
  cr_expect_eq(lt_eval_set(ev, "max_pending", "0"), LT_EINVAL);
  cr_expect_str_eq(lt_eval_error(ev),
                   "bad value '0' for max_pending (expected an integer from 1 to 1073741824)");
  cr_expect_str_empty(lt_eval_error(NULL));
  /* A contradiction with a default stops lt_eval_start before it connects anywhere. */
  cr_expect_eq(lt_eval_set(ev, "max_threads", "1"), LT_OK);
  cr_expect_eq(lt_eval_add_host(ev, "tcp://127.0.0.1:1"), LT_OK);
  cr_expect_eq(lt_eval_start(ev), LT_EINVAL);
  cr_expect_str_eq(lt_eval_error(ev),
                   "min_threads 2 (the default) is above max_threads 1: set min_threads too");
  lt_eval_free(ev);
}

/* guide_options returns the Options section of docs/guide.md (malloc'd). */
static char *guide_options(void) {
  char *guide = slurp(LT_GUIDE);
  cr_assert_not_null(guide, "cannot read %s", LT_GUIDE);
  char *start = strstr(guide, "\n## Options\n");
  cr_assert_not_null(start, "docs/guide.md has no Options section");
  char *end = strstr(start + 1, "\n## ");
  if (end != NULL) *end = '\0';
  char *section = strdup(start);
  free(guide);
  return section;
}

/* The guide's table has exactly the table's keys, each with its default. */
Test(options, guide_lists_every_option) {
  char *section = guide_options();
  size_t n;
  const lt_option_t *t = lt__options_table(&n);
  for (size_t i = 0; i < n; i++) {
    char row[96];
    snprintf(row, sizeof row, "\n| `%s` | ", t[i].key);
    char *at = strstr(section, row);
    cr_expect_not_null(at, "docs/guide.md's Options table has no row for %s", t[i].key);
    if (at == NULL || t[i].def == NULL) continue;
    /* The default cell, backquotes dropped, starts with the table's default. */
    char cell[128];
    size_t k = 0;
    for (const char *c = at + strlen(row); *c != '|' && *c != '\0' && k + 1 < sizeof cell; c++)
      if (*c != '`') cell[k++] = *c;
    cell[k] = '\0';
    cr_expect(strncmp(cell, t[i].def, strlen(t[i].def)) == 0 &&
                  (cell[strlen(t[i].def)] == ' ' || cell[strlen(t[i].def)] == '\0'),
              "docs/guide.md gives %s the default '%s', the table '%s'", t[i].key, cell, t[i].def);
  }
  size_t rows = 0;
  for (char *line = strstr(section, "\n| `"); line != NULL; line = strstr(line + 1, "\n| `")) {
    char key[64];
    cr_assert_eq(sscanf(line, "\n| `%63[^`]`", key), 1);
    cr_expect_not_null(lt__option_find(key), "docs/guide.md lists %s, which is no option", key);
    rows++;
  }
  cr_expect_eq(rows, n, "docs/guide.md's Options table has %zu rows, the table %zu", rows, n);
  free(section);
}

/* `lithium --help` shows every option (`hosts` as the tool's own --hosts-file). */
Test(options, help_lists_every_option) {
  FILE *p = popen(LT_TEST_TOOL " --help", "r");
  cr_assert_not_null(p);
  static char help[32768];
  size_t len = fread(help, 1, sizeof help - 1, p);
  help[len] = '\0';
  cr_assert_eq(pclose(p), 0);
  size_t n;
  const lt_option_t *t = lt__options_table(&n);
  for (size_t i = 0; i < n; i++) {
    char flag[96];
    snprintf(flag, sizeof flag, "\n      --%s%s ", t[i].key,
             strcmp(t[i].key, "hosts") == 0 ? "-file" : "");
    cr_expect_not_null(strstr(help, flag), "--help does not show %s", t[i].key);
  }
}
