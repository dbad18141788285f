/*
 * bench_master.c - `mooncake_bench master`: metadata operations per second against a running
 * mooncake_master (DESIGN.md §12), the number compared with redis-benchmark GET.
 *
 * Set-up (blocking rpc_client): check the version, register a random client id and mount one
 * segment with a fake base address (the master never touches segment bytes, so no memory is
 * reserved), and with --prefill create --keys objects "key:%012u" (the key shape
 * redis-benchmark -r uses) of --value_size bytes with BatchPutStart/BatchPutEnd. A pinger keeps
 * the client alive while the bench runs (start the master with a long --client_ttl if separate
 * invocations must share one prefill).
 *
 * Load: --threads event loops (io_uring, or epoll with --io=epoll or --depth > 1), each driving
 * its share of --conns raw connections that each keep --depth requests in flight (default 1,
 * like redis-benchmark without -P). Requests
 * pick uniformly random keys among the --keys prefilled ones:
 *   get        GetReplicaList(key)                       one object per call
 *   exist      ExistKey(key)                             one object per call
 *   batch_get  BatchGetReplicaList(--batch keys)         --batch objects per call
 *   put        PutStart(new key) then PutEnd             one object per two calls
 *   remove     Remove(key), one call at a time            one object per call
 *   batch_remove BatchRemove(--batch keys), one at a time --batch objects per call
 * remove and batch_remove run on one blocking connection (the latency of a Remove is what they
 * measure): --keys objects are prefilled, removed, prefilled again for each run. With
 * --disk_holder (the master started with --enable_offload alone) the bench's client also mounts
 * a LOCAL_DISK segment and a holder thread plays its part: it reports every offload task stored
 * (no bytes move: the segment is fake) and acknowledges every delete at once on its next
 * heartbeat, so each object has a LOCAL_DISK copy before it is removed and each Remove waits
 * for the holder's round trip (the delete rule). The holder writes nothing: the figures are the
 * protocol's cost, without the holder's dead-mark write.
 * The fake segment answers the DRAM holder stream too (bench_master_hstream.c).
 * Bodies and keys are written by hand (bench_master_enc.c: the generated packer's bytes without
 * its descriptor walk, and no snprintf), or with --encode=pb by snprintf and protobuf-c;
 * every response's frame status is checked and one response in 64 is decoded fully (per-key
 * statuses, replica count). Any failure is counted and reported; the run fails if there are any.
 *
 * The set-up (client, mount, prefill, pinger, the bytes-per-object sample) is in
 * bench_master_setup.c, the remove ops and their holder thread in bench_master_remove.c; what the
 * files share is in bench_master.h.
 *
 * The client and its segment are named by --bench_id (default mooncake_bench): a second
 * invocation with the same id mounts the same segment again (the master answers "the same
 * mount"), so runs against one master share one 1 TiB fake segment instead of adding one each.
 * A Get of a key not found (evicted or removed since the prefill) is a miss: counted apart
 * (misses), not a failure, and not in ops_per_s. --probe_hz=N adds an open-loop probe
 * (bench_master_probe.c): N GetReplicaList calls per second on a fixed schedule on a connection
 * of their own, latency from the scheduled time (probe_p99_ms, probe_max_ms).
 *
 * Output: one JSON line per op (bench_util.h) with ops_per_s = objects per second (for
 * batch_get, keys/s, comparable with pipelined redis GETs/s), median over --runs of --seconds
 * each, p50/p99 call latency, and the extras op, conns, batch, depth, keys, calls_per_s and
 * bytes_per_object (response bytes per object of one sample call: what redis-benchmark -d
 * should be set to for a like-for-like reply size).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#include "common/clock.h"
#include "common/id.h"
#include "common/log.h"
#include "common/rpc_client.h"
#include "common/service_ready.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "tools/bench_master.h"
#include "tools/bench_master_enc.h"
#include "tools/bench_util.h"

#define MAX_DEPTH 64
#define MAX_SAMPLES (1u << 20)

/* --segment_bytes: the fake segment's size (default 1 TiB: nothing is ever evicted) */
static uint64_t g_segment_bytes = SEG_SIZE;
/* --encode=hand (default): bodies and keys written by bench_master_enc.c; --encode=pb: keys by
 * snprintf and bodies by the generated protobuf-c packer (the classic path, kept for A/B runs) */
static int g_encode_pb;
/* --io=uring (default): each event loop is an io_uring whose one io_uring_enter submits the round's
 * sends and re-armed recvs and reaps their completions; --io=epoll: the classic loop (edge-
 * triggered epoll, a recv and a send syscall per call), kept for A/B runs and --depth > 1 */
static int g_io_epoll;

const char *const mc_bm_op_names[] = {"get", "exist", "batch_get", "put", "remove", "batch_remove"};

/* ---- load: raw connections on an epoll loop ---------------------------------------------------
 */

struct conn {
    int fd;
    uint8_t *out;
    size_t out_len, out_off, out_cap;
    uint8_t *in;
    size_t in_len, in_cap;
    int inflight;
    uint64_t next_id;
    uint64_t sent_ns[MAX_DEPTH];
    unsigned put_seq; /* put: objects started on this connection */
    int idx;
};

