/* test_slice.c: short scheduler slices (proto/base/slice.c). On a kernel with custom slices
 * (Linux 6.12 and later, as on the machines this project is tested on) the calling thread and
 * a named thread get a slice of LT_SLICE_US, other threads keep theirs, and LT_SHORT_SLICE=off
 * turns the request off; on an older kernel the call says ENOTSUP and changes nothing. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "slice.h"

/* custom_slices tells whether the kernel is 6.12 or later. */
static int custom_slices(void) {
  struct utsname u;
  int major = 0, minor = 0;
  if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &major, &minor) != 2) return 0;
  return major > 6 || (major == 6 && minor >= 12);
}

Test(slice, the_calling_thread_gets_a_short_slice) {
  long before = lt__slice_of(0);
  int rc = lt__slice_short(0);
  if (!custom_slices()) {
    cr_assert(rc == ENOTSUP || rc == EINVAL || rc == ENOSYS, "rc %d", rc);
    cr_assert_eq(lt__slice_of(0), before);
    return;
  }
  cr_assert_eq(rc, 0, "rc %d", rc);
  cr_assert_eq(lt__slice_of(0), LT_SLICE_US);
  cr_assert_neq(before, LT_SLICE_US, "the default slice is longer");
}

typedef struct sleeper {
  pid_t tid;
  atomic_int ready, stop;
} sleeper_t;

static void *sleeper_main(void *arg) {
  sleeper_t *s = arg;
  s->tid = (pid_t)syscall(SYS_gettid);
  atomic_store(&s->ready, 1);
  while (!atomic_load(&s->stop))
    usleep(1000);
  return NULL;
}

/* start_named starts a thread named `name` and waits until it knows its tid. */
static pthread_t start_named(sleeper_t *s, const char *name) {
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, sleeper_main, s), 0);
  cr_assert_eq(pthread_setname_np(t, name), 0);
  while (!atomic_load(&s->ready))
    usleep(100);
  return t;
}

Test(slice, threads_are_found_by_name_and_others_left_alone) {
  sleeper_t a = {0}, b = {0};
  pthread_t ta = start_named(&a, "LTslice/IO/0"), tb = start_named(&b, "other");
  long b_before = lt__slice_of(b.tid);
  int n = lt__slice_short_named("LTslice/IO");
  if (custom_slices()) {
    cr_assert_eq(n, 1);
    cr_assert_eq(lt__slice_of(a.tid), LT_SLICE_US);
  } else {
    cr_assert_eq(n, 0);
  }
  cr_assert_eq(lt__slice_of(b.tid), b_before);
  atomic_store(&a.stop, 1);
  atomic_store(&b.stop, 1);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
}

Test(slice, off_in_the_environment_is_not_wanted) {
  unsetenv("LT_SHORT_SLICE");
  cr_assert(lt__slice_wanted());
  setenv("LT_SHORT_SLICE", "on", 1);
  cr_assert(lt__slice_wanted());
  setenv("LT_SHORT_SLICE", "off", 1);
  cr_assert(!lt__slice_wanted());
}
