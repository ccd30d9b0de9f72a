/* models/dvfs/planner.h -- the planned DVFS policies: power cap search,
 * iteration-, pass- and kernel-level plans within a slowdown budget, and
 * custom (callback) plans.  See models/dvfs/planner.c for the shared
 * machinery and the algorithms, models/dvfs/policy_NAME.c for each
 * policy's own part.
 */
#ifndef MODELS_DVFS_PLANNER_H
#define MODELS_DVFS_PLANNER_H

#include <glib.h>
#include "models/dvfs/policy.h"
#include "models/gpu.h"

G_BEGIN_DECLS

/* One row of the per-kernel report: every op with this name, all GPUs, one
 * iteration (the steady-state one when the switching latency is > 0). */
typedef struct {
  char *name;               /* kernel name (owned) */
  SimOpClass klass;         /* of its first op */
  SimPhase phase;           /* of its first op */
  guint64 count;            /* ops */
  double base_time_s;       /* at auto clocks: summed op durations */
  double base_energy_j;     /* at auto clocks: board power x duration */
  guint sm_mhz, mem_mhz;    /* planned pair covering most of its auto time
                               (0 = auto) */
  guint n_pairs;            /* distinct planned pairs among its ops */
  double time_s, energy_j;  /* under the plan (clocks in force) */
} DvfsSummaryRow;

typedef struct DvfsPlanResult {
  SimPlan *plan;            /* owned */
  double power_limit_w;     /* >= 0: run with this limit; < 0: unchanged */
  char *chosen;             /* owned: the plan that won ("kernel(op)",
                               "pass", "iteration", "auto", ...) */
  double base_time_s, base_energy_j;  /* baseline iteration (model) */
  double time_s, energy_j;  /* planned iteration (model; mean) */
  double latency_ms;        /* switching latency planned and checked for */
  guint64 switches;         /* per iteration, all GPUs (model) */
  guint n_units;            /* decision units of the chosen plan */
  guint n_candidates;       /* clock pairs considered */
  guint n_classes;          /* rank classes after folding */
  guint evaluations;        /* plans evaluated on the model */
  guint simulations;        /* engine replays (baseline and final check) */
  GArray *summary;          /* of DvfsSummaryRow, by decreasing energy */
} DvfsPlanResult;

void dvfs_plan_result_free(DvfsPlanResult *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(DvfsPlanResult, dvfs_plan_result_free)

/* Plans policy p (a planned kind: dvfs_policy_is_planned) for workload w on
 * cluster `run` (the run's own overrides: power limit, switching latency,
 * variability; the GPUs' factors drawn from `seed`, the run's).
 * `catalogue` resolves the workload's reference GPU (may be NULL).  The
 * plan keeps the simulated slowdown of every iteration within p->slowdown
 * (+ DVFS_SLOWDOWN_TOL) for the latency it was planned for; it is checked
 * on the engine before it is returned.  Caller owns the result.  NULL
 * with an error naming the parameter, or the custom chooser's error. */
DvfsPlanResult *dvfs_planner_run(const DvfsPolicy *p, const Cluster *run,
                                 const SimWorkload *w,
                                 const GpuCatalogue *catalogue, guint64 seed,
                                 GError **error);

G_END_DECLS

#endif
