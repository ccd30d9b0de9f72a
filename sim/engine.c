/* sim/engine.c -- dataflow replay of per-rank op streams with an event queue
 * for synchronisation points, exact integration of an additive power model,
 * and folded replay of identical ranks.
 *
 * How a replay works
 * ------------------
 * One iteration at a time.  Every (rank, stream) pair has a cursor into the
 * rank's op array (ops grouped by stream, see sim/workload.h) and the time
 * its stream becomes free.  advance() runs a stream in a tight loop: a kernel
 * starts when the stream is free and its `wait` op has finished, lasts
 * llround(ref_ns * time_scale) (priced by the machine, cached per shape and
 * clock pair), and the cursor moves on.  No event is queued per kernel.
 *
 * A stream stops in two cases: its next op waits for an op (on another
 * stream of the same rank) that has not been scheduled yet, or its next op is
 * communication.  A communication op records the rank's arrival in a pending
 * record.  Collectives are matched by (group, the rank's sequence number on
 * that group): the sequence number is a counter per group membership, and
 * the open instances of a group sit in a small ring indexed by sequence
 * number, so matching is array indexing, not hashing.  Point-to-point ops
 * match FIFO per (src, dst) channel; a rank's incoming channels are a small
 * sorted array.  When the last member arrives the record's start time is
 * known (the latest arrival) and a COMM_START event is queued at that time.
 * Popping it prices the transfer (network callback), schedules every
 * member's op and resumes their streams.  Completing an op that another
 * stream waits for resumes that stream.  Resumptions go through a small work
 * stack, never recursion.
 *
 * Because every start time is a max over finish times (a max-plus
 * computation), the processing order cannot change the result; the event
 * queue's total order (time, priority, sequence) makes the processing itself
 * deterministic too, and puts transfer starts in time order (which a shared
 * bandwidth model needs).
 *
 * Memory layout (what one iteration keeps per op)
 * -----------------------------------------------
 * The accounting below needs each op's arrive/start/end times and power
 * increment, but most of that is implied by the stream order: an op arrives
 * when its stream is free and its wait target (if any) has ended, so
 *
 *     arrive = max(end of the previous op of the stream, end of op.wait)
 *
 * and only two 32-bit numbers per op are stored (OpLog, 8 bytes): the
 * duration end - start and, for a kernel, its power increment (float bits),
 * for a communication op the blocked time start - arrive (its increment is
 * the rank's comm power - idle power).  Values that do not fit 32 bits (an op
 * lasting or blocked 2^32 ns = 4.3 s or more), and kernels split by a clock
 * switch (two increments), go to a per-rank overflow list (the log holds its
 * index).  End times are kept only for the ops some other op waits for
 * (the rank's sorted `targets`, found by one scan when the engine is
 * created; each stream stores them through a cursor as its ops
 * complete), so the engine holds 8 bytes per op plus 12 per wait target,
 * against 28 per op before (three gint64 times and a float, whose first-
 * touch page faults a profile put at 42% of replay time).  The op logs of
 * all ranks are one allocation, made once per engine and reused by every
 * run and iteration.  (Transparent huge pages were tried for it: the
 * replay was ~20% slower with them on the quiet benchmark host, and on a
 * virtual machine that must first back them a fresh 800 MB took 4x longer
 * to fault in than with 4 kB pages; not used.)  See
 * sim_engine_estimate_bytes() in sim/engine.h for the whole formula.
 *
 * Kernel prices are cached per (shape, clock pair): one CostSlot per shape
 * per rank, or, when the machine promises uniform pricing
 * (SimMachine.uniform_pricing) and every GPU has the same idle power, one
 * slot per shape shared by all ranks.  At 8,192 ranks the per-rank caches
 * are megabytes of randomly touched memory; the shared one stays in L1.  A
 * rank's fields read on every visit (stream, cache, log and wait-target
 * pointers, counters) fill the first cache line of its 128-byte,
 * 64-byte-aligned RankState, and each Stream is one aligned line.
 * Measured on GPT-3 175B, 8,192 GPUs (TP8 PP8 DP128, 64 microbatches),
 * cachegrind on 512 GPUs with a 2 MB last-level cache (the same ratio of
 * state to cache): replay (sim_engine_run) L1 data misses -33%, last-level
 * misses -6%, instructions unchanged.
 *
 * Energy: once an iteration is scheduled, each rank's streams are swept
 * together (a k-way merge of their interval sequences, decoded from the log)
 * to split the iteration into segments, each attributed to the
 * highest-priority state (kernel > communication > blocked > idle; the lowest
 * stream wins a tie); see sim/engine.h for the power model.  Per op:
 * t_arrive <= t_start <= t_end, with [t_arrive, t_start) the blocked part of
 * a communication op.  While only one stream changes state (the common case:
 * stream 0's kernels, the others idle or in one long transfer), the sweep
 * runs that stream alone against the others' frozen states.  The sums are
 * accumulated in exactly the order of the straightforward merge, so results
 * are bit-identical to it.
 *
 * Folded replay
 * -------------
 * With w->fold_rep set, only representatives (fold_rep[r] == r) carry ops and
 * are replayed.  A collective on group g completes when every distinct
 * representative among g's members has arrived (the network model is still
 * asked about g itself, with all its members); a send from a to b matches a
 * receive on rep(b) from a peer folding to a: channels are keyed by
 * (rep(src), rep(dst)).  Each representative's results stand for its whole
 * class: per-GPU results of a member are its representative's, totals are
 * weighted by the class size.  sim_engine_new() checks that the machine's
 * per-GPU power constants agree within each class; pricing by kernel_cost
 * and the network cannot be checked here and is the caller's contract
 * (run/session.c refuses variability, stragglers and per-rank plans).
 *
 * Clock switches
 * --------------
 * Per (rank, stream): the clocks in force, the last requested target and
 * when it lands (Stream.clk_*).  A kernel takes the steady path (its
 * request is the landed target: no pricing change, no check) or the slow
 * one (clocks_at: a landing applied, a new request made); only there can a
 * switch still be in flight, and when it lands before the kernel ends
 * split_kernel() prices the rest at the new clocks (sim_kernel_rest_ns)
 * and logs the kernel as an overflow record with both parts, which the
 * accounting reads as two intervals of one op.  One switch is in flight
 * at a time and requests come at kernel starts (or, early requests, at
 * most the latency before a kernel's end), so a kernel splits at most
 * once.  Early requests (SimPlan.ahead) are found like wait targets: a
 * per-stream cursor in the rank's list, the loop's fast path stopping at
 * the next one; plans without them cost one compare per kernel.
 *
 * Boost controller
 * ----------------
 * With SimMachine.boost, each GPU's SM clock has a ceiling that models the
 * driver's own boost: a kernel runs at min(requested, ceiling), "auto"
 * asking for the controller's max_mhz, and kernel_cost prices it uncapped.
 * The controller keeps an exponential average of board power (time
 * constant window_ns) fed by the kernels it sees start, in time order:
 * the last kernel's power until it ends, idle power after.  Every
 * period_ns it lowers the ceiling when the average is above the limit and
 * raises it when it is below limit - margin, in proportion to the error
 * (boost_decide), in whole steps of step_mhz.  It reacts
 * late by design: after a phase of light kernels it sits at the top and a
 * GEMM overshoots the limit until the average catches up; then it
 * throttles the light kernels that follow too.  Decisions land at kernel
 * starts (a kernel keeps the clock it started with), the kernels of the
 * compute streams are seen in the order the stream sweep schedules them,
 * and one out of time order (another stream behind) is priced at the
 * current ceiling without feeding the average.  State lives beside the
 * ranks (BoostState), reset per run, carried across iterations.
 *
 * Limits: clock-switch state is kept per (rank, stream); bandwidth sharing
 * between concurrent collectives is left to the network callback; a switch
 * costs time only through its latency (no stall, no energy of its own).
 * Sequence numbers on a group, and the FIFO order of a p2p channel, follow
 * the order in which a rank's arrivals are processed: program order when a
 * rank uses a group (or a channel) from one stream, as every generated and
 * imported workload so far does; with several streams, the processing order
 * decides (deterministically).
 */
#include "sim/engine.h"
#include "sim/queue.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- plans --------------------------------------------------------------- */

SimPlan *sim_plan_new_uniform(guint n_ranks, SimClocks clocks)
{
  SimPlan *p = g_new0(SimPlan, 1);
  p->n_ranks = n_ranks;
  p->n_pairs = 1;
  p->pairs = g_new(SimClocks, 1);
  p->pairs[0] = clocks;
  return p;
}

void sim_plan_free(SimPlan *p)
{
  if (p == NULL)
    return;
  if (p->index != NULL)
    for (guint r = 0; r < p->n_ranks; r++)
      g_free(p->index[r]);
  g_free(p->index);
  if (p->ahead != NULL)
    for (guint r = 0; r < p->n_ranks; r++)
      g_free(p->ahead[r]);
  g_free(p->ahead);
  g_free(p->n_ahead);
  if (p->init != NULL)
    for (guint r = 0; r < p->n_ranks; r++)
      g_free(p->init[r]);
  g_free(p->init);
  g_free(p->pairs);
  g_free(p);
}

guint16 sim_plan_add_pair(SimPlan *p, SimClocks c)
{
  for (guint i = 0; i < p->n_pairs; i++)
    if (p->pairs[i].sm_mhz == c.sm_mhz && p->pairs[i].mem_mhz == c.mem_mhz)
      return (guint16)i;
  g_return_val_if_fail(p->n_pairs < G_MAXUINT16, 0);
  p->pairs = g_renew(SimClocks, p->pairs, p->n_pairs + 1);
  p->pairs[p->n_pairs] = c;
  return (guint16)p->n_pairs++;
}

guint16 *sim_plan_rank_index(SimPlan *p, guint r, guint32 n_ops)
{
  g_return_val_if_fail(r < p->n_ranks, NULL);
  if (p->index == NULL)
    p->index = g_new0(guint16 *, p->n_ranks);
  g_free(p->index[r]);
  p->index[r] = g_new0(guint16, MAX(n_ops, 1));
  return p->index[r];
}

SimAhead *sim_plan_rank_ahead(SimPlan *p, guint r, guint32 n)
{
  g_return_val_if_fail(r < p->n_ranks, NULL);
  if (p->ahead == NULL) {
    p->ahead = g_new0(SimAhead *, MAX(p->n_ranks, 1));
    p->n_ahead = g_new0(guint32, MAX(p->n_ranks, 1));
  }
  g_clear_pointer(&p->ahead[r], g_free);
  p->n_ahead[r] = n;
  if (n > 0)
    p->ahead[r] = g_new0(SimAhead, n);
  return p->ahead[r];
}

SimInit *sim_plan_rank_init(SimPlan *p, guint r)
{
  g_return_val_if_fail(r < p->n_ranks, NULL);
  if (p->init == NULL)
    p->init = g_new0(SimInit *, MAX(p->n_ranks, 1));
  g_free(p->init[r]);
  p->init[r] = g_new0(SimInit, SIM_MAX_STREAMS);
  return p->init[r];
}

void sim_result_free(SimResult *r)
{
  if (r == NULL)
    return;
  g_free(r->per_gpu);
  g_free(r->iterations);
  g_free(r);
}

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

/* A rank's incoming point-to-point channel: FIFO of unmatched ops of one
 * side (sends or receives) from ranks folding to `src`. */
typedef struct {
  guint32 src;
  guint32 head, len, cap;
  guint64 *q;            /* (rank << 32 | op), ring of cap entries */
} Channel;

