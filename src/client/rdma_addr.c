/*
 * rdma_addr.c - which addresses the RDMA transport may use and whom it counts as local
 * (rdma_internal.h).
 *
 * rdma_cm binds and resolves only addresses of a netdev that belongs to an RDMA device: a
 * loopback address (127/8, ::1) has none, so rdma_bind_addr fails with ENODEV on InfiniBand and
 * RoCE alike, and a peer could never dial it anyway. The transport refuses such a host or bind
 * address at start with a message that names the fix, instead of failing later on every peer.
 *
 * Protected mode without a token admits "this host" only. An rdma_cm peer never has a loopback
 * address: a connection from this host arrives from one of its own addresses (the RDMA netdev's).
 * So a peer is local when its address is loopback, is assigned to one of this host's
 * interfaces (getifaddrs), or binds to one of the open RDMA devices (the rdma_cm view of the
 * same question, which is also what the test provider answers).
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>

#include "client/rdma_internal.h"
#include "common/log.h"
#include "common/net.h"
#include "mooncake/errors.h"

bool mc_rdma_addr_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return true;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return false;
}

static bool same_ip(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return false;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->sa_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
    return false;
}

static bool is_interface_addr(const struct sockaddr *sa)
{
    struct ifaddrs *ifa = NULL;
    bool found = false;
    if (getifaddrs(&ifa))
        return false;
    for (struct ifaddrs *i = ifa; i && !found; i = i->ifa_next)
        found = i->ifa_addr && same_ip(i->ifa_addr, sa);
    freeifaddrs(ifa);
    return found;
}

bool mc_rdma_addr_is_own(struct rdma_ctx *x, const struct sockaddr *sa)
{
    if (mc_rdma_addr_is_loopback(sa) || is_interface_addr(sa))
        return true;
    char ip[INET6_ADDRSTRLEN] = "";
    const void *raw = sa->sa_family == AF_INET
                          ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                          : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
    if ((sa->sa_family != AF_INET && sa->sa_family != AF_INET6) ||
        !inet_ntop(sa->sa_family, raw, ip, sizeof(ip)))
        return false;
    return mc_rdma_ctx_device_of(x, ip) >= 0;
}

int mc_rdma_check_addr(const char *what, const char *addr)
{
    if (!addr || !mc_net_host_is_loopback(addr))
        return 0;
    mc_error("rdma",
             "protocol rdma cannot use a loopback address: rdma_cm binds and resolves only "
             "addresses of an RDMA device's network interface (ENODEV otherwise); set --host "
             "(library config host, Python setup local_hostname) to this machine's address on "
             "the RDMA NIC's network, e.g. the address `ip -br addr show` lists for the netdev "
             "`rdma link` names",
             "%s=%s", what, addr);
    return MC_ERR_INVALID_PARAMS;
}
