/*
 * soak_load.c - the load of scripts/soak.sh: Get / Put / Remove / Remove-then-Put over a
 * Zipf-distributed key set (larger than the cluster's DRAM, so eviction runs all the time),
 * every byte verified and every acknowledged Remove or replacement checked against what later
 * Gets return, while the soak kills and restarts processes under it.
 *
 *   soak_load --master=HOST:PORT --seconds=S [--keys=N] [--value_kb=K] [--threads=T]
 *             [--zipf=A] [--get=P --put=P --remove=P --replace=P] [--seed=X] [--report_s=R]
 *             [--control=FILE] [--grace_ms=G] [--sweep=0|1] [--auth_token_file=FILE]
 *
 * Keys are partitioned by thread: key k is written (Put, Remove, Remove-then-Put) only by
 * thread k % T, so its writer knows every acknowledged operation on it. Any thread reads any
 * key. A value is a 32-byte header {magic, key, writer, sequence (64 bits), length, CRC32C of
 * the payload} and a payload generated from (key, writer, sequence); the writer numbers its
 * Puts of a key 1, 2, 3, ...
 *
 * Per key the writer publishes, after each acknowledgement, the floor: the lowest sequence a
 * Get may still return. A Put acknowledged with sequence s (a new value stored: Puts run with
 * report_existing, so a Put of an existing key is OBJECT_ALREADY_EXISTS and replaces nothing)
 * sets the floor to s; an acknowledged Remove sets it past every sequence attempted so far.
 * A Get loads the floor before it is issued, so the acknowledgement happened-before the Get
 * started; a value it returns with a sequence below that floor is a RESURRECTION (of a removed
 * key, or an older version than an acknowledged replacement). A Put or Remove that failed has
 * an unknown outcome and moves nothing. Misses (OBJECT_NOT_FOUND) are always fine.
 *
 * WRONG BYTES: a Get returned bytes that are not a value ever written for that key (header
 * names another key or writer, a sequence never attempted, the wrong length, a payload that
 * fails its CRC or differs from the regenerated one), or CHECKSUM_MISMATCH (the client's check
 * against the master's CRC caught bytes that are not the value).
 *
 * Faults: the soak appends lines "begin WHAT" before it kills a process, "kill WHAT" right
 * after the SIGKILL and "end WHAT" once the restarted one is READY to the --control file, which the
 * main thread polls every 20 ms. An operation that overlaps a fault window, or starts or ends
 * within --grace_ms (default 5000) after one ended, and fails with a transport or unavailable error
 * (RPC_FAIL, RPC_TIMEOUT, TRANSFER_FAIL, UNAVAILABLE_IN_CURRENT_STATUS) is counted as fault_errors
 * (per code in "fault_codes"), not as an error; fault_error_tail_ms is the latest such error after
 * the end of a window, the grace it needed. Any other error,
 * and any error outside the windows, is an error. REPLICA_IS_NOT_READY (a key being put,
 * offloaded or promoted), OBJECT_HAS_LEASE (a Remove of a key being read) and
 * NO_AVAILABLE_HANDLE (a Put while eviction catches up) are expected outcomes at any time.
 *
 * After the run (--sweep=1, the default) every thread reads each of its keys once more.
 * SIGTERM or SIGINT ends the run early, without the sweep, with the final report.
 *
 * Output: one JSON line per report interval and a final one with "final":true:
 *   {"t_s":..,"ops":..,"gets":..,"hits":..,"puts":..,"puts_ok":..,"exists":..,"removes":..,
 *    "removes_ok":..,"replaces":..,"not_found":..,"not_ready":..,"busy":..,"no_space":..,
 *    "faults":..,"fault_errors":..,"errors":..,"wrong_bytes":..,"checksum_mismatch":..,
 *    "resurrections":..,"resurrected_removed":..,"resurrected_older":..,
 *    "resurrected_in_sweep":..,"resurrected_keys":..,"res_acked_before_master_kill":..,
 *    "res_acked_before_holder_kill":..,"res_acked_after_master_restart":..,
 *    "res_acked_after_holder_restart":..,"res_no_kill":..,"res_ack_to_kill_max_ms":..,
 *    "fault_error_tail_ms":..,"ok_after_faults":..,"bytes_verified":..,
 *    "fault_codes":{"RPC_FAIL":..,..}}
 * The res_* fields split the resurrections by the kill they follow: the first kill whose
 * restarted process was not READY yet when the Remove or replacement was acknowledged (the
 * acknowledgement was lost by that kill), else the last restart before it (a newer value
 * acknowledged by the restarted cluster lost to an older one), else none;
 * res_ack_to_kill_max_ms is the longest time from a lost acknowledgement to the SIGKILL that
 * lost it (the soak writes "kill WHAT" right after it; 20 ms polling). A resurrected key is
 * usually read many times: resurrected_keys counts keys. ok_after_faults counts acknowledged
 * Puts and verified hits that started after the last fault window and its grace: the cluster
 * serves again.
 * Master kills: at "begin master" a thread (dram_check) lists the keys with a complete DRAM
 * copy (one BatchGetReplicaList), and once the restarted master is READY plus --grace_ms reads
 * each once: a hit must be the key's own bytes (else WRONG BYTES: a re-registered range must
 * never hand back another value); dram_before_master_kill counts the listed keys,
 * dram_back_after_master_kill those that read back a value from before the kill (from DRAM
 * re-registered by its holder, or from the LOCAL_DISK tier), dram_missed_after_master_kill
 * those that missed with no acknowledged Put or Remove since the listing (summed over kills).
 * Exit status: 0 when errors, wrong_bytes and resurrections are all 0, 1 otherwise, 2 on bad
 * usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/crc32c.h"
#include "mooncake/client.h"

#define MAGIC 0x4b414f53u /* "SOAK" */
#define HDR 32
#define LOG_MAX 20 /* log lines per kind */

