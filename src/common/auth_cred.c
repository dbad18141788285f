/*
 * auth_cred.c - the client's holder of its credential (auth.h): what a master handed out, kept
 * in memory and, with a directory, in DIR/client_cred beside DIR/client_id, so a restarted
 * client presents it again. The file holds "<id hex> <cred hex>\n": a file for another id (a
 * directory reused by a new client) is ignored, never trusted.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "common/auth.h"
#include "common/lock_owner.h"
#include "common/mc_assert.h"
#include "common/log.h"

#define HEX_ID (2 * MC_AUTH_ID_BYTES)
#define HEX_CRED (2 * MC_AUTH_CRED_BYTES)
#define FILE_LEN (HEX_ID + 1 + HEX_CRED + 1)

struct mc_auth_cred {
    pthread_mutex_t lock;
    struct mc_lock_owner lock_owner; /* who holds lock (save_locked asserts it) */
    bool set;
    uint8_t id[MC_AUTH_ID_BYTES];
    uint8_t cred[MC_AUTH_CRED_BYTES];
    char *path; /* DIR/client_cred, or NULL */
};

static void to_hex(const uint8_t *b, size_t n, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
}

static int hex_val(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static bool from_hex(const char *s, size_t n, uint8_t *out)
{
    for (size_t i = 0; i < n; i++) {
        int hi = hex_val(s[2 * i]), lo = hex_val(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

/* Reads the file into c when it names c's id. */
static void load(struct mc_auth_cred *c)
{
    char buf[FILE_LEN + 1];
    int fd = open(c->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT)
            mc_warn("client", "cannot read the kept credential", "path=%s errno=%d", c->path,
                    errno);
        return;
    }
    ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    uint8_t id[MC_AUTH_ID_BYTES];
    if (n != FILE_LEN || buf[HEX_ID] != ' ' || buf[FILE_LEN - 1] != '\n' ||
        !from_hex(buf, MC_AUTH_ID_BYTES, id) ||
        !from_hex(buf + HEX_ID + 1, MC_AUTH_CRED_BYTES, c->cred)) {
        mc_warn("client",
                "the kept credential is malformed: ignored (a master hands out a new one)",
                "path=%s", c->path);
        memset(c->cred, 0, sizeof(c->cred));
        return;
    }
    if (memcmp(id, c->id, sizeof(id)) != 0) {
        mc_warn("client", "the kept credential is another client id's: ignored", "path=%s",
                c->path);
        memset(c->cred, 0, sizeof(c->cred));
        return;
    }
    c->set = true;
}

/* Writes c's credential to its file (temp file, fsync, rename). Called with c->lock held. */
static void save_locked(const struct mc_auth_cred *c)
{
    MC_ASSERT(mc_owner_is_me(&c->lock_owner));
    char tmp[PATH_MAX], text[FILE_LEN];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", c->path) >= (int)sizeof(tmp))
        return;
    to_hex(c->id, MC_AUTH_ID_BYTES, text);
    text[HEX_ID] = ' ';
    to_hex(c->cred, MC_AUTH_CRED_BYTES, text + HEX_ID + 1);
    text[FILE_LEN - 1] = '\n';
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && write(fd, text, sizeof(text)) == (ssize_t)sizeof(text) && fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    ok = ok && rename(tmp, c->path) == 0;
    OPENSSL_cleanse(text, sizeof(text));
    if (!ok) {
        mc_warn("client",
                "cannot keep the credential in disk_path (a restart must wait for its old "
                "registration to expire)",
                "path=%s errno=%d", c->path, errno);
        unlink(tmp);
    }
}

struct mc_auth_cred *mc_auth_cred_new(const uint8_t *id, const char *dir)
{
    struct mc_auth_cred *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    pthread_mutex_init(&c->lock, NULL);
    memcpy(c->id, id, sizeof(c->id));
    if (dir && *dir) {
        size_t n = strlen(dir) + sizeof(MC_AUTH_CRED_FILE) + 1;
        c->path = malloc(n);
        if (!c->path) {
            mc_auth_cred_free(c);
            return NULL;
        }
        snprintf(c->path, n, "%s/%s", dir, MC_AUTH_CRED_FILE);
        load(c);
    }
    return c;
}

void mc_auth_cred_free(struct mc_auth_cred *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->lock);
    OPENSSL_cleanse(c->cred, sizeof(c->cred));
    free(c->path);
    free(c);
}

void mc_auth_cred_learn(struct mc_auth_cred *c, const uint8_t *cred, size_t len)
{
    if (!c || !cred || len != MC_AUTH_CRED_BYTES)
        return;
    mc_owner_lock(&c->lock, &c->lock_owner);
    bool changed = !c->set || CRYPTO_memcmp(c->cred, cred, MC_AUTH_CRED_BYTES) != 0;
    if (changed) {
        memcpy(c->cred, cred, MC_AUTH_CRED_BYTES);
        c->set = true;
        if (c->path)
            save_locked(c);
    }
    mc_owner_unlock(&c->lock, &c->lock_owner);
}

void mc_auth_cred_adopt(struct mc_auth_cred *c, const uint8_t *id, const uint8_t *cred)
{
    if (!c)
        return;
    mc_owner_lock(&c->lock, &c->lock_owner);
    memcpy(c->id, id, MC_AUTH_ID_BYTES);
    memcpy(c->cred, cred, MC_AUTH_CRED_BYTES);
    c->set = true;
    if (c->path)
        save_locked(c);
    mc_owner_unlock(&c->lock, &c->lock_owner);
}

bool mc_auth_cred_get(struct mc_auth_cred *c, uint8_t *id, uint8_t *cred)
{
    if (!c)
        return false;
    mc_owner_lock(&c->lock, &c->lock_owner);
    bool set = c->set;
    if (set) {
        memcpy(id, c->id, MC_AUTH_ID_BYTES);
        memcpy(cred, c->cred, MC_AUTH_CRED_BYTES);
    }
    mc_owner_unlock(&c->lock, &c->lock_owner);
    return set;
}