/* The fields touched on every visit of a rank come first and fill one
 * cache line (the array is 64-byte aligned); the rest are cold. */
typedef struct {
  _Alignas(64) Stream *streams;
  CostSlot *cache;       /* per shape: its own, or SimEngine.shared_cache */
  OpLog *log;            /* n_ops, inside SimEngine.log_mem */
  guint32 *targets;      /* ascending op indices some op waits for */
  gint64 *target_end;    /* their end times this iteration */
  guint n_streams;
  guint n_unfinished;    /* streams not yet done */
  float comm_inc;        /* comm power - idle power, as a float */
  guint32 last_group;    /* group of the last collective (+1; 0 = none) */
  guint32 last_mpos;     /* its membership index in w->group_ranks */
  guint32 bad_op;        /* first op that ended past TIME_MAX (+1; 0 = none) */
  /* Cold. */
  guint32 n_targets;
  Overflow *ovf;         /* this iteration's overflow records */
  guint32 n_ovf, cap_ovf;
  Channel *chans;        /* incoming channels, ascending src */
  guint32 n_chans, cap_chans;
  guint64 switches;      /* this iteration */
  double idle_w;
  guint32 weight;        /* ranks it stands for: 1, the class size when
                            folded, 0 for a folded-away rank */
} RankState;
G_STATIC_ASSERT(offsetof(RankState, n_targets) <= 64 && sizeof(RankState) == 128);

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
  guint32 *mseq;              /* per membership: collectives issued */
  guint32 *group_expect;      /* arrivals completing an instance */
  Ring *rings;                /* per group */
  /* Pending transfers: a pool with a free list. */
  Pending *pend;
  guint32 n_pend, cap_pend;
  guint32 *pend_free;
  guint32 n_free;
  /* Work stack of (rank << 32 | stream) to advance. */
  guint64 *work;
  gsize n_work, cap_work;
  gpointer log_mem;          /* op logs of all ranks, one allocation */
  CostSlot *shared_cache;    /* per shape, for every rank (uniform pricing);
                                NULL when each rank has its own */
  gboolean folded;
  guint n_unfinished_ranks;
  guint iter;
  SimPlan *plan;            /* current (borrowed or replaced) */
  SimObserver observer;
  gpointer observer_data;
};

/* ---- creation ------------------------------------------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
  guint32 x = *(const guint32 *)a, y = *(const guint32 *)b;
  return (x > y) - (x < y);
}

/* First index in the ascending array a[lo, hi) whose value is >= v. */
static inline guint32 lower_bound(const guint32 *a, guint32 lo, guint32 hi,
                                  guint32 v)
{
  while (lo < hi) {
    guint32 mid = lo + (hi - lo) / 2;
    if (a[mid] < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Rank r's wait targets: the distinct ops some op of r waits for, sorted,
 * and each stream's range of them. */
static void find_targets(RankState *rs, const SimRank *rk)
{
  guint32 cap = 16, n = 0;
  rs->targets = g_new(guint32, cap);
  gboolean sorted = TRUE;
  for (guint32 i = 0; i < rk->n_ops; i++) {
    guint32 j = rk->ops[i].wait;
    if (G_LIKELY(j == SIM_NO_WAIT))
      continue;
    if (n > 0 && j <= rs->targets[n - 1]) {
      if (j == rs->targets[n - 1])
        continue;
      sorted = FALSE;
    }
    if (n == cap) {
      cap *= 2;
      rs->targets = g_renew(guint32, rs->targets, cap);
    }
    rs->targets[n++] = j;
  }
  if (!sorted) {
    qsort(rs->targets, n, sizeof(guint32), cmp_u32);
    guint32 u = 0;
    for (guint32 k = 0; k < n; k++)
      if (u == 0 || rs->targets[k] != rs->targets[u - 1])
        rs->targets[u++] = rs->targets[k];
    n = u;
  }
  rs->n_targets = n;
  rs->target_end = g_new0(gint64, MAX(n, 1));
  for (guint s = 0; s < rs->n_streams; s++) {
    Stream *st = &rs->streams[s];
    st->tgt_lo = lower_bound(rs->targets, 0, n, rk->stream_off[s]);
    st->tgt_hi = lower_bound(rs->targets, st->tgt_lo, n, rk->stream_off[s + 1]);
  }
}

/* Folding: every member of a class must have its representative's per-GPU
 * power constants (the engine only ever prices the representative). */
static gboolean check_fold_machine(const SimWorkload *w, const SimMachine *m,
                                   GError **error)
{
  for (guint r = 0; r < w->n_ranks; r++) {
    guint32 q = w->fold_rep[r];
    if (q == r)
      continue;
    const char *what = NULL;
    if (m->idle_power_w[r] != m->idle_power_w[q])
      what = "idle";
    else if (m->blocked_power_w[r] != m->blocked_power_w[q])
      what = "blocked";
    else if (m->comm_power_w[r] != m->comm_power_w[q])
      what = "communication";
    if (what != NULL) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                  "folded workload: GPU %u folds to GPU %u but their %s "
                  "powers differ (%g W vs %g W); a folded workload needs "
                  "every GPU of a class priced alike (no variability)", r, q,
                  what,
                  what[0] == 'i'   ? m->idle_power_w[r]
                  : what[0] == 'b' ? m->blocked_power_w[r]
                                   : m->comm_power_w[r],
                  what[0] == 'i'   ? m->idle_power_w[q]
                  : what[0] == 'b' ? m->blocked_power_w[q]
                                   : m->comm_power_w[q]);
      return FALSE;
    }
  }
  return TRUE;
}

SimEngine *sim_engine_new(const SimWorkload *w, const SimMachine *m,
                          GError **error)
{
  if (m->n_gpus != w->n_ranks) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "the workload has %u ranks but the machine %u GPUs",
                w->n_ranks, m->n_gpus);
    return NULL;
  }
  if (m->switch_latency_ns < 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "negative clock switching latency");
    return NULL;
  }
  for (guint r = 0; m->boost != NULL && r < m->n_gpus; r++) {
    const SimBoost *b = &m->boost[r];
    if (!(b->window_ns > 0 && b->period_ns > 0 && b->step_mhz > 0 &&
          b->min_mhz <= b->max_mhz && b->max_mhz > 0 &&
          isfinite(b->limit_w) && b->limit_w > 0 && b->margin_w >= 0)) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                  "GPU %u: boost controller needs window, period and step > "
                  "0, 0 < min <= max clock and a positive limit", r);
      return NULL;
    }
  }
  /* The workload is validated rank by rank, each rank's wait targets
   * collected right after its check, while its ops are in cache. */
  g_autoptr(SimValidator) v = sim_validator_new(w, error);
  if (v == NULL)
    return NULL;
  if (w->fold_rep != NULL && !check_fold_machine(w, m, error))
    return NULL;
  guint64 total_ops = sim_workload_n_ops(w);
  gsize log_bytes = (gsize)total_ops * sizeof(OpLog);
  gpointer log_mem = g_try_malloc(MAX(log_bytes, 1));
  if (log_mem == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_LIMIT,
                "cannot allocate the engine's op log (%" G_GUINT64_FORMAT
                " ops, %.0f MB)", total_ops, (double)log_bytes / 1e6);
    return NULL;
  }
  g_autoptr(SimEngine) e = g_new0(SimEngine, 1);
  e->w = w;
  e->m = m;
  e->log_mem = log_mem;
  e->folded = w->fold_rep != NULL;
  e->shapes = (const SimShape *)(void *)w->shapes->data;
  e->ranks = g_aligned_alloc0(MAX(w->n_ranks, 1), sizeof(RankState), 64);
  if (m->boost != NULL)
    e->boost = g_new0(BoostState, MAX(w->n_ranks, 1));
  e->queue = sim_queue_new();
  guint n_shapes = w->shapes->len;
  /* One price cache for all ranks when the machine prices every GPU alike
   * and their idle powers (hence the cached increments) agree. */
  gboolean shared = m->uniform_pricing && w->n_ranks > 0;
  for (guint r = 1; shared && r < w->n_ranks; r++)
    shared = m->idle_power_w[r] == m->idle_power_w[0];
  if (shared)
    e->shared_cache = g_new0(CostSlot, MAX(n_shapes, 1));
  OpLog *log = log_mem;
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    RankState *rs = &e->ranks[r];
    if (!sim_validator_rank(v, r, error))
      return NULL;
    rs->log = log;
    log += rk->n_ops;
    rs->n_streams = rk->n_ops > 0 ? rk->n_streams : 0;
    rs->idle_w = m->idle_power_w[r];
    rs->comm_inc = (float)(m->comm_power_w[r] - m->idle_power_w[r]);
    rs->weight = e->folded ? 0 : 1;
    if (rk->n_ops == 0)
      continue; /* nothing to replay (folded away, or idle) */
    rs->streams = g_aligned_alloc0(MAX(rs->n_streams, 1), sizeof(Stream), 64);
    rs->cache = shared ? e->shared_cache : g_new0(CostSlot, MAX(n_shapes, 1));
    find_targets(rs, rk);
  }
  if (!sim_validator_finish(v, error))
    return NULL;
  if (e->folded)
    for (guint r = 0; r < w->n_ranks; r++)
      e->ranks[w->fold_rep[r]].weight++;
  /* Collective matching state. */
  e->n_groups = sim_workload_n_groups(w);
  e->group_off = (const guint32 *)(void *)w->group_off->data;
  e->group_ranks = (const guint32 *)(void *)w->group_ranks->data;
  e->mseq = g_new0(guint32, MAX(w->group_ranks->len, 1));
  e->group_expect = g_new0(guint32, MAX(e->n_groups, 1));
  e->rings = g_new0(Ring, MAX(e->n_groups, 1));
  g_autofree guint32 *stamp = NULL;
  if (e->folded) {
    stamp = g_new(guint32, MAX(w->n_ranks, 1));
    memset(stamp, 0xff, sizeof(guint32) * MAX(w->n_ranks, 1));
  }
  for (guint g = 0; g < e->n_groups; g++) {
    guint32 a = e->group_off[g], b = e->group_off[g + 1];
    if (!e->folded) {
      e->group_expect[g] = b - a;
      continue;
    }
    guint32 n = 0; /* distinct representatives */
    for (guint32 k = a; k < b; k++) {
      guint32 q = w->fold_rep[e->group_ranks[k]];
      if (stamp[q] != g) {
        stamp[q] = g;
        n++;
      }
    }
    e->group_expect[g] = n;
  }
  return g_steal_pointer(&e);
}

void sim_engine_free(SimEngine *e)
{
  if (e == NULL)
    return;
  for (guint r = 0; r < e->w->n_ranks; r++) {
    RankState *rs = &e->ranks[r];
    g_aligned_free(rs->streams);
    if (rs->cache != e->shared_cache)
      g_free(rs->cache);
    g_free(rs->targets);
    g_free(rs->target_end);
    g_free(rs->ovf);
    for (guint32 c = 0; c < rs->n_chans; c++)
      g_free(rs->chans[c].q);
    g_free(rs->chans);
  }
  g_aligned_free(e->ranks);
  g_free(e->boost);
  g_free(e->log_mem);
  g_free(e->shared_cache);
  g_free(e->mseq);
  g_free(e->group_expect);
  for (guint g = 0; e->rings != NULL && g < e->n_groups; g++)
    g_free(e->rings[g].slot);
  g_free(e->rings);
  for (guint32 i = 0; i < e->n_pend; i++)
    g_free(e->pend[i].members);
  g_free(e->pend);
  g_free(e->pend_free);
  g_free(e->work);
  sim_queue_free(e->queue);
  g_free(e);
}

