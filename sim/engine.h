/* sim/engine.h -- replay a workload on a machine and integrate its energy.
 *
 * The engine knows nothing about GPUs or networks: it sees a SimMachine, a
 * small table of callbacks that price ops (time and power), plus per-GPU
 * constants.  Models (models/) fill the table; the engine only schedules.
 *
 * Semantics (see docs/architecture.md for the full essay)
 * -------------------------------------------------------
 * - Time is integer nanoseconds, energy double joules.
 * - Iterations are separated by a global barrier: iteration i+1 starts on
 *   every GPU when the last GPU has finished iteration i (Megatron ends each
 *   step with model-parallel and data-parallel all-reduces, which make this a
 *   near-barrier in practice).
 * - Within an iteration each op starts at the latest of: its stream being
 *   free, the op it waits for having finished, and (communication) the last
 *   member arriving.  Members that arrive early are *blocked* until then.
 * - Clocks: every kernel requests a clock pair from the plan at its start.
 *   A request that differs from the stream's current target is a *switch*:
 *   it takes effect switch_latency_ns later, and until then the old clocks
 *   hold.  A later request replaces a switch still in flight (it never
 *   lands).  Switch state is kept per (GPU, stream); the first request of a
 *   run is the clocks set before it (no switch), unless the plan gives a
 *   stream's clocks before the run (SimPlan.init, possibly with a switch
 *   in flight, as they would be after an iteration of the plan).
 * - A switch that lands inside a kernel splits it there: the kernel has
 *   done (land - start) / d_old of its work at the old clocks (d_old: its
 *   duration had they held) and the rest takes that fraction of its
 *   duration at the new clocks, sim_kernel_rest_ns().  Each part draws its
 *   own clocks' power, so energy stays the integral of power.  With a
 *   latency of 0, or when no switch lands inside a kernel, nothing is
 *   split and results are those of the old rule (clocks at a kernel's
 *   start hold for the whole kernel), bit for bit.  A switch lands inside
 *   at most one kernel, so a kernel has at most two parts.  Measured on
 *   the Perseus Table 6 setup at M = 24 with the A100's 10 ms
 *   (docs/perseus.md): the old rule ran the Perseus plan 8.18% slower
 *   than at 0 ms, saving 12.94% instead of 14.62%; splitting alone, 0.73%
 *   slower and 14.39%; with the switches requested ahead (below), as at
 *   0 ms to the nanosecond.
 * - Early requests (SimPlan.ahead): a kernel may also request pairs at
 *   given leads before it ends (not before it starts, nor before a switch
 *   that lands inside it, nor more than the latency before its end, so an
 *   early request never lands inside its own kernel), or before it starts
 *   (not before the previous op of its stream ended; made before its own
 *   request, and ignored for the first kernel of a run), so that a switch
 *   the plan needs at a time no kernel starts is requested exactly the
 *   latency before it: how plans request switches the latency ahead when
 *   one op lasts longer than the latency (sim_plan_lookahead).
 * - Power is additive: P(t) = P_idle + sum of the increments of everything
 *   active at t (a kernel adds P_kernel - P_idle, a running communication
 *   P_comm - P_idle, a blocked communication P_block - P_idle).  Energy is the
 *   exact integral of that function.
 * - The board limit (SimMachine.power_limit_w) holds that sum: while a
 *   kernel runs and the sum exceeds the limit (a transfer on another
 *   stream overlapping a kernel the cap already holds at the limit), the
 *   board draws the limit, as the driver does by lowering the clock both
 *   streams share.  The energy above the limit is taken off the kernel's
 *   class and phase and reported as held_j.  Durations are not changed
 *   (see docs/gpu-model.md, "Power cap", for what that leaves out).
 * - peak_power_w is the highest average of board power over the power
 *   sensor's window (SimMachine.sensor_window_ns, or the iteration when it
 *   is shorter; windows lie inside one iteration); with no window, the
 *   highest instantaneous power.
 * - Time and baseline (idle) energy are attributed by state with priority
 *   kernel > communication > blocked > idle; increments go to their own op.
 *   So sum(by_class) + blocked + idle = total energy, exactly.
 * - Folded workloads (SimWorkload.fold_rep): only representatives are
 *   replayed.  A collective completes when every distinct representative
 *   among its group's members has arrived (collective_ns still gets the
 *   real group id); a send from a to b matches a receive by rep(b) from a
 *   rank folding to rep(a).  A folded rank's per-GPU results are its
 *   representative's; totals (energy, by_class, by_phase, blocked, idle,
 *   flops, switches, waste) count each representative once per rank it
 *   stands for.  The machine must price every member of a class like its
 *   representative: sim_engine_new checks the per-GPU power constants;
 *   kernel_cost and the network callbacks are the caller's contract
 *   (run/session.c refuses variability, stragglers and timelines on
 *   folded workloads).  The plan is one per class by construction: only a
 *   representative's entries (per-op indices, early requests, clocks
 *   before the run) are read, a folded-away rank's may be unset (NULL),
 *   and sim_plan_unfold copies them to every rank for the unfolded
 *   workload.  An observer sees the representatives' ops only.
 */
