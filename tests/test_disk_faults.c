/*
 * test_disk_faults.c - the LOCAL_DISK store under faults that persist: a failing append gives
 * its space back and never costs a good record (injected EIO), ENOSPC is capacity pressure
 * (injected here; a real full filesystem in test_disk_full.c), and the io_uring engine resubmits
 * short and EAGAIN transfers, bounds its retries and fails a batch on a hard submit error
 * (logged once) instead of spinning.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "client/disk_store.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "mooncake/errors.h"

/* Sizes and offsets here are written for 4 KiB record units: this file covers the format-2
 * layout (test_disk_format covers the 512 B one). */
#define DISK_TEST_RECORD_ALIGN MC_DISK_BLOCK
#include "disk_test_util.h"

static void set_fault(struct mc_disk_store *s, enum mc_disk_fault_kind kind, int ops, int skip,
                      int count)
{
    struct mc_disk_fault f = {.kind = kind, .ops = ops, .skip = skip, .count = count};
    mc_disk_store_test_set_fault(s, &f);
}

/* ------------------------------------------------------------------ persistent write faults */

#define GOOD 20
#define GOOD_LEN 100000

static void check_good(struct mc_disk_store *s)
{
    for (int i = 0; i < GOOD; i++) {
        char key[16];
        snprintf(key, sizeof(key), "good%d", i);
        assert_int_equal(get_check(s, key, GOOD_LEN, (uint64_t)i, i & 1), MC_OK);
    }
}

/* 600 appends against a write fault that never goes away: each fails, gives its reservation
 * back and reuses the extent, so no extent files pile up, bytes_used does not grow and capacity
 * eviction never drops the 20 good records. (ENOSPC is capacity pressure, not a fault: see
 * test_enospc_is_capacity_pressure.) */
static void test_persistent_write_fault_keeps_data(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 8 * MIB, 1 * MIB, NULL, NULL);
    for (int i = 0; i < GOOD; i++) {
        char key[16];
        snprintf(key, sizeof(key), "good%d", i);
        assert_int_equal(put_gen(e->s, key, 1, GOOD_LEN, (uint64_t)i), MC_OK);
    }
    struct mc_disk_usage u0, u;
    mc_disk_store_usage(e->s, &u0);
    int files0 = count_extents(e->dir);
    assert_int_equal(files0, (int)u0.extents);

    const enum mc_disk_fault_kind kinds[1] = {MC_DISK_FAULT_EIO};
    const int want[1] = {MC_ERR_FILE_WRITE_FAIL};
    for (int k = 0; k < 1; k++) {
        set_fault(e->s, kinds[k], MC_DISK_FAULT_WRITE, 0, -1);
        for (int i = 0; i < 600; i++) {
            char key[16];
            snprintf(key, sizeof(key), "bad%d", i);
            assert_int_equal(put_gen(e->s, key, 1, GOOD_LEN, 1000 + (uint64_t)i), want[k]);
        }
        /* A batch that fails as a whole is rolled back as a whole. */
        struct mc_disk_put p[4];
        char keys[4][8], *val = malloc(GOOD_LEN);
        fill(val, GOOD_LEN, 7);
        for (int i = 0; i < 4; i++) {
            snprintf(keys[i], sizeof(keys[i]), "b%d", i);
            p[i] = (struct mc_disk_put){
                keys[i], (uint32_t)strlen(keys[i]), 1, mc_crc32c(val, GOOD_LEN), val, GOOD_LEN};
        }
        int res[4];
        assert_int_equal(mc_disk_store_append(e->s, p, 4, res), want[k]);
        free(val);
        mc_disk_store_usage(e->s, &u);
        assert_int_equal(u.bytes_used, u0.bytes_used);
        assert_int_equal(u.extents, u0.extents);
        assert_int_equal(count_extents(e->dir), files0);
        assert_int_equal(u.records, GOOD);
        assert_int_equal(u.evicted_records, 0);
        assert_int_equal(u.write_errors, (uint64_t)(k + 1) * 604);
        assert_int_equal(u.no_space, k == 1);
        check_good(e->s);
    }
    set_fault(e->s, MC_DISK_FAULT_NONE, 0, 0, 0);
    /* The filesystem has room again: the next append goes through into the same extent. */
    assert_int_equal(put_gen(e->s, "after", 1, GOOD_LEN, 99), MC_OK);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.no_space, 0);
    assert_int_equal(u.no_space_events, 0);
    assert_int_equal(count_extents(e->dir), files0);

    reopen(e, 8 * MIB, 1 * MIB);
    check_good(e->s);
    assert_int_equal(get_check(e->s, "after", GOOD_LEN, 99, 0), MC_OK);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, GOOD + 1);
    assert_int_equal(u.dropped_records_at_recovery, 0);
}

/* Records an eviction callback heard of (a count: the owner was told before the delete). */
static int count_cb(void *ctx, const struct mc_disk_evict_item *items, size_t n)
{
    (void)items;
    *(size_t *)ctx += n;
    return 0;
}

