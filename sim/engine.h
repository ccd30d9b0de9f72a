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
 * - Clocks: every kernel requests a clock pair from the plan.  A request that
 *   differs from the stream's current target is a *switch*: it takes effect
 *   switch_latency_ns later; kernels starting before that run at the old
 *   clocks (the clocks in force at a kernel's start hold for the whole
 *   kernel).  Switch state is kept per (GPU, stream).
 * - Power is additive: P(t) = P_idle + sum of the increments of everything
 *   active at t (a kernel adds P_kernel - P_idle, a running communication
 *   P_comm - P_idle, a blocked communication P_block - P_idle).  Energy is the
 *   exact integral of that function.
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
 *   kernel_cost, the network callbacks and the plan are the caller's
 *   contract (lua/session.c refuses variability, stragglers, per-rank
 *   plans and timelines on folded workloads).  An observer sees the
 *   representatives' ops only.
 */
#ifndef SIM_ENGINE_H
#define SIM_ENGINE_H

#include "sim/workload.h"

G_BEGIN_DECLS

/* A requested clock pair; 0 means "auto" (the GPU's own boost behaviour). */
typedef struct {
  guint16 sm_mhz;
  guint16 mem_mhz;
} SimClocks;

/* The price of one kernel shape at one clock pair on one GPU. */
typedef struct {
  double time_scale;   /* duration = ref_ns * time_scale */
  double power_w;      /* board power while it runs alone */
  guint16 sm_mhz;      /* clocks actually run (after the power cap) */
  guint16 mem_mhz;
} SimCost;

/* A plan: per op of every rank an index into `pairs`; `index` NULL (or
 * index[r] NULL) means pair 0 for every op of that rank. */
typedef struct {
  guint n_pairs;
  SimClocks *pairs;    /* owned */
  guint16 **index;     /* owned; n_ranks arrays of n_ops, or NULL */
  guint n_ranks;
} SimPlan;

SimPlan *sim_plan_new_uniform(guint n_ranks, SimClocks clocks);
void sim_plan_free(SimPlan *p);
/* Adds a clock pair (de-duplicated) and returns its index. */
guint16 sim_plan_add_pair(SimPlan *p, SimClocks c);
/* Allocates rank r's per-op index array (zero-filled) and returns it. */
guint16 *sim_plan_rank_index(SimPlan *p, guint r, guint32 n_ops);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimPlan, sim_plan_free)

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
};

typedef struct {
  double time_ns;
  double energy_j;
} SimTE;

typedef struct {
  double energy_j;
  double kernel_ns, comm_ns, blocked_ns, idle_ns; /* partition of time */
  double blocked_j, idle_j;                       /* waste */
  double peak_power_w;
  double flops;
  guint64 switches;
} SimGpuResult;

typedef struct {
  gint64 time_ns;
  double energy_j;
} SimIterResult;

typedef struct {
  gint64 time_ns;              /* all iterations */
  double energy_j;
  double waste_j;              /* blocked + idle energy, all GPUs */
  double peak_power_w;         /* max over GPUs */
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
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimEngine, sim_engine_free)

/* Bytes of engine state that replaying w needs (sim_engine_new plus a
 * run), not counting w itself or the result; O(ranks + groups), no pass
 * over the ops.  Over the ranks r that carry ops (n(r) ops, S(r) streams,
 * the largest holding L(r) ops):
 *
 *   sizeof(SimEngine)                                       ~200 B
 *   + sum_r [ 128 + 64 S(r)            rank and stream state
 *             + 32 n_shapes            price cache (one slot per shape)
 *             + 8 n(r)                 op log (duration + increment/blocked)
 *             + 12 min(n(r), 2 (n(r) - L(r)))   wait targets (index + end)
 *             + 120 S(r) ]             open transfers, events, work stack
 *   + 12 per group membership + 36 per group     collective matching
 *
 * (a rank without ops counts 128 B).  The wait-target term is an upper
 * bound: a target is waited for from another stream, so targets <= waiters
 * outside the largest stream + targets outside it.  Not included: the
 * overflow list, 32 B per op that lasts or is blocked 2^32 ns (4.3 s) or
 * more (none in generated workloads).  GPT-3 175B on 1,024 GPUs (25.6 M
 * ops): 214 MB, 8.4 bytes per op; the process grew by 211 MB. */
guint64 sim_engine_estimate_bytes(const SimWorkload *w);

/* Replays `iterations` iterations under `plan` (borrowed; iteration_begin
 * may replace it).  Returns a new result (caller owns) or NULL with error
 * set (deadlock, invalid plan). */
SimResult *sim_engine_run(SimEngine *e, SimPlan *plan, guint iterations,
                          GError **error);

/* Optional observer of every op as it is scheduled (for timelines). */
typedef struct {
  guint iter;
  guint gpu;
  guint32 op;        /* index in the rank's op array */
  gint64 arrive_ns;  /* = start for kernels; comm: when the rank got there */
  gint64 start_ns;
  gint64 end_ns;
  double power_w;
  SimClocks clocks;  /* clocks actually run (kernels) */
} SimOpRecord;
typedef void (*SimObserver)(gpointer data, const SimOpRecord *rec);
void sim_engine_set_observer(SimEngine *e, SimObserver fn, gpointer data);

G_END_DECLS

#endif
