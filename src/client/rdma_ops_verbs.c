/*
 * rdma_ops_verbs.c - the production RDMA ops table (rdma_ops.h): thin wrappers over libibverbs
 * and librdmacm, nothing else. The two waits sleep in poll(2) on the channel's file descriptor,
 * so an idle connection costs no CPU.
 */
#include <errno.h>
#include <poll.h>

#include "client/rdma_ops.h"

static struct ibv_context **v_get_devices(int *n)
{
    return rdma_get_devices(n);
}

static void v_free_devices(struct ibv_context **list)
{
    rdma_free_devices(list);
}

static const char *v_device_name(struct ibv_context *ctx)
{
    return ctx && ctx->device ? ibv_get_device_name(ctx->device) : "?";
}

static int v_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
    return ibv_query_device(ctx, attr);
}

static struct ibv_pd *v_alloc_pd(struct ibv_context *ctx)
{
    return ibv_alloc_pd(ctx);
}

static int v_dealloc_pd(struct ibv_pd *pd)
{
    return ibv_dealloc_pd(pd);
}

static struct ibv_mr *v_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    return ibv_reg_mr(pd, addr, len, access);
}

static int v_dereg_mr(struct ibv_mr *mr)
{
    return ibv_dereg_mr(mr);
}

static struct ibv_comp_channel *v_create_comp_channel(struct ibv_context *ctx)
{
    return ibv_create_comp_channel(ctx);
}

static int v_destroy_comp_channel(struct ibv_comp_channel *ch)
{
    return ibv_destroy_comp_channel(ch);
}

static struct ibv_cq *v_create_cq(struct ibv_context *ctx, int cqe, void *cq_ctx,
                                  struct ibv_comp_channel *ch, int vec)
{
    return ibv_create_cq(ctx, cqe, cq_ctx, ch, vec);
}

static int v_destroy_cq(struct ibv_cq *cq)
{
    return ibv_destroy_cq(cq);
}

static int v_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
    return ibv_req_notify_cq(cq, solicited_only);
}

static int v_wait_cq_event(struct ibv_comp_channel *ch, int timeout_ms, struct ibv_cq **cq)
{
    struct pollfd p = {.fd = ch->fd, .events = POLLIN};
    int n;
    do {
        n = poll(&p, 1, timeout_ms);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    if (n == 0)
        return 0;
    void *cq_ctx = NULL;
    if (ibv_get_cq_event(ch, cq, &cq_ctx))
        return -1;
    ibv_ack_cq_events(*cq, 1);
    return 1;
}

static int v_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    return ibv_poll_cq(cq, n, wc);
}

static int v_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    return ibv_post_send(qp, wr, bad);
}

static struct rdma_event_channel *v_create_event_channel(void)
{
    return rdma_create_event_channel();
}

static void v_destroy_event_channel(struct rdma_event_channel *ch)
{
    rdma_destroy_event_channel(ch);
}

static int v_create_id(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *ctx,
                       enum rdma_port_space ps)
{
    return rdma_create_id(ch, id, ctx, ps);
}

static int v_destroy_id(struct rdma_cm_id *id)
{
    return rdma_destroy_id(id);
}

static int v_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
    return rdma_bind_addr(id, addr);
}

static int v_listen(struct rdma_cm_id *id, int backlog)
{
    return rdma_listen(id, backlog);
}

static int v_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst,
                          int timeout_ms)
{
    return rdma_resolve_addr(id, src, dst, timeout_ms);
}

static int v_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
    return rdma_resolve_route(id, timeout_ms);
}

static int v_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
    return rdma_create_qp(id, pd, attr);
}

static void v_destroy_qp(struct rdma_cm_id *id)
{
    rdma_destroy_qp(id);
}

static int v_connect(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
    return rdma_connect(id, param);
}

static int v_accept(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
    return rdma_accept(id, param);
}

static int v_reject(struct rdma_cm_id *id, const void *data, uint8_t len)
{
    return rdma_reject(id, data, len);
}

static int v_disconnect(struct rdma_cm_id *id)
{
    return rdma_disconnect(id);
}

static int v_get_cm_event(struct rdma_event_channel *ch, int wake_fd, int timeout_ms,
                          struct rdma_cm_event **ev)
{
    struct pollfd p[2] = {{.fd = ch->fd, .events = POLLIN}, {.fd = wake_fd, .events = POLLIN}};
    int n;
    do {
        n = poll(p, wake_fd >= 0 ? 2 : 1, timeout_ms);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    if (n == 0 || !(p[0].revents & POLLIN))
        return 1;
    return rdma_get_cm_event(ch, ev) ? -1 : 0;
}

static int v_ack_cm_event(struct rdma_cm_event *ev)
{
    return rdma_ack_cm_event(ev);
}

static int v_set_option(struct rdma_cm_id *id, int level, int optname, void *val, size_t len)
{
    return rdma_set_option(id, level, optname, val, len);
}

static int v_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
    return ibv_query_port(ctx, port, attr);
}

static int v_get_async_event(struct ibv_context *ctx, int wake_fd, int timeout_ms,
                             struct ibv_async_event *ev)
{
    struct pollfd p[2] = {{.fd = ctx->async_fd, .events = POLLIN},
                          {.fd = wake_fd, .events = POLLIN}};
    int n;
    do {
        n = poll(p, wake_fd >= 0 ? 2 : 1, timeout_ms);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    if (n == 0 || !(p[0].revents & POLLIN))
        return 1;
    return ibv_get_async_event(ctx, ev) ? -1 : 0;
}

static void v_ack_async_event(struct ibv_async_event *ev)
{
    ibv_ack_async_event(ev);
}

static int v_fork_init(void)
{
    return ibv_fork_init();
}

static const struct mc_rdma_ops verbs_ops = {
    .name = "verbs",
    .get_devices = v_get_devices,
    .free_devices = v_free_devices,
    .device_name = v_device_name,
    .query_device = v_query_device,
    .alloc_pd = v_alloc_pd,
    .dealloc_pd = v_dealloc_pd,
    .reg_mr = v_reg_mr,
    .dereg_mr = v_dereg_mr,
    .create_comp_channel = v_create_comp_channel,
    .destroy_comp_channel = v_destroy_comp_channel,
    .create_cq = v_create_cq,
    .destroy_cq = v_destroy_cq,
    .req_notify_cq = v_req_notify_cq,
    .wait_cq_event = v_wait_cq_event,
    .poll_cq = v_poll_cq,
    .post_send = v_post_send,
    .create_event_channel = v_create_event_channel,
    .destroy_event_channel = v_destroy_event_channel,
    .create_id = v_create_id,
    .destroy_id = v_destroy_id,
    .bind_addr = v_bind_addr,
    .listen = v_listen,
    .resolve_addr = v_resolve_addr,
    .resolve_route = v_resolve_route,
    .create_qp = v_create_qp,
    .destroy_qp = v_destroy_qp,
    .connect = v_connect,
    .accept = v_accept,
    .reject = v_reject,
    .disconnect = v_disconnect,
    .get_cm_event = v_get_cm_event,
    .ack_cm_event = v_ack_cm_event,
    .set_option = v_set_option,
    .query_port = v_query_port,
    .get_async_event = v_get_async_event,
    .ack_async_event = v_ack_async_event,
    .fork_init = v_fork_init,
};

const struct mc_rdma_ops *mc_rdma_ops_verbs(void)
{
    return &verbs_ops;
}
