/* models/dvfs/policy_custom.c -- js.policy.custom{fn, granularity,
 * switch_latency_ms, min_segment_ms} (or a Lua function as the policy): a
 * chooser (DvfsChooseFn) is called once per unit (a distinct kernel, an op
 * or a segment) with the unit's time and energy at every candidate pair,
 * and returns its clocks.  No budget: the plan is what the chooser chose.
 */
#include "models/dvfs/planner-private.h"
#include "models/dvfs/policy-private.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

static const char *const granularities[] = {"name", "op", NULL};
static const char *const keys[] = {"name", "fn", "granularity",
                                   "switch_latency_ms", "min_segment_ms",
                                   NULL};
/* "fn" is read by the binding (lua/policy.c): a function is no value of
 * DvfsPolicy's. */
static const DvfsArg args[] = {
  {"switch_latency_ms", DVFS_ARG_NUM, offsetof(DvfsPolicy, switch_latency_ms),
   -1, 0, 1e6, NULL, " ms (-1: the run's latency)"},
  {"granularity", DVFS_ARG_CHOICE, offsetof(DvfsPolicy, granularity),
   DVFS_GRANULARITY_NAME, 0, 0, granularities, NULL},
  {"min_segment_ms", DVFS_ARG_NUM, offsetof(DvfsPolicy, min_segment_ms), -1,
   0, 1e6, NULL, " ms (-1: the latency)"},
  {0}};

/* ---- custom ----------------------------------------------------------------------- */

static char *unit_name(const Planner *P, const UnitSlots *us, guint u,
                       const char *kind)
{
  const DvfsModel *m = P->m;
  const SimOp *a = dvfs_model_op(m, us->slots[us->off[u]]);
  const char *na = sim_workload_name(m->w, a->name);
  if (strcmp(kind, "segment") != 0)
    return g_strdup(na);
  const SimOp *b = dvfs_model_op(m, us->slots[us->off[u + 1] - 1]);
  return g_strdup_printf("%s .. %s", na, sim_workload_name(m->w, b->name));
}

/* The custom policy's plan on P (its prices P->pr set): the iteration is
 * cut into units (segments of at least P->min_segment_ns when set, else
 * one unit per op or per distinct kernel name, as the granularity says),
 * the chooser sees each unit's time, energy and slack at every candidate
 * pair, and its answer is snapped to the GPU's clock steps.  Returns the
 * evaluated candidate (the caller's), or NULL with the chooser's error, or
 * DVFS_ERROR_CALLBACK when it chose clocks outside the GPU's range or not
 * among the candidates. */