void sim_engine_set_observer(SimEngine *e, SimObserver fn, gpointer data)
{
  e->observer = fn;
  e->observer_data = data;
}

guint64 sim_engine_estimate_bytes(const SimWorkload *w)
{
  g_return_val_if_fail(w != NULL, 0);
  guint64 bytes = sizeof(SimEngine);
  guint64 n_shapes = w->shapes->len;
  /* Per open transfer: a pending record with two members, its event, a
   * work-stack slot and a free-list slot; at most one per stream. */
  const guint64 per_stream = sizeof(Stream) + sizeof(Pending) +
                             2 * sizeof(Member) + sizeof(SimEvent) +
                             sizeof(guint64) + sizeof(guint32);
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    bytes += sizeof(RankState);
    if (rk->n_ops == 0)
      continue;
    guint ns = rk->n_streams;
    bytes += ns * per_stream + MAX(n_shapes, 1) * sizeof(CostSlot) +
             (guint64)rk->n_ops * sizeof(OpLog);
    /* Wait targets: each is waited for from another stream, so at most
     * twice the ops outside the largest stream (sim/engine.h). */
    guint32 largest = 0;
    for (guint s = 0; s < ns; s++)
      largest = MAX(largest, rk->stream_off[s + 1] - rk->stream_off[s]);
    guint64 bound = MIN((guint64)rk->n_ops, 2 * (guint64)(rk->n_ops - largest));
    bytes += bound * (sizeof(guint32) + sizeof(gint64));
  }
  /* Sequence counter per group membership (and its member slot); ring,
   * expectation and first ring slots per group. */
  bytes += (guint64)w->group_ranks->len * (sizeof(guint32) + sizeof(Member));
  bytes += (guint64)sim_workload_n_groups(w) *
           (sizeof(Ring) + sizeof(guint32) + 4 * sizeof(guint32));
  return bytes;
}

/* ---- pricing ---------------------------------------------------------------- */

static inline guint32 pack_clocks(SimClocks c)
{
  return ((guint32)c.sm_mhz << 16 | c.mem_mhz) + 1u;
}

/* Cost of `shape` on GPU r at clocks c, through the per-rank cache. */
static inline const CostSlot *price(SimEngine *e, guint r, guint32 shape,
                                   SimClocks c)
{
  CostSlot *slot = &e->ranks[r].cache[shape];
  guint32 tag = pack_clocks(c);
  if (G_UNLIKELY(slot->shape_pairs_tag != tag)) {
    e->m->kernel_cost(e->m->ctx, r, shape, c, e->iter, &slot->cost);
    slot->shape_pairs_tag = tag;
    slot->inc = (float)(slot->cost.power_w - e->ranks[r].idle_w);
  }
  return slot;
}

/* ---- boost controller -------------------------------------------------------- */

/* Moves the average of b from t_ns to `to`: the last kernel's power until
 * it ended, idle power after. */
static void boost_hold(BoostState *b, const SimBoost *c, double idle_w,
                       gint64 to)
{
  if (to <= b->t_ns)
    return;
  gint64 mid = CLAMP(b->end_ns, b->t_ns, to);
  double tau = (double)c->window_ns;
  if (mid > b->t_ns)
    b->avg_w = b->kernel_w +
               (b->avg_w - b->kernel_w) * exp(-(double)(mid - b->t_ns) / tau);
  if (to > mid)
    b->avg_w = idle_w + (b->avg_w - idle_w) * exp(-(double)(to - mid) / tau);
  b->t_ns = to;
}

/* One decision on the average: a proportional step.  Near the top clocks
 * board power goes roughly as f^3 (f V^2 with V rising with f), so an
 * error e = avg / limit - 1 is undone by moving the clock by f e / 3,
 * rounded up to whole steps (at least one); above the limit it lowers the
 * clock, below limit - margin it raises it. */
static inline void boost_decide(BoostState *b, const SimBoost *c)
{
  double e = b->avg_w / c->limit_w - 1.0;
  if (b->avg_w <= c->limit_w && b->avg_w >= c->limit_w - c->margin_w)
    return;
  double mhz = fabs(e) * b->mhz / 3.0;
  guint n = (guint)MIN(ceil(mhz / c->step_mhz), 65535.0);
  guint d = MAX(n, 1u) * c->step_mhz;
  if (e > 0)
    b->mhz = b->mhz > c->min_mhz + d ? (guint16)(b->mhz - d) : c->min_mhz;
  else
    b->mhz = (guint16)MIN((guint)c->max_mhz, (guint)b->mhz + d);
}

/* Clocks c under GPU r's current ceiling, the controller not moved. */
static inline SimClocks boost_cap(const SimEngine *e, guint r, SimClocks c)
{
  guint want = c.sm_mhz != 0 ? c.sm_mhz : e->m->boost[r].max_mhz;
  c.sm_mhz = (guint16)MIN(want, (guint)e->boost[r].mhz);
  return c;
}

/* The controller of GPU r up to time t (a kernel's start), then clocks c
 * under its ceiling.  Past as many decisions as it takes to cross the whole
 * range and settle the average, more decisions repeat the last one, so a
 * long gap costs a bounded loop. */
