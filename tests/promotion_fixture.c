/*
 * promotion_fixture.c - the promotion tests' shared fixture. See promotion_fixture.h.
 */
#include "promotion_fixture.h"

void cfg_defaults(struct mc_master_config *c)
{
    mc_master_config_init(c);
    c->manual_ticks = true;
    c->epoch = 5;
    c->default_kv_lease_ttl_ms = TTL_MS;
    c->eviction_threads = 1;
    c->enable_offload = true;
    c->promotion_on_hit = true;
}

/* A master with cfg (clock set here); the holder mounts seg 1 (holder_seg bytes, 0: none), the
 * other client seg 2 (other_seg bytes), and the holder's mailbox is opened. */
struct fx *fx_new_cfg(struct mc_master_config *c, uint64_t holder_seg, uint64_t other_seg)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    mc_fake_clock_init(&f->fc, T0_MS * 1000000ull);
    c->clock = &f->fc.clock;
    assert_int_equal(mc_master_new(c, &f->m), MC_OK);
    f->owner = tm_id(1);
    f->holder = tm_id(2);
    f->other = tm_id(3);
    if (holder_seg) {
        struct mc_segment_desc s = tm_seg(1, holder_seg);
        assert_int_equal(mc_master_mount_segment(f->m, f->holder, &s, NULL), MC_OK);
    }
    if (other_seg) {
        struct mc_segment_desc s = tm_seg(2, other_seg);
        assert_int_equal(mc_master_mount_segment(f->m, f->other, &s, NULL), MC_OK);
    }
    assert_int_equal(
        mc_master_mount_local_disk(f->m, f->holder, "10.0.0.2:17002", 1ull << 30, false), MC_OK);
    return f;
}

struct fx *fx_new(void)
{
    struct mc_master_config c;
    cfg_defaults(&c);
    return fx_new_cfg(&c, 16 * MIB, 16 * MIB);
}

void fx_free(struct fx *f)
{
    assert_int_equal(mc_lo_depth(), 0);
    mc_master_free(f->m);
    free(f);
}

/* Per-test fixtures (cmocka): the default master, or one that admits at the first Get with
 * only the holder's 16 MiB segment; freed by the teardown even when the test fails. */
int fx_setup(void **state)
{
    *state = fx_new();
    return 0;
}

int fx_setup_threshold1(void **state)
{
    struct mc_master_config c;
    cfg_defaults(&c);
    c.promotion_admission_threshold = 1;
    c.promotion_batch_admission_threshold = 1; /* BatchGets of several keys too */
    *state = fx_new_cfg(&c, 16 * MIB, 0);
    return 0;
}

int fx_teardown(void **state)
{
    fx_free(*state);
    return 0;
}

void advance(struct fx *f, uint64_t ms)
{
    mc_fake_clock_advance_ms(&f->fc, ms);
}

const char *key(const char *p, int i)
{
    static _Thread_local char buf[8][64]; /* per thread: the churn test's threads use it */
    static _Thread_local int slot;
    char *b = buf[slot++ & 7];
    snprintf(b, 64, "%s-%04d", p, i);
    return b;
}

void put_n(struct fx *f, const char *k, uint64_t size, uint32_t nrep)
{
    struct mc_master_replicate_config c;
    mc_master_replicate_config_init(&c);
    c.replica_num = nrep;
    struct mc_put_start_result r;
    assert_int_equal(mc_master_put_start(f->m, f->owner, k, strlen(k), size, &c, &r), MC_OK);
    assert_int_equal(r.nreplicas, nrep);
    assert_int_equal(mc_master_put_end(f->m, f->owner, k, strlen(k), r.version, 0x77, true), MC_OK);
}

/* The holder reports its disk copy of k (same version, size, CRC): a LOCAL_DISK replica. */
void add_disk_copy(struct fx *f, const char *k)
{
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, k, strlen(k), &ki), MC_OK);
    struct mc_offload_result it = {.key = k,
                                   .key_len = strlen(k),
                                   .size = ki.size,
                                   .version = ki.version,
                                   .crc32c = ki.crc32c,
                                   .crc_valid = ki.has_crc};
    int rc = -1;
    assert_int_equal(mc_master_notify_offload(f->m, f->holder, &it, 1, true, &rc), MC_OK);
    assert_int_equal(rc, MC_OK);
}

/* k's MEMORY replicas are evicted (k keeps its disk copy). */
void drop_memory(struct fx *f, const char *k)
{
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    struct mc_shard *s;
    struct mc_object *o =
        mc_master_lock_find(f->m, mc_hash_key(k, strlen(k)), k, strlen(k), true, &s);
    assert_non_null(o);
    assert_true(mc_master_evict_memory(f->m, s, o, &fl, NULL) > 0);
    mc_shard_unlock(s);
    mc_freelist_flush(&fl);
}