#ifndef SIM_ENGINE_H
#define SIM_ENGINE_H

#include "sim/plan.h"
#include "sim/workload.h"

G_BEGIN_DECLS

/* The price of one kernel shape at one clock pair on one GPU. */
typedef struct {
  double time_scale;   /* duration = ref_ns * time_scale */
  double power_w;      /* board power while it runs alone */
  guint16 sm_mhz;      /* clocks actually run (after the power cap) */
  guint16 mem_mhz;
} SimCost;

/* The driver's boost controller of one GPU (sim/boost.c): the SM clock ceiling under "auto" and under locked clocks
 * (an upper bound the card may still throttle below), moved by one step per
 * period towards holding the average board power at the limit. */
typedef struct {
  double limit_w;      /* the power limit it holds on average */
  double margin_w;     /* it raises the clock only below limit - margin */
  gint64 window_ns;    /* time constant of its power average (> 0) */
  gint64 period_ns;    /* one decision per period (> 0) */
  guint16 step_mhz;    /* the clock moves in whole steps of this (> 0) */
  guint16 min_mhz;     /* never below */
  guint16 max_mhz;     /* never above; what "auto" (sm_mhz 0) asks for */
} SimBoost;

typedef struct SimMachine SimMachine;
struct SimMachine {
  guint n_gpus;                 /* == workload ranks (rank r runs on GPU r) */
  /* Per-GPU constants, n_gpus entries each, owned by whoever built this. */
  const double *idle_power_w;
  const double *blocked_power_w;
  const double *comm_power_w;   /* board power while only a comm op runs */
  gint64 switch_latency_ns;     /* applies to every GPU */

  gpointer ctx;
  /* Prices a kernel shape on a GPU at requested clocks `req` during
   * iteration `iter` (0-based).  Must be pure: same arguments, same answer. */
  void (*kernel_cost)(gpointer ctx, guint gpu, guint32 shape, SimClocks req,
                      guint iter, SimCost *out);
  /* Duration of collective `group` with `bytes` of type `coll`, started at
   * `start_ns`, by the network model (engine passes bytes from the shape). */
  gint64 (*collective_ns)(gpointer ctx, guint32 group, double bytes,
                          SimCollType coll, gint64 start_ns);
  /* Duration of a point-to-point transfer from GPU src to GPU dst. */
  gint64 (*p2p_ns)(gpointer ctx, guint src, guint dst, double bytes,
                   gint64 start_ns);
  /* Optional: called at the start of every iteration with the results of
   * the previous one (NULL for the first); may replace *plan (taking
   * ownership of the new one and freeing the old).  Return FALSE with
   * error set to abort. */
  gboolean (*iteration_begin)(gpointer ctx, guint iter, SimPlan **plan,
                              GError **error);
  /* Optional promise (FALSE when unsure): kernel_cost's answer does not
   * depend on `gpu`.  With it, and equal idle powers, the engine keeps one
   * price cache for all GPUs instead of one per GPU (a smaller working set
   * on large machines; results are the same).  A wrapper that prices GPUs
   * differently (stragglers) must clear it. */
  gboolean uniform_pricing;
  /* Optional: one boost controller per GPU (n_gpus entries), or NULL.  With
   * it, kernel_cost must price without a power cap of its own: the
   * controller caps the clocks instead. */
  const SimBoost *boost;
  /* Optional: the board power limit of each GPU (n_gpus entries), or NULL
   * (none held).  While a kernel runs, board power above it is cut to it
   * (the semantics above).  Without it, as before: power is the sum. */
  const double *power_limit_w;
  /* The power sensor's averaging window for peak_power_w (0: the
   * instantaneous peak). */
  gint64 sensor_window_ns;
  /* Optional promise (FALSE when unsure): kernel_cost may be called from
   * several threads at once, and the network callbacks' answers do not
   * depend on the order they are called in (no shared-bandwidth state).
   * Without it the engine replays on one thread whatever
   * sim_engine_set_threads asked. */
  gboolean thread_safe;
};

