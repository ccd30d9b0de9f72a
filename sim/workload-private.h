/* sim/workload-private.h -- what sim/workload.c, sim/validate.c and
 * sim/fold.c share.  Not part of the workload API.
 */
#ifndef JOULESIM_SIM_WORKLOAD_PRIVATE_H
#define JOULESIM_SIM_WORKLOAD_PRIVATE_H

#include "sim/workload.h"

/* Position of `rank` among group g's members (ascending, so the index in
 * w->group_ranks), or -1 when it is not one. */
gint64 sim_member_pos(const SimWorkload *w, guint32 g, guint32 rank);

/* Drops what a rank holds: frees its own arrays, or lets go of its
 * program (which stays with w->programs); it is left empty (no ops). */
void sim_rank_release(SimRank *rk);

#endif
