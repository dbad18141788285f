/*
 * lock_order.c - the one thread-local held-lock stack and the violation report of
 * common/lock_order.h (compiled to nothing without MC_LOCK_ORDER_CHECK).
 */
#include "common/lock_order.h"

#ifdef MC_LOCK_ORDER_CHECK

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define MC_LO_MAX_HELD 64

struct mc_lo_held {
    uint32_t level;
    uint32_t idx;
    bool write; /* a shard taken for writing (mc_lo_acquire_write) */
};
struct mc_lo_state {
    uint32_t n;
    struct mc_lo_held held[MC_LO_MAX_HELD];
};

static _Thread_local struct mc_lo_state tls;

static const char *level_name(uint32_t level)
{
    switch (level) {
    case MC_LO_REGISTRY:
        return "client registry";
    case MC_LO_SHARD:
        return "shard";
    case MC_LO_SEGTABLE:
        return "segment table";
    case MC_LO_SEGMENT:
        return "segment allocator";
    case MC_LO_MAILBOX_TABLE:
        return "mailbox table";
    case MC_LO_MAILBOX:
        return "mailbox";
    case MC_LO_LEAF:
        return "leaf lock";
    case MC_LO_DISK_STORE:
        return "disk store";
    case MC_LO_DISK_POOL:
        return "disk ring pool";
    case MC_LO_DISK_FAULTS:
        return "disk fault hook";
    case MC_LO_TCP_PEERS:
        return "tcp peer table";
    case MC_LO_DISK_TIER:
        return "disk tier";
    case MC_LO_PEER_SEGS:
        return "peer segment table";
    case MC_LO_MASTER_LINK:
        return "master link";
    case MC_LO_WORKER:
        return "worker";
    case MC_LO_PROMO_POOL:
        return "promotion pool";
    case MC_LO_RPC_CONNECT:
        return "rpc client connect";
    case MC_LO_RPC_SEND:
        return "rpc client send";
    case MC_LO_RPC:
        return "rpc client";
    case MC_LO_FANOUT:
        return "fanout pool";
    case MC_LO_CLIENT_BUFS:
        return "client buffer list";
    case MC_LO_RDMA_MR:
        return "rdma memory regions";
    case MC_LO_RDMA_LEAF:
        return "rdma transport leaf";
    default:
        return "unknown lock";
    }
}

/* Prints "lock order violation: <what> <lock> while holding <lock>" and aborts. */
__attribute__((noreturn, cold)) static void violation(const char *what, uint32_t level,
                                                      uint32_t idx, const struct mc_lo_held *top)
{
    /* One line, written directly: the logger may itself be the thing that is broken. */
    if (top)
        fprintf(stderr,
                "lock order violation: %s %s[%u] while holding %s[%u] (order: client registry, "
                "shards ascending, segment table, segment allocator, mailbox table, mailbox, "
                "leaf; disk store, disk ring pool, disk fault hook, tcp peer table, disk tier, "
                "peer segment table, master link, worker, promotion pool, client buffer list; rpc "
                "client connect, rpc client send, rpc client, fanout pool, rdma memory "
                "regions, rdma transport leaf)\n",
                what, level_name(level), idx, level_name(top->level), top->idx);
    else
        fprintf(stderr, "lock order violation: %s %s[%u] while holding nothing\n", what,
                level_name(level), idx);
    fflush(stderr);
    abort();
}

void mc_lo_acquire(enum mc_lo_level level, uint32_t idx)
{
    if (tls.n) {
        const struct mc_lo_held *top = &tls.held[tls.n - 1];
        bool ok = top->level < (uint32_t)level ||
                  (top->level == MC_LO_SHARD && level == MC_LO_SHARD && top->idx < idx);
        if (!ok)
            violation("acquiring", level, idx, top);
        if (tls.n == MC_LO_MAX_HELD)
            violation("too many locks held, acquiring", level, idx, top);
    }
    tls.held[tls.n].level = level;
    tls.held[tls.n].idx = idx;
    tls.held[tls.n].write = false;
    tls.n++;
}

void mc_lo_acquire_write(enum mc_lo_level level, uint32_t idx)
{
    mc_lo_acquire(level, idx);
    tls.held[tls.n - 1].write = true;
}

bool mc_lo_holds(enum mc_lo_level level, uint32_t idx, bool write)
{
    for (uint32_t i = tls.n; i-- > 0;)
        if (tls.held[i].level == (uint32_t)level && tls.held[i].idx == idx)
            return !write || tls.held[i].write;
    return false;
}

void mc_lo_release(enum mc_lo_level level, uint32_t idx)
{
    for (uint32_t i = tls.n; i-- > 0;) {
        if (tls.held[i].level == (uint32_t)level && tls.held[i].idx == idx) {
            for (uint32_t j = i + 1; j < tls.n; j++)
                tls.held[j - 1] = tls.held[j];
            tls.n--;
            return;
        }
    }
    violation("releasing (not held)", level, idx, tls.n ? &tls.held[tls.n - 1] : NULL);
}

uint32_t mc_lo_depth(void)
{
    return tls.n;
}

#else

/* ISO C wants at least one declaration in a translation unit. */
typedef int mc_lock_order_unused;

#endif
