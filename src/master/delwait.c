/*
 * delwait.c - outstanding deletes (see delwait.h).
 *
 * Entries: a doubly linked FIFO in deadline order, plus two chained hash tables of fixed size
 * (by task id for acks, by key hash for tombstones). An operation counts its outstanding entries
 * plus one for itself until it is sealed; whoever brings the count to zero completes it, after
 * dropping the lock.
 */
#include "master/delwait.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "master/lock_order.h"
#include "mooncake/errors.h"

#define NBUCKETS 4096u

struct mc_delop {
    mc_delop_done_fn done;
    void *arg;
    size_t outstanding; /* entries + 1 until sealed */
    int rc;
    struct mc_delop *next_done; /* on a list of operations to complete */
};

struct ent {
    struct ent *prev, *next; /* the FIFO */
    struct ent *next_id, *next_key;
    struct mc_delop *op;
    uint64_t task_id, version, deadline_ms, key_hash;
    uint64_t resend_ms; /* when it is pushed again if still outstanding (0: when in the
                         * horizon of mc_delwait_due_resend) */
    struct mc_id holder;
    uint16_t key_len;
    char key[];
};

struct mc_delwait {
    pthread_mutex_t lock;
    struct ent *head, *tail;
    struct ent *by_id[NBUCKETS];
    struct ent *by_key[NBUCKETS];
    _Atomic size_t n;
};

static void w_lock(struct mc_delwait *w)
{
    mc_lo_acquire(MC_LO_LEAF, 0);
    pthread_mutex_lock(&w->lock);
}

static void w_unlock(struct mc_delwait *w)
{
    pthread_mutex_unlock(&w->lock);
    mc_lo_release(MC_LO_LEAF, 0);
}

static uint32_t id_bucket(uint64_t id)
{
    return (uint32_t)((id * 0x9e3779b97f4a7c15ull) >> 40) & (NBUCKETS - 1);
}

struct mc_delwait *mc_delwait_new(void)
{
    struct mc_delwait *w = calloc(1, sizeof(*w));
    if (w)
        pthread_mutex_init(&w->lock, NULL);
    return w;
}

struct mc_delop *mc_delop_new(mc_delop_done_fn done, void *arg)
{
    struct mc_delop *op = calloc(1, sizeof(*op));
    if (!op)
        return NULL;
    op->done = done;
    op->arg = arg;
    op->outstanding = 1;
    return op;
}

/* Completes and frees every operation of the list (no lock held). */
static void run_done(struct mc_delop *list)
{
    while (list) {
        struct mc_delop *nx = list->next_done;
        if (list->done)
            list->done(list->arg, list->rc);
        free(list);
        list = nx;
    }
}

/* One reference of op goes (lock held); a completed op is appended to *done. */
static void op_put(struct mc_delop *op, struct mc_delop **done)
{
    if (op && --op->outstanding == 0) {
        op->next_done = *done;
        *done = op;
    }
}

static void unlink_chain(struct ent **head, struct ent *e, bool by_id)
{
    for (struct ent **p = head; *p; p = by_id ? &(*p)->next_id : &(*p)->next_key) {
        if (*p == e) {
            *p = by_id ? e->next_id : e->next_key;
            return;
        }
    }
}

/* Removes e (lock held); its op's reference goes to *done. */
static void ent_settle(struct mc_delwait *w, struct ent *e, struct mc_delop **done)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        w->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        w->tail = e->prev;
    unlink_chain(&w->by_id[id_bucket(e->task_id)], e, true);
    unlink_chain(&w->by_key[e->key_hash & (NBUCKETS - 1)], e, false);
    atomic_fetch_sub_explicit(&w->n, 1, memory_order_relaxed);
    op_put(e->op, done);
    free(e);
}

