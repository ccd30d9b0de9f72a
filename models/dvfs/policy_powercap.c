/* models/dvfs/policy_powercap.c -- js.policy.powercap{watts | slowdown}:
 * auto clocks under a power limit: the given one, or the lowest-energy
 * one within the slowdown budget (every limit from the GPU's minimum to
 * its maximum in 5 W steps, then 1 W steps around the best, each
 * evaluated exactly, the winner checked on the engine).
 */
#include "models/dvfs/planner-private.h"
#include "models/dvfs/policy-private.h"

#include <math.h>
#include <stddef.h>

static const char *const keys[] = {"name", "watts", "slowdown", NULL};
/* slowdown's default -1 tells "not given" (lua/policy.c then requires
 * exactly one of the two and stores max(slowdown, 0)). */
static const DvfsArg args[] = {
  {"watts", DVFS_ARG_NUM, offsetof(DvfsPolicy, watts), 0, 1, 1e5, NULL,
   " W"},
  DVFS_ARG_SLOWDOWN(-1),
  {0}};

static Cluster *cluster_with_limit(const Cluster *c, double limit_w,
                                   GError **error)
{
  Cluster *r = cluster_copy(c, error);
  if (r != NULL)
    r->power_limit_w = limit_w;
  return r;
}

/* Evaluates auto clocks under limit_w.  Returns FALSE on error. */
static gboolean eval_limit(Planner *P, double limit_w, DvfsEval *ev,
                           DvfsPrices **prices_out, GError **error)
{
  g_autoptr(Cluster) c = cluster_with_limit(P->run, limit_w, error);
  if (c == NULL)
    return FALSE;
  g_autoptr(ClusterMachine) cm = cluster_machine_new(c, P->w, P->cat, P->seed,
                                                     error);
  if (cm == NULL)
    return FALSE;
  DvfsPrices *pr = dvfs_prices_new(P->m, cluster_machine_sim(cm), NULL, 0);
  DvfsEvalOptions o = {1, 0};
  dvfs_model_eval(P->m, pr, NULL, &o, ev);
  P->evals++;
  if (prices_out != NULL)
    *prices_out = pr;
  else
    dvfs_prices_free(pr);
  return TRUE;
}

/* Returns the limit (W) with the lowest energy within the deadline. */
static gboolean powercap_search(Planner *P, double *limit, GError **error)
{
  const GpuSpec *g = P->run->gpu;
  double lo = g->power_min_w.v, hi = g->power_max_w.v;
  double best_l = -1, best_e = INFINITY;
  DvfsEval ev;
  for (double l = hi; l >= lo - 1e-9; l -= 5.0) {
    if (!eval_limit(P, l, &ev, NULL, error))
      return FALSE;
    if (ev.max_time_ns <= P->deadline_ns && ev.mean_energy_j < best_e) {
      best_e = ev.mean_energy_j;
      best_l = l;
    }
  }
  if (best_l > 0) {
    double c = best_l;
    for (double l = MAX(lo, c - 4); l <= MIN(hi, c + 4) + 1e-9; l += 1.0) {
      if (l == c)
        continue;
      if (!eval_limit(P, l, &ev, NULL, error))
        return FALSE;
      if (ev.max_time_ns <= P->deadline_ns && ev.mean_energy_j < best_e) {
        best_e = ev.mean_energy_j;
        best_l = l;
      }
    }
  }
  *limit = best_l; /* < 0: none fits; auto at the cluster's limit */
  return TRUE;
}

/* Auto clocks under the given or the searched limit; a searched limit
 * whose plan misses the budget on the engine falls back to the cluster's
 * own limit. */
static Cand *strategy(Planner *P, DvfsPlanResult *res,
                      const DvfsPrices **prices, GError **error)
{
  const DvfsPolicy *p = P->pol;
  double limit = p->watts;
  if (limit <= 0 && !powercap_search(P, &limit, error))
    return NULL;
  res->power_limit_w = limit;
  P->pr = dvfs_prices_new(P->m, NULL, NULL, 0);
  g_autoptr(Cand) win = planner_cand_new(P, "auto");
  const SimMachine *check_sm = cluster_machine_sim(P->cm);
  if (limit > 0) {
    P->alt_cluster = cluster_with_limit(P->run, limit, error);
    if (P->alt_cluster == NULL)
      return NULL;
    P->alt_cm = cluster_machine_new(P->alt_cluster, P->w, P->cat, P->seed,
                                    error);
    if (P->alt_cm == NULL)
      return NULL;
    P->alt_prices = dvfs_prices_new(P->m, cluster_machine_sim(P->alt_cm),
                                    NULL, 0);
    check_sm = cluster_machine_sim(P->alt_cm);
    g_free(win->label);
    win->label = g_strdup_printf("powercap(%gW)", limit);
  }
  res->n_candidates = 1;
  const DvfsPrices *final_prices = P->alt_prices != NULL ? P->alt_prices
                                                         : P->pr;
  DvfsEvalOptions o = {1, 0};
  dvfs_model_eval(P->m, final_prices, win->req, &o, &win->ev);
  P->evals++;
  if (p->watts <= 0 && res->power_limit_w > 0) {
    gboolean match;
    g_autoptr(SimPlan) plan = dvfs_model_build_plan(P->m, final_prices,
                                                    win->req);
    gboolean ok = planner_engine_check(P, check_sm, plan, &win->ev, &match,
                                       error);
    if (error != NULL && *error != NULL)
      return NULL;
    if (!ok) {
      res->power_limit_w = -1;
      final_prices = P->pr;
      g_free(win->label);
      win->label = g_strdup("auto");
      dvfs_model_eval(P->m, final_prices, win->req, &o, &win->ev);
    }
  } else if (res->power_limit_w < 0) {
    res->power_limit_w = -1;
  }
  *prices = final_prices;
  return g_steal_pointer(&win);
}

static char *label(const DvfsPolicy *p)
{
  if (p->watts > 0)
    return g_strdup_printf("powercap(%gW)", p->watts);
  return g_strdup_printf("powercap(s=%g)", p->slowdown);
}

static gboolean check(const DvfsPolicy *p, const Cluster *c, GError **error)
{
  const GpuSpec *g = c->gpu;
  if (!dvfs_check_slowdown(p, error))
    return FALSE;
  if (p->watts != 0.0 &&
      !(p->watts >= g->power_min_w.v && p->watts <= g->power_max_w.v)) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "watts = %g is outside %s's power limit range %g-%g W",
                p->watts, g->name, g->power_min_w.v, g->power_max_w.v);
    return FALSE;
  }
  return dvfs_check_latency(p, error) &&
         dvfs_check_clock_lists(p, g, error);
}

static const PlannerClass planned = {PLANNER_NO_SWITCH, NULL, strategy};

const DvfsPolicyClass dvfs_class_powercap = {
  .name = "powercap",
  .keys = keys,
  .args = args,
  .flags = DVFS_CLASS_PLANNED,
  .planner = &planned,
  .label = label,
  .check = check,
  .plan = planner_plan,
};
