/* test_farm.c: farms and pipelines on real lithium-server processes: many tasks in order,
 * multi-stage pipelines, failing and unknown kernels, futures, unordered results,
 * backpressure, a server lost mid-run, hosts added while running, and the stats. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

Test(farm, ten_thousand_tasks_on_three_servers_in_order, .timeout = 120) {
  lt_eval_t *ev = new_eval(lt_farm(lt_seq("testk:inc")), 3);
  const int n = 10000;
  /* Reading while submitting keeps the stream flowing past max_pending. */
  int next = 0;
  for (int i = 0; i < n; i++) {
    unsigned char tok[8];
    put_i64(tok, i * 3);
    cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK);
    for (; i % 512 == 511 && next < i - 256; next++)
      cr_assert_eq(next_i64(ev), (int64_t)next * 3 + 1, "task %d", next);
  }
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  for (; next < n; next++)
    cr_assert_eq(next_i64(ev), (int64_t)next * 3 + 1, "task %d", next);
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next(ev, &b), LT_ECLOSED);

  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  cr_assert_not_null(strstr(json, "\"tasks_completed\":10000"), "%s", json);
  /* One instruction per task; one moved off a slower server at the end is dispatched twice,
   * a straggler's copy on an idle server is one more, and so is a task run again. */
  cr_assert_eq(distinct_instructions(json) - stats_u64(json, "reruns"), 10000, "%s", json);
  /* Every server took part. */
  uint64_t done[3];
  cr_assert_eq(stats_each(json, "completed", done, 3), 3, "%s", json);
  for (int i = 0; i < 3; i++)
    cr_assert_gt(done[i], 0, "%s", json);
  free(json);
  lt_eval_free(ev);
}

Test(farm, submit_all_then_start_then_read, .timeout = 60) {
  /* Lithium's own pattern: tasks first, then parDo, then every result, one thread. */
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_farm(lt_seq("testk:dbl"))), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "server", LT_TEST_SERVER), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "modules", LT_TEST_MODULES), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "max_pending", "16"), LT_OK);
  for (int i = 0; i < 100; i++) {
    unsigned char tok[8];
    put_i64(tok, i);
    cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK);
  }
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  cr_assert_eq(lt_eval_spawn_local(ev, 2), LT_OK);
  cr_assert_eq(lt_eval_start(ev), LT_OK);
  for (int i = 0; i < 100; i++)
    cr_assert_eq(next_i64(ev), 2 * i);
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next(ev, &b), LT_ECLOSED);
  lt_eval_free(ev);
}

Test(pipeline, three_stages, .timeout = 60) {
  /* No copies or reruns: the test counts the instructions, each stage once a task (on a loaded
   * machine a scheduling pause of a few ms made a 1 µs stage a straggler, rerun: 1503). */
  const char *opts[] = {"backup", "off", NULL};
  lt_eval_t *ev = new_eval_with(lt_pipeline(lt_farm(lt_seq("testk:inc")), lt_seq("testk:dbl"),
                                            lt_farm(lt_seq("testk:inc")), NULL),
                                2, opts);
  for (int i = 0; i < 500; i++) {
    unsigned char tok[8];
    put_i64(tok, i - 250);
    cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK);
  }
  lt_eval_close(ev);
  for (int i = 0; i < 500; i++)
    cr_assert_eq(next_i64(ev), (int64_t)(i - 250 + 1) * 2 + 1);
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  cr_assert_not_null(strstr(json, "\"instructions\":1500"), "%s", json);
  free(json);
  lt_eval_free(ev);
}

Test(pipeline, nested_pipelines_and_params, .timeout = 60) {
  lt_eval_t *ev =
      new_eval(lt_pipeline(lt_seq("testk:upper"),
                           lt_farm(lt_pipeline(lt_seq("testk:echo"), lt_seq("testk:echo"), NULL)),
                           lt_seq_with("testk:param", "fixed\0bytes", 11), NULL),
               1);
  cr_assert_eq(lt_eval_submit(ev, "abc", 3, NULL), LT_OK);
  lt_eval_close(ev);
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next(ev, &b), LT_OK);
  cr_assert_eq(lt_buf_len(b), 11);
  cr_assert_eq(memcmp(lt_buf_data(b), "fixed\0bytes", 11), 0);
  lt_buf_free(b);
  lt_eval_free(ev);
}

Test(errors, failing_kernel_fails_its_task_only, .timeout = 60) {
  lt_eval_t *ev = new_eval(lt_pipeline(lt_seq("testk:neg_fails"), lt_seq("testk:inc"), NULL), 2);
  for (int i = -3; i < 7; i++) {
    unsigned char tok[8];
    put_i64(tok, i);
    cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK);
  }
  lt_eval_close(ev);
  for (int i = -3; i < 7; i++) {
    lt_buf_t *b = NULL;
    cr_assert_eq(lt_eval_next(ev, &b), LT_OK);
    if (i < 0) {
      cr_assert_eq(lt_buf_error(b), LT_EKERNEL);
      cr_assert_not_null(strstr(lt_buf_errmsg(b), "negative input"), "%s", lt_buf_errmsg(b));
      cr_assert_eq(lt_buf_len(b), 0);
    } else {
      cr_assert_eq(lt_buf_error(b), LT_OK, "%s", lt_buf_errmsg(b));
      cr_assert_eq(get_i64(lt_buf_data(b)), i + 1);
    }
    lt_buf_free(b);
  }
  lt_eval_free(ev);
}

