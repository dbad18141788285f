/*
 * mailbox.c - the holders' task mailboxes (see mailbox.h).
 *
 * The table is a small array of mailboxes (one per LOCAL_DISK holder: tens, not thousands)
 * under a mutex; each mailbox has its own mutex, taken while the table's is held and kept after
 * the table's is dropped (a close takes the table lock, unlinks the mailbox, then waits for its
 * lock, so nobody can find a mailbox that is being freed). Queued tasks are a FIFO and in-flight
 * ones a list, both doubly linked and intrusive (one malloc per task), and each mailbox indexes
 * its tasks by id (task_index.h), so a report, a cancel or a removal by id costs
 * O(1) however many tasks wait (a promotion cancel per Remove must not walk 50000 of them).
 */
#include "master/mailbox.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "master/lock_order.h"
#include "master/task_index.h"
#include "mooncake/errors.h"

struct mc_waiter {
    mc_mailbox_reply_fn fn; /* NULL: none parked */
    void *arg;
    struct mc_id holder;
    uint32_t max;
    uint64_t deadline_ms;
};

struct mc_mbox {
    struct mc_id id;
    pthread_mutex_t lock;
    struct mc_task *qhead, *qtail; /* queued, oldest first (doubly linked) */
    struct mc_task *fhead;         /* in flight (doubly linked) */
    struct mc_task_index ix;       /* every task of the mailbox by id (task_index.h) */
    uint32_t nqueued[MC_TASK_NKINDS];
    uint32_t nflight[MC_TASK_NKINDS];
    struct mc_waiter w[MC_TASK_NKINDS];
};

struct mc_mailboxes {
    const struct mc_clock *clock;
    _Atomic uint32_t limit[MC_TASK_NKINDS]; /* per mailbox, queued + in flight (0: none) */
    pthread_mutex_t lock;
    struct mc_mbox **v;
    size_t n, cap;
    _Atomic uint32_t nopen; /* n, for mc_mailboxes_any without the lock */
    _Atomic uint64_t next_id;
    _Atomic uint64_t present; /* tasks queued + in flight, all mailboxes */
    _Atomic uint64_t queued, pulled, completed, nacked, expired, cancelled, refused, parked;
    _Atomic uint64_t refused_kind[MC_TASK_NKINDS];
    _Atomic bool wake_due; /* a quiet push queued work a parked poll may be waiting for */
    _Atomic(mc_mailbox_alive_fn) alive; /* NULL: every poll is taken as alive */
    _Atomic uint64_t dead_polls; /* polls dropped (or answered empty) for a closed connection */
    _Atomic uint64_t requeued;   /* tasks put back: a closed connection's, or a re-mount's */
};

/* A reply to make once the locks are dropped. */
struct answer {
    mc_mailbox_reply_fn fn;
    void *arg;
    struct mc_id holder;
    struct mc_task_list tasks;
};

struct answers {
    struct answer *v;
    size_t n, cap;
    struct answer one[MC_TASK_NKINDS]; /* enough for everything but a tick */
};

static int push_task(struct mc_mailboxes *t, struct mc_id holder, enum mc_task_kind kind,
                     const char *key, size_t key_len, uint64_t version, uint64_t size, uint32_t crc,
                     bool crc_valid, uint64_t deadline_ms, uint64_t id, struct mc_mailboxes *ids,
                     const struct mc_task_src *src, uint64_t *task_id, bool quiet);

void mc_task_list_free(struct mc_task_list *l)
{
    struct mc_task *t = l->head;
    while (t) {
        struct mc_task *nx = t->next;
        free(t);
        t = nx;
    }
    l->head = NULL;
    l->n = 0;
}

/* Appends in order; the head's prev points at the tail while the list is built. */
static void list_push(struct mc_task_list *l, struct mc_task *t)
{
    t->next = NULL;
    if (!l->head) {
        l->head = t;
        t->prev = t; /* head->prev: the tail */
    } else {
        struct mc_task *tail = l->head->prev;
        tail->next = t;
        l->head->prev = t;
    }
    l->n++;
}

static struct mc_task *task_copy(const struct mc_task *src)
{
    struct mc_task *t = malloc(sizeof(*t) + src->key_len + 1u);
    if (!t)
        return NULL;
    memcpy(t, src, sizeof(*t) + src->key_len + 1u);
    t->next = t->prev = NULL;
    return t;
}

/* Unlinks x from a doubly-linked list given by its head and, when it keeps one, its tail. */
static void dlist_unlink(struct mc_task **head, struct mc_task **tail, struct mc_task *x)
{
    if (x->prev)
        x->prev->next = x->next;
    else
        *head = x->next;
    if (x->next)
        x->next->prev = x->prev;
    else if (tail)
        *tail = x->prev;
    x->next = x->prev = NULL;
}

