/* sim/engine-private.h -- what the engine's files share: the state of a
 * replay (SimEngine, RankState, Stream, the op log), the time limits, and
 * the few inline helpers that both the replay and the accounting read
 * with.  Not part of the engine's API: only sim/engine.c, sim/plan.c,
 * sim/replay.c and sim/account.c include it.
 *
 * The files
 * ---------
 *   engine.c   creating and freeing an engine, sim_engine_run (iterations,
 *              totals, folded weighting), checking a plan against it
 *   plan.c     SimPlan construction and the latency look-ahead
 *   replay.c   one iteration's dataflow replay: pricing, clock switches,
 *              the boost controller, the op log, matching communication
 *   account.c  one rank's energy and time partition from the op log
 *
 * Memory layout (what one iteration keeps per op)
 * -----------------------------------------------
 * The accounting needs each op's arrive/start/end times and power
 * increment, but most of that is implied by the stream order: an op arrives
 * when its stream is free and its wait target (if any) has ended, so
 *
 *     arrive = max(end of the previous op of the stream, end of op.wait)
 *
 * and at most two 32-bit numbers per op are stored (OpLog, 8 bytes): the
 * duration end - start and, for a kernel, its power increment (float bits),
 * for a communication op the blocked time start - arrive (its increment is
 * the rank's comm power - idle power).  Values that do not fit 32 bits (an op
 * lasting or blocked 2^32 ns = 4.3 s or more), and kernels split by a clock
 * switch (two increments), go to a per-rank overflow list (the log holds its
 * index).  End times are kept only for the ops some other op waits for
 * (the rank's sorted `targets`, found by one scan when the engine is
 * created; each stream stores them through a cursor as its ops
 * complete).
 *
 * Two logs.  Communication ops are logged in the comm log (rs->clog), one
 * entry per communication op in op order, which is each stream's order:
 * a stream's cursor (Stream.comm, from rs->comm_base) is the entry of its
 * next one, since a stream's transfers complete in its order.  Kernels and
 * host ops are logged (rs->log, indexed by op) only when their clocks can
 * change from kernel to kernel: a per-op plan, early requests, a plan's
 * initial clocks, a boost controller (sim_engine_logs_kernels; SimEngine.
 * klog, decided per iteration).  Otherwise every kernel runs at the plan's
 * one pair from its first kernel on, no switch is ever made, so none
 * splits, and its entry is a function of its op and its cache slot, which
 * holds that pair all iteration: the accounting computes it again
 * (account.c, kernel_entry, once per kernel: the first pass memoises it
 * for the sweep in its lane's scratch) with the replay's own expression,
 * bit for bit;
 * a host op lasts its ref_ns; a marker lasts nothing and is never logged.
 * 175B on 1,024 GPUs: 13% of the ops communicate, so the engine holds
 * 47 MB instead of 216 (and 258 MB instead of 1.6 GB at 8,192 GPUs), and
 * the replay writes and the accounting reads 7x fewer log bytes.  The
 * kernel log is allocated by the first iteration that needs it and then
 * kept.  Each log is one allocation for all ranks, reused by every run and
 * iteration.  (Transparent huge pages were tried for the log: the replay
 * was ~20% slower with them on the quiet benchmark host, and on a virtual
 * machine that must first back them a fresh 800 MB took 4x longer to
 * fault in than with 4 kB pages; not used.)  See
 * sim_engine_estimate_bytes() in sim/engine.h for the whole formula.
 *
 * Kernel prices are cached per (shape, clock pair): one CostSlot per shape
 * per rank, or, when the machine promises uniform pricing
 * (SimMachine.uniform_pricing) and every GPU has the same idle power, one
 * slot per shape shared by all ranks.  At 8,192 ranks the per-rank caches
 * are megabytes of randomly touched memory; the shared one stays in L1.  A
 * rank's fields read on every visit (stream, cache, log and wait-target
 * pointers, counters) fill the first cache line of its 192-byte,
 * 64-byte-aligned RankState, and each Stream is one aligned line.
 * Measured on GPT-3 175B, 8,192 GPUs (TP8 PP8 DP128, 64 microbatches),
 * cachegrind on 512 GPUs with a 2 MB last-level cache (the same ratio of
 * state to cache): replay (sim_engine_run) L1 data misses -33%, last-level
 * misses -6%, instructions unchanged.
 */
#ifndef JOULESIM_SIM_ENGINE_PRIVATE_H
#define JOULESIM_SIM_ENGINE_PRIVATE_H

#include "sim/engine.h"
#include "sim/queue.h"
#include "sim/search.h"

#include <string.h>

/* ---- engine state --------------------------------------------------------- */

enum { EV_RESUME = 1, EV_COMM_START = 2 };
/* At equal times transfers start before streams resume, so a stream resumed
 * at t sees every transfer that began at t. */
enum { PRIO_COMM = 0, PRIO_RESUME = 1 };

enum { ST_RUN = 0, ST_WAIT_OP, ST_WAIT_COMM, ST_DONE };

/* OpLog.dur value that sends the reader to the overflow list. */
#define LOG_ESC G_MAXUINT32

