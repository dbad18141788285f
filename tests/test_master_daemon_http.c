/*
 * test_master_daemon_http.c - the real mooncake_master process, driven over its real ports
 * (master_daemon_fixture.h): the HTTP port: /health, /metrics (every sample line parses; the
 * counters follow the RPCs), 404.
 */
#include "master_daemon_fixture.h"

static void test_metrics(void **state)
{
    struct daemon *d = *state;
    md_start(d, NULL);
    d->c = md_connect(d);
    Mc__Uuid a = md_uuid(1, 2), seg_id = md_uuid(7, 8);
    assert_int_equal(md_mount(d->c, &a, &seg_id, "seg0"), 0);
    assert_int_equal(md_put_start(d->c, &a, "m1", 100, NULL), 0);
    assert_int_equal(md_put_end(d->c, &a, "m1", 0), 0);
    assert_int_equal(md_put_start(d->c, &a, "m2", 100, NULL), 0);
    assert_int_equal(md_put_end(d->c, &a, "m2", 0), 0);

    assert_int_equal(md_http_get(d->metrics_port, "/health", &d->body), 200);
    free(d->body);
    d->body = NULL;
    assert_int_equal(md_http_get(d->metrics_port, "/metrics", &d->body), 200);
    int found = 0;
    assert_true(md_metric_value(d->body, "master_key_count", &found) == 2.0);
    assert_true(found);
    assert_true(md_metric_value(d->body, "master_total_capacity_bytes", &found) ==
                (double)SEG_SIZE);
    assert_true(found);
    assert_true(md_metric_value(d->body, "master_allocated_bytes", &found) >= 200.0);
    assert_true(found);
    assert_true(md_metric_value(d->body, "master_put_start_requests_total", &found) >= 2.0);
    assert_true(found);
    free(d->body);
    d->body = NULL;
    assert_int_equal(md_http_get(d->metrics_port, "/nope", &d->body), 404);
    free(d->body);
    d->body = NULL;
    md_stop_ok(d);
}

int main(void)
{
    md_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_metrics, md_setup, md_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