/* Unlinks a queued task (its prev/next are the queue's). */
static void queue_unlink(struct mc_mbox *b, struct mc_task *x)
{
    dlist_unlink(&b->qhead, &b->qtail, x);
    b->nqueued[x->kind]--;
}

static void answers_init(struct answers *a)
{
    a->v = a->one;
    a->n = 0;
    a->cap = MC_TASK_NKINDS;
}

/* Adds a reply to make later. Only a tick can need more than the built-in slots; false when
 * growing failed (the tick then leaves that poll parked for the next one). */
static bool answers_add(struct answers *a, const struct mc_waiter *w, struct mc_task_list tasks)
{
    if (a->n == a->cap) {
        size_t cap = a->cap * 2;
        struct answer *nv = malloc(cap * sizeof(*nv));
        if (!nv)
            return false;
        memcpy(nv, a->v, a->n * sizeof(*nv));
        if (a->v != a->one)
            free(a->v);
        a->v = nv;
        a->cap = cap;
    }
    a->v[a->n].fn = w->fn;
    a->v[a->n].arg = w->arg;
    a->v[a->n].holder = w->holder;
    a->v[a->n].tasks = tasks;
    a->n++;
    return true;
}

static void requeue_list(struct mc_mailboxes *t, struct mc_id holder, struct mc_task_list *tasks);

/* Whether w's poll can still be answered (its connection is open). */
static bool poll_alive(const struct mc_mailboxes *t, const struct mc_waiter *w)
{
    mc_mailbox_alive_fn alive = atomic_load_explicit(&t->alive, memory_order_acquire);
    return !alive || alive(w->arg);
}

/* Makes the replies (no lock held). Tasks taken for a poll whose connection closed meanwhile
 * go back to the front of their queue, and the poll gets nothing (its reply only frees it). */
static void answers_run(struct mc_mailboxes *t, struct answers *a)
{
    for (size_t i = 0; i < a->n; i++) {
        struct answer *x = &a->v[i];
        mc_mailbox_alive_fn alive =
            t ? atomic_load_explicit(&t->alive, memory_order_acquire) : NULL;
        if (x->tasks.n && alive && !alive(x->arg)) {
            atomic_fetch_add(&t->dead_polls, 1);
            requeue_list(t, x->holder, &x->tasks);
        }
        x->fn(x->arg, &x->tasks);
    }
    if (a->v != a->one)
        free(a->v);
    a->n = 0;
}

struct mc_mailboxes *mc_mailboxes_new(const struct mc_clock *clock, uint32_t queue_limit)
{
    struct mc_mailboxes *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->clock = clock;
    for (int k = 0; k < MC_TASK_NKINDS; k++)
        atomic_init(&t->limit[k], k == MC_TASK_OFFLOAD ? queue_limit : 0);
    pthread_mutex_init(&t->lock, NULL);
    atomic_init(&t->next_id, 1);
    return t;
}

/* Unlinks every task of b (mailbox lock held or b private): offload/promotion tasks to
 * *cancelled when given, the rest freed; parked polls to *ans (empty). */
static void mbox_drain(struct mc_mailboxes *t, struct mc_mbox *b, struct mc_task_list *cancelled,
                       struct answers *ans)
{
    struct mc_task *lists[2] = {b->qhead, b->fhead};
    for (int l = 0; l < 2; l++) {
        struct mc_task *x = lists[l];
        while (x) {
            struct mc_task *nx = x->next;
            atomic_fetch_sub(&t->present, 1);
            if (cancelled && x->kind != MC_TASK_DELETE) {
                atomic_fetch_add(&t->cancelled, 1);
                list_push(cancelled, x);
            } else {
                free(x);
            }
            x = nx;
        }
    }
    b->qhead = b->qtail = b->fhead = NULL;
    mc_task_index_free(&b->ix);
    memset(b->nqueued, 0, sizeof(b->nqueued));
    memset(b->nflight, 0, sizeof(b->nflight));
    for (int k = 0; k < MC_TASK_NKINDS; k++) {
        if (b->w[k].fn) {
            answers_add(ans, &b->w[k], (struct mc_task_list){0});
            b->w[k].fn = NULL;
            atomic_fetch_sub(&t->parked, 1);
        }
    }
}