/* An unknown kernel or module fails lt_eval_start once, naming it (tests/e2e/test_errors.c
 * has the details); no task is sent. */
static int start_rc(lt_skel_t *program, char *msg, size_t len) {
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, program), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "server", LT_TEST_SERVER), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "modules", LT_TEST_MODULES), LT_OK);
  cr_assert_eq(lt_eval_spawn_local(ev, 1), LT_OK, "%s", lt_eval_error(ev));
  cr_assert_eq(lt_eval_submit(ev, "x", 1, NULL), LT_OK);
  int rc = lt_eval_start(ev);
  snprintf(msg, len, "%s", lt_eval_error(ev));
  lt_eval_free(ev);
  return rc;
}

Test(errors, unknown_kernel_and_module_are_named, .timeout = 60) {
  char msg[2048];
  cr_assert_eq(start_rc(lt_pipeline(lt_seq("testk:no_such_kernel"), NULL), msg, sizeof msg),
               LT_ENOKERNEL, "%s", msg);
  cr_assert_not_null(strstr(msg, "no_such_kernel"), "%s", msg);
  cr_assert_eq(start_rc(lt_seq("nomod:f"), msg, sizeof msg), LT_ENOMODULE, "%s", msg);
  cr_assert_not_null(strstr(msg, "'nomod'"), "%s", msg);
}

Test(futures, future_results_skip_the_stream, .timeout = 60) {
  lt_eval_t *ev = new_eval(lt_farm(lt_seq("testk:inc")), 2);
  lt_future_t *f[10];
  for (int i = 0; i < 20; i++) {
    unsigned char tok[8];
    put_i64(tok, i);
    cr_assert_eq(lt_eval_submit(ev, tok, 8, i % 2 ? &f[i / 2] : NULL), LT_OK);
  }
  lt_eval_close(ev);
  for (int i = 0; i < 20; i += 2)
    cr_assert_eq(next_i64(ev), i + 1);
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next(ev, &b), LT_ECLOSED);
  for (int k = 0; k < 10; k++) {
    cr_assert_eq(lt_future_wait(f[k], 10000, &b), LT_OK);
    cr_assert_eq(get_i64(lt_buf_data(b)), 2 * k + 2);
    lt_buf_free(b);
    cr_assert_eq(lt_future_wait(f[k], 0, &b), LT_ESTATE);
  }
  lt_eval_free(ev);
  for (int k = 0; k < 10; k++)
    lt_future_release(f[k]);
}

Test(futures, wait_times_out_then_succeeds, .timeout = 60) {
  lt_eval_t *ev = new_eval(lt_seq_with("testk:sleep", "300", 3), 1);
  lt_future_t *f = NULL;
  cr_assert_eq(lt_eval_submit(ev, "abc", 3, &f), LT_OK);
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_future_wait(f, 10, &b), LT_ETIMEDOUT);
  cr_assert_eq(lt_future_wait(f, 20000, &b), LT_OK);
  cr_assert_eq(memcmp(lt_buf_data(b), "abc", 3), 0);
  lt_buf_free(b);
  lt_future_release(f);
  lt_eval_free(ev);
}

Test(stream, unordered_results_are_all_there, .timeout = 60) {
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_farm(lt_seq("testk:inc"))), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "ordered", "off"), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "server", LT_TEST_SERVER), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "modules", LT_TEST_MODULES), LT_OK);
  cr_assert_eq(lt_eval_spawn_local(ev, 2), LT_OK);
  cr_assert_eq(lt_eval_start(ev), LT_OK);
  int seen[300] = {0};
  for (int i = 0; i < 300; i++) {
    unsigned char tok[8];
    put_i64(tok, i);
    cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK);
  }
  lt_eval_close(ev);
  for (int i = 0; i < 300; i++) {
    int64_t v = next_i64(ev) - 1;
    cr_assert(v >= 0 && v < 300 && !seen[v]);
    seen[v] = 1;
  }
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next(ev, &b), LT_ECLOSED);
  lt_eval_free(ev);
}

