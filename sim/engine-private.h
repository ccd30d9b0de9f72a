/* sim/engine-private.h -- the engine object (struct SimEngine) that the
 * engine's files share, and the prototypes they call each other by.  Not
 * part of the engine's API: only the files of sim/ named below include
 * it (directly or through sim/boost.h), and the engine tests that look
 * inside.
 *
 * The files
 * ---------
 *   engine.c   creating and freeing an engine, sim_engine_run (iterations,
 *              totals, folded weighting)
 *   plan.c     SimPlan construction, its checks and the latency look-ahead
 *              (sim/plan.h)
 *   replay.c   the dataflow core of one iteration: pricing, clock
 *              switches, the op log, matching communication (sim/replay.h)
 *   order.c    the order an iteration replays in, the event-queue and
 *              eager drivers, the put-back
 *   lanes.c    the lanes and the threaded driver (sim/lanes.h)
 *   boost.c    the boost controller (sim/boost.h)
 *   account.c  one rank's energy and time partition from the op log
 *              (sim/oplog.h, the contract between replay and accounting)
 *
 * Headers: oplog.h <- replay.h <- lanes.h <- engine-private.h <- boost.h,
 * each including the one before it.
 */
#ifndef JOULESIM_SIM_ENGINE_PRIVATE_H
#define JOULESIM_SIM_ENGINE_PRIVATE_H

#include "sim/lanes.h"
#include "sim/queue.h"

/* The order an iteration replays in (SimEngine.order), the one mode the
 * dataflow core tests: where a transfer whose members have all arrived
 * starts (comm_ready) and where a stream blocked at a communication op
 * sends its arrival (advance), with what comm_arrive checks on the way.
 * The event queue is time order; eager and lanes need a machine whose
 * answers do not depend on call order (sim/order.c; sim/lanes.c,
 * "Threads"). */
enum { ORDER_QUEUE = 0, ORDER_EAGER, ORDER_LANES };

struct SimEngine {
  const SimWorkload *w;
  const SimMachine *m;
  RankState *ranks;
  struct BoostState *boost;   /* per rank with m->boost, else NULL
                                 (sim/boost.h) */
  SimQueue *queue;
  const SimShape *shapes;
  /* Collectives. */
  const guint32 *group_off;   /* w->group_off data */
  const guint32 *group_ranks; /* w->group_ranks data */
  guint n_groups;
  guint32 *group_expect;      /* arrivals completing an instance */
  Ring *rings;                /* per group */
  /* Lanes: n_lanes >= 1 (sim_engine_set_threads); lane_of(e, r) owns
   * rank r. */
  Lane *lanes;
  guint n_lanes;
  guint8 *rank_lane;         /* n_ranks: lane_of each rank */
  guint8 *group_lane;        /* n_groups: the lane matching each group's
                                collectives (sim/lanes.c, sim_lanes_deal) */
  guint order;               /* this iteration's ORDER_* */
  gint order_hit;            /* threaded, atomic: a rank used a group or
                                channel from two streams (sim/order.c) */
  gboolean order_sensitive;  /* so found: this engine replays serially */
  Stream *saved;             /* threaded: every stream as the iteration
                                began, to replay it again serially */
  guint64 *saved_switches;
  Barrier bar;
  gpointer lane_job;         /* what the lanes of sim_lanes_run share:
                                the threaded accounting, the block to
                                back (sim/engine.c) */
  guint threads_used;        /* sim_engine_threads_used */
  SimRunStats stats;         /* sim_engine_run_stats: the orders; the
                                lanes hold the counts */
  guint64 account_pass;      /* accounting passes so far: a rank's
                                accounting memo is good within its pass */
  gpointer log_mem;          /* kernel logs of all ranks, one allocation
                                made by the first run that needs it */
  gsize log_bytes;
  gboolean log_backed;       /* its pages populated */
  gpointer clog_mem;         /* comm logs of all ranks, one allocation */
  gsize clog_bytes;
  gboolean clog_backed;
  gboolean klog;             /* this iteration logs every op (rs->log), not
                                only communication (sim_engine_logs_kernels) */
  CostSlot *shared_cache;    /* per shape, for every rank (uniform pricing);
                                NULL when each rank has its own */
  gboolean folded;
  guint n_unfinished_ranks;
  guint iter;
  SimPlan *plan;            /* current (borrowed or replaced) */
  SimObserver observer;
  gpointer observer_data;
};

/* The lane that owns rank r. */
static inline guint lane_of(const SimEngine *e, guint r)
{
  return e->rank_lane[r];
}

/* order.c: replays one iteration from t0; on success *t1 is its end.
 * Fails (SIM_ERROR_DEADLOCK, SIM_ERROR_LIMIT) naming the stuck or absurd
 * op. */
gboolean sim_replay_iteration(SimEngine *e, gint64 t0, gint64 *t1,
                              GError **error);
/* order.c: whether this run replays on several threads (the engine has
 * lanes, the machine is thread-safe, and no observer or boost controller
 * needs the serial order). */
gboolean sim_replay_threaded(const SimEngine *e);
/* order.c: forgets whatever a failed earlier run left behind. */
void sim_replay_reset(SimEngine *e);

/* The last rank of a shared program that a lane accounted (Lane.amemo;
 * sim/account.c, "Ranks with the same inputs").  Here for the engine
 * to size it (sim_engine_estimate_bytes). */
typedef struct AcctMemo {
  guint64 pass;         /* SimEngine.account_pass it was made in; 0: none */
  guint32 rank;
  SimGpuResult before;  /* the rank's per-GPU result before, and after */
  SimGpuResult after;
  Totals part;          /* its contributions, from zero */
  double energy;
} AcctMemo;

/* account.c: accounts rank r over [t0, t1): its energy (returned), its
 * per-GPU figures added to *g and its contributions to *tot, which the
 * caller has zeroed.  Within one accounting pass (SimEngine.account_pass,
 * one per iteration), after the replay. */
double sim_account_rank(SimEngine *e, guint r, gint64 t0, gint64 t1,
                        Totals *tot, SimGpuResult *g);

#endif