struct loop {
    struct shared *sh;
    struct conn *conns;
    int nconns;
    int first_conn;
    uint64_t rng;
    /* results of the current run */
    uint64_t objects, calls, errors, decoded, misses, refused;
    double *lat_ms;
    size_t nlat;
    pthread_t th;
};

static int out_reserve(struct conn *c, size_t n)
{
    if (c->out_len + n <= c->out_cap)
        return 0;
    size_t cap = c->out_cap ? c->out_cap : 4096;
    while (cap < c->out_len + n)
        cap *= 2;
    uint8_t *p = realloc(c->out, cap);
    if (!p)
        return -1;
    c->out = p;
    c->out_cap = cap;
    return 0;
}

/* Writes the header of the body of `len` bytes at hdr + MC_WIRE_HEADER_SIZE and counts the
 * request as sent. */
static int finish_request(struct conn *c, uint16_t method, uint8_t *hdr, size_t len)
{
    struct mc_wire_header h;
    uint64_t id = c->next_id++;
    mc_wire_header_init(&h, MC_WIRE_REQUEST, method, id, 0, (uint32_t)len);
    mc_wire_encode_header(&h, hdr);
    c->out_len += MC_WIRE_HEADER_SIZE + len;
    c->sent_ns[id % MAX_DEPTH] = mc_now_ns();
    c->inflight++;
    return 0;
}

/* --encode=pb: appends msg packed by the generated protobuf-c code as a request frame. */
static int append_packed(struct conn *c, uint16_t method, const ProtobufCMessage *msg)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    if (out_reserve(c, MC_WIRE_HEADER_SIZE + len) != 0)
        return -1;
    uint8_t *hdr = c->out + c->out_len;
    protobuf_c_message_pack(msg, hdr + MC_WIRE_HEADER_SIZE);
    return finish_request(c, method, hdr, len);
}

/* Appends a frame asking for `count` random keys: GetReplicaList / ExistKey (one key) or
 * BatchGetReplicaList, packed by the generated protobuf-c code. */
static int append_key_request(struct loop *l, struct conn *c, uint16_t method, int count)
{
    const struct opts *o = l->sh->o;
    static _Thread_local char keybuf[MAX_BATCH][24]; /* one loop per thread */
    static _Thread_local char *keys[MAX_BATCH];
    if (count < 1 || count > MAX_BATCH)
        return -1;
    if (!g_encode_pb) {
        static _Thread_local size_t lens[MAX_BATCH];
        for (int i = 0; i < count; i++) {
            memcpy(keybuf[i], "key:", 4);
            lens[i] = 4 + mc_bm_enc_u64_dec((uint8_t *)keybuf[i] + 4,
                                            (unsigned)(mc_bench_rand(&l->rng) % o->keys), 12);
            keys[i] = keybuf[i];
        }
        size_t room = 0;
        for (int i = 0; i < count; i++)
            room += lens[i] + MC_BM_ENC_FIELD_OVERHEAD;
        if (out_reserve(c, MC_WIRE_HEADER_SIZE + room) != 0)
            return -1;
        uint8_t *hdr = c->out + c->out_len;
        size_t len = mc_bm_enc_keys(hdr + MC_WIRE_HEADER_SIZE, (const char *const *)keys, lens,
                                    (size_t)count);
        return finish_request(c, method, hdr, len);
    }
    for (int i = 0; i < count; i++) {
        snprintf(keybuf[i], sizeof(keybuf[i]), KEY_FMT,
                 (unsigned)(mc_bench_rand(&l->rng) % o->keys));
        keys[i] = keybuf[i];
    }
    Mc__GetReplicaListRequest g = MC__GET_REPLICA_LIST_REQUEST__INIT;
    Mc__ExistKeyRequest e = MC__EXIST_KEY_REQUEST__INIT;
    Mc__BatchGetReplicaListRequest bg = MC__BATCH_GET_REPLICA_LIST_REQUEST__INIT;
    ProtobufCMessage *msg;
    if (method == MC_METHOD_GET_REPLICA_LIST) {
        g.key = keys[0];
        msg = &g.base;
    } else if (method == MC_METHOD_EXIST_KEY) {
        e.key = keys[0];
        msg = &e.base;
    } else {
        bg.n_keys = (size_t)count;
        bg.keys = keys;
        msg = &bg.base;
    }
    return append_packed(c, method, msg);
}

