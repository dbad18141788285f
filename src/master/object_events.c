/*
 * object_events.c - registration of the object events' subscribers (object_events.h); the
 * dispatch itself is inline in the header.
 */
#include "master/object_events.h"

#include <stddef.h>

/* Whether sub handles ev. */
static bool handles(const struct mc_obj_subscriber *sub, enum mc_obj_event ev)
{
    switch (ev) {
    case MC_OBJ_EV_PUT_END:
        return sub->put_end != NULL;
    case MC_OBJ_EV_READ:
        return sub->read != NULL;
    case MC_OBJ_EV_REMOVE_CLAIM:
        return sub->remove_claim != NULL;
    case MC_OBJ_EV_BEFORE_REMOVE:
        return sub->before_remove != NULL;
    case MC_OBJ_EV_ERASED:
        return sub->erased != NULL;
    case MC_OBJ_EV_EVICT_CHOSEN:
        return sub->evict_chosen != NULL;
    case MC_OBJ_EV_EVICT_CYCLE_BEGIN:
        return sub->evict_cycle_begin != NULL;
    case MC_OBJ_EV_EVICT_CYCLE_END:
        return sub->evict_cycle_end != NULL;
    case MC_OBJ_EV_REPLICA_DROPPING:
        return sub->replica_dropping != NULL;
    case MC_OBJ_EV_CLIENT_EXPIRED:
        return sub->client_expired != NULL;
    case MC_OBJ_EV_HOLDER_REMOUNTED:
        return sub->holder_remounted != NULL;
    case MC_OBJ_EV_UNLOCKED:
        return sub->unlocked != NULL;
    case MC_OBJ_EV_COUNT:
        break;
    }
    return false;
}

int mc_obj_events_register(struct mc_master *m, const struct mc_obj_subscriber *sub)
{
    struct mc_obj_events_tab *t = &m->events;
    for (int ev = 0; ev < MC_OBJ_EV_COUNT; ev++)
        if (handles(sub, (enum mc_obj_event)ev) && t->n[ev] == MC_OBJ_SUBS_MAX)
            return -1; /* nothing registered: all or none */
    for (int ev = 0; ev < MC_OBJ_EV_COUNT; ev++)
        if (handles(sub, (enum mc_obj_event)ev))
            t->sub[ev][t->n[ev]++] = sub;
    return 0;
}
