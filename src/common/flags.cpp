/*
 * flags.cpp - the gflags shim behind flags.h.
 *
 * Registration: each table entry becomes a gflags flag through gflags::FlagRegisterer, the same
 * call DEFINE_int32() and friends expand to. For numeric and bool flags the caller's storage *is*
 * gflags' current-value storage, so parsing writes straight into it; string flags live in
 * std::strings the shim allocates (and, like gflags' own, never frees) and the caller's
 * const char * is pointed at them after parsing. Defaults are applied with
 * SetCommandLineOptionWithMode(SET_FLAGS_DEFAULT), so they go through gflags' own parser and
 * --help shows them.
 *
 * Exit codes: gflags ends the process through its exported hook gflags::gflags_exitfunc (status 1
 * after --help and after any parse error). The shim swaps that hook for one whose status depends
 * on the phase: while the command line is parsed (ParseCommandLineNonHelpFlags) any exit is a
 * usage error, status 2; while HandleCommandLineHelpFlags() runs, any exit is the answer to a
 * help or version request, status 0 after flushing stdout.
 */
#include "common/flags.h"

#include <gflags/gflags.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/log.h"

namespace GFLAGS_NAMESPACE
{
/* Defined and exported by libgflags (gflags_reporting.cc); not in its public headers. */
extern void (*gflags_exitfunc)(int);
} // namespace GFLAGS_NAMESPACE

namespace
{

struct string_flag {
    const char **out;
    std::string *value;
};

int g_exit_status = 2;
std::vector<string_flag> *g_strings;

const char *prog_name()
{
    return program_invocation_short_name ? program_invocation_short_name : "program";
}

void shim_exit(int status)
{
    (void)status;
    fflush(stdout);
    if (g_exit_status != 0)
        fprintf(stderr, "%s: bad command line; try --help\n", prog_name());
    fflush(stderr);
    exit(g_exit_status);
}

[[noreturn]] void table_error(const struct mc_flag *f, const char *why)
{
    fprintf(stderr, "%s: flag table entry '%s': %s\n", prog_name(), f->name ? f->name : "(null)",
            why);
    abort();
}

bool valid_name(const char *s)
{
    if (!s || !*s)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
            return false;
    return true;
}

template <typename T> void register_typed(const struct mc_flag *f, const char *file, T *cur)
{
    T *def = new T(*cur);
    GFLAGS_NAMESPACE::FlagRegisterer r(f->name, f->help ? f->help : "", file, cur, def);
    (void)r;
}

void register_one(const struct mc_flag *f, const char *file)
{
    GFLAGS_NAMESPACE::CommandLineFlagInfo info;

    if (!valid_name(f->name))
        table_error(f, "a name is letters, digits and '_'");
    if (!f->ptr)
        table_error(f, "no storage pointer");
    if (GFLAGS_NAMESPACE::GetCommandLineFlagInfo(f->name, &info))
        table_error(
            f, ("a flag of that name is already registered (in " + info.filename + ")").c_str());

    switch (f->type) {
    case MC_FLAG_BOOL:
        *static_cast<bool *>(f->ptr) = false;
        register_typed(f, file, static_cast<bool *>(f->ptr));
        break;
    case MC_FLAG_INT32:
        *static_cast<int32_t *>(f->ptr) = 0;
        register_typed(f, file, reinterpret_cast<GFLAGS_NAMESPACE::int32 *>(f->ptr));
        break;
    case MC_FLAG_UINT32:
        *static_cast<uint32_t *>(f->ptr) = 0;
        register_typed(f, file, reinterpret_cast<GFLAGS_NAMESPACE::uint32 *>(f->ptr));
        break;
    case MC_FLAG_INT64:
        *static_cast<int64_t *>(f->ptr) = 0;
        register_typed(f, file, reinterpret_cast<GFLAGS_NAMESPACE::int64 *>(f->ptr));
        break;
    case MC_FLAG_UINT64:
        *static_cast<uint64_t *>(f->ptr) = 0;
        register_typed(f, file, reinterpret_cast<GFLAGS_NAMESPACE::uint64 *>(f->ptr));
        break;
    case MC_FLAG_DOUBLE:
        *static_cast<double *>(f->ptr) = 0.0;
        register_typed(f, file, static_cast<double *>(f->ptr));
        break;
    case MC_FLAG_STRING: {
        std::string *value = new std::string(f->def ? f->def : "");
        register_typed(f, file, value);
        const char **out = static_cast<const char **>(f->ptr);
        *out = value->c_str();
        g_strings->push_back(string_flag{out, value});
        return;
    }
    default:
        table_error(f, "unknown type");
    }
    if (f->def && *f->def) {
        std::string r = GFLAGS_NAMESPACE::SetCommandLineOptionWithMode(
            f->name, f->def, GFLAGS_NAMESPACE::SET_FLAGS_DEFAULT);
        if (r.empty())
            table_error(f, (std::string("bad default '") + f->def + "' for its type").c_str());
    }
}

} // namespace

