/*
 * rpc_server_gate.c - who may connect to an RPC server: the server side of the shared-secret
 * handshake and protected mode (common/auth.h has the protocol). rpc_server_conn.c asks the
 * gate about every frame of a connection until the gate is open; the gate never allocates on a
 * peer's say-so (a handshake frame is at most 32 bytes of body, and anything else is answered
 * from its header alone, before its body is read).
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>

#include "common/auth.h"
#include "common/log.h"
#include "common/rpc_server_internal.h"
#include "mooncake/errors.h"

void mc_rpcs_gate_attach(struct mc_rpc_server *s, struct conn *c)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) == 0) {
        mc_auth_format_addr((struct sockaddr *)&ss, sl, c->peer, sizeof(c->peer));
        c->loopback = mc_auth_addr_is_loopback((struct sockaddr *)&ss, sl);
    } else {
        snprintf(c->peer, sizeof(c->peer), "?");
        c->loopback = false;
    }
    if (s->auth.set)
        c->gate = MC_GATE_CHALLENGE;
    else if (s->cfg.protected_mode && !c->loopback)
        c->gate = MC_GATE_REFUSE;
    else
        c->gate = MC_GATE_OPEN;
}

static void refuse(struct mc_rpc_server *s, struct conn *c, const char *why, uint16_t method,
                   struct mc_rpcs_gate_reply *r)
{
    atomic_fetch_add(&s->auth_failures, 1);
    mc_warn(s->name, "authentication failed, closing connection",
            "peer=%s conn=%llu reason=\"%s\" method=%s", c->peer, (unsigned long long)c->id, why,
            mc_method_name(method) ? mc_method_name(method) : "?");
    r->status = MC_ERR_UNAUTHENTICATED;
    r->len = 0;
    r->close = true;
}

bool mc_rpcs_gate_header(struct mc_rpc_server *s, struct conn *c, const struct mc_wire_header *h,
                         struct mc_rpcs_gate_reply *r)
{
    memset(r, 0, sizeof(*r));
    switch (c->gate) {
    case MC_GATE_REFUSE:
        atomic_fetch_add(&s->protected_refusals, 1);
        mc_warn(s->name, "refusing a non-loopback peer in protected mode", "peer=%s hint=\"%s\"",
                c->peer, mc_auth_hint(MC_ERR_PROTECTED_MODE));
        r->status = MC_ERR_PROTECTED_MODE;
        r->close = true;
        return true;
    case MC_GATE_CHALLENGE:
        if (h->method == MC_METHOD_AUTH_CHALLENGE && h->body_length == MC_AUTH_NONCE_BYTES)
            return false;
        refuse(s, c,
               h->method == MC_METHOD_AUTH_CHALLENGE ? "malformed challenge"
                                                     : "request before authentication",
               h->method, r);
        return true;
    case MC_GATE_PROVE:
        if (h->method == MC_METHOD_AUTH_PROVE && h->body_length == MC_AUTH_MAC_BYTES)
            return false;
        refuse(s, c,
               h->method == MC_METHOD_AUTH_PROVE ? "malformed proof" : "handshake out of order",
               h->method, r);
        return true;
    default:
        return false;
    }
}

void mc_rpcs_gate_frame(struct mc_rpc_server *s, struct conn *c, const struct mc_wire_header *h,
                        const uint8_t *body, struct mc_rpcs_gate_reply *r)
{
    memset(r, 0, sizeof(*r));
    if (c->gate == MC_GATE_CHALLENGE && h->method == MC_METHOD_AUTH_CHALLENGE &&
        h->body_length == MC_AUTH_NONCE_BYTES) {
        memcpy(c->cnonce, body, MC_AUTH_NONCE_BYTES);
        if (mc_auth_random(c->snonce, MC_AUTH_NONCE_BYTES) != 0) {
            mc_error(s->name, "no random bytes for the auth handshake", "errno=%d", errno);
            r->status = MC_ERR_INTERNAL_ERROR;
            r->close = true;
            return;
        }
        memcpy(r->body, c->snonce, MC_AUTH_NONCE_BYTES);
        mc_auth_server_proof(&s->auth, c->cnonce, c->snonce, r->body + MC_AUTH_NONCE_BYTES);
        r->len = MC_AUTH_NONCE_BYTES + MC_AUTH_MAC_BYTES;
        c->gate = MC_GATE_PROVE;
        return;
    }
    if (c->gate == MC_GATE_PROVE && h->method == MC_METHOD_AUTH_PROVE &&
        h->body_length == MC_AUTH_MAC_BYTES) {
        uint8_t want[MC_AUTH_MAC_BYTES];
        mc_auth_client_proof(&s->auth, c->cnonce, c->snonce, want);
        if (!mc_auth_mac_equal(want, body)) {
            refuse(s, c, "wrong proof (another token?)", h->method, r);
            return;
        }
        c->gate = MC_GATE_OPEN;
        mc_debug(s->name, "peer authenticated", "peer=%s conn=%llu", c->peer,
                 (unsigned long long)c->id);
        return;
    }
    refuse(s, c, "handshake out of order", h->method, r);
}

void mc_rpcs_gate_closed(struct mc_rpc_server *s, struct conn *c)
{
    if (c->gate != MC_GATE_PROVE)
        return;
    atomic_fetch_add(&s->auth_failures, 1);
    mc_warn(s->name, "authentication failed: the peer left after our proof (another token?)",
            "peer=%s conn=%llu", c->peer, (unsigned long long)c->id);
}
