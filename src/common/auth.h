/*
 * auth.h - who may connect: the shared-secret handshake and the protected-mode address check.
 *
 * A deployment that gives its processes --auth_token_file shares one secret. Every connection,
 * master RPC and peer data plane alike, proves knowledge of it before its first request, by a
 * mutual challenge-response over two ordinary request frames (wire.h methods AuthChallenge and
 * AuthProve, opaque fixed-size bodies):
 *
 *   client -> AuthChallenge  cnonce (32 random bytes)
 *   server <- status 0       snonce (32 random bytes) | HMAC(K, "server" | cnonce | snonce)
 *   client -> AuthProve      HMAC(K, "client" | cnonce | snonce)
 *   server <- status 0       (the connection is open for every method from now on)
 *
 * K = SHA-256 of a fixed label and the token bytes, HMAC is HMAC-SHA-256 (OpenSSL libcrypto).
 * The token itself never crosses the wire; both sides compare MACs in constant time; the two
 * directions use different labels, so a proof cannot be reflected back at its sender; fresh
 * nonces on both sides make a recorded exchange useless. The client checks the server's proof
 * too, so a client with a token never talks to an impostor that does not know it.
 *
 * A server with a token answers any other first frame, a wrong proof or a malformed handshake
 * with MC_ERR_UNAUTHENTICATED and closes the connection (logged with the peer address and
 * counted). A server without a token runs in protected mode unless told otherwise: it serves
 * loopback peers (127.0.0.0/8) only and answers another peer's first frame with
 * MC_ERR_PROTECTED_MODE, then closes (mc_auth_hint() is the text that says how to fix it).
 *
 * This module holds the crypto, the token file, the client side of the handshake (blocking
 * socket, deadline) and the address check; the server side is a gate in the RPC server
 * (rpc_server_gate.c) built on the same primitives.
 */
#ifndef MC_COMMON_AUTH_H
#define MC_COMMON_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define MC_AUTH_NONCE_BYTES 32
#define MC_AUTH_MAC_BYTES 32
#define MC_AUTH_MIN_TOKEN_BYTES 32
#define MC_AUTH_MAX_TOKEN_BYTES 4096

/* The secret as both sides use it: derived from the token, fixed size, copied by value. */
struct mc_auth_key {
    bool set;
    uint8_t k[32];
    /* Rotation: a token file may list two tokens, one per line. The first (k) is the one this
     * process proves; a peer's proof made with either is accepted. */
    bool has_alt;
    uint8_t alt[32];
    /* Client credential (below), presented in the handshake when set and holding one; not
     * owned: it travels with every copy of the key (master links only, never a peer's). */
    struct mc_auth_cred *cred;
};

/* Derives the key from token bytes (MC_AUTH_MIN_TOKEN_BYTES..MC_AUTH_MAX_TOKEN_BYTES).
 * Returns 0 or MC_ERR_INVALID_PARAMS. */
int mc_auth_key_from_token(const void *token, size_t len, struct mc_auth_key *out);
/* Reads a token file: one token, or two on separate lines (rotation: the first is proved, both
 * are accepted); whitespace around a token is not part of it. Returns 0, MC_ERR_FILE_OPEN_FAIL /
 * FILE_READ_FAIL, or INVALID_PARAMS (a token outside 32..4096 bytes, more than two, or a file
 * others may read: see mc_auth_allow_readable_token_file); on failure writes a reason to err.
 * Warns (log) on a token of low estimated entropy. */
int mc_auth_key_load(const char *path, struct mc_auth_key *out, char *err, size_t errlen);

/* Token files readable or writable by group or others are refused (INVALID_PARAMS) unless
 * this was called with true (--allow_readable_token_file). Process-wide; call before loading. */
void mc_auth_allow_readable_token_file(bool allow);
/* A rough entropy estimate of token bytes, in bits (byte histogram x length): tokens below
 * MC_AUTH_WEAK_TOKEN_BITS get a warning when loaded. */
double mc_auth_token_entropy_bits(const void *token, size_t len);
#define MC_AUTH_WEAK_TOKEN_BITS 128.0
/* Whether mac is the server's (or the client's) proof under key's token or its alternate. */
bool mc_auth_check_server_proof(const struct mc_auth_key *key, const uint8_t *cnonce,
                                const uint8_t *snonce, const uint8_t *mac);
bool mc_auth_check_client_proof(const struct mc_auth_key *key, const uint8_t *cnonce,
                                const uint8_t *snonce, const uint8_t *mac);
/* Whether a key derived from one token (`presented`) names key's token or its alternate. */
bool mc_auth_key_matches(const struct mc_auth_key *key, const struct mc_auth_key *presented);

