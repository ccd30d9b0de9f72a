/* sim/boost.h -- the driver's boost controller of each GPU
 * (SimMachine.boost), which moves an SM clock ceiling to hold average
 * board power at a limit (sim/boost.c; sim/replay.c, "Boost
 * controller").  The replay asks it for a kernel's clocks and tells it
 * of every kernel; the two calls made per kernel are inline here.
 * Included by sim/replay.c, sim/boost.c, sim/order.c (which resets it)
 * and sim/engine.c (which allocates it).
 */
#ifndef JOULESIM_SIM_BOOST_H
#define JOULESIM_SIM_BOOST_H

#include "sim/engine-private.h"

/* One GPU's boost controller state (see "Boost controller"). */
typedef struct BoostState {
  double avg_w;     /* power average, valid at t_ns */
  double kernel_w;  /* power of the last kernel seen */
  gint64 t_ns;      /* time of the average */
  gint64 end_ns;    /* end of the last kernel seen */
  gint64 tick_ns;   /* next decision */
  guint16 mhz;      /* the ceiling */
} BoostState;

/* Clocks c under GPU r's current ceiling, the controller not moved. */
static inline SimClocks boost_cap(const SimEngine *e, guint r, SimClocks c)
{
  guint want = c.sm_mhz != 0 ? c.sm_mhz : e->m->boost[r].max_mhz;
  c.sm_mhz = (guint16)MIN(want, (guint)e->boost[r].mhz);
  return c;
}

/* A kernel of GPU r ran until `end` drawing idle + inc: what the
 * controller averages next (ignored when it ends before the last one). */
static inline void boost_note(SimEngine *e, guint r, gint64 end, float inc)
{
  BoostState *b = &e->boost[r];
  if (end <= b->end_ns)
    return;
  b->end_ns = end;
  b->kernel_w = e->ranks[r].idle_w + inc;
}

/* The controller of GPU r up to time t (a kernel's start), then clocks c
 * under its ceiling.  Out of line: it runs only when a decision is due. */
SimClocks sim_boost_clocks(SimEngine *e, guint r, SimClocks c, gint64 t);
/* Every controller as at the start of a run. */
void sim_boost_reset(SimEngine *e);

#endif
