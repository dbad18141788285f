/*
 * security_fixture.h - what the process tests of README "Security" (test_security,
 * test_security_cred) share: token files made and loaded, a free loopback port, an rpc client
 * to the master with a given key, RegisterClient, and the values they put and read back.
 */
#ifndef MC_TESTS_SECURITY_FIXTURE_H
#define MC_TESTS_SECURITY_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"
#include "common/id.h"

struct mc_rpc_client;

/* len bytes of the xorshift sequence of seed into buf: a value whose bytes are checked on the
 * way back. */
void sec_fill(uint8_t *buf, size_t len, uint32_t seed);
/* A loopback TCP port free right now (bound then released), or -1. */
int sec_free_port(void);
/* Writes a token file at path (mode 600): text, or when NULL 32 random bytes as 64 hex digits
 * and a newline; loads it into key. 0, or -1. */
int sec_make_token(const char *path, const char *text, struct mc_auth_key *key);
/* An rpc client to the master at addr ("host:port") with key (NULL = none): 5 s calls, quick
 * reconnects. NULL on failure. */
struct mc_rpc_client *sec_master_rpc(const char *addr, const struct mc_auth_key *key);
/* RegisterClient on c: the minted id, and the credential (*cred_len bytes, at most
 * MC_AUTH_CRED_BYTES are copied). Returns the call's status. */
int sec_register(struct mc_rpc_client *c, struct mc_id *id, uint8_t *cred, size_t *cred_len);

#endif