/* Fills buf with n random bytes from the kernel. 0 or -1. */
int mc_auth_random(void *buf, size_t n);
/* The two proofs (HMAC-SHA-256 over label | cnonce | snonce). */
void mc_auth_server_proof(const struct mc_auth_key *key, const uint8_t *cnonce,
                          const uint8_t *snonce, uint8_t mac[MC_AUTH_MAC_BYTES]);
void mc_auth_client_proof(const struct mc_auth_key *key, const uint8_t *cnonce,
                          const uint8_t *snonce, uint8_t mac[MC_AUTH_MAC_BYTES]);
/* Constant-time comparison of two MACs. */
bool mc_auth_mac_equal(const uint8_t *a, const uint8_t *b);

/*
 * Runs the client side of the handshake on a connected blocking socket, within timeout_ms.
 * Returns 0; MC_ERR_UNAUTHENTICATED (the server refused our proof, failed to prove its own, or
 * has no token); MC_ERR_PROTECTED_MODE (the server accepts loopback peers only);
 * MC_ERR_RPC_TIMEOUT; MC_ERR_RPC_FAIL (connection broken or a malformed answer). Logs the
 * reason with `peer` ("host:port") under component `who`. On failure the socket is unusable.
 */
int mc_auth_client_handshake(int fd, const struct mc_auth_key *key, uint32_t timeout_ms,
                             const char *who, const char *peer);

/*
 * Client credential: a client proves its client id with cred = HMAC(K, label | id), where K is
 * the master's admin key (or its data key without one), so any master holding that token checks
 * it without state. A client that holds none asks RegisterClient, which mints a fresh id and
 * its credential; Ping and MountSegment answers hand it out again (the credential under the
 * first token, for rotation). The client keeps it
 * (mc_auth_cred, persisted beside its id in disk_path) and presents it, with its id, in the
 * handshake's AuthProve body (MAC | id | cred, MC_AUTH_PROVE_CRED_BYTES) on every connection to
 * a master. The server records a claim whose credential checks (mc_auth_cred_check) as the
 * connection's proven client id.
 */
#define MC_AUTH_ID_BYTES 16
#define MC_AUTH_CRED_BYTES 32
#define MC_AUTH_PROVE_CRED_BYTES (MC_AUTH_MAC_BYTES + MC_AUTH_ID_BYTES + MC_AUTH_CRED_BYTES)
/* cred for id (16 bytes, big-endian hi then lo) under key's first token. */
void mc_auth_cred_mint(const struct mc_auth_key *key, const uint8_t *id, uint8_t *cred);
/* Whether cred is id's credential under key's token or its alternate (constant time). */
bool mc_auth_cred_check(const struct mc_auth_key *key, const uint8_t *id, const uint8_t *cred);

/* The client's holder of its credential: thread-safe; loaded from and saved to
 * DIR/client_cred (64 hex digits, mode 0600, written atomically) when given a directory. */
struct mc_auth_cred;
/* Creates a holder for client id (16 bytes). dir: NULL, or where the credential is kept (a
 * file there for another id or malformed is ignored with a warning and replaced when a master
 * hands out a new one). Returns NULL when out of memory. */
struct mc_auth_cred *mc_auth_cred_new(const uint8_t *id, const char *dir);
void mc_auth_cred_free(struct mc_auth_cred *c);
/* Keeps a credential a master handed out (len must be MC_AUTH_CRED_BYTES; other lengths, e.g. 0
 * from a master without a token, are ignored). Persists it when it changed. */
void mc_auth_cred_learn(struct mc_auth_cred *c, const uint8_t *cred, size_t len);
/* Takes a new identity: id (16 bytes) and its credential, both minted by a master
 * (RegisterClient); persisted like a learnt credential. */
void mc_auth_cred_adopt(struct mc_auth_cred *c, const uint8_t *id, const uint8_t *cred);
/* Copies the id and credential out; false while none is held. */
bool mc_auth_cred_get(struct mc_auth_cred *c, uint8_t *id, uint8_t *cred);
#define MC_AUTH_CRED_FILE "client_cred"

/* What a user should do about an UNAUTHENTICATED or PROTECTED_MODE refusal (static text);
 * NULL for other codes. */
const char *mc_auth_hint(int code);

/* Formats a peer address as "a.b.c.d:port" (or "[v6]:port", "unix", "?"). */
void mc_auth_format_addr(const struct sockaddr *sa, socklen_t len, char *out, size_t cap);
/* Whether a peer address is loopback (127.0.0.0/8, ::1, or v4-mapped 127/8). */
bool mc_auth_addr_is_loopback(const struct sockaddr *sa, socklen_t len);

#endif