void mc_mailboxes_free(struct mc_mailboxes *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        struct answers ans; /* one mailbox has at most one poll per kind: no growth */
        answers_init(&ans);
        mbox_drain(t, t->v[i], NULL, &ans);
        pthread_mutex_destroy(&t->v[i]->lock);
        free(t->v[i]);
        answers_run(t, &ans);
    }
    free(t->v);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static void table_lock(struct mc_mailboxes *t)
{
    mc_lo_acquire(MC_LO_MAILBOX_TABLE, 0);
    pthread_mutex_lock(&t->lock);
}
static void table_unlock(struct mc_mailboxes *t)
{
    pthread_mutex_unlock(&t->lock);
    mc_lo_release(MC_LO_MAILBOX_TABLE, 0);
}
static void mbox_unlock(struct mc_mbox *b)
{
    pthread_mutex_unlock(&b->lock);
    mc_lo_release(MC_LO_MAILBOX, 0);
}

static ssize_t table_find(struct mc_mailboxes *t, struct mc_id id)
{
    for (size_t i = 0; i < t->n; i++)
        if (mc_id_eq(t->v[i]->id, id))
            return (ssize_t)i;
    return -1;
}

/* Finds and locks holder's mailbox (the table lock is dropped before returning). */
static struct mc_mbox *mbox_get(struct mc_mailboxes *t, struct mc_id id)
{
    table_lock(t);
    ssize_t i = table_find(t, id);
    struct mc_mbox *b = NULL;
    if (i >= 0) {
        b = t->v[i];
        mc_lo_acquire(MC_LO_MAILBOX, 0);
        pthread_mutex_lock(&b->lock);
    }
    table_unlock(t);
    return b;
}

int mc_mailbox_open(struct mc_mailboxes *t, struct mc_id holder)
{
    int rc = MC_OK;
    table_lock(t);
    if (table_find(t, holder) >= 0)
        goto out;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8;
        struct mc_mbox **nv = realloc(t->v, cap * sizeof(*nv));
        if (!nv) {
            rc = MC_ERR_INTERNAL_ERROR;
            goto out;
        }
        t->v = nv;
        t->cap = cap;
    }
    struct mc_mbox *b = calloc(1, sizeof(*b));
    if (!b) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    b->id = holder;
    pthread_mutex_init(&b->lock, NULL);
    t->v[t->n++] = b;
    atomic_store_explicit(&t->nopen, (uint32_t)t->n, memory_order_relaxed);
out:
    table_unlock(t);
    return rc;
}

bool mc_mailbox_exists(struct mc_mailboxes *t, struct mc_id holder)
{
    table_lock(t);
    bool found = table_find(t, holder) >= 0;
    table_unlock(t);
    return found;
}

int mc_mailbox_close(struct mc_mailboxes *t, struct mc_id holder, struct mc_task_list *cancelled)
{
    struct answers ans;
    answers_init(&ans);
    table_lock(t);
    ssize_t i = table_find(t, holder);
    if (i < 0) {
        table_unlock(t);
        return MC_ERR_CLIENT_NOT_FOUND;
    }
    struct mc_mbox *b = t->v[i];
    t->v[i] = t->v[--t->n];
    atomic_store_explicit(&t->nopen, (uint32_t)t->n, memory_order_relaxed);
    mc_lo_acquire(MC_LO_MAILBOX, 0);
    pthread_mutex_lock(&b->lock); /* waits for a user that found it before the unlink */
    mbox_drain(t, b, cancelled, &ans);
    mbox_unlock(b);
    table_unlock(t);
    pthread_mutex_destroy(&b->lock);
    free(b);
    answers_run(t, &ans);
    return MC_OK;
}

/* Moves up to max (0: all) queued tasks of kinds into *out (mailbox locked). */
static void mbox_take(struct mc_mailboxes *t, struct mc_mbox *b, uint32_t kinds, uint32_t max,
                      struct mc_task_list *out)
{
    struct mc_task *x = b->qhead;
    while (x && (max == 0 || out->n < max)) {
        struct mc_task *nx = x->next;
        if (!(kinds & MC_TASK_KIND_BIT(x->kind))) {
            x = nx;
            continue;
        }
        struct mc_task *give = x;
        if (x->kind != MC_TASK_DELETE) {
            give = task_copy(x);
            if (!give)
                break; /* stays queued; the next pull retries */
        }
        queue_unlink(b, x);
        if (x->kind == MC_TASK_DELETE) {
            mc_task_index_del(&b->ix, x);
            atomic_fetch_sub(&t->present, 1);
        } else {
            x->prev = NULL;
            x->next = b->fhead;
            if (b->fhead)
                b->fhead->prev = x;
            b->fhead = x;
            x->in_flight = 1;
            b->nflight[x->kind]++;
        }
        atomic_fetch_add(&t->pulled, 1);
        list_push(out, give);
        x = nx;
    }
}

