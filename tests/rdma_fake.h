/*
 * rdma_fake.h - a test provider for the RDMA ops table (src/client/rdma_ops.h) that behaves like
 * a loopback device, so the transport's state logic runs without hardware.
 *
 * Memory: every region registered through reg_mr, and every buffer the test exposes with
 * fake_expose, is reachable by its rkey; a work request's local address must lie in a region
 * with its lkey. READ and WRITE work requests copy the bytes for real.
 *
 * Timing: like a device, the fake makes progress while the application sleeps: post_send only
 * queues work requests; they execute (and their completions appear) when the transport waits
 * on the completion channel. A completion event is raised only when the CQ was armed.
 *
 * Scripting (set in g_fake between calls):
 *   fail_at_wr    the n-th work request (1-based, counted over the whole run) completes with
 *                 fail_status; the QP goes to the error state and every later request on it
 *                 completes with IBV_WC_WR_FLUSH_ERR, as hardware does;
 *   reorder       completions of one wait are delivered in reverse order;
 *   per_wait      a wait executes at most this many queued requests (0 = all);
 *   spurious      this many completion events with nothing behind them;
 *   stray         this many completions with a wr_id nobody posted, before the real ones;
 *   stall         waits time out and nothing executes (a dead device);
 *   reject_connect / accept_msg  the peer's answer to rdma_connect;
 *   no_device     get_devices finds none.
 * Counters record what the transport did. The listener side: fake_inject_connect queues a
 * connect request on the listening channel (its thread blocks on a pipe, not in a loop).
 *
 * Loopback (loopback = true): rdma_connect is not answered by the script but routed to the
 * listener bound to the destination's port (from loop_from, default 127.0.0.1); that
 * listener's accept or reject, with its private data, is what the dialling side sees (no
 * listener on the port: REJECTED). So two transports in one process run the whole connection
 * set-up against each other. Every byte of private data that crosses (connect, accept,
 * reject) is appended to wire[], the test's view of what a sniffer on the fabric would see.
 */
#ifndef MC_TEST_RDMA_FAKE_H
#define MC_TEST_RDMA_FAKE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "client/rdma_ops.h"

struct fake_mr {
    uint8_t *addr;
    size_t len;
    uint32_t key;
    struct ibv_mr *mr; /* NULL for exposed test buffers */
};

struct fake {
    struct ibv_context ctx;
    struct ibv_device dev;
    struct ibv_context *list[3];
    /* a second device (ndev = 2): its own contexts, protection domains and memory regions. An
     * address in dev_addr[d] belongs to device d: binding to it gives the id that device, and
     * a routed connect to it lands on that device's side. A work request then needs an lkey of
     * its own QP's device and an rkey of the device the peer's side landed on, as hardware does
     * (memory regions are per protection domain, so per device). */
    struct ibv_context ctx2;
    struct ibv_device dev2;
    int ndev;
    char dev_addr[2][16];
    pthread_mutex_t lock;
    pthread_cond_t cond;

    /* script */
    uint64_t fail_at_wr, fail_at_wr2; /* a second failure point, 0 = none */
    enum ibv_wc_status fail_status;
    bool reorder;
    int per_wait; /* work requests a wait executes (0 = all queued) */
    int spurious;
    int stray;
    bool stall;
    bool reject_connect;
    uint8_t accept_msg[64];
    uint8_t accept_len;
    bool no_device;
    bool loopback;
    char loop_from[16];

    /* memory */
    struct fake_mr mrs[64];
    int nmrs;
    uint32_t next_key;

    /* counters */
    uint64_t wrs;        /* work requests posted */
    int outstanding;     /* posted, completion not yet polled */
    int max_outstanding; /* high-water mark of outstanding */
    int reordered;       /* waits whose completions were reversed */
    int qps_created, qps_destroyed;
    int ids_created, ids_destroyed;
    int connects, disconnects;
    int accepted, rejected;
    int bad_connect_msgs; /* connect requests whose message did not decode */
    int pds, mrs_live, cqs, chans, echs;

    struct rdma_event_channel *listen_ch;
    struct {
        uint16_t port;
        struct rdma_event_channel *ch;
    } lst[8]; /* listeners by port (loopback routing) */
    int nlst;
    struct {
        struct rdma_cm_id *child, *active;
    } pairs[64]; /* a routed connect request's id -> the dialling id */
    uint8_t wire[65536];
    size_t wire_len;
};

extern struct fake *g_fake;
extern const struct mc_rdma_ops fake_ops;

/* Resets g_fake to a working single-device loopback. */
void fake_init(struct fake *f);
/* Makes [addr, addr+len) reachable by the returned rkey (a peer's segment or buffer). */
uint32_t fake_expose(void *addr, size_t len);
/* Queues a connect request carrying data on the listener's channel, from ipv4 (or 10.0.0.3). */
void fake_inject_connect_from(const char *ipv4, const void *data, uint8_t len);
void fake_inject_connect(const void *data, uint8_t len);
/* Queues a DISCONNECTED event for the last accepted connection's id (listener side). */
void fake_inject_disconnect_last(void);
/* Queues a DISCONNECTED event on the last connection the transport dialled (its peer left). */
void fake_inject_peer_gone(void);
/* Waits (condition variable, 5 s deadline) until *counter >= want; false on timeout. */
bool fake_wait_for(const int *counter, int want);

#endif
