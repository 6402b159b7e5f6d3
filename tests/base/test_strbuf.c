/* tests/base/test_strbuf.c: the string buffer (proto/base/strbuf.h): appends of bytes,
 * strings and formats, growth past many doublings, embedded NULs, clear and take, and that
 * a failure sticks until the buffer is cleared. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

Test(strbuf, appends) {
  lt_strbuf_t b = {0};
  lt__strbuf_puts(&b, "seq");
  lt__strbuf_put(&b, "(xyz", 2);
  lt__strbuf_printf(&b, "%u-%s-%.6g", 42u, "k", 0.5);
  cr_assert_eq(b.len, 13);
  cr_assert_str_eq(b.data, "seq(x42-k-0.5");
  char *s = lt__strbuf_take(&b);
  cr_assert_str_eq(s, "seq(x42-k-0.5");
  cr_assert_null(b.data);
  cr_assert_eq(b.len, 0);
  free(s);
}

Test(strbuf, take_of_nothing_is_empty) {
  lt_strbuf_t b = {0};
  char *s = lt__strbuf_take(&b);
  cr_assert_not_null(s);
  cr_assert_str_eq(s, "");
  free(s);
}

Test(strbuf, grows) {
  lt_strbuf_t b = {0};
  for (int i = 0; i < 10000; i++)
    lt__strbuf_printf(&b, "%04d,", i);
  cr_assert_eq(b.len, 50000);
  cr_assert_geq(b.cap, b.len + 1);
  cr_assert_eq(b.data[b.len], '\0');
  cr_assert(memcmp(b.data + 5 * 9999, "9999,", 5) == 0);
  char long_arg[3000];
  memset(long_arg, 'a', sizeof long_arg - 1);
  long_arg[sizeof long_arg - 1] = '\0';
  lt__strbuf_printf(&b, "<%s>", long_arg);
  cr_assert_eq(b.len, 50000 + 3001);
  cr_assert_eq(b.data[b.len - 1], '>');
  lt__strbuf_reset(&b);
  cr_assert_null(b.data);
  lt__strbuf_reset(NULL);
}

Test(strbuf, embedded_nul) {
  lt_strbuf_t b = {0};
  lt__strbuf_put(&b, "a\0b", 3);
  cr_assert_eq(b.len, 3);
  cr_assert(memcmp(b.data, "a\0b", 4) == 0);
  lt__strbuf_reset(&b);
}

Test(strbuf, clear_keeps_memory) {
  lt_strbuf_t b = {0};
  lt__strbuf_puts(&b, "first");
  char *mem = b.data;
  lt__strbuf_clear(&b);
  cr_assert_eq(b.len, 0);
  cr_assert_str_eq(b.data, "");
  lt__strbuf_puts(&b, "two");
  cr_assert_eq(b.data, mem);
  cr_assert_str_eq(b.data, "two");
  lt__strbuf_reset(&b);
}

Test(strbuf, failure_sticks) {
  lt_strbuf_t b = {0};
  lt__strbuf_puts(&b, "x");
  lt__strbuf_put(&b, "y", SIZE_MAX); /* cannot fit: the buffer fails */
  cr_assert(b.failed);
  lt__strbuf_puts(&b, "z");
  lt__strbuf_printf(&b, "%d", 1);
  cr_assert_eq(b.len, 1);
  cr_assert_null(lt__strbuf_take(&b));
  cr_assert_not(b.failed);
  lt__strbuf_puts(&b, "x");
  lt__strbuf_put(&b, "y", SIZE_MAX);
  lt__strbuf_clear(&b);
  cr_assert_not(b.failed);
  lt__strbuf_puts(&b, "ok");
  cr_assert_str_eq(b.data, "ok");
  lt__strbuf_reset(&b);
}
