/*
 * rpc_server_gate.c - who may connect to an RPC server: the server side of the shared-secret
 * handshake and protected mode (common/auth.h has the protocol). rpc_server_conn.c asks the
 * gate about every frame of a connection until the gate is open; the gate never allocates on a
 * peer's say-so (a handshake frame is at most 32 bytes of body, and anything else is answered
 * from its header alone, before its body is read).
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>

#include "common/auth.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/rpc_server_internal.h"
#include "mooncake/errors.h"

/* ---- connections per address ------------------------------------------------------------- */

static void addr_key(const struct sockaddr_storage *ss, uint8_t out[16])
{
    memset(out, 0, 16);
    if (ss->ss_family == AF_INET) {
        out[10] = out[11] = 0xff; /* v4-mapped */
        memcpy(out + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        memcpy(out, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
    }
}

static unsigned addr_bucket(const uint8_t a[16])
{
    unsigned h = 2166136261u;
    for (int i = 0; i < 16; i++)
        h = (h ^ a[i]) * 16777619u;
    return h % ADDR_BUCKETS;
}

/* Takes a slot for c's address; false when the address already has the maximum. */
static bool addr_acquire(struct mc_rpc_server *s, struct conn *c, uint32_t *count)
{
    bool ok = true;
    unsigned b = addr_bucket(c->addr);
    pthread_mutex_lock(&s->addr_lock);
    struct addr_count *e = s->addrs[b];
    while (e && memcmp(e->addr, c->addr, 16) != 0)
        e = e->next;
    if (!e && (e = calloc(1, sizeof(*e)))) {
        memcpy(e->addr, c->addr, 16);
        e->next = s->addrs[b];
        s->addrs[b] = e;
    }
    if (!e || e->n >= s->cfg.max_conns_per_addr) {
        ok = false;
    } else {
        e->n++;
        c->addr_counted = true;
    }
    *count = e ? e->n : 0;
    pthread_mutex_unlock(&s->addr_lock);
    return ok;
}

static void addr_release(struct mc_rpc_server *s, struct conn *c)
{
    if (!c->addr_counted)
        return;
    c->addr_counted = false;
    unsigned b = addr_bucket(c->addr);
    pthread_mutex_lock(&s->addr_lock);
    for (struct addr_count **pp = &s->addrs[b]; *pp; pp = &(*pp)->next) {
        struct addr_count *e = *pp;
        if (memcmp(e->addr, c->addr, 16) != 0)
            continue;
        if (--e->n == 0) {
            *pp = e->next;
            free(e);
        }
        break;
    }
    pthread_mutex_unlock(&s->addr_lock);
}

/* ---- the gate ---------------------------------------------------------------------------- */

bool mc_rpcs_gate_attach(struct mc_rpc_server *s, struct conn *c)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    memset(&ss, 0, sizeof(ss));
    if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) == 0) {
        mc_auth_format_addr((struct sockaddr *)&ss, sl, c->peer, sizeof(c->peer));
        c->loopback = mc_auth_addr_is_loopback((struct sockaddr *)&ss, sl);
    } else {
        snprintf(c->peer, sizeof(c->peer), "?");
        c->loopback = false;
    }
    addr_key(&ss, c->addr);
    c->attach_ms = c->last_active_ms = mc_now_ms();
    uint32_t count = 0;
    if (s->cfg.max_conns_per_addr && !c->loopback && !addr_acquire(s, c, &count)) {
        atomic_fetch_add(&s->conns_rejected, 1);
        mc_warn(s->name, "too many connections from one address, refusing", "peer=%s max=%u",
                c->peer, s->cfg.max_conns_per_addr);
        return false;
    }
    if (s->auth.set)
        c->gate = MC_GATE_CHALLENGE;
    else if (s->cfg.protected_mode && !c->loopback)
        c->gate = MC_GATE_REFUSE;
    else
        c->gate = MC_GATE_OPEN;
    return true;
}

const char *mc_rpcs_gate_expired(struct mc_rpc_server *s, const struct conn *c, uint64_t now)
{
    if (c->gate != MC_GATE_OPEN) {
        uint32_t limit =
            s->cfg.handshake_timeout_ms ? s->cfg.handshake_timeout_ms : MC_RPC_HANDSHAKE_TIMEOUT_MS;
        if (now - c->attach_ms >= limit)
            return "handshake timeout";
        return NULL;
    }
    uint32_t idle = s->cfg.idle_timeout_ms;
    if (!idle)
        return NULL;
    /* replies the peer does not read, or a body it stopped sending, are not "busy" */
    if (c->out_head && now - c->last_write_ms >= idle)
        return "output not draining";
    if (c->in_body && now - c->last_active_ms >= idle)
        return "request body stalled";
    if (c->inflight > 0 || c->out_head || c->in_body)
        return NULL;
    return now - c->last_active_ms >= idle ? "idle timeout" : NULL;
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
    addr_release(s, c);
    if (c->gate != MC_GATE_PROVE)
        return;
    atomic_fetch_add(&s->auth_failures, 1);
    mc_warn(s->name, "authentication failed: the peer left after our proof (another token?)",
            "peer=%s conn=%llu", c->peer, (unsigned long long)c->id);
}
