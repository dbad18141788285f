/*
 * put_end_diff.h - one PutEndRequest / PutRevokeRequest body through the master's in-place
 * decoder (mc_svc_decode_put_end, master/service_wire.h) and through protobuf-c's bounded
 * decode: the verdict of the two side by side. The fuzz target (fuzz_master) aborts on any
 * disagreement; the encoder test (test_master_service_encode) counts and reports them.
 */
#ifndef MC_TESTS_PUT_END_DIFF_H
#define MC_TESTS_PUT_END_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum put_end_verdict {
    PUT_END_REFUSED,           /* both refuse the body */
    PUT_END_SAME,              /* both accept it and read the same fields */
    PUT_END_ONLY_PB_REFUSES,   /* the in-place decoder accepts a body protobuf-c refuses */
    PUT_END_ONLY_OURS_REFUSES, /* it refuses one protobuf-c accepts (*why: its reason) */
    PUT_END_DIFFERENT,         /* both accept it and read different fields */
};

/* end: a PutEndRequest (else a PutRevokeRequest). why (may be NULL) gets the in-place
 * decoder's reason when it refuses. */
enum put_end_verdict put_end_diff(const uint8_t *b, size_t len, bool end, const char **why);

/* What a verdict means, for a failure message. */
const char *put_end_verdict_name(enum put_end_verdict v);

#endif