void mc_mailboxes_set_limit(struct mc_mailboxes *t, enum mc_task_kind kind, uint32_t limit)
{
    if ((unsigned)kind < MC_TASK_NKINDS)
        atomic_store(&t->limit[kind], limit);
}

/* The delete rule (DESIGN.md §7): the holder's offload long-poll is also where its deletes go
 * out, ahead of other work. A poll parked for offload tasks is woken by a delete push too, and
 * is answered with the queued deletes alone when there are any (the holder applies and
 * acknowledges them before it starts a batch of offloads). */
static bool has_work(const struct mc_mbox *b, int k)
{
    return b->nqueued[k] > 0 || (k == MC_TASK_OFFLOAD && b->nqueued[MC_TASK_DELETE] > 0);
}

static void take_for(struct mc_mailboxes *t, struct mc_mbox *b, int k, uint32_t max,
                     struct mc_task_list *out)
{
    if (k == MC_TASK_OFFLOAD && b->nqueued[MC_TASK_DELETE] > 0)
        k = MC_TASK_DELETE;
    mbox_take(t, b, MC_TASK_KIND_BIT(k), max, out);
}

/* The parked poll a push of kind answers: its own kind's, else (a delete) the offload poll's. */
static int wake_slot(const struct mc_mbox *b, enum mc_task_kind kind)
{
    if (kind == MC_TASK_DELETE && !b->w[kind].fn)
        return MC_TASK_OFFLOAD;
    return (int)kind;
}

uint64_t mc_mailboxes_reserve_id(struct mc_mailboxes *t)
{
    return atomic_fetch_add(&t->next_id, 1);
}

int mc_mailbox_push_id(struct mc_mailboxes *t, struct mc_id holder, enum mc_task_kind kind,
                       const char *key, size_t key_len, uint64_t version, uint64_t size,
                       uint32_t crc, bool crc_valid, uint64_t deadline_ms, uint64_t task_id)
{
    if (task_id == 0)
        return MC_ERR_INVALID_PARAMS;
    return push_task(t, holder, kind, key, key_len, version, size, crc, crc_valid, deadline_ms,
                     task_id, NULL, NULL, NULL, false);
}

/* Queues a task with id (0: draw one); quiet: a parked poll is only marked for
 * mc_mailboxes_wake, not answered here. */
static int push_task(struct mc_mailboxes *t, struct mc_id holder, enum mc_task_kind kind,
                     const char *key, size_t key_len, uint64_t version, uint64_t size, uint32_t crc,
                     bool crc_valid, uint64_t deadline_ms, uint64_t id, struct mc_mailboxes *ids,
                     const struct mc_task_src *src, uint64_t *task_id, bool quiet)
{
    if ((unsigned)kind >= MC_TASK_NKINDS || !key || key_len == 0 || key_len > UINT16_MAX)
        return MC_ERR_INVALID_PARAMS;
    struct answers ans;
    answers_init(&ans);
    /* The mailbox and its limit first: a push for a holder with no mailbox (a segment whose
     * owner keeps no stream: every erased object of such a segment comes here) or past its
     * limit costs no task allocation. The task is built under the mailbox's lock. */
    struct mc_mbox *b = mbox_get(t, holder);
    if (!b)
        return MC_ERR_CLIENT_NOT_FOUND;
    uint32_t limit = atomic_load_explicit(&t->limit[kind], memory_order_relaxed);
    if (limit && b->nqueued[kind] + b->nflight[kind] >= limit) {
        mbox_unlock(b);
        atomic_fetch_add(&t->refused, 1);
        atomic_fetch_add(&t->refused_kind[kind], 1);
        return MC_ERR_TASK_PENDING_LIMIT_EXCEEDED;
    }
    struct mc_task *x = malloc(sizeof(*x) + key_len + 1u);
    if (!x || mc_task_index_reserve(&b->ix) != 0) {
        mbox_unlock(b);
        free(x);
        return MC_ERR_INTERNAL_ERROR;
    }
    memset(x, 0, sizeof(*x));
    memcpy(x->key, key, key_len);
    x->key[key_len] = '\0';
    x->key_len = (uint16_t)key_len;
    x->kind = (uint8_t)kind;
    x->version = version;
    x->size = size;
    x->crc32c = crc;
    x->crc_valid = crc_valid;
    x->deadline_ms = kind == MC_TASK_DELETE ? 0 : deadline_ms;
    if (src) {
        x->has_src = true;
        x->src = *src;
    }
    x->task_id = id ? id : atomic_fetch_add(&(ids ? ids : t)->next_id, 1);
    if (task_id)
        *task_id = x->task_id;
    x->prev = b->qtail;
    x->next = NULL;
    if (b->qtail)
        b->qtail->next = x;
    else
        b->qhead = x;
    b->qtail = x;
    b->nqueued[kind]++;
    mc_task_index_add(&b->ix, x);
    atomic_fetch_add(&t->present, 1);
    atomic_fetch_add(&t->queued, 1);
    int wk = wake_slot(b, kind);
    if (b->w[wk].fn && quiet) {
        atomic_store(&t->wake_due, true);
    } else if (b->w[wk].fn) {
        struct mc_task_list got = {0};
        if (poll_alive(t, &b->w[wk])) /* else the task stays queued, the poll is dropped */
            take_for(t, b, wk, b->w[wk].max, &got);
        else
            atomic_fetch_add(&t->dead_polls, 1);
        answers_add(&ans, &b->w[wk], got);
        b->w[wk].fn = NULL;
        atomic_fetch_sub(&t->parked, 1);
    }
    mbox_unlock(b);
    answers_run(t, &ans);
    return MC_OK;
}

