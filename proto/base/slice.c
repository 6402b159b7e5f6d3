/* slice.c: short time slices for message threads (slice.h), through sched_setattr(2), which
 * glibc does not wrap. */
#include "slice.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The kernel's struct sched_attr (include/uapi/linux/sched/types.h), first version. */
typedef struct sched_attr_v1 {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
} sched_attr_v1_t;

/* get_attr reads thread tid's scheduling attributes; 0 or an errno value. */
static int get_attr(pid_t tid, sched_attr_v1_t *a) {
  memset(a, 0, sizeof *a);
  if (syscall(SYS_sched_getattr, tid, a, (unsigned)sizeof *a, 0u) != 0) return errno;
  return 0;
}

int lt__slice_wanted(void) {
  const char *v = getenv("LT_SHORT_SLICE");
  return v == NULL || strcmp(v, "off") != 0;
}

int lt__slice_short(pid_t tid) {
  sched_attr_v1_t a;
  int rc = get_attr(tid, &a);
  if (rc != 0) return rc;
  /* Only threads of the normal class: a real-time or idle policy someone chose stays. */
  if (a.sched_policy != SCHED_OTHER && a.sched_policy != SCHED_BATCH) return EINVAL;
  a.size = sizeof a;
  a.sched_flags = 0; /* policy and nice as read: only the runtime (the slice) changes */
  a.sched_runtime = (uint64_t)LT_SLICE_US * 1000u;
  if (syscall(SYS_sched_setattr, tid, &a, 0u) != 0) return errno;
  /* Kernels before custom slices accept the call and ignore the runtime. */
  return lt__slice_of(tid) == LT_SLICE_US ? 0 : ENOTSUP;
}

long lt__slice_of(pid_t tid) {
  sched_attr_v1_t a;
  if (get_attr(tid, &a) != 0 || a.sched_runtime == 0) return -1;
  return (long)(a.sched_runtime / 1000u);
}

/* name_starts tells whether thread `tid`'s name starts with `prefix`. */
static int name_starts(const char *tid, const char *prefix) {
  char path[320], name[32] = "";
  snprintf(path, sizeof path, "/proc/self/task/%s/comm", tid);
  FILE *f = fopen(path, "re");
  if (f == NULL) return 0;
  int ok = fgets(name, sizeof name, f) != NULL && strncmp(name, prefix, strlen(prefix)) == 0;
  fclose(f);
  return ok;
}

int lt__slice_short_named(const char *prefix) {
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || !name_starts(e->d_name, prefix)) continue;
    n += lt__slice_short((pid_t)strtol(e->d_name, NULL, 10)) == 0;
  }
  closedir(d);
  return n;
}