extern "C" void mc_flags_parse(const struct mc_flag *table, const char *usage, int *argc,
                               char ***argv)
{
    static bool parsed;
    if (parsed) {
        fprintf(stderr, "%s: mc_flags_parse called twice\n", prog_name());
        abort();
    }
    parsed = true;

    /* gflags names each flag's "file"; "<program>.c" makes --helpshort and
     * --helpon=<program> show exactly this table. */
    const char *base = (*argc > 0 && (*argv)[0]) ? strrchr((*argv)[0], '/') : nullptr;
    base = base ? base + 1 : ((*argc > 0 && (*argv)[0]) ? (*argv)[0] : prog_name());
    const char *file = strdup((std::string(base) + ".c").c_str());

    g_strings = new std::vector<string_flag>();
    for (const struct mc_flag *f = table; f && f->type != MC_FLAG_END; f++)
        register_one(f, file);

    GFLAGS_NAMESPACE::SetUsageMessage(usage ? usage : "");
    GFLAGS_NAMESPACE::SetVersionString(std::string(MC_VERSION_STRING) + " (proto " +
                                       std::to_string(MC_PROTO_VERSION) + ")");
    GFLAGS_NAMESPACE::gflags_exitfunc = shim_exit;

    g_exit_status = 2;
    GFLAGS_NAMESPACE::ParseCommandLineNonHelpFlags(argc, argv, true);
    g_exit_status = 0;
    std::string help;
    if (GFLAGS_NAMESPACE::GetCommandLineOption("help", &help) && help == "true") {
        /* gflags' --help lists its own flags first; show this program's, point at the rest. */
        GFLAGS_NAMESPACE::ShowUsageWithFlagsRestrict((*argv)[0], file);
        printf("\n  (--helpfull also lists gflags' own flags: --flagfile, --fromenv, ...)\n");
        shim_exit(0);
    }
    GFLAGS_NAMESPACE::HandleCommandLineHelpFlags();
    g_exit_status = 2;

    for (const string_flag &s : *g_strings)
        *s.out = s.value->c_str();
}

extern "C" bool mc_flags_was_set(const char *name)
{
    GFLAGS_NAMESPACE::CommandLineFlagInfo info;
    if (!name || !GFLAGS_NAMESPACE::GetCommandLineFlagInfo(name, &info))
        return false;
    return !info.is_default;
}

extern "C" void mc_flags_die(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s: ", prog_name());
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    exit(2);
}

extern "C" uint64_t mc_flags_size(const char *name, const char *value)
{
    char err[256];
    uint64_t v;
    if (mc_parse_size(value, &v, err, sizeof(err)) < 0)
        mc_flags_die("flag --%s must be a size (e.g. 4096, 256MB, 4GiB): %s", name, err);
    return v;
}

extern "C" uint64_t mc_flags_duration_ns(const char *name, const char *value,
                                         enum mc_time_unit bare_unit)
{
    char err[256];
    uint64_t v;
    if (mc_parse_duration_ns(value, bare_unit, &v, err, sizeof(err)) < 0)
        mc_flags_die("flag --%s must be a duration (e.g. 500ms, 10s, 5m, 1h): %s", name, err);
    return v;
}

extern "C" uint64_t mc_flags_duration_ms(const char *name, const char *value,
                                         enum mc_time_unit bare_unit)
{
    return mc_flags_duration_ns(name, value, bare_unit) / 1000000ull;
}

extern "C" void mc_flags_apply_log_level(const char *name, const char *value)
{
    enum mc_log_level level;
    if (mc_log_level_parse(value, &level) < 0)
        mc_flags_die("flag --%s must be one of debug, info, warn, error, off (got '%s')",
                     name ? name : "log_level", value ? value : "");
    mc_log_set_level(level);
}
