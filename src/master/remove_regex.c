/*
 * remove_regex.c - RemoveByRegex (remove_regex.h): one walk over the object table, one shard at
 * a time under its write lock (mc_master_each_object), removing each key the anchored pattern
 * matches with the Remove rules (mc_master_remove_locked). The keys' LOCAL_DISK deletes are
 * recorded for one operation, so the waiting form answers once every holder acknowledged them
 * or was fenced, as RemoveAll does.
 */
#include "master/remove_regex.h"

#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "master/delwait.h"
#include "master/master_internal.h"
#include "master/objects.h"
#include "master/offload.h"
#include "mooncake/errors.h"

struct regex_walk {
    regex_t re;
    bool force;
    uint64_t now;
    struct mc_delop *op;
    char *key; /* NUL-terminated copy of the key being matched (max_key_len + 1 bytes) */
};

static bool regex_visit(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                        struct mc_freelist *fl, void *arg)
{
    struct regex_walk *w = arg;
    memcpy(w->key, mc_obj_key(o), o->key_len);
    w->key[o->key_len] = '\0';
    if (regexec(&w->re, w->key, 0, NULL, 0) != 0)
        return false;
    return mc_master_remove_locked(m, s, o, w->force, w->now, fl, w->op) == MC_OK;
}

/* Compiles ^(pattern)$ into w->re. */
static int compile(struct regex_walk *w, const char *pattern, size_t len)
{
    if (!pattern || len == 0 || len > MC_REGEX_MAX_LEN || memchr(pattern, 0, len))
        return MC_ERR_INVALID_PARAMS;
    char *anchored = malloc(len + 5);
    if (!anchored)
        return MC_ERR_INTERNAL_ERROR;
    anchored[0] = '^';
    anchored[1] = '(';
    memcpy(anchored + 2, pattern, len);
    memcpy(anchored + 2 + len, ")$", 3);
    int e = regcomp(&w->re, anchored, REG_EXTENDED | REG_NOSUB);
    free(anchored);
    if (e != 0) {
        char why[128];
        regerror(e, &w->re, why, sizeof(why));
        mc_info("master", "RemoveByRegex: pattern refused", "len=%zu why=\"%s\"", len, why);
        return MC_ERR_INVALID_PARAMS;
    }
    return MC_OK;
}

static int run(struct mc_master *m, const char *pattern, size_t len, bool force, uint64_t *removed,
               struct mc_delop *op)
{
    struct regex_walk w = {.force = force, .now = mc_master_now_ms(m), .op = op};
    int rc = compile(&w, pattern, len);
    if (rc != MC_OK)
        return rc;
    w.key = malloc((size_t)m->cfg.max_key_len + 1);
    if (!w.key) {
        regfree(&w.re);
        return MC_ERR_INTERNAL_ERROR;
    }
    uint64_t n = mc_master_each_object(m, regex_visit, &w);
    free(w.key);
    regfree(&w.re);
    if (removed)
        *removed = n;
    return MC_OK;
}

int mc_master_remove_by_regex(struct mc_master *m, const char *pattern, size_t len, bool force,
                              uint64_t *removed)
{
    return run(m, pattern, len, force, removed, NULL);
}

int mc_master_remove_by_regex_wait(struct mc_master *m, const char *pattern, size_t len, bool force,
                                   uint64_t *removed, mc_master_done_fn done, void *arg)
{
    struct mc_delwait *dw = mc_offload_delwait(m);
    struct mc_delop *op = NULL;
    if (dw && !(op = mc_delop_new(done, arg)))
        return MC_ERR_INTERNAL_ERROR;
    int rc = run(m, pattern, len, force, removed, op);
    if (!op)
        return rc;
    return mc_delop_seal(dw, op, rc) ? rc : MC_MASTER_PENDING;
}
