/* id.c - see id.h. */
#include "common/id.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

struct mc_id mc_id_random(void)
{
    struct mc_id id = {0, 0};
    while (mc_id_is_zero(id)) {
        if (getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            id.hi ^= (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull;
            id.lo ^= (uint64_t)ts.tv_sec ^ ((uint64_t)(uintptr_t)&id << 7);
        }
    }
    return id;
}

char *mc_id_format(struct mc_id id, char *buf)
{
    snprintf(buf, MC_ID_STRLEN, "%016llx%016llx", (unsigned long long)id.hi,
             (unsigned long long)id.lo);
    return buf;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int mc_id_parse(const char *s, struct mc_id *out)
{
    uint64_t parts[2] = {0, 0};
    if (!s || strlen(s) != 32)
        return -1;
    for (int i = 0; i < 32; i++) {
        int v = hexval(s[i]);
        if (v < 0)
            return -1;
        parts[i / 16] = (parts[i / 16] << 4) | (uint64_t)v;
    }
    out->hi = parts[0];
    out->lo = parts[1];
    return 0;
}
