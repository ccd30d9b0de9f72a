/* models/dvfs/perseus_dag.h -- the computation DAG of the Perseus planner
 * and its iteration time-energy Pareto frontier (Perseus, SOSP'24).
 *
 * A PerseusDag holds computations as nodes with per-clock options (time,
 * energy), precedence edges and the energy model of a plan; the frontier
 * planner reads a finished one.  EnvPipe (envpipe.h) and Zeus (zeus.h)
 * plan on the same DAG.  models/dvfs/perseus.h includes this header and
 * builds DAGs from workloads on machines.  See models/dvfs/perseus.c (the
 * DAG) and models/dvfs/perseus_frontier.c (the frontier).
 */
#ifndef MODELS_DVFS_PERSEUS_DAG_H
#define MODELS_DVFS_PERSEUS_DAG_H

#include <glib.h>
#include "models/schedule.h"
#include "models/dag.h"

G_BEGIN_DECLS

/* The error domain of the DAG, its planners (the frontier, EnvPipe, Zeus)
 * and the pipeline policies (models/dvfs/perseus.h). */
#define PERSEUS_ERROR (perseus_error_quark())
GQuark perseus_error_quark(void);
typedef enum {
  PERSEUS_ERROR_INVALID,   /* bad DAG or policy parameter */
  PERSEUS_ERROR_LIMIT      /* too large */
} PerseusError;

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
 * pipeline_node_id, node on GPU s, per-stage program order `order[s]` (2M
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

/* The same structure as a graph (models/dag.h; Dag.topo is the order
 * above).  Borrowed. */
const Dag *perseus_dag_graph(const PerseusDag *d);

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
 * trajectory (models/dvfs/perseus_frontier.c).  Caller owns it. */
PerseusFrontier *perseus_frontier(const PerseusDag *d, GError **error);
PerseusFrontier *perseus_frontier_with(const PerseusDag *d,
                                       const PerseusOptions *o,
                                       GError **error);
void perseus_frontier_free(PerseusFrontier *f);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PerseusFrontier, perseus_frontier_free)
/* The point with the largest time <= time_ns (the least energy that
 * fits), or 0 when even the fastest does not fit. */
guint perseus_frontier_fit(const PerseusFrontier *f, gint64 time_ns);

G_END_DECLS

#endif
