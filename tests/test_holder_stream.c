/*
 * test_holder_stream.c - the DRAM holder stream end to end, against a real mooncake_master:
 * a process that mounts a DRAM segment (no disk tier) runs the stream, and its holder index
 * lists exactly the objects committed in its segment, each at the offset where its bytes are
 * (checked against the value's content); a Remove drops the entry, and one made immediately
 * before a master SIGKILL never comes back, nor one removed while its holder daemon was
 * SIGSTOPped past --holder_delete_timeout_ms (fenced); with --holder_stream=false
 * nothing is streamed and Puts still work.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "client/client_internal.h"
#include "client/holder_index.h"
#include "client/holder_index_stream.h"
#include "cluster_util.h"
#include "common/clock.h"
#include "mooncake/client.h"
#include "cluster_data.h"
#include "test_client_util.h"

#define MiB (1u << 20)
#define VLEN 4096u
#define NKEYS 64
#define NREMOVED 8

static int put_on(struct mc_client *c, struct mc_client *owner, const char *key, const void *v,
                  size_t n)
{
    struct mc_replicate_config rc;
    mc_replicate_config_init(&rc);
    const char *p[1] = {mc_client_endpoint(owner)};
    rc.preferred_segments = p;
    rc.preferred_segments_count = 1;
    return mc_put(c, key, v, n, &rc);
}

static uint64_t entries(struct mc_client *c)
{
    struct mc_hidx_stats st;
    mc_holder_index_stats(c->hidx, &st);
    return st.entries;
}

static bool wait_entries(struct mc_client *c, uint64_t want, uint64_t ms)
{
    uint64_t deadline = mc_now_ms() + ms;
    while (entries(c) != want && mc_now_ms() < deadline) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (entries(c) == want)
        return true;
    struct mc_hidx_stream_stats hs;
    mc_hidx_stream_stats(c->hstream, &hs);
    struct mc_hidx_stats is;
    mc_holder_index_stats(c->hidx, &is);
    print_message(
        "index has %llu of %llu entries (polls=%llu items=%llu commits=%llu "
        "errors=%llu stale=%llu fenced=%llu overlap=%llu write=%llu)\n",
        (unsigned long long)is.entries, (unsigned long long)want, (unsigned long long)hs.polls,
        (unsigned long long)hs.items, (unsigned long long)hs.commits, (unsigned long long)hs.errors,
        (unsigned long long)is.stale, (unsigned long long)hs.fenced,
        (unsigned long long)is.dropped_by_overlap, (unsigned long long)is.dropped_by_write);
    return false;
}

static void test_index_follows_commits(void **state)
{
    (void)state;
    struct test_master m;
    assert_int_equal(tm_start(&m, 0, NULL), 0);
    struct mc_client *owner = cu_open_client_at(m.addr, 8 * MiB, true); /* the only DRAM segment */
    struct mc_client *peer = cu_open_client_at(m.addr, 0, true);        /* writes over tcp */
    assert_non_null(owner->hidx);
    assert_null(peer->hidx);
    uint8_t v[VLEN];
    char key[32];
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof(key), "hs/%d", i);
        tm_fill(v, VLEN, (uint32_t)i + 1);
        /* half written by the peer (PeerWrite), half by the owner itself (memcpy transport) */
        assert_int_equal(put_on(i % 2 ? peer : owner, owner, key, v, VLEN), 0);
    }
    if (!wait_entries(owner, NKEYS, 10000)) {
        struct mc_hidx_stream_stats hs0;
        mc_hidx_stream_stats(owner->hstream, &hs0);
        struct mc_hidx_stats is;
        mc_holder_index_stats(owner->hidx, &is);
        fail_msg("index has %llu of %d entries (polls=%llu items=%llu commits=%llu errors=%llu "
                 "stale=%llu)",
                 (unsigned long long)is.entries, NKEYS, (unsigned long long)hs0.polls,
                 (unsigned long long)hs0.items, (unsigned long long)hs0.commits,
                 (unsigned long long)hs0.errors, (unsigned long long)is.stale);
    }

    /* every entry names its own bytes */
    struct mc_hidx_entry *e;
    size_t n;
    char *keys;
    assert_int_equal(mc_holder_index_list(owner->hidx, mc_client_segment_id(owner), &e, &n, &keys),
                     0);
    assert_int_equal(n, NKEYS);
    for (size_t i = 0; i < n; i++) {
        int k = atoi(e[i].key + 3);
        assert_true(strncmp(e[i].key, "hs/", 3) == 0 && k >= 0 && k < NKEYS);
        assert_int_equal(e[i].len, VLEN);
        tm_fill(v, VLEN, (uint32_t)k + 1);
        assert_true(e[i].offset + VLEN <= owner->seg.size);
        assert_memory_equal(owner->seg.base + e[i].offset, v, VLEN);
        assert_true(e[i].version != 0);
    }
    free(e);
    free(keys);

    /* a Remove drops the entry */
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "hs/%d", i);
        assert_int_equal(mc_remove(peer, key, false), 0);
    }
    assert_true(wait_entries(owner, NKEYS - 8, 10000));

    struct mc_hidx_stream_stats hs;
    mc_hidx_stream_stats(owner->hstream, &hs);
    assert_true(hs.commits >= NKEYS);
    mc_client_close(peer);
    mc_client_close(owner);
    tm_stop(&m);
}