void mc_delwait_free(struct mc_delwait *w)
{
    if (!w)
        return;
    struct mc_delop *done = NULL;
    w_lock(w);
    while (w->head) {
        if (w->head->op)
            w->head->op->rc = MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
        ent_settle(w, w->head, &done);
    }
    w_unlock(w);
    run_done(done);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

int mc_delop_seal(struct mc_delwait *w, struct mc_delop *op, int rc)
{
    w_lock(w);
    if (rc != MC_OK)
        op->rc = rc;
    bool now = --op->outstanding == 0;
    w_unlock(w);
    if (now)
        free(op);
    return now ? 1 : 0;
}

int mc_delwait_add(struct mc_delwait *w, struct mc_delop *op, uint64_t task_id, struct mc_id holder,
                   const char *key, size_t key_len, uint64_t version, uint64_t deadline_ms)
{
    if (key_len > UINT16_MAX)
        return -1;
    struct ent *e = malloc(sizeof(*e) + key_len);
    if (!e)
        return -1;
    memset(e, 0, sizeof(*e));
    e->op = op;
    e->task_id = task_id;
    e->version = version;
    e->deadline_ms = deadline_ms;
    e->holder = holder;
    e->key_len = (uint16_t)key_len;
    e->key_hash = mc_hash_key(key, key_len);
    memcpy(e->key, key, key_len);
    w_lock(w);
    if (op)
        op->outstanding++;
    /* deadlines come from one fixed timeout: appending keeps the FIFO sorted, but a clock that
     * stepped back is walked past */
    struct ent *at = w->tail;
    while (at && at->deadline_ms > deadline_ms)
        at = at->prev;
    e->prev = at;
    e->next = at ? at->next : w->head;
    if (e->next)
        e->next->prev = e;
    else
        w->tail = e;
    if (at)
        at->next = e;
    else
        w->head = e;
    uint32_t bi = id_bucket(task_id), bk = e->key_hash & (NBUCKETS - 1);
    e->next_id = w->by_id[bi];
    w->by_id[bi] = e;
    e->next_key = w->by_key[bk];
    w->by_key[bk] = e;
    atomic_fetch_add_explicit(&w->n, 1, memory_order_relaxed);
    w_unlock(w);
    return 0;
}

void mc_delwait_forget(struct mc_delwait *w, struct mc_id holder, uint64_t task_id)
{
    struct mc_delop *done = NULL;
    w_lock(w);
    struct ent *e = w->by_id[id_bucket(task_id)];
    while (e && !(e->task_id == task_id && mc_id_eq(e->holder, holder)))
        e = e->next_id;
    if (e)
        ent_settle(w, e, &done); /* its op is not sealed: done stays empty */
    w_unlock(w);
    run_done(done);
}

size_t mc_delwait_ack(struct mc_delwait *w, struct mc_id holder, const uint64_t *ids, size_t n)
{
    if (n == 0 || atomic_load_explicit(&w->n, memory_order_relaxed) == 0)
        return 0;
    struct mc_delop *done = NULL;
    size_t settled = 0;
    w_lock(w);
    for (size_t i = 0; i < n; i++) {
        struct ent *e = w->by_id[id_bucket(ids[i])];
        while (e && !(e->task_id == ids[i] && mc_id_eq(e->holder, holder)))
            e = e->next_id;
        if (e) {
            ent_settle(w, e, &done);
            settled++;
        }
    }
    w_unlock(w);
    run_done(done);
    return settled;
}

size_t mc_delwait_overdue(struct mc_delwait *w, uint64_t now_ms, struct mc_delwait_overdue **out)
{
    *out = NULL;
    if (atomic_load_explicit(&w->n, memory_order_relaxed) == 0)
        return 0;
    size_t n = 0, cap = 0;
    struct mc_delwait_overdue *v = NULL;
    w_lock(w);
    for (struct ent *e = w->head; e && e->deadline_ms <= now_ms; e = e->next) {
        bool seen = false;
        for (size_t i = 0; i < n && !seen; i++)
            seen = mc_id_eq(v[i].holder, e->holder);
        if (seen)
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 4;
            struct mc_delwait_overdue *nv = realloc(v, nc * sizeof(*nv));
            if (!nv)
                break; /* the next tick finds the rest */
            v = nv;
            cap = nc;
        }
        v[n++] = (struct mc_delwait_overdue){.holder = e->holder, .version = 0};
    }
    /* every outstanding entry of those holders counts toward their fence */
    for (struct ent *e = w->head; e && n; e = e->next)
        for (size_t i = 0; i < n; i++)
            if (mc_id_eq(v[i].holder, e->holder) && e->version > v[i].version)
                v[i].version = e->version;
    w_unlock(w);
    *out = v;
    return n;
}

