/* sim/oplog.h -- the op-log contract: what a replay leaves behind for the
 * accounting.  The replay (sim/replay.c) writes it; the accounting
 * (sim/account.c) reads it and nothing else of the replay: a rank's op
 * log and comm log (OpLog), its overflow records, its price cache
 * (CostSlot, slot_ns: a kernel priced again without a kernel log), the
 * end times of its wait targets (target_end), and the RankState fields
 * that point at them, plus its idle and comm power, switch count and
 * class weight.  The other RankState fields (the matching caches, the
 * channels, bad_op) are the replay's; they sit in the same struct
 * because a rank's state is one 192-byte line pair (below), not because
 * the accounting reads them.  Included by sim/engine-private.h (so by
 * every file of the engine); the accounting needs no other header of the
 * replay's (sim/replay.h, sim/lanes.h, sim/boost.h).
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
#ifndef JOULESIM_SIM_OPLOG_H
#define JOULESIM_SIM_OPLOG_H

#include "sim/engine.h"
#include "sim/search.h"

#include <string.h>


/* Simulated time is gint64 ns.  No time may pass TIME_MAX (2^62 - 1 ns,
 * 146 years): durations are capped at DUR_CAP = 2^62 and an end past
 * TIME_MAX is clamped to it and reported as an error after the iteration
 * (an absurd duration in the input, or an absurd slowdown), so the sums
 * ready + dur never overflow. */
#define TIME_MAX ((gint64)((G_GUINT64_CONSTANT(1) << 62) - 1))
#define DUR_CAP SIM_DUR_CAP

/* Stream.state. */
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

/* The cache tag of clocks c (CostSlot.shape_pairs_tag): never 0. */
static inline guint32 pack_clocks(SimClocks c)
{
  return ((guint32)c.sm_mhz << 16 | c.mem_mhz) + 1u;
}

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

struct Channel;

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
  struct Channel *chans; /* incoming channels, ascending src
                            (sim/replay.h) */
  guint32 n_chans, cap_chans;
  guint64 switches;      /* this iteration */
  double idle_w;
  guint32 weight;        /* ranks it stands for: 1, the class size when
                            folded, 0 for a folded-away rank */
  guint8 borrowed_targets; /* targets and comm_base belong to the first
                              rank of the shared program (sim/workload.h) */
} RankState;
G_STATIC_ASSERT(offsetof(RankState, last_mpos) == 64 && sizeof(RankState) == 192);

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


/* Where a rank's contributions to the totals go: the result itself, or a
 * scratch copy that is weighted by the class size (folded replay). */
typedef struct {
  SimTE by_class[SIM_CLASS_COUNT];
  SimTE by_phase[SIM_PHASE_COUNT];
  SimTE blocked, idle;
  double held_j;  /* taken off by the board limit (SimResult.held_j) */
} Totals;

#endif
