/* errors.c - names of the error codes in include/mooncake/errors.h. */
#include <string.h>

#include "mooncake/errors.h"

const char *mc_strerror(int code)
{
    switch (code) {
#define MC_ERROR_CASE_(sym, val, name)                                                             \
    case (val):                                                                                    \
        return name;
        MC_ERROR_LIST(MC_ERROR_CASE_)
#undef MC_ERROR_CASE_
    default:
        return "UNKNOWN_ERROR";
    }
}

int mc_error_from_name(const char *name)
{
    if (!name)
        return 1;
#define MC_ERROR_CMP_(sym, val, str)                                                               \
    if (strcmp(name, str) == 0)                                                                    \
        return (val);
    MC_ERROR_LIST(MC_ERROR_CMP_)
#undef MC_ERROR_CMP_
    return 1;
}
