/*
 * service_wire.h - a scan of a raw protobuf request body for strings holding a NUL.
 *
 * protobuf-c ends a decoded string at its first NUL, so a key "a\0b" on the wire would be
 * decoded as "a". Keys and group ids never hold a NUL; the RPC adapters (service_convert.c) use
 * this to find the ones that do in the body they have just decoded, and refuse them.
 */
#ifndef MC_MASTER_SERVICE_WIRE_H
#define MC_MASTER_SERVICE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "master/master.h"

/* Sets len = 0 in keys[i] when the i-th occurrence of field num of the body (a string; or, with
 * sub != 0, a message whose string field sub is the one looked at) holds a NUL. single (n = 1):
 * a singular field: for a string its last occurrence counts (the decoded one), for a message
 * any occurrence (protobuf merges them). */
void mc_svc_mark_nul_strings(const uint8_t *body, size_t len, uint32_t num, uint32_t sub,
                             bool single, struct mc_key_ref *keys, size_t n);

#endif
