/*
 * transport_local.c - the in-process transport: the replica lives in a segment this process's
 * peer server serves, so the bytes move with memcpy (see transport.h). The segment table's id,
 * mount epoch and bounds checks apply exactly as for a remote peer.
 */
#include <stdlib.h>
#include <string.h>

#include "client/peer_server.h"
#include "client/transport.h"
#include "mooncake/errors.h"

struct local_transport {
    struct mc_transport base;
    struct mc_peer_server *ps;
};

/* A write into the segment; with crc, *crc is the CRC32C of the bytes, taken as they are copied. */
static int write_into(struct local_transport *lt, const struct mc_xfer_loc *dst, const void *src,
                      size_t len, uint32_t *crc)
{
    uint8_t *p = NULL;
    if (crc)
        *crc = 0;
    int rc =
        mc_peer_server_resolve(lt->ps, dst->segment_id, dst->mount_epoch, dst->offset, len, &p);
    if (rc == 0 && len) {
        mc_peer_server_note_write(lt->ps, dst->segment_id, dst->offset, len);
        if (crc)
            *crc = mc_peer_server_copy_out_crc(lt->ps, p, src, len);
        else
            mc_peer_server_copy_in(lt->ps, p, src, len);
    }
    return rc;
}

static int local_write(struct mc_transport *t, const struct mc_xfer_loc *dst, const void *src,
                       size_t len)
{
    return write_into((struct local_transport *)t, dst, src, len, NULL);
}

static int local_read(struct mc_transport *t, const struct mc_xfer_loc *src, void *dst, size_t len)
{
    struct local_transport *lt = (struct local_transport *)t;
    uint8_t *p = NULL;
    int rc =
        mc_peer_server_resolve(lt->ps, src->segment_id, src->mount_epoch, src->offset, len, &p);
    if (rc == 0 && len)
        mc_peer_server_copy_out(lt->ps, dst, p, len);
    return rc;
}

int mc_transport_local_read_crc(struct mc_transport *t, const struct mc_xfer_loc *src, void *dst,
                                size_t len, uint32_t *crc)
{
    struct local_transport *lt = (struct local_transport *)t;
    uint8_t *p = NULL;
    *crc = 0;
    int rc =
        mc_peer_server_resolve(lt->ps, src->segment_id, src->mount_epoch, src->offset, len, &p);
    if (rc == 0 && len)
        *crc = mc_peer_server_copy_out_crc(lt->ps, dst, p, len);
    return rc;
}

int mc_transport_local_write_crc(struct mc_transport *t, const struct mc_xfer_loc *dst,
                                 const void *src, size_t len, uint32_t *crc)
{
    return write_into((struct local_transport *)t, dst, src, len, crc);
}

static void local_free(struct mc_transport *t)
{
    free(t);
}

static const struct mc_transport_ops local_ops = {
    .name = "local",
    .write = local_write,
    .read = local_read,
    .free = local_free,
};

int mc_transport_local_new(struct mc_peer_server *ps, struct mc_transport **out)
{
    *out = NULL;
    if (!ps)
        return MC_ERR_INVALID_PARAMS;
    struct local_transport *lt = calloc(1, sizeof(*lt));
    if (!lt)
        return MC_ERR_INTERNAL_ERROR;
    lt->base.ops = &local_ops;
    lt->ps = ps;
    *out = &lt->base;
    return 0;
}