/* A Get through the library just after the master came back: while its link is still down it
 * fails fast (RPC_FAIL / RPC_TIMEOUT); those are retried (a liveness wait), any other answer is
 * the answer. */
static int64_t get_settled(struct mc_client *c, const char *key, void *out, size_t n)
{
    uint64_t until = mc_now_ms() + 20000;
    int64_t r;
    while ((r = mc_get(c, key, out, n)) == MC_ERR_RPC_FAIL || r == MC_ERR_RPC_TIMEOUT) {
        if (mc_now_ms() > until)
            break;
        cu_sleep_ms(50);
    }
    return r;
}

static void check_all(struct mc_client *c, const char *prefix, int from, int to, uint32_t seed0)
{
    uint8_t v[VLEN], out[VLEN];
    char key[32];
    for (int i = from; i < to; i++) {
        snprintf(key, sizeof(key), "%s%d", prefix, i);
        tm_fill(v, VLEN, seed0 + (uint32_t)i);
        memset(out, 0, VLEN);
        int64_t got = get_settled(c, key, out, VLEN);
        if (got != VLEN)
            fail_msg("%s: get returned %lld (%s)", key, (long long)got,
                     got < 0 ? mc_strerror((int)got) : "short");
        assert_memory_equal(out, v, VLEN);
    }
}

/* Objects put (and streamed) before a master SIGKILL are read back byte-equal after the restart:
 * the holder remounts its segment and re-registers its index. New Puts after the restart land
 * in the free space only (every old and new value read back equal). */
static void test_master_restart_keeps_dram(void **state)
{
    (void)state;
    struct test_master m;
    assert_int_equal(tm_start(&m, 0, NULL), 0);
    uint16_t port = m.port;
    struct mc_client *owner = cu_open_client_at(m.addr, 8 * MiB, true);
    struct mc_client *peer = cu_open_client_at(m.addr, 0, true);
    uint8_t v[VLEN];
    char key[32];
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof(key), "rs/%d", i);
        tm_fill(v, VLEN, 1000u + (uint32_t)i);
        assert_int_equal(put_on(i % 2 ? peer : owner, owner, key, v, VLEN), 0);
    }
    assert_true(wait_entries(owner, NKEYS, 10000));
    struct timespec ts = {0, 100 * 1000000L};
    nanosleep(&ts, NULL);
    /* removed immediately before the kill: the Removes answered once the holder dropped them
     * (the delete rule), so none comes back */
    for (int i = 0; i < NREMOVED; i++) {
        snprintf(key, sizeof(key), "rs/%d", i);
        assert_int_equal(mc_remove(peer, key, false), 0);
    }

    tm_kill(&m);
    assert_int_equal(tm_start(&m, port, NULL), 0);
    uint64_t deadline = mc_now_ms() + 20000;
    struct mc_hidx_stream_stats hs;
    do {
        mc_hidx_stream_stats(owner->hstream, &hs);
        if (hs.reregistered + hs.rereg_refused + hs.rereg_bad_crc >= NKEYS - NREMOVED)
            break;
        nanosleep(&ts, NULL);
    } while (mc_now_ms() < deadline);
    assert_int_equal(hs.reregistered, NKEYS - NREMOVED);
    check_all(peer, "rs/", NREMOVED, NKEYS, 1000u);
    check_all(owner, "rs/", NREMOVED, NKEYS, 1000u);
    uint8_t out[VLEN];
    for (int i = 0; i < NREMOVED; i++) {
        snprintf(key, sizeof(key), "rs/%d", i);
        assert_int_equal(get_settled(peer, key, out, VLEN), MC_ERR_OBJECT_NOT_FOUND);
    }

    /* new Puts after the restart never land on a re-registered range */
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof(key), "new/%d", i);
        tm_fill(v, VLEN, 5000u + (uint32_t)i);
        assert_int_equal(put_on(peer, owner, key, v, VLEN), 0);
    }
    check_all(peer, "rs/", NREMOVED, NKEYS, 1000u);
    check_all(peer, "new/", 0, NKEYS, 5000u);
    mc_client_close(peer);
    mc_client_close(owner);
    tm_stop(&m);
}