typedef struct {
  double time_ns;
  double energy_j;
} SimTE;

typedef struct {
  double energy_j;
  double kernel_ns, comm_ns, blocked_ns, idle_ns; /* partition of time */
  double blocked_j, idle_j;                       /* waste */
  double peak_power_w;  /* highest window average (see above) */
  double held_j;        /* energy the board limit took off overlaps
                           (already out of energy_j) */
  double flops;
  guint64 switches;
} SimGpuResult;

typedef struct {
  gint64 time_ns;
  double energy_j;
  double held_j;        /* of which taken off by the board limit */
} SimIterResult;

typedef struct {
  gint64 time_ns;              /* all iterations */
  double energy_j;
  double waste_j;              /* blocked + idle energy, all GPUs */
  double peak_power_w;         /* max over GPUs */
  double held_j;               /* energy the board limit took off
                                  overlaps, all GPUs (energy_j + held_j
                                  is the additive sum, which the plan
                                  models reproduce) */
  guint64 switches;
  guint64 ops;                 /* ops replayed (all iterations) */
  guint64 ops_represented;     /* ops of every rank (all iterations): equal
                                  to ops unless the workload is folded */
  double flops;                /* all GPUs, all iterations */
  guint n_gpus;
  SimGpuResult *per_gpu;       /* n_gpus */
  SimTE by_class[SIM_CLASS_COUNT];
  SimTE by_phase[SIM_PHASE_COUNT];
  SimTE blocked, idle;         /* summed over GPUs */
  guint n_iterations;
  SimIterResult *iterations;   /* n_iterations */
} SimResult;

void sim_result_free(SimResult *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimResult, sim_result_free)

typedef struct SimEngine SimEngine;

/* Creates an engine for workload w on machine m (both borrowed; they must
 * outlive the engine).  Fails (SIM_ERROR_INVALID) when they do not fit
 * together: sim_workload_validate (which also checks fold_rep), the GPU
 * count, a negative switching latency, or (folded) a member GPU whose
 * idle/blocked/communication power differs from its representative's;
 * SIM_ERROR_LIMIT when its memory cannot be allocated. */
SimEngine *sim_engine_new(const SimWorkload *w, const SimMachine *m,
                          GError **error);
void sim_engine_free(SimEngine *e);

/* Most threads one engine replays on. */
#define SIM_MAX_THREADS 256u

/* Replays and accounts on n threads (clamped to 1..SIM_MAX_THREADS and
 * the rank count; 1, the default, is the serial replay).  Each thread owns
 * a contiguous block of ranks of about equal op counts; communication is
 * matched between rounds (sim/lanes.c, "Threads").  Results are
 * bit-identical for every n.  Threads are used only when the machine
 * promises SimMachine.thread_safe and there is no observer and no boost
 * controller (both need the serial order); otherwise the run is serial. */
void sim_engine_set_threads(SimEngine *e, guint n);
/* Threads the last sim_engine_run replayed on: 1 when any of its
 * iterations ran serially (see above, and sim/order.c on a rank that uses
 * one group or channel from two streams), 0 before any run. */
guint sim_engine_threads_used(const SimEngine *e);