static __attribute__((noinline)) SimClocks
boost_clocks(SimEngine *e, guint r, SimClocks c, gint64 t)
{
  const SimBoost *cfg = &e->m->boost[r];
  BoostState *b = &e->boost[r];
  double idle = e->ranks[r].idle_w;
  if (t > b->t_ns) {
    gint64 budget = (cfg->max_mhz - cfg->min_mhz) / cfg->step_mhz + 2 +
                    20 * cfg->window_ns / cfg->period_ns;
    while (b->tick_ns <= t && budget-- > 0) {
      boost_hold(b, cfg, idle, b->tick_ns);
      boost_decide(b, cfg);
      b->tick_ns += cfg->period_ns;
    }
    if (b->tick_ns <= t) {
      gint64 n = (t - b->tick_ns) / cfg->period_ns + 1;
      boost_hold(b, cfg, idle, b->tick_ns + (n - 1) * cfg->period_ns);
      for (int k = 0; k < (cfg->max_mhz - cfg->min_mhz) / cfg->step_mhz + 1;
           k++)
        boost_decide(b, cfg);
      b->tick_ns += n * cfg->period_ns;
    }
    boost_hold(b, cfg, idle, t);
  }
  return boost_cap(e, r, c);
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

static void boost_reset(SimEngine *e)
{
  for (guint r = 0; r < e->w->n_ranks; r++) {
    const SimBoost *c = &e->m->boost[r];
    BoostState *b = &e->boost[r];
    b->avg_w = b->kernel_w = e->ranks[r].idle_w;
    b->t_ns = b->end_ns = 0;
    b->tick_ns = c->period_ns;
    b->mhz = c->max_mhz;
  }
}

/* Simulated time is gint64 ns.  No time may pass TIME_MAX (2^62 - 1 ns,
 * 146 years): durations are capped at DUR_CAP = 2^62 and an end past
 * TIME_MAX is clamped to it and reported as an error after the iteration
 * (an absurd duration in the input, or an absurd slowdown), so the sums
 * ready + dur never overflow. */
#define TIME_MAX ((gint64)((G_GUINT64_CONSTANT(1) << 62) - 1))
#define DUR_CAP ((gint64)(G_GUINT64_CONSTANT(1) << 62))

/* llround(x), inline: round half away from zero.  x - trunc(x) is exact for
 * every double below 2^63, so this is the C library's answer bit for bit;
 * NaN and values past DUR_CAP give DUR_CAP, negative ones 0. */
static inline gint64 round_ns(double x)
{
  if (G_UNLIKELY(!(x > -4.6e18 && x < 4.6e18)))
    return x < 0 ? 0 : DUR_CAP;
  gint64 t = (gint64)x;
  double f = x - (double)t;
  if (f >= 0.5)
    t++;
  else if (f <= -0.5)
    t--;
  return t;
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

gint64 sim_kernel_rest_ns(gint64 old_ns, gint64 done_ns, double new_ns)
{
  g_return_val_if_fail(done_ns >= 0 && done_ns < old_ns, 0);
  /* The fraction of the work left, at the new clocks' full duration. */
  return round_ns((double)(old_ns - done_ns) / (double)old_ns * new_ns);
}

/* ---- the op log --------------------------------------------------------------- */

/* Appends an overflow record for op i and points its log entry at it. */
static void log_overflow(RankState *rs, guint32 i, gint64 arrive,
                         gint64 start, gint64 end, float inc)
{
  if (rs->n_ovf == rs->cap_ovf) {
    rs->cap_ovf = MAX(8, 2 * rs->cap_ovf);
    rs->ovf = g_renew(Overflow, rs->ovf, rs->cap_ovf);
  }
  Overflow *o = &rs->ovf[rs->n_ovf];
  o->arrive = arrive;
  o->start = start;
  o->end = end;
  o->inc = inc;
  o->inc2 = 0.0f;
  o->split = 0;
  rs->log[i].dur = LOG_ESC;
  rs->log[i].aux = rs->n_ovf++;
}

/* Logs host op i (SIM_OP_HOST) of rank rs, ready at `ready`: it lasts
 * its ref_ns, whatever the clocks, with no power increment.  Returns its
 * end (capped at TIME_MAX, which fails the iteration as for kernels). */
static gint64 host_op(RankState *rs, guint32 i, const SimOp *op, gint64 ready)
{
  gint64 dur = op->ref_ns;
  if (G_LIKELY(dur >= 0 && dur < LOG_ESC && ready + dur <= TIME_MAX)) {
    rs->log[i].dur = (guint32)dur;
    rs->log[i].aux = 0;
    return ready + dur;
  }
  gint64 end = ready + MIN(dur, TIME_MAX);
  if (end > TIME_MAX) {
    end = TIME_MAX;
    if (rs->bad_op == 0)
      rs->bad_op = i + 1;
  }
  log_overflow(rs, i, ready, ready, end, 0.0f);
  return end;
}

/* End time of wait target j of rank rs (j has completed). */
static inline gint64 target_end(const RankState *rs, const Stream *owner,
                                guint32 j)
{
  guint32 k = lower_bound(rs->targets, owner->tgt_lo, owner->tgt_hi, j);
  return rs->target_end[k];
}

/* ---- scheduling ------------------------------------------------------------- */

static inline void push_work(SimEngine *e, guint r, guint s)
{
  if (G_UNLIKELY(e->n_work == e->cap_work)) {
    e->cap_work = MAX(64, 2 * e->cap_work);
    e->work = g_renew(guint64, e->work, e->cap_work);
  }
  e->work[e->n_work++] = (guint64)r << 32 | s;
}

/* Op i of rank r on stream st has been scheduled: stores its end when some
 * op waits for it, wakes the streams waiting for it, tells the observer. */
static inline void op_done(SimEngine *e, guint r, Stream *st, guint32 i,
                           gint64 arrive, gint64 start, gint64 end, float inc)
{
  RankState *rs = &e->ranks[r];
  if (st->tgt < st->tgt_hi && rs->targets[st->tgt] == i) {
    rs->target_end[st->tgt++] = end;
    for (guint s = 0; s < rs->n_streams; s++) {
      Stream *o = &rs->streams[s];
      if (o->state == ST_WAIT_OP && o->waiting_for == i) {
        o->state = ST_RUN;
        push_work(e, r, s);
      }
    }
  }
  if (G_UNLIKELY(e->observer != NULL)) {
    const SimOp *op = &e->w->ranks[r].ops[i];
    SimOpRecord rec = {e->iter, r, i, arrive, start, end, 0.0, {0, 0}};
    rec.power_w = rs->idle_w + inc;
    if (op->kind == SIM_OP_KERNEL) {
      const SimCost *c = &rs->cache[op->shape].cost;
      rec.clocks.sm_mhz = c->sm_mhz;
      rec.clocks.mem_mhz = c->mem_mhz;
    }
    e->observer(e->observer_data, &rec);
  }
}

static guint32 pending_alloc(SimEngine *e)
{
  if (e->n_free > 0)
    return e->pend_free[--e->n_free];
  if (e->n_pend == e->cap_pend) {
    e->cap_pend = MAX(64, 2 * e->cap_pend);
    e->pend = g_renew(Pending, e->pend, e->cap_pend);
    e->pend_free = g_renew(guint32, e->pend_free, e->cap_pend);
  }
  Pending *p = &e->pend[e->n_pend];
  memset(p, 0, sizeof *p);
  return e->n_pend++;
}

static void pending_release(SimEngine *e, guint32 idx)
{
  e->pend_free[e->n_free++] = idx;
}

/* Makes room for n members in pending record p. */
static inline void pending_reserve(Pending *p, guint n)
{
  if (p->members_cap < n) {
    p->members_cap = n;
    p->members = g_renew(Member, p->members, n);
  }
}

/* Replaces ring's slots by a larger power of two in which its open
 * instances do not collide and slot seq & mask is free. */
static void ring_grow(SimEngine *e, Ring *ring, guint32 seq)
{
  guint32 old_cap = ring->slot != NULL ? ring->mask + 1 : 0;
  for (guint32 ncap = MAX(4u, 2 * old_cap);; ncap *= 2) {
    guint32 *ns = g_new0(guint32, ncap);
    gboolean ok = TRUE;
    for (guint32 k = 0; k < old_cap && ok; k++) {
      guint32 v = ring->slot[k];
      if (v == 0)
        continue;
      guint32 at = e->pend[v - 1].seq_or_dst & (ncap - 1);
      if (ns[at] != 0)
        ok = FALSE;
      else
        ns[at] = v;
    }
    if (ok && ns[seq & (ncap - 1)] == 0) {
      g_free(ring->slot);
      ring->slot = ns;
      ring->mask = ncap - 1;
      return;
    }
    g_free(ns);
  }
}

/* Rank dst's incoming channel from ranks folding to src (created empty when
 * missing; the array stays sorted by src). */
static Channel *channel_of(SimEngine *e, guint32 dst, guint32 src)
{
  RankState *rs = &e->ranks[dst];
  guint32 lo = 0, hi = rs->n_chans;
  while (lo < hi) {
    guint32 mid = lo + (hi - lo) / 2;
    if (rs->chans[mid].src < src)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < rs->n_chans && rs->chans[lo].src == src)
    return &rs->chans[lo];
  if (rs->n_chans == rs->cap_chans) {
    rs->cap_chans = MAX(4, 2 * rs->cap_chans);
    rs->chans = g_renew(Channel, rs->chans, rs->cap_chans);
  }
  memmove(&rs->chans[lo + 1], &rs->chans[lo],
          sizeof(Channel) * (rs->n_chans - lo));
  rs->n_chans++;
  Channel *c = &rs->chans[lo];
  memset(c, 0, sizeof *c);
  c->src = src;
  return c;
}

static void channel_push(Channel *c, guint64 v)
{
  if (c->len == c->cap) {
    guint32 ncap = MAX(4, 2 * c->cap);
    guint64 *nq = g_new(guint64, ncap);
    for (guint32 k = 0; k < c->len; k++)
      nq[k] = c->q[(c->head + k) % c->cap];
    g_free(c->q);
    c->q = nq;
    c->cap = ncap;
    c->head = 0;
  }
  c->q[(c->head + c->len) % c->cap] = v;
  c->len++;
}

static guint64 channel_pop(Channel *c)
{
  guint64 v = c->q[c->head];
  c->head = (c->head + 1) % c->cap;
  c->len--;
  return v;
}

static inline guint32 rep_of(const SimEngine *e, guint32 r)
{
  return e->folded ? e->w->fold_rep[r] : r;
}

/* Records the arrival of rank r's communication op i at time t.  Queues a
 * COMM_START event when the transfer's last member has arrived. */
static void comm_arrive(SimEngine *e, guint r, guint32 i, gint64 t)
{
  const SimWorkload *w = e->w;
  const SimOp *op = &w->ranks[r].ops[i];
  const SimShape *sh = &e->shapes[op->shape];
  guint32 idx;
  Pending *p;
  if (op->kind == SIM_OP_COLLECTIVE) {
    guint32 g = op->peer;
    RankState *rs = &e->ranks[r];
    /* Membership index: consecutive collectives of a rank are mostly on
     * one group (tensor parallelism), so remember the last one. */
    if (rs->last_group != g + 1) {
      rs->last_group = g + 1;
      rs->last_mpos = lower_bound(e->group_ranks, e->group_off[g],
                                  e->group_off[g + 1], r);
    }
    guint32 mpos = rs->last_mpos;
    guint32 seq = e->mseq[mpos]++;
    Ring *ring = &e->rings[g];
    guint32 v = ring->slot != NULL ? ring->slot[seq & ring->mask] : 0;
    if (v != 0 && e->pend[v - 1].seq_or_dst == seq) {
      idx = v - 1;
      p = &e->pend[idx];
    } else {
      if (v != 0 || ring->slot == NULL)
        ring_grow(e, ring, seq);
      idx = pending_alloc(e);
      p = &e->pend[idx];
      p->p2p = FALSE;
      p->group_or_src = g;
      p->seq_or_dst = seq;
      p->n_members = e->group_expect[g];
      p->n_arrived = 0;
      p->start_ns = t;
      p->ref_ns = 0;
      p->bytes = sh->bytes;
      p->coll = sh->coll;
      pending_reserve(p, p->n_members);
      ring->slot[seq & ring->mask] = idx + 1;
    }
    p->members[p->n_arrived].rank = r;
    p->members[p->n_arrived].op = i;
    p->n_arrived++;
    p->start_ns = MAX(p->start_ns, t);
    p->ref_ns = MAX(p->ref_ns, op->ref_ns);
    p->bytes = MAX(p->bytes, sh->bytes);
    if (p->n_arrived == p->n_members) {
      ring->slot[seq & ring->mask] = 0;
      sim_queue_push(e->queue, p->start_ns, PRIO_COMM, EV_COMM_START, idx);
    }
    return;
  }
  /* Point-to-point: FIFO matching per (src, dst), both folded to their
   * representatives; the channel lives on the destination. */
  guint32 src = op->kind == SIM_OP_SEND ? r : op->peer;
  guint32 dst = op->kind == SIM_OP_SEND ? op->peer : r;
  Channel *ch = channel_of(e, rep_of(e, dst), rep_of(e, src));
  /* The channel holds unmatched ops of one side only (sends or recvs). */
  gboolean other_side = FALSE;
  if (ch->len > 0) {
    guint64 h = ch->q[ch->head];
    other_side = w->ranks[h >> 32].ops[h & 0xffffffffu].kind != op->kind;
  }
  if (!other_side) {
    channel_push(ch, (guint64)r << 32 | i);
    return;
  }
  guint64 mv = channel_pop(ch);
  guint32 mr = (guint32)(mv >> 32), mi = (guint32)(mv & 0xffffffffu);
  const SimOp *mop = &w->ranks[mr].ops[mi];
  gint64 mate_arrive = e->ranks[mr].streams[mop->stream].arrive_ns;
  idx = pending_alloc(e);
  p = &e->pend[idx];
  p->p2p = TRUE;
  p->group_or_src = src;
  p->seq_or_dst = dst;
  p->n_members = 2;
  p->n_arrived = 2;
  pending_reserve(p, 2);
  p->members[0].rank = mr;
  p->members[0].op = mi;
  p->members[1].rank = r;
  p->members[1].op = i;
  p->start_ns = MAX(t, mate_arrive);
  p->ref_ns = MAX(op->ref_ns, mop->ref_ns);
  p->bytes = MAX(sh->bytes, e->shapes[mop->shape].bytes);
  p->coll = SIM_COLL_SEND_RECV;
  sim_queue_push(e->queue, p->start_ns, PRIO_COMM, EV_COMM_START, idx);
}

/* Schedules the transfer of pending record idx at its start time. */
static void comm_start(SimEngine *e, guint32 idx)
{
  Pending *p = &e->pend[idx];
  const SimMachine *m = e->m;
  gint64 dur;
  if (p->ref_ns > 0)
    dur = p->ref_ns;
  else if (p->p2p)
    dur = m->p2p_ns(m->ctx, p->group_or_src, p->seq_or_dst, p->bytes,
                    p->start_ns);
  else
    dur = m->collective_ns(m->ctx, p->group_or_src, p->bytes,
                           (SimCollType)p->coll, p->start_ns);
  dur = CLAMP(dur, 0, DUR_CAP);
  gint64 start = p->start_ns, end = start + dur;
  if (G_UNLIKELY(end > TIME_MAX)) {
    end = TIME_MAX;
    for (guint k = 0; k < p->n_members; k++) {
      RankState *rs = &e->ranks[p->members[k].rank];
      if (rs->bad_op == 0)
        rs->bad_op = p->members[k].op + 1;
    }
  }
  for (guint k = 0; k < p->n_members; k++) {
    guint r = p->members[k].rank;
    guint32 i = p->members[k].op;
    RankState *rs = &e->ranks[r];
    const SimOp *op = &e->w->ranks[r].ops[i];
    Stream *st = &rs->streams[op->stream];
    gint64 arrive = st->arrive_ns;
    gint64 blocked = start - arrive;
    if (G_LIKELY(dur < LOG_ESC && blocked < LOG_ESC)) {
      rs->log[i].dur = (guint32)dur;
      rs->log[i].aux = (guint32)blocked;
    } else {
      log_overflow(rs, i, arrive, start, end, rs->comm_inc);
    }
    st->free_ns = end;
    st->cur = i + 1;
    st->state = ST_RUN;
    push_work(e, r, op->stream);
    op_done(e, r, st, i, arrive, start, end, rs->comm_inc);
  }
  pending_release(e, idx);
}

/* Stream st requests clocks c at time t (>= every earlier request of the
 * stream): a switch landing the latency later when c differs from the
 * target.  A switch in flight that has not landed by t never lands. */
static inline void request_clocks(SimEngine *e, RankState *rs, Stream *st,
                                  SimClocks c, gint64 t)
{
  if (st->clk_land_ns <= t)
    st->clk_cur = st->clk_target;
  if (c.sm_mhz != st->clk_target.sm_mhz ||
      c.mem_mhz != st->clk_target.mem_mhz) {
    rs->switches++;
    st->clk_target = c;
    st->clk_land_ns = t + e->m->switch_latency_ns;
    if (e->m->switch_latency_ns == 0)
      st->clk_cur = c;
  }
}

/* Applies the clock-switch rules to stream st for a kernel requesting c at
 * time t, and returns the clocks in force at t.  init: the stream's clocks
 * before the run from the plan, or NULL. */
static inline SimClocks clocks_at(SimEngine *e, RankState *rs, Stream *st,
                                  SimClocks c, gint64 t, const SimPlan *plan,
                                  const SimInit *init)
{
  if (G_UNLIKELY(!st->clk_init)) {
    st->clk_init = TRUE;
    if (init == NULL || !init->set) {
      /* Clocks are set before the run starts: no switch for the first. */
      st->clk_cur = st->clk_target = c;
      st->clk_land_ns = 0;
      return c;
    }
    /* As after an iteration of the plan, then the kernel's own request. */
    st->clk_cur = plan->pairs[init->cur];
    st->clk_target = plan->pairs[init->target];
    st->clk_land_ns = init->land_ns;
  }
  request_clocks(e, rs, st, c, t);
  return st->clk_cur;
}

/* The switch in flight on stream st lands inside kernel i of rank r, which
 * started at `start` and would last `dur` at the clocks in force (priced
 * in `slot`): splits the kernel there (sim/engine.h), logs both parts (an
 * overflow record), reports the first part to the observer and returns the
 * kernel's end; *inc2 gets the second part's increment.  The switch has
 * landed afterwards.  Out of line: it runs once per landing at most. */
static __attribute__((noinline)) gint64
split_kernel(SimEngine *e, guint r, Stream *st, guint32 i, gint64 start,
             gint64 dur, const CostSlot *slot, float *inc2)
{
  RankState *rs = &e->ranks[r];
  const SimOp *op = &e->w->ranks[r].ops[i];
  gint64 split = st->clk_land_ns;
  /* slot is the shape's cache entry, about to be repriced: copy first. */
  float inc1 = slot->inc;
  SimClocks c1 = {slot->cost.sm_mhz, slot->cost.mem_mhz};
  st->clk_cur = st->clk_target;
  SimClocks c2 = G_UNLIKELY(e->boost != NULL) ? boost_cap(e, r, st->clk_cur)
                                              : st->clk_cur;
  const CostSlot *now = price(e, r, op->shape, c2);
  gint64 rest = sim_kernel_rest_ns(dur, split - start,
                                   (double)op->ref_ns * now->cost.time_scale);
  gint64 end;
  if (G_UNLIKELY(split >= TIME_MAX || rest > TIME_MAX - split)) {
    end = TIME_MAX;
    split = MIN(split, end);
    if (rs->bad_op == 0)
      rs->bad_op = i + 1;
  } else {
    end = split + rest;
  }
  log_overflow(rs, i, start, start, end, inc1);
  Overflow *o = &rs->ovf[rs->n_ovf - 1];
  o->split = split;
  o->inc2 = now->inc;
  if (G_UNLIKELY(e->observer != NULL)) {
    SimOpRecord rec = {e->iter, r, i, start, start, split, 0.0, c1};
    rec.power_w = rs->idle_w + inc1;
    e->observer(e->observer_data, &rec);
  }
  *inc2 = now->inc;
  return end;
}

/* First early request of the ascending list a[0, n) on an op >= i. */
static inline guint32 ahead_from(const SimAhead *a, guint32 n, guint32 i)
{
  guint32 lo = 0, hi = n;
  while (lo < hi) {
    guint32 mid = lo + (hi - lo) / 2;
    if (a[mid].op < i)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Runs stream s of rank r as far as it can go. */
static void advance(SimEngine *e, guint r, guint s)
{
  RankState *rs = &e->ranks[r];
  Stream *st = &rs->streams[s];
  if (st->state != ST_RUN)
    return;
  const SimOp *ops = e->w->ranks[r].ops;
  OpLog *log = rs->log;
  const SimPlan *plan = e->plan;
  const guint16 *pidx = plan->index != NULL && r < plan->n_ranks
                            ? plan->index[r]
                            : NULL;
  const SimClocks *pairs = plan->pairs;
  const guint n_pairs = plan->n_pairs;
  /* op_done() only matters for wait targets and observers. */
  const gboolean observed = e->observer != NULL;
  guint32 next_tgt = st->tgt < st->tgt_hi ? rs->targets[st->tgt] : G_MAXUINT32;
  /* Early requests of this stream (plans made for a latency), found from
   * the cursor; the loop stops its fast path at the next one as at the
   * next wait target. */
  const SimAhead *ah = NULL;
  guint32 n_ah = 0, ka = 0, next_ahead = G_MAXUINT32;
  if (G_UNLIKELY(plan->ahead != NULL) && r < plan->n_ranks &&
      plan->ahead[r] != NULL) {
    ah = plan->ahead[r];
    n_ah = plan->n_ahead[r];
    ka = ahead_from(ah, n_ah, st->cur);
    if (ka < n_ah && ah[ka].op < st->end)
      next_ahead = ah[ka].op;
  }
  guint32 next_stop = MIN(next_tgt, next_ahead);
  gint64 t = st->free_ns;
  guint32 i = st->cur;
  for (; i < st->end; i++) {
    const SimOp *op = &ops[i];
    gint64 ready = t;
    if (op->wait != SIM_NO_WAIT) {
      /* Ops of a stream are scheduled in order, so op j is done exactly
       * when its stream's cursor has moved past it. */
      guint32 j = op->wait;
      const Stream *owner = &rs->streams[ops[j].stream];
      if (owner->cur <= j) {
        st->state = ST_WAIT_OP;
        st->waiting_for = j;
        break;
      }
      ready = MAX(ready, target_end(rs, owner, j));
    }
    if (G_LIKELY(op->kind == SIM_OP_KERNEL)) {
      if (G_UNLIKELY(i == next_ahead)) {
        /* Requests made before this kernel starts, in the wait before it
         * (not before the stream's previous op ended at t). */
        for (; i == next_ahead && ah[ka].from_start; ka++) {
          if (st->clk_init)
            request_clocks(e, rs, st, pairs[ah[ka].pair],
                           MAX(t, ready - ah[ka].lead_ns));
          next_ahead = ka + 1 < n_ah && ah[ka + 1].op < st->end
                           ? ah[ka + 1].op
                           : G_MAXUINT32;
        }
        next_stop = MIN(next_tgt, next_ahead);
      }
      guint k = pidx != NULL ? pidx[i] : 0;
      SimClocks req = pairs[k < n_pairs ? k : 0];
      SimClocks c;
      /* Steady state: the same pair as the stream's landed target. */
      gboolean steady = st->clk_init &&
                        pack_clocks(req) == pack_clocks(st->clk_target) &&
                        pack_clocks(st->clk_cur) == pack_clocks(req);
      if (G_LIKELY(steady))
        c = req;
      else
        c = clocks_at(e, rs, st, req, ready, plan,
                      plan->init != NULL && r < plan->n_ranks &&
                              plan->init[r] != NULL
                          ? &plan->init[r][s]
                          : NULL);
      if (G_UNLIKELY(e->boost != NULL))
        c = boost_clocks(e, r, c, ready);
      const CostSlot *slot = price(e, r, op->shape, c);
      gint64 dur = round_ns((double)op->ref_ns * slot->cost.time_scale);
      float inc = slot->inc;
      gint64 end = ready + dur;
      gint64 split = 0; /* when a switch landed inside it (0: none) */
      if (G_UNLIKELY(!steady &&
                     pack_clocks(st->clk_cur) != pack_clocks(st->clk_target) &&
                     st->clk_land_ns < end)) {
        /* A switch in flight (it lands after `ready`, or clocks_at would
         * have applied it) lands before the kernel ends. */
        split = st->clk_land_ns;
        end = split_kernel(e, r, st, i, ready, dur, slot, &inc);
      } else if (G_LIKELY(dur >= 0 && dur < LOG_ESC)) {
        log[i].dur = (guint32)dur;
        log[i].aux = float_bits(inc);
      } else {
        if (G_UNLIKELY(end > TIME_MAX)) {
          end = TIME_MAX;
          if (rs->bad_op == 0)
            rs->bad_op = i + 1;
        }
        log_overflow(rs, i, ready, ready, end, inc);
      }
      t = end;
      if (G_UNLIKELY(e->boost != NULL))
        boost_note(e, r, end, inc);
      if (G_UNLIKELY(i == next_stop || observed)) {
        for (; i == next_ahead; ka++) {
          /* Made lead_ns before the kernel ends, but not before it starts,
           * nor before the switch that landed inside it, nor so early
           * that it would land inside it too (the list is in time order,
           * so requests stay in order). */
          gint64 lead = MIN(ah[ka].lead_ns, e->m->switch_latency_ns);
          gint64 tq = MAX(MAX(ready, split), end - lead);
          request_clocks(e, rs, st, pairs[ah[ka].pair], tq);
          next_ahead = ka + 1 < n_ah && ah[ka + 1].op < st->end
                           ? ah[ka + 1].op
                           : G_MAXUINT32;
        }
        gint64 from = split != 0 ? split : ready; /* the last part */
        op_done(e, r, st, i, from, from, end, inc);
        next_tgt = st->tgt < st->tgt_hi ? rs->targets[st->tgt] : G_MAXUINT32;
        next_stop = MIN(next_tgt, next_ahead);
      }
    } else if (op->kind == SIM_OP_MARKER) {
      log[i].dur = 0;
      log[i].aux = 0;
      t = ready;
      op_done(e, r, st, i, ready, ready, ready, 0.0f);
      next_tgt = st->tgt < st->tgt_hi ? rs->targets[st->tgt] : G_MAXUINT32;
      next_stop = MIN(next_tgt, next_ahead);
    } else if (op->kind == SIM_OP_HOST) {
      /* CPU time: its recorded duration at any clocks, no GPU power. */
      t = host_op(rs, i, op, ready);
      op_done(e, r, st, i, ready, ready, t, 0.0f);
      next_tgt = st->tgt < st->tgt_hi ? rs->targets[st->tgt] : G_MAXUINT32;
      next_stop = MIN(next_tgt, next_ahead);
    } else {
      st->state = ST_WAIT_COMM;
      st->cur = i;
      st->free_ns = t;
      st->arrive_ns = ready;
      comm_arrive(e, r, i, ready);
      return;
    }
  }
  st->cur = i;
  st->free_ns = t;
  if (i == st->end && st->state == ST_RUN) {
    st->state = ST_DONE;
    if (--rs->n_unfinished == 0)
      e->n_unfinished_ranks--;
  }
}

static void drain_work(SimEngine *e)
{
  while (e->n_work > 0) {
    guint64 v = e->work[--e->n_work];
    advance(e, (guint)(v >> 32), (guint)(v & 0xffffffffu));
  }
}

/* ---- accounting ------------------------------------------------------------- */

/* Where a rank's contributions to the totals go: the result itself, or a
 * scratch copy that is weighted by the class size (folded replay). */
typedef struct {
  SimTE by_class[SIM_CLASS_COUNT];
  SimTE by_phase[SIM_PHASE_COUNT];
  SimTE blocked, idle;
} Totals;

/* Op i's times this iteration, given the end of the op before it on its
 * stream (the iteration start for the first). */
static inline void decode(const RankState *rs, const SimOp *ops, guint32 i,
                          gint64 prev_end, Iv *iv)
{
  const SimOp *op = &ops[i];
  gint64 arrive = prev_end;
  if (op->wait != SIM_NO_WAIT) {
    const Stream *owner = &rs->streams[ops[op->wait].stream];
    arrive = MAX(arrive, target_end(rs, owner, op->wait));
  }
  OpLog l = rs->log[i];
  iv->arrive = arrive;
  iv->rest_end = 0;
  if (G_UNLIKELY(l.dur == LOG_ESC)) {
    const Overflow *o = &rs->ovf[l.aux];
    iv->arrive = o->arrive;
    iv->start = o->start;
    iv->end = o->end;
    iv->inc = o->inc;
    if (o->split != 0) {
      /* A split kernel: its first part now, the second after it. */
      iv->end = o->split;
      iv->rest_end = o->end;
      iv->rest_inc = o->inc2;
    }
    return;
  }
  switch (op->kind) {
  case SIM_OP_KERNEL:
    iv->start = arrive;
    iv->end = arrive + l.dur;
    iv->inc = bits_float(l.aux);
    break;
  case SIM_OP_MARKER:
    iv->start = iv->end = arrive;
    iv->inc = 0.0f;
    break;
  case SIM_OP_HOST:
    iv->start = arrive;
    iv->end = arrive + l.dur;
    iv->inc = 0.0f;
    break;
  default:
    iv->start = arrive + l.aux;
    iv->end = iv->start + l.dur;
    iv->inc = rs->comm_inc;
    break;
  }
}

/* One stream's interval sequence during the sweep.  phase: 0 before the
 * current op's arrival, 1 blocked (arrive..start), 2 active (start..end). */
typedef struct {
  guint32 cur, end;
  guint32 phase;
  gint64 prev_end;
  Iv iv;
} Reader;

static inline gint64 reader_edge(const Reader *rd)
{
  return rd->phase == 0 ? rd->iv.arrive
         : rd->phase == 1 ? rd->iv.start
                          : rd->iv.end;
}

/* Moves rd past every edge at or before tau.  FALSE when exhausted. */
static inline gboolean reader_skip(Reader *rd, const RankState *rs,
                                   const SimOp *ops, gint64 tau)
{
  for (;;) {
    if (rd->cur >= rd->end)
      return FALSE;
    if (reader_edge(rd) > tau)
      return TRUE;
    if (rd->phase == 2) {
      if (G_UNLIKELY(rd->iv.rest_end != 0)) {
        /* Past the first part of a split kernel: its second part. */
        rd->iv.start = rd->iv.end;
        rd->iv.end = rd->iv.rest_end;
        rd->iv.inc = rd->iv.rest_inc;
        rd->iv.rest_end = 0;
        continue;
      }
      rd->prev_end = rd->iv.end;
      rd->cur++;
      rd->phase = 0;
      if (rd->cur < rd->end)
        decode(rs, ops, rd->cur, rd->prev_end, &rd->iv);
    } else {
      rd->phase++;
    }
  }
}

/* State of a stream for the attribution: 3 kernel, 2 communication (a
 * running host op counts as idle),
 * 1 blocked, 0 idle; and its power increment (when active). */
static inline int reader_kind(const Reader *rd, const SimOp *ops)
{
  if (rd->phase == 1)
    return 1;
  if (rd->phase == 2) {
    guint8 k = ops[rd->cur].kind;
    /* A running host op leaves the GPU idle. */
    return k == SIM_OP_KERNEL ? 3 : k == SIM_OP_HOST ? 0 : 2;
  }
  return 0;
}

/* Adds segment [tau, next) attributed to `kind` (op `op` for 2 and 3). */
static inline void emit(Totals *tot, SimGpuResult *g, const SimOp *ops,
                        double idle_w, gint64 tau, gint64 next, int kind,
                        guint32 op, double inc_sum, double *peak)
{
  double len = (double)(next - tau);
  double base_j = idle_w * len * 1e-9;
  switch (kind) {
  case 3:
  case 2: {
    const SimOp *o = &ops[op];
    tot->by_class[o->klass].energy_j += base_j;
    tot->by_phase[o->phase].energy_j += base_j;
    if (kind == 3)
      g->kernel_ns += len;
    else
      g->comm_ns += len;
    break;
  }
  case 1:
    tot->blocked.energy_j += base_j;
    tot->blocked.time_ns += len;
    g->blocked_j += base_j;
    g->blocked_ns += len;
    break;
  default:
    tot->idle.energy_j += base_j;
    tot->idle.time_ns += len;
    g->idle_j += base_j;
    g->idle_ns += len;
    break;
  }
  *peak = MAX(*peak, idle_w + inc_sum);
}

/* Accounts rank r over [t0, t1): its energy (returned), its per-GPU figures
 * in *g and its contributions to *tot.  The additions happen in the order
 * of a plain per-op pass followed by a k-way merge of the streams, one
 * segment per edge of any stream (zero-length segments add nothing). */
static double account_rank(SimEngine *e, guint r, gint64 t0, gint64 t1,
                           Totals *tot_out, SimGpuResult *g_out)
{
  /* Local copies: the same additions in the same order, but the compiler
   * knows they alias nothing (results are written back at the end). */
  Totals lt = *tot_out;
  SimGpuResult lg = *g_out;
  Totals *tot = &lt;
  SimGpuResult *g = &lg;
  const SimMachine *m = e->m;
  const SimRank *rk = &e->w->ranks[r];
  const SimOp *ops = rk->ops;
  RankState *rs = &e->ranks[r];
  const double idle_w = rs->idle_w;
  const double block_inc = m->blocked_power_w[r] - idle_w;
  double energy = idle_w * (double)(t1 - t0) * 1e-9;
  guint ns = rs->n_streams;

  /* Increments, attributed to their own op (or to blocked).  Only
   * durations are needed here, and the log holds them directly. */
  const OpLog *log = rs->log;
  const double comm_inc = rs->comm_inc;
  for (guint32 i = 0; i < rk->n_ops; i++) {
    const SimOp *op = &ops[i];
    OpLog l = log[i];
    double d, inc, blocked;
    const Overflow *split = NULL; /* a kernel split by a clock switch */
    if (G_UNLIKELY(op->kind == SIM_OP_HOST))
      continue; /* CPU time: no increment, no GPU class time */
    if (G_UNLIKELY(l.dur == LOG_ESC)) {
      const Overflow *o = &rs->ovf[l.aux];
      d = (double)(o->end - o->start);
      inc = o->inc;
      blocked = (double)(o->start - o->arrive);
      if (o->split != 0)
        split = o;
    } else if (op->kind == SIM_OP_KERNEL) {
      d = (double)l.dur;
      inc = bits_float(l.aux);
      blocked = 0;
    } else if (op->kind == SIM_OP_MARKER) {
      d = 0;
      inc = 0;
      blocked = 0;
    } else {
      d = (double)l.dur;
      inc = comm_inc;
      blocked = (double)l.aux;
    }
    double ej = inc * d * 1e-9;
    if (G_UNLIKELY(split != NULL))
      /* Each part at its own clocks' power. */
      ej = (double)split->inc * (double)(split->split - split->start) * 1e-9 +
           (double)split->inc2 * (double)(split->end - split->split) * 1e-9;
    tot->by_class[op->klass].time_ns += d;
    tot->by_class[op->klass].energy_j += ej;
    tot->by_phase[op->phase].time_ns += d;
    tot->by_phase[op->phase].energy_j += ej;
    energy += ej;
    if (op->kind == SIM_OP_KERNEL)
      g->flops += e->shapes[op->shape].flops;
    if (blocked > 0) {
      double bj = block_inc * blocked * 1e-9;
      tot->blocked.energy_j += bj;
      g->blocked_j += bj;
      energy += bj;
    }
  }

  /* k-way sweep over streams for the baseline and the time partition. */
  Reader rd[SIM_MAX_STREAMS];
  gint64 edge[SIM_MAX_STREAMS];
  int kind[SIM_MAX_STREAMS];
  gboolean live[SIM_MAX_STREAMS];
  for (guint s = 0; s < ns; s++) {
    rd[s].cur = rk->stream_off[s];
    rd[s].end = rk->stream_off[s + 1];
    rd[s].phase = 0;
    rd[s].prev_end = t0;
    if (rd[s].cur < rd[s].end)
      decode(rs, ops, rd[s].cur, t0, &rd[s].iv);
  }
  gint64 tau = t0;
  double peak = idle_w;
  while (tau < t1) {
    gint64 next = t1;
    int best_kind = 0;
    guint32 best_op = 0;
    double inc_sum = 0.0;
    for (guint s = 0; s < ns; s++) {
      live[s] = reader_skip(&rd[s], rs, ops, tau);
      if (!live[s])
        continue;
      edge[s] = reader_edge(&rd[s]);
      next = MIN(next, edge[s]);
      kind[s] = reader_kind(&rd[s], ops);
      if (kind[s] == 1)
        inc_sum += block_inc;
      else if (kind[s] >= 2)
        inc_sum += rd[s].iv.inc;
      if (kind[s] > best_kind) {
        best_kind = kind[s];
        best_op = rd[s].cur;
      }
    }
    if (next > tau)
      emit(tot, g, ops, idle_w, tau, next, best_kind, best_op, inc_sum,
           &peak);
    tau = next;

    /* Fast path: exactly one stream changes at tau, the others hold their
     * states until `limit`: run that stream alone up to there. */
    guint solo = G_MAXUINT, n_at = 0;
    gint64 limit = t1;
    for (guint s = 0; s < ns; s++) {
      if (!live[s])
        continue;
      if (edge[s] == tau) {
        solo = s;
        n_at++;
      } else {
        limit = MIN(limit, edge[s]);
      }
    }
    if (n_at != 1 || limit <= tau)
      continue;
    /* The others' best state (first stream with the highest kind) and
     * their increments before and after `solo`, in stream order. */
    int other_kind = 0;
    guint other_stream = 0;
    guint32 other_op = 0;
    double inc_before = 0.0;
    double inc_after[SIM_MAX_STREAMS];
    guint n_after = 0;
    for (guint s = 0; s < ns; s++) {
      if (!live[s] || s == solo)
        continue;
      double inc = kind[s] == 1 ? block_inc : (double)rd[s].iv.inc;
      if (kind[s] >= 1) {
        if (s < solo)
          inc_before += inc;
        else
          inc_after[n_after++] = inc;
      }
      if (kind[s] > other_kind) {
        other_kind = kind[s];
        other_stream = s;
        other_op = rd[s].cur;
      }
    }
    /* The sums of increments for the solo stream idle (0) or blocked (1),
     * added in stream order as the merge above adds them. */
    double sum_k[2] = {inc_before, inc_before + block_inc};
    for (guint a = 0; a < n_after; a++) {
      sum_k[0] += inc_after[a];
      sum_k[1] += inc_after[a];
    }
    gboolean win3 = 3 > other_kind || (other_kind == 3 && solo < other_stream);
    Reader *sr = &rd[solo];
    for (;;) {
      if (!reader_skip(sr, rs, ops, tau))
        break;
      gint64 ed = reader_edge(sr);
      if (ed >= limit)
        break;
      int k = reader_kind(sr, ops);
      double sum;
      if (k <= 1) {
        sum = sum_k[k];
      } else {
        sum = inc_before + (double)sr->iv.inc;
        for (guint a = 0; a < n_after; a++)
          sum += inc_after[a];
      }
      gboolean mine = k > other_kind || (k == other_kind && solo < other_stream);
      emit(tot, g, ops, idle_w, tau, ed, mine ? k : other_kind,
           mine ? sr->cur : other_op, sum, &peak);
      tau = ed;
      if (k != 3 || n_after != 0)
        continue;
      /* Back-to-back kernels (no wait, no gap, no overflow) that end
       * before `limit`: the reader moves straight to each one's active
       * phase, which is what reader_skip would do through two empty
       * phases; the segment sums are those emit() would add, in the same
       * order, with the reader and the GPU's kernel time kept in locals.
       * Not from the first part of a split kernel (it does not end at
       * tau). */
      if (!win3 || sr->iv.rest_end != 0)
        continue;
      guint32 n = sr->cur + 1, last = sr->cur;
      gint64 t = tau, last_start = sr->iv.start;
      float last_inc = sr->iv.inc;
      double kns = g->kernel_ns, pk = peak;
      for (; n < sr->end; n++) {
        const SimOp *o = &ops[n];
        if (o->kind != SIM_OP_KERNEL || o->wait != SIM_NO_WAIT)
          break;
        OpLog l = log[n];
        if (l.dur == LOG_ESC)
          break;
        gint64 end = t + l.dur;
        if (end >= limit)
          break;
        last = n;
        last_start = t;
        last_inc = bits_float(l.aux);
        if (end > t) {
          double len = (double)(end - t);
          double base_j = idle_w * len * 1e-9;
          tot->by_class[o->klass].energy_j += base_j;
          tot->by_phase[o->phase].energy_j += base_j;
          kns += len;
          pk = MAX(pk, idle_w + (inc_before + (double)last_inc));
          t = end;
        }
      }
      g->kernel_ns = kns;
      peak = pk;
      if (last != sr->cur) {
        sr->prev_end = last_start;
        sr->cur = last;
        sr->iv.arrive = sr->iv.start = last_start;
        sr->iv.end = t;
        sr->iv.inc = last_inc;
        tau = t;
      }
    }
  }
  g->energy_j += energy;
  g->switches += rs->switches;
  g->peak_power_w = MAX(g->peak_power_w, peak);
  *tot_out = lt;
  *g_out = lg;
  return energy;
}

/* ---- the run ---------------------------------------------------------------- */

static gboolean run_iteration(SimEngine *e, gint64 t0, gint64 *t1,
                              GError **error)
{
  const SimWorkload *w = e->w;
  e->n_unfinished_ranks = 0;
  memset(e->mseq, 0, sizeof(guint32) * MAX(w->group_ranks->len, 1));
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    RankState *rs = &e->ranks[r];
    rs->n_unfinished = 0;
    rs->n_ovf = 0;
    for (guint s = 0; s < rs->n_streams; s++) {
      Stream *st = &rs->streams[s];
      st->cur = rk->stream_off[s];
      st->end = rk->stream_off[s + 1];
      st->tgt = st->tgt_lo;
      st->free_ns = t0;
      st->state = st->cur < st->end ? ST_RUN : ST_DONE;
      if (st->state == ST_RUN)
        rs->n_unfinished++;
    }
    if (rs->n_unfinished > 0)
      e->n_unfinished_ranks++;
    for (guint s = 0; s < rs->n_streams; s++)
      if (rs->streams[s].state == ST_RUN)
        sim_queue_push(e->queue, t0, PRIO_RESUME, EV_RESUME,
                       (guint64)r << 32 | s);
  }
  SimEvent ev;
  while (sim_queue_pop(e->queue, &ev)) {
    if (ev.kind == EV_RESUME)
      push_work(e, (guint)(ev.payload >> 32),
                (guint)(ev.payload & 0xffffffffu));
    else
      comm_start(e, (guint32)ev.payload);
    drain_work(e);
  }
  if (e->n_unfinished_ranks > 0) {
    for (guint r = 0; r < w->n_ranks; r++) {
      RankState *rs = &e->ranks[r];
      for (guint s = 0; s < rs->n_streams; s++) {
        Stream *st = &rs->streams[s];
        if (st->state == ST_DONE)
          continue;
        const SimOp *op = &w->ranks[r].ops[st->cur];
        g_set_error(error, SIM_ERROR, SIM_ERROR_DEADLOCK,
                    "replay deadlocked in iteration %u: rank %u stream %u "
                    "stuck at op %u (%s %s)%s",
                    e->iter, r, s, st->cur, sim_kind_name(op->kind),
                    sim_workload_name(w, op->name),
                    st->state == ST_WAIT_COMM
                        ? ", waiting for its communication partners"
                        : ", waiting for an op of another stream");
        return FALSE;
      }
    }
  }
  gint64 end = t0;
  for (guint r = 0; r < w->n_ranks; r++) {
    RankState *rs = &e->ranks[r];
    for (guint s = 0; s < rs->n_streams; s++)
      end = MAX(end, rs->streams[s].free_ns);
    if (G_UNLIKELY(rs->bad_op != 0)) {
      guint32 i = rs->bad_op - 1;
      const SimOp *op = &w->ranks[r].ops[i];
      g_set_error(error, SIM_ERROR, SIM_ERROR_LIMIT,
                  "iteration %u: rank %u op %u (%s %s) ends past the "
                  "engine's time range (2^62 ns, 146 years of simulated "
                  "time): a duration in the input, or a slowdown, is absurd",
                  e->iter, r, i, sim_kind_name(op->kind),
                  sim_workload_name(w, op->name));
      return FALSE;
    }
  }
  if (G_UNLIKELY(end >= TIME_MAX)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_LIMIT,
                "iteration %u ends past the engine's time range (2^62 ns, "
                "146 years of simulated time)", e->iter);
    return FALSE;
  }
  *t1 = end;
  return TRUE;
}

/* Forgets whatever a failed earlier run left behind. */
static void engine_reset(SimEngine *e)
{
  const SimWorkload *w = e->w;
  sim_queue_clear(e->queue);
  e->n_work = 0;
  for (guint g = 0; g < e->n_groups; g++)
    if (e->rings[g].slot != NULL)
      memset(e->rings[g].slot, 0, sizeof(guint32) * (e->rings[g].mask + 1));
  e->n_free = 0;
  for (guint32 i = 0; i < e->n_pend; i++)
    e->pend_free[e->n_free++] = e->n_pend - 1 - i;
  for (guint r = 0; r < w->n_ranks; r++) {
    RankState *rs = &e->ranks[r];
    for (guint32 c = 0; c < rs->n_chans; c++)
      rs->chans[c].len = rs->chans[c].head = 0;
    for (guint s = 0; s < rs->n_streams; s++)
      rs->streams[s].clk_init = FALSE;
    rs->switches = 0;
    rs->bad_op = 0;
  }
  if (e->boost != NULL)
    boost_reset(e);
}

/* Adds w times the scratch totals s to the result. */
static void add_weighted(SimResult *res, const Totals *s, double w)
{
  for (int c = 0; c < SIM_CLASS_COUNT; c++) {
    res->by_class[c].time_ns += w * s->by_class[c].time_ns;
    res->by_class[c].energy_j += w * s->by_class[c].energy_j;
  }
  for (int p = 0; p < SIM_PHASE_COUNT; p++) {
    res->by_phase[p].time_ns += w * s->by_phase[p].time_ns;
    res->by_phase[p].energy_j += w * s->by_phase[p].energy_j;
  }
  res->blocked.time_ns += w * s->blocked.time_ns;
  res->blocked.energy_j += w * s->blocked.energy_j;
  res->idle.time_ns += w * s->idle.time_ns;
  res->idle.energy_j += w * s->idle.energy_j;
}

/* Plan p's early requests fit the workload: on kernel ops of each rank,
 * in time order (by op, those before its start first, each kind by
 * decreasing lead), valid pairs, leads >= 0. */
static gboolean check_ahead(const SimWorkload *w, const SimPlan *p,
                            GError **error)
{
  if (p->ahead == NULL)
    return TRUE;
  if (p->n_ranks != w->n_ranks || p->n_ahead == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "the plan's early requests do not match the workload (%u "
                "ranks)", w->n_ranks);
    return FALSE;
  }
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimAhead *a = p->ahead[r];
    const SimRank *rk = &w->ranks[r];
    for (guint32 k = 0; a != NULL && k < p->n_ahead[r]; k++) {
      gboolean order =
        k == 0 || a[k].op > a[k - 1].op ||
        (a[k].op == a[k - 1].op &&
         (a[k - 1].from_start > a[k].from_start ||
          (a[k - 1].from_start == a[k].from_start &&
           a[k].lead_ns <= a[k - 1].lead_ns)));
      if (a[k].op >= rk->n_ops || !order || a[k].lead_ns < 0 ||
          rk->ops[a[k].op].kind != SIM_OP_KERNEL || a[k].pair >= p->n_pairs) {
        g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                    "the plan's early request %u of rank %u (op %u, pair "
                    "%u, lead %" G_GINT64_FORMAT " ns) is not on a kernel, "
                    "out of order, has a negative lead or names no pair",
                    k, r, a[k].op, a[k].pair, a[k].lead_ns);
        return FALSE;
      }
    }
  }
  return TRUE;
}

