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

/* Takes a slot of c's address: one of its connections (`total`, max_conns_per_addr) and/or one
 * of its connections still in the handshake (`pending`, max_pending_per_addr). false (nothing
 * taken) when a limit is reached. */
static bool addr_acquire(struct mc_rpc_server *s, struct conn *c, bool total, bool pending)
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
    if (!e || (total && e->n >= s->cfg.max_conns_per_addr) ||
        (pending && (e->pending >= s->cfg.max_pending_per_addr ||
                     s->pending_conns >= s->cfg.max_pending_conns))) {
        ok = false;
    } else {
        if (total) {
            e->n++;
            c->addr_counted = true;
        }
        if (pending) {
            e->pending++;
            s->pending_conns++;
            c->pending_counted = true;
        }
    }
    if (e && !e->n && !e->pending) { /* created for nothing: drop it */
        for (struct addr_count **pp = &s->addrs[b]; *pp; pp = &(*pp)->next)
            if (*pp == e) {
                *pp = e->next;
                free(e);
                break;
            }
    }
    pthread_mutex_unlock(&s->addr_lock);
    return ok;
}

/* Gives back c's slots: its connection slot (total) and/or its handshake slot (pending). */
static void addr_release(struct mc_rpc_server *s, struct conn *c, bool total, bool pending)
{
    total = total && c->addr_counted;
    pending = pending && c->pending_counted;
    if (!total && !pending)
        return;
    unsigned b = addr_bucket(c->addr);
    pthread_mutex_lock(&s->addr_lock);
    for (struct addr_count **pp = &s->addrs[b]; *pp; pp = &(*pp)->next) {
        struct addr_count *e = *pp;
        if (memcmp(e->addr, c->addr, 16) != 0)
            continue;
        if (total) {
            e->n--;
            c->addr_counted = false;
        }
        if (pending) {
            e->pending--;
            s->pending_conns--;
            c->pending_counted = false;
        }
        if (!e->n && !e->pending) {
            *pp = e->next;
            free(e);
        }
        break;
    }
    pthread_mutex_unlock(&s->addr_lock);
}

/* Refusals at accept are logged at most once a second (a flood must not flood the log). */
static void refusal_log(struct mc_rpc_server *s, const char *msg, const struct conn *c,
                        const char *limit, uint32_t max)
{
    uint64_t now = mc_now_ms();
    uint64_t last = atomic_load(&s->refusal_log_ms);
    if (last && now - last < 1000) {
        atomic_fetch_add(&s->refusals_not_logged, 1);
        return;
    }
    atomic_store(&s->refusal_log_ms, now);
    mc_warn(s->name, msg, "peer=%s %s=%u not_logged=%llu", c->peer, limit, max,
            (unsigned long long)atomic_exchange(&s->refusals_not_logged, 0));
}

/* Protected mode, at accept: the refusal is one frame (request id 0: it answers no request in
 * particular; clients take it as the connection's answer) written without waiting, then the
 * connection is closed. It never holds a slot. */
static void refuse_protected(struct mc_rpc_server *s, struct conn *c)
{
    uint8_t f[MC_WIRE_HEADER_SIZE];
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_RESPONSE, 0, 0, MC_ERR_PROTECTED_MODE, 0);
    mc_wire_encode_header(&h, f);
    ssize_t w = send(c->fd, f, sizeof(f), MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)w;
    shutdown(c->fd, SHUT_WR);
    atomic_fetch_add(&s->protected_refusals, 1);
    uint64_t now = mc_now_ms();
    uint64_t last = atomic_load(&s->refusal_log_ms);
    if (last && now - last < 1000) {
        atomic_fetch_add(&s->refusals_not_logged, 1);
        return;
    }
    atomic_store(&s->refusal_log_ms, now);
    mc_warn(s->name, "refusing a non-loopback peer in protected mode",
            "peer=%s hint=\"%s\" not_logged=%llu", c->peer, mc_auth_hint(MC_ERR_PROTECTED_MODE),
            (unsigned long long)atomic_exchange(&s->refusals_not_logged, 0));
}

/* ---- the gate ---------------------------------------------------------------------------- */