/* Put: PutStart (phase 0) or PutEnd (phase 1) of this connection's current key. */
static int append_put_request(struct loop *l, struct conn *c, int end)
{
    char key[64];
    uint16_t method = end ? MC_METHOD_PUT_END : MC_METHOD_PUT_START;
    if (!g_encode_pb) {
        uint8_t *k = (uint8_t *)key;
        size_t kl = 0;
        memcpy(k, "put:", 4);
        kl = 4 + mc_bm_enc_u64_dec(k + 4, (unsigned)l->sh->pid, 0);
        k[kl++] = ':';
        kl += mc_bm_enc_u64_dec(k + kl, l->sh->run_no, 0);
        k[kl++] = ':';
        kl += mc_bm_enc_u64_dec(k + kl, (unsigned)c->idx, 0);
        k[kl++] = ':';
        kl += mc_bm_enc_u64_dec(k + kl, c->put_seq, 0);
        if (out_reserve(c, MC_WIRE_HEADER_SIZE + kl + MC_BM_ENC_PUT_OVERHEAD) != 0)
            return -1;
        uint8_t *hdr = c->out + c->out_len;
        size_t len = mc_bm_enc_put(hdr + MC_WIRE_HEADER_SIZE, end, l->sh->client.hi,
                                   l->sh->client.lo, key, kl, l->sh->o->value_size);
        return finish_request(c, method, hdr, len);
    }
    snprintf(key, sizeof(key), "put:%d:%u:%d:%u", l->sh->pid, l->sh->run_no, c->idx, c->put_seq);
    Mc__Uuid cu = MC__UUID__INIT;
    cu.hi = l->sh->client.hi;
    cu.lo = l->sh->client.lo;
    ProtobufCMessage *msg;
    Mc__PutStartRequest ps = MC__PUT_START_REQUEST__INIT;
    Mc__PutEndRequest pe = MC__PUT_END_REQUEST__INIT;
    if (!end) {
        ps.client_id = &cu;
        ps.key = key;
        ps.value_length = l->sh->o->value_size;
        msg = &ps.base;
    } else {
        pe.client_id = &cu;
        pe.key = key;
        msg = &pe.base;
    }
    return append_packed(c, method, msg);
}

static int issue(struct loop *l, struct conn *c, int put_end)
{
    const struct opts *o = l->sh->o;
    switch (o->op) {
    case OP_GET:
        return append_key_request(l, c, MC_METHOD_GET_REPLICA_LIST, 1);
    case OP_EXIST:
        return append_key_request(l, c, MC_METHOD_EXIST_KEY, 1);
    case OP_BATCH_GET:
        return append_key_request(l, c, MC_METHOD_BATCH_GET_REPLICA_LIST, o->batch);
    case OP_PUT:
        return append_put_request(l, c, put_end);
    case OP_REMOVE:
    case OP_BATCH_REMOVE:
        break; /* run_remove: not on the event loops */
    }
    return -1;
}

static int flush(struct conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0)
            return -1;
        c->out_off += (size_t)n;
    }
    c->out_off = c->out_len = 0;
    return 0;
}

/* Full check of a sampled response body. Returns the number of failed objects in it; keys not
 * found (evicted or removed since the prefill) are counted in *miss instead. */
static uint64_t check_body(const struct opts *o, uint16_t method, const uint8_t *b, size_t n,
                           uint64_t *miss)
{
    uint64_t bad = 0;
    if (method == MC_METHOD_GET_REPLICA_LIST) {
        Mc__GetReplicaListResponse *r = mc__get_replica_list_response__unpack(NULL, n, b);
        bad = !r || r->n_replicas < 1 || r->size != o->value_size;
        if (r)
            mc__get_replica_list_response__free_unpacked(r, NULL);
    } else if (method == MC_METHOD_BATCH_GET_REPLICA_LIST) {
        Mc__BatchGetReplicaListResponse *r =
            mc__batch_get_replica_list_response__unpack(NULL, n, b);
        if (!r || r->n_results != (size_t)o->batch) {
            bad = (uint64_t)o->batch;
        } else {
            for (size_t i = 0; i < r->n_results; i++) {
                if (r->results[i]->status == MC_ERR_OBJECT_NOT_FOUND)
                    (*miss)++;
                else
                    bad += r->results[i]->status != 0 || r->results[i]->n_replicas < 1;
            }
        }
        if (r)
            mc__batch_get_replica_list_response__free_unpacked(r, NULL);
    } else if (method == MC_METHOD_EXIST_KEY) {
        Mc__ExistKeyResponse *r = mc__exist_key_response__unpack(NULL, n, b);
        bad = !r;
        *miss += r && !r->exists;
        if (r)
            mc__exist_key_response__free_unpacked(r, NULL);
    }
    return bad;
}