/* What one iteration keeps per op (see "Memory layout" above). */
typedef struct {
  guint32 dur;  /* end - start, or LOG_ESC: aux indexes the overflow list */
  guint32 aux;  /* kernel: float bits of its power increment;
                   communication: start - arrive; marker: 0 */
} OpLog;
G_STATIC_ASSERT(sizeof(OpLog) == 8);

/* An op whose duration or blocked time does not fit 32 bits, or a kernel
 * that a clock switch split (its two increments do not fit the log). */
typedef struct {
  gint64 arrive, start, end;
  float inc;     /* before `split` (the whole op when not split) */
  float inc2;    /* split kernel: from `split` to `end` */
  gint64 split;  /* split kernel: when the switch landed, start < split <
                    end; 0 = not split */
} Overflow;

/* An op's times as the accounting sees them.  A split kernel is read as
 * its first part ([start, end) with inc), then its second ([end,
 * rest_end) with rest_inc); rest_end is 0 otherwise. */
typedef struct {
  gint64 arrive, start, end;
  float inc;
  float rest_inc;
  gint64 rest_end;
} Iv;

/* One cache line (the array is 64-byte aligned). */
typedef struct {
  _Alignas(64) guint32 cur; /* cursor in the rank's op array */
  guint32 end;           /* end of this stream's ops */
  guint32 waiting_for;   /* ST_WAIT_OP: op index */
  guint32 tgt;           /* next wait target of this stream (ordinal) */
  guint32 tgt_lo, tgt_hi;/* this stream's wait targets: [tgt_lo, tgt_hi) */
  guint8 state;
  guint8 clk_init;
  SimClocks clk_cur;     /* clocks in force */
  SimClocks clk_target;  /* last requested */
  guint32 comm;          /* the comm log's entry for this stream's next
                            communication op */
  gint64 free_ns;        /* stream free from (end of its last op) */
  gint64 arrive_ns;      /* ST_WAIT_COMM: when op `cur` arrived */
  gint64 clk_land_ns;    /* when clk_target takes effect */
} Stream;
G_STATIC_ASSERT(sizeof(Stream) == 64);

typedef struct {
  guint32 shape_pairs_tag; /* packed clocks + 1 of the cached cost; 0 = none */
  float inc;               /* (float)(cost.power_w - the GPU's idle power) */
  SimCost cost;
} CostSlot;
G_STATIC_ASSERT(sizeof(CostSlot) == 32);

/* The duration of op (a kernel) priced in slot: the one expression the
 * replay schedules with and the accounting, without a kernel log, prices
 * again with (sim/account.c), so that the two agree bit for bit. */
static inline gint64 slot_ns(const CostSlot *slot, const SimOp *op)
{
  return sim_round_ns((double)op->ref_ns * slot->cost.time_scale);
}

/* A rank's incoming point-to-point channel: FIFO of unmatched ops of one
 * side (sends or receives) from ranks folding to `src`. */
typedef struct {
  guint32 src;
  guint32 head, len, cap;
  guint64 *q;            /* (rank << 32 | op), ring of cap entries */
  gint64 *qt;            /* their arrival times */
  guint8 side_stream[2]; /* threaded: stream + 1 of the last receive [0]
                            and send [1] through it (0: none) */
} Channel;

/* The fields touched on every visit of a rank come first and fill one
 * cache line (the array is 64-byte aligned); the rest are cold. */
typedef struct {
  _Alignas(64) Stream *streams;
  CostSlot *cache;       /* per shape: its own, or SimEngine.shared_cache */
  OpLog *log;            /* n_ops, inside SimEngine.log_mem; NULL until a
                            run logs kernels (SimEngine.klog) */
  OpLog *clog;           /* one per communication op, inside
                            SimEngine.clog_mem */
  guint32 *targets;      /* ascending op indices some op waits for */
  gint64 *target_end;    /* their end times this iteration */
  guint n_streams;
  guint n_unfinished;    /* streams not yet done */
  float comm_inc;        /* comm power - idle power, as a float */
  guint32 last_group;    /* group of the last collective (+1; 0 = none) */
  /* Cold. */
  guint32 last_mpos;     /* its membership index in w->group_ranks */
  guint32 bad_op;        /* first op that ended past TIME_MAX (+1; 0 = none) */
  guint32 n_targets;
  guint32 *comm_base;    /* n_streams + 1: stream s's communication ops
                            are clog[comm_base[s], comm_base[s + 1]) */
  Overflow *ovf;         /* this iteration's overflow records */
  guint32 n_ovf, cap_ovf;
  Channel *chans;        /* incoming channels, ascending src */
  guint32 n_chans, cap_chans;
  guint64 switches;      /* this iteration */
  double idle_w;
  guint32 weight;        /* ranks it stands for: 1, the class size when
                            folded, 0 for a folded-away rank */
  guint8 borrowed_targets; /* targets and comm_base belong to the first
                              rank of the shared program (sim/workload.h) */
} RankState;
G_STATIC_ASSERT(offsetof(RankState, last_mpos) == 64 && sizeof(RankState) == 192);

