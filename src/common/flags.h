/*
 * flags.h - command-line flags for executables: a C face on gflags.
 *
 * Each executable declares its flags once, as a static table in its main.c, and hands the table
 * to mc_flags_parse(). The shim registers every entry with gflags (so --flagfile=FILE,
 * --helpon=MODULE, --helpxml, --tryfromenv and the other gflags built-ins work as users expect)
 * and parses the command line straight into the storage the table points at:
 *
 *     static struct {
 *         int32_t rpc_port;
 *         bool enable_offload;
 *         double eviction_ratio;
 *         const char *memory_size;   // a size: parsed after mc_flags_parse()
 *         const char *log_level;
 *     } F;
 *     static const struct mc_flag flags[] = {
 *         MC_INT32_FLAG("rpc_port", "50051", "RPC listen port (0 = pick a free one)", &F.rpc_port),
 *         MC_BOOL_FLAG("enable_offload", "false", "offload objects to LOCAL_DISK",
 * &F.enable_offload), MC_DOUBLE_FLAG("eviction_ratio", "0.05", "fraction of DRAM freed per cycle",
 *                        &F.eviction_ratio),
 *         MC_STRING_FLAG("memory_size", "4GiB", "DRAM segment size (e.g. 256MB, 4GiB)",
 *                        &F.memory_size),
 *         MC_STRING_FLAG("log_level", "info", "debug|info|warn|error|off", &F.log_level),
 *         MC_FLAGS_END,
 *     };
 *     int main(int argc, char **argv) {
 *         mc_flags_parse(flags, "mooncake_master [flags]", &argc, &argv);
 *         mc_flags_apply_log_level("log_level", F.log_level);
 *         uint64_t mem = mc_flags_size("memory_size", F.memory_size);
 *         ...
 *
 * Types and storage: bool -> bool, int32 -> int32_t, uint32 -> uint32_t, int64 -> int64_t,
 * uint64 -> uint64_t, double -> double, string -> const char * (the shim owns the characters;
 * the pointer stays valid for the life of the process). The MC_*_FLAG macros check the pointer
 * type at compile time. Defaults are given in the same text form as on the command line ("true",
 * "50051", "0.9", "4GiB"); NULL means false / 0 / "".
 *
 * Exit behaviour (mc_flags_parse never returns in these cases):
 *   --help (this program's flags), --helpfull (gflags' own too), --helpon=M, --helpmatch=S,
 *   --helpxml, --version: print to stdout, exit 0.
 *   an unknown flag, a bad value (--rpc_port=abc), an unreadable --flagfile: gflags prints the
 *   reason ("ERROR: unknown command line flag 'x'") on stderr, exit 2.
 * mc_flags_die() and the size/duration/log-level helpers below also exit 2, with
 * "<program>: flag --NAME must be a size: <reason>" on stderr.
 *
 * Sizes and durations are string flags in the table, parsed after mc_flags_parse() by the one
 * shared parser (common/parse.h): sizes "4096", "256MB", "4GiB", "1.5G" (K/M/G/T, all powers of
 * 1024); durations "500ms", "10s", "5m", "1h", with the caller's unit for a bare number.
 *
 * A table mistake (a duplicate name, a name gflags already uses such as "help", a NULL pointer,
 * a default the type cannot hold) is a programming error: the shim says which entry and aborts.
 * Call mc_flags_parse() once per process, from main; libraries never register or read flags.
 * After it returns, *argc and *argv hold argv[0] followed by the positional (non-flag) arguments.
 */
#ifndef MC_COMMON_FLAGS_H
#define MC_COMMON_FLAGS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/parse.h"

#ifdef __cplusplus
extern "C" {
#endif

enum mc_flag_type {
    MC_FLAG_END = 0, /* terminates a table */
    MC_FLAG_BOOL,
    MC_FLAG_INT32,
    MC_FLAG_UINT32,
    MC_FLAG_INT64,
    MC_FLAG_UINT64,
    MC_FLAG_DOUBLE,
    MC_FLAG_STRING,
};

struct mc_flag {
    const char *name;       /* "rpc_port" (used as --rpc_port) */
    enum mc_flag_type type; /* MC_FLAG_END in the last entry */
    const char *def;        /* default, in command-line text form; NULL = zero / "" */
    const char *help;       /* one line for --help */
    void *ptr;              /* storage of the type above (see the header comment) */
};

#ifndef __cplusplus
/* Table entries with a compile-time check of the storage pointer's type. */
#define MC_FLAG_ENTRY_(n, t, ctype, d, h, p)                                                       \
    {                                                                                              \
        (n), (t), (d), (h), (void *)(1 ? (p) : (ctype *)0)                                         \
    }
#define MC_BOOL_FLAG(n, d, h, p) MC_FLAG_ENTRY_(n, MC_FLAG_BOOL, bool, d, h, p)
#define MC_INT32_FLAG(n, d, h, p) MC_FLAG_ENTRY_(n, MC_FLAG_INT32, int32_t, d, h, p)
#define MC_UINT32_FLAG(n, d, h, p) MC_FLAG_ENTRY_(n, MC_FLAG_UINT32, uint32_t, d, h, p)
#define MC_INT64_FLAG(n, d, h, p) MC_FLAG_ENTRY_(n, MC_FLAG_INT64, int64_t, d, h, p)
#define MC_UINT64_FLAG(n, d, h, p) MC_FLAG_ENTRY_(n, MC_FLAG_UINT64, uint64_t, d, h, p)
#define MC_DOUBLE_FLAG(n, d, h, p) MC_FLAG_ENTRY_(n, MC_FLAG_DOUBLE, double, d, h, p)
#define MC_STRING_FLAG(n, d, h, p) MC_FLAG_ENTRY_(n, MC_FLAG_STRING, const char *, d, h, p)
#define MC_FLAGS_END                                                                               \
    {                                                                                              \
        NULL, MC_FLAG_END, NULL, NULL, NULL                                                        \
    }
#endif

/*
 * Registers the table with gflags and parses *argc and *argv (flags may also come from
 * --flagfile=FILE). usage is the one-line summary --help prints first. The version reported by
 * --version is the project version. Returns only when the program should go on.
 */
void mc_flags_parse(const struct mc_flag *table, const char *usage, int *argc, char ***argv);

/* True when the flag was given (command line or flagfile), false when it kept its default or
 * is unknown. */
bool mc_flags_was_set(const char *name);

/* Prints "<program>: <message>" on stderr and exits with status 2 (bad usage). */
void mc_flags_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Parse a size / duration string flag's value, or die (exit 2) with
 * "flag --NAME must be a size: <reason>". bare_unit is the unit of a number without one. */
uint64_t mc_flags_size(const char *name, const char *value);
uint64_t mc_flags_duration_ms(const char *name, const char *value, enum mc_time_unit bare_unit);
uint64_t mc_flags_duration_ns(const char *name, const char *value, enum mc_time_unit bare_unit);

/* Sets the process log level from a flag value ("debug|info|warn|error|off"), or dies (exit 2). */
void mc_flags_apply_log_level(const char *name, const char *value);

#ifdef __cplusplus
}
#endif
#endif
