/*
 * rdma_ops.h - every libibverbs and librdmacm call the RDMA transport makes, as a table.
 *
 * The transport (transport_rdma.c, rdma_conn.c, rdma_xfer.c) never calls a verbs or rdma_cm
 * function directly: it calls these entries. mc_rdma_ops_verbs() is the production table, whose
 * entries are thin wrappers over the real libraries (several verbs calls are static inlines in
 * <infiniband/verbs.h>, so a table of plain function pointers needs the wrappers anyway). The
 * unit tests pass a table of their own (tests/rdma_fake.c) that behaves like a device: it
 * executes READ/WRITE work requests on memory it knows by rkey, and can fail one, reorder
 * completions, raise a CQ event with nothing to poll and refuse a connection. That way the
 * transport's state logic (connection set-up and teardown, slicing, completion matching,
 * flushing after an error, rebuilding a broken queue pair) runs on a machine without a device.
 *
 * Only the RDMA build (MC_WITH_RDMA) compiles this.
 */
#ifndef MC_CLIENT_RDMA_OPS_H
#define MC_CLIENT_RDMA_OPS_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

struct mc_rdma_ops {
    const char *name;

    /* devices: the contexts rdma_cm uses (rdma_get_devices), NULL-terminated, n set */
    struct ibv_context **(*get_devices)(int *n);
    void (*free_devices)(struct ibv_context **list);
    const char *(*device_name)(struct ibv_context *ctx);
    int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
    struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
    int (*dealloc_pd)(struct ibv_pd *pd);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
    int (*dereg_mr)(struct ibv_mr *mr);

    /* completion queues */
    struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *ctx);
    int (*destroy_comp_channel)(struct ibv_comp_channel *ch);
    struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_ctx,
                                struct ibv_comp_channel *ch, int comp_vector);
    int (*destroy_cq)(struct ibv_cq *cq);
    int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
    /* Sleeps (no polling) until the channel has an event or timeout_ms passed. 1: an event for
     * *cq was read and acknowledged; 0: timeout; -1: error (errno). */
    int (*wait_cq_event)(struct ibv_comp_channel *ch, int timeout_ms, struct ibv_cq **cq);
    int (*poll_cq)(struct ibv_cq *cq, int n, struct ibv_wc *wc);
    int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);

    /* connection manager */
    struct rdma_event_channel *(*create_event_channel)(void);
    void (*destroy_event_channel)(struct rdma_event_channel *ch);
    int (*create_id)(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *ctx,
                     enum rdma_port_space ps);
    int (*destroy_id)(struct rdma_cm_id *id);
    int (*bind_addr)(struct rdma_cm_id *id, struct sockaddr *addr);
    int (*listen)(struct rdma_cm_id *id, int backlog);
    int (*resolve_addr)(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst,
                        int timeout_ms);
    int (*resolve_route)(struct rdma_cm_id *id, int timeout_ms);
    int (*create_qp)(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
    void (*destroy_qp)(struct rdma_cm_id *id);
    int (*connect)(struct rdma_cm_id *id, struct rdma_conn_param *param);
    int (*accept)(struct rdma_cm_id *id, struct rdma_conn_param *param);
    int (*reject)(struct rdma_cm_id *id, const void *private_data, uint8_t len);
    int (*disconnect)(struct rdma_cm_id *id);
    /* Sleeps until the channel has an event, wake_fd (when >= 0) is readable, or timeout_ms
     * (-1 = none) passed. 0: *ev is the next event (ack it); 1: woken or timed out; -1: error. */
    int (*get_cm_event)(struct rdma_event_channel *ch, int wake_fd, int timeout_ms,
                        struct rdma_cm_event **ev);
    int (*ack_cm_event)(struct rdma_cm_event *ev);

    /* fabric settings, port state, asynchronous device events, fork safety */
    int (*set_option)(struct rdma_cm_id *id, int level, int optname, void *val, size_t len);
    int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
    /* Like get_cm_event, on the device's async fd: 0 *ev filled (ack it), 1 woken/timeout, -1. */
    int (*get_async_event)(struct ibv_context *ctx, int wake_fd, int timeout_ms,
                           struct ibv_async_event *ev);
    void (*ack_async_event)(struct ibv_async_event *ev);
    /* ibv_fork_init: before any registration; 0 or an errno */
    int (*fork_init)(void);
};

/* The production table: libibverbs and librdmacm. */
const struct mc_rdma_ops *mc_rdma_ops_verbs(void);

#endif