/* Plan p's clocks before the run name pairs it has and land in the run. */
static gboolean check_init(const SimWorkload *w, const SimPlan *p,
                           GError **error)
{
  if (p->init == NULL)
    return TRUE;
  for (guint r = 0; r < p->n_ranks; r++)
    for (guint s = 0; p->init[r] != NULL && s < SIM_MAX_STREAMS; s++) {
      const SimInit *x = &p->init[r][s];
      if (x->set && (p->n_ranks != w->n_ranks || x->cur >= p->n_pairs ||
                     x->target >= p->n_pairs || x->land_ns < 0)) {
        g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                    "the plan's clocks before the run for rank %u stream %u "
                    "name no pair or land before it", r, s);
        return FALSE;
      }
    }
  return TRUE;
}

SimResult *sim_engine_run(SimEngine *e, SimPlan *plan, guint iterations,
                          GError **error)
{
  const SimWorkload *w = e->w;
  g_return_val_if_fail(plan != NULL, NULL);
  if (iterations == 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "iterations must be at least 1");
    return NULL;
  }
  if (plan->n_pairs == 0 || (plan->index != NULL && plan->n_ranks != w->n_ranks)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "the plan does not match the workload (%u ranks)",
                w->n_ranks);
    return NULL;
  }
  if (!check_ahead(w, plan, error) || !check_init(w, plan, error))
    return NULL;
  g_autoptr(SimResult) res = g_new0(SimResult, 1);
  res->n_gpus = w->n_ranks;
  res->per_gpu = g_new0(SimGpuResult, MAX(w->n_ranks, 1));
  res->n_iterations = iterations;
  res->iterations = g_new0(SimIterResult, iterations);
  SimPlan *owned = NULL; /* a plan handed to us by iteration_begin */
  e->plan = plan;
  engine_reset(e);
  /* The totals: straight into the result, or (folded) through a scratch
   * copy per rank weighted by its class size. */
  Totals direct;
  Totals scratch;
  gint64 t0 = 0;
  for (guint it = 0; it < iterations; it++) {
    e->iter = it;
    if (e->m->iteration_begin != NULL) {
      SimPlan *p = e->plan;
      if (!e->m->iteration_begin(e->m->ctx, it, &p, error)) {
        sim_plan_free(owned);
        return NULL;
      }
      if (p != e->plan) {
        sim_plan_free(owned);
        owned = p;
        e->plan = p;
        if (!check_ahead(w, p, error) || !check_init(w, p, error)) {
          sim_plan_free(owned);
          return NULL;
        }
      }
      /* Costs may depend on the iteration (stragglers): drop the cache. */
      if (e->shared_cache != NULL)
        memset(e->shared_cache, 0, sizeof(CostSlot) * MAX(w->shapes->len, 1));
      for (guint r = 0; r < w->n_ranks; r++)
        if (e->ranks[r].cache != NULL && e->ranks[r].cache != e->shared_cache)
          memset(e->ranks[r].cache, 0,
                 sizeof(CostSlot) * MAX(w->shapes->len, 1));
    }
    gint64 t1;
    if (!run_iteration(e, t0, &t1, error)) {
      sim_plan_free(owned);
      return NULL;
    }
    double iter_energy = 0.0;
    if (!e->folded) {
      /* Accumulate into the result itself (the order the totals have
       * always been summed in). */
      memcpy(direct.by_class, res->by_class, sizeof direct.by_class);
      memcpy(direct.by_phase, res->by_phase, sizeof direct.by_phase);
      direct.blocked = res->blocked;
      direct.idle = res->idle;
      for (guint r = 0; r < w->n_ranks; r++) {
        RankState *rs = &e->ranks[r];
        iter_energy += account_rank(e, r, t0, t1, &direct, &res->per_gpu[r]);
        res->switches += rs->switches;
        rs->switches = 0;
      }
      memcpy(res->by_class, direct.by_class, sizeof direct.by_class);
      memcpy(res->by_phase, direct.by_phase, sizeof direct.by_phase);
      res->blocked = direct.blocked;
      res->idle = direct.idle;
    } else {
      for (guint r = 0; r < w->n_ranks; r++) {
        RankState *rs = &e->ranks[r];
        if (rs->weight == 0)
          continue;
        memset(&scratch, 0, sizeof scratch);
        double wt = (double)rs->weight;
        iter_energy += wt * account_rank(e, r, t0, t1, &scratch,
                                         &res->per_gpu[r]);
        add_weighted(res, &scratch, wt);
        res->switches += rs->switches * rs->weight;
        rs->switches = 0;
      }
    }
    res->iterations[it].time_ns = t1 - t0;
    res->iterations[it].energy_j = iter_energy;
    t0 = t1;
  }
  sim_plan_free(owned);
  e->plan = NULL;
  res->time_ns = t0;
  if (e->folded)
    for (guint r = 0; r < w->n_ranks; r++)
      if (w->fold_rep[r] != r)
        res->per_gpu[r] = res->per_gpu[w->fold_rep[r]];
  guint64 represented = 0;
  for (guint r = 0; r < w->n_ranks; r++) {
    SimGpuResult *g = &res->per_gpu[r];
    res->energy_j += g->energy_j;
    res->waste_j += g->blocked_j + g->idle_j;
    res->flops += g->flops;
    res->peak_power_w = MAX(res->peak_power_w, g->peak_power_w);
    represented += w->ranks[e->folded ? w->fold_rep[r] : r].n_ops;
  }
  res->ops = sim_workload_n_ops(w) * iterations;
  res->ops_represented = represented * iterations;
  return g_steal_pointer(&res);
}