bool mc_rpcs_gate_admit(struct mc_rpc_server *s, struct conn *c, const struct sockaddr *sa,
                        socklen_t sl)
{
    if (sa && sl > 0) {
        mc_auth_format_addr(sa, sl, c->peer, sizeof(c->peer));
        c->loopback = mc_auth_addr_is_loopback(sa, sl);
        struct sockaddr_storage ss;
        memset(&ss, 0, sizeof(ss));
        memcpy(&ss, sa, (size_t)sl < sizeof(ss) ? (size_t)sl : sizeof(ss));
        addr_key(&ss, c->addr);
    } else {
        snprintf(c->peer, sizeof(c->peer), "?");
        c->loopback = false;
    }
    c->attach_ms = c->last_active_ms = mc_now_ms();
    if (!s->auth.set && s->cfg.protected_mode && !c->loopback) {
        refuse_protected(s, c);
        return false;
    }
    if (s->cfg.max_conns_per_addr && !c->loopback && !addr_acquire(s, c, true, false)) {
        atomic_fetch_add(&s->conns_rejected, 1);
        refusal_log(s, "too many connections from one address, refusing", c, "max",
                    s->cfg.max_conns_per_addr);
        return false;
    }
    /* loopback included: a local process may not hog the handshake pool either */
    if (s->auth.set && !addr_acquire(s, c, false, true)) {
        addr_release(s, c, true, false);
        atomic_fetch_add(&s->conns_rejected, 1);
        atomic_fetch_add(&s->pending_refusals, 1);
        refusal_log(s, "too many connections still in the handshake, refusing", c,
                    "max_pending_per_addr", s->cfg.max_pending_per_addr);
        return false;
    }
    c->gate = s->auth.set ? MC_GATE_CHALLENGE : MC_GATE_OPEN;
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
        if (h->method == MC_METHOD_AUTH_PROVE &&
            (h->body_length == MC_AUTH_MAC_BYTES || h->body_length == MC_AUTH_PROVE_CRED_BYTES))
            return false;
        refuse(s, c,
               h->method == MC_METHOD_AUTH_PROVE ? "malformed proof" : "handshake out of order",
               h->method, r);
        return true;
    default:
        return false;
    }
}

/* A client id claimed in the proof: recorded as the connection's when its credential checks
 * (auth.h), else ignored with a log line (the master then treats the connection as one that
 * presented none). */
static void gate_claim(struct mc_rpc_server *s, struct conn *c, const uint8_t *claim)
{
    const struct mc_auth_key *k = s->admin_auth.set ? &s->admin_auth : &s->auth;
    if (mc_auth_cred_check(k, claim, claim + MC_AUTH_ID_BYTES)) {
        memcpy(c->client_id, claim, MC_AUTH_ID_BYTES);
        c->client_proven = true;
        return;
    }
    mc_warn(s->name, "client credential does not check (another cluster's, or forged): ignored",
            "peer=%s conn=%llu", c->peer, (unsigned long long)c->id);
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
        (h->body_length == MC_AUTH_MAC_BYTES || h->body_length == MC_AUTH_PROVE_CRED_BYTES)) {
        bool admin = s->admin_auth.set &&
                     mc_auth_check_client_proof(&s->admin_auth, c->cnonce, c->snonce, body);
        if (!admin && !mc_auth_check_client_proof(&s->auth, c->cnonce, c->snonce, body)) {
            refuse(s, c, "wrong proof (another token?)", h->method, r);
            return;
        }
        c->gate = MC_GATE_OPEN;
        c->admin = admin;
        if (h->body_length == MC_AUTH_PROVE_CRED_BYTES)
            gate_claim(s, c, body + MC_AUTH_MAC_BYTES);
        addr_release(s, c, false, true); /* leaves the handshake pool */
        mc_debug(s->name, "peer authenticated", "peer=%s conn=%llu", c->peer,
                 (unsigned long long)c->id);
        return;
    }
    refuse(s, c, "handshake out of order", h->method, r);
}

void mc_rpcs_gate_closed(struct mc_rpc_server *s, struct conn *c)
{
    addr_release(s, c, true, true);
    if (c->gate != MC_GATE_PROVE)
        return;
    atomic_fetch_add(&s->auth_failures, 1);
    mc_warn(s->name, "authentication failed: the peer left after our proof (another token?)",
            "peer=%s conn=%llu", c->peer, (unsigned long long)c->id);
}
