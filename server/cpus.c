/* cpus.c: the CPU this server may use (cpus.h), from its affinity mask and the cgroup CPU
 * quotas over it. A hierarchy's directory for the process is its mount point joined with the
 * process's path in /proc/self/cgroup less the mount's root; the quota of each directory
 * from there up to the mount point counts, the tightest wins. Anything unreadable or
 * malformed counts as no quota. Any thread. */
#include "cpus.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PATH_MAX_LEN 4096

/* A cgroup hierarchy that holds the cpu controller: its mount point and root, and the
 * process's path in it. */
typedef struct hier {
  int v2; /* the unified hierarchy (cpu.max) rather than v1's cpu controller */
  char mnt[PATH_MAX_LEN], root[PATH_MAX_LEN], path[PATH_MAX_LEN];
} hier_t;

/* has_token tells whether the comma-separated `list` holds `tok`. */
static int has_token(const char *list, const char *tok) {
  size_t n = strlen(tok);
  for (const char *p = list; p != NULL && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
    if (strncmp(p, tok, n) == 0 && (p[n] == ',' || p[n] == '\0')) return 1;
  return 0;
}

/* find_path reads the process's path in the hierarchy (v2, or v1's cpu) from cgroup_file. */
static int find_path(const char *cgroup_file, hier_t *h) {
  FILE *f = fopen(cgroup_file, "re");
  if (f == NULL) return 0;
  char line[PATH_MAX_LEN + 256];
  int found = 0;
  while (!found && fgets(line, sizeof line, f) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    char *c1 = strchr(line, ':'), *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
    if (c2 == NULL) continue;
    *c1 = *c2 = '\0';
    const char *ctrl = c1 + 1, *path = c2 + 1;
    if ((h->v2 && *ctrl == '\0' && strcmp(line, "0") == 0) || (!h->v2 && has_token(ctrl, "cpu"))) {
      snprintf(h->path, sizeof h->path, "%s", path);
      found = 1;
    }
  }
  fclose(f);
  return found;
}

/* find_mount reads the hierarchy's mount point and root from mountinfo_file: fields 4 and 5
 * are root and mount point; after " - " come the type and the super options. */
static int find_mount(const char *mountinfo_file, hier_t *h) {
  FILE *f = fopen(mountinfo_file, "re");
  if (f == NULL) return 0;
  char line[3 * PATH_MAX_LEN];
  int found = 0;
  while (!found && fgets(line, sizeof line, f) != NULL) {
    char *dash = strstr(line, " - ");
    if (dash == NULL) continue;
    *dash = '\0';
    char root[PATH_MAX_LEN], mnt[PATH_MAX_LEN], type[64], opts[1024] = "";
    if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2) continue;
    if (sscanf(dash + 3, "%63s %*s %1023s", type, opts) < 1) continue;
    if ((h->v2 && strcmp(type, "cgroup2") == 0) ||
        (!h->v2 && strcmp(type, "cgroup") == 0 && has_token(opts, "cpu"))) {
      snprintf(h->root, sizeof h->root, "%s", root);
      snprintf(h->mnt, sizeof h->mnt, "%s", mnt);
      found = 1;
    }
  }
  fclose(f);
  return found;
}

/* read_nums reads up to two numbers from `dir`/`name` ("max" reads as -1); how many. */
static int read_nums(const char *dir, const char *name, long long *a, long long *b) {
  char p[2 * PATH_MAX_LEN], word[32] = "";
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "re");
  if (f == NULL) return 0;
  int n = fscanf(f, "%31s %lld", word, b);
  fclose(f);
  if (n < 1) return 0;
  char *end;
  *a = strcmp(word, "max") == 0 ? -1 : strtoll(word, &end, 10);
  if (strcmp(word, "max") != 0 && *end != '\0') return 0;
  return n;
}

/* quota_at returns the cores the quota of directory `dir` allows, or 0 for none. */
static double quota_at(const hier_t *h, const char *dir) {
  long long q = -1, period = 0;
  if (h->v2) {
    if (read_nums(dir, "cpu.max", &q, &period) != 2) return 0;
  } else {
    long long unused;
    if (read_nums(dir, "cpu.cfs_quota_us", &q, &unused) < 1 ||
        read_nums(dir, "cpu.cfs_period_us", &period, &unused) < 1)
      return 0;
  }
  return q > 0 && period > 0 ? (double)q / (double)period : 0;
}

/* tightest walks from the process's directory up to the mount point: the least quota. */
static double tightest(const hier_t *h) {
  const char *rel = h->path;
  size_t rl = strlen(h->root);
  if (strcmp(h->root, "/") != 0) {
    if (strncmp(rel, h->root, rl) != 0) return 0; /* outside this mount's view */
    rel += rl;
  }
  char dir[2 * PATH_MAX_LEN + 2];
  snprintf(dir, sizeof dir, "%s%s%s", h->mnt, *rel == '/' ? "" : "/", rel);
  size_t ml = strlen(h->mnt);
  double best = 0;
  for (;;) {
    double c = quota_at(h, dir);
    if (c > 0 && (best == 0 || c < best)) best = c;
    char *slash = strrchr(dir, '/');
    if (slash == NULL || (size_t)(slash - dir) < ml || strlen(dir) <= ml) break;
    *slash = '\0';
  }
  return best;
}

double lt__cpus_quota(const char *cgroup_file, const char *mountinfo_file) {
  double best = 0;
  for (int v2 = 0; v2 <= 1; v2++) {
    hier_t *h = calloc(1, sizeof *h);
    if (h == NULL) return best;
    h->v2 = v2;
    if (find_path(cgroup_file, h) && find_mount(mountinfo_file, h)) {
      double c = tightest(h);
      if (c > 0 && (best == 0 || c < best)) best = c;
    }
    free(h);
  }
  return best;
}

double lt__cpus_allowed(void) {
  double n = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n <= 0) n = (double)sysconf(_SC_NPROCESSORS_ONLN);
  if (n <= 0) n = 1;
  double q = lt__cpus_quota("/proc/self/cgroup", "/proc/self/mountinfo");
  return q > 0 && q < n ? q : n;
}