/* Re-registration racing new Puts from another client: random sizes, new Puts started the
 * moment the master is back. Every new value reads back equal; every old one reads back equal
 * or is missing (its range was taken first, or its entry refused), never other bytes. */
static void test_rereg_races_puts(void **state)
{
    (void)state;
    unsigned seed = (unsigned)time(NULL);
    print_message("seed %u\n", seed);
    srand(seed);
    enum { N = 200, MAXLEN = 16384 };
    static uint32_t lens[N], nlens[N];
    struct test_master m;
    assert_int_equal(tm_start(&m, 0, NULL), 0);
    uint16_t port = m.port;
    struct mc_client *owner = cu_open_client_at(m.addr, 8 * MiB, true);
    struct mc_client *peer = cu_open_client_at(m.addr, 0, true);
    uint8_t *v = malloc(MAXLEN), *out = malloc(MAXLEN);
    char key[32];
    for (int i = 0; i < N; i++) {
        lens[i] = 1 + (uint32_t)(rand() % MAXLEN);
        nlens[i] = 1 + (uint32_t)(rand() % MAXLEN);
        snprintf(key, sizeof(key), "old/%d", i);
        tm_fill(v, lens[i], 100u + (uint32_t)i);
        assert_int_equal(put_on(i % 3 ? peer : owner, owner, key, v, lens[i]), 0);
    }
    assert_true(wait_entries(owner, N, 10000));
    struct timespec ts = {0, 100 * 1000000L};
    nanosleep(&ts, NULL);
    tm_kill(&m);
    assert_int_equal(tm_start(&m, port, NULL), 0);
    uint64_t deadline = mc_now_ms() + 20000;
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "new/%d", i);
        tm_fill(v, nlens[i], 9000u + (uint32_t)i);
        int rc;
        while ((rc = put_on(peer, owner, key, v, nlens[i])) != 0 && mc_now_ms() < deadline)
            nanosleep(&(struct timespec){0, 5 * 1000000L}, NULL);
        assert_int_equal(rc, 0);
    }
    struct mc_hidx_stream_stats hs;
    do {
        mc_hidx_stream_stats(owner->hstream, &hs);
        if (hs.reregistered + hs.rereg_refused + hs.rereg_bad_crc >= N)
            break;
        nanosleep(&ts, NULL);
    } while (mc_now_ms() < deadline);
    int back = 0;
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "new/%d", i);
        tm_fill(v, nlens[i], 9000u + (uint32_t)i);
        assert_int_equal(mc_get(peer, key, out, MAXLEN), (int64_t)nlens[i]);
        assert_memory_equal(out, v, nlens[i]);
        snprintf(key, sizeof(key), "old/%d", i);
        tm_fill(v, lens[i], 100u + (uint32_t)i);
        int64_t got = mc_get(peer, key, out, MAXLEN);
        if (got == MC_ERR_OBJECT_NOT_FOUND)
            continue;
        assert_int_equal(got, (int64_t)lens[i]);
        assert_memory_equal(out, v, lens[i]);
        back++;
    }
    print_message("old objects back: %d of %d (re-registered %llu, refused %llu)\n", back, N,
                  (unsigned long long)hs.reregistered, (unsigned long long)hs.rereg_refused);
    assert_int_equal((uint64_t)back, hs.reregistered);
    free(v);
    free(out);
    mc_client_close(peer);
    mc_client_close(owner);
    tm_stop(&m);
}