int mc_mailbox_push(struct mc_mailboxes *t, struct mc_id holder, enum mc_task_kind kind,
                    const char *key, size_t key_len, uint64_t version, uint64_t size, uint32_t crc,
                    bool crc_valid, uint64_t deadline_ms, uint64_t *task_id)
{
    return push_task(t, holder, kind, key, key_len, version, size, crc, crc_valid, deadline_ms, 0,
                     NULL, NULL, task_id, false);
}

int mc_mailbox_push_quiet(struct mc_mailboxes *t, struct mc_id holder, enum mc_task_kind kind,
                          const char *key, size_t key_len, uint64_t version, uint64_t size,
                          uint32_t crc, bool crc_valid, uint64_t deadline_ms,
                          const struct mc_task_src *src, uint64_t *task_id)
{
    return push_task(t, holder, kind, key, key_len, version, size, crc, crc_valid, deadline_ms, 0,
                     NULL, src, task_id, true);
}

int mc_mailbox_push_quiet_id(struct mc_mailboxes *t, struct mc_id holder, enum mc_task_kind kind,
                             const char *key, size_t key_len, uint64_t version, uint64_t size,
                             uint32_t crc, bool crc_valid, uint64_t deadline_ms, uint64_t task_id)
{
    if (task_id == 0)
        return MC_ERR_INVALID_PARAMS;
    return push_task(t, holder, kind, key, key_len, version, size, crc, crc_valid, deadline_ms,
                     task_id, NULL, NULL, NULL, true);
}

int mc_mailbox_push_quiet_from(struct mc_mailboxes *t, struct mc_id holder, enum mc_task_kind kind,
                               const char *key, size_t key_len, uint64_t version,
                               struct mc_mailboxes *ids)
{
    return push_task(t, holder, kind, key, key_len, version, 0, 0, false, 0, 0, ids, NULL, NULL,
                     true);
}

bool mc_mailboxes_any(struct mc_mailboxes *t)
{
    return atomic_load_explicit(&t->nopen, memory_order_relaxed) != 0;
}

int mc_mailbox_pull(struct mc_mailboxes *t, struct mc_id holder, uint32_t kinds, uint32_t max,
                    struct mc_task_list *out)
{
    struct mc_mbox *b = mbox_get(t, holder);
    if (!b)
        return MC_ERR_CLIENT_NOT_FOUND;
    mbox_take(t, b, kinds, max, out);
    mbox_unlock(b);
    return MC_OK;
}

int mc_mailbox_park(struct mc_mailboxes *t, struct mc_id holder, enum mc_task_kind kind,
                    uint32_t max, uint32_t wait_ms, mc_mailbox_reply_fn reply, void *arg)
{
    if ((unsigned)kind >= MC_TASK_NKINDS || !reply)
        return MC_ERR_INVALID_PARAMS;
    struct answers ans;
    answers_init(&ans);
    struct mc_mbox *b = mbox_get(t, holder);
    if (!b)
        return MC_ERR_CLIENT_NOT_FOUND;
    int answered = 1;
    struct mc_waiter me = {.fn = reply, .arg = arg, .max = max, .holder = holder};
    if (has_work(b, kind) || wait_ms == 0) {
        struct mc_task_list got = {0};
        take_for(t, b, kind, max, &got);
        answers_add(&ans, &me, got);
    } else {
        if (b->w[kind].fn) { /* a newer poll replaces the old one, which gets nothing */
            answers_add(&ans, &b->w[kind], (struct mc_task_list){0});
            atomic_fetch_sub(&t->parked, 1);
        }
        me.deadline_ms = mc_clock_now_ms(t->clock) + wait_ms;
        b->w[kind] = me;
        atomic_fetch_add(&t->parked, 1);
        answered = 0;
    }
    mbox_unlock(b);
    answers_run(t, &ans);
    return answered;
}

