/* models/dvfs/policy_iteration.c -- js.policy.iteration{slowdown}: one
 * clock pair for the whole iteration, the lowest-energy one within the
 * budget, found by evaluating every candidate pair exactly (the true
 * optimum over uniform clocks).  planner_iteration is also the first
 * candidate of the pass and kernel policies (models/dvfs/planner.c,
 * "Nesting").
 */
#include "models/dvfs/planner-private.h"
#include "models/dvfs/policy-private.h"

#include <stddef.h>

static const char *const keys[] = {"name", "slowdown", NULL};
static const DvfsArg args[] = {
  DVFS_ARG_SLOWDOWN(0),
  {0}};

/* Iteration: every candidate, exactly. */
Cand *planner_iteration(Planner *P)
{
  const DvfsModel *m = P->m;
  Cand *c = planner_cand_new(P, "iteration");
  c->n_units = 1;
  Cand *best = NULL;
  for (guint k = 0; k < P->pr->n_pairs; k++) {
    for (guint32 s = 0; s < m->n_slots; s++)
      c->intent[s] = m->slot_kind[s] == SIM_OP_KERNEL ? (guint16)k : 0;
    planner_eval(P, c);
    if (c->feasible &&
        (best == NULL || c->ev.mean_energy_j < best->ev.mean_energy_j)) {
      planner_cand_free(best);
      best = planner_cand_copy(P, c, NULL);
    }
  }
  planner_cand_free(c);
  g_assert(best != NULL); /* auto (k = 0) is the baseline: feasible */
  planner_keep(P, best, NULL);
  return best;
}


static char *label(const DvfsPolicy *p)
{
  return g_strdup_printf("iteration(s=%g)", p->slowdown);
}

/* Uniform plans never switch. */
static const PlannerClass planned = {PLANNER_NO_SWITCH, planner_iteration,
                                     NULL};

const DvfsPolicyClass dvfs_class_iteration = {
  .name = "iteration",
  .keys = keys,
  .args = args,
  .flags = DVFS_CLASS_PLANNED,
  .planner = &planned,
  .label = label,
  .check = dvfs_check_standard,
  .plan = planner_plan,
};
