/* models/dvfs/perseus.h -- pipeline computations, their DAG, and the
 * iteration time-energy Pareto frontier (Perseus, SOSP'24).
 *
 * Three layers, each usable alone:
 *  - PipelineGroups (models/schedule.h): which op of a pipelined workload
 *    belongs to which computation (stage, microbatch, forward/backward),
 *    for computation-level workloads (traces/pipeline.c) and kernel-level
 *    ones (traces/gpt.c) alike.
 *  - PerseusDag (models/dvfs/perseus_dag.h): computations as nodes with
 *    per-clock options (time, energy), precedence edges, the energy model
 *    of a plan, and the frontier planner.
 *  - PerseusModel: a DAG built from a workload on a machine (every
 *    computation priced at every candidate clock through the machine's own
 *    kernel_cost, so the planner and the engine agree), plans for the
 *    engine, and the straggler-aware reaction run at iteration boundaries.
 *
 * This header provides all three.  The algorithm, the energy model and
 * the limits: models/dvfs/perseus.c (the DAG), perseus_frontier.c,
 * perseus_model.c and pipeline_run.c (the reactor and perseus_run).
 */
#ifndef MODELS_DVFS_PERSEUS_H
#define MODELS_DVFS_PERSEUS_H

#include <glib.h>
#include "sim/engine.h"
#include "models/gpu.h"
#include "models/table.h"
#include "models/straggler.h"
#include "models/cluster.h"
#include "models/schedule.h"
#include "models/dvfs/perseus_dag.h"
#include "models/dvfs/policy.h"

G_BEGIN_DECLS

/* ---- workloads on machines -------------------------------------------------- */

typedef struct PerseusModel PerseusModel;

/* The computation DAG of pipelined workload w run by machine m (borrowed;
 * used during the call only).  Every computation is priced on its stage's
 * representative rank at each candidate clock: kernels through
 * m->kernel_cost (iteration 0), collectives inside a computation through
 * m->collective_ns, receives through m->p2p_ns (or their recorded
 * durations), so for a computation-
 * level workload the option times are exactly the engine's durations.
 * Candidate clocks: the measured clocks common to every table entry the
 * workload's kernels use when `table` maps them, else every SM clock step
 * of `gpu`.  P_block is the representative's blocked power.  Caller owns
 * the result. */
PerseusModel *perseus_model_new(const SimWorkload *w, const SimMachine *m,
                                const GpuSpec *gpu, const PriceTable *table,
                                GError **error);
void perseus_model_free(PerseusModel *pm);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PerseusModel, perseus_model_free)
const PerseusDag *perseus_model_dag(const PerseusModel *pm);
const PipelineGroups *perseus_model_groups(const PerseusModel *pm);
/* GPUs one DAG GPU stands for (the workload's tp): multiply DAG energies
 * by it for a whole pipeline. */
guint perseus_model_tp(const PerseusModel *pm);
/* The candidate clocks: option k of every node runs clocks[k] (borrowed;
 * *n of them). */
const guint16 *perseus_model_clocks(const PerseusModel *pm, guint *n);

/* A plan where pipeline p runs choice[p] (an option per node; NULL =
 * auto clocks).  Ops outside computations run at auto clocks.  On a
 * folded workload only representatives get entries (sim_plan_unfold
 * expands them), each its own pipeline's choice, which its members run
 * too: exact when every pipeline runs the same choice (no stragglers).
 * Caller owns it. */
SimPlan *perseus_model_plan(const PerseusModel *pm,
                            const guint16 *const *choice);
/* Same, every pipeline running `choice`. */
SimPlan *perseus_model_plan_uniform(const PerseusModel *pm,
                                    const guint16 *choice);

/* Kernel-level clocks inside computations (the combined policy): for
 * every computation of the plan `choice` (an option per node, one pipeline)
 * a multiple-choice knapsack over its kernel shapes on the stage's
 * representative rank (items: the candidate clocks; weight: kernel time;
 * cost: energy - P_block x time) within the time the computation takes at
 * its chosen clock; kept only where it is strictly cheaper and not longer.
 * Every pipeline runs the result; ops outside computations run auto
 * clocks.  w and m must be the ones pm was built from.  *n_refined (may be
 * NULL): computations changed.  Caller owns the plan. */
SimPlan *perseus_kernel_plan(const PerseusModel *pm, const SimWorkload *w,
                             const SimMachine *m, const guint16 *choice,
                             guint *n_refined);

/* ---- straggler-aware reaction ------------------------------------------------ */

typedef struct PerseusReactor PerseusReactor;

/* Reacts at iteration boundaries to the stragglers of `set` (borrowed)
 * seen `lag` iterations earlier: a pipeline with a straggling GPU runs all
 * clocks at max; every other pipeline runs the frontier point that fits
 * the slowest straggling pipeline's iteration time T' (its all-max plan
 * evaluated on the DAG with the stage factors), less the longest stage
 * tail (DP all-reduce, optimizer: 1 ns for computation-level workloads),
 * never slower than the frontier's last, minimum-energy point (beyond it
 * they wait); with no straggler every pipeline runs frontier point
 * `base`.  pm, f and set are
 * borrowed and must outlive the reactor.  Caller owns it. */