uint64_t mc_delwait_holder_version(struct mc_delwait *w, struct mc_id holder)
{
    uint64_t v = 0;
    if (atomic_load_explicit(&w->n, memory_order_relaxed) == 0)
        return 0;
    w_lock(w);
    for (struct ent *e = w->head; e; e = e->next)
        if (mc_id_eq(e->holder, holder) && e->version > v)
            v = e->version;
    w_unlock(w);
    return v;
}

size_t mc_delwait_settle_holder(struct mc_delwait *w, struct mc_id holder, uint64_t version)
{
    if (atomic_load_explicit(&w->n, memory_order_relaxed) == 0)
        return 0;
    struct mc_delop *done = NULL;
    size_t settled = 0;
    w_lock(w);
    for (struct ent *e = w->head, *nx; e; e = nx) {
        nx = e->next;
        if (mc_id_eq(e->holder, holder) && e->version <= version) {
            ent_settle(w, e, &done);
            settled++;
        }
    }
    w_unlock(w);
    run_done(done);
    return settled;
}

size_t mc_delwait_due_resend(struct mc_delwait *w, uint64_t now_ms, uint64_t interval_ms,
                             uint64_t horizon_ms, size_t max, struct mc_delwait_resend **out)
{
    *out = NULL;
    if (atomic_load_explicit(&w->n, memory_order_relaxed) == 0 || max == 0)
        return 0;
    struct mc_delwait_resend *v = NULL;
    size_t n = 0;
    w_lock(w);
    for (struct ent *e = w->head; e && e->deadline_ms <= now_ms + horizon_ms && n < max;
         e = e->next) {
        if (e->task_id == 0)
            continue; /* never pushed: fenced at its deadline */
        /* first due once added + interval (deadline - horizon) passed, then every interval */
        if (e->resend_ms > now_ms)
            continue;
        if (!v && !(v = calloc(max, sizeof(*v))))
            break;
        char *k = malloc(e->key_len ? e->key_len : 1);
        if (!k)
            break;
        memcpy(k, e->key, e->key_len);
        v[n++] = (struct mc_delwait_resend){.task_id = e->task_id,
                                            .version = e->version,
                                            .holder = e->holder,
                                            .key_len = e->key_len,
                                            .key = k};
        e->resend_ms = now_ms + interval_ms;
    }
    w_unlock(w);
    *out = v;
    return n;
}

void mc_delwait_resend_free(struct mc_delwait_resend *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i].key);
    free(v);
}

bool mc_delwait_blocks(struct mc_delwait *w, const char *key, size_t key_len, uint64_t version)
{
    if (atomic_load_explicit(&w->n, memory_order_relaxed) == 0)
        return false;
    uint64_t h = mc_hash_key(key, key_len);
    bool hit = false;
    w_lock(w);
    for (struct ent *e = w->by_key[h & (NBUCKETS - 1)]; e && !hit; e = e->next_key)
        hit = e->key_hash == h && e->key_len == key_len && memcmp(e->key, key, key_len) == 0 &&
              e->version >= version;
    w_unlock(w);
    return hit;
}

size_t mc_delwait_outstanding(struct mc_delwait *w)
{
    return atomic_load_explicit(&w->n, memory_order_relaxed);
}
