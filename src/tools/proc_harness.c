/*
 * proc_harness.c - child processes for the tests and the bench tools. See proc_harness.h.
 */
#include "tools/proc_harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KILL_WAIT_MS 10000 /* after SIGKILL: the kernel tears it down; only a hung box waits */

uint64_t mc_proc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void mc_proc_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int mc_proc_free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

bool mc_proc_local_ipv4(char *out, size_t cap)
{
    struct ifaddrs *ifs = NULL;
    bool found = false;
    if (getifaddrs(&ifs) != 0)
        return false;
    for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) ||
            !(i->ifa_flags & IFF_UP))
            continue;
        found = inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out,
                          (socklen_t)cap) != NULL;
    }
    freeifaddrs(ifs);
    return found;
}

/* ---- spawning ------------------------------------------------------------------------------ */

/* In the child, between fork and exec: async-signal-safe calls only. Never returns. */
static void child_exec(pid_t parent, const char *const *argv, int in_fd, int out_fd, int err_fd)
{
    sigset_t none;

    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(125);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || (err_fd >= 0 && dup2(err_fd, 2) < 0))
        _exit(126);
    execvp(argv[0], (char *const *)argv);
    _exit(127);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

int mc_proc_spawn(struct mc_proc *p, const char *const *argv, const struct mc_proc_io *io)
{
    static const struct mc_proc_io defaults = {0};
    int pfd[2] = {-1, -1}, in_fd = -1, out_fd = -1, err_fd = -1, rc = -1;
    pid_t parent = getpid(), pid;

    if (!io)
        io = &defaults;
    p->pid = 0;
    p->out_fd = -1;
    p->log[0] = '\0';
    if (!argv || !argv[0])
        goto out;
    if (io->err_path)
        snprintf(p->log, sizeof(p->log), "%s", io->err_path);
    in_fd = open(io->in_path ? io->in_path : "/dev/null", O_RDONLY | O_CLOEXEC);
    if (in_fd < 0)
        goto out;
    if (io->out_path) {
        out_fd = open(io->out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    } else if (pipe2(pfd, O_CLOEXEC) == 0) {
        out_fd = pfd[1];
        pfd[1] = -1;
    }
    if (out_fd < 0)
        goto out;
    if (io->err_path) {
        int mode = io->err_append ? O_APPEND : O_TRUNC;
        err_fd = open(io->err_path, O_WRONLY | O_CREAT | mode | O_CLOEXEC, 0600);
        if (err_fd < 0)
            goto out;
    }
    pid = fork();
    if (pid < 0)
        goto out;
    if (pid == 0)
        child_exec(parent, argv, in_fd, out_fd, err_fd);
    p->pid = pid;
    p->out_fd = pfd[0];
    pfd[0] = -1;
    rc = 0;
out:
    close_fd(&pfd[0]);
    close_fd(&pfd[1]);
    close_fd(&in_fd);
    close_fd(&out_fd);
    close_fd(&err_fd);
    return rc;
}

int mc_proc_read_line(struct mc_proc *p, char *line, size_t cap, int timeout_ms)
{
    uint64_t deadline = mc_proc_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    size_t n = 0;

    if (p->out_fd < 0 || cap == 0)
        return -1;
    for (;;) {
        struct pollfd pf = {.fd = p->out_fd, .events = POLLIN};
        uint64_t now = mc_proc_now_ms();
        char c;
        ssize_t r;
        if (now >= deadline)
            return -1;
        if (poll(&pf, 1, (int)(deadline - now)) <= 0)
            continue;               /* EINTR or the deadline: checked above */
        r = read(p->out_fd, &c, 1); /* byte by byte: never read past the line */
        if (r == 0)
            return -1;
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -1;
        }
        if (c == '\n') {
            line[n] = '\0';
            return 0;
        }
        if (n + 1 < cap)
            line[n++] = c;
    }
}

static int decode_status(int st)
{
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return MC_PROC_NOT_RUNNING;
}

/* Waits for pid up to timeout_ms: its decoded status, MC_PROC_TIMEOUT or MC_PROC_NOT_RUNNING. */
static int wait_pid(pid_t pid, int timeout_ms)
{
    uint64_t deadline = mc_proc_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    int st = 0;

    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return decode_status(st);
        if (w < 0 && errno != EINTR)
            return MC_PROC_NOT_RUNNING;
        if (mc_proc_now_ms() >= deadline)
            return MC_PROC_TIMEOUT;
        mc_proc_sleep_ms(5);
    }
}

