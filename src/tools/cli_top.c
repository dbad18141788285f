/*
 * cli_top.c - `mooncake_cli top`: a one-screen live view of the cluster, refreshed every second.
 *
 * Each frame is two admin RPCs on one connection to the master (GetStats, ListSegments: no
 * lease, no client registration), drawn from the top of the screen:
 *
 *   mooncake top  master 127.0.0.1:50051  up 1h02m  refresh 1s          2026-12-01 11:40:02
 *   keys 1234 (+12/s)   DRAM 1.2GiB / 4GiB used (30.0%)   segments 2   clients 3
 *   ops/s  put 12.0  get 40.0  exist 0.0  remove 0.0
 *   evicted  keys 10 (+0/s)  bytes 1.2MiB  cycles 3 of 5 attempted
 *   offload  queued n/a  done n/a        promotion  admitted 0  in flight 0  done 0
 *
 *   SEGMENT              ENDPOINT          USED       SIZE      USE%  STATUS  KEYS
 *   127.0.0.1:41234      127.0.0.1:41234   120MiB     1GiB      11.7  ok      345  [##.......]
 *
 * Rates are deltas between two frames. The offload/promotion funnel shows "n/a" for every
 * counter the master does not export (it looks them up by metric name in GetStats' extras).
 * Segments beyond the terminal's height are summarised in one line. A master that stops
 * answering is shown as such and retried every frame.
 *
 * Keys (when stdin is a terminal, read without echo): q quits; any other key redraws now.
 * SIGINT/SIGTERM quit too; the terminal is restored either way. --iterations N draws N frames
 * and exits (scripts, tests); without a terminal on stdout frames follow one another.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/parse.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "tools/cli.h"

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

struct sample {
    uint64_t at_ms;
    bool ok;
    double keys, puts, gets, exists, removes, evicted;
};

static bool extra(const Mc__GetStatsResponse *s, const char *name, double *out)
{
    for (size_t i = 0; i < s->n_extra; i++)
        if (s->extra[i]->name && !strcmp(s->extra[i]->name, name)) {
            *out = s->extra[i]->value;
            return true;
        }
    return false;
}

static double extra_or0(const Mc__GetStatsResponse *s, const char *name)
{
    double v = 0;
    extra(s, name, &v);
    return v;
}

/* "123" or "n/a" when the master does not export name. */
static const char *counter(const Mc__GetStatsResponse *s, const char *name, char *buf, size_t cap)
{
    double v;
    if (!extra(s, name, &v))
        return "n/a";
    snprintf(buf, cap, "%.0f", v);
    return buf;
}

static void rate(char *buf, size_t cap, double now, double before, double dt_s, bool have)
{
    if (!have || dt_s <= 0)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%.1f", (now - before) / dt_s);
}

static void uptime(uint64_t ms, char *buf, size_t cap)
{
    uint64_t s = ms / 1000;
    if (s >= 86400)
        snprintf(buf, cap, "%llud%02lluh", (unsigned long long)(s / 86400),
                 (unsigned long long)(s % 86400 / 3600));
    else if (s >= 3600)
        snprintf(buf, cap, "%lluh%02llum", (unsigned long long)(s / 3600),
                 (unsigned long long)(s % 3600 / 60));
    else
        snprintf(buf, cap, "%llum%02llus", (unsigned long long)(s / 60),
                 (unsigned long long)(s % 60));
}

static void bar(char *buf, size_t width, double frac)
{
    size_t fill = (size_t)(frac * (double)width + 0.5);
    if (fill > width)
        fill = width;
    buf[0] = '[';
    for (size_t i = 0; i < width; i++)
        buf[1 + i] = i < fill ? '#' : '.';
    buf[1 + width] = ']';
    buf[2 + width] = '\0';
}

