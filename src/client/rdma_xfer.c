/*
 * rdma_xfer.c - one sliced one-sided transfer on one queue pair (see rdma_internal.h).
 *
 * The transfer owns the connection for its duration. Work request ids are next_wr + slice
 * index, so a completion names its slice whatever order completions arrive in; an id outside
 * this transfer's posted range, or one already completed, is a stray and ignored (counted and
 * logged). Waiting follows the verbs pattern: poll until empty, a few more polls (a short spin:
 * spin_polls), then arm the CQ (req_notify_cq) and poll once more (a completion that arrived before
 * the arm raises no event); then sleep on the completion channel. An event after which the CQ is
 * empty is harmless (counted, re-armed). A remote access error as the first error is
 * REPLICA_IS_GONE: the peer's device refused the rkey or the range, which for a descriptor the
 * master issued means the holder registered its segment afresh (a re-mount) since; every other
 * error is TRANSFER_FAIL.
 */
#include <stdlib.h>
#include <string.h>

#include "client/rdma_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "mooncake/errors.h"

#define POST_BATCH 32
#define POLL_BATCH 32

struct run {
    const struct mc_rdma_ops *ops;
    struct rdma_conn *c;
    const struct rdma_op *op; /* nops of them: slices are numbered across all, in order */
    size_t nops;
    size_t *first; /* nops + 1: op j owns slices first[j] .. first[j+1]-1 */
    size_t cur;    /* the op of the next slice to post */
    size_t bad_op; /* the op whose slice failed first */
    uint32_t slice;
    size_t n;        /* slices */
    size_t posted;   /* slices posted (0..posted-1) */
    size_t inflight; /* posted and not completed */
    uint64_t base;   /* wr_id of slice 0 */
    uint8_t *done;
    bool failed;
    bool refused; /* the first error was the remote refusing the key or the range */
    struct rdma_xfer_stats *st;
};

/* Posts up to `room` slices in one chain. On a post error the slices before `bad` are posted. */
static void post_some(struct run *r, size_t room)
{
    struct ibv_send_wr wr[POST_BATCH];
    struct ibv_sge sge[POST_BATCH];
    size_t k = 0;
    while (k < room && k < POST_BATCH && r->posted + k < r->n) {
        size_t i = r->posted + k;
        while (i >= r->first[r->cur + 1])
            r->cur++;
        const struct rdma_op *op = &r->op[r->cur];
        uint64_t off;
        uint32_t len;
        mc_rdma_slice_at(op->len, r->slice, i - r->first[r->cur], &off, &len);
        sge[k] = (struct ibv_sge){
            .addr = (uint64_t)(uintptr_t)(op->local + off), .length = len, .lkey = op->lkey};
        memset(&wr[k], 0, sizeof(wr[k]));
        wr[k].wr_id = r->base + i;
        wr[k].sg_list = &sge[k];
        wr[k].num_sge = 1;
        wr[k].opcode = op->is_write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
        wr[k].send_flags = IBV_SEND_SIGNALED;
        wr[k].wr.rdma.remote_addr = op->remote + off;
        wr[k].wr.rdma.rkey = op->rkey;
        if (k)
            wr[k - 1].next = &wr[k];
        k++;
    }
    if (k == 0)
        return;
    struct ibv_send_wr *bad = NULL;
    int rc = r->ops->post_send(r->c->id->qp, wr, &bad);
    size_t ok = k;
    if (rc) {
        ok = bad ? (size_t)(bad - wr) : 0;
        if (ok > k)
            ok = k;
        mc_warn("rdma", "post_send failed", "err=%d posted=%zu of %zu slice=%zu", rc, ok, k,
                r->posted + ok);
        r->failed = true;
        r->c->broken = true;
    }
    r->posted += ok;
    r->inflight += ok;
    r->st->posted += ok;
}

static void complete(struct run *r, const struct ibv_wc *wc)
{
    uint64_t idx = wc->wr_id - r->base;
    if (wc->wr_id < r->base || idx >= r->posted || r->done[idx]) {
        r->st->stray++;
        mc_warn("rdma", "completion matches no outstanding request, ignored",
                "wr_id=%llu status=%d", (unsigned long long)wc->wr_id, (int)wc->status);
        return;
    }
    r->inflight--;
    if (wc->status == IBV_WC_SUCCESS) {
        r->done[idx] = 1;
        r->st->completed++;
        return;
    }
    r->done[idx] = 2;
    if (r->failed) {
        r->st->flushed++;
        return;
    }
    r->failed = true;
    r->c->broken = true;
    r->refused = wc->status == IBV_WC_REM_ACCESS_ERR;
    r->st->errors++;
    for (r->bad_op = 0; idx >= r->first[r->bad_op + 1];)
        r->bad_op++;
    char q[64];
    mc_warn("rdma", "work request failed",
            "verbs_status=%s status=%d vendor_err=%u op=%s slice=%llu of %zu",
            mc_log_quote(ibv_wc_status_str(wc->status), q, sizeof(q)), (int)wc->status,
            wc->vendor_err, r->op->is_write ? "write" : "read", (unsigned long long)idx, r->n);
}