/* Unlinks an in-flight task (the flight list keeps no tail). */
static void flight_unlink(struct mc_mbox *b, struct mc_task *x)
{
    dlist_unlink(&b->fhead, NULL, x);
    x->in_flight = 0;
    b->nflight[x->kind]--;
}

struct mc_task *mc_mailbox_complete(struct mc_mailboxes *t, struct mc_id holder, uint64_t task_id,
                                    bool nack)
{
    return mc_mailbox_complete_kind(t, holder, task_id, (1u << MC_TASK_NKINDS) - 1u, nack);
}

struct mc_task *mc_mailbox_complete_kind(struct mc_mailboxes *t, struct mc_id holder,
                                         uint64_t task_id, uint32_t kinds, bool nack)
{
    struct mc_mbox *b = mbox_get(t, holder);
    if (!b)
        return NULL;
    struct mc_task *x = mc_task_index_find(&b->ix, task_id);
    if (x && (!x->in_flight || !(kinds & MC_TASK_KIND_BIT(x->kind))))
        x = NULL; /* queued (never pulled), or another module's task: left alone */
    if (x) {
        mc_task_index_del(&b->ix, x);
        flight_unlink(b, x);
        atomic_fetch_sub(&t->present, 1);
        atomic_fetch_add(nack ? &t->nacked : &t->completed, 1);
    }
    mbox_unlock(b);
    return x;
}

/* Whether x is of one of kinds and matches key (or, without one, has a deadline due by now). */
static bool task_match(const struct mc_task *x, uint32_t kinds, const char *key, size_t key_len,
                       uint64_t now_ms)
{
    if (!(kinds & MC_TASK_KIND_BIT(x->kind)))
        return false;
    if (key)
        return x->key_len == key_len && memcmp(x->key, key, key_len) == 0;
    return x->deadline_ms && x->deadline_ms <= now_ms;
}

/* Removes from b's queue (deletes excepted) and flight list every task matching (key or
 * deadline), into *out. */
static size_t mbox_remove_if(struct mc_mailboxes *t, struct mc_mbox *b, uint32_t kinds,
                             const char *key, size_t key_len, uint64_t now_ms,
                             struct mc_task_list *out)
{
    size_t n = 0;
    for (struct mc_task *x = b->qhead, *nx; x; x = nx) {
        nx = x->next;
        if (x->kind == MC_TASK_DELETE || !task_match(x, kinds, key, key_len, now_ms))
            continue;
        mc_task_index_del(&b->ix, x);
        queue_unlink(b, x);
        list_push(out, x);
        n++;
    }
    for (struct mc_task *x = b->fhead, *nx; x; x = nx) {
        nx = x->next;
        if (!task_match(x, kinds, key, key_len, now_ms))
            continue;
        mc_task_index_del(&b->ix, x);
        flight_unlink(b, x);
        x->in_flight = 1; /* handed back marked: it had been pulled (the delete rule) */
        list_push(out, x);
        n++;
    }
    atomic_fetch_sub(&t->present, n);
    return n;
}

#define ALL_KINDS ((1u << MC_TASK_NKINDS) - 1u)

size_t mc_mailboxes_cancel_key(struct mc_mailboxes *t, const char *key, size_t key_len,
                               struct mc_task_list *cancelled)
{
    return mc_mailboxes_cancel_key_kinds(t, ALL_KINDS, key, key_len, cancelled);
}

size_t mc_mailboxes_cancel_key_kinds(struct mc_mailboxes *t, uint32_t kinds, const char *key,
                                     size_t key_len, struct mc_task_list *cancelled)
{
    if (atomic_load_explicit(&t->present, memory_order_acquire) == 0 || !key)
        return 0;
    size_t n = 0;
    table_lock(t);
    for (size_t i = 0; i < t->n; i++) {
        struct mc_mbox *b = t->v[i];
        mc_lo_acquire(MC_LO_MAILBOX, 0);
        pthread_mutex_lock(&b->lock);
        n += mbox_remove_if(t, b, kinds, key, key_len, 0, cancelled);
        mbox_unlock(b);
    }
    table_unlock(t);
    atomic_fetch_add(&t->cancelled, n);
    return n;
}