/* Handles every complete frame in c->in; issues follow-up requests. */
static int drain_frames(struct loop *l, struct conn *c)
{
    const struct opts *o = l->sh->o;
    size_t off = 0;
    int measuring = atomic_load_explicit(&l->sh->measuring, memory_order_relaxed);
    int stopping = atomic_load_explicit(&l->sh->stop, memory_order_relaxed);
    while (c->in_len - off >= MC_WIRE_HEADER_SIZE) {
        struct mc_wire_header h;
        mc_wire_decode_header(c->in + off, &h);
        if (h.magic != MC_WIRE_MAGIC || h.kind != MC_WIRE_RESPONSE)
            return -1;
        if (c->in_len - off < MC_WIRE_HEADER_SIZE + (size_t)h.body_length)
            break;
        const uint8_t *body = c->in + off + MC_WIRE_HEADER_SIZE;
        uint64_t now = mc_now_ns();
        c->inflight--;
        int put_end_next = 0;
        uint64_t objs = 0, bad = 0, miss = 0;
        if (h.status == MC_ERR_OBJECT_NOT_FOUND && o->op != OP_PUT) {
            miss = 1; /* a key evicted or removed since the prefill: served, counted apart */
        } else if (h.status == MC_ERR_NO_AVAILABLE_HANDLE && o->op == OP_PUT) {
            l->refused += measuring; /* no space yet: eviction's to make; counted apart */
        } else if (h.status != 0) {
            bad = o->op == OP_BATCH_GET ? (uint64_t)o->batch : 1;
        } else if (o->op == OP_PUT) {
            if (h.method == MC_METHOD_PUT_START) {
                put_end_next = 1;
            } else {
                objs = 1;
                c->put_seq++;
            }
        } else {
            objs = o->op == OP_BATCH_GET ? (uint64_t)o->batch : 1;
            if ((h.request_id & 63) == 0) {
                bad = check_body(o, h.method, body, h.body_length, &miss);
                l->decoded++;
            }
        }
        if (measuring) {
            l->calls++;
            l->objects += objs >= bad ? objs - bad : 0;
            l->errors += bad;
            l->misses += miss;
            if (l->nlat < MAX_SAMPLES)
                l->lat_ms[l->nlat++] = (double)(now - c->sent_ns[h.request_id % MAX_DEPTH]) / 1e6;
        }
        if (h.status != 0 && o->op == OP_PUT && h.method == MC_METHOD_PUT_START)
            c->put_seq++; /* skip the key */
        off += MC_WIRE_HEADER_SIZE + h.body_length;
        if (!stopping && issue(l, c, put_end_next) != 0)
            return -1;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    return 0;
}

/* Room for at least 16 KiB more input in c's buffer (doubled as it fills); -1 without memory. */
static int in_room(struct conn *c)
{
    if (c->in_cap - c->in_len >= 16384)
        return 0;
    size_t cap = c->in_cap ? c->in_cap * 2 : 65536;
    uint8_t *p = realloc(c->in, cap);
    if (!p)
        return -1;
    c->in = p;
    c->in_cap = cap;
    return 0;
}

static int on_readable(struct loop *l, struct conn *c)
{
    for (;;) {
        if (in_room(c) != 0)
            return -1;
        size_t want = c->in_cap - c->in_len;
        ssize_t n = recv(c->fd, c->in + c->in_len, want, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0)
            return -1;
        c->in_len += (size_t)n;
        if (drain_frames(l, c) != 0 || flush(c) != 0)
            return -1;
        /* A short read took all the socket had (a stream socket, epoll edge-triggered: bytes
         * that arrive later raise a new edge), so reading again would only say EAGAIN: one
         * wasted syscall per reply, a third of the load generator's syscalls per call. */
        if ((size_t)n < want)
            return 0;
    }
}

static int tcp_connect(const struct opts *o)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(o->port)};
    if (inet_pton(AF_INET, o->host, &sa.sin_addr) != 1 ||
        connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static void *loop_uring(struct loop *l);

static void *loop_main(void *arg)
{
    struct loop *l = arg;
    const struct opts *o = l->sh->o;
    if (!g_io_epoll)
        return loop_uring(l);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        goto fail;
    for (int i = 0; i < l->nconns; i++) {
        struct conn *c = &l->conns[i];
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
            goto fail;
        for (int d = 0; d < o->depth; d++)
            if (issue(l, c, 0) != 0)
                goto fail;
        if (flush(c) != 0)
            goto fail;
    }
    struct epoll_event evs[64];
    for (;;) {
        int stopping = atomic_load(&l->sh->stop);
        int busy = 0;
        for (int i = 0; i < l->nconns; i++)
            busy |= l->conns[i].inflight > 0;
        if (stopping && !busy)
            break;
        int n = epoll_wait(ep, evs, 64, 100);
        if (n < 0 && errno != EINTR)
            goto fail;
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if ((evs[i].events & EPOLLOUT) && flush(c) != 0)
                goto fail;
            if ((evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && on_readable(l, c) != 0)
                goto fail;
        }
    }
    close(ep);
    return NULL;
fail:
    if (ep >= 0)
        close(ep);
    fprintf(stderr, "bench master: a connection failed (errno %d)\n", errno);
    l->errors += 1;
    return (void *)1;
}

/* ---- load on an io_uring ---------------------------------------------------------------------
 * One recv stays armed per connection (into the free tail of c->in) and one send is in flight
 * while c->out holds unsent bytes; a completion's frames are handled as on the epoll loop, and
 * the requests they issue are sent by the next io_uring_submit_and_wait, together with every
 * other connection's sends and recvs of the round. --depth 1 only: c->out is not appended to
 * (nor moved by a realloc) while its send is in flight. */

#define UR_RECV 1ull
#define UR_SEND 2ull
#define UR_RING_FLAGS (IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN)

/* Whether a ring of the loop's kind can be made here (the JSON's "io" names the loop that ran). */
static bool ur_available(void)
{
    struct io_uring ring;
    struct io_uring_params p = {.flags = UR_RING_FLAGS};
    if (io_uring_queue_init_params(4, &ring, &p) < 0)
        return false;
    io_uring_queue_exit(&ring);
    return true;
}

/* Cancels and reaps every request still armed (*armed) before the ring and the buffers go: a
 * recv armed into c->in must not outlive it. Gives up (logged) after a second without one. */
static void ur_quiesce(struct io_uring *r, int *armed)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(r);
    if (sqe) {
        io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
        io_uring_sqe_set_data64(sqe, 0); /* low bits 0: neither a recv nor a send */
    }
    (void)io_uring_submit(r);
    while (*armed > 0) {
        struct io_uring_cqe *cqe;
        struct __kernel_timespec ts = {.tv_sec = 1};
        int ret = io_uring_wait_cqe_timeout(r, &cqe, &ts);
        if (ret == -EINTR)
            continue;
        if (ret < 0) {
            fprintf(stderr, "bench master: %d io_uring requests not reaped (errno %d)\n", *armed,
                    -ret);
            return;
        }
        if (io_uring_cqe_get_data64(cqe) & 3)
            (*armed)--;
        io_uring_cqe_seen(r, cqe);
    }
}

