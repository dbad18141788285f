/*
 * net.h - the socket helpers the RPC client and the peer transport share: dialling a TCP
 * endpoint with a connect timeout, and sending a whole iovec array.
 *
 * mc_net_connect resolves host (IPv4, like the rest of the wire layer), connects without
 * blocking longer than connect_timeout_ms, then hands back a blocking socket with TCP_NODELAY
 * and, where asked (non-zero), SO_SNDTIMEO / SO_RCVTIMEO. It logs nothing: callers know what the
 * endpoint is for and say so in their own words, and map the result to their own error codes.
 *
 * mc_net_send_iov sends every byte of iov[0..n) with MSG_NOSIGNAL (a peer that went away is an
 * error, never SIGPIPE), retrying on EINTR and after short writes; it advances the array.
 */
#ifndef MC_COMMON_NET_H
#define MC_COMMON_NET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum mc_net_result {
    MC_NET_OK = 0,
    MC_NET_ERESOLVE = -1, /* host did not resolve */
    MC_NET_ETIMEOUT = -2, /* no connection within connect_timeout_ms */
    MC_NET_EFAIL = -3,    /* refused, reset, or a socket call failed (errno says which) */
};

struct mc_net_connect_opts {
    uint32_t connect_timeout_ms;
    uint32_t send_timeout_ms; /* SO_SNDTIMEO; 0 = none */
    uint32_t recv_timeout_ms; /* SO_RCVTIMEO; 0 = none */
};

/* Returns MC_NET_OK with the connected socket in *out_fd, or a negative mc_net_result. */
int mc_net_connect(const char *host, uint16_t port, const struct mc_net_connect_opts *o,
                   int *out_fd);

/* True when host names this machine's loopback without a lookup: "localhost", 127.0.0.0/8,
 * "::1" (bracketed or not). A name that would need DNS is not loopback. */
bool mc_net_host_is_loopback(const char *host);

/* Sends all n iovecs (modifies the array); 0, or -1 with errno set. */
int mc_net_send_iov(int fd, struct iovec *iov, int n);

#ifdef __cplusplus
}
#endif

#endif