/* Which paths the last sim_engine_run took (all 0 before any run): every
 * order gives the same bits, so only these say which ran.  An iteration
 * is replayed on lanes (threads), in eager order on the calling thread or
 * by the event queue (sim/order.c; sim/lanes.c, "Threads"); one
 * started on lanes or eagerly is put back and replayed by the queue when
 * its order turned out to matter, and every later one then goes by the
 * queue.  Kernels on the steady path are those steady_kernels replayed
 * (uniform clocks, no kernel log, no observer); ranks copied, those whose
 * accounting was copied from an identical rank of their program. */
typedef struct {
  guint iterations;
  guint lanes_iterations, eager_iterations, queue_iterations;
  guint put_back;           /* iterations put back to the queue */
  guint threads;            /* sim_engine_threads_used */
  gboolean kernel_log;      /* some iteration logged every op */
  guint64 steady_kernels;
  guint64 ranks_copied;     /* rank-iterations */
} SimRunStats;
void sim_engine_run_stats(const SimEngine *e, SimRunStats *out);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimEngine, sim_engine_free)

/* Bytes of engine state that replaying w under `plan` on m needs
 * (sim_engine_new plus a run), not counting w itself or the result;
 * O(ranks + groups) plus one pass over the ops of each distinct program.
 * Over the ranks r that carry ops (n(r) ops, c(r) of them communication,
 * S(r) streams, T(r) wait targets):
 *
 *   sizeof(SimEngine)                                       ~300 B
 *   + 32 n_shapes                      the shared price cache, if shared
 *   + sum_r [ 192 + 64 S(r)            rank and stream state
 *             + 32 n_shapes            price cache, if per rank
 *             + 8 c(r)                 comm log (duration + blocked)
 *             + 8 n(r)                 op log, when kernels are logged
 *                                      (sim_engine_logs_kernels)
 *             + 12 T(r)                wait targets (index + end)
 *             + 4 (S(r) + 1)           comm log bases
 *             + 120 S(r) ]             open transfers, events, work stack
 *   + 13 per group membership + 36 per group     collective matching
 *   + 8 max_r n(r), without the op log     the accounting's kernel memo,
 *                                          per thread
 *
 * (a rank without ops counts 192 B; the index of the wait targets and the
 * comm bases are counted once per shared program).  T(r) is counted as
 * the op scan of the engine collects it before sorting: exact when waits
 * ascend (generated workloads), an upper bound otherwise.  Not included:
 * the overflow list, 40 B per op that lasts or is blocked 2^32 ns (4.3 s)
 * or more (none in generated workloads) or that a clock switch splits (at
 * most one per switch); and the power meter's scratch, per thread, 24 B
 * per step of board power within one sensor window (GPT-3 13B, TP8:
 * about a thousand steps in 25 ms, some 24 KB).  GPT-3 175B TP8 PP8 DP4 (256 GPUs, 6.4 M ops),
 * the engine created and run once: 8.27 MB estimated, malloc grew by
 * 8.11 MB; with a per-op plan 59.2 MB and 59.3 MB (tests/test-gpt.c). */
guint64 sim_engine_estimate_bytes(const SimWorkload *w, const SimMachine *m,
                                  const SimPlan *plan);

/* Whether a run of `plan` on m logs every op (8 B each; see
 * sim_engine_estimate_bytes), not only the communication ops: when its
 * clocks can change from kernel to kernel (a per-op plan, early
 * requests, a plan's initial clocks, a boost controller).  Otherwise every
 * kernel runs at the plan's one pair and the accounting prices it again
 * from the cache rather than reading it back. */
gboolean sim_engine_logs_kernels(const SimMachine *m, const SimPlan *plan);

/* Replays `iterations` iterations under `plan` (borrowed; iteration_begin
 * may replace it).  Returns a new result (caller owns) or NULL with error
 * set (deadlock, invalid plan). */
SimResult *sim_engine_run(SimEngine *e, SimPlan *plan, guint iterations,
                          GError **error);

/* Optional observer of every op as it is scheduled (for timelines).  A
 * kernel split by a switch landing inside it is reported as two records
 * (same op, in time order), one per part with its own start, end, power
 * and clocks; the second part's arrive_ns is its start. */