/* A holder that dies with the master gets nothing back (its bytes died with it); the one that
 * lives gets all of its objects back. */
static void test_holder_killed_with_master(void **state)
{
    (void)state;
    struct test_master m;
    assert_int_equal(tm_start(&m, 0, NULL), 0);
    uint16_t port = m.port;
    struct mc_client *live = cu_open_client_at(m.addr, 8 * MiB, true);
    struct mc_client *dies = cu_open_client_at(m.addr, 8 * MiB, true);
    struct mc_client *peer = cu_open_client_at(m.addr, 0, true);
    uint8_t v[VLEN];
    char key[32];
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof(key), "%s/%d", i % 2 ? "dies" : "live", i);
        tm_fill(v, VLEN, 300u + (uint32_t)i);
        assert_int_equal(put_on(peer, i % 2 ? dies : live, key, v, VLEN), 0);
    }
    assert_true(wait_entries(live, NKEYS / 2, 10000));
    assert_true(wait_entries(dies, NKEYS / 2, 10000));
    struct timespec ts = {0, 100 * 1000000L};
    nanosleep(&ts, NULL);
    tm_kill(&m);
    mc_client_close(dies); /* gone with the master: its segment's bytes with it */
    assert_int_equal(tm_start(&m, port, NULL), 0);
    uint64_t deadline = mc_now_ms() + 20000;
    struct mc_hidx_stream_stats hs;
    do {
        mc_hidx_stream_stats(live->hstream, &hs);
        if (hs.reregistered + hs.rereg_refused + hs.rereg_bad_crc >= NKEYS / 2)
            break;
        nanosleep(&ts, NULL);
    } while (mc_now_ms() < deadline);
    assert_int_equal(hs.reregistered, NKEYS / 2);
    uint8_t out[VLEN];
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof(key), "%s/%d", i % 2 ? "dies" : "live", i);
        int64_t got = get_settled(peer, key, out, VLEN);
        if (i % 2) {
            assert_int_equal(got, MC_ERR_OBJECT_NOT_FOUND);
            continue;
        }
        tm_fill(v, VLEN, 300u + (uint32_t)i);
        assert_int_equal(got, VLEN);
        assert_memory_equal(out, v, VLEN);
    }
    mc_client_close(peer);
    mc_client_close(live);
    tm_stop(&m);
}

static void test_stream_off(void **state)
{
    (void)state;
    struct test_master m;
    const char *extra[] = {"--holder_stream=false", NULL};
    assert_int_equal(tm_start(&m, 0, extra), 0);
    struct mc_client *owner = cu_open_client_at(m.addr, 8 * MiB, true);
    uint8_t v[VLEN], out[VLEN];
    tm_fill(v, VLEN, 7);
    assert_int_equal(put_on(owner, owner, "off/1", v, VLEN), 0);
    assert_int_equal(mc_get(owner, "off/1", out, VLEN), VLEN);
    assert_memory_equal(out, v, VLEN);
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    assert_int_equal(entries(owner), 0);
    mc_client_close(owner);
    tm_stop(&m);
}

/* ---- a removed key's holder SIGSTOPped past --holder_delete_timeout_ms ------------------ */

#define FKEYS 16