/* ---- look-ahead --------------------------------------------------------- */

void sim_plan_lookahead_stream(const guint32 *ks, guint32 n,
                               const gint64 *start_ns, gint64 period_ns,
                               gint64 latency_ns, const guint16 *intent,
                               guint16 *req)
{
  double T = (double)MAX(period_ns, 1);
  for (guint32 i = 0; i < n; i++) {
    double tau = (double)start_ns[ks[i]] + (double)latency_ns;
    if (tau >= T)
      tau = fmod(tau, T);
    /* the last kernel of the stream starting at or before tau */
    guint32 lo = 0, hi = n;
    while (lo < hi) {
      guint32 mid = lo + (hi - lo) / 2;
      if ((double)start_ns[ks[mid]] <= tau)
        lo = mid + 1;
      else
        hi = mid;
    }
    guint32 j = lo > 0 ? lo - 1 : 0;
    req[ks[i]] = intent[ks[j]];
  }
}

/* The clocks of pair index k of plan p, packed, as the engine reads it
 * (an index past the pairs means pair 0). */
static guint32 plan_clocks(const SimPlan *p, guint16 k)
{
  return pack_clocks(p->pairs[k < p->n_pairs ? k : 0]);
}

/* A plan's latency-free timeline: per rank (NULL: not recorded) every
 * op's start and end in iteration 0. */