typedef struct {
  guint iter;
  guint gpu;
  guint32 op;        /* index in the rank's op array */
  gint64 arrive_ns;  /* = start for kernels; comm: when the rank got there */
  gint64 start_ns;
  gint64 end_ns;
  double power_w;
  SimClocks clocks;  /* clocks actually run (kernels) */
  double limit_w;    /* the limit the board holds the GPU's summed power to
                        while a kernel runs (SimMachine.power_limit_w); 0:
                        none */
} SimOpRecord;
typedef void (*SimObserver)(gpointer data, const SimOpRecord *rec);
void sim_engine_set_observer(SimEngine *e, SimObserver fn, gpointer data);

/* ---- clock switches ----------------------------------------------------- */

/* A switch lands done_ns into a kernel that would last old_ns (> done_ns)
 * at the old clocks and ref_ns * time_scale = new_ns (unrounded) at the
 * new ones: the duration of its rest at the new clocks,
 * round((old_ns - done_ns) / old_ns * new_ns).  The engine's rule, for
 * models that reproduce it (models/dvfs/model.c). */
gint64 sim_kernel_rest_ns(gint64 old_ns, gint64 done_ns, double new_ns);

/* A duration in ns from its unrounded length, as the engine rounds every
 * priced duration: llround(x) (round half away from zero) bit for bit for
 * |x| < 4.6e18, computed inline (x - trunc(x) is exact for every double
 * below 2^63); NaN and values past that give SIM_DUR_CAP = 2^62 (the
 * engine's duration cap), negative ones below it 0.  For models that
 * reproduce the engine (models/dvfs/model.c). */
#define SIM_DUR_CAP ((gint64)(G_GUINT64_CONSTANT(1) << 62))
static inline gint64 sim_round_ns(double x)
{
  if (G_UNLIKELY(!(x > -4.6e18 && x < 4.6e18)))
    return x < 0 ? 0 : SIM_DUR_CAP;
  gint64 t = (gint64)x;
  double f = x - (double)t;
  /* Without branches: the fraction is as good as random, and a branch on
   * it was mispredicted for about a third of all kernels (cachegrind, 175B
   * on 1,024 GPUs: 16 M mispredictions per replay). */
  return t + (gint64)(f >= 0.5) - (gint64)(f <= -0.5);
}

/* Rewrites plan p (its index arrays: the pairs intended per op) to request
 * every switch latency_ns ahead of where it is intended, for running on
 * machine m at that latency.  One replay of p on w at latency 0 (m's
 * prices, no iteration hook; w and m borrowed) gives the plan's own
 * timeline; then per (rank, stream):
 *  - every kernel requests the pair of the kernel running latency_ns
 *    after its start (sim_plan_lookahead_stream), so no kernel cancels a
 *    switch requested for a later one;
 *  - where the intended pair changes, at kernel j starting at tau, an
 *    early request (SimPlan.ahead) for j's pair is made at tau -
 *    latency_ns in the timeline, so it lands when j starts: by the kernel
 *    running then (wrapping into the previous iteration), or, when that
 *    time falls in a wait, by the first kernel after it, before it starts.
 *    When the kernel running then is the one just before j the request
 *    is made latency_ns before it ends (or when it starts, if shorter),
 *    so it lands when it ends, whatever the wait before j.
 *  - a stream whose clocks change within latency_ns of its first kernel
 *    starts the run with the clocks it has at an iteration's start
 *    (SimPlan.init: its first kernel's, the next pair in flight).
 * In the plan's timeline every switch then lands where the plan changes,
 * except where a stream changes clocks more often than every latency_ns
 * (later requests replace earlier ones in flight).
 * Nothing to do (TRUE) when latency_ns <= 0 or p has no index arrays; p
 * must hold intended pairs (no early requests nor clocks before the run:
 * not rewritten already).  Memory: 16 bytes per op of the ranks
 * with index arrays, during the call.  FALSE with error set when the
 * replay fails. */
gboolean sim_plan_lookahead(SimPlan *p, const SimWorkload *w,
                            const SimMachine *m, gint64 latency_ns,
                            GError **error);

G_END_DECLS

#endif