void disk_only(struct fx *f, const char *k, uint64_t size)
{
    put_n(f, k, size, 1);
    add_disk_copy(f, k);
    drop_memory(f, k);
}

int get(struct fx *f, const char *k, struct mc_get_result *g)
{
    return mc_master_get_replica_list(f->m, k, strlen(k), g);
}

void get_n(struct fx *f, const char *k, int n)
{
    struct mc_get_result g;
    for (int i = 0; i < n; i++)
        assert_int_equal(get(f, k, &g), MC_OK);
}

struct mc_promotion_stats stats(struct fx *f)
{
    struct mc_promotion_stats st;
    mc_master_promotion_stats(f->m, &st);
    return st;
}

/* The funnel invariant and the real state behind in_flight. */
void check_funnel(struct fx *f)
{
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.admitted,
                     st.completed + st.failed + st.expired + st.cancelled + st.in_flight);
    assert_int_equal(st.candidate_recorded,
                     st.candidate_admitted + st.candidate_dropped + st.candidates);
    struct mc_promotion_debug d;
    mc_master_promotion_debug_counts(f->m, &d);
    assert_int_equal(d.in_flight, st.in_flight);
    assert_int_equal(d.tasks, d.in_flight);
    assert_int_equal(d.pins, d.in_flight);
    assert_int_equal(d.mailbox_tasks, d.in_flight);
    assert_true(d.staged <= d.in_flight);
    assert_int_equal(d.parked, st.parked);
    assert_int_equal(mc_lo_depth(), 0);
}

void on_hb(void *arg, struct mc_task_list *tasks)
{
    struct hb *h = arg;
    h->calls++;
    for (struct mc_task *t = tasks->head; t; t = t->next) {
        assert_true(h->n < 64);
        assert_int_equal(t->kind, MC_TASK_PROMOTION);
        h->ids[h->n] = t->task_id;
        h->sizes[h->n] = t->size;
        h->versions[h->n] = t->version;
        snprintf(h->keys[h->n], sizeof(h->keys[h->n]), "%s", t->key);
        h->n++;
    }
    mc_task_list_free(tasks);
}

size_t pull(struct fx *f, uint32_t max, struct hb *h)
{
    memset(h, 0, sizeof(*h));
    assert_int_equal(mc_master_promotion_heartbeat(f->m, f->holder, max, 0, on_hb, h), 1);
    assert_int_equal(h->calls, 1);
    return h->n;
}

int alloc_start(struct fx *f, struct mc_id who, uint64_t id, const char *k, uint64_t size,
                struct mc_replica_desc *d)
{
    return mc_master_promotion_alloc_start(f->m, who, id, k, strlen(k), size, NULL, 0, d);
}

int success(struct fx *f, struct mc_id who, uint64_t id, const char *k)
{
    return mc_master_promotion_success(f->m, who, id, k, strlen(k));
}

int failure(struct fx *f, struct mc_id who, uint64_t id, const char *k)
{
    return mc_master_promotion_failure(f->m, who, id, k, strlen(k), MC_ERR_INTERNAL_ERROR);
}

/* Pull every task, stage and commit each (what the holder's worker does). */
size_t promote_all(struct fx *f)
{
    struct hb h;
    size_t done = 0;
    while (pull(f, 0, &h) > 0) {
        for (size_t i = 0; i < h.n; i++) {
            struct mc_replica_desc d;
            assert_int_equal(alloc_start(f, f->holder, h.ids[i], h.keys[i], h.sizes[i], &d), MC_OK);
            assert_int_equal(success(f, f->holder, h.ids[i], h.keys[i]), MC_OK);
            done++;
        }
    }
    return done;
}

unsigned mem_replicas(struct fx *f, const char *k, unsigned *processing)
{
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, k, strlen(k), &ki), MC_OK);
    unsigned n = 0, p = 0;
    for (uint32_t i = 0; i < ki.nreplicas; i++) {
        if (ki.replicas[i].type != MC_REPLICA_TYPE_MEMORY)
            continue;
        if (ki.replicas[i].status == MC_REPLICA_STATUS_COMPLETE)
            n++;
        else
            p++;
    }
    if (processing)
        *processing = p;
    return n;
}

bool lists_memory(struct fx *f, const char *k)
{
    struct mc_get_result g;
    assert_int_equal(get(f, k, &g), MC_OK);
    for (uint32_t i = 0; i < g.nreplicas; i++)
        if (g.replicas[i].type == MC_REPLICA_TYPE_MEMORY)
            return true;
    return false;
}

uint64_t admit_one(struct fx *f, const char *k)
{
    disk_only(f, k, OBJ);
    get_n(f, k, 2);
    struct hb h;
    assert_int_equal(pull(f, 1, &h), 1);
    assert_string_equal(h.keys[0], k);
    return h.ids[0];
}
