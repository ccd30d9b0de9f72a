/* models/dvfs/perseus.h -- pipeline computations, their DAG, and the
 * iteration time-energy Pareto frontier (Perseus, SOSP'24).
 *
 * Three layers, each usable alone:
 *  - PerseusGroups: which op of a pipelined workload belongs to which
 *    computation (stage, microbatch, forward/backward), for computation-
 *    level workloads (traces/pipeline.c) and kernel-level ones
 *    (traces/gpt.c) alike.
 *  - PerseusDag: computations as nodes with per-clock options (time,
 *    energy), precedence edges, the energy model of a plan, and the
 *    frontier planner.
 *  - PerseusModel: a DAG built from a workload on a machine (every
 *    computation priced at every candidate clock through the machine's own
 *    kernel_cost, so the planner and the engine agree), plans for the
 *    engine, and the straggler-aware reaction run at iteration boundaries.
 *
 * See models/dvfs/perseus.c for the algorithm, the energy model and limits.
 */
#ifndef MODELS_DVFS_PERSEUS_H
#define MODELS_DVFS_PERSEUS_H

#include <glib.h>
#include "sim/engine.h"
#include "models/gpu.h"
#include "models/table.h"
#include "models/straggler.h"
#include "models/cluster.h"

G_BEGIN_DECLS

/* ---- computations of a pipelined workload --------------------------- */

#define PERSEUS_NO_NODE G_MAXUINT32
#define PERSEUS_MAX_NODES (1u << 22)

/* Node id of computation (stage s, microbatch m, backward b) with M
 * microbatches: (s * M + m) * 2 + b. */
static inline guint32 perseus_node_id(guint M, guint s, guint m, gboolean b)
{
  return ((guint32)s * M + m) * 2 + (b ? 1u : 0u);
}

typedef struct {
  guint n_stages, n_microbatches, n_pipelines, tp;
  guint n_ranks;
  guint32 **node;     /* per rank, per op: node id or PERSEUS_NO_NODE */
  guint *pipeline;    /* per rank: dp index */
  guint *stage;       /* per rank */
  guint *rep_rank;    /* per stage: the rank of pipeline 0, tp index 0 */
  guint32 **order;    /* per stage: its 2M node ids in program order */
} PerseusGroups;

/* Groups the ops of pipelined workload w (w->pp stages, w->microbatches,
 * w->dp pipelines, w->tp; ranks in Megatron order, SimRank.stage set):
 * kernel, collective and receive ops with a microbatch and phase
 * forward/backward belong to computation (rank's stage, microbatch,
 * phase); sends and ops without a microbatch (DP all-reduces, the
 * optimizer) belong to none.  Every computation of a stage must have ops on every
 * rank of that stage.  Caller owns the result. */
PerseusGroups *perseus_groups_new(const SimWorkload *w, GError **error);
void perseus_groups_free(PerseusGroups *g);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PerseusGroups, perseus_groups_free)

/* The program order of a stage under a schedule, as node ids: "1f1b"
 * (Megatron: min(S-s-1, M) warm-up forwards, then F/B pairs, then the
 * remaining backwards) or "gpipe" (all forwards, then all backwards).
 * Writes 2M ids into out.  FALSE for an unknown schedule. */
gboolean perseus_schedule_order(const char *schedule, guint S, guint M,
                                guint s, guint32 *out);

/* ---- the DAG ------------------------------------------------------------ */

/* One way to run a computation: its clock, duration and energy. */
typedef struct {
  guint16 sm_mhz;
  gint64 time_ns;     /* > 0 */
  double energy_j;    /* >= 0 */
} PerseusOption;

typedef struct PerseusDag PerseusDag;

/* An empty DAG of computations running on n_gpus GPUs that draw
 * p_block_w while not computing.  Caller owns it. */
PerseusDag *perseus_dag_new(guint n_gpus, double p_block_w);
void perseus_dag_free(PerseusDag *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PerseusDag, perseus_dag_free)
/* Adds a computation on GPU `gpu` with n options (copied; option k is
 * what a plan's choice k selects).  Returns its node index. */
guint perseus_dag_add_node(PerseusDag *d, guint gpu,
                           const PerseusOption *opts, guint n);
