/* lua/session.c -- see lua/session.h. */
#include "lua/session.h"

JsSession *js_session_new(guint64 seed)
{
  JsSession *s = g_new0(JsSession, 1);
  s->catalogue = gpu_catalogue_new();
  s->seed = seed;
  s->jobs = 1;
  return s;
}

void js_session_free(JsSession *s)
{
  if (s == NULL)
    return;
  gpu_catalogue_free(s->catalogue);
  g_free(s->scenario_path);
  g_free(s->scenario_source);
  g_free(s);
}

SimResult *js_simulate(JsSession *s, const Cluster *c, const SimWorkload *w,
                       const DvfsPolicy *p, const JsRunOptions *opt,
                       GError **error)
{
  return js_simulate_planned(s, c, w, p, opt, NULL, error);
}

SimResult *js_simulate_planned(JsSession *s, const Cluster *c,
                               const SimWorkload *w, const DvfsPolicy *p,
                               const JsRunOptions *opt,
                               DvfsPlanResult **plan_out, GError **error)
{
  if (plan_out != NULL)
    *plan_out = NULL;
  /* Per-run overrides go on a private copy of the cluster. */
  g_autoptr(Cluster) run = cluster_new(c->gpu, c->net, c->n_gpus,
                                       c->gpus_per_node, error);
  if (run == NULL)
    return NULL;
  run->power_limit_w = c->power_limit_w;
  run->idle_power_w = c->idle_power_w;
  run->blocked_power_w = c->blocked_power_w;
  run->comm_power_w = c->comm_power_w;
  /* Latency: js.simulate's, else the policy's (a planned policy that names
   * one is planned for it and, unless the run overrides it, run with it),
   * else the cluster's. */
  double policy_latency = dvfs_policy_is_planned(p) ? p->switch_latency_ms
                                                    : -1.0;
  run->switch_latency_ms = opt->switch_latency_ms >= 0 ? opt->switch_latency_ms
                           : policy_latency >= 0       ? policy_latency
                                                       : c->switch_latency_ms;
  run->perf_spread = c->perf_spread;
  run->power_spread = c->power_spread;
  run->seed = opt->seed;
  if (!cluster_validate(run, error))
    return NULL;
  if (w->n_ranks != run->n_gpus) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "the workload has %u ranks (tp*pp*dp) but the cluster has %u "
                "GPUs", w->n_ranks, run->n_gpus);
    return NULL;
  }
  g_autoptr(SimPlan) plan = NULL;
  if (dvfs_policy_is_planned(p)) {
    g_autoptr(DvfsPlanResult) pr = dvfs_planner_run(p, run, w, s->catalogue,
                                                    error);
    if (pr == NULL)
      return NULL;
    plan = g_steal_pointer(&pr->plan);
    if (pr->power_limit_w >= 0)
      run->power_limit_w = pr->power_limit_w;
    if (plan_out != NULL)
      *plan_out = g_steal_pointer(&pr);
  } else {
    plan = dvfs_plan(p, run, w, error);
    if (plan == NULL)
      return NULL;
  }
  g_autoptr(ClusterMachine) m = cluster_machine_new(run, w, s->catalogue,
                                                    error);
  if (m == NULL)
    return NULL;
  g_autoptr(SimEngine) e = sim_engine_new(w, cluster_machine_sim(m), error);
  if (e == NULL)
    return NULL;
  if (opt->observer != NULL)
    sim_engine_set_observer(e, opt->observer, opt->observer_data);
  return sim_engine_run(e, plan, MAX(opt->iterations, 1), error);
}