PerseusReactor *perseus_reactor_new(const PerseusModel *pm,
                                    const PerseusFrontier *f, guint base,
                                    const StragglerSet *set, guint lag);
void perseus_reactor_free(PerseusReactor *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PerseusReactor, perseus_reactor_free)
/* With w and m set (borrowed, outliving the reactor's use; NULL: unset),
 * every plan the hook installs requests its switches m's latency ahead
 * (sim_plan_lookahead on w and m, the unwrapped machine: stragglers are
 * not in the timeline it predicts).  The initial plan is the caller's to
 * rewrite. */
void perseus_reactor_set_lookahead(PerseusReactor *r, const SimWorkload *w,
                                   const SimMachine *m);
/* StragglerHook: installs the plan for iteration `iter` (replacing *plan
 * when the assignment changed). */
gboolean perseus_reactor_hook(gpointer reactor, guint iter, SimPlan **plan,
                              GError **error);
/* The plan of iteration 0 (the reaction to stragglers at iteration
 * -lag, i.e. none when lag > 0).  Caller owns it. */
SimPlan *perseus_reactor_initial_plan(PerseusReactor *r);

/* ---- the pipeline policies, end to end ------------------------------------- */

typedef struct PerseusRun {
  SimResult *result;          /* owned: the engine's run */
  SimPlan *plan;              /* owned: the plan `result` ran (its
                                 switches requested ahead); NULL for a
                                 straggler-aware run, whose reactions may
                                 change plans between iterations.  On a
                                 folded workload it gives representatives
                                 only: sim_plan_unfold makes the plan of
                                 the unfolded workload. */
  PerseusFrontier *frontier;  /* owned: perseus only, else NULL */
  guint point;                /* perseus: the point run without stragglers */
  double limit_w;             /* zeus: the chosen power limit */
  guint n_tried;              /* zeus: limits simulated */
  gint64 allmax_time_ns;      /* one pipeline at all-max (DAG model) */
  double allmax_energy_j;     /* ... for its DAG GPUs (x tp for all) */
  gint64 plan_time_ns;        /* one pipeline under the plan, no straggler */
  double plan_energy_j;
  guint tp;                   /* GPUs per DAG GPU */
  /* perseus with kernel = TRUE: */
  guint kernel_refined;       /* computations given kernel-level clocks */
  gboolean kernel_used;       /* TRUE: the kernel-level plan was run; FALSE:
                                 it was not better on the engine, so the
                                 frontier point's plan was */
  gint64 single_time_ns;      /* the frontier point's plan, simulated (its
                                 latency fallback when one ran) */
  double single_energy_j;
  /* With a switching latency (perseus, envpipe, no stragglers): 0 the
   * policy's plan ran; it missed the slowdown budget on the engine, so
   * 1 the plan smoothed for the latency ran, or 2 one clock per stage, or
   * 3 auto clocks (plan_* are then the all-max figures). */
  guint latency_fallback;
  guint plan_snapped;         /* plan: computations whose clock was not a
                                 candidate clock (run at the nearest) */
  guint16 *clocks;            /* owned: the model's candidate clocks, option
                                 k of every computation running clocks[k]
                                 MHz (perseus_model_clocks) */
  guint n_clocks;
} PerseusRun;

void perseus_run_free(PerseusRun *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PerseusRun, perseus_run_free)

/* Plans pipeline policy p -- a pipeline class's (perseus, envpipe, zeus,
 * plan: DVFS_CLASS_PIPELINE), or max: every computation at its highest
 * clock -- for pipelined workload x->w on cluster x->run (its own
 * overrides: blocking/idle power, power limit, switching latency,
 * variability; the GPUs' factors drawn from x->seed), then simulates
 * x->iterations iterations with x->stragglers (may be NULL) applied; a
 * straggler-aware Perseus re-plans at iteration boundaries; kernel_within
 * (perseus only, not with straggler_aware) adds kernel-level clocks inside
 * each computation (perseus_kernel_plan); a plan runs, for each
 * computation, the candidate clock nearest its plan_mhz (the higher on a
 * tie).  p is checked as the doors check it (dvfs_policy_check: its
 * class's argument table).  With a switching latency every plan run
 * requests its switches that much ahead (sim_plan_lookahead), and
 * Perseus and EnvPipe fall back to plans that can be followed when the run
 * misses their slowdown budget
 * (PerseusRun.latency_fallback).  x->catalogue resolves the workload's
 * reference GPU (may be NULL).  The replay whose result is returned is
 * replayed once more with x->observer when set (the engine is
 * deterministic: the observed run is that run).  The `run` of the
 * pipeline classes.  Caller owns the result; NULL with an error naming
 * the parameter or what failed. */
PerseusRun *perseus_run(const DvfsPolicy *p, const DvfsContext *x,
                        GError **error);

G_END_DECLS

#endif
