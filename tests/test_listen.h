/*
 * test_listen.h - a TCP listener on 127.0.0.1 at a port the kernel picks, for the tests whose
 * fake servers, peers and relays accept connections themselves. Include after <cmocka.h>: a
 * step that fails fails the test.
 */
#ifndef MC_TESTS_TEST_LISTEN_H
#define MC_TESTS_TEST_LISTEN_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

/* A listening socket (close-on-exec, the given backlog); its port in *port. */
static inline int tl_listen(int backlog, uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, backlog), 0);
    socklen_t sl = sizeof(sa);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

#endif