#define MAX_FAULTS 256     /* fault windows remembered, for blame() */
#define MAX_DRAM_CHECKS 64 /* master kills checked by dram_check */

enum {
    RES_NO_KILL,
    RES_BEFORE_MASTER_KILL,
    RES_BEFORE_HOLDER_KILL,
    RES_AFTER_MASTER_RESTART,
    RES_AFTER_HOLDER_RESTART,
    RES_BUCKETS
};

/* What the writer of a key has published; written only by the key's writer thread. */
struct key_state {
    _Atomic uint64_t floor;     /* (lowest sequence a Get may return) << 1 | removed */
    _Atomic uint64_t attempted; /* highest sequence handed to a Put of the key */
    _Atomic uint64_t ack_ms;    /* when the floor last moved (diagnostics) */
    _Atomic int resurrected;    /* counted in res_keys */
};

static struct {
    const char *master, *control, *token;
    int seconds, threads, report_s, sweep;
    uint32_t keys, value_kb;
    double zipf, p_get, p_put, p_rm;
    uint64_t seed, grace_ms, t0;
    double *cdf;
    struct key_state *ks;
    struct mc_client *client;
    _Atomic int stop;
    /* fault windows, written by the main thread */
    _Atomic int fault_active;
    _Atomic uint64_t fault_begins, fault_last_end_ms;
    _Atomic uint64_t ops, gets, hits, puts, puts_ok, exists, removes, removes_ok, replaces,
        not_found, not_ready, busy, no_space, fault_errors, errors, wrong_bytes, checksum_mismatch,
        res_removed, res_older, ok_after_faults, bytes_verified, res_sweep, fault_tail_ms;
    /* the DRAM check of master kills (dram_check): keys with a DRAM copy at "begin master",
     * those of them read back (their own bytes, written before the kill) or missed after it */
    _Atomic uint64_t dram_before_kill, dram_back, dram_missed;
    _Atomic int dram_check_pending; /* set by poll_control at "begin master" */
    /* what fault n (mod 64) was and when it began, set before it is counted */
    char fault_what[MAX_FAULTS][32];
    /* the notice, the SIGKILL ("kill WHAT"), the restarted process READY; 0: not yet */
    _Atomic uint64_t fault_begin_ms[MAX_FAULTS], fault_kill_ms[MAX_FAULTS],
        fault_end_ms[MAX_FAULTS];
    _Atomic uint64_t res_by[RES_BUCKETS], res_keys, res_gap_max_ms; /* see blame() */
} g = {.seconds = 60,
       .threads = 4,
       .report_s = 5,
       .sweep = 1,
       .keys = 4096,
       .value_kb = 128,
       .zipf = 0.9,
       .p_get = 0.5,
       .p_put = 0.25,
       .p_rm = 0.125,
       .seed = 42,
       .grace_ms = 5000};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Milliseconds since the start (never 0 once running, so 0 can mean "never"). */
static uint64_t run_ms(void)
{
    return now_ms() - g.t0 + 1;
}

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s)
{
    return (double)(rng(s) >> 11) / 9007199254740992.0;
}

