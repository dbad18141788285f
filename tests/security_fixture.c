/*
 * security_fixture.c - see security_fixture.h.
 */
#include "security_fixture.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "cluster_util.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "proto/master.pb-c.h"

void sec_fill(uint8_t *buf, size_t len, uint32_t seed)
{
    uint32_t x = seed | 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        buf[i] = (uint8_t)x;
    }
}

int sec_free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

int sec_make_token(const char *path, const char *text, struct mc_auth_key *key)
{
    char hex[66];
    if (!text) {
        uint8_t r[32];
        if (mc_auth_random(r, sizeof(r)) != 0)
            return -1;
        for (int i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", r[i]);
        hex[64] = '\n';
        hex[65] = '\0';
        text = hex;
    }
    if (cu_write_file(path, text, strlen(text)) != 0 || chmod(path, 0600) != 0)
        return -1;
    char err[160];
    return mc_auth_key_load(path, key, err, sizeof(err)) == 0 ? 0 : -1;
}

struct mc_rpc_client *sec_master_rpc(const char *addr, const struct mc_auth_key *key)
{
    struct mc_rpc_client_config cc;
    char host[64];
    struct mc_rpc_client *c = NULL;
    mc_rpc_client_config_init(&cc);
    if (mc_rpc_parse_endpoint(addr, host, sizeof(host), &cc) != 0)
        return NULL;
    cc.auth = key;
    cc.call_timeout_ms = 5000;
    cc.reconnect_min_ms = 1;
    cc.reconnect_max_ms = 1;
    return mc_rpc_client_new(&cc, &c) == 0 ? c : NULL;
}

int sec_register(struct mc_rpc_client *c, struct mc_id *id, uint8_t *cred, size_t *cred_len)
{
    Mc__RegisterClientRequest req = MC__REGISTER_CLIENT_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    int rc = mc_rpc_client_call_msg(c, MC_METHOD_REGISTER_CLIENT, &req.base,
                                    &mc__register_client_response__descriptor, 0, &m);
    id->hi = id->lo = 0;
    if (cred_len)
        *cred_len = 0;
    if (m) {
        const Mc__RegisterClientResponse *r = (const Mc__RegisterClientResponse *)m;
        if (r->client_id) {
            id->hi = r->client_id->hi;
            id->lo = r->client_id->lo;
        }
        if (cred && cred_len && r->credential.len) {
            *cred_len = r->credential.len;
            memcpy(cred, r->credential.data,
                   r->credential.len < MC_AUTH_CRED_BYTES ? r->credential.len : MC_AUTH_CRED_BYTES);
        }
        protobuf_c_message_free_unpacked(m, NULL);
    }
    return rc;
}