/* ENOSPC is capacity pressure: the store's capacity drops to what it uses and the watermark
 * eviction runs at once (the owner told first), keeping every other record; a fault that
 * persists (the filesystem keeps saying ENOSPC) costs that one eviction, not the store; once a
 * write gets through and the filesystem has room, the configured capacity comes back. */
static void test_enospc_is_capacity_pressure(void **state)
{
    struct env *e = *state;
    size_t told = 0;
    e->s = open_store(e->dir, 8 * MIB, 1 * MIB, count_cb, &told);
    for (int i = 0; i < GOOD; i++) {
        char key[16];
        snprintf(key, sizeof(key), "good%d", i);
        assert_int_equal(put_gen(e->s, key, 1, GOOD_LEN, (uint64_t)i), MC_OK);
    }
    struct mc_disk_usage u0, u1, u;
    mc_disk_store_usage(e->s, &u0);
    assert_true(u0.extents >= 2);
    assert_int_equal(u0.capacity_limit, 8 * MIB);
    set_fault(e->s, MC_DISK_FAULT_ENOSPC, MC_DISK_FAULT_WRITE, 0, -1);
    assert_int_equal(put_gen(e->s, "bad", 1, GOOD_LEN, 1000), MC_ERR_UNABLE_OFFLOAD);
    mc_disk_store_usage(e->s, &u1);
    assert_int_equal(u1.no_space, 1);
    assert_int_equal(u1.capacity_limit, u0.bytes_used);
    assert_true(u1.evicted_records > 0); /* the old store evicted nothing: stuck full */
    assert_int_equal(told, u1.evicted_records);
    assert_true(u1.bytes_used <= u0.bytes_used * 9 / 10);
    for (int i = 0; i < 200; i++)
        assert_int_equal(put_gen(e->s, "bad", 1, GOOD_LEN, 1000), MC_ERR_UNABLE_OFFLOAD);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.evicted_records, u1.evicted_records); /* one eviction, not the store */
    assert_int_equal(u.records, u1.records);
    int present = 0;
    for (int i = 0; i < GOOD; i++) {
        char key[16];
        snprintf(key, sizeof(key), "good%d", i);
        int rc = get_check(e->s, key, GOOD_LEN, (uint64_t)i, i & 1);
        assert_true(rc == MC_OK || rc == MC_ERR_OBJECT_NOT_FOUND);
        present += rc == MC_OK;
    }
    assert_int_equal((uint64_t)present, u.records);
    assert_int_equal((uint64_t)present + told, GOOD);

    set_fault(e->s, MC_DISK_FAULT_NONE, 0, 0, 0);
    assert_int_equal(put_gen(e->s, "after", 1, GOOD_LEN, 99), MC_OK);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.no_space, 0);
    assert_int_equal(u.no_space_events, 1);
    assert_int_equal(u.capacity_limit, 8 * MIB); /* this filesystem has room for it all */
    assert_int_equal(get_check(e->s, "after", GOOD_LEN, 99, 0), MC_OK);
}

/* ------------------------------------------------------------------ io_uring engine */

static void put_batch(struct mc_disk_store *s, const char *prefix, int n, size_t len, int want)
{
    struct mc_disk_put p[8];
    char keys[8][16], *vals[8];
    int res[8];
    assert_true(n <= 8);
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], sizeof(keys[i]), "%s%d", prefix, i);
        vals[i] = malloc(len);
        fill(vals[i], len, (uint64_t)(prefix[0] * 100 + i));
        p[i] = (struct mc_disk_put){
            keys[i], (uint32_t)strlen(keys[i]), 1, mc_crc32c(vals[i], len), vals[i], len};
    }
    assert_int_equal(mc_disk_store_append(s, p, (size_t)n, res), want);
    for (int i = 0; i < n; i++) {
        assert_int_equal(res[i], want);
        free(vals[i]);
    }
}

static int check_batch(struct mc_disk_store *s, const char *prefix, int n, size_t len)
{
    int rc = MC_OK;
    for (int i = 0; i < n && rc == MC_OK; i++) {
        char key[16];
        snprintf(key, sizeof(key), "%s%d", prefix, i);
        rc = get_check(s, key, len, (uint64_t)(prefix[0] * 100 + i), i & 1);
    }
    return rc;
}

/* A short transfer is resubmitted for the rest and an EAGAIN completion is retried, a bounded
 * number of times: a fault that persists fails the operation (and the call returns). */
