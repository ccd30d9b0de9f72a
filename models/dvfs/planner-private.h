/* models/dvfs/planner-private.h -- the planner's shared machinery, for the
 * planned policies' files (models/dvfs/policy_{powercap,iteration,pass,
 * kernel,custom}.c) and models/dvfs/planner.c, which defines it.
 *
 * A planned class states what it gives the planner as data, a
 * PlannerClass (DvfsPolicyClass.planner), and its `plan` is planner_plan:
 * the planner builds the plan model (one observed baseline replay,
 * models/dvfs/model.h), sets the latency and the deadline by the class's
 * flags, and finds the winner, either with the class's search (the
 * baseline and the search's candidates; the best one the engine passes
 * wins) or with the class's own strategy, which prices the candidates
 * (planner_price_candidates or its own prices), finds the winning
 * candidate and evaluates it for the summary; the planner then builds
 * the plan and the report.  Candidates
 * (Cand) are judged by the exact evaluator (planner_eval); the separable
 * model, budget search, descent and units are shared here.  Not a public
 * header.
 */
#ifndef MODELS_DVFS_PLANNER_PRIVATE_H
#define MODELS_DVFS_PLANNER_PRIVATE_H

#include "models/dvfs/planner.h"
#include "models/dvfs/knapsack.h"
#include "models/dvfs/model.h"

G_BEGIN_DECLS

typedef struct {
  guint16 *intent;   /* per slot: the planned pair */
  guint16 *req;      /* per slot: the requested pair (after look-ahead) */
  DvfsEval ev;
  gboolean feasible;
  char *label;
  guint n_units;
} Cand;

void planner_cand_free(gpointer p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Cand, planner_cand_free)

typedef struct {
  const DvfsPolicy *pol;
  const Cluster *run;
  const SimWorkload *w;
  const GpuCatalogue *cat;
  guint64 seed; /* the run's, for every machine the planner builds */
  ClusterMachine *cm;
  DvfsModel *m;
  DvfsPrices *pr;
  gint64 latency_ns;       /* planned and checked for */
  gint64 min_segment_ns;
  guint iters;             /* evaluated iterations */
  double s;
  gint64 deadline_ns;
  guint evals, sims, eval_budget;
  GPtrArray *cands;        /* feasible candidates (Cand*) */
  /* (class, stream) -> kernel slots in stream order (CSR), for look-ahead
   * and segments. */
  guint32 *ks_off, *ks;
  guint32 n_streams;
  /* A second machine a strategy prices on (powercap: the chosen limit's);
   * owned, freed with the planner after the summary is built. */
  Cluster *alt_cluster;
  ClusterMachine *alt_cm;
  DvfsPrices *alt_prices;
} Planner;

/* Units -> slot CSR (for the descent). */
typedef struct {
  guint32 *off, *slots;
} UnitSlots;

/* PlannerClass flags. */
enum {
  PLANNER_NO_SWITCH = 1 << 0, /* uniform plans: planned for latency 0 */
  PLANNER_SEGMENTS = 1 << 1   /* min_segment_ms applies */
};

/* Finds the winner on P (P->pr unset): sets P->pr (or its own prices) and
 * res->n_candidates (and res->power_limit_w), returns the winner (owned)
 * evaluated so that the model's scratch holds its last iteration, and
 * *prices the prices its plan is built with.  NULL with an error. */
typedef Cand *(*PlannerStrategy)(Planner *P, DvfsPlanResult *res,
                                 const DvfsPrices **prices, GError **error);

/* What a planned class gives the planner: its flags (PLANNER_*) and
 * either `search`, which adds its candidates to the baseline (the searched
 * policies: iteration, pass, kernel; the planner prices every candidate
 * pair, checks the best on the engine and falls back in order, auto
 * clocks last), or `strategy`, which finds the winner its own way
 * (powercap, custom). */
typedef struct PlannerClass {
  guint flags;
  Cand *(*search)(Planner *P);
  PlannerStrategy strategy;
} PlannerClass;

/* Plans checked policy p of a planned kind as its class's PlannerClass
 * says: the `plan` of every planned class.  Caller owns the result. */
DvfsPlanResult *planner_plan(const DvfsPolicy *p, const DvfsContext *x,
                             GError **error);

/* Candidates. */
Cand *planner_cand_new(const Planner *P, const char *label);
Cand *planner_cand_copy(const Planner *P, const Cand *src, const char *label);
void planner_eval(Planner *P, Cand *c);
void planner_keep(Planner *P, const Cand *c, const char *label);
Cand *planner_best(Planner *P);

/* Prices every candidate pair (the policy's restriction applied) into
 * P->pr; sets res->n_candidates. */
void planner_price_candidates(Planner *P, DvfsPlanResult *res);
/* Evaluates the winner at the planned latency over the planned
 * iterations, leaving its last iteration in the model's scratch. */
void planner_final_eval(Planner *P, Cand *win);
/* Replays the plan on the engine; TRUE when every iteration meets the
 * deadline.  *match: the engine agrees with the model's evaluation. */
gboolean planner_engine_check(Planner *P, const SimMachine *sm,
                              const SimPlan *plan, const DvfsEval *ev,
                              gboolean *match, GError **error);

/* The separable model's budget search and the exact descent. */
Cand *planner_search(Planner *P, const guint32 *slot_unit, guint n_units,
                     const char *label);
Cand *planner_descend(Planner *P, const guint32 *slot_unit, guint n_units,
                      const Cand *start, const char *label);

/* Units. */
void planner_unit_slots_build(const Planner *P, const guint32 *slot_unit,
                              guint n_units, UnitSlots *us);
void planner_unit_slots_clear(UnitSlots *us);
void planner_set_unit(Cand *c, const UnitSlots *us, guint u, guint16 k);
guint planner_units_name(const Planner *P, guint32 *slot_unit);
guint planner_units_op(const Planner *P, guint32 *slot_unit);
guint planner_units_segment(const Planner *P, guint32 *slot_unit,
                            gint64 seg_ns, gboolean by_content);

/* The nested plans (a finer policy keeps the coarser ones as candidates):
 * policy_iteration.c, policy_pass.c. */
Cand *planner_iteration(Planner *P);
Cand *planner_pass(Planner *P);

G_END_DECLS

#endif