typedef struct {
  gint64 **start, **end;
} Timeline;

static void record_times(gpointer data, const SimOpRecord *rec)
{
  Timeline *tl = data;
  if (rec->iter == 0 && tl->start[rec->gpu] != NULL) {
    tl->start[rec->gpu][rec->op] = rec->start_ns;
    tl->end[rec->gpu][rec->op] = rec->end_ns;
  }
}

/* The last of kernels ks[0, n) whose start is <= t (n if none). */
static guint32 kernel_at(const guint32 *ks, guint32 n, const gint64 *start,
                         gint64 t)
{
  guint32 lo = 0, hi = n;
  while (lo < hi) {
    guint32 mid = lo + (hi - lo) / 2;
    if (start[ks[mid]] <= t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo > 0 ? lo - 1 : n;
}

/* Appends to `out` the early requests of one stream's kernels ks[0, n)
 * (sim_plan_lookahead): for every change of the intended pair, at kernel
 * j, one made latency_ns before j starts, by the kernel running then or
 * (in a wait) the first one after it.  The caller sorts them. */
static void stream_ahead(const SimPlan *p, const guint32 *ks, guint32 n,
                         const gint64 *start, const gint64 *end,
                         gint64 period_ns, gint64 latency_ns,
                         const guint16 *intent, const guint16 *req,
                         GArray *out)
{
  for (guint32 j = 0; j < n && n > 1; j++) {
    guint32 prev = j > 0 ? j - 1 : n - 1;
    if (plan_clocks(p, intent[ks[j]]) == plan_clocks(p, intent[ks[prev]]))
      continue;
    /* The anchor: the kernel running at tau - latency_ns, in this
     * iteration or the previous one (times shifted by a period). */
    gint64 t = start[ks[j]] - latency_ns, shift = 0;
    guint32 a = kernel_at(ks, n, start, t);
    if (a == n) {
      shift = period_ns;
      a = kernel_at(ks, n, start, t + shift);
      if (a == n)
        continue;
    }
    guint32 k = ks[a];
    gint64 s_a = start[k] - shift, e_a = end[k] - shift;
    /* Not needed when the anchor's own start request already asks for
     * j's pair (it starts exactly then, or asks for it anyway). */
    if (a == j || s_a + latency_ns >= start[ks[j]] ||
        plan_clocks(p, req[k]) == plan_clocks(p, intent[ks[j]]))
      continue;
    SimAhead x = {k, intent[ks[j]], FALSE, latency_ns};
    if (a != prev && e_a > t) {
      x.lead_ns = e_a - t; /* inside kernel a */
    } else if (a != prev) {
      /* t falls in the wait after kernel a: the next kernel asks, that
       * long before it starts. */
      guint32 b = a + 1 < n ? a + 1 : 0;
      x.op = ks[b];
      x.from_start = TRUE;
      x.lead_ns = start[ks[b]] - (a + 1 < n ? shift : shift - period_ns) - t;
    }
    g_array_append_val(out, x);
  }
}

/* Early requests in the order they are made: by op; for one op, those
 * before its start first; each kind by decreasing lead. */
static gint cmp_ahead(gconstpointer pa, gconstpointer pb)
{
  const SimAhead *a = pa, *b = pb;
  if (a->op != b->op)
    return a->op < b->op ? -1 : 1;
  if (a->from_start != b->from_start)
    return a->from_start ? -1 : 1;
  return (a->lead_ns < b->lead_ns) - (a->lead_ns > b->lead_ns);
}

/* Rank r's look-ahead (sim_plan_lookahead): replaces p->index[r] by the
 * requests and sets its early requests.  ks: scratch of n_ops entries. */
static void lookahead_rank(SimPlan *p, const SimRank *rk, guint r,
                           const gint64 *start, const gint64 *end,
                           gint64 period_ns, gint64 latency_ns, guint32 *ks)
{
  const guint16 *intent = p->index[r];
  guint16 *req = g_memdup2(intent, sizeof(guint16) * MAX(rk->n_ops, 1));
  g_autoptr(GArray) ahead = g_array_new(FALSE, FALSE, sizeof(SimAhead));
  for (guint s = 0; s < rk->n_streams; s++) {
    guint32 n = 0;
    for (guint32 i = rk->stream_off[s]; i < rk->stream_off[s + 1]; i++)
      if (rk->ops[i].kind == SIM_OP_KERNEL)
        ks[n++] = i;
    sim_plan_lookahead_stream(ks, n, start, period_ns, latency_ns, intent,
                              req);
    stream_ahead(p, ks, n, start, end, period_ns, latency_ns, intent, req,
                 ahead);
    if (n > 0 && plan_clocks(p, req[ks[0]]) != plan_clocks(p, intent[ks[0]])) {
      /* The clocks change within the latency of the first kernel: start
       * the run as an iteration starts, the next pair in flight since
       * the previous one (landing where it changes). */
      guint32 j = 1;
      while (j < n && plan_clocks(p, intent[ks[j]]) ==
                          plan_clocks(p, intent[ks[0]]))
        j++;
      if (p->init == NULL || p->init[r] == NULL)
        sim_plan_rank_init(p, r);
      SimInit *x = &p->init[r][s];
      x->set = TRUE;
      x->cur = intent[ks[0]];
      x->target = req[ks[0]];
      x->land_ns = j < n ? start[ks[j]] : start[ks[0]] + latency_ns;
    }
  }
  g_array_sort(ahead, cmp_ahead);
  g_free(p->index[r]);
  p->index[r] = req;
  if (ahead->len > 0) {
    SimAhead *dst = sim_plan_rank_ahead(p, r, ahead->len);
    memcpy(dst, ahead->data, sizeof(SimAhead) * ahead->len);
  }
}

gboolean sim_plan_lookahead(SimPlan *p, const SimWorkload *w,
                            const SimMachine *m, gint64 latency_ns,
                            GError **error)
{
  g_return_val_if_fail(p != NULL && w != NULL && m != NULL, FALSE);
  /* Look-ahead rewrites the intended pairs: once per plan. */
  g_return_val_if_fail(p->ahead == NULL && p->init == NULL, FALSE);
  if (latency_ns <= 0 || p->index == NULL)
    return TRUE;
  /* The plan's own timeline: its clocks at once, no hook. */
  SimMachine vm = *m;
  vm.switch_latency_ns = 0;
  vm.iteration_begin = NULL;
  g_autoptr(SimEngine) e = sim_engine_new(w, &vm, error);
  if (e == NULL)
    return FALSE;
  guint n = w->n_ranks;
  Timeline tl = {g_new0(gint64 *, MAX(n, 1)), g_new0(gint64 *, MAX(n, 1))};
  guint32 max_ops = 0;
  for (guint r = 0; r < n && r < p->n_ranks; r++)
    if (p->index[r] != NULL && w->ranks[r].n_ops > 0) {
      tl.start[r] = g_new0(gint64, w->ranks[r].n_ops);
      tl.end[r] = g_new0(gint64, w->ranks[r].n_ops);
      max_ops = MAX(max_ops, w->ranks[r].n_ops);
    }
  sim_engine_set_observer(e, record_times, &tl);
  SimResult *res = sim_engine_run(e, p, 1, error);
  gboolean ok = res != NULL;
  if (ok) {
    gint64 period = res->iterations[0].time_ns;
    g_autofree guint32 *ks = g_new(guint32, MAX(max_ops, 1));
    for (guint r = 0; r < n; r++)
      if (tl.start[r] != NULL)
        lookahead_rank(p, &w->ranks[r], r, tl.start[r], tl.end[r], period,
                       latency_ns, ks);
  }
  sim_result_free(res);
  for (guint r = 0; r < n; r++) {
    g_free(tl.start[r]);
    g_free(tl.end[r]);
  }
  g_free(tl.start);
  g_free(tl.end);
  return ok;
}
