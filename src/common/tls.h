/*
 * tls.h - TLS (OpenSSL) for the RPC port, the peer port and their clients.
 *
 * One context per process role, loaded from PEM files: a certificate and its key (what this
 * process shows when it serves, and as a client when the server asks for one) and an optional
 * CA bundle. A server with a CA requires and verifies client certificates; without one it
 * serves any TLS client (who may connect is then the token's job). A client always verifies
 * the server's certificate: against the CA file, or the system's CAs when none is given. Only
 * TLS 1.3 is spoken (both ends are ours); no session tickets, no renegotiation.
 *
 * Two ways to use a connection:
 *  - servers own a struct mc_tls per accepted connection and call mc_tls_read / mc_tls_writev
 *    on their non-blocking socket: both return -1 with errno EAGAIN when the socket would block
 *    (and mc_tls_wants_write says whether it waits for writability), and -1 with errno EPROTO
 *    on a TLS error (mc_tls_reason says which). The handshake runs inside the first calls.
 *  - clients, whose code works on a plain descriptor, call mc_tls_sock_connect after connect:
 *    it does the handshake and registers the session under the descriptor. mc_tls_sock_recv,
 *    mc_tls_sock_send and mc_net_send_iov then go through it (the plain syscall for a
 *    descriptor without one), and mc_tls_sock_close must close it. The socket becomes
 *    non-blocking; the blocking calls wait with poll, within the socket's SO_RCVTIMEO /
 *    SO_SNDTIMEO, without holding the session's lock (a reader and a writer may share it).
 */
#ifndef MC_COMMON_TLS_H
#define MC_COMMON_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct mc_tls_ctx;
struct mc_tls;

/* The files (PEM). cert_file and key_file: both or neither (a client without them shows no
 * certificate); a server needs both. ca_file: optional (see above). */
struct mc_tls_files {
    const char *cert_file, *key_file, *ca_file;
};

/* True when any of the three is set (non-empty): TLS is asked for. */
bool mc_tls_files_set(const struct mc_tls_files *f);
/* Loads a context; server: cert and key required. 0, or MC_ERR_INVALID_PARAMS with the reason
 * in err. */
int mc_tls_ctx_new(const struct mc_tls_files *f, bool server, struct mc_tls_ctx **out, char *err,
                   size_t errlen);
void mc_tls_ctx_free(struct mc_tls_ctx *ctx);
/* Whether the server side requires client certificates (a CA was given). */
bool mc_tls_ctx_verifies_clients(const struct mc_tls_ctx *ctx);

/* ---- server side: a session on a non-blocking accepted socket ----------------------------- */

struct mc_tls *mc_tls_server_new(struct mc_tls_ctx *ctx, int fd);
void mc_tls_free(struct mc_tls *t);
/* Like read(2): bytes, 0 at the peer's end, or -1 (errno EAGAIN, EPROTO or the socket's). */
ssize_t mc_tls_read(struct mc_tls *t, void *buf, size_t len);
/* Like writev(2) on the first bytes of iov: bytes taken, or -1 (errno as mc_tls_read). After
 * EAGAIN the caller retries with the same bytes first (more may follow them). */
ssize_t mc_tls_writev(struct mc_tls *t, const struct iovec *iov, int n);
/* Decrypted bytes held in the session (the socket may be empty while they wait). */
size_t mc_tls_pending(struct mc_tls *t);
/* The last EAGAIN waits for the socket to be writable (handshake), not readable. */
bool mc_tls_wants_write(const struct mc_tls *t);
/* Whether the handshake is done. */
bool mc_tls_established(const struct mc_tls *t);
/* Why the last call failed (OpenSSL's reason), for log lines. */
const char *mc_tls_reason(const struct mc_tls *t);

/* The first byte a TLS client sends (a handshake record); anything else is plain text. */
#define MC_TLS_RECORD_HANDSHAKE 0x16

/* ---- client side: sessions registered under a descriptor ---------------------------------- */

/* The client handshake on connected socket fd within timeout_ms, and registration. who and
 * peer are for log lines. 0, MC_ERR_UNAUTHENTICATED (refused: certificate, CA, not a TLS
 * server), MC_ERR_RPC_TIMEOUT or MC_ERR_RPC_FAIL; the descriptor stays open either way. */
int mc_tls_sock_connect(struct mc_tls_ctx *ctx, int fd, uint32_t timeout_ms, const char *who,
                        const char *peer);
/* Whether fd carries a TLS session. */
bool mc_tls_sock_is_tls(int fd);
/* recv(2) for fd (flags: MSG_DONTWAIT and MSG_PEEK honoured; otherwise blocking as the socket
 * was). A TLS error reads as -1 with errno EPROTO. */
ssize_t mc_tls_sock_recv(int fd, void *buf, size_t len, int flags);
/* send(2) for fd, likewise (MSG_DONTWAIT honoured). */
ssize_t mc_tls_sock_send(int fd, const void *buf, size_t len, int flags);
/* Every byte of iov, blocking as the socket does. 0 or -1. NULL: not a TLS descriptor. */
int mc_tls_sock_send_iov(int fd, struct iovec *iov, int n);
/* Decrypted bytes waiting in fd's session (0 for a plain descriptor): poll would not see them. */
size_t mc_tls_sock_pending(int fd);
/* Unregisters fd's session (if any) and closes fd. */
int mc_tls_sock_close(int fd);
/* The reason of fd's last TLS failure, or NULL. */
const char *mc_tls_sock_reason(int fd);

#endif