static void draw(FILE *out, const struct mc_cli_opts *o, const Mc__GetStatsResponse *st,
                 const Mc__ListSegmentsResponse *ls, const char *err, const struct sample *prev,
                 const struct sample *cur, int rows, bool tty)
{
    char ts[32], up[32], a[32], b[32], c[32], d[32], e[32];
    time_t now = time(NULL);
    struct tm tmv;
    localtime_r(&now, &tmv);
    strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tmv);
    if (tty)
        fputs("\033[H\033[2J", out); /* home, clear */
    int used_rows = 0;
    if (!st) {
        fprintf(out,
                "mooncake top  master %s  %s\n\nmaster not answering: %s (retrying every "
                "second; q quits)\n",
                o->master, ts, err ? err : "?");
        fflush(out);
        return;
    }
    uptime(st->uptime_ms, up, sizeof(up));
    fprintf(out, "mooncake top  master %s  version %s  up %s  refresh 1s  %s\n", o->master,
            st->version ? st->version : "?", up, ts);
    double dt = prev->ok ? (double)(cur->at_ms - prev->at_ms) / 1000.0 : 0;
    rate(a, sizeof(a), cur->keys, prev->keys, dt, prev->ok);
    mc_format_size(st->allocated_bytes, b, sizeof(b));
    mc_format_size(st->capacity_bytes, c, sizeof(c));
    fprintf(out, "keys %llu (%s/s)   DRAM %s / %s used (%.1f%%)   segments %llu   clients %llu\n",
            (unsigned long long)st->key_count, a, b, c,
            st->capacity_bytes ? 100.0 * (double)st->allocated_bytes / (double)st->capacity_bytes
                               : 0.0,
            (unsigned long long)st->segment_count, (unsigned long long)st->client_count);
    rate(a, sizeof(a), cur->puts, prev->puts, dt, prev->ok);
    rate(b, sizeof(b), cur->gets, prev->gets, dt, prev->ok);
    rate(c, sizeof(c), cur->exists, prev->exists, dt, prev->ok);
    rate(d, sizeof(d), cur->removes, prev->removes, dt, prev->ok);
    fprintf(out, "ops/s    put %s  get %s  exist %s  remove %s\n", a, b, c, d);
    rate(a, sizeof(a), cur->evicted, prev->evicted, dt, prev->ok);
    mc_format_size((uint64_t)extra_or0(st, "master_evicted_size_bytes"), b, sizeof(b));
    fprintf(out, "evicted  keys %.0f (%s/s)  bytes %s  cycles %.0f of %.0f attempted\n",
            cur->evicted, a, b, extra_or0(st, "master_successful_evictions_total"),
            extra_or0(st, "master_attempted_evictions_total"));
    fprintf(out, "offload  queued %s  done %s", counter(st, "master_offload_queued_total", a, 32),
            counter(st, "master_offload_completed_total", b, 32));
    fprintf(out, "    promotion  admitted %s  in flight %s  done %s\n",
            counter(st, "master_promotion_admitted_total", c, 32),
            counter(st, "master_promotion_in_flight", d, 32),
            counter(st, "master_promotion_completed_total", e, 32));
    used_rows = 6;
    if (err)
        fprintf(out, "segments: %s\n", err);
    if (!ls) {
        fflush(out);
        return;
    }
    fprintf(out, "\n");
    struct mc_cli_table t;
    mc_cli_table_init(&t, 8);
    mc_cli_table_row(&t, "SEGMENT", "ENDPOINT", "USED", "SIZE", "USE%", "STATUS", "KEYS", "");
    size_t room = rows > used_rows + 3 ? (size_t)(rows - used_rows - 3) : 1;
    size_t shown = ls->n_segments <= room ? ls->n_segments : (room > 1 ? room - 1 : 1);
    for (size_t i = 0; i < ls->n_segments && i < shown; i++) {
        const Mc__SegmentInfo *s = ls->segments[i];
        char u[32], sz[32], pct[16], keys[32], br[40];
        double frac = s->size ? (double)s->used / (double)s->size : 0;
        mc_format_size(s->used, u, sizeof(u));
        mc_format_size(s->size, sz, sizeof(sz));
        snprintf(pct, sizeof(pct), "%.1f", 100.0 * frac);
        snprintf(keys, sizeof(keys), "%llu", (unsigned long long)s->replica_count);
        bar(br, 20, frac);
        mc_cli_table_row(&t, s->name ? s->name : "", s->endpoint ? s->endpoint : "", u, sz, pct,
                         mc_cli_segment_status_name(s->status), keys, br);
    }
    mc_cli_table_print(&t, out);
    mc_cli_table_destroy(&t);
    if (shown < ls->n_segments)
        fprintf(out, "... %zu more segment(s) (a taller terminal shows them)\n",
                ls->n_segments - shown);
    if (ls->n_segments == 0)
        fprintf(out, "(no segment mounted)\n");
    fflush(out);
}

