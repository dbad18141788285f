/*
 * master_internal.h - kept for code written before the floors: the master state
 * (master_state.h) with the client registry and the deferred-free list. New code includes
 * master_state.h and the headers of the modules it uses.
 */
#ifndef MC_MASTER_INTERNAL_H
#define MC_MASTER_INTERNAL_H

#include "master/clients.h"
#include "master/discard.h"
#include "master/master_state.h"

#endif