static void test_short_and_eagain_resubmitted(void **state)
{
    struct env *e = *state;
    const size_t len = 40000;
    e->s = open_store(e->dir, 64 * MIB, 8 * MIB, NULL, NULL);
    set_fault(e->s, MC_DISK_FAULT_SHORT, MC_DISK_FAULT_WRITE, 1, 3);
    put_batch(e->s, "s", 4, len, MC_OK);
    set_fault(e->s, MC_DISK_FAULT_EAGAIN, MC_DISK_FAULT_WRITE, 0, 5);
    put_batch(e->s, "a", 4, len, MC_OK);
    set_fault(e->s, MC_DISK_FAULT_SHORT, MC_DISK_FAULT_READ, 0, 3);
    assert_int_equal(check_batch(e->s, "s", 4, len), MC_OK);
    set_fault(e->s, MC_DISK_FAULT_EAGAIN, MC_DISK_FAULT_READ, 1, 6);
    assert_int_equal(check_batch(e->s, "a", 4, len), MC_OK);

    struct mc_disk_usage u0, u;
    mc_disk_store_usage(e->s, &u0);
    /* Persistent: bounded, then the operation fails (and a failed append is rolled back). */
    set_fault(e->s, MC_DISK_FAULT_EAGAIN, MC_DISK_FAULT_READ, 0, -1);
    assert_int_equal(check_batch(e->s, "s", 1, len), MC_ERR_FILE_READ_FAIL);
    set_fault(e->s, MC_DISK_FAULT_SHORT, MC_DISK_FAULT_WRITE, 0, -1);
    put_batch(e->s, "x", 2, len, MC_ERR_FILE_WRITE_FAIL);
    set_fault(e->s, MC_DISK_FAULT_EAGAIN, MC_DISK_FAULT_WRITE, 0, -1);
    put_batch(e->s, "y", 2, len, MC_ERR_FILE_WRITE_FAIL);
    set_fault(e->s, MC_DISK_FAULT_NONE, 0, 0, 0);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.bytes_used, u0.bytes_used);

    reopen(e, 64 * MIB, 8 * MIB);
    assert_int_equal(check_batch(e->s, "s", 4, len), MC_OK);
    assert_int_equal(check_batch(e->s, "a", 4, len), MC_OK);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, 8);
    assert_int_equal(u.dropped_records_at_recovery, 0); /* the partial writes were cut off */
}

static int count_lines(int fd, const char *needle)
{
    char buf[65536];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    int c = 0;
    for (char *p = buf; (p = strstr(p, needle)); p += strlen(needle))
        c++;
    return c;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "disk engine did not return: a submit error spins\n";
    if (write(2, msg, sizeof(msg) - 1) < 0) {
    }
    _exit(3);
}

/* A hard submit error fails the batch (every operation in it), is logged once per batch, and
 * the next call works on a fresh ring. The old engine looped on it forever: the alarm turns
 * that into a failure. */
static void test_submit_error_fails_batch_once(void **state)
{
    struct env *e = *state;
    const size_t len = 20000;
    char logpath[] = "/tmp/mc_disk_log_XXXXXX";
    int lfd = mkstemp(logpath);
    assert_true(lfd >= 0);
    unlink(logpath);
    signal(SIGALRM, on_alarm);
    alarm(60);
    e->s = open_store(e->dir, 64 * MIB, 8 * MIB, NULL, NULL);
    put_batch(e->s, "k", 4, len, MC_OK);
    struct mc_disk_usage u0, u;
    mc_disk_store_usage(e->s, &u0);

    enum mc_log_level lvl = mc_log_get_level();
    mc_log_set_level(MC_LOG_WARN);
    mc_log_set_fd(lfd);
    set_fault(e->s, MC_DISK_FAULT_SUBMIT, MC_DISK_FAULT_WRITE, 0, 1);
    put_batch(e->s, "w", 8, len, MC_ERR_FILE_WRITE_FAIL);
    int once = count_lines(lfd, "submit fail");
    set_fault(e->s, MC_DISK_FAULT_SUBMIT, MC_DISK_FAULT_READ, 0, -1);
    for (int i = 0; i < 3; i++)
        assert_int_equal(check_batch(e->s, "k", 1, len), MC_ERR_FILE_READ_FAIL);
    int thrice = count_lines(lfd, "submit fail");
    mc_log_set_fd(2);
    mc_log_set_level(lvl);
    close(lfd);
    assert_int_equal(once, 1);
    assert_int_equal(thrice, 4);

    set_fault(e->s, MC_DISK_FAULT_NONE, 0, 0, 0);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.bytes_used, u0.bytes_used);
    assert_int_equal(check_batch(e->s, "k", 4, len), MC_OK);
    put_batch(e->s, "n", 8, len, MC_OK);
    assert_int_equal(check_batch(e->s, "n", 8, len), MC_OK);
    reopen(e, 64 * MIB, 8 * MIB);
    assert_int_equal(check_batch(e->s, "k", 4, len), MC_OK);
    assert_int_equal(check_batch(e->s, "n", 8, len), MC_OK);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, 12);
    alarm(0);
    signal(SIGALRM, SIG_DFL);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    mc_log_set_level(getenv("MC_TEST_LOG") ? MC_LOG_DEBUG : MC_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_persistent_write_fault_keeps_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_enospc_is_capacity_pressure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_and_eagain_resubmitted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_submit_error_fails_batch_once, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
