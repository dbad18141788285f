/*
 * client_id.c - the client id persisted in disk_path (see client_id.h).
 */
#include "client/client_id.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/master_conn.h"
#include "common/auth.h"
#include "common/log.h"
#include "mooncake/errors.h"

static int read_id(const char *path, int fd, struct mc_id *out)
{
    char buf[MC_ID_STRLEN + 2];
    ssize_t n;
    size_t len = 0;
    while (len < sizeof(buf) && (n = read(fd, buf + len, sizeof(buf) - len)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            mc_error("client", "cannot read the client id file", "path=%s errno=%d", path, errno);
            return MC_ERR_INTERNAL_ERROR;
        }
        len += (size_t)n;
    }
    /* exactly 32 hex digits, optionally followed by one newline */
    if (len == MC_ID_STRLEN && buf[MC_ID_STRLEN - 1] == '\n')
        len--;
    if (len != MC_ID_STRLEN - 1)
        goto bad;
    buf[len] = '\0';
    if (mc_id_parse(buf, out) != 0 || mc_id_is_zero(*out))
        goto bad;
    return 0;
bad:
    mc_error("client",
             "the client id file is malformed (expected 32 hex digits); fix or remove it, a "
             "new id orphans this directory's disk records",
             "path=%s", path);
    return MC_ERR_INVALID_PARAMS;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes id to path (temp file, fsync, rename, fsync of dir). */
static int write_id(const char *dir, const char *path, struct mc_id id)
{
    char tmp[4200];
    int rc = MC_ERR_INTERNAL_ERROR, fd = -1, dfd = -1;
    if (snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, MC_CLIENT_ID_FILE) >= (int)sizeof(tmp))
        return MC_ERR_INVALID_PARAMS;
    char text[MC_ID_STRLEN + 1];
    mc_id_format(id, text);
    text[MC_ID_STRLEN - 1] = '\n';
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write_all(fd, text, MC_ID_STRLEN) != 0 || fsync(fd) != 0)
        goto out;
    if (close(fd) != 0) {
        fd = -1;
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0)
        goto out;
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0)
        goto out;
    rc = 0;
out:
    if (rc) {
        mc_error("client", "cannot write the client id file", "path=%s errno=%d", path, errno);
        unlink(tmp);
    }
    if (fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    return rc;
}

static int id_path(const char *dir, char *path, size_t cap)
{
    if (!dir || !*dir || snprintf(path, cap, "%s/%s", dir, MC_CLIENT_ID_FILE) >= (int)cap)
        return MC_ERR_INVALID_PARAMS;
    return 0;
}

int mc_client_id_store(const char *dir, struct mc_id id)
{
    char path[4200];
    int rc = id_path(dir, path, sizeof(path));
    return rc ? rc : write_id(dir, path, id);
}

int mc_client_id_load_or_create(const char *dir, struct mc_id *out, bool *created)
{
    char path[4200];
    *created = false;
    if (id_path(dir, path, sizeof(path)))
        return MC_ERR_INVALID_PARAMS;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        mc_error("client", "cannot create the disk directory", "path=%s errno=%d", dir, errno);
        return MC_ERR_INTERNAL_ERROR;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        int rc = read_id(path, fd, out);
        close(fd);
        return rc;
    }
    if (errno != ENOENT) {
        mc_error("client", "cannot open the client id file", "path=%s errno=%d", path, errno);
        return MC_ERR_INTERNAL_ERROR;
    }
    struct mc_id id = mc_id_random();
    int rc = write_id(dir, path, id);
    if (!rc) {
        *out = id;
        *created = true;
    }
    return rc;
}

int mc_client_id_adopt(struct mc_master_conn *mc, struct mc_auth_cred *holder, const char *dir,
                       struct mc_id *id)
{
    uint8_t idb[MC_AUTH_ID_BYTES], cred[MC_AUTH_CRED_BYTES];
    if (!holder || mc_auth_cred_get(holder, idb, cred))
        return 0; /* no token, or a credential to present */
    struct mc_id nid;
    int rc = mc_master_conn_register(mc, &nid, cred);
    if (rc == MC_ERR_NOT_SUPPORTED) {
        mc_warn("client",
                "the master is too old to mint a client id and credential: keeping our own id "
                "(that master gives an id to the first connection that names it)",
                "rc=%s", mc_strerror(rc));
        return 0;
    }
    if (rc) {
        mc_error("client", "cannot register with the master (RegisterClient)", "rc=%s",
                 mc_strerror(rc));
        return rc;
    }
    if (dir && *dir && (rc = mc_client_id_store(dir, nid)) != 0)
        return rc;
    mc_id_to_bytes(nid, idb);
    mc_auth_cred_adopt(holder, idb, cred);
    char was[MC_ID_STRLEN], now[MC_ID_STRLEN];
    mc_info("client", "took the client id the master minted, with its credential",
            "was=%s id=%s kept=%d", mc_id_format(*id, was), mc_id_format(nid, now),
            dir && *dir ? 1 : 0);
    *id = nid;
    return 0;
}
