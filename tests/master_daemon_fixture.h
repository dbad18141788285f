/*
 * master_daemon_fixture.h - the fixture the mooncake_master process tests
 * (test_master_daemon_*.c) share: the real master started on loopback with --rpc_port=0
 * --metrics_port=0 through the shared process harness (tools/proc_harness.h), its READY line
 * read with a deadline, an rpc_client connection, typed wrappers of the common RPCs, and a
 * SIGTERM stop that requires exit status 0 and nothing more on stdout. md_teardown SIGKILLs a
 * master still running (a failed assertion) and removes its directory, so nothing outlives a
 * test. HTTP through the tests' one client (tools/metrics_scrape.h).
 */
#ifndef MC_TESTS_MASTER_DAEMON_FIXTURE_H
#define MC_TESTS_MASTER_DAEMON_FIXTURE_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/rpc_client.h"
#include "common/service_ready.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "tools/metrics_scrape.h"
#include "tools/proc_harness.h"

#define SEG_BASE 0x7f0000000000ull
#define SEG_SIZE (64ull << 20)

#define FREE_MSG(m) protobuf_c_message_free_unpacked(&(m)->base, NULL)

struct daemon {
    struct mc_proc p; /* the master (tools/proc_harness.h) */
    uint16_t rpc_port, metrics_port;
    char dir[256];
    char err_path[300];
    struct mc_rpc_client *c; /* first connection */
    char *body;              /* last HTTP body (freed by md_teardown on a failed assertion) */
};

extern char md_bin[4096]; /* $MC_BIN_DIR/mooncake_master (md_main_init) */

/* What every test_master_daemon_*.c main does first: md_bin, SIGPIPE ignored, log level. */
void md_main_init(void);
void md_print_log(const struct daemon *d);
void md_start(struct daemon *d, const char *extra, ...);
struct mc_rpc_client *md_connect(const struct daemon *d);
void md_stop_ok(struct daemon *d);
int md_setup(void **state);
int md_teardown(void **state);
int md_call(struct mc_rpc_client *c, uint16_t method, const void *req,
            const ProtobufCMessageDescriptor *desc, void *resp_out);
Mc__Uuid md_uuid(uint64_t hi, uint64_t lo);
int md_ping(struct mc_rpc_client *c, Mc__Uuid *client, Mc__PingResponse **out);
int md_mount(struct mc_rpc_client *c, Mc__Uuid *client, Mc__Uuid *seg_id, const char *name);
int md_put_start(struct mc_rpc_client *c, Mc__Uuid *client, const char *key, uint64_t size,
                 Mc__PutStartResponse **out);
int md_put_end(struct mc_rpc_client *c, Mc__Uuid *client, const char *key, uint32_t crc);
/* PutEnd / PutRevoke of the Put with this version (0: none sent, whichever is in progress). */
int md_put_end_v(struct mc_rpc_client *c, Mc__Uuid *client, const char *key, uint64_t version,
                 uint32_t crc);
int md_put_revoke(struct mc_rpc_client *c, Mc__Uuid *client, const char *key, uint64_t version);
/* The batch forms; n_lens may differ from n_keys (the server refuses every item then), and
 * versions may be NULL (none sent). */
int md_batch_put_start(struct mc_rpc_client *c, Mc__Uuid *client, char **keys, size_t n_keys,
                       uint64_t *lens, size_t n_lens, Mc__BatchPutStartResponse **out);
int md_batch_put_end(struct mc_rpc_client *c, Mc__Uuid *client, Mc__PutEndItem **items, size_t n,
                     Mc__BatchPutEndResponse **out);
int md_batch_put_revoke(struct mc_rpc_client *c, Mc__Uuid *client, char **keys, size_t n,
                        uint64_t *versions, Mc__BatchPutRevokeResponse **out);
int md_get(struct mc_rpc_client *c, const char *key, Mc__GetReplicaListResponse **out);
Mc__GetStatsResponse *md_stats(struct mc_rpc_client *c);
void md_check_replica(const Mc__ReplicaDescriptor *r, uint64_t size);
int md_tcp_connect(uint16_t port);
int md_http_get(uint16_t port, const char *path, char **body);
double md_metric_value(const char *text, const char *name, int *found);

#endif