/* Adds the precedence `from` before `to`. */
void perseus_dag_add_edge(PerseusDag *d, guint from, guint to);
/* Checks (options, GPU indices, acyclicity) and prepares the DAG for
 * planning; nodes and edges can no longer be added. */
gboolean perseus_dag_finish(PerseusDag *d, GError **error);

/* The DAG of one S-stage pipeline with M microbatches: node ids as
 * perseus_node_id, node on GPU s, per-stage program order `order[s]` (2M
 * ids), options opts[node] (n_opts[node] each).  Edges: consecutive
 * computations of a stage; F(s,m) -> F(s+1,m); B(s+1,m) -> B(s,m)
 * (F(s,m) -> B(s,m) follows from the order, which must put every
 * forward before its backward).  tail_ns (NULL = none): per stage, a
 * fixed stretch after its last computation (DP all-reduce, optimizer),
 * added as node 2SM + k after the last computation of stage s when
 * tail_ns[s] > 0 (one option, clock 0, energy P_block x time, so it only
 * lengthens paths).  Finished.  Caller owns it. */
PerseusDag *perseus_dag_pipeline(guint S, guint M, const guint32 *const *order,
                                 const PerseusOption *const *opts,
                                 const guint *n_opts, const gint64 *tail_ns,
                                 double p_block_w, GError **error);

guint perseus_dag_n_nodes(const PerseusDag *d);
guint perseus_dag_n_gpus(const PerseusDag *d);
double perseus_dag_p_block(const PerseusDag *d);
guint perseus_dag_n_options(const PerseusDag *d, guint node);
const PerseusOption *perseus_dag_option(const PerseusDag *d, guint node,
                                        guint k);
guint perseus_dag_gpu(const PerseusDag *d, guint node);

/* The structure of a finished DAG: a topological order (n) and the CSR
 * adjacency (pred/succ lists of node i at [off[i], off[i+1])).  Borrowed. */
void perseus_dag_structure(const PerseusDag *d, const guint **topo,
                           const guint **pred_off, const guint **pred,
                           const guint **succ_off, const guint **succ,
                           guint *n_edges);

/* Iteration time and energy of a plan (an option index per node), with
 * every computation of GPU g taking gpu_factor[g] times longer at the same
 * power (NULL: no straggler):
 *   T = longest path,  E = sum E_i + P_block * (T * n_gpus - sum t_i). */
void perseus_dag_eval(const PerseusDag *d, const guint16 *choice,
                      const double *gpu_factor, gint64 *time_ns,
                      double *energy_j);
/* The plan with every node at its highest clock ("all-max").  Caller
 * frees it. */
guint16 *perseus_dag_max_choice(const PerseusDag *d);

/* ---- the frontier ----------------------------------------------------------- */

typedef struct {
  gint64 time_ns;
  double energy_j;
  guint16 *choice;    /* option per node (owned) */
} PerseusPoint;

typedef struct {
  guint n_points;
  PerseusPoint *points;  /* fastest first; energy strictly decreasing */
  guint n_nodes;
  guint64 steps;         /* min-cut steps the planner took */
  gboolean exact;        /* TRUE: the exact frontier (small DAGs) */
} PerseusFrontier;

/* Relative time resolution of the trajectory (of the all-fastest time). */
#define PERSEUS_RESOLUTION 1e-4

typedef struct {
  double resolution;   /* [0, 0.1]: least time a min-cut step gains and
                          least time between kept points, relative to the
                          all-fastest iteration time; 0 = every step */
  gboolean exact;      /* try the exact dynamic program first */
  gboolean trajectory; /* the min-cut trajectory when not exact */
} PerseusOptions;

/* Defaults: PERSEUS_RESOLUTION, exact and trajectory on. */
void perseus_options_init(PerseusOptions *o);

/* The iteration time-energy Pareto frontier of finished DAG d, from the
 * fastest plan (the all-fastest iteration time, with every computation
 * that has slack slowed into it) to the minimum-energy plan.  Exact when
 * the DAG is small enough for the dynamic program, else from the min-cut
 * trajectory (models/dvfs/perseus.c).  Caller owns it. */
PerseusFrontier *perseus_frontier(const PerseusDag *d, GError **error);
PerseusFrontier *perseus_frontier_with(const PerseusDag *d,
                                       const PerseusOptions *o,
                                       GError **error);