/* Key index by the Zipf CDF (binary search). */
static uint32_t pick_key(uint64_t *s)
{
    double u = uniform(s);
    uint32_t lo = 0, hi = g.keys - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (g.cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A Zipf-picked key written by thread w (k % threads == w). */
static uint32_t pick_own_key(uint64_t *s, uint32_t w)
{
    uint32_t t = (uint32_t)g.threads, k = pick_key(s);
    k = k - k % t + w;
    return k < g.keys ? k : k - t;
}

/* Value length of a key (varies by key so sizes mix: 1/4 .. 1x value_kb). */
static size_t value_len(uint32_t k)
{
    size_t max = (size_t)g.value_kb << 10;
    return max / 4 + (size_t)((k * 2654435761u) % (3 * max / 4 + 1));
}

static void payload(uint32_t k, uint32_t w, uint64_t seq, uint8_t *p, size_t n)
{
    uint64_t s = ((uint64_t)k << 32) ^ ((uint64_t)w << 24) ^ (seq * 0x100000001b3ull) ^ 0x5eed;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = rng(&s);
        memcpy(p + i, &v, n - i < 8 ? n - i : 8);
    }
}

static void build(uint32_t k, uint32_t w, uint64_t seq, uint8_t *buf, size_t len)
{
    payload(k, w, seq, buf + HDR, len - HDR);
    uint32_t hdr[8] = {MAGIC,
                       k,
                       w,
                       (uint32_t)seq,
                       (uint32_t)(seq >> 32),
                       (uint32_t)len,
                       mc_crc32c(buf + HDR, len - HDR),
                       0};
    memcpy(buf, hdr, HDR);
}

/* The sequence of the value of key k in buf[0..len), or 0 when it is not one (wrong bytes). */
static uint64_t verify(uint32_t k, const uint8_t *buf, size_t len, uint8_t *scratch)
{
    uint32_t hdr[8];
    if (len < HDR)
        return 0;
    memcpy(hdr, buf, HDR);
    uint64_t seq = hdr[3] | (uint64_t)hdr[4] << 32;
    if (hdr[0] != MAGIC || hdr[1] != k || hdr[2] != k % (uint32_t)g.threads || seq == 0 ||
        hdr[5] != len || len != value_len(k) || hdr[6] != mc_crc32c(buf + HDR, len - HDR) ||
        hdr[7] != 0)
        return 0;
    payload(k, hdr[2], seq, scratch, len - HDR);
    return memcmp(scratch, buf + HDR, len - HDR) == 0 ? seq : 0;
}

/* ---- fault windows ------------------------------------------------------------------------ */

struct op_window {
    uint64_t start_ms, begins;
    int active;
};

static void op_begin(struct op_window *w)
{
    w->begins = atomic_load(&g.fault_begins);
    w->active = atomic_load(&g.fault_active);
    w->start_ms = run_ms();
}

/* The operation overlapped a fault window or its grace period. */
static bool op_in_fault(const struct op_window *w)
{
    uint64_t end = atomic_load(&g.fault_last_end_ms);
    return w->active || atomic_load(&g.fault_active) || atomic_load(&g.fault_begins) != w->begins ||
           (end && run_ms() < end + g.grace_ms);
}

/* The operation started after every fault window and its grace (or there was none). */
static bool op_after_faults(const struct op_window *w)
{
    uint64_t end = atomic_load(&g.fault_last_end_ms);
    return !w->active && w->begins == atomic_load(&g.fault_begins) &&
           w->start_ms >= end + g.grace_ms;
}

/* The errors a call may get while a process it needs is down or just back. */
static const int fault_codes[] = {
    MC_ERR_RPC_FAIL,
    MC_ERR_RPC_TIMEOUT,
    MC_ERR_TRANSFER_FAIL,
    MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS,
};
#define N_FAULT_CODES (sizeof(fault_codes) / sizeof(fault_codes[0]))
static _Atomic uint64_t fault_code_count[N_FAULT_CODES];

/* The index of rc in fault_codes, or -1. */
static int fault_code(int rc)
{
    for (size_t i = 0; i < N_FAULT_CODES; i++)
        if (fault_codes[i] == rc)
            return (int)i;
    return -1;
}

/* Reads the control file's new complete lines ("begin WHAT" / "end WHAT"). */
static void poll_control(FILE *f)
{
    char line[256];
    long pos = ftell(f);
    while (fgets(line, sizeof(line), f)) {
        size_t n = strlen(line);
        if (n == 0 || line[n - 1] != '\n') { /* a line still being written: read it next time */
            fseek(f, pos, SEEK_SET);
            break;
        }
        pos = ftell(f);
        if (strncmp(line, "begin ", 6) == 0) {
            char *what = g.fault_what[atomic_load(&g.fault_begins) % MAX_FAULTS];
            snprintf(what, sizeof(g.fault_what[0]), "%.*s", (int)(n - 7), line + 6);
            atomic_store(&g.fault_begin_ms[atomic_load(&g.fault_begins) % MAX_FAULTS], run_ms());
            atomic_store(&g.fault_end_ms[atomic_load(&g.fault_begins) % MAX_FAULTS], 0);
            atomic_store(&g.fault_kill_ms[atomic_load(&g.fault_begins) % MAX_FAULTS], 0);
            atomic_fetch_add(&g.fault_begins, 1);
            atomic_fetch_add(&g.fault_active, 1);
            if (strcmp(what, "master") == 0)
                atomic_store(&g.dram_check_pending, 1);
            fprintf(stderr, "soak_load: t=%.1fs fault begins: %s", (double)run_ms() / 1000, line);
        } else if (strncmp(line, "kill ", 5) == 0) {
            uint64_t nf = atomic_load(&g.fault_begins);
            if (nf)
                atomic_store(&g.fault_kill_ms[(nf - 1) % MAX_FAULTS], run_ms());
        } else if (strncmp(line, "end ", 4) == 0) {
            /* the end time before the window closes: a worker that sees no window active must
             * see its grace (this thread may be preempted between the two) */
            uint64_t nf = atomic_load(&g.fault_begins), end = run_ms();
            if (nf)
                atomic_store(&g.fault_end_ms[(nf - 1) % MAX_FAULTS], end);
            atomic_store(&g.fault_last_end_ms, end);
            if (atomic_load(&g.fault_active) > 0)
                atomic_fetch_sub(&g.fault_active, 1);
            fprintf(stderr, "soak_load: t=%.1fs fault ends: %s", (double)run_ms() / 1000, line);
        }
    }
    clearerr(f);
}

/* ---- DRAM keys across a master kill ----------------------------------------------------- */

/* Run by its own thread for each master kill (the soak writes "begin master" 100 ms before the
 * SIGKILL): lists the keys with a complete DRAM copy and the highest sequence attempted on each,
 * waits until the restarted master is READY plus the grace (the holders re-mount and
 * re-register), then reads each of them once. A hit must be the key's own bytes (else WRONG
 * BYTES) and not older than an acknowledged Remove or replacement (else a RESURRECTION); a hit
 * whose sequence is at or below the highest attempted at the listing is a value from before
 * the kill (dram_back); a miss of a key with no acknowledged Put or Remove since the listing is
 * dram_missed. */
static void *dram_check(void *arg)
{
    (void)arg;
    uint32_t n = g.keys;
    char(*names)[32] = calloc(n, sizeof(*names));
    const char **keys = calloc(n, sizeof(*keys));
    struct mc_object_info *info = calloc(n, sizeof(*info));
    int *res = calloc(n, sizeof(*res));
    uint64_t *seen = calloc(n, sizeof(*seen)), *listed_floor = calloc(n, sizeof(*listed_floor));
    size_t cap = (size_t)g.value_kb << 10; /* value_len's bound */
    uint8_t *buf = malloc(cap), *scratch = malloc(cap);
    if (!names || !keys || !info || !res || !seen || !listed_floor || !buf || !scratch)
        goto out;
    for (uint32_t k = 0; k < n; k++) {
        snprintf(names[k], sizeof(names[k]), "soak/%u", k);
        keys[k] = names[k];
    }
    uint64_t nf = atomic_load(&g.fault_begins);
    if (mc_batch_query(g.client, n, keys, info, res) != 0)
        goto out;
    uint64_t listed = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (res[k] != 0)
            continue;
        bool dram = false;
        for (size_t r = 0; r < info[k].replica_count; r++)
            dram |= info[k].replicas[r].type == MC_REPLICA_MEMORY &&
                    info[k].replicas[r].status == MC_REPLICA_COMPLETE;
        mc_object_info_free(&info[k]);
        if (!dram)
            continue;
        /* after the listing: the listed value's sequence is at or below it */
        seen[k] = atomic_load(&g.ks[k].attempted);
        listed_floor[k] = atomic_load(&g.ks[k].floor);
        listed++;
    }
    atomic_fetch_add(&g.dram_before_kill, listed);
    /* the restarted master READY ("end master"), then the grace */
    while (!atomic_load(&g.stop) &&
           (nf == 0 || atomic_load(&g.fault_end_ms[(nf - 1) % MAX_FAULTS]) == 0)) {
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
    uint64_t until = run_ms() + g.grace_ms;
    while (!atomic_load(&g.stop) && run_ms() < until) {
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
    uint64_t back = 0, missed = 0;
    for (uint32_t k = 0; k < n && !atomic_load(&g.stop); k++) {
        if (!seen[k])
            continue;
        uint64_t floor = atomic_load(&g.ks[k].floor); /* before the Get, as do_get */
        int64_t got = mc_get(g.client, keys[k], buf, cap);
        if (got >= 0) {
            uint64_t seq = verify(k, buf, (size_t)got, scratch);
            if (seq == 0 || seq > atomic_load(&g.ks[k].attempted)) {
                if (atomic_fetch_add(&g.wrong_bytes, 1) < LOG_MAX)
                    fprintf(stderr,
                            "soak_load: t=%.1fs WRONG BYTES in soak/%u after the master kill "
                            "(%" PRId64 " bytes)\n",
                            (double)run_ms() / 1000, k, got);
            } else if (seq < floor >> 1) {
                atomic_fetch_add(floor & 1 ? &g.res_removed : &g.res_older, 1);
                if (!atomic_exchange(&g.ks[k].resurrected, 1))
                    atomic_fetch_add(&g.res_keys, 1);
                fprintf(stderr,
                        "soak_load: t=%.1fs RESURRECTION soak/%u after the master kill: read "
                        "sequence %" PRIu64 ", floor %" PRIu64 "\n",
                        (double)run_ms() / 1000, k, seq, floor >> 1);
            } else if (seq <= seen[k]) {
                back++; /* a value written before the listing, so before the kill */
            }
        } else if (got == MC_ERR_OBJECT_NOT_FOUND && floor == listed_floor[k]) {
            missed++; /* no acknowledged Put or Remove since the listing */
        } else if (got == MC_ERR_CHECKSUM_MISMATCH) {
            atomic_fetch_add(&g.wrong_bytes, 1);
            atomic_fetch_add(&g.checksum_mismatch, 1);
        }
    }
    atomic_fetch_add(&g.dram_back, back);
    atomic_fetch_add(&g.dram_missed, missed);
    fprintf(stderr,
            "soak_load: t=%.1fs master kill: %" PRIu64 " keys had a DRAM copy, %" PRIu64
            " of those read back their own bytes from before the kill, %" PRIu64 " missed\n",
            (double)run_ms() / 1000, listed, back, missed);
out:
    free(names);
    free(keys);
    free(info);
    free(res);
    free(seen);
    free(listed_floor);
    free(buf);
    free(scratch);
    return NULL;
}

/* ---- operations --------------------------------------------------------------------------- */

/* A failed call: expected during a fault, else an error. */
static void count_failure(const char *op, uint32_t k, int rc, const struct op_window *w)
{
    int fc = fault_code(rc);
    if (fc >= 0 && op_in_fault(w)) {
        uint64_t end = atomic_load(&g.fault_last_end_ms), now = run_ms();
        atomic_fetch_add(&fault_code_count[fc], 1);
        /* how long after the last fault ended they still came: the grace needed */
        if (!atomic_load(&g.fault_active) && end && now > end) {
            uint64_t tail = atomic_load(&g.fault_tail_ms);
            while (now - end > tail &&
                   !atomic_compare_exchange_weak(&g.fault_tail_ms, &tail, now - end))
                ;
        }
        if (atomic_fetch_add(&g.fault_errors, 1) < LOG_MAX)
            fprintf(stderr, "soak_load: t=%.1fs %s soak/%u: %s (during a fault)\n",
                    (double)run_ms() / 1000, op, k, mc_strerror(rc));
        return;
    }
    if (atomic_fetch_add(&g.errors, 1) < LOG_MAX)
        fprintf(stderr, "soak_load: t=%.1fs ERROR %s soak/%u: %s (%s)\n", (double)run_ms() / 1000,
                op, k, mc_strerror(rc),
                op_in_fault(w) ? "during a fault, not a transport error" : "no fault");
}

/* Which kill a resurrection follows: the first one whose restart was not READY yet when the
 * acknowledgement came (acknowledged before that kill: lost by it), else the last one that
 * ended before the acknowledgement (a newer value acknowledged by the restarted cluster lost to
 * an older one), else none. Only the faults begun before the Get (nf) count. */
struct blame {
    int bucket; /* RES_* */
    bool before;
    const char *what;
    uint64_t begin, kill, end;
};

static struct blame blame(uint64_t ack, uint64_t nf)
{
    struct blame b = {RES_NO_KILL, false, "", 0, 0, 0};
    uint64_t first = nf > MAX_FAULTS ? nf - MAX_FAULTS : 0;
    for (uint64_t i = first; i < nf; i++) {
        uint64_t end = atomic_load(&g.fault_end_ms[i % MAX_FAULTS]);
        bool master = strcmp(g.fault_what[i % MAX_FAULTS], "master") == 0;
        b.what = g.fault_what[i % MAX_FAULTS];
        b.begin = atomic_load(&g.fault_begin_ms[i % MAX_FAULTS]);
        b.kill = atomic_load(&g.fault_kill_ms[i % MAX_FAULTS]);
        b.end = end;
        if (end == 0 || ack < end) {
            b.before = true;
            b.bucket = master ? RES_BEFORE_MASTER_KILL : RES_BEFORE_HOLDER_KILL;
            return b;
        }
        b.bucket = master ? RES_AFTER_MASTER_RESTART : RES_AFTER_HOLDER_RESTART;
    }
    return b;
}

static void do_get(uint32_t k, uint8_t *buf, uint8_t *scratch, size_t cap, bool sweep)
{
    char key[32];
    struct op_window w;
    snprintf(key, sizeof(key), "soak/%u", k);
    /* loaded before the Get is issued: every acknowledgement it reflects happened before */
    uint64_t floor, ack;
    do { /* ack_ms is for the log lines: the one that goes with this floor */
        floor = atomic_load(&g.ks[k].floor);
        ack = atomic_load(&g.ks[k].ack_ms);
    } while (floor != atomic_load(&g.ks[k].floor));
    atomic_fetch_add(&g.gets, 1);
    op_begin(&w);
    int64_t n = mc_get(g.client, key, buf, cap);
    if (n >= 0) {
        atomic_fetch_add(&g.hits, 1);
        uint64_t seq = verify(k, buf, (size_t)n, scratch);
        if (seq == 0 || seq > atomic_load(&g.ks[k].attempted)) {
            if (atomic_fetch_add(&g.wrong_bytes, 1) < LOG_MAX)
                fprintf(stderr,
                        "soak_load: t=%.1fs WRONG BYTES in soak/%u (%" PRId64
                        " bytes, not a value ever written for it)\n",
                        (double)run_ms() / 1000, k, n);
        } else if (seq < floor >> 1) {
            bool removed = floor & 1;
            _Atomic uint64_t *c = removed ? &g.res_removed : &g.res_older;
            struct blame b = blame(ack, w.begins);
            atomic_fetch_add(&g.res_by[b.bucket], 1);
            if (b.before && b.kill > ack) { /* how long before the kill a lost ack came */
                uint64_t gap = b.kill - ack, max = atomic_load(&g.res_gap_max_ms);
                while (gap > max && !atomic_compare_exchange_weak(&g.res_gap_max_ms, &max, gap))
                    ;
            }
            if (!atomic_exchange(&g.ks[k].resurrected, 1))
                atomic_fetch_add(&g.res_keys, 1);
            if (sweep)
                atomic_fetch_add(&g.res_sweep, 1);
            if (atomic_fetch_add(c, 1) < LOG_MAX)
                fprintf(stderr,
                        "soak_load: t=%.1fs RESURRECTION soak/%u%s: read sequence %" PRIu64
                        ", but %s (floor %" PRIu64 ") was acknowledged at t=%.1fs, %" PRIu64
                        " ms before the Get started; %s %s (down t=%.1fs..%.1fs)\n",
                        (double)w.start_ms / 1000, k, sweep ? " (final sweep)" : "", seq,
                        removed ? "a Remove" : "a newer Put", floor >> 1, (double)ack / 1000,
                        w.start_ms - ack,
                        b.before    ? "acknowledged before the kill of"
                        : b.what[0] ? "acknowledged after the restart of"
                                    : "no kill",
                        b.what, (double)b.begin / 1000, (double)b.end / 1000);
        } else {
            atomic_fetch_add(&g.bytes_verified, (uint64_t)n);
            if (op_after_faults(&w))
                atomic_fetch_add(&g.ok_after_faults, 1);
        }
    } else if (n == MC_ERR_OBJECT_NOT_FOUND) {
        atomic_fetch_add(&g.not_found, 1);
    } else if (n == MC_ERR_REPLICA_IS_NOT_READY) {
        atomic_fetch_add(&g.not_ready, 1);
    } else if (n == MC_ERR_CHECKSUM_MISMATCH) {
        atomic_fetch_add(&g.wrong_bytes, 1);
        if (atomic_fetch_add(&g.checksum_mismatch, 1) < LOG_MAX)
            fprintf(stderr, "soak_load: t=%.1fs WRONG BYTES in soak/%u (CHECKSUM_MISMATCH)\n",
                    (double)run_ms() / 1000, k);
    } else {
        count_failure("get", k, (int)n, &w);
    }
}

/* Puts the next sequence of key k (written only by this thread). */
static void do_put(uint32_t k, uint32_t w_id, uint8_t *buf)
{
    char key[32];
    struct op_window w;
    struct mc_replicate_config rc_cfg;
    struct key_state *ks = &g.ks[k];
    size_t len = value_len(k);
    uint64_t seq = atomic_load(&ks->attempted) + 1;
    snprintf(key, sizeof(key), "soak/%u", k);
    mc_replicate_config_init(&rc_cfg);
    rc_cfg.report_existing = true; /* 0 = this value was stored */
    build(k, w_id, seq, buf, len);
    atomic_store(&ks->attempted, seq); /* before the Put: a reader may see it any time after */
    atomic_fetch_add(&g.puts, 1);
    op_begin(&w);
    int rc = mc_put(g.client, key, buf, len, &rc_cfg);
    if (rc == 0) {
        atomic_store(&ks->ack_ms, run_ms());
        atomic_store(&ks->floor, seq << 1);
        atomic_fetch_add(&g.puts_ok, 1);
        if (op_after_faults(&w))
            atomic_fetch_add(&g.ok_after_faults, 1);
    } else if (rc == MC_ERR_OBJECT_ALREADY_EXISTS) {
        atomic_fetch_add(&g.exists, 1);
    } else if (rc == MC_ERR_NO_AVAILABLE_HANDLE) {
        atomic_fetch_add(&g.no_space, 1);
    } else if (rc == MC_ERR_REPLICA_IS_NOT_READY) {
        atomic_fetch_add(&g.not_ready, 1);
    } else {
        count_failure("put", k, rc, &w); /* unknown outcome: the floor stays */
    }
}

/* Removes key k (written only by this thread); 0 when acknowledged. */
static int do_remove(uint32_t k)
{
    char key[32];
    struct op_window w;
    struct key_state *ks = &g.ks[k];
    snprintf(key, sizeof(key), "soak/%u", k);
    atomic_fetch_add(&g.removes, 1);
    op_begin(&w);
    int rc = mc_remove(g.client, key, false);
    if (rc == 0) {
        atomic_store(&ks->ack_ms, run_ms());
        atomic_store(&ks->floor, (atomic_load(&ks->attempted) + 1) << 1 | 1);
        atomic_fetch_add(&g.removes_ok, 1);
    } else if (rc == MC_ERR_OBJECT_NOT_FOUND) {
        atomic_fetch_add(&g.not_found, 1);
    } else if (rc == MC_ERR_OBJECT_HAS_LEASE) {
        atomic_fetch_add(&g.busy, 1);
    } else if (rc == MC_ERR_REPLICA_IS_NOT_READY) {
        atomic_fetch_add(&g.not_ready, 1);
    } else {
        count_failure("remove", k, rc, &w); /* unknown outcome: the floor stays */
    }
    return rc;
}

static void *worker(void *arg)
{
    uint32_t w_id = (uint32_t)(uintptr_t)arg;
    uint64_t s = g.seed ^ ((uint64_t)(w_id + 1) * 0x100000001b3ull);
    size_t max = (size_t)g.value_kb << 10;
    uint8_t *buf = malloc(max), *scratch = malloc(max);
    if (!buf || !scratch)
        abort();
    while (!atomic_load(&g.stop)) {
        double op = uniform(&s);
        if (op < g.p_get) {
            do_get(pick_key(&s), buf, scratch, max, false);
        } else if (op < g.p_get + g.p_put) {
            do_put(pick_own_key(&s, w_id), w_id, buf);
        } else if (op < g.p_get + g.p_put + g.p_rm) {
            do_remove(pick_own_key(&s, w_id));
        } else {
            /* Remove-then-Put: the new value replaces; read it back at once */
            uint32_t k = pick_own_key(&s, w_id);
            atomic_fetch_add(&g.replaces, 1);
            int rc = do_remove(k);
            if (rc == 0 || rc == MC_ERR_OBJECT_NOT_FOUND) {
                do_put(k, w_id, buf);
                do_get(k, buf, scratch, max, false);
            }
        }
        atomic_fetch_add(&g.ops, 1);
    }
    if (g.sweep) /* every key of this thread once more, now that nothing else changes it */
        for (uint32_t k = w_id; k < g.keys; k += (uint32_t)g.threads)
            do_get(k, buf, scratch, max, true);
    free(buf);
    free(scratch);
    return NULL;
}

static void report(double t, bool final)
{
    const struct {
        const char *name;
        uint64_t v;
    } f[] = {
        {"ops", atomic_load(&g.ops)},
        {"gets", atomic_load(&g.gets)},
        {"hits", atomic_load(&g.hits)},
        {"puts", atomic_load(&g.puts)},
        {"puts_ok", atomic_load(&g.puts_ok)},
        {"exists", atomic_load(&g.exists)},
        {"removes", atomic_load(&g.removes)},
        {"removes_ok", atomic_load(&g.removes_ok)},
        {"replaces", atomic_load(&g.replaces)},
        {"not_found", atomic_load(&g.not_found)},
        {"not_ready", atomic_load(&g.not_ready)},
        {"busy", atomic_load(&g.busy)},
        {"no_space", atomic_load(&g.no_space)},
        {"faults", atomic_load(&g.fault_begins)},
        {"fault_errors", atomic_load(&g.fault_errors)},
        {"errors", atomic_load(&g.errors)},
        {"wrong_bytes", atomic_load(&g.wrong_bytes)},
        {"checksum_mismatch", atomic_load(&g.checksum_mismatch)},
        {"resurrections", atomic_load(&g.res_removed) + atomic_load(&g.res_older)},
        {"resurrected_removed", atomic_load(&g.res_removed)},
        {"resurrected_older", atomic_load(&g.res_older)},
        {"resurrected_in_sweep", atomic_load(&g.res_sweep)},
        {"resurrected_keys", atomic_load(&g.res_keys)},
        {"res_acked_before_master_kill", atomic_load(&g.res_by[RES_BEFORE_MASTER_KILL])},
        {"res_acked_before_holder_kill", atomic_load(&g.res_by[RES_BEFORE_HOLDER_KILL])},
        {"res_acked_after_master_restart", atomic_load(&g.res_by[RES_AFTER_MASTER_RESTART])},
        {"res_acked_after_holder_restart", atomic_load(&g.res_by[RES_AFTER_HOLDER_RESTART])},
        {"res_no_kill", atomic_load(&g.res_by[RES_NO_KILL])},
        {"res_ack_to_kill_max_ms", atomic_load(&g.res_gap_max_ms)},
        {"fault_error_tail_ms", atomic_load(&g.fault_tail_ms)},
        {"ok_after_faults", atomic_load(&g.ok_after_faults)},
        {"bytes_verified", atomic_load(&g.bytes_verified)},
        {"dram_before_master_kill", atomic_load(&g.dram_before_kill)},
        {"dram_back_after_master_kill", atomic_load(&g.dram_back)},
        {"dram_missed_after_master_kill", atomic_load(&g.dram_missed)},
    };
    printf("{\"t_s\":%.1f", t);
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
        printf(",\"%s\":%" PRIu64, f[i].name, f[i].v);
    printf(",\"fault_codes\":{");
    for (size_t i = 0, first = 1; i < N_FAULT_CODES; i++) {
        uint64_t v = atomic_load(&fault_code_count[i]);
        if (v) {
            printf("%s\"%s\":%" PRIu64, first ? "" : ",", mc_strerror(fault_codes[i]), v);
            first = 0;
        }
    }
    printf("}");
    printf("%s}\n", final ? ",\"final\":true" : "");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"master", required_argument, NULL, 'm'},
                                         {"seconds", required_argument, NULL, 's'},
                                         {"keys", required_argument, NULL, 'k'},
                                         {"value_kb", required_argument, NULL, 'v'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"zipf", required_argument, NULL, 'z'},
                                         {"get", required_argument, NULL, 'g'},
                                         {"put", required_argument, NULL, 'p'},
                                         {"remove", required_argument, NULL, 'r'},
                                         {"replace", required_argument, NULL, 'x'},
                                         {"seed", required_argument, NULL, 'S'},
                                         {"report_s", required_argument, NULL, 'R'},
                                         {"control", required_argument, NULL, 'c'},
                                         {"grace_ms", required_argument, NULL, 'G'},
                                         {"sweep", required_argument, NULL, 'w'},
                                         {"auth_token_file", required_argument, NULL, 'a'},
                                         {NULL, 0, NULL, 0}};
    double p_replace = 0.125;
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (c) {
        case 'm':
            g.master = optarg;
            break;
        case 's':
            g.seconds = atoi(optarg);
            break;
        case 'k':
            g.keys = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 'v':
            g.value_kb = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 't':
            g.threads = atoi(optarg);
            break;
        case 'z':
            g.zipf = atof(optarg);
            break;
        case 'g':
            g.p_get = atof(optarg);
            break;
        case 'p':
            g.p_put = atof(optarg);
            break;
        case 'r':
            g.p_rm = atof(optarg);
            break;
        case 'x':
            p_replace = atof(optarg);
            break;
        case 'S':
            g.seed = strtoull(optarg, NULL, 0);
            break;
        case 'R':
            g.report_s = atoi(optarg);
            break;
        case 'c':
            g.control = optarg;
            break;
        case 'G':
            g.grace_ms = strtoull(optarg, NULL, 10);
            break;
        case 'w':
            g.sweep = atoi(optarg);
            break;
        case 'a':
            g.token = optarg;
            break;
        default:
            return 2;
        }
    }
    double sum = g.p_get + g.p_put + g.p_rm + p_replace;
    if (!g.master || g.seconds <= 0 || g.threads < 1 || g.threads > 256 ||
        g.keys < 2 * (uint32_t)g.threads || g.value_kb < 1 || g.p_get < 0 || g.p_put < 0 ||
        g.p_rm < 0 || p_replace < 0 || sum <= 0 || g.report_s <= 0) {
        fprintf(stderr, "usage: soak_load --master=HOST:PORT --seconds=S [options] "
                        "(keys >= 2 x threads, shares >= 0)\n");
        return 2;
    }
    g.p_get /= sum;
    g.p_put /= sum;
    g.p_rm /= sum;
    g.cdf = malloc(sizeof(double) * g.keys);
    g.ks = calloc(g.keys, sizeof(*g.ks));
    if (!g.cdf || !g.ks)
        return 1;
    double acc = 0;
    for (uint32_t i = 0; i < g.keys; i++)
        acc += 1.0 / pow((double)i + 1, g.zipf);
    double run = 0;
    for (uint32_t i = 0; i < g.keys; i++) {
        run += 1.0 / pow((double)i + 1, g.zipf) / acc;
        g.cdf[i] = run;
    }
    g.cdf[g.keys - 1] = 1.0;
    FILE *ctl = NULL;
    if (g.control && !(ctl = fopen(g.control, "r"))) {
        fprintf(stderr, "soak_load: cannot open the control file %s: %s\n", g.control,
                strerror(errno));
        return 2;
    }

    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = g.master;
    cfg.segment_size = 0; /* every byte crosses to a daemon */
    cfg.checksums = true;
    cfg.auth_token_file = g.token; /* NULL: none */
    /* SIGTERM / SIGINT end the run early (no sweep) with the final report; they are blocked
     * in every thread (the client's included) and taken by the main loop only */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    int rc = mc_client_open(&cfg, &g.client);
    if (rc) {
        fprintf(stderr, "soak_load: cannot open the client: %s\n", mc_strerror(rc));
        return 1;
    }
    fprintf(stderr,
            "soak_load: seed %" PRIu64 ", %d threads, %u keys (key k written by thread k %% %d)\n",
            g.seed, g.threads, g.keys, g.threads);
    g.t0 = now_ms();
    pthread_t *th = calloc((size_t)g.threads, sizeof(*th));
    for (int i = 0; i < g.threads; i++)
        pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
    uint64_t next = g.t0 + (uint64_t)g.report_s * 1000;
    pthread_t dram_th[MAX_DRAM_CHECKS];
    int ndram = 0;
    while (now_ms() - g.t0 < (uint64_t)g.seconds * 1000) {
        struct timespec ts = {0, 20 * 1000000};
        int sig = sigtimedwait(&sigs, NULL, &ts);
        if (sig == SIGTERM || sig == SIGINT) {
            fprintf(stderr, "soak_load: stopped by %s at t=%.1fs\n", strsignal(sig),
                    (double)run_ms() / 1000);
            g.sweep = 0;
            break;
        }
        if (ctl)
            poll_control(ctl);
        if (atomic_exchange(&g.dram_check_pending, 0)) {
            if (ndram < MAX_DRAM_CHECKS &&
                pthread_create(&dram_th[ndram], NULL, dram_check, NULL) == 0)
                ndram++;
        }
        if (now_ms() >= next) {
            report((double)(now_ms() - g.t0) / 1000.0, false);
            next += (uint64_t)g.report_s * 1000;
        }
    }
    atomic_store(&g.stop, 1);
    for (int i = 0; i < g.threads; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < ndram; i++)
        pthread_join(dram_th[i], NULL);
    report((double)(now_ms() - g.t0) / 1000.0, true);
    mc_client_close(g.client);
    if (ctl)
        fclose(ctl);
    free(th);
    free(g.cdf);
    free(g.ks);
    return atomic_load(&g.errors) == 0 && atomic_load(&g.wrong_bytes) == 0 &&
                   atomic_load(&g.res_removed) + atomic_load(&g.res_older) == 0
               ? 0
               : 1;
}
