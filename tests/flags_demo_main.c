/*
 * flags_demo_main.c - a tiny executable that exercises the flags shim (common/flags.h) for
 * tests/test_flags.c, which runs it with various command lines and checks its output and exit
 * status. It declares one flag of every type plus size, duration and log-level string flags,
 * and prints "name=value" lines on stdout after parsing, then "arg=..." for each positional
 * argument. With --bad_table it registers a table with a duplicate name (must abort).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/flags.h"
#include "common/log.h"

static struct {
    bool verbose;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    double ratio;
    const char *name;
    const char *size;
    const char *ttl;
    const char *log_level;
} F;

static const struct mc_flag g_flags[] = {
    MC_BOOL_FLAG("verbose", "false", "a bool", &F.verbose),
    MC_INT32_FLAG("i32", "-7", "an int32", &F.i32),
    MC_UINT32_FLAG("u32", "50051", "a uint32", &F.u32),
    MC_INT64_FLAG("i64", "-9000000000", "an int64", &F.i64),
    MC_UINT64_FLAG("u64", "18000000000000000000", "a uint64", &F.u64),
    MC_DOUBLE_FLAG("ratio", "0.05", "a double", &F.ratio),
    MC_STRING_FLAG("name", "mooncake", "a string", &F.name),
    MC_STRING_FLAG("size", "4GiB", "a size (e.g. 256MB, 4GiB)", &F.size),
    MC_STRING_FLAG("ttl", "10s", "a duration; a bare number is milliseconds", &F.ttl),
    MC_STRING_FLAG("log_level", "info", "debug|info|warn|error|off", &F.log_level),
    MC_FLAGS_END,
};

static int32_t g_dup;
static const struct mc_flag g_bad_flags[] = {
    MC_INT32_FLAG("dup", "1", "first", &g_dup),
    MC_INT32_FLAG("dup", "2", "second", &g_dup),
    MC_FLAGS_END,
};

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--bad_table") == 0) {
        mc_flags_parse(g_bad_flags, "mc_flags_demo --bad_table", &argc, &argv);
        return 0;
    }
    mc_flags_parse(g_flags, "mc_flags_demo [flags] [args]", &argc, &argv);
    mc_flags_apply_log_level("log_level", F.log_level);
    uint64_t size = mc_flags_size("size", F.size);
    uint64_t ttl_ms = mc_flags_duration_ms("ttl", F.ttl, MC_UNIT_MS);

    printf("verbose=%d\n", F.verbose ? 1 : 0);
    printf("i32=%" PRId32 "\n", F.i32);
    printf("u32=%" PRIu32 "\n", F.u32);
    printf("i64=%" PRId64 "\n", F.i64);
    printf("u64=%" PRIu64 "\n", F.u64);
    printf("ratio=%.17g\n", F.ratio);
    printf("name=%s\n", F.name);
    printf("size=%" PRIu64 "\n", size);
    printf("ttl_ms=%" PRIu64 "\n", ttl_ms);
    printf("log_level=%d\n", (int)mc_log_get_level());
    printf("set_i32=%d\n", mc_flags_was_set("i32") ? 1 : 0);
    printf("set_name=%d\n", mc_flags_was_set("name") ? 1 : 0);
    for (int i = 1; i < argc; i++)
        printf("arg=%s\n", argv[i]);
    return 0;
}
