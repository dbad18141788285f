/*
 * rpc_server_bodies.c - request bodies of the RPC server, with large ones reused.
 *
 * Why. Every request body is a buffer of its own (a peer write slice is 1 MiB). Freshly
 * malloc'd, such a buffer is a fresh mapping whenever glibc has returned the last one to the
 * kernel (a large block is mmap'd, or the arena's top is trimmed past M_TRIM_THRESHOLD), and
 * then filling it costs a page fault per 4 KiB: measured on the receiving peer, ~2,000 faults
 * per 16 MiB Put, and, depending on the order of earlier allocations, sometimes every 4 MiB Put
 * too, which made Put latency bimodal from one process start to the next. So bodies of
 * POOL_MIN bytes or more go back to a small per-server cache and are handed out again; the
 * cache holds at most POOL_SLOTS buffers and max_bytes in all.
 *
 * Every body has a small header before it naming its pool (NULL: a plain small buffer) and its
 * capacity, so mc_rpcs_body_free works on any thread with the body pointer alone. The pool is
 * reference-counted (the server, plus each pooled-size body out), so a body freed after the
 * server is gone (a late completion) is simply freed.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/rpc_server_internal.h"

#define POOL_MIN (256u << 10)
#define POOL_SLOTS 32
#define CAP_ROUND (64u << 10)
#define HDR 64 /* keeps the body 64-byte aligned relative to malloc's alignment */

struct mc_rpcs_bodies {
    _Atomic long refs;
    _Atomic uint64_t fresh, reused;
    pthread_mutex_t lock;
    bool closed;
    size_t max_bytes, bytes;
    int n;
    uint8_t *slot[POOL_SLOTS]; /* bases (header included) */
};

struct body_hdr {
    struct mc_rpcs_bodies *pool;
    size_t cap; /* bytes after the header */
};

static void pool_unref(struct mc_rpcs_bodies *p)
{
    if (atomic_fetch_sub(&p->refs, 1) == 1) {
        pthread_mutex_destroy(&p->lock);
        free(p);
    }
}

struct mc_rpcs_bodies *mc_rpcs_bodies_new(size_t max_bytes)
{
    struct mc_rpcs_bodies *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    atomic_init(&p->refs, 1);
    pthread_mutex_init(&p->lock, NULL);
    p->max_bytes = max_bytes;
    return p;
}

void mc_rpcs_bodies_release(struct mc_rpcs_bodies *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->closed = true;
    for (int i = 0; i < p->n; i++)
        free(p->slot[i]);
    p->n = 0;
    p->bytes = 0;
    pthread_mutex_unlock(&p->lock);
    pool_unref(p);
}

uint8_t *mc_rpcs_body_alloc(struct mc_rpcs_bodies *p, size_t len)
{
    uint8_t *base = NULL;
    size_t cap = len;
    if (p && len >= POOL_MIN) {
        pthread_mutex_lock(&p->lock);
        int best = -1;
        size_t best_cap = 0;
        for (int i = 0; i < p->n; i++) {
            size_t c = ((struct body_hdr *)p->slot[i])->cap;
            if (c >= len && c / 2 <= len && (best < 0 || c < best_cap)) {
                best = i;
                best_cap = c;
            }
        }
        if (best >= 0) {
            base = p->slot[best];
            p->slot[best] = p->slot[--p->n];
            p->bytes -= best_cap;
            cap = best_cap;
        }
        pthread_mutex_unlock(&p->lock);
        if (!base) {
            cap = (len + CAP_ROUND - 1) / CAP_ROUND * CAP_ROUND;
            base = malloc(HDR + cap);
            if (!base)
                return NULL;
            atomic_fetch_add(&p->fresh, 1);
        } else {
            atomic_fetch_add(&p->reused, 1);
        }
        atomic_fetch_add(&p->refs, 1);
        *(struct body_hdr *)base = (struct body_hdr){p, cap};
        return base + HDR;
    }
    base = malloc(HDR + (len ? len : 1));
    if (!base)
        return NULL;
    *(struct body_hdr *)base = (struct body_hdr){NULL, len};
    return base + HDR;
}

void mc_rpcs_bodies_stats(struct mc_rpcs_bodies *p, uint64_t *fresh, uint64_t *reused)
{
    *fresh = atomic_load(&p->fresh);
    *reused = atomic_load(&p->reused);
}

void mc_rpcs_body_free(uint8_t *body)
{
    if (!body)
        return;
    uint8_t *base = body - HDR;
    struct body_hdr h = *(struct body_hdr *)base;
    if (!h.pool) {
        free(base);
        return;
    }
    struct mc_rpcs_bodies *p = h.pool;
    pthread_mutex_lock(&p->lock);
    if (!p->closed && p->n < POOL_SLOTS && p->bytes + h.cap <= p->max_bytes) {
        p->slot[p->n++] = base;
        p->bytes += h.cap;
        base = NULL;
    }
    pthread_mutex_unlock(&p->lock);
    free(base);
    pool_unref(p);
}
