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
 * listener bound to the destination's port (from loop_from, default the dialling device's
 * dev_addr; device 0's is 10.0.0.1 unless the test changes it); that
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
    int access;        /* IBV_ACCESS_* it was registered with (exposed: every right) */
};

#define FAKE_MAX_DEVS 12

/* What InfiniBand CM carries as rdma_cm private data (RDMA_PS_TCP: the REQ loses 36 bytes to
 * rdma_cm's own header). Hardware refuses more with EINVAL. */
#define FAKE_PDATA_REQ 56
#define FAKE_PDATA_REP 196
#define FAKE_PDATA_REJ 148

struct fake {
    /* devices: ndev of them (1 by default, at most FAKE_MAX_DEVS). An address in dev_addr[d]
     * belongs to device d: binding to it gives the id that device, and a routed connect to it
     * lands on that device's side. A work request then needs an lkey of its own QP's device and
     * an rkey of the device the peer's side landed on, as hardware does (memory regions are per
     * protection domain, so per device). Like rdma_cm on InfiniBand or RoCE, binding to or
     * resolving a loopback address fails with ENODEV (no RDMA device owns the lo netdev). */
    struct ibv_context ctx[FAKE_MAX_DEVS];
    struct ibv_device dev[FAKE_MAX_DEVS];
    struct ibv_context *list[FAKE_MAX_DEVS + 1];
    int ndev;
    char dev_addr[FAKE_MAX_DEVS][16];
    int rd_atom[FAKE_MAX_DEVS];       /* max_qp_rd_atom (default 16) */
    int init_rd_atom[FAKE_MAX_DEVS];  /* max_qp_init_rd_atom (default 16) */
    bool port_down[FAKE_MAX_DEVS];    /* query_port answers IBV_PORT_DOWN */
    int async_pipe[FAKE_MAX_DEVS][2]; /* fake_inject_async writes here; created on demand */
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
    /* hardware's refusals, all on by default except where a value is needed */
    bool reuse_keys;        /* reg_mr of a range just deregistered hands back its old key (the
                               mlx5 mkey cache can) */
    uint64_t memlock_limit; /* bytes pinned by memory regions at most (0 = unlimited): beyond it
                               reg_mr fails with ENOMEM, as RLIMIT_MEMLOCK makes it */
    uint8_t *ro_addr;       /* [ro_addr, ro_addr+ro_len) is read-only memory: a registration
                               with any write access over it fails with EFAULT */
    size_t ro_len;
    bool complete_on_arm; /* req_notify_cq first executes what is queued: those completions
                             arrive before the arm and raise no event */
    bool fork_inited;     /* fork_init was called (before any registration, or it fails) */
    int reg_delay_ms;     /* reg_mr of reg_delay_len bytes or more takes this long (pinning a
                             large segment takes seconds on a real device) */
    size_t reg_delay_len;
    int poll_latency; /* > 0: queued requests also complete once their CQ was polled this
                         many times empty (the device works while the application spins) */

    /* memory */
    struct fake_mr mrs[64];
    int nmrs;
    uint32_t next_key;
    struct fake_mr freed[16]; /* recently deregistered (reuse_keys) */
    int nfreed;
    uint64_t pinned; /* bytes registered now (every device's region counts) */

    /* counters */
    uint64_t wrs;        /* work requests posted */
    int post_calls;      /* post_send calls */
    int outstanding;     /* posted, completion not yet polled */
    int max_outstanding; /* high-water mark of outstanding */
    int reordered;       /* waits whose completions were reversed */
    int qps_created, qps_destroyed;
    int ids_created, ids_destroyed;
    int connects, disconnects;
    int accepted, rejected;
    int bad_connect_msgs; /* connect requests whose message did not decode */
    int pds, mrs_live, cqs, chans, echs;
    int waits;          /* wait_cq_event calls that slept (CQ spin counts against these) */
    int arms;           /* req_notify_cq calls */
    int cq_vec[8];      /* CQs created per completion vector (ctx[d].num_comp_vectors: 1 unless the
                           test sets more; a vector beyond it is EINVAL, as ibv_create_cq(3)) */
    int last_access;    /* the access flags of the last reg_mr */
    int regs_slow;      /* reg_mr calls now inside reg_delay_ms */
    int regs_slow_done; /* reg_mr calls that went through reg_delay_ms */
    int ack_timeout;    /* the last RDMA_OPTION_ID_ACK_TIMEOUT set (-1 = never) */
    int tos;            /* the last RDMA_OPTION_ID_TOS set (-1 = never) */
    int accept_resp, accept_init; /* the last accept's responder_resources, initiator_depth */

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
/* Queues an event of that type (DEVICE_REMOVAL, ...) for the last accepted connection's id. */
void fake_inject_event_last(enum rdma_cm_event_type type);
/* Queues a DISCONNECTED event on the last connection the transport dialled (its peer left). */
void fake_inject_peer_gone(void);
/* Waits (condition variable, 5 s deadline) until *counter >= want; false on timeout. */
bool fake_wait_for(const int *counter, int want);
/* Raises an asynchronous event (IBV_EVENT_PORT_ERR, IBV_EVENT_DEVICE_FATAL, ...) on device d;
 * a port error also marks the port down and fails every queued work request on that device's
 * queue pairs with IBV_WC_RETRY_EXC_ERR, as a link that went away does. */
void fake_inject_async(int d, enum ibv_event_type type);

#endif
