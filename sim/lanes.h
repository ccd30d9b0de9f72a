/* sim/lanes.h -- the lanes: one per thread of a threaded replay (lane 0
 * alone serially), each with its ranks, its share of the matching and its
 * scratch; and the threaded driver, which replays an iteration on them in
 * rounds and accounts it on them (sim/lanes.c, "Threads").
 * Included by sim/engine-private.h (the engine holds its lanes), read by
 * the engine, the replay and, for a lane's scratch (the memo and the
 * meter), the accounting.
 */
#ifndef JOULESIM_SIM_LANES_H
#define JOULESIM_SIM_LANES_H

#include "sim/replay.h"

/* A communication op that completed in a threaded round, for its rank's
 * lane to apply: it ran [start, start + dur) (its end capped at TIME_MAX). */
typedef struct {
  guint32 rank, op;
  gint64 start, dur;
} Done;

/* Growable lists of a lane's outgoing messages, one per lane. */
typedef struct {
  guint64 key;               /* (rank << 32 | op) */
  gint64 t;                  /* when it arrived */
} Arr;
typedef struct {
  Arr *v;
  gsize n, cap;
} ArrList;
typedef struct {
  Done *v;
  gsize n, cap;
} DoneList;

/* The mutable replay state of one thread (sim/lanes.c, "Threads").  The
 * serial replay uses lane 0 alone (its work stack and pool). */
struct Lane {
  guint64 *work;             /* (rank << 32 | stream) to advance */
  gsize n_work, cap_work;
  Pool pool;                 /* the transfers this lane matches */
  guint32 *ready;            /* threaded: transfers whose last member
                                arrived this round */
  gsize n_ready, cap_ready;
  ArrList *arr_to;           /* threaded, per lane: arrivals for it to
                                match */
  DoneList *done_to;         /* threaded, per lane: completed transfers
                                of its ranks */
  gsize handed;              /* threaded: transfers completed this round */
  OpLog *memo;               /* the accounting's kernel memo, memo_cap
                                entries (sim/account.c, account_rank) */
  guint32 memo_cap;
  struct MeterPt *meter;     /* the accounting's power meter, meter_cap
                                points (sim/account.c, "the meter") */
  guint32 meter_cap;
  gboolean running;          /* threaded: in a round's first phase (its
                                streams run; a transfer matched here whose
                                members are all its own starts at once) */
  guint32 *mseq;             /* per group membership: collectives issued;
                                each lane its own (it touches its groups'
                                entries only; no line shared) */
  guint8 *mstream;           /* threaded or eager, per membership:
                                stream + 1 of the rank's last collective
                                on it */
  guint finished;            /* ranks that finished this iteration */
  CostSlot *cache;           /* its copy of the shared price cache, or NULL
                                (lane 0's is SimEngine.shared_cache) */
  struct AcctMemo *amemo;    /* per shared program: the last rank of it
                                this lane accounted (sim/account.c,
                                "Ranks with the same inputs") */
  guint64 steady_kernels;    /* SimRunStats, this lane's share */
  guint64 ranks_copied;
  SimEngine *e;
};

/* Pushes (rank r, stream s) on lane L's work stack, to be advanced. */
static inline void lane_push(Lane *L, guint r, guint s)
{
  APPEND(L->work, L->n_work, L->cap_work, (guint64)r << 32 | s);
}

/* A barrier for the lanes of a threaded replay: spins briefly, then
 * sleeps (sim/lanes.c). */
typedef struct {
  gint count;
  gint gen;
  guint n;
  GMutex lock;
  GCond cond;
} Barrier;

/* n lanes, lane 0 with the shared price cache (if any), the others with
 * their own copy; and freeing them. */
void sim_lanes_new(SimEngine *e, guint n);
void sim_lanes_free(SimEngine *e);
/* Deals the ranks and the groups to the lanes. */
void sim_lanes_deal(SimEngine *e);
/* Runs fn on every lane at once, lane 0 on the calling thread. */
void sim_lanes_run(SimEngine *e, GThreadFunc fn);
/* One lane's part of a threaded iteration (sim_lanes_run's fn), its
 * streams set and pushed on its work stack. */
gpointer sim_lane_replay(gpointer lane);
/* Accounts every rank of iteration [t0, t1) on its lane: rank r's
 * energy into energy[r], its contributions into part[r] and its per-GPU
 * figures into res. */
void sim_lanes_account(SimEngine *e, SimResult *res, gint64 t0, gint64 t1,
                       Totals *part, double *energy);

#endif
