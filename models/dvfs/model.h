/* models/dvfs/model.h -- the planners' model of one iteration: a folded
 * dependency graph of the workload, its baseline schedule, and an exact
 * evaluator of any per-op clock plan (see models/dvfs/model.c).
 *
 * Read-only for planners: every field below is filled by dvfs_model_new()
 * and only the evaluator's scratch arrays (ev_*) change afterwards.
 */
#ifndef MODELS_DVFS_MODEL_H
#define MODELS_DVFS_MODEL_H

#include <glib.h>
#include "sim/engine.h"
#include "models/cluster.h"

G_BEGIN_DECLS

#define DVFS_NONE G_MAXUINT32
#define DVFS_EVAL_MAX_ITERATIONS 4

/* The price of one shape at one candidate clock pair on one GPU group. */
typedef struct {
  double time_scale;   /* as SimCost.time_scale */
  double power_w;      /* board power while it runs */
  guint16 sm_mhz, mem_mhz; /* clocks actually run (after the power cap) */
} DvfsCost;

/* Clock state of one (class, stream), as the engine keeps it. */
typedef struct {
  guint16 cur, target;  /* candidate indices */
  gboolean init;
  gint64 land_ns;
} DvfsClockState;

typedef struct {
  const SimWorkload *w;      /* borrowed */
  const SimMachine *sm;      /* borrowed (from the ClusterMachine) */
  gboolean folded;           /* identical ranks share one class */

  /* Classes: ranks with identical ops, GPU factors and baseline timing.
   * Class c is represented by rank class_rep[c]; its slots are the ops of
   * that rank: slot class_off[c] + i is op i. */
  guint n_ranks, n_classes;
  guint32 *rank_class;       /* n_ranks */
  guint32 *class_rep, *class_mult, *class_off; /* off: n_classes + 1 */
  guint32 *class_state_off;  /* n_classes + 1: clock states (one per
                                stream) of class c start here */
  guint32 *class_group;      /* price group: classes whose GPUs price every
                                shape identically */
  guint n_groups;
  guint32 *group_gpu;        /* a GPU of each price group */
  double *class_idle_w, *class_blocked_w, *class_comm_w;
  double *class_wait_w;      /* average power above idle while the class's
                                GPU waits (blocked or idle) at baseline */

  /* Slots (ops of representative ranks). */
  guint32 n_slots, n_states;
  guint32 *slot_class, *slot_pred, *slot_wait, *slot_node, *slot_state;
  guint32 *slot_shape;
  gint64 *slot_ref_ns;
  guint8 *slot_kind;         /* SimOpKind */

  /* Nodes: a kernel or marker slot, or one transfer (every member slot of a
   * collective or send/recv pair).  topo is a topological order. */
  guint32 n_nodes;
  guint32 *node_off, *node_slots;      /* CSR of member slots */
  guint32 *node_pred_off, *node_preds; /* CSR of predecessor nodes */
  guint32 *topo;
  gint64 *node_dur_ns;       /* transfers: baseline duration (fixed) */

  /* Baseline at auto clocks (one iteration starting at 0). */
  gint64 base_time_ns;
  double base_energy_j;
  gint64 *base_start, *base_end;       /* per slot */
  float *base_power_w;                 /* per kernel slot: board power */
  double *slot_longest_ns;   /* per slot: longest path through it (M) */
  double lambda_t_w;         /* energy per second of added iteration time,
                                all GPUs (idle + average wait power) */
  guint64 engine_ops;        /* ops the engine replayed for the baseline */

  /* Evaluator scratch (last iteration evaluated). */
  gint64 *ev_arrive, *ev_start, *ev_end;
  float *ev_power_w;
  DvfsClockState *ev_clock;
  /* The evaluator's program (model.c, "The program"): the nodes in
   * topological order, each transfer's members, and scratch. */
  struct DvfsEvStep *ev_steps;     /* n_nodes */
  struct DvfsEvMember *ev_members; /* members of every transfer */
  gint64 *ev_node_end;             /* n_nodes + 1, by topological position */
  gint64 *ev_member_arrive;        /* per member */
} DvfsModel;