size_t mc_mailboxes_tick(struct mc_mailboxes *t, struct mc_task_list *expired)
{
    return mc_mailboxes_tick_kinds(t, ALL_KINDS, expired);
}

/* Answers b's parked polls whose deadline passed (now) or, with wake, whose kind has tasks
 * queued (mailbox locked). */
static void mbox_answer_polls(struct mc_mailboxes *t, struct mc_mbox *b, uint64_t now, bool wake,
                              struct answers *ans)
{
    for (int k = 0; k < MC_TASK_NKINDS; k++) {
        struct mc_waiter *w = &b->w[k];
        if (!w->fn)
            continue;
        if (!poll_alive(t, w)) { /* its connection closed: dropped, nothing handed to it */
            if (!answers_add(ans, w, (struct mc_task_list){0}))
                continue;
            atomic_fetch_add(&t->dead_polls, 1);
        } else if (wake && has_work(b, k)) {
            if (!answers_add(ans, w, (struct mc_task_list){0}))
                continue; /* no room to answer now: the next wake or tick does */
            take_for(t, b, k, w->max, &ans->v[ans->n - 1].tasks);
        } else if (w->deadline_ms <= now) {
            if (!answers_add(ans, w, (struct mc_task_list){0}))
                continue;
        } else {
            continue;
        }
        w->fn = NULL;
        atomic_fetch_sub(&t->parked, 1);
    }
}

/* mbox_answer_polls(now, wake) on every mailbox; the answers are sent once no lock is held. */
static void answer_all_polls(struct mc_mailboxes *t, uint64_t now, bool wake)
{
    struct answers ans;
    answers_init(&ans);
    table_lock(t);
    for (size_t i = 0; i < t->n; i++) {
        struct mc_mbox *b = t->v[i];
        mc_lo_acquire(MC_LO_MAILBOX, 0);
        pthread_mutex_lock(&b->lock);
        mbox_answer_polls(t, b, now, wake, &ans);
        mbox_unlock(b);
    }
    table_unlock(t);
    answers_run(t, &ans);
}

void mc_mailboxes_wake(struct mc_mailboxes *t)
{
    if (!atomic_exchange(&t->wake_due, false))
        return;
    answer_all_polls(t, 0, true);
}

void mc_mailboxes_tick_polls(struct mc_mailboxes *t)
{
    answer_all_polls(t, mc_clock_now_ms(t->clock), false);
}

size_t mc_mailboxes_tick_kinds(struct mc_mailboxes *t, uint32_t kinds, struct mc_task_list *expired)
{
    uint64_t now = mc_clock_now_ms(t->clock);
    struct answers ans;
    answers_init(&ans);
    size_t n = 0;
    table_lock(t);
    for (size_t i = 0; i < t->n; i++) {
        struct mc_mbox *b = t->v[i];
        mc_lo_acquire(MC_LO_MAILBOX, 0);
        pthread_mutex_lock(&b->lock);
        n += mbox_remove_if(t, b, kinds, NULL, 0, now, expired);
        for (int k = 0; k < MC_TASK_NKINDS; k++) {
            if (b->w[k].fn && b->w[k].deadline_ms <= now &&
                answers_add(&ans, &b->w[k], (struct mc_task_list){0})) {
                b->w[k].fn = NULL;
                atomic_fetch_sub(&t->parked, 1);
            }
        }
        mbox_unlock(b);
    }
    table_unlock(t);
    atomic_fetch_add(&t->expired, n);
    answers_run(t, &ans);
    return n;
}

void mc_mailboxes_stats(struct mc_mailboxes *t, struct mc_mailbox_stats *st)
{
    st->queued = atomic_load(&t->queued);
    st->pulled = atomic_load(&t->pulled);
    st->completed = atomic_load(&t->completed);
    st->nacked = atomic_load(&t->nacked);
    st->expired = atomic_load(&t->expired);
    st->cancelled = atomic_load(&t->cancelled);
    st->refused = atomic_load(&t->refused);
    for (int k = 0; k < MC_TASK_NKINDS; k++)
        st->refused_kind[k] = atomic_load(&t->refused_kind[k]);
    st->in_mailboxes = atomic_load(&t->present);
    st->parked = atomic_load(&t->parked);
    st->dead_polls = atomic_load(&t->dead_polls);
    st->requeued = atomic_load(&t->requeued);
}

static bool task_is(const struct mc_task *x, uint64_t task_id, const char *key, size_t key_len)
{
    return x->task_id == task_id && x->kind != MC_TASK_DELETE &&
           (!key || (x->key_len == key_len && memcmp(x->key, key, key_len) == 0));
}