typedef struct {
  guint32 rank, op;
} Member;

typedef struct {
  guint32 group_or_src, seq_or_dst; /* p2p: the real pair the network prices */
  guint n_members, n_arrived;
  gint64 start_ns;
  gint64 ref_ns;     /* max recorded duration of members (0 = model) */
  double bytes;
  guint8 p2p;
  guint8 coll;
  guint members_cap;
  Member *members;
} Pending;

/* Open instances of one group, by sequence number: slot[seq & mask] holds a
 * pending index + 1 (0 = none).  Grows when two open instances collide. */
typedef struct {
  guint32 *slot;
  guint32 mask;
} Ring;

/* One GPU's boost controller state (see "Boost controller"). */
typedef struct {
  double avg_w;     /* power average, valid at t_ns */
  double kernel_w;  /* power of the last kernel seen */
  gint64 t_ns;      /* time of the average */
  gint64 end_ns;    /* end of the last kernel seen */
  gint64 tick_ns;   /* next decision */
  guint16 mhz;      /* the ceiling */
} BoostState;

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

/* Pending transfers: a pool with a free list. */
typedef struct {
  Pending *pend;
  guint32 n_pend, cap_pend;
  guint32 *pend_free;
  guint32 n_free;
} Pool;

/* The mutable replay state of one thread (sim/replay.c, "Threads").  The
 * serial replay uses lane 0 alone (its work stack and pool). */
typedef struct {
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
} Lane;

/* A barrier for the lanes of a threaded replay: spins briefly, then
 * sleeps (sim/replay.c). */
typedef struct {
  gint count;
  gint gen;
  guint n;
  GMutex lock;
  GCond cond;
} Barrier;

struct SimEngine {
  const SimWorkload *w;
  const SimMachine *m;
  RankState *ranks;
  BoostState *boost;          /* per rank with m->boost, else NULL */
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
                                collectives (sim/engine.c, deal_lanes) */
  gboolean deferred;         /* this iteration replays on the lanes */
  gboolean eager;            /* this iteration replays serially without
                                the event queue (sim/replay.c, "Eager
                                order") */
  gint order_hit;            /* threaded, atomic: a rank used a group or
                                channel from two streams (sim/replay.c) */
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


/* Simulated time is gint64 ns.  No time may pass TIME_MAX (2^62 - 1 ns,
 * 146 years): durations are capped at DUR_CAP = 2^62 and an end past
 * TIME_MAX is clamped to it and reported as an error after the iteration
 * (an absurd duration in the input, or an absurd slowdown), so the sums
 * ready + dur never overflow. */
#define TIME_MAX ((gint64)((G_GUINT64_CONSTANT(1) << 62) - 1))
#define DUR_CAP SIM_DUR_CAP

static inline guint32 pack_clocks(SimClocks c)
{
  return ((guint32)c.sm_mhz << 16 | c.mem_mhz) + 1u;
}


static inline guint32 float_bits(float f)
{
  guint32 u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float bits_float(guint32 u)
{
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}


/* End time of wait target j of rank rs (j has completed). */
static inline gint64 target_end(const RankState *rs, const Stream *owner,
                                guint32 j)
{
  guint32 k = sim_lower_bound_u32(rs->targets, owner->tgt_lo,
                                  owner->tgt_hi, j);
  return rs->target_end[k];
}

/* Whether an op of this kind is communication (it has a comm log entry). */
static inline gboolean is_comm(guint8 kind)
{
  return kind == SIM_OP_COLLECTIVE || kind == SIM_OP_SEND ||
         kind == SIM_OP_RECV;
}

/* The lane that owns rank r. */
static inline guint lane_of(const SimEngine *e, guint r)
{
  return e->rank_lane[r];
}

/* Where a rank's contributions to the totals go: the result itself, or a
 * scratch copy that is weighted by the class size (folded replay). */
typedef struct {
  SimTE by_class[SIM_CLASS_COUNT];
  SimTE by_phase[SIM_PHASE_COUNT];
  SimTE blocked, idle;
  double held_j;  /* taken off by the board limit (SimResult.held_j) */
} Totals;

/* replay.c: replays one iteration from t0; on success *t1 is its end.
 * Fails (SIM_ERROR_DEADLOCK, SIM_ERROR_LIMIT) naming the stuck or absurd
 * op. */
gboolean sim_replay_iteration(SimEngine *e, gint64 t0, gint64 *t1,
                              GError **error);
/* replay.c: whether this run replays on several threads (the engine has
 * lanes, the machine is thread-safe, and no observer or boost controller
 * needs the serial order). */
gboolean sim_replay_threaded(const SimEngine *e);
/* replay.c: runs fn on every lane at once, lane 0 on the calling thread. */
void sim_lanes_run(SimEngine *e, GThreadFunc fn);
/* replay.c: forgets whatever a failed earlier run left behind. */
void sim_replay_reset(SimEngine *e);
/* The last rank of a shared program that a lane accounted (sim/account.c,
 * "Ranks with the same inputs"). */
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