/* Candidate clock pairs and their prices for every shape the model's
 * kernels use.  pairs[0] is always auto {0, 0}; pairs are distinct. */
typedef struct {
  guint n_pairs;
  SimClocks *pairs;
  guint n_shapes, n_groups;
  DvfsCost **rows;           /* [group * n_shapes + shape] -> n_pairs costs,
                                NULL for shapes no kernel of the group uses */
} DvfsPrices;

typedef struct {
  guint n_iterations;        /* 1..DVFS_EVAL_MAX_ITERATIONS */
  gint64 latency_ns;         /* clock switching latency */
} DvfsEvalOptions;

typedef struct {
  gint64 time_ns[DVFS_EVAL_MAX_ITERATIONS];
  double energy_j[DVFS_EVAL_MAX_ITERATIONS];
  gint64 max_time_ns;        /* slowest iteration */
  double mean_energy_j;      /* per iteration */
  double mean_time_ns;
  guint64 switches;          /* all iterations, all GPUs */
} DvfsEval;

/* Builds the model of workload w on machine cm: replays one baseline
 * iteration on the engine at auto clocks, folds identical ranks (when
 * `fold`; ranks must have identical ops, GPU factors and baseline timing;
 * a folded workload's classes are kept whatever `fold` says)
 * and checks that the evaluator reproduces the engine's baseline exactly
 * (time to the ns, energy to 1e-9).  Both arguments are borrowed and must
 * outlive the model.  NULL with an error when the replay fails or the
 * evaluator disagrees with the engine (DVFS_ERROR_INTERNAL). */
DvfsModel *dvfs_model_new(const SimWorkload *w, ClusterMachine *cm,
                          gboolean fold, GError **error);
void dvfs_model_free(DvfsModel *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(DvfsModel, dvfs_model_free)

/* The op of slot s (borrowed, in the representative rank). */
static inline const SimOp *dvfs_model_op(const DvfsModel *m, guint32 s)
{
  guint32 c = m->slot_class[s];
  return &m->w->ranks[m->class_rep[c]].ops[s - m->class_off[c]];
}

/* Prices the n candidate pairs (auto is added first when missing;
 * duplicates are dropped) for every shape of every price group, through
 * machine sm (NULL = the model's; another machine must have the same GPUs,
 * e.g. the same cluster under another power limit).  Caller owns it. */
DvfsPrices *dvfs_prices_new(const DvfsModel *m, const SimMachine *sm,
                            const SimClocks *pairs, guint n);
void dvfs_prices_free(DvfsPrices *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(DvfsPrices, dvfs_prices_free)
/* Index of pair c in p (DVFS_NONE when absent). */
guint dvfs_prices_find(const DvfsPrices *p, SimClocks c);
/* Cost of slot s's shape at candidate k (borrowed). */
static inline const DvfsCost *dvfs_prices_at(const DvfsPrices *p,
                                             const DvfsModel *m, guint32 s,
                                             guint k)
{
  guint32 g = m->class_group[m->slot_class[s]];
  return &p->rows[(gsize)g * p->n_shapes + m->slot_shape[s]][k];
}

/* Evaluates the plan `request` (per slot, an index into p->pairs; NULL =
 * auto everywhere; ignored for non-kernel slots) exactly as the engine
 * replays it: same dataflow schedule, same clock-switch rule (a switch
 * lands latency_ns after the request, old clocks hold until then), same
 * rounding, same energy integral.  Leaves the last iteration's per-slot
 * times and kernel powers in m->ev_*.  Not thread-safe (uses the model's
 * scratch). */
void dvfs_model_eval(DvfsModel *m, const DvfsPrices *p,
                     const guint16 *request, const DvfsEvalOptions *o,
                     DvfsEval *out);

/* The engine plan of per-slot requests (as dvfs_model_eval takes them):
 * every rank of a class gets its class's requests (on a folded workload
 * every representative: the folded engine reads no other rank's entries,
 * and sim_plan_unfold gives them to every rank).  Caller owns it. */
SimPlan *dvfs_model_build_plan(const DvfsModel *m, const DvfsPrices *p,
                               const guint16 *request);

G_END_DECLS

#endif