static int connect_master(const struct mc_cli_opts *o, struct mc_rpc_client **c)
{
    if (*c)
        return 0;
    return mc_cli_admin_connect(o, c);
}

/* Waits up to ms for a key on stdin (when it is a terminal); returns 'q' to quit. */
static int wait_key(bool keys, int ms)
{
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    uint64_t end = mc_now_ms() + (uint64_t)ms;
    while (!g_stop) {
        uint64_t now = mc_now_ms();
        if (now >= end)
            return 0;
        int n = poll(keys ? &p : NULL, keys ? 1 : 0, (int)(end - now));
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0) {
            char ch;
            if (read(STDIN_FILENO, &ch, 1) != 1)
                return 'q'; /* stdin closed */
            return ch == 'q' || ch == 'Q' ? 'q' : 'r';
        }
        if (n < 0)
            return 0;
    }
    return 'q';
}

int mc_cli_top(const struct mc_cli_opts *o)
{
    bool tty = isatty(STDOUT_FILENO), keys = isatty(STDIN_FILENO);
    struct termios saved, raw;
    struct mc_rpc_client *c = NULL;
    struct sample prev = {0}, cur = {0};
    struct sigaction sa = {.sa_handler = on_signal};
    int frames = 0;

    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (keys && tcgetattr(STDIN_FILENO, &saved) == 0) {
        raw = saved;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    } else {
        keys = false;
    }
    if (tty)
        fputs("\033[?25l", stdout); /* hide the cursor */
    while (!g_stop) {
        Mc__GetStatsRequest sreq = MC__GET_STATS_REQUEST__INIT;
        Mc__ListSegmentsRequest lreq = MC__LIST_SEGMENTS_REQUEST__INIT;
        ProtobufCMessage *st = NULL, *ls = NULL;
        const char *err = NULL;
        int rows = 24, rc;
        struct winsize ws;
        if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0)
            rows = ws.ws_row;

        rc = connect_master(o, &c);
        if (!rc)
            rc = mc_rpc_client_call_msg(c, MC_METHOD_GET_STATS, &sreq.base,
                                        &mc__get_stats_response__descriptor, 0, &st);
        if (rc) {
            err = mc_strerror(rc);
        } else {
            const Mc__GetStatsResponse *s = (const Mc__GetStatsResponse *)st;
            cur.at_ms = mc_now_ms();
            cur.ok = true;
            cur.keys = (double)s->key_count;
            cur.puts = extra_or0(s, "master_put_start_requests_total");
            cur.gets = extra_or0(s, "master_get_replica_list_requests_total");
            cur.exists = extra_or0(s, "master_exist_key_requests_total");
            cur.removes = extra_or0(s, "master_remove_requests_total");
            cur.evicted = extra_or0(s, "master_evicted_key_count");
            rc = mc_rpc_client_call_msg(c, MC_METHOD_LIST_SEGMENTS, &lreq.base,
                                        &mc__list_segments_response__descriptor, 0, &ls);
            if (rc)
                err = mc_strerror(rc);
        }
        if (!tty && frames > 0)
            fputc('\n', stdout); /* frames one after another: a blank line between them */
        draw(stdout, o, (const Mc__GetStatsResponse *)st, (const Mc__ListSegmentsResponse *)ls, err,
             &prev, &cur, rows, tty);
        if (st) {
            prev = cur;
        } else {
            prev.ok = false;
            mc_rpc_client_free(c); /* reconnect next frame */
            c = NULL;
        }
        if (st)
            protobuf_c_message_free_unpacked(st, NULL);
        if (ls)
            protobuf_c_message_free_unpacked(ls, NULL);
        if (o->iterations && ++frames >= o->iterations)
            break;
        if (wait_key(keys, 1000) == 'q')
            break;
    }
    mc_rpc_client_free(c);
    if (tty)
        fputs("\033[?25h", stdout); /* show the cursor */
    if (keys)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    fflush(stdout);
    return MC_CLI_EXIT_OK;
}
