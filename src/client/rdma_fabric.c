/*
 * rdma_fabric.c - what the RDMA transport asks of the fabric and the device beyond connections
 * and transfers (rdma_internal.h): fork safety, port state at start, the ACK timeout and ToS of
 * every connection, and the devices' asynchronous events.
 *
 * ACK timeout: rdma_cm's default leaves the QP's local ACK timeout to the kernel (a dead peer
 * then takes seconds to detect); the transport sets RDMA_OPTION_ID_ACK_TIMEOUT (4.096 us *
 * 2^value; the default 14 is about 67 ms per try, as upstream Mooncake uses) on every cm id.
 * ToS (RDMA_OPTION_ID_TOS) is set only when configured: fabrics with PFC/DSCP lossless classes
 * need the class their switches expect, and no value is right everywhere.
 *
 * Async events: one thread sleeps on every open device's async fd (through the ops table) and
 * a wake pipe. IBV_EVENT_PORT_ERR and IBV_EVENT_DEVICE_FATAL mark the device down and bump its
 * generation: a pooled connection made before is replaced at its next use (transport_rdma.c),
 * transfers in flight fail on their own (the QP errors out) and go to the next replica.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/rdma_internal.h"
#include "common/log.h"
#include "mooncake/errors.h"

void mc_rdma_fork_safe(const struct mc_rdma_ops *ops)
{
    int rc = ops->fork_init();
    if (rc)
        mc_warn("rdma",
                "ibv_fork_init failed: memory was registered before in this process; a fork() "
                "(engine workers, system()) may then corrupt RDMA buffers on kernels before 5.12",
                "errno=%d(%s)", rc, strerror(rc));
}

bool mc_rdma_port_active(const struct mc_rdma_ops *ops, struct ibv_context *ctx, int nports)
{
    if (nports <= 0)
        nports = 1;
    int state = -1;
    for (int p = 1; p <= nports; p++) {
        struct ibv_port_attr pa;
        memset(&pa, 0, sizeof(pa));
        if (ops->query_port(ctx, (uint8_t)p, &pa))
            continue;
        if (pa.state == IBV_PORT_ACTIVE)
            return true;
        state = pa.state;
    }
    mc_warn("rdma",
            "RDMA device has no active port, skipped (cable, switch port or subnet manager; see "
            "ibv_devinfo and rdma link)",
            "device=%s port_state=%s", ops->device_name(ctx),
            state >= 0 ? ibv_port_state_str((enum ibv_port_state)state) : "unknown");
    return false;
}

int mc_rdma_id_options(struct rdma_ctx *x, struct rdma_cm_id *id)
{
    if (x->tos >= 0) {
        uint8_t tos = (uint8_t)x->tos;
        if (x->ops->set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos))) {
            mc_warn("rdma", "cannot set the connection's ToS", "tos=%d errno=%d(%s)", x->tos, errno,
                    strerror(errno));
            return -1;
        }
    }
    if (x->ack_timeout >= 0) {
        uint8_t t = (uint8_t)x->ack_timeout;
        if (x->ops->set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof(t))) {
            mc_warn("rdma", "cannot set the connection's ACK timeout",
                    "ack_timeout=%d errno=%d(%s)", x->ack_timeout, errno, strerror(errno));
            return -1;
        }
    }
    return 0;
}

bool mc_rdma_conn_stale(struct rdma_ctx *x, const struct rdma_conn *c)
{
    if (c->dev < 0 || c->dev >= x->ndev)
        return false;
    return atomic_load(&x->dev_down[c->dev]) || atomic_load(&x->dev_gen[c->dev]) != c->gen;
}

struct rdma_async {
    int wake[2];
    int ndev;
    pthread_t thread[MC_RDMA_MAX_DEVS];
    bool started[MC_RDMA_MAX_DEVS];
    const struct mc_logger *logger;
    struct rdma_ctx *x;
};

struct async_arg {
    struct rdma_async *a;
    int dev;
};

static void *async_main(void *p)
{
    struct async_arg arg = *(struct async_arg *)p;
    free(p);
    struct rdma_ctx *x = arg.a->x;
    int d = arg.dev;
    mc_log_set_current(arg.a->logger);
    for (;;) {
        struct ibv_async_event ev;
        int r = x->ops->get_async_event(x->devlist[d], arg.a->wake[0], -1, &ev);
        if (r > 0) {
            struct pollfd w = {.fd = arg.a->wake[0], .events = POLLIN};
            if (poll(&w, 1, 0) > 0)
                break; /* stop (the pipe stays readable for the other threads) */
            continue;
        }
        if (r < 0)
            break;
        enum ibv_event_type type = ev.event_type;
        x->ops->ack_async_event(&ev);
        atomic_fetch_add(&x->async_events, 1);
        const char *dn = x->ops->device_name(x->devlist[d]);
        if (type == IBV_EVENT_PORT_ERR || type == IBV_EVENT_DEVICE_FATAL) {
            atomic_store(&x->dev_down[d], true);
            atomic_fetch_add(&x->dev_gen[d], 1);
            mc_error("rdma",
                     "RDMA device lost its link: connections on it are replaced, transfers fail "
                     "over to other replicas until the port is active again",
                     "device=%s event=%s", dn, ibv_event_type_str(type));
        } else if (type == IBV_EVENT_PORT_ACTIVE) {
            atomic_store(&x->dev_down[d], false);
            mc_info("rdma", "RDMA port active again", "device=%s", dn);
        } else {
            mc_info("rdma", "RDMA async event", "device=%s event=%s", dn, ibv_event_type_str(type));
        }
    }
    return NULL;
}

int mc_rdma_async_start(struct rdma_ctx *x)
{
    struct rdma_async *a = calloc(1, sizeof(*a));
    if (!a)
        return MC_ERR_INTERNAL_ERROR;
    a->x = x;
    a->logger = mc_log_current();
    if (pipe2(a->wake, O_CLOEXEC)) {
        free(a);
        return MC_ERR_INTERNAL_ERROR;
    }
    x->async = a;
    for (int d = 0; d < x->ndev; d++) {
        struct async_arg *arg = malloc(sizeof(*arg));
        if (!arg)
            break;
        *arg = (struct async_arg){a, d};
        if (pthread_create(&a->thread[d], NULL, async_main, arg)) {
            free(arg);
            break;
        }
        a->started[d] = true;
    }
    return 0;
}

void mc_rdma_async_stop(struct rdma_ctx *x)
{
    struct rdma_async *a = x->async;
    if (!a)
        return;
    char b = 1;
    while (write(a->wake[1], &b, 1) < 0 && errno == EINTR)
        ;
    for (int d = 0; d < MC_RDMA_MAX_DEVS; d++)
        if (a->started[d])
            pthread_join(a->thread[d], NULL);
    close(a->wake[0]);
    close(a->wake[1]);
    free(a);
    x->async = NULL;
}
