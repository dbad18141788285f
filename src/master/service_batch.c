/*
 * service_batch.c - the generic batch adapter and the heartbeats' task-list reply
 * (service_internal.h).
 *
 * mc_svc_batch is every batch RPC's decode -> core -> encode -> free, written once: the spec
 * names the request's items field (and, for message items, their key field), and the adapter
 * reads them through the protobuf-c descriptors (a repeated field is a count at
 * quantifier_offset and an array at offset), so one function serves every request type. Order
 * of the whole-call checks, which decides the status a bad call gets: the batch bound
 * (INVALID_PARAMS), memory (INTERNAL_ERROR), the spec's check, the client binding, the core.
 *
 * Memory: one block per call holds the keys, the statuses, the core's per-item results and the
 * reply's per-item messages; the reply struct itself is on the stack. mc_rpc_reply_msg copies
 * the encoding, so everything is freed once it returns.
 */
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/wire.h"
#include "master/service_internal.h"
#include "mooncake/errors.h"

#define COMP "service"

/* Room for any reply message struct of proto/master.proto on the stack. */
union reply_buf {
    ProtobufCMessage base;
    max_align_t align;
    char bytes[512];
};

static const ProtobufCFieldDescriptor *field(const ProtobufCMessageDescriptor *d, const char *name)
{
    return name ? protobuf_c_message_descriptor_get_field_by_name(d, name) : NULL;
}

static void *field_ptr(const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f)
{
    return (char *)msg + f->offset;
}

static size_t *field_count(const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f)
{
    return (size_t *)((char *)msg + f->quantifier_offset);
}

void mc_svc_set_repeated(ProtobufCMessage *msg, const char *name, size_t n, void *arr)
{
    const ProtobufCFieldDescriptor *f = field(msg->descriptor, name);
    if (!f || f->label != PROTOBUF_C_LABEL_REPEATED)
        return;
    *field_count(msg, f) = n;
    *(void **)field_ptr(msg, f) = arr;
}

