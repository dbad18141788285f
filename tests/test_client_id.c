/*
 * test_client_id.c - a client with disk_path keeps its client id in disk_path.
 *
 * The module: the first load creates DIR (one level) and DIR/client_id with a fresh id, later
 * loads return that id; a malformed file is refused and left as it is (never replaced by a new
 * id); a path that cannot be a directory is an I/O error. Through the client: two opens of
 * the same disk_path (one after the other, against a real master) report the same id in their
 * "client open" line, and a client without disk_path gets a different one.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client_id.h"
#include "mooncake/client.h"
#include "mooncake/errors.h"
#include "test_client_util.h"

static char g_root[256];

static void path_in(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", g_root, name);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void read_file(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = '\0';
    fclose(f);
}

static void test_create_then_reload(void **state)
{
    (void)state;
    char dir[300], file[340];
    path_in(dir, sizeof(dir), "fresh");
    snprintf(file, sizeof(file), "%s/%s", dir, MC_CLIENT_ID_FILE);
    struct mc_id a, b;
    bool created = false;
    assert_int_equal(mc_client_id_load_or_create(dir, &a, &created), 0);
    assert_true(created);
    assert_false(mc_id_is_zero(a));
    char text[64], want[MC_ID_STRLEN];
    read_file(file, text, sizeof(text));
    mc_id_format(a, want);
    assert_int_equal(strlen(text), MC_ID_STRLEN);
    assert_memory_equal(text, want, MC_ID_STRLEN - 1);
    assert_int_equal(text[MC_ID_STRLEN - 1], '\n');

    assert_int_equal(mc_client_id_load_or_create(dir, &b, &created), 0);
    assert_false(created);
    assert_true(mc_id_eq(a, b));

    /* no temp file left behind */
    char tmp[360];
    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, MC_CLIENT_ID_FILE);
    assert_int_equal(access(tmp, F_OK), -1);

    /* a file written without the newline (by hand) is accepted */
    write_file(file, "0123456789abcdef0123456789abcdef");
    assert_int_equal(mc_client_id_load_or_create(dir, &b, &created), 0);
    assert_false(created);
    assert_int_equal(b.hi, 0x0123456789abcdefull);
    assert_int_equal(b.lo, 0x0123456789abcdefull);
}

static void test_malformed_is_refused_and_kept(void **state)
{
    (void)state;
    const char *bad[] = {"",
                         "xyz\n",
                         "0123456789abcdef0123456789abcde\n",
                         "0123456789abcdef0123456789abcdef0\n",
                         "00000000000000000000000000000000\n",
                         "0123456789abcdef0123456789abcdef\n\n"};
    char dir[300], file[340];
    path_in(dir, sizeof(dir), "bad");
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(file, sizeof(file), "%s/%s", dir, MC_CLIENT_ID_FILE);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        write_file(file, bad[i]);
        struct mc_id id;
        bool created = true;
        assert_int_equal(mc_client_id_load_or_create(dir, &id, &created), MC_ERR_INVALID_PARAMS);
        assert_false(created);
        char back[64];
        read_file(file, back, sizeof(back));
        assert_string_equal(back, bad[i]);
    }
}

static void test_not_a_directory(void **state)
{
    (void)state;
    char dir[300];
    path_in(dir, sizeof(dir), "plainfile");
    write_file(dir, "x");
    struct mc_id id;
    bool created;
    assert_int_equal(mc_client_id_load_or_create(dir, &id, &created), MC_ERR_INTERNAL_ERROR);
    assert_int_equal(mc_client_id_load_or_create("", &id, &created), MC_ERR_INVALID_PARAMS);
}

/* The id from a client's "client open" line. */
struct idsink {
    pthread_mutex_t lock;
    char id[MC_ID_STRLEN];
};

static void collect(void *arg, int level, const char *line)
{
    (void)level;
    struct idsink *s = arg;
    const char *p = strstr(line, "client open");
    const char *q = p ? strstr(p, " id=") : NULL;
    if (!q)
        return;
    pthread_mutex_lock(&s->lock);
    snprintf(s->id, sizeof(s->id), "%.32s", q + 4);
    pthread_mutex_unlock(&s->lock);
}

static void open_and_close(const char *master, const char *disk_path, char *id_out)
{
    struct idsink s = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = master;
    cfg.segment_size = 8u << 20;
    cfg.disk_path = disk_path;
    cfg.disk_capacity = disk_path ? 64u << 20 : 0;
    cfg.log_level = MC_CLIENT_LOG_INFO;
    cfg.log_fn = collect;
    cfg.log_arg = &s;
    struct mc_client *c = NULL;
    int rc = mc_client_open(&cfg, &c);
    if (rc)
        fail_msg("mc_client_open: %s", mc_strerror(rc));
    mc_client_close(c);
    assert_int_equal(strlen(s.id), MC_ID_STRLEN - 1);
    memcpy(id_out, s.id, MC_ID_STRLEN);
}

static void test_client_reopen_keeps_id(void **state)
{
    struct test_master *m = *state;
    char dir[300], file[340];
    path_in(dir, sizeof(dir), "client");
    snprintf(file, sizeof(file), "%s/%s", dir, MC_CLIENT_ID_FILE);
    char first[MC_ID_STRLEN], second[MC_ID_STRLEN], plain[MC_ID_STRLEN];
    open_and_close(m->addr, dir, first);
    open_and_close(m->addr, dir, second);
    assert_string_equal(first, second);
    char text[64];
    read_file(file, text, sizeof(text));
    assert_memory_equal(text, first, MC_ID_STRLEN - 1);
    open_and_close(m->addr, NULL, plain);
    assert_string_not_equal(first, plain);

    /* a malformed id file fails the open rather than starting under a new id */
    write_file(file, "not an id\n");
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = m->addr;
    cfg.segment_size = 8u << 20;
    cfg.disk_path = dir;
    cfg.disk_capacity = 64u << 20;
    struct mc_client *c = NULL;
    assert_int_equal(mc_client_open(&cfg, &c), MC_ERR_INVALID_PARAMS);
    assert_null(c);
}

static int setup_master(void **state)
{
    struct test_master *m = calloc(1, sizeof(*m));
    if (!m || tm_start(m, 0, NULL) != 0) {
        free(m);
        return -1;
    }
    *state = m;
    return 0;
}

static int teardown_master(void **state)
{
    struct test_master *m = *state;
    if (m->pid > 0)
        tm_kill(m);
    free(m);
    return 0;
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(g_root, sizeof(g_root), "%s/mc_client_id.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_root))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_then_reload),
        cmocka_unit_test(test_malformed_is_refused_and_kept),
        cmocka_unit_test(test_not_a_directory),
        cmocka_unit_test_setup_teardown(test_client_reopen_keeps_id, setup_master, teardown_master),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_root);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    return rc;
}