Test(stream, nonblocking_submit_reports_full, .timeout = 60) {
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_seq_with("testk:sleep", "200", 3)), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "max_pending", "2"), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "nonblocking", "on"), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "server", LT_TEST_SERVER), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "modules", LT_TEST_MODULES), LT_OK);
  cr_assert_eq(lt_eval_spawn_local(ev, 1), LT_OK);
  cr_assert_eq(lt_eval_start(ev), LT_OK);
  cr_assert_eq(lt_eval_submit(ev, "a", 1, NULL), LT_OK);
  cr_assert_eq(lt_eval_submit(ev, "b", 1, NULL), LT_OK);
  cr_assert_eq(lt_eval_submit(ev, "c", 1, NULL), LT_EAGAIN);
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next(ev, &b), LT_OK);
  lt_buf_free(b);
  /* A result that was computed frees a slot even before it is read. */
  cr_assert_eq(lt_eval_submit(ev, "c", 1, NULL), LT_OK);
  lt_eval_close(ev);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(lt_eval_next(ev, &b), LT_OK);
    cr_assert_eq(lt_buf_error(b), LT_OK);
    lt_buf_free(b);
  }
  cr_assert_eq(lt_eval_next(ev, &b), LT_ECLOSED);
  lt_eval_free(ev);
}

Test(failure, server_killed_mid_run_loses_nothing, .timeout = 90) {
  lt_proc_t a, b;
  start_server(&a, "victim", 2);
  start_server(&b, "survivor", 2);
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_farm(lt_seq_with("testk:sleep", "5", 1))), LT_OK);
  /* The kill is seen on the connection at once (socket monitor), not by heartbeats. */
  cr_assert_eq(lt_eval_set(ev, "heartbeat_ms", "1000"), LT_OK);
  cr_assert_eq(lt_eval_add_host(ev, a.endpoint), LT_OK);
  cr_assert_eq(lt_eval_add_host(ev, b.endpoint), LT_OK);
  cr_assert_eq(lt_eval_start(ev), LT_OK);
  for (int i = 0; i < 200; i++) {
    unsigned char tok[8];
    put_i64(tok, i);
    cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK);
  }
  lt_eval_close(ev);
  for (int i = 0; i < 200; i++) {
    if (i == 20) kill(a.pid, SIGKILL);
    cr_assert_eq(next_i64(ev), i);
  }
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  cr_assert_not_null(strstr(json, "\"alive\":false"), "%s", json);
  free(json);
  lt_eval_free(ev);
  lt__proc_stop(&a, 1000);
  lt__proc_stop(&b, 5000);
}

Test(hosts, host_added_while_running_gets_work, .timeout = 60) {
  lt_proc_t late;
  lt_eval_t *ev = new_eval(lt_farm(lt_seq_with("testk:sleep", "2", 1)), 1);
  start_server(&late, "late", 2);
  cr_assert_eq(lt_eval_add_host(ev, late.endpoint), LT_OK);
  for (int i = 0; i < 400; i++) {
    unsigned char tok[8];
    put_i64(tok, i);
    cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK);
  }
  lt_eval_close(ev);
  for (int i = 0; i < 400; i++)
    cr_assert_eq(next_i64(ev), i);
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  const char *p = strstr(json, late.endpoint);
  cr_assert_not_null(p, "%s", json);
  p = strstr(p, "\"completed\":");
  cr_assert_gt(atoi(p + strlen("\"completed\":")), 0, "%s", json);
  free(json);
  lt_eval_free(ev);
  lt__proc_stop(&late, 5000);
}

Test(api, bad_arguments_and_options, .timeout = 30) {
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, NULL), LT_EINVAL);
  cr_assert_null(lt_seq("nocolon"));
  cr_assert_null(lt_seq("a:b c"));
  cr_assert_null(lt_farm(NULL));
  cr_assert_eq(lt_eval_new(&ev, lt_seq("testk:inc")), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "no_such_key", "1"), LT_EINVAL);
  cr_assert_eq(lt_eval_set(ev, "ordered", "maybe"), LT_EINVAL);
  cr_assert_eq(lt_eval_set(ev, "max_pending", "0"), LT_EINVAL);
  cr_assert_eq(lt_eval_set(ev, "max_pending", "12x"), LT_EINVAL);
  cr_assert_eq(lt_eval_set(ev, "max_pending", "-3"), LT_EINVAL);
  cr_assert_eq(lt_eval_set(ev, "mode", "turbo"), LT_EINVAL);
  cr_assert_eq(lt_eval_set(ev, "mode", "plain"), LT_OK);
  cr_assert_eq(lt_eval_add_host(ev, "not an endpoint"), LT_EINVAL);
  cr_assert_eq(lt_eval_start(ev), LT_ENOSERVER);
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next(ev, &b), LT_ESTATE);
  cr_assert_eq(lt_eval_set(ev, "server", "/nonexistent/lithium-server"), LT_OK);
  cr_assert_eq(lt_eval_spawn_local(ev, 1), LT_ESPAWN);
  lt_eval_free(ev);
  lt_eval_free(NULL);
  lt_buf_free(NULL);
  lt_future_release(NULL);
}

Test(api, unreachable_host_fails_start, .timeout = 30) {
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, lt_seq("testk:inc")), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "connect_timeout_ms", "300"), LT_OK);
  /* Port 1 on loopback: nothing listens there. */
  cr_assert_eq(lt_eval_add_host(ev, "tcp://127.0.0.1:1"), LT_OK);
  cr_assert_eq(lt_eval_start(ev), LT_ENOSERVER);
  lt_eval_free(ev);
}
