/*
 * security_fixture.h - what the process tests of README "Security" (test_security,
 * test_security_cred) share: token files made and loaded, an rpc client to the master with a
 * given key, RegisterClient, the values they put and read back, and the master and daemon
 * processes started on loopback in a private directory (free ports: cu_free_port).
 */
#ifndef MC_TESTS_SECURITY_FIXTURE_H
#define MC_TESTS_SECURITY_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "cluster_util.h"
#include "common/auth.h"
#include "common/id.h"

struct mc_rpc_client;
struct mc_client;

#define SEC_START_MS 20000 /* how long a daemon may take to print READY */

/* The binaries (MC_BIN_DIR) and the private directory of a test's processes. */
struct sec_env {
    char dir[64];
    char master_bin[600], daemon_bin[600], cli_bin[600];
};

/* Fills e from MC_BIN_DIR and makes the directory /tmp/NAME.XXXXXX. 0, or -1 (no MC_BIN_DIR,
 * no directory). */
int sec_env_init(struct sec_env *e, const char *name);
/* Starts mooncake_master (stderr to DIR/master.log) with --rpc_address=127.0.0.1,
 * --metrics_port=0 on 127.0.0.1, --log_level=warn and flags (NULL-terminated, at most 18); its
 * READY line into *r. 0, or -1. */
int sec_start_master(const struct sec_env *e, struct cu_proc *p, const char *const *flags,
                     struct mc_proc_ready *r);
/* Starts mooncake_client NAME (stderr to DIR/NAME.log) with --master=rpc, --host=127.0.0.1,
 * --data_port=0, --log_level=warn and flags (as above); its READY line into *r. 0, or -1. */
int sec_start_daemon(const struct sec_env *e, struct cu_proc *p, const char *name, const char *rpc,
                     const char *const *flags, struct mc_proc_ready *r);
/* Stops the n processes (SIGTERM, 10 s each; never started ones too) and removes the
 * directory. */
void sec_env_close(struct sec_env *e, struct cu_proc *const *procs, size_t n);

/* Opens an in-test library client of the master at rpc with the token file tok (NULL: none)
 * and no DRAM of its own (it reads from the daemons' segments) into *out (NULL on failure).
 * Returns mc_client_open's status. */
int sec_data_client(const char *rpc, const char *tok, struct mc_client **out);
/* len bytes of the xorshift sequence of seed into buf: a value whose bytes are checked on the
 * way back. */
void sec_fill(uint8_t *buf, size_t len, uint32_t seed);
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
