/* fanout.c - see fanout.h.
 *
 * A process-wide pool of helper threads, started on demand and kept while they are used (a
 * thread idle for POOL_IDLE_SEC exits): a batch Get fans out on every call, and starting and
 * joining a thread each time cost as much as a tenth of a small Get on a loaded 2-core machine.
 *
 * A call splits its tasks into t slots (slot k runs tasks k, k + t, ...), runs slot 0 itself
 * and offers slots 1..t-1 in the queue. For every offered slot there is a thread that will look
 * at the queue: a waiting one is woken, or a new one is started when no waiting or starting
 * thread is left over (up to POOL_MAX_THREADS). A thread claims the first unclaimed slot it
 * finds and runs it. Once slot 0 is done, the caller claims and runs any of its slots that no
 * thread has taken yet (so a full pool, a failed thread start or a slow wake-up costs time,
 * never progress), then waits for the slots helpers still run. The job lives on the caller's
 * stack: helpers touch it only between their claim and their finish, both under the lock, and
 * the caller returns only when no helper holds a slot of it.
 *
 * fork: the child of a process with helpers has none of them; the pool's state is reset there
 * (pthread_atfork) and its lock is taken across the fork so that it is never copied held.
 *
 * The lock is the last leaf of the lock order (common/lock_order.h, MC_LO_FANOUT): every take and
 * drop goes through pool_lock / pool_unlock, and the `_locked` functions assert it is held. A
 * condition wait keeps it recorded as held, which it is again when the wait returns.
 */
#include "common/fanout.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "common/lock_order.h"
#include "common/log.h"
#include "common/mc_assert.h"

#define POOL_MAX_THREADS 64
#define POOL_IDLE_SEC 30

struct job {
    mc_fanout_fn fn;
    void *arg;
    size_t n, t;
    size_t next_slot; /* the next slot nobody has claimed (slots 1..t-1 are offered) */
    size_t running;   /* slots claimed by helpers and not finished */
    const struct mc_logger *logger; /* the caller's: a client's lines go to its own logger */
    struct job *next;               /* in the queue while it has unclaimed slots */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER; /* helpers wait here for slots */
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER; /* callers wait here for helpers */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct job *queue;
static size_t pending;  /* offered slots nobody has claimed, all jobs */
static size_t waiting;  /* helpers waiting on work_cv */
static size_t starting; /* helpers started that have not looked at the queue yet */
static size_t nthreads; /* helpers alive */

static void pool_lock(void)
{
    mc_lo_acquire(MC_LO_FANOUT, 0);
    pthread_mutex_lock(&mu);
}

static void pool_unlock(void)
{
    pthread_mutex_unlock(&mu);
    mc_lo_release(MC_LO_FANOUT, 0);
}

#define POOL_ASSERT_LOCKED() MC_ASSERT(mc_lo_holds(MC_LO_FANOUT, 0, false))

static void run_slot(const struct job *j, size_t slot)
{
    for (size_t i = slot; i < j->n; i += j->t)
        j->fn(j->arg, i);
}

static void unqueue_locked(struct job *j)
{
    POOL_ASSERT_LOCKED();
    for (struct job **p = &queue; *p; p = &(*p)->next)
        if (*p == j) {
            *p = j->next;
            return;
        }
}

/* Claims j's next slot (one is left). */
static size_t claim_locked(struct job *j)
{
    POOL_ASSERT_LOCKED();
    size_t slot = j->next_slot++;
    pending--;
    if (j->next_slot == j->t)
        unqueue_locked(j);
    return slot;
}

static void *helper_main(void *unused)
{
    (void)unused;
    pool_lock();
    starting--;
    for (;;) {
        if (queue) {
            struct job *j = queue;
            size_t slot = claim_locked(j);
            j->running++;
            pool_unlock();
            const struct mc_logger *prev = mc_log_set_current(j->logger);
            run_slot(j, slot);
            mc_log_set_current(prev);
            pool_lock();
            if (--j->running == 0)
                pthread_cond_broadcast(&done_cv); /* j is not touched after this */
            continue;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += POOL_IDLE_SEC;
        waiting++;
        int rc = pthread_cond_timedwait(&work_cv, &mu, &until);
        waiting--;
        if (rc == ETIMEDOUT && !queue)
            break;
    }
    nthreads--;
    pool_unlock();
    return NULL;
}

/* Makes sure k more offered slots each have a thread that will look at the queue. */
static void find_helpers_locked(size_t k)
{
    POOL_ASSERT_LOCKED();
    size_t ready = waiting + starting; /* each takes a slot before it waits again */
    size_t need = pending > ready ? pending - ready : 0;
    for (size_t i = 0; i < k && i < waiting; i++)
        pthread_cond_signal(&work_cv);
    while (need > 0 && nthreads < POOL_MAX_THREADS) {
        pthread_attr_t a;
        pthread_t th;
        if (pthread_attr_init(&a) != 0)
            return;
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &a, helper_main, NULL);
        pthread_attr_destroy(&a);
        if (rc != 0)
            return; /* the caller runs what no helper takes */
        nthreads++;
        starting++;
        need--;
    }
}

static void before_fork(void)
{
    pool_lock();
}

static void after_fork_parent(void)
{
    pool_unlock();
}

static void after_fork_child(void)
{
    /* no helper exists here; a job in the queue belongs to a thread that does not either */
    queue = NULL;
    pending = waiting = starting = nthreads = 0;
    pthread_cond_init(&work_cv, NULL);
    pthread_cond_init(&done_cv, NULL);
    pool_unlock(); /* taken by before_fork on this very thread */
}

size_t mc_fanout_threads(void)
{
    pool_lock();
    size_t n = nthreads;
    pool_unlock();
    return n;
}

static void pool_init(void)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

void mc_fanout(size_t n, mc_fanout_fn fn, void *arg)
{
    if (n == 0 || !fn)
        return;
    size_t t = n < MC_FANOUT_MAX_THREADS ? n : MC_FANOUT_MAX_THREADS;
    struct job j = {
        .fn = fn, .arg = arg, .n = n, .t = t, .next_slot = 1, .logger = mc_log_current()};
    if (t > 1) {
        pthread_once(&once, pool_init);
        pool_lock();
        j.next = queue; /* newest first: a later caller's slots are not stuck behind */
        queue = &j;
        pending += t - 1;
        find_helpers_locked(t - 1);
        pool_unlock();
    }
    run_slot(&j, 0);
    if (t == 1)
        return;
    pool_lock();
    while (j.next_slot < t) {
        size_t slot = claim_locked(&j);
        pool_unlock();
        run_slot(&j, slot);
        pool_lock();
    }
    while (j.running > 0)
        pthread_cond_wait(&done_cv, &mu);
    pool_unlock();
}
