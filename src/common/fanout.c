/* fanout.c - see fanout.h. */
#include "common/fanout.h"

#include <pthread.h>
#include <stdbool.h>

#include "common/log.h"

struct slot {
    pthread_t th;
    bool started;
    size_t first, step, n;
    mc_fanout_fn fn;
    void *arg;
    const struct mc_logger *logger; /* the caller's: a client's lines go to its own logger */
};

static void run_slot(const struct slot *s)
{
    for (size_t i = s->first; i < s->n; i += s->step)
        s->fn(s->arg, i);
}

static void *slot_main(void *p)
{
    const struct slot *s = p;
    mc_log_set_current(s->logger);
    run_slot(s);
    return NULL;
}

void mc_fanout(size_t n, mc_fanout_fn fn, void *arg)
{
    if (n == 0 || !fn)
        return;
    size_t t = n < MC_FANOUT_MAX_THREADS ? n : MC_FANOUT_MAX_THREADS;
    struct slot slots[MC_FANOUT_MAX_THREADS];
    const struct mc_logger *lg = mc_log_current();
    for (size_t k = 0; k < t; k++)
        slots[k] = (struct slot){.first = k, .step = t, .n = n, .fn = fn, .arg = arg, .logger = lg};
    for (size_t k = 1; k < t; k++)
        slots[k].started = pthread_create(&slots[k].th, NULL, slot_main, &slots[k]) == 0;
    run_slot(&slots[0]);
    for (size_t k = 1; k < t; k++) {
        if (slots[k].started)
            pthread_join(slots[k].th, NULL);
        else
            run_slot(&slots[k]);
    }
}
