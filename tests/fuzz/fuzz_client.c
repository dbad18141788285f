/*
 * fuzz_client.c - libFuzzer target: the client side against a hostile server. The first input
 * byte picks the client (RPC client call, the client half of the token handshake, a tcp
 * transport read, a batch read, a disk read); the rest is what a fake server on loopback sends
 * back, whatever the client asked, before closing. The client must fail cleanly: no crash, no
 * sanitizer report, no leak, no hang past its timeouts.
 *
 * Seeds: tests/fuzz/corpus/client (well-formed replies for each client).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/transport.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/rpc_client.h"
#include "common/wire.h"

static int g_lfd = -1;
static uint16_t g_port;
static char g_endpoint[32];
static struct mc_auth_key g_key;

struct serve {
    const uint8_t *data;
    size_t len;
    _Atomic bool done; /* the client gave up: stop waiting for its connection */
};

/* The fake server: one connection, the input's bytes, then EOF; it drains what the client sends
 * until the client closes. */
static void *serve_one(void *arg)
{
    struct serve *sv = arg;
    for (;;) { /* a connection that is there is taken even after the client gave up */
        struct pollfd p = {.fd = g_lfd, .events = POLLIN};
        if (poll(&p, 1, 20) > 0)
            break;
        if (atomic_load(&sv->done))
            return NULL;
    }
    int fd = accept4(g_lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct timeval tv = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    for (size_t off = 0; off < sv->len;) {
        ssize_t w = send(fd, sv->data + off, sv->len - off, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    uint8_t sink[4096];
    while (recv(fd, sink, sizeof(sink), 0) > 0)
        ;
    close(fd);
    return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_log_set_level(MC_LOG_OFF);
    static const char tok[] = "fuzz-client-token-0123456789abcdef012345";
    if (mc_auth_key_from_token(tok, strlen(tok), &g_key) != 0)
        abort();
    g_lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sa);
    if (g_lfd < 0 || bind(g_lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(g_lfd, 16) != 0 || getsockname(g_lfd, (struct sockaddr *)&sa, &sl) != 0)
        abort();
    g_port = ntohs(sa.sin_port);
    snprintf(g_endpoint, sizeof(g_endpoint), "127.0.0.1:%u", g_port);
    return 0;
}

static void rpc_call(void)
{
    struct mc_rpc_client_config cc;
    mc_rpc_client_config_init(&cc);
    cc.host = "127.0.0.1";
    cc.port = g_port;
    cc.call_timeout_ms = 500;
    cc.connect_timeout_ms = 500;
    struct mc_rpc_client *c;
    if (mc_rpc_client_new(&cc, &c) != 0)
        return;
    void *resp = NULL;
    size_t rl = 0;
    mc_rpc_client_call(c, MC_METHOD_ECHO, "ping", 4, 0, &resp, &rl);
    free(resp);
    mc_rpc_client_free(c);
}

static void handshake(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(g_port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
        mc_auth_client_handshake(fd, &g_key, 500, "fuzz", g_endpoint);
    if (fd >= 0)
        close(fd);
}

static void transport(int mode)
{
    struct mc_tcp_transport_config tc = {.connect_timeout_ms = 500,
                                         .io_timeout_ms = 500,
                                         .slice_bytes = 4096,
                                         .window = 2,
                                         .max_idle_per_peer = 1};
    struct mc_transport *t;
    if (mc_transport_tcp_new(&tc, &t) != 0)
        return;
    static uint8_t buf[3][16384];
    struct mc_xfer_loc loc = {
        .segment_id = {1, 1}, .offset = 0, .endpoint = g_endpoint, .mount_epoch = 7};
    if (mode == 2) {
        mc_transport_read(t, &loc, buf[0], 10000);
    } else if (mode == 3) {
        struct mc_xfer_item it[3];
        memset(it, 0, sizeof(it));
        for (int i = 0; i < 3; i++) {
            it[i].loc = loc;
            it[i].loc.offset = (uint64_t)i * 100;
            it[i].buf = buf[i];
            it[i].len = 100 + (size_t)i;
        }
        mc_transport_batch(t, false, it, 3);
    } else {
        struct mc_disk_read_item it[2] = {{.key = "k1", .size = 10, .buf = buf[0]},
                                          {.key = "k2", .size = 20, .version = 9, .buf = buf[1]}};
        mc_transport_tcp_disk_read(t, g_endpoint, it, 2);
    }
    mc_transport_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct serve sv = {.data = data + 1, .len = size - 1};
    pthread_t th;
    if (pthread_create(&th, NULL, serve_one, &sv) != 0)
        return 0;
    switch (data[0] % 5) {
    case 0:
        rpc_call();
        break;
    case 1:
        handshake();
        break;
    default:
        transport(data[0] % 5);
        break;
    }
    atomic_store(&sv.done, true);
    pthread_join(th, NULL);
    return 0;
}
