/*
 * id.h - 128-bit identifiers (client ids, segment ids), as upstream's UUID pair.
 * Text form: 32 lowercase hex digits, hi then lo.
 */
#ifndef MC_COMMON_ID_H
#define MC_COMMON_ID_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct mc_id {
    uint64_t hi, lo;
};

#define MC_ID_STRLEN 33 /* 32 hex digits + NUL */

/* A random, non-zero id from getrandom(2). */
struct mc_id mc_id_random(void);
static inline bool mc_id_is_zero(struct mc_id id)
{
    return id.hi == 0 && id.lo == 0;
}
static inline bool mc_id_eq(struct mc_id a, struct mc_id b)
{
    return a.hi == b.hi && a.lo == b.lo;
}
/* The 16-byte wire form (big-endian hi, then lo), as a client credential covers it. */
static inline void mc_id_to_bytes(struct mc_id id, uint8_t *b)
{
    for (int i = 0; i < 8; i++) {
        b[i] = (uint8_t)(id.hi >> (56 - 8 * i));
        b[8 + i] = (uint8_t)(id.lo >> (56 - 8 * i));
    }
}
/* Writes 32 hex digits + NUL into buf (at least MC_ID_STRLEN bytes); returns buf. */
char *mc_id_format(struct mc_id id, char *buf);
/* Parses exactly 32 hex digits. Returns 0, or -1 on bad input. */
int mc_id_parse(const char *s, struct mc_id *out);

#ifdef __cplusplus
}
#endif
#endif