static size_t round_up(size_t v)
{
    return (v + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
}

/* Carves the per-item arrays out of one block (b->n > 0); NULL out of memory. */
static void *batch_alloc(struct mc_svc_batch *b, const struct mc_svc_batch_spec *spec)
{
    size_t n = b->n;
    size_t keys = round_up(n * sizeof(*b->keys)), rcs = round_up(n * sizeof(*b->rcs));
    size_t res = round_up(n * spec->res_size), views = round_up(n * spec->view_size);
    size_t ptrs = spec->view_size ? n * sizeof(*b->ptrs) : 0;
    char *p = malloc(keys + rcs + res + views + ptrs);
    if (!p)
        return NULL;
    b->keys = (struct mc_key_ref *)p;
    b->rcs = (int *)(p + keys);
    b->res = spec->res_size ? p + keys + rcs : NULL;
    b->views = spec->view_size ? p + keys + rcs + res : NULL;
    b->ptrs = spec->view_size ? (void **)(p + keys + rcs + res + views) : NULL;
    return p;
}

/* The items' keys (none for keyless message items), then the NUL check against the body. */
static void batch_keys(struct mc_svc_batch *b, const struct mc_svc_batch_spec *spec,
                       const ProtobufCFieldDescriptor *items, void *arr)
{
    const ProtobufCFieldDescriptor *sub = NULL;
    if (items->type == PROTOBUF_C_TYPE_MESSAGE) {
        sub = field(items->descriptor, spec->item_key);
        if (!sub)
            return;
    }
    for (size_t i = 0; i < b->n; i++) {
        const char *k = sub ? *(const char **)field_ptr(((ProtobufCMessage **)arr)[i], sub)
                            : ((const char **)arr)[i];
        b->keys[i].data = k ? k : "";
        b->keys[i].len = strlen(b->keys[i].data);
    }
    mc_svc_mark_nul_keys(b->call, items->id, sub ? sub->id : 0, false, b->keys, b->n);
}

static int batch_run(struct mc_svc_batch *b, const struct mc_svc_batch_spec *spec, void **block)
{
    const ProtobufCFieldDescriptor *items = field(spec->req, spec->items);
    const ProtobufCFieldDescriptor *client = field(spec->req, "client_id");
    if (!items || items->label != PROTOBUF_C_LABEL_REPEATED)
        return MC_ERR_INTERNAL_ERROR; /* a spec that does not match its request type */
    b->n = *field_count(b->req, items);
    if (b->n > MC_SERVICE_MAX_BATCH)
        return MC_ERR_INVALID_PARAMS;
    if (b->n > 0 && !(*block = batch_alloc(b, spec)))
        return MC_ERR_INTERNAL_ERROR;
    if (b->n > 0)
        batch_keys(b, spec, items, *(void **)field_ptr(b->req, items));
    if (client && client->type == PROTOBUF_C_TYPE_MESSAGE)
        b->client = mc_svc_id_from_pb(*(const Mc__Uuid **)field_ptr(b->req, client));
    int rc = spec->check ? spec->check(b) : 0;
    if (rc == 0 && !spec->no_client)
        rc = mc_svc_check_client(b->m, b->call, b->client);
    if (rc == 0)
        rc = spec->core(b);
    return rc;
}

void mc_svc_batch(struct mc_master_service *svc, struct mc_rpc_call *call,
                  const struct mc_svc_batch_spec *spec, void *ctx)
{
    ProtobufCMessage *req = mc_rpc_call_unpack(call, spec->req);
    if (!req)
        return;
    struct mc_svc_batch b = {.m = svc->m, .call = call, .req = req, .ctx = ctx};
    void *block = NULL;
    int rc = batch_run(&b, spec, &block);
    if (rc == MC_SVC_DEFERRED)
        goto out; /* the core took the call: it answers later */
    union reply_buf r;
    if (rc == 0 && spec->resp->sizeof_message > sizeof(r))
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
        goto out;
    }
    protobuf_c_message_init(spec->resp, &r);
    mc_svc_set_repeated(&r.base, "statuses", b.n, b.rcs);
    if (spec->encode)
        spec->encode(&b, &r.base);
    mc_rpc_reply_msg(call, 0, &r.base);
out:
    protobuf_c_message_free_unpacked(req, NULL);
    free(block);
}

void mc_svc_reply_tasks(struct mc_rpc_call *call, const ProtobufCMessageDescriptor *resp,
                        const ProtobufCMessageDescriptor *item, mc_svc_task_fill_fn fill,
                        size_t scratch_bytes, struct mc_task_list *tasks)
{
    size_t n = tasks->n, msz = round_up(item->sizeof_message);
    size_t isz = msz + round_up(scratch_bytes);
    char *items = n ? calloc(n, isz + sizeof(void *)) : NULL;
    union reply_buf r;
    if ((n && !items) || resp->sizeof_message > sizeof(r)) {
        mc_warn(COMP, "heartbeat reply dropped (out of memory)", "method=%s tasks=%zu",
                mc_method_name(mc_rpc_call_method(call)), n);
        mc_rpc_reply_status(call, MC_ERR_INTERNAL_ERROR);
        goto out;
    }
    void **ptrs = n ? (void **)(items + n * isz) : NULL;
    size_t i = 0;
    for (struct mc_task *t = tasks->head; t && i < n; t = t->next, i++) {
        ProtobufCMessage *it = (ProtobufCMessage *)(items + i * isz);
        protobuf_c_message_init(item, it);
        fill(it, t, scratch_bytes ? items + i * isz + msz : NULL);
        ptrs[i] = it;
    }
    protobuf_c_message_init(resp, &r);
    mc_svc_set_repeated(&r.base, "items", i, ptrs);
    mc_rpc_reply_msg(call, 0, &r.base);
out:
    free(items);
    mc_task_list_free(tasks);
}