static int ur_arm_recv(struct io_uring *r, struct conn *c, int i, int *armed)
{
    if (in_room(c) != 0)
        return -1;
    struct io_uring_sqe *sqe = io_uring_get_sqe(r);
    if (!sqe)
        return -1;
    io_uring_prep_recv(sqe, c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    /* armed right after a reply, before the next request is sent: no reply can be there yet, so
     * the inline attempt would only say EAGAIN; wait for readiness first */
    sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
    io_uring_sqe_set_data64(sqe, (uint64_t)i << 2 | UR_RECV);
    (*armed)++;
    return 0;
}

static int ur_arm_send(struct io_uring *r, struct conn *c, int i, int *armed)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(r);
    if (!sqe)
        return -1;
    io_uring_prep_send(sqe, c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, (uint64_t)i << 2 | UR_SEND);
    (*armed)++;
    return 0;
}

static void *loop_uring(struct loop *l)
{
    struct io_uring ring;
    /* the completions' task work runs when this thread waits, not in the master's sends */
    struct io_uring_params p = {.flags = UR_RING_FLAGS};
    int armed = 0;     /* recvs and sends submitted or queued, not yet reaped */
    unsigned seen = 0; /* completions of the current batch handled, not yet advanced past */
    int ret = io_uring_queue_init_params((unsigned)(4 * l->nconns), &ring, &p);
    if (ret < 0) { /* e.g. a kernel before 6.1 (DEFER_TASKRUN) or io_uring disabled */
        fprintf(stderr, "bench master: no io_uring (errno %d); --io=epoll runs without one\n",
                -ret);
        errno = -ret;
        goto fail_noring;
    }
    for (int i = 0; i < l->nconns; i++) {
        struct conn *c = &l->conns[i];
        if (issue(l, c, 0) != 0 || ur_arm_send(&ring, c, i, &armed) != 0 ||
            ur_arm_recv(&ring, c, i, &armed) != 0)
            goto fail;
    }
    for (;;) {
        int stopping = atomic_load_explicit(&l->sh->stop, memory_order_relaxed);
        int busy = 0;
        for (int i = 0; i < l->nconns; i++)
            busy |= l->conns[i].inflight > 0;
        if (stopping && !busy)
            break;
        ret = io_uring_submit_and_wait(&ring, 1);
        if (ret < 0 && ret != -EINTR && ret != -ETIME) {
            errno = -ret;
            goto fail;
        }
        struct io_uring_cqe *cqe;
        unsigned head;
        seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe)
        {
            seen++;
            uint64_t ud = io_uring_cqe_get_data64(cqe);
            armed--;
            struct conn *c = &l->conns[ud >> 2];
            int i = (int)(ud >> 2);
            if (cqe->res <= 0 && cqe->res != -EINTR && cqe->res != -EAGAIN) {
                errno = cqe->res < 0 ? -cqe->res : ECONNRESET;
                goto fail;
            }
            int n = cqe->res > 0 ? cqe->res : 0;
            if ((ud & 3) == UR_SEND) {
                c->out_off += (size_t)n;
                if (c->out_off == c->out_len)
                    c->out_off = c->out_len = 0;
                else if (ur_arm_send(&ring, c, i, &armed) != 0)
                    goto fail;
                continue;
            }
            c->in_len += (size_t)n;
            int was_idle = c->out_len == 0;
            if (drain_frames(l, c) != 0 || ur_arm_recv(&ring, c, i, &armed) != 0)
                goto fail;
            if (was_idle && c->out_len > 0 && ur_arm_send(&ring, c, i, &armed) != 0)
                goto fail;
        }
        io_uring_cq_advance(&ring, seen);
        seen = 0;
    }
    ur_quiesce(&ring, &armed);
    io_uring_queue_exit(&ring);
    return NULL;
