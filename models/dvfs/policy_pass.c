/* models/dvfs/policy_pass.c -- js.policy.pass{slowdown,
 * switch_latency_ms}: one clock pair per phase (forward, backward,
 * optimizer), from the iteration plan, a per-phase knapsack and the exact
 * descent; with a switching latency, switches are requested ahead
 * (models/dvfs/planner.c, "look-ahead").  planner_pass is also a candidate
 * of the kernel policy.
 */
#include "models/dvfs/planner-private.h"
#include "models/dvfs/policy-private.h"

#include <stddef.h>

static const char *const keys[] = {"name", "slowdown", "switch_latency_ms",
                                   NULL};
static const DvfsArg args[] = {
  DVFS_ARG_SLOWDOWN(0),
  {"switch_latency_ms", DVFS_ARG_NUM, offsetof(DvfsPolicy, switch_latency_ms),
   -1, 0, 1e6, NULL, " ms (-1: the run's latency)"},
  {0}};

/* Phases: unit = phase index among the phases present. */
static guint units_phase(const Planner *P, guint32 *slot_unit)
{
  const DvfsModel *m = P->m;
  guint32 map[SIM_PHASE_COUNT];
  for (int i = 0; i < SIM_PHASE_COUNT; i++)
    map[i] = DVFS_NONE;
  guint n = 0;
  for (guint32 s = 0; s < m->n_slots; s++) {
    slot_unit[s] = DVFS_NONE;
    if (m->slot_kind[s] != SIM_OP_KERNEL)
      continue;
    guint ph = MIN(dvfs_model_op(m, s)->phase, SIM_PHASE_COUNT - 1);
    if (map[ph] == DVFS_NONE)
      map[ph] = n++;
    slot_unit[s] = map[ph];
  }
  return n;
}

/* Pass: iteration plan, then per-phase knapsack, then descent. */
Cand *planner_pass(Planner *P)
{
  g_autoptr(Cand) it = planner_iteration(P);
  g_autofree guint32 *su = g_new(guint32, MAX(P->m->n_slots, 1u));
  guint n = units_phase(P, su);
  Cand *k = planner_search(P, su, n, "pass");
  Cand *start = k != NULL && k->ev.mean_energy_j < it->ev.mean_energy_j ? k
                                                                          : it;
  Cand *best = planner_descend(P, su, n, start, "pass");
  planner_cand_free(k);
  planner_keep(P, best, NULL);
  return best;
}

static char *label(const DvfsPolicy *p)
{
  if (p->switch_latency_ms >= 0)
    return g_strdup_printf("pass(s=%g,lat=%gms)", p->slowdown,
                           p->switch_latency_ms);
  return g_strdup_printf("pass(s=%g)", p->slowdown);
}

static const PlannerClass planned = {0, planner_pass, NULL};

const DvfsPolicyClass dvfs_class_pass = {
  .name = "pass",
  .keys = keys,
  .args = args,
  .flags = DVFS_CLASS_PLANNED,
  .planner = &planned,
  .label = label,
  .check = dvfs_check_standard,
  .plan = planner_plan,
};