struct mc_task *mc_mailbox_remove(struct mc_mailboxes *t, struct mc_id holder, uint64_t task_id,
                                  const char *key, size_t key_len)
{
    struct mc_mbox *b = mbox_get(t, holder);
    if (!b)
        return NULL;
    struct mc_task *x = mc_task_index_find(&b->ix, task_id);
    if (x && !task_is(x, task_id, key, key_len))
        x = NULL;
    if (x) {
        mc_task_index_del(&b->ix, x);
        if (x->in_flight)
            flight_unlink(b, x);
        else
            queue_unlink(b, x);
        atomic_fetch_sub(&t->present, 1);
        atomic_fetch_add(&t->cancelled, 1);
    }
    mbox_unlock(b);
    return x;
}

size_t mc_mailbox_count_kind(struct mc_mailboxes *t, enum mc_task_kind kind)
{
    size_t n = 0;
    if ((unsigned)kind >= MC_TASK_NKINDS)
        return 0;
    table_lock(t);
    for (size_t i = 0; i < t->n; i++) {
        struct mc_mbox *b = t->v[i];
        mc_lo_acquire(MC_LO_MAILBOX, 0);
        pthread_mutex_lock(&b->lock);
        n += b->nqueued[kind] + b->nflight[kind];
        mbox_unlock(b);
    }
    table_unlock(t);
    return n;
}

/* ---- closed connections and re-mounts ------------------------------------------------------ */

void mc_mailboxes_set_alive(struct mc_mailboxes *t, mc_mailbox_alive_fn alive)
{
    atomic_store_explicit(&t->alive, alive, memory_order_release);
}

void mc_mailboxes_drop_dead_polls(struct mc_mailboxes *t)
{
    if (!atomic_load_explicit(&t->alive, memory_order_acquire) || atomic_load(&t->parked) == 0)
        return;
    /* with now 0 and no wake, mbox_answer_polls answers only the polls that are not alive */
    answer_all_polls(t, 0, false);
}

/* Moves in-flight task x back to the front of b's queue (mailbox locked). */
static void flight_to_queue(struct mc_mbox *b, struct mc_task *x)
{
    dlist_unlink(&b->fhead, NULL, x);
    x->in_flight = 0;
    b->nflight[x->kind]--;
    x->prev = NULL;
    x->next = b->qhead;
    if (b->qhead)
        b->qhead->prev = x;
    else
        b->qtail = x;
    b->qhead = x;
    b->nqueued[x->kind]++;
}

/* Puts the tasks of tasks (copies handed out by a take) that are still in flight back at the
 * front of holder's queue, in their order, and frees the list. */
static void requeue_list(struct mc_mailboxes *t, struct mc_id holder, struct mc_task_list *tasks)
{
    struct mc_mbox *b = mbox_get(t, holder);
    size_t n = 0;
    if (b) {
        /* walk back to front so the list's first task ends up first in the queue */
        struct mc_task **v = tasks->n ? malloc(tasks->n * sizeof(*v)) : NULL;
        size_t k = 0;
        for (struct mc_task *c = tasks->head; c && v && k < tasks->n; c = c->next)
            v[k++] = c;
        for (size_t i = k; v && i-- > 0;) {
            struct mc_task *x = mc_task_index_find(&b->ix, v[i]->task_id);
            if (x && x->in_flight) {
                flight_to_queue(b, x);
                n++;
            }
        }
        if (!v) { /* out of memory: any order is still better than losing them */
            for (struct mc_task *c = tasks->head; c; c = c->next) {
                struct mc_task *x = mc_task_index_find(&b->ix, c->task_id);
                if (x && x->in_flight) {
                    flight_to_queue(b, x);
                    n++;
                }
            }
        }
        free(v);
        mbox_unlock(b);
    }
    atomic_fetch_add(&t->requeued, n);
    mc_task_list_free(tasks);
}

size_t mc_mailbox_requeue_in_flight(struct mc_mailboxes *t, struct mc_id holder, uint32_t kinds)
{
    struct answers ans;
    answers_init(&ans);
    struct mc_mbox *b = mbox_get(t, holder);
    if (!b)
        return 0;
    size_t n = 0;
    /* the flight list is newest first: moving each to the queue's front leaves the oldest first */
    for (struct mc_task *x = b->fhead, *nx; x; x = nx) {
        nx = x->next;
        if (!(kinds & MC_TASK_KIND_BIT(x->kind)))
            continue;
        flight_to_queue(b, x);
        n++;
    }
    if (n)
        mbox_answer_polls(t, b, 0, true, &ans);
    mbox_unlock(b);
    atomic_fetch_add(&t->requeued, n);
    answers_run(t, &ans);
    return n;
}