fail:
    ret = errno;
    io_uring_cq_advance(&ring, seen); /* the batch's completions handled so far */
    ur_quiesce(&ring, &armed);
    io_uring_queue_exit(&ring);
    errno = ret;
fail_noring:
    fprintf(stderr, "bench master: a connection failed on the io_uring loop (errno %d)\n", errno);
    l->errors += 1;
    return (void *)1;
}

/* One run: returns objects/s, or -1. */
static double one_run(struct shared *sh, struct loop *loops, double *lat_all, size_t *nlat_all,
                      double *calls_per_s, uint64_t *errors)
{
    const struct opts *o = sh->o;
    struct conn *conns = calloc((size_t)o->conns, sizeof(*conns));
    double rate = -1;
    if (!conns)
        return -1;
    for (int i = 0; i < o->conns; i++) {
        conns[i].idx = i;
        conns[i].next_id = 1;
        conns[i].fd = tcp_connect(o);
        if (conns[i].fd < 0) {
            fprintf(stderr, "bench master: cannot connect to %s\n", o->master);
            goto out;
        }
    }
    atomic_store(&sh->stop, 0);
    atomic_store(&sh->measuring, 0);
    for (int t = 0; t < o->threads; t++) {
        struct loop *l = &loops[t];
        l->first_conn = o->conns * t / o->threads;
        l->nconns = o->conns * (t + 1) / o->threads - l->first_conn;
        l->conns = conns + l->first_conn;
        l->objects = l->calls = l->errors = l->decoded = l->misses = l->refused = 0;
        l->nlat = 0;
        pthread_create(&l->th, NULL, loop_main, l);
    }
    /* a short warm-up, then the measured window */
    struct timespec warm = {0, 200 * 1000000L};
    nanosleep(&warm, NULL);
    uint64_t t0 = mc_now_ns();
    atomic_store(&sh->measuring, 1);
    uint64_t ns = (uint64_t)(o->seconds * 1e9);
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                          .tv_nsec = (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    atomic_store(&sh->measuring, 0);
    double secs = (double)(mc_now_ns() - t0) / 1e9;
    atomic_store(&sh->stop, 1);
    uint64_t objects = 0, calls = 0;
    int failed = 0;
    for (int t = 0; t < o->threads; t++) {
        void *ret = NULL;
        pthread_join(loops[t].th, &ret);
        failed |= ret != NULL;
        objects += loops[t].objects;
        calls += loops[t].calls;
        *errors += loops[t].errors;
        sh->misses += loops[t].misses;
        sh->refused += loops[t].refused;
        size_t room = MAX_SAMPLES - *nlat_all;
        size_t take = loops[t].nlat < room ? loops[t].nlat : room;
        memcpy(lat_all + *nlat_all, loops[t].lat_ms, take * sizeof(double));
        *nlat_all += take;
    }
    if (!failed) {
        rate = (double)objects / secs;
        *calls_per_s = (double)calls / secs;
    }
out:
    for (int i = 0; i < o->conns; i++) {
        if (conns[i].fd > 0)
            close(conns[i].fd);
        free(conns[i].in);
        free(conns[i].out);
    }
    free(conns);
    return rate;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: mooncake_bench master --master=HOST:PORT\n"
            "       [--op=get|exist|batch_get|put|remove|batch_remove] [--disk_holder]\n"
            "       [--conns=50] [--threads=1] [--depth=1] [--batch=16] [--keys=100000]\n"
            "       [--prefill] [--value_size=4096] [--seconds=5] [--runs=1] [--seed=N]\n"
            "       [--bench_id=mooncake_bench] [--probe_hz=0] [--segment_bytes=2^40]\n"
            "       [--encode=hand|pb] [--io=uring|epoll]\n"
            "  --io        the load loops: io_uring (default; --depth=1 only, else epoll)\n"
            "              or edge-triggered epoll (the old loop, for A/B runs)\n"
            "  --encode    request bodies and keys written by hand (default) or by\n"
            "              snprintf + the protobuf-c packer (the old path, for A/B runs)\n"
            "  --bench_id  names the bench's client and its 1 TiB fake segment: a run with\n"
            "              the same id reuses them (same capacity, same keys)\n"
            "  --probe_hz  open-loop probe Gets per second during the runs: reports\n"
            "              probe_max_ms / probe_p99_ms measured from their scheduled times\n"
            "  Gets of keys not found (evicted since the prefill) count as misses;\n"
            "  PutStarts refused for space count as put_refused (a small\n"
            "  --segment_bytes keeps eviction cycles running).\n");
}