static Cand *plan_custom(Planner *P, GError **error)
{
  const DvfsPolicy *pol = P->pol;
  const DvfsModel *m = P->m;
  g_autofree guint32 *su = g_new(guint32, MAX(m->n_slots, 1u));
  guint n;
  const char *kind;
  if (P->min_segment_ns > 0) {
    n = planner_units_segment(P, su, P->min_segment_ns, FALSE);
    kind = "segment";
  } else if (pol->granularity == DVFS_GRANULARITY_OP) {
    n = planner_units_op(P, su);
    kind = "op";
  } else {
    n = planner_units_name(P, su);
    kind = "kernel";
  }
  UnitSlots us;
  planner_unit_slots_build(P, su, n, &us);
  guint K = P->pr->n_pairs;
  g_autofree DvfsOption *opts = g_new(DvfsOption, K);
  g_autofree guint16 *choice = g_new(guint16, MAX(n, 1u));
  double T = (double)m->base_time_ns;
  gboolean ok = TRUE;
  for (guint u = 0; u < n && ok; u++) {
    guint64 count = 0;
    double slack = INFINITY, crit = 0, total = 0;
    for (guint k = 0; k < K; k++)
      opts[k] = (DvfsOption){P->pr->pairs[k], 0.0, 0.0};
    for (guint32 j = us.off[u]; j < us.off[u + 1]; j++) {
      guint32 s = us.slots[j];
      double mult = m->class_mult[m->slot_class[s]];
      double d = (double)(m->base_end[s] - m->base_start[s]);
      double free_ns = d * (T / m->slot_longest_ns[s] - 1.0);
      slack = MIN(slack, free_ns);
      total += d;
      if (free_ns < 1.0)
        crit += d;
      count += m->class_mult[m->slot_class[s]];
      for (guint k = 0; k < K; k++) {
        const DvfsCost *ck = dvfs_prices_at(P->pr, m, s, k);
        double t = (double)llround((double)m->slot_ref_ns[s] *
                                   ck->time_scale);
        opts[k].time_s += mult * t * 1e-9;
        opts[k].energy_j += mult * ck->power_w * t * 1e-9;
      }
    }
    const SimOp *op = dvfs_model_op(m, us.slots[us.off[u]]);
    g_autofree char *name = unit_name(P, &us, u, kind);
    DvfsUnitInfo info = {name, kind, (SimOpClass)op->klass,
                         (SimPhase)op->phase, count,
                         isfinite(slack) ? slack * 1e-9 : 0.0,
                         total > 0 ? crit / total : 0.0, K, opts};
    SimClocks out = {0, 0};
    if (!pol->choose(pol->choose_data, &info, &out, error)) {
      ok = FALSE;
      break;
    }
    const GpuSpec *g = P->run->gpu;
    double mlo = g->mem_mhz[0].v, mhi = g->mem_mhz[g->n_mem_clocks - 1].v;
    if ((out.sm_mhz != 0 &&
         (out.sm_mhz < g->sm_min_mhz.v || out.sm_mhz > g->sm_max_mhz.v)) ||
        (out.mem_mhz != 0 && (out.mem_mhz < mlo || out.mem_mhz > mhi))) {
      g_set_error(error, DVFS_ERROR, DVFS_ERROR_CALLBACK,
                  "the policy function chose sm = %u, mem = %u MHz for '%s'; "
                  "%s allows SM %.0f-%.0f MHz and memory %.0f-%.0f MHz (0 = "
                  "auto)", out.sm_mhz, out.mem_mhz, name, g->name,
                  g->sm_min_mhz.v, g->sm_max_mhz.v, mlo, mhi);
      ok = FALSE;
      break;
    }
    SimClocks snapped = {
      (guint16)(out.sm_mhz ? gpu_snap_sm(g, out.sm_mhz) : 0),
      (guint16)(out.mem_mhz ? gpu_snap_mem(g, out.mem_mhz) : 0)};
    if (g->n_mem_clocks == 1 ||
        snapped.mem_mhz == (guint)lround(g->mem_mhz[g->n_mem_clocks - 1].v))
      snapped.mem_mhz = 0;
    if (snapped.sm_mhz == (guint)lround(g->sm_default_mhz.v) &&
        snapped.mem_mhz == 0)
      snapped.sm_mhz = 0;
    guint k = dvfs_prices_find(P->pr, snapped);
    if (k == DVFS_NONE) {
      g_set_error(error, DVFS_ERROR, DVFS_ERROR_CALLBACK,
                  "the chooser returned sm = %u, mem = %u MHz for '%s', "
                  "which is not among the candidate clocks", out.sm_mhz,
                  out.mem_mhz, name);
      ok = FALSE;
      break;
    }
    choice[u] = (guint16)k;
  }
  if (!ok) {
    planner_unit_slots_clear(&us);
    return NULL;
  }
  Cand *c = planner_cand_new(P, "custom");
  c->n_units = n;
  for (guint u = 0; u < n; u++)
    planner_set_unit(c, &us, u, choice[u]);
  planner_unit_slots_clear(&us);
  planner_eval(P, c);
  return c;
}

static char *label(const DvfsPolicy *p)
{
  GString *s = g_string_new("custom");
  g_string_append_printf(s, "(%s", dvfs_granularity_name(p->granularity));
  if (p->switch_latency_ms >= 0)
    g_string_append_printf(s, ",lat=%gms", p->switch_latency_ms);
  if (p->min_segment_ms >= 0)
    g_string_append_printf(s, ",seg=%gms", p->min_segment_ms);
  g_string_append_c(s, ')');
  return g_string_free(s, FALSE);
}

static gboolean has_chooser(const DvfsPolicy *p, GError **error)
{
  if (p->choose != NULL)
    return TRUE;
  g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
              "a custom policy needs a chooser function");
  return FALSE;
}

static gboolean check(const DvfsPolicy *p, const Cluster *c, GError **error)
{
  return dvfs_check_common(p, c, has_chooser, error);
}

/* The chooser's plan as it is: no budget, so no engine check. */
static Cand *strategy(Planner *P, DvfsPlanResult *res,
                      const DvfsPrices **prices, GError **error)
{
  planner_price_candidates(P, res);
  *prices = P->pr;
  Cand *win = plan_custom(P, error);
  if (win != NULL)
    planner_final_eval(P, win);
  return win;
}

static const PlannerClass planned = {PLANNER_SEGMENTS, NULL, strategy};

const DvfsPolicyClass dvfs_class_custom = {
  .name = "custom",
  .keys = keys,
  .args = args,
  .flags = DVFS_CLASS_PLANNED | DVFS_CLASS_TAKES_FN,
  .planner = &planned,
  .label = label,
  .check = check,
  .plan = planner_plan,
};