void perseus_frontier_free(PerseusFrontier *f);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PerseusFrontier, perseus_frontier_free)
/* The point with the largest time <= time_ns (the least energy that
 * fits), or 0 when even the fastest does not fit. */
guint perseus_frontier_fit(const PerseusFrontier *f, gint64 time_ns);

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
const PerseusGroups *perseus_model_groups(const PerseusModel *pm);
/* GPUs one DAG GPU stands for (the workload's tp): multiply DAG energies
 * by it for a whole pipeline. */
guint perseus_model_tp(const PerseusModel *pm);
/* The candidate clocks: option k of every node runs clocks[k] (borrowed;
 * *n of them). */
const guint16 *perseus_model_clocks(const PerseusModel *pm, guint *n);

/* A plan where pipeline p runs choice[p] (an option per node; NULL =
 * auto clocks).  Ops outside computations run at auto clocks.  Caller
 * owns it. */
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

typedef enum {
  PERSEUS_RUN_MAX = 0,    /* every computation at its highest clock */
  PERSEUS_RUN_PERSEUS,    /* a frontier point (straggler-aware or not) */
  PERSEUS_RUN_ENVPIPE,    /* models/dvfs/envpipe.h */
  PERSEUS_RUN_ZEUS,       /* models/dvfs/zeus.h */
  PERSEUS_RUN_PLAN,       /* a given clock per computation (plan_mhz) */
  PERSEUS_RUN_KIND_COUNT
} PerseusRunKind;

typedef struct {
  PerseusRunKind kind;
  double slowdown;          /* perseus: run the cheapest frontier point
                               within (1 + slowdown) x the all-max time */
  gboolean straggler_aware; /* perseus: react to stragglers */
  guint lag;                /* perseus: iterations before the reaction */
  double eta;               /* zeus: weight of energy in [0, 1] */
  double step_w;            /* zeus: power-limit step (> 0) */
  PerseusOptions frontier;  /* perseus */
  gboolean kernel;          /* perseus: kernel-level clocks inside each
                               computation within the frontier point's
                               time (perseus_kernel_plan); not with
                               straggler_aware */
  /* plan: the SM clock (MHz) of every computation of one pipeline,
   * plan_stages x plan_microbatches x 2, at perseus_node_id(M, s, m, b);
   * borrowed.  Each runs the candidate clock nearest to it (the higher on
   * a tie); PerseusRun.plan_snapped counts those that were not one. */
  const guint16 *plan_mhz;
  guint plan_stages, plan_microbatches;
} PerseusPolicy;

/* Defaults: slowdown 0, not straggler-aware, lag 0, eta 0.5, 5 W steps,
 * perseus_options_init. */
void perseus_policy_init(PerseusPolicy *p, PerseusRunKind kind);
/* "max", "perseus", "envpipe", "zeus", "plan" ("?" when out of range). */
const char *perseus_run_kind_name(PerseusRunKind k);

typedef struct {
  SimResult *result;          /* owned: the engine's run */
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
} PerseusRun;

void perseus_run_free(PerseusRun *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PerseusRun, perseus_run_free)

/* Plans policy `pol` for pipelined workload w on cluster `run` (its own
 * overrides: blocking/idle power, power limit, switching latency,
 * variability, seed), then simulates `iterations` iterations with
 * `stragglers` (borrowed, may be NULL) applied; a straggler-aware Perseus
 * re-plans at iteration boundaries.  With a switching latency every plan
 * run requests its switches that much ahead (sim_plan_lookahead), and
 * Perseus and EnvPipe fall back to plans that can be followed when the
 * run misses their slowdown budget (PerseusRun.latency_fallback).
 * `catalogue` resolves the workload's reference GPU (may be NULL).  Caller
 * owns the result; NULL with an error naming the parameter or what
 * failed. */
PerseusRun *perseus_run(const PerseusPolicy *pol, const Cluster *run,
                        const SimWorkload *w, const GpuCatalogue *catalogue,
                        const StragglerSet *stragglers, guint iterations,
                        GError **error);

#define PERSEUS_ERROR (perseus_error_quark())
GQuark perseus_error_quark(void);
typedef enum {
  PERSEUS_ERROR_INVALID,   /* not a pipelined workload, bad DAG */
  PERSEUS_ERROR_LIMIT      /* too large */
} PerseusError;

G_END_DECLS

#endif
