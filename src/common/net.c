/*
 * net.c - dialling a TCP endpoint with a timeout, and sending whole iovec arrays.
 * See net.h for the contract.
 */
#include "common/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/tls.h"

#define MAX_SEND_IOV 64

static void set_timeout(int fd, int opt, uint32_t ms)
{
    if (!ms)
        return;
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv));
}

int mc_net_connect(const char *host, uint16_t port, const struct mc_net_connect_opts *o,
                   int *out_fd)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    char portstr[8];
    snprintf(portstr, sizeof(portstr), "%u", (unsigned)port);
    if (!host || getaddrinfo(host, portstr, &hints, &ai) != 0 || !ai)
        return MC_NET_ERESOLVE;
    int ret = MC_NET_EFAIL;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto out;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS)
            goto out;
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int pr;
        do {
            pr = poll(&pfd, 1, (int)o->connect_timeout_ms);
        } while (pr < 0 && errno == EINTR);
        if (pr == 0) {
            ret = MC_NET_ETIMEOUT;
            goto out;
        }
        int err = 0;
        socklen_t el = sizeof(err);
        if (pr < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
            goto out;
        if (err != 0) {
            errno = err;
            goto out;
        }
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
        goto out;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    set_timeout(fd, SO_SNDTIMEO, o->send_timeout_ms);
    set_timeout(fd, SO_RCVTIMEO, o->recv_timeout_ms);
    *out_fd = fd;
    fd = -1;
    ret = MC_NET_OK;
out:
    if (fd >= 0) {
        int saved = errno;
        close(fd);
        errno = saved;
    }
    freeaddrinfo(ai);
    return ret;
}

int mc_net_send_iov(int fd, struct iovec *iov, int n)
{
    if (mc_tls_sock_is_tls(fd))
        return mc_tls_sock_send_iov(fd, iov, n);
    while (n > 0) {
        struct msghdr mh = {.msg_iov = iov,
                            .msg_iovlen = (size_t)(n > MAX_SEND_IOV ? MAX_SEND_IOV : n)};
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        size_t left = (size_t)w;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

bool mc_net_host_is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    char buf[64];
    size_t n;

    if (!host || !*host)
        return false;
    if (!strcasecmp(host, "localhost"))
        return true;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    n = strlen(host);
    if (host[0] == '[' && n >= 2 && host[n - 1] == ']' && n - 2 < sizeof(buf)) {
        memcpy(buf, host + 1, n - 2);
        buf[n - 2] = '\0';
        host = buf;
    }
    return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}
