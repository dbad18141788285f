/*
 * cli_ha.c - mooncake_cli against a high-availability cluster: --master=etcd://... names the
 * cluster; the leader's address is read from etcd once (a command is one short session).
 */
#include <stdio.h>

#include "client/master_follow.h"
#include "mooncake/errors.h"
#include "tools/cli.h"

int mc_cli_resolve_leader(const char *url, char *addr, size_t cap)
{
    struct mc_master_follow *f = NULL;
    uint64_t epoch = 0;
    int rc = mc_master_follow_new(url, &f);
    if (rc == 0)
        rc = mc_master_follow_resolve(f, addr, cap, &epoch);
    mc_master_follow_free(f);
    if (rc)
        fprintf(stderr,
                "mooncake_cli: no master leads %s now (etcd unreachable, or no leader elected): "
                "%s\n",
                url, mc_strerror(rc));
    return rc;
}