int mc_proc_wait(struct mc_proc *p, int timeout_ms)
{
    int rc;

    if (p->pid <= 0)
        return MC_PROC_NOT_RUNNING;
    rc = wait_pid(p->pid, timeout_ms);
    if (rc != MC_PROC_TIMEOUT)
        p->pid = 0;
    return rc;
}

int mc_proc_stop(struct mc_proc *p, int sig, int timeout_ms)
{
    int rc = MC_PROC_NOT_RUNNING;

    if (p->pid > 0) {
        kill(p->pid, sig);
        rc = wait_pid(p->pid, timeout_ms);
        if (rc == MC_PROC_TIMEOUT) {
            kill(p->pid, SIGKILL);
            rc = wait_pid(p->pid, KILL_WAIT_MS);
            if (rc >= 0 && sig != SIGKILL)
                rc = MC_PROC_KILLED; /* never a clean exit */
        }
        p->pid = 0;
    }
    close_fd(&p->out_fd);
    return rc;
}

int mc_proc_run(const char *const *argv, const struct mc_proc_io *io, int timeout_ms)
{
    struct mc_proc p;
    struct mc_proc_io o = io ? *io : (struct mc_proc_io){0};
    int rc;

    if (!o.out_path)
        o.out_path = "/dev/null"; /* no pipe: nobody would drain it */
    if (mc_proc_spawn(&p, argv, &o) != 0)
        return MC_PROC_NOT_RUNNING;
    rc = mc_proc_wait(&p, timeout_ms);
    if (rc == MC_PROC_TIMEOUT) {
        mc_proc_stop(&p, SIGKILL, KILL_WAIT_MS);
        return MC_PROC_TIMEOUT;
    }
    return rc;
}

void mc_proc_dump_log(const struct mc_proc *p, const char *what, size_t max_bytes)
{
    FILE *f = p->log[0] ? fopen(p->log, "rb") : NULL;
    char buf[4096];
    long size;
    size_t n;

    if (!f)
        return;
    if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 0) {
        long from = (size_t)size > max_bytes ? size - (long)max_bytes : 0;
        fprintf(stderr, "---- %s log (%s), last bytes ----\n", what, p->log);
        fseek(f, from, SEEK_SET);
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
            fwrite(buf, 1, n, stderr);
        fprintf(stderr, "\n----\n");
    }
    fclose(f);
}

/* ---- READY lines --------------------------------------------------------------------------- */

int mc_proc_await_ready(struct mc_proc *p, struct mc_proc_ready *r, int timeout_ms)
{
    char line[sizeof(r->line)];

    memset(r, 0, sizeof(*r));
    if (mc_proc_read_line(p, line, sizeof(line), timeout_ms) != 0)
        return -1;
    return mc_proc_parse_ready(line, r) == 0 ? 0 : -2;
}

int mc_proc_start(struct mc_proc *p, const char *const *argv, const struct mc_proc_io *io,
                  enum mc_proc_ready_kind kind, struct mc_proc_ready *r, int timeout_ms)
{
    memset(r, 0, sizeof(*r));
    if (mc_proc_spawn(p, argv, io) != 0)
        return -1;
    if (mc_proc_await_ready(p, r, timeout_ms) == 0 && r->kind == kind)
        return 0;
    mc_proc_dump_log(p, argv[0], 4000);
    mc_proc_stop(p, SIGKILL, KILL_WAIT_MS);
    return -1;
}

/* ---- temporary directories ----------------------------------------------------------------- */

int mc_proc_mkdtemp(char *out, size_t cap, const char *parent, const char *prefix)
{
    const char *tmp = getenv("TMPDIR");
    int n;

    if (!parent)
        parent = tmp && tmp[0] ? tmp : "/tmp";
    n = snprintf(out, cap, "%s/%s.XXXXXX", parent, prefix);
    if (n < 0 || (size_t)n >= cap || !mkdtemp(out)) {
        if (cap)
            out[0] = '\0';
        return -1;
    }
    return 0;
}

void mc_proc_rm_rf(const char *path)
{
    struct stat st;
    struct dirent *e;
    DIR *d;

    if (!path || lstat(path, &st) != 0)
        return;
    if (!S_ISDIR(st.st_mode)) { /* a file or a link: the link itself goes */
        unlink(path);
        return;
    }
    d = opendir(path);
    if (d) {
        while ((e = readdir(d)) != NULL) {
            char sub[PATH_MAX];
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            if (snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name) >= (int)sizeof(sub))
                continue;
            mc_proc_rm_rf(sub);
        }
        closedir(d);
    }
    rmdir(path);
}