/* The last line of the file at path that contains what (malloc'd), or NULL. */
static char *last_line_with(const char *path, const char *what)
{
    char *text = cu_slurp(path, NULL);
    if (!text)
        return NULL;
    char *found = NULL;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (strstr(line, what)) {
            free(found);
            found = strdup(line);
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    return found;
}

/* Waits up to ms for a line of the log at path containing what and field=value (value a
 * number); returns the number, or -1. */
static long long wait_log_field(const char *path, const char *what, const char *field, int ms)
{
    uint64_t deadline = mc_now_ms() + (uint64_t)ms;
    do {
        char *line = last_line_with(path, what);
        const char *f = line ? strstr(line, field) : NULL;
        if (f) {
            long long v = atoll(f + strlen(field));
            free(line);
            return v;
        }
        free(line);
        cu_sleep_ms(20);
    } while (mc_now_ms() < deadline);
    return -1;
}

static void start_holder(const char *dir, const char *name, const char *master, struct cu_proc *p,
                         char *log, size_t logcap, char *ep, size_t epcap)
{
    char bin[512], master_arg[128];
    const char *bindir = getenv("MC_BIN_DIR");
    snprintf(bin, sizeof(bin), "%s/mooncake_client", bindir ? bindir : ".");
    snprintf(master_arg, sizeof(master_arg), "--master=%s", master);
    snprintf(log, logcap, "%s/%s.log", dir, name);
    const char *argv[] = {
        bin, master_arg, "--segment_size=8MiB", "--host=127.0.0.1", "--log_level=info", NULL};
    assert_int_equal(cu_spawn(p, argv, log), 0);
    struct mc_proc_ready ready;
    if (cu_await_ready(p, MC_PROC_READY_DAEMON, &ready, name, 10000) != 0)
        fail_msg("%s did not get ready: '%s'", name, ready.line);
    snprintf(ep, epcap, "%s", ready.endpoint);
}

static int put_ep(struct mc_client *c, const char *ep, const char *key, const void *v, size_t n)
{
    struct mc_replicate_config rc;
    mc_replicate_config_init(&rc);
    const char *p[1] = {ep};
    rc.preferred_segments = p;
    rc.preferred_segments_count = 1;
    return mc_put(c, key, v, n, &rc);
}

/* A key removed while its holder (a mooncake_client daemon) is SIGSTOPped: the Remove completes
 * once --holder_delete_timeout_ms passes (the holder is fenced); SIGCONT, the holder's next poll
 * is answered REPLICA_IS_GONE and it drops its whole index; the master is SIGKILLed and
 * restarted. Asserted: the removed key never comes back; the fenced holder's other keys, which
 * read back their own bytes before the kill (the master still had them), miss after the
 * restart (their index entries went with the fence: the holder re-registers nothing); a second
 * holder, never stopped, gets all of its keys back byte-equal; new Puts to either holder work. */
static void test_removed_while_holder_stopped(void **state)
{
    (void)state;
    char dir[] = "/tmp/mc-hstop-XXXXXX";
    assert_non_null(mkdtemp(dir));
    static const char *const flags[] = {"--holder_delete_timeout_ms=500", NULL};
    struct test_master m;
    assert_int_equal(tm_start(&m, 0, flags), 0);
    uint16_t port = m.port;
    struct cu_proc fen, live;
    char flog[256], llog[256], fep[300], lep[300];
    start_holder(dir, "fenced", m.addr, &fen, flog, sizeof(flog), fep, sizeof(fep));
    start_holder(dir, "live", m.addr, &live, llog, sizeof(llog), lep, sizeof(lep));
    struct mc_client *peer = cu_open_client_at(m.addr, 0, true);
    uint8_t v[VLEN], out[VLEN];
    char key[32];
    for (int i = 0; i < FKEYS; i++) {
        snprintf(key, sizeof(key), "f/%d", i);
        tm_fill(v, VLEN, 700u + (uint32_t)i);
        assert_int_equal(put_ep(peer, fep, key, v, VLEN), 0);
        snprintf(key, sizeof(key), "l/%d", i);
        tm_fill(v, VLEN, 800u + (uint32_t)i);
        assert_int_equal(put_ep(peer, lep, key, v, VLEN), 0);
    }
    cu_sleep_ms(200); /* past the flush interval: both holders have indexed their commits */

    /* f/0 lives in the fenced holder's segment (what the rest of the case is about) */
    struct mc_object_info qi;
    assert_int_equal(mc_query(peer, "f/0", &qi), 0);
    assert_int_equal(qi.replica_count, 1);
    if (strcmp(qi.replicas[0].endpoint, fep) != 0)
        fail_msg("f/0 was placed at %s, not at the fenced holder %s", qi.replicas[0].endpoint, fep);
    mc_object_info_free(&qi);
    /* f/0 removed while its holder is stopped: answered once the holder is fenced */
    assert_int_equal(cu_freeze(fen.pid), 0); /* every thread stopped, not just signalled */
    uint64_t t0 = mc_now_ms();
    int rrc = mc_remove(peer, "f/0", false);
    uint64_t took = mc_now_ms() - t0;
    assert_int_equal(kill(fen.pid, SIGCONT), 0);
    print_message("Remove with the holder stopped: %s after %llu ms\n", mc_strerror(rrc),
                  (unsigned long long)took);
    assert_int_equal(rrc, 0);
    assert_int_equal(mc_get(peer, "f/0", out, VLEN), MC_ERR_OBJECT_NOT_FOUND);
    /* the holder, resumed, learns of the fence and drops its index */
    long long dropped =
        wait_log_field(flog, "the master fenced this holder's index", "entries_dropped=", 10000);
    if (dropped < 0) {
        cu_dump_log(&fen, "fenced holder");
        fail_msg("the resumed holder never saw the fence");
    }
    print_message("fenced holder dropped %lld index entries\n", dropped);
    /* the master still has the other keys: their own bytes */
    for (int i = 1; i < FKEYS; i++) {
        snprintf(key, sizeof(key), "f/%d", i);
        tm_fill(v, VLEN, 700u + (uint32_t)i);
        memset(out, 0, VLEN);
        assert_int_equal(mc_get(peer, key, out, VLEN), VLEN);
        assert_memory_equal(out, v, VLEN);
    }

    /* no re-registration yet (the first mount has none): the lines awaited below are the
     * restart's */
    char *early = last_line_with(flog, "DRAM replicas re-registered");
    if (!early)
        early = last_line_with(llog, "DRAM replicas re-registered");
    if (early)
        fail_msg("re-registration logged before the restart: %s", early);

    tm_kill(&m);
    assert_int_equal(tm_start(&m, port, flags), 0);
    /* both holders re-mount and re-register: the fenced one nothing, the live one all */
    long long fback = wait_log_field(flog, "DRAM replicas re-registered", "entries=", 20000);
    long long lback = wait_log_field(llog, "DRAM replicas re-registered", "back=", 20000);
    if (fback < 0 || lback < 0) {
        cu_dump_log(&fen, "fenced holder");
        cu_dump_log(&live, "live holder");
        fail_msg("no re-registration logged (fenced %lld, live %lld)", fback, lback);
    }
    assert_int_equal(fback, 0);
    assert_int_equal(lback, FKEYS);
    for (int i = 0; i < FKEYS; i++) {
        snprintf(key, sizeof(key), "f/%d", i);
        assert_int_equal(get_settled(peer, key, out, VLEN), MC_ERR_OBJECT_NOT_FOUND);
        snprintf(key, sizeof(key), "l/%d", i);
        tm_fill(v, VLEN, 800u + (uint32_t)i);
        memset(out, 0, VLEN);
        assert_int_equal(get_settled(peer, key, out, VLEN), VLEN);
        assert_memory_equal(out, v, VLEN);
    }
    /* both take new Puts, read back equal */
    for (int i = 0; i < FKEYS; i++) {
        snprintf(key, sizeof(key), "n/%d", i);
        tm_fill(v, VLEN, 900u + (uint32_t)i);
        assert_int_equal(put_ep(peer, i % 2 ? fep : lep, key, v, VLEN), 0);
    }
    for (int i = 0; i < FKEYS; i++) {
        snprintf(key, sizeof(key), "n/%d", i);
        tm_fill(v, VLEN, 900u + (uint32_t)i);
        memset(out, 0, VLEN);
        assert_int_equal(mc_get(peer, key, out, VLEN), VLEN);
        assert_memory_equal(out, v, VLEN);
    }
    mc_client_close(peer);
    assert_int_equal(cu_stop(&fen, SIGTERM, 5000), 0);
    assert_int_equal(cu_stop(&live, SIGTERM, 5000), 0);
    tm_stop(&m);
    cu_rm_rf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_index_follows_commits),
        cmocka_unit_test(test_stream_off),
        cmocka_unit_test(test_master_restart_keeps_dram),
        cmocka_unit_test(test_rereg_races_puts),
        cmocka_unit_test(test_holder_killed_with_master),
        cmocka_unit_test(test_removed_while_holder_stopped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
