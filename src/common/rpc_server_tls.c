/*
 * rpc_server_tls.c - the RPC server's socket I/O, plain or through a TLS session (common/tls.h),
 * for rpc_server_conn.c. On a TLS server the first byte of a connection decides: a TLS
 * handshake record goes on to the session; anything else is a plain-text client, answered
 * with one MC_ERR_TLS_REQUIRED frame in plain text (request id 0, as the protected-mode
 * refusal) so that it can say why, then closed.
 */
#include <errno.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/rpc_server_internal.h"
#include "common/tls.h"
#include "mooncake/errors.h"

bool mc_rpcs_tls_attach(struct mc_rpc_server *s, struct conn *c)
{
    if (!s->cfg.tls)
        return true;
    c->tls = mc_tls_server_new(s->cfg.tls, c->fd);
    return c->tls != NULL;
}

void mc_rpcs_tls_detach(struct conn *c)
{
    mc_tls_free(c->tls);
    c->tls = NULL;
}

/* The first byte of a connection to a TLS server: 1 a TLS record, 0 not yet there, -1 plain
 * text (refused) or the peer gone (errno set). */
static int check_first_byte(struct mc_rpc_server *s, struct conn *c)
{
    uint8_t b;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) {
        errno = 0;
        return -1;
    }
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    if (b == MC_TLS_RECORD_HANDSHAKE) {
        c->tls_checked = true;
        return 1;
    }
    uint8_t f[MC_WIRE_HEADER_SIZE];
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_RESPONSE, 0, 0, MC_ERR_TLS_REQUIRED, 0);
    mc_wire_encode_header(&h, f);
    ssize_t w = send(c->fd, f, sizeof(f), MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)w;
    shutdown(c->fd, SHUT_WR);
    atomic_fetch_add(&s->auth_failures, 1);
    mc_warn(s->name, "refusing a plain-text client on a TLS port", "peer=%s hint=\"%s\"", c->peer,
            "give the client the cluster's TLS files (--tls_ca_file, --tls_cert_file)");
    errno = EPROTO;
    return -1;
}

ssize_t mc_rpcs_read(struct mc_rpc_server *s, struct conn *c, void *buf, size_t len)
{
    if (!c->tls)
        return read(c->fd, buf, len);
    if (!c->tls_checked) {
        int r = check_first_byte(s, c);
        if (r <= 0) {
            if (r == 0)
                errno = EAGAIN;
            return errno == 0 ? 0 : -1;
        }
    }
    ssize_t n = mc_tls_read(c->tls, buf, len);
    if (n < 0 && errno == EPROTO) {
        if (!mc_tls_established(c->tls))
            atomic_fetch_add(&s->auth_failures, 1);
        mc_warn(s->name, mc_tls_established(c->tls) ? "TLS error" : "TLS handshake failed",
                "peer=%s reason=\"%s\"", c->peer, mc_tls_reason(c->tls));
        errno = EPROTO;
    }
    return n;
}

ssize_t mc_rpcs_send(struct conn *c, const struct iovec *iov, int n)
{
    if (!c->tls) {
        struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
        return sendmsg(c->fd, &mh, MSG_NOSIGNAL);
    }
    if (!c->tls_checked) { /* nothing goes out before the client's hello */
        errno = EAGAIN;
        return -1;
    }
    return mc_tls_writev(c->tls, iov, n);
}

size_t mc_rpcs_queued(const struct conn *c)
{
    int n = 0;
    size_t q = ioctl(c->fd, FIONREAD, &n) == 0 && n > 0 ? (size_t)n : 0;
    return c->tls ? q + mc_tls_pending((struct mc_tls *)c->tls) : q;
}

bool mc_rpcs_wants_write(const struct conn *c)
{
    return c->tls && mc_tls_wants_write(c->tls);
}

bool mc_rpcs_has_pending(const struct conn *c)
{
    return c->tls && mc_tls_pending((struct mc_tls *)c->tls) > 0;
}