int mc_rdma_xfer_run_many(const struct mc_rdma_ops *ops, struct rdma_conn *c,
                          const struct rdma_op *op, size_t nops, uint32_t slice_bytes,
                          uint32_t window, int timeout_ms, struct rdma_xfer_stats *st, int *status)
{
    struct rdma_xfer_stats local_st;
    if (!st)
        st = &local_st;
    memset(&local_st, 0, sizeof(local_st));
    if (window == 0 || window > MC_RDMA_MAX_WR)
        window = MC_RDMA_MAX_WR;
    size_t first_small[9];
    size_t *first = nops < 9 ? first_small : calloc(nops + 1, sizeof(*first));
    if (!first)
        return MC_ERR_INTERNAL_ERROR;
    first[0] = 0;
    for (size_t j = 0; j < nops; j++)
        first[j + 1] = first[j] + (op[j].len ? mc_rdma_slice_count(op[j].len, slice_bytes) : 0);
    struct run r = {.ops = ops,
                    .c = c,
                    .op = op,
                    .nops = nops,
                    .first = first,
                    .slice = slice_bytes,
                    .n = first[nops],
                    .base = c->next_wr,
                    .st = st};
    int rc = 0;
    uint8_t small[256];
    r.done = r.n <= sizeof(small) ? small : calloc(r.n, 1);
    if (!r.done) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    memset(r.done, 0, r.n <= sizeof(small) ? sizeof(small) : r.n);
    c->next_wr += r.n;
    bool event_seen = false; /* the last wait returned an event not yet followed by a completion */
    uint32_t spins = 0;      /* empty polls since the last completion */
    uint64_t quiet_since = mc_now_ms();
    for (;;) {
        if (!r.failed && r.posted < r.n && r.inflight < window)
            post_some(&r, window - r.inflight);
        if (r.inflight == 0 && (r.failed || r.posted == r.n))
            break;
        struct ibv_wc wc[POLL_BATCH];
        int k = ops->poll_cq(c->cq, POLL_BATCH, wc);
        if (k < 0) {
            mc_warn("rdma", "poll_cq failed", "rc=%d", k);
            r.failed = c->broken = true;
            rc = MC_ERR_TRANSFER_FAIL;
            goto out;
        }
        if (k > 0) {
            for (int i = 0; i < k; i++)
                complete(&r, &wc[i]);
            event_seen = false;
            quiet_since = mc_now_ms();
            spins = 0;
            continue;
        }
        if (!c->armed && spins < op[0].spin_polls) {
            spins++; /* spin a little before paying for an interrupt and a wake-up */
            continue;
        }
        if (event_seen) {
            st->empty_events++;
            event_seen = false;
        }
        if (!c->armed) {
            if (ops->req_notify_cq(c->cq, 0)) {
                mc_warn("rdma", "req_notify_cq failed", "%s", "");
                r.failed = c->broken = true;
                rc = MC_ERR_TRANSFER_FAIL;
                goto out;
            }
            c->armed = true;
            continue; /* poll once more: a completion before the arm raises no event */
        }
        uint64_t waited = mc_now_ms() - quiet_since;
        int left = waited >= (uint64_t)timeout_ms ? 0 : timeout_ms - (int)waited;
        struct ibv_cq *ev_cq = NULL;
        int w = left ? ops->wait_cq_event(c->cch, left, &ev_cq) : 0;
        if (w <= 0) {
            mc_warn("rdma", w == 0 ? "no completion in time" : "waiting for a completion failed",
                    "timeout_ms=%d outstanding=%zu posted=%zu of %zu", timeout_ms, r.inflight,
                    r.posted, r.n);
            r.failed = c->broken = true;
            rc = MC_ERR_TRANSFER_FAIL;
            goto out;
        }
        c->armed = false; /* an event consumes the arm */
        event_seen = true;
    }
    rc = !r.failed ? 0 : r.refused ? MC_ERR_REPLICA_IS_GONE : MC_ERR_TRANSFER_FAIL;
out:
    /* an op is done when every slice of it completed; the failed one carries the refusal */
    for (size_t j = 0; status && j < nops; j++) {
        bool ok = r.done != NULL;
        for (size_t i = first[j]; ok && i < first[j + 1]; i++)
            ok = r.done[i] == 1;
        status[j] = ok                            ? 0
                    : rc == MC_ERR_INTERNAL_ERROR ? rc
                    : r.refused && j == r.bad_op  ? MC_ERR_REPLICA_IS_GONE
                                                  : MC_ERR_TRANSFER_FAIL;
    }
    if (r.done && r.done != small)
        free(r.done);
    if (first != first_small)
        free(first);
    return rc;
}

int mc_rdma_xfer_run(const struct mc_rdma_ops *ops, struct rdma_conn *c, const struct rdma_op *op,
                     uint32_t slice_bytes, uint32_t window, int timeout_ms,
                     struct rdma_xfer_stats *st)
{
    if (op->len == 0)
        return 0;
    return mc_rdma_xfer_run_many(ops, c, op, 1, slice_bytes, window, timeout_ms, st, NULL);
}