int mc_bench_master(int argc, char **argv)
{
    struct opts o = {.conns = 50,
                     .threads = 1,
                     .depth = 1,
                     .runs = 1,
                     .batch = 16,
                     .keys = 100000,
                     .op = OP_GET,
                     .seconds = 5,
                     .value_size = 4096,
                     .seed = 0x9e3779b97f4a7c15ull,
                     .bench_id = "mooncake_bench"};
    static const struct option lo[] = {{"master", required_argument, NULL, 'm'},
                                       {"op", required_argument, NULL, 'o'},
                                       {"conns", required_argument, NULL, 'c'},
                                       {"threads", required_argument, NULL, 't'},
                                       {"depth", required_argument, NULL, 'd'},
                                       {"batch", required_argument, NULL, 'b'},
                                       {"keys", required_argument, NULL, 'k'},
                                       {"prefill", no_argument, NULL, 'p'},
                                       {"value_size", required_argument, NULL, 'v'},
                                       {"seconds", required_argument, NULL, 's'},
                                       {"runs", required_argument, NULL, 'r'},
                                       {"seed", required_argument, NULL, 'S'},
                                       {"disk_holder", no_argument, NULL, 'D'},
                                       {"bench_id", required_argument, NULL, 'I'},
                                       {"probe_hz", required_argument, NULL, 'P'},
                                       {"segment_bytes", required_argument, NULL, 'B'},
                                       {"encode", required_argument, NULL, 'E'},
                                       {"io", required_argument, NULL, 'i'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    int ch, bad = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'm':
            o.master = optarg;
            break;
        case 'o':
            bad = 1;
            for (int i = 0; i < NOPS; i++)
                if (!strcmp(optarg, mc_bm_op_names[i])) {
                    o.op = (enum op)i;
                    bad = 0;
                }
            break;
        case 'c':
            o.conns = atoi(optarg);
            break;
        case 't':
            o.threads = atoi(optarg);
            break;
        case 'd':
            o.depth = atoi(optarg);
            break;
        case 'b':
            o.batch = atoi(optarg);
            break;
        case 'k':
            o.keys = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'p':
            o.prefill = 1;
            break;
        case 'v':
            o.value_size = strtoull(optarg, NULL, 10);
            break;
        case 's':
            o.seconds = atof(optarg);
            break;
        case 'r':
            o.runs = atoi(optarg);
            break;
        case 'S':
            o.seed = strtoull(optarg, NULL, 0) | 1;
            break;
        case 'D':
            o.disk_holder = 1;
            break;
        case 'I':
            o.bench_id = optarg;
            break;
        case 'P':
            o.probe_hz = atof(optarg);
            break;
        case 'B':
            g_segment_bytes = strtoull(optarg, NULL, 0);
            bad = g_segment_bytes < (1u << 20);
            break;
        case 'i':
            g_io_epoll = !strcmp(optarg, "epoll");
            bad = !g_io_epoll && strcmp(optarg, "uring") != 0;
            break;
        case 'E':
            g_encode_pb = !strcmp(optarg, "pb");
            bad = !g_encode_pb && strcmp(optarg, "hand") != 0;
            break;
        case 'h':
            usage();
            return 0;
        default:
            bad = 1;
        }
        if (bad)
            break;
    }
    if (bad || !o.master || o.conns < 1 || o.conns > 10000 || o.threads < 1 ||
        o.threads > o.conns || o.depth < 1 || o.depth > MAX_DEPTH || o.batch < 1 ||
        o.batch > MAX_BATCH || o.keys < 1 || o.value_size < 1 || o.seconds <= 0 || o.runs < 1 ||
        o.runs > 100 || !o.bench_id[0] || o.probe_hz < 0 || o.probe_hz > 100000) {
        usage();
        return 2;
    }
    if (o.op != OP_BATCH_GET && o.op != OP_BATCH_REMOVE)
        o.batch = 1;
    if (o.depth > 1)
        g_io_epoll = 1; /* the io_uring loop keeps one request in flight per connection */
    if (!g_io_epoll && !ur_available()) {
        fprintf(stderr, "bench master: this kernel gives no io_uring with deferred task work "
                        "(6.1 or later, io_uring not disabled): the epoll loop runs instead\n");
        g_io_epoll = 1;
    }
    struct mc_rpc_client_config ep;
    if (mc_rpc_parse_endpoint(o.master, o.host, sizeof(o.host), &ep) != 0) {
        fprintf(stderr, "bench master: bad --master '%s'\n", o.master);
        return 2;
    }
    memmove(o.host, ep.host, strlen(ep.host) + 1);
    if (!strcmp(o.host, "localhost"))
        strcpy(o.host, "127.0.0.1");
    o.port = ep.port;
    mc_log_set_level(MC_LOG_WARN);

    struct shared sh = {.o = &o, .client = mc_bm_derived_id(o.bench_id, "client")};
    struct mc_bm_probe probe = {0};
    struct mc_bm_pinger pg = {.sh = &sh};
    struct mc_bm_hstream hs = {0};
    struct loop *loops = calloc((size_t)o.threads, sizeof(*loops));
    double *rates = calloc((size_t)o.runs, sizeof(double));
    double *cps = calloc((size_t)o.runs, sizeof(double));
    double *lat = malloc(MAX_SAMPLES * sizeof(double));
    size_t nlat = 0;
    int rc = 1;
    uint64_t errors = 0;
    pg.c = mc_bm_new_client(&o);
    if (!pg.c) {
        fprintf(stderr, "bench master: cannot connect to %s\n", o.master);
        goto out;
    }
    if (mc_service_ready_check(pg.c, NULL, 0) != 0 ||
        mc_bm_mount_segment(pg.c, sh.client, o.bench_id, g_segment_bytes) != 0) {
        fprintf(stderr, "bench master: version check or mount failed\n");
        goto out;
    }
    if (mc_bm_pinger_start(&pg) != 0) {
        fprintf(stderr, "bench master: cannot start the pinger thread\n");
        goto out;
    }
    if (mc_bm_hstream_start(&hs, &sh) != 0)
        goto out; /* said why */
    if (o.op == OP_REMOVE || o.op == OP_BATCH_REMOVE) {
        rc = mc_bm_run_remove(&sh, pg.c);
        goto out;
    }
    if (o.prefill && (o.disk_holder ? mc_bm_prefill_with_disk(&sh, pg.c) : mc_bm_prefill(&sh)) != 0)
        goto out;
    double bpo = mc_bm_sample_bytes_per_object(pg.c, &o);
    if (o.op != OP_PUT && bpo < 0)
        goto out;
    for (int t = 0; t < o.threads; t++) {
        loops[t].sh = &sh;
        loops[t].rng = o.seed + 0x1234567ull * (uint64_t)(t + 1);
        loops[t].lat_ms = malloc(MAX_SAMPLES * sizeof(double));
    }
    double ms_med[100];
    if (mc_bm_probe_start(&probe, &sh, o.probe_hz) != 0) {
        fprintf(stderr, "bench master: cannot start the probe\n");
        goto out;
    }
    sh.pid = (int)getpid();
    for (int r = 0; r < o.runs; r++) {
        sh.run_no = (unsigned)r;
        rates[r] = one_run(&sh, loops, lat, &nlat, &cps[r], &errors);
        ms_med[r] = o.seconds * 1e3;
        if (rates[r] < 0)
            goto out;
        fprintf(stderr, "bench master: run %d: %s %.0f objects/s (%.0f calls/s)\n", r + 1,
                mc_bm_op_names[o.op], rates[r], cps[r]);
    }
    mc_bm_probe_stop(&probe);
    if (errors || probe.errors) {
        fprintf(stderr, "bench master: %llu failed objects, %llu failed probes\n",
                (unsigned long long)errors, (unsigned long long)probe.errors);
        goto out;
    }
    struct mc_bench_result res;
    char cname[96];
    snprintf(cname, sizeof(cname), "%s_b%d_c%d", mc_bm_op_names[o.op], o.batch, o.conns);
    mc_bench_result_init(&res, "master", cname);
    res.runs = o.runs;
    res.ops_per_s = mc_bench_median(rates, (size_t)o.runs);
    res.ms = mc_bench_median(ms_med, (size_t)o.runs);
    res.p50_ms = mc_bench_percentile(lat, nlat, 50);
    res.p99_ms = mc_bench_percentile(lat, nlat, 99);
    res.bytes_per_s = bpo > 0 ? res.ops_per_s * bpo : 0;
    mc_bench_add_str(&res, "op", mc_bm_op_names[o.op]);
    mc_bench_add_num(&res, "conns", o.conns);
    mc_bench_add_num(&res, "batch", o.batch);
    mc_bench_add_num(&res, "depth", o.depth);
    mc_bench_add_num(&res, "threads", o.threads);
    mc_bench_add_num(&res, "keys", o.keys);
    mc_bench_add_num(&res, "calls_per_s", mc_bench_median(cps, (size_t)o.runs));
    mc_bench_add_num(&res, "bytes_per_object", bpo > 0 ? bpo : 0);
    mc_bench_add_num(&res, "misses", (double)sh.misses);
    if (o.op == OP_PUT)
        mc_bench_add_num(&res, "put_refused", (double)sh.refused);
    mc_bench_add_num(&res, "max_ms", mc_bench_percentile(lat, nlat, 100));
    mc_bench_add_str(&res, "encode", g_encode_pb ? "pb" : "hand");
    mc_bench_add_str(&res, "io", g_io_epoll ? "epoll" : "uring");
    if (o.probe_hz > 0) {
        mc_bench_add_num(&res, "probe_hz", o.probe_hz);
        mc_bench_add_num(&res, "probe_calls", (double)probe.calls);
        mc_bench_add_num(&res, "probe_misses", (double)probe.misses);
        mc_bench_add_num(&res, "probe_p99_ms", probe.p99_ms);
        mc_bench_add_num(&res, "probe_max_ms", probe.max_ms);
    }
    mc_bench_emit(&res);
    rc = 0;
out:
    mc_bm_probe_stop(&probe);
    mc_bm_hstream_stop(&hs);
    mc_bm_pinger_stop(&pg);
    mc_rpc_client_free(pg.c);
    for (int t = 0; loops && t < o.threads; t++)
        free(loops[t].lat_ms);
    free(loops);
    free(rates);
    free(cps);
    free(lat);
    return rc;
}
