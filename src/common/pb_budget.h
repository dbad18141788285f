/*
 * pb_budget.h - decoding an untrusted protobuf body with bounded memory.
 *
 * Why. protobuf-c turns every element of a repeated field into at least one allocation (a
 * pointer slot, a string copy or a sub-message, plus a 32-byte scan record while parsing), so
 * a 2-byte element can cost 50-80 bytes: a 40 MiB body of empty keys made the master allocate
 * gigabytes before any handler could look at the count. Two guards, both before the handler:
 *
 * 1. A pre-scan of the wire format (no allocation, linear in the body) counts the elements of
 *    every repeated field in every (sub-)message instance, the unknown fields and all tags. A
 *    repeated field over `max_repeated` in one instance, or more than `max_tags` tags in all,
 *    is refused before decoding (TOO_MANY). Malformed wire format is refused here too.
 * 2. protobuf-c then decodes through an allocator whose budget is
 *        2 x body + 128 bytes x tags counted + 64 KiB,
 *    counting each allocation with malloc's per-chunk overhead. Past the budget the allocator
 *    fails and protobuf-c gives up cleanly (OVER_BUDGET). A legitimate body (8,192 keys of
 *    4 KiB: 32 MiB) decodes to about its own size and passes.
 *
 * The result is plain malloc'd memory: free it with protobuf_c_message_free_unpacked(m, NULL).
 */
#ifndef MC_COMMON_PB_BUDGET_H
#define MC_COMMON_PB_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* Default cap on one repeated field's elements (the master's batch cap, MC_SERVICE_MAX_BATCH). */
#define MC_PB_DEFAULT_MAX_REPEATED 8192u

struct mc_pb_limits {
    uint32_t max_repeated; /* elements of one repeated field in one message; 0 = default */
    uint32_t max_tags;     /* tags (and packed elements) in the whole body; 0 = 16 x
                            * max_repeated + 4096 */
    uint32_t tag_bytes;    /* decode budget per tag beyond twice the body; 0 = 128, about what
                            * glibc spends on one small sub-message and its pointer slot. A
                            * reader whose element cap is its real bound (the RPC client) may
                            * give more room: the budget then depends less on the allocator. */
};

enum mc_pb_verdict {
    MC_PB_OK = 0,
    MC_PB_MALFORMED,   /* not protobuf wire format (or nested too deep) */
    MC_PB_TOO_MANY,    /* a repeated field over max_repeated, or tags over max_tags */
    MC_PB_OVER_BUDGET, /* decoding needed more memory than the budget */
    MC_PB_UNDECODABLE, /* protobuf-c refused it (wrong type for a field, bad UTF-8, ...) */
};

struct mc_pb_report {
    enum mc_pb_verdict verdict;
    const char *field; /* for TOO_MANY: the repeated field over the cap (NULL: the tag total) */
    uint64_t count;    /* for TOO_MANY: that field's (or the total's) count */
    uint64_t tags;     /* tags counted by the pre-scan */
    size_t budget;     /* bytes the decode was allowed */
    size_t peak;       /* bytes the decode had allocated at most */
};

/* Pre-scan only: MC_PB_OK, MC_PB_MALFORMED or MC_PB_TOO_MANY (rep may be NULL). */
enum mc_pb_verdict mc_pb_prescan(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                                 size_t len, const struct mc_pb_limits *lim,
                                 struct mc_pb_report *rep);

/* Pre-scan, then decode within the budget. NULL on any failure (rep says which; may be NULL). */
ProtobufCMessage *mc_pb_unpack_bounded(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                                       size_t len, const struct mc_pb_limits *lim,
                                       struct mc_pb_report *rep);

/* A short name for a verdict, for log lines. */
const char *mc_pb_verdict_name(enum mc_pb_verdict v);

#endif
