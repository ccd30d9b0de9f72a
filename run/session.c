/* run/session.c -- see run/session.h. */
#include "run/session.h"
#include "run/memory.h"

#include <string.h>
#include <unistd.h>

/* The run's id: its start, UTC to the microsecond, and the process id,
 * "20261206T153201.123456Z-4242".  Unique among the runs that write one
 * results file (two runs would have to start in the same microsecond in
 * processes of the same id); no '/' or ':', so that it also names an HDF5
 * attribute and a file.  Not deterministic, by design: it tells runs
 * apart (without it, a rerun appends rows that nothing distinguishes). */
static void new_run_id(JsSession *s)
{
  g_autoptr(GDateTime) now = g_date_time_new_now_utc();
  g_autofree char *stamp = g_date_time_format(now, "%Y%m%dT%H%M%S");
  g_autofree char *iso = g_date_time_format(now, "%Y-%m-%dT%H:%M:%S");
  int us = g_date_time_get_microsecond(now);
  s->run_id = g_strdup_printf("%s.%06dZ-%ld", stamp, us, (long)getpid());
  s->run_started = g_strdup_printf("%s.%06dZ", iso, us);
}

JsSession *js_session_new(guint64 seed)
{
  JsSession *s = g_new0(JsSession, 1);
  s->catalogue = gpu_catalogue_new();
  s->seed = seed;
  s->jobs = 1;
  s->threads = 1;
  s->trust_weakest = -1;
  new_run_id(s);
  s->gpu_memory_gb = -1;
  return s;
}

guint64 js_session_seed(const JsSession *s, gboolean given, guint64 seed)
{
  return given ? seed : s->seed;
}

void js_session_free(JsSession *s)
{
  if (s == NULL)
    return;
  gpu_catalogue_free(s->catalogue);
  js_confine_free(s->confine);
  g_free(s->limits.hit);
  g_free(s->scenario_path);
  g_free(s->scenario_source);
  g_free(s->run_id);
  g_free(s->run_started);
  g_free(s);
}

gboolean js_session_sandbox(JsSession *s, const char *script, GError **error)
{
  g_autoptr(JsConfine) c = js_confine_new();
  if (!js_confine_allow(c, JS_ACCESS_WRITE, ".", "the current directory",
                        error))
    return FALSE;
  if (script != NULL) {
    g_autofree char *dir = g_path_get_dirname(script);
    if (!js_confine_allow(c, JS_ACCESS_READ, dir, "the script's directory",
                          error))
      return FALSE;
  }
  js_confine_free(s->confine);
  s->confine = g_steal_pointer(&c);
  s->sandbox = TRUE;
  return TRUE;
}

/* A sandbox without rules (never set up by js_session_sandbox) allows
 * nothing. */
static gboolean no_rules(const char *path, GError **error)
{
  g_set_error(error, JS_CONFINE_ERROR, JS_CONFINE_ERROR_DENIED,
              "sandbox: %s: no file may be opened (no directories allowed)",
              path);
  return FALSE;
}

gboolean js_session_may_read(const JsSession *s, const char *path,
                             GError **error)
{
  if (!s->sandbox)
    return TRUE;
  if (s->confine == NULL)
    return no_rules(path, error);
  return js_confine_check(s->confine, path, JS_ACCESS_READ, error);
}

gboolean js_session_may_write(const JsSession *s, const char *path,
                              JsFileKind kind, GError **error)
{
  if (!s->sandbox)
    return TRUE;
  if (s->confine == NULL)
    return no_rules(path, error);
  if (!js_confine_check(s->confine, path, JS_ACCESS_WRITE, error))
    return FALSE;
  if (!js_output_check(path, kind, NULL, error)) {
    g_prefix_error(error, "sandbox: ");
    return FALSE;
  }
  return TRUE;
}

SimResult *js_simulate(JsSession *s, const Cluster *c, const SimWorkload *w,
                       const DvfsPolicy *p, const JsRunOptions *opt,
                       GError **error)
{
  return js_simulate_planned(s, c, w, p, opt, NULL, error);
}

void js_run_report_clear(JsRunReport *r)
{
  if (r == NULL)
    return;
  dvfs_plan_result_free(r->plan);
  perseus_run_free(r->pipeline);
  if (r->steps != NULL)
    g_array_unref(r->steps);
  js_trust_clear(&r->trust);
  memset(r, 0, sizeof *r);
}

SimResult *js_simulate_planned(JsSession *s, const Cluster *c,
                               const SimWorkload *w, const DvfsPolicy *p,
                               const JsRunOptions *opt,
                               DvfsPlanResult **plan_out, GError **error)
{
  if (plan_out != NULL)
    *plan_out = NULL;
  JsRunReport rep = {0};
  SimResult *r = js_simulate_report(s, c, w, p, opt, &rep, error);
  if (plan_out != NULL)
    *plan_out = g_steal_pointer(&rep.plan);
  js_run_report_clear(&rep);
  return r;
}

/* A folded workload (SimWorkload.fold_rep: one representative replayed per
 * class of identical ranks) is exact only where every member of a class is
 * priced like its representative.  Refuses, naming the cause, every run
 * option that prices GPUs individually or needs every rank's replay: the
 * cluster's variability and partly filled last node
 * (cluster_check_folded), stragglers, timelines.  (The engine itself
 * checks the per-GPU power constants.)  Planned and pipeline
 * policies run: they plan per class, on the representatives (the plan
 * model and the Perseus DAG take a folded workload's classes as they
 * are), and their plans give representatives only, which is exact because
 * a class's members run the same ops at the same prices (docs/dvfs.md,
 * "Folded workloads"). */
static gboolean check_folded(const Cluster *run,
                             const JsRunOptions *opt, const SimWorkload *w,
                             GError **error)
{
  if (!cluster_check_folded(run, w, error))
    return FALSE;
  if (opt->stragglers != NULL && !straggler_set_empty(opt->stragglers)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "the workload is folded but the run has stragglers: a slow "
                "GPU no longer runs like its representative%s",
                CLUSTER_FOLDED_HINT);
    return FALSE;
  }
  if (opt->observer != NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "the workload is folded: a timeline would show only the "
                "representatives' ops%s", CLUSTER_FOLDED_HINT);
    return FALSE;
  }
  return TRUE;
}

/* ---- step rows -------------------------------------------------------------
 *
 * A workload imported with every profiled step (trace import --step all)
 * opens each step with a marker named ProfilerStep#N on a host stream.
 * The final replay is observed (every op record kept: 48 bytes per op per
 * iteration) and each iteration split at the markers of the first rank
 * that has them; a step's energy is the integral of every GPU's power over
 * its window, from the records as the engine's additive model defines it:
 * idle power throughout, plus each op's increment over its run and, for a
 * communication op, the blocked increment from its arrival to its start.
 * The steps' energies add up to the iteration's (to rounding). */

typedef struct {
  SimObserver inner;
  gpointer inner_data;
  GArray *recs;              /* SimOpRecord */
} StepObs;

static void step_observe(gpointer data, const SimOpRecord *rec)
{
  StepObs *so = data;
  g_array_append_vals(so->recs, rec, 1);
  if (so->inner != NULL)
    so->inner(so->inner_data, rec);
}

/* The rank whose markers split the steps, or -1 when w has none. */
static gint step_rank(const SimWorkload *w)
{
  /* Most workloads (every generated one) have no such name: then no op
   * needs reading (a whole pass over the op records otherwise). */
  gboolean named = FALSE;
  for (guint n = 0; n < w->names->len && !named; n++)
    named = g_str_has_prefix(sim_workload_name(w, n), "ProfilerStep#");
  for (guint r = 0; named && r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    for (guint32 i = 0; i < rk->n_ops; i++)
      if (rk->ops[i].kind == SIM_OP_MARKER &&
          g_str_has_prefix(sim_workload_name(w, rk->ops[i].name),
                           "ProfilerStep#"))
        return (gint)r;
  }
  return -1;
}

static double overlap(gint64 a0, gint64 a1, gint64 b0, gint64 b1)
{
  gint64 lo = MAX(a0, b0), hi = MIN(a1, b1);
  return hi > lo ? (double)(hi - lo) : 0.0;
}

/* Builds the rows of every iteration of r from the records in so. */
static GArray *step_rows(const SimWorkload *w, const SimMachine *m,
                         const SimResult *r, guint sr, const StepObs *so)
{
  GArray *rows = g_array_new(FALSE, FALSE, sizeof(JsStepRow));
  const SimOpRecord *rec = (const SimOpRecord *)(void *)so->recs->data;
  guint nrec = so->recs->len;
  gint64 t0 = 0;
  for (guint it = 0; it < r->n_iterations; it++) {
    gint64 t1 = t0 + r->iterations[it].time_ns;
    /* Boundaries: the step markers of rank sr this iteration. */
    g_autoptr(GArray) bnd = g_array_new(FALSE, FALSE, sizeof(gint64));
    g_autoptr(GArray) num = g_array_new(FALSE, FALSE, sizeof(gint64));
    for (guint k = 0; k < nrec; k++) {
      const SimOpRecord *x = &rec[k];
      if (x->iter != it || x->gpu != sr)
        continue;
      const SimOp *op = &w->ranks[sr].ops[x->op];
      const char *nm = sim_workload_name(w, op->name);
      if (op->kind != SIM_OP_MARKER || !g_str_has_prefix(nm, "ProfilerStep#"))
        continue;
      gint64 n = g_ascii_strtoll(nm + strlen("ProfilerStep#"), NULL, 10);
      g_array_append_val(bnd, x->start_ns);
      g_array_append_val(num, n);
    }
    guint ns = bnd->len;
    for (guint k = 0; k < ns; k++) {
      gint64 a = k == 0 ? t0 : g_array_index(bnd, gint64, k);
      gint64 b = k + 1 < ns ? g_array_index(bnd, gint64, k + 1) : t1;
      JsStepRow row = {it, g_array_index(num, gint64, k), b - a, 0.0};
      double e = 0;
      for (guint g = 0; g < m->n_gpus; g++)
        e += m->idle_power_w[g] * (double)(b - a) * 1e-9;
      for (guint q = 0; q < nrec; q++) {
        const SimOpRecord *x = &rec[q];
        if (x->iter != it)
          continue;
        double idle = m->idle_power_w[x->gpu];
        e += (x->power_w - idle) * overlap(x->start_ns, x->end_ns, a, b) *
             1e-9;
        if (x->arrive_ns < x->start_ns)
          e += (m->blocked_power_w[x->gpu] - idle) *
               overlap(x->arrive_ns, x->start_ns, a, b) * 1e-9;
      }
      row.energy_j = e;
      g_array_append_val(rows, row);
    }
    t0 = t1;
  }
  return rows;
}

/* How far the run of w on `run` under p, at power limit limit_w (<= 0:
 * the GPU's default), can be trusted: into the report, and into the
 * session's weakest level for js.sweep's `trust` column. */
static void assess_trust(JsSession *s, const Cluster *run,
                         const SimWorkload *w, const DvfsPolicy *p,
                         double limit_w, JsRunReport *rep)
{
  double def = run->gpu->power_limit_w.v;
  JsTrustRun tr = {
    .gpu = run->gpu,
    .power_limit_w = limit_w,
    .boost_controller = run->boost == CLUSTER_BOOST_CONTROLLER,
    .clocks_changed = p->kind != DVFS_MAX || (limit_w > 0 && limit_w < def),
    .w = w,
    .node = &run->node,
  };
  js_trust_assess(&tr, &rep->trust);
  s->trust_weakest = MAX(s->trust_weakest, (int)rep->trust.level);
}

/* A policy that runs its own engine (DVFS_CLASS_PIPELINE: perseus, envpipe,
 * zeus, plan): its run, which carries its model's candidate clocks. */
static SimResult *run_itself(JsSession *s, const DvfsPolicyClass *kl,
                             const Cluster *run, const SimWorkload *w,
                             const DvfsPolicy *p, const JsRunOptions *opt,
                             JsRunReport *rep, GError **error)
{
  DvfsContext x = {run, w, s->catalogue, opt->stragglers,
                   MAX(opt->iterations, 1), opt->observer,
                   opt->observer_data, opt->seed};
  rep->pipeline = kl->run(p, &x, error);
  if (rep->pipeline == NULL)
    return NULL;
  rep->n_stages = w->pp;
  rep->n_microbatches = w->microbatches;
  rep->pipeline_kind = p->kind;
  assess_trust(s, run, w, p,
               rep->pipeline->n_tried > 0 ? rep->pipeline->limit_w
                                          : run->power_limit_w,
               rep);
  return g_steal_pointer(&rep->pipeline->result);
}

SimResult *js_simulate_report(JsSession *s, const Cluster *c,
                              const SimWorkload *w, const DvfsPolicy *p,
                              const JsRunOptions *opt, JsRunReport *report,
                              GError **error)
{
  if (opt->timeline != NULL)
    return js_simulate_timeline(s, c, w, p, opt, report, error);
  memset(report, 0, sizeof *report);
  /* Per-run overrides go on a private copy of the cluster. */
  g_autoptr(Cluster) run = cluster_copy(c, error);
  if (run == NULL)
    return NULL;
  /* Latency: js.simulate's, else the policy's (a planned policy that names
   * one is planned for it and, unless the run overrides it, run with it),
   * else the cluster's. */
  double policy_latency = dvfs_policy_is_planned(p) ? p->switch_latency_ms
                                                    : -1.0;
  run->switch_latency_ms = opt->switch_latency_ms >= 0 ? opt->switch_latency_ms
                           : policy_latency >= 0       ? policy_latency
                                                       : c->switch_latency_ms;
  if (opt->variability) {
    run->perf_spread = opt->perf_spread;
    run->power_spread = opt->power_spread;
  }
  if (!cluster_validate(run, error))
    return NULL;
  if (w->n_ranks != run->n_gpus) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "the workload has %u ranks (tp*pp*dp) but the cluster has %u "
                "GPUs", w->n_ranks, run->n_gpus);
    return NULL;
  }
  if (opt->stragglers != NULL &&
      straggler_set_n_gpus(opt->stragglers) != w->n_ranks) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "the stragglers are for %u GPUs but the workload has %u "
                "ranks", straggler_set_n_gpus(opt->stragglers), w->n_ranks);
    return NULL;
  }
  if (w->fold_rep != NULL && !check_folded(run, opt, w, error))
    return NULL;
  /* A class that runs itself checks the policy as it starts; the others
   * are checked and planned in one call. */
  const DvfsPolicyClass *kl = dvfs_policy_class(p->kind);
  if (kl != NULL && kl->run != NULL)
    return run_itself(s, kl, run, w, p, opt, report, error);
  /* Plan, then run the plan (with the power limit a powercap policy
   * chose); a planned policy's figures are the run's report. */
  DvfsContext x = {run, w, s->catalogue, opt->stragglers,
                   MAX(opt->iterations, 1), NULL, NULL, opt->seed};
  g_autoptr(DvfsPlanResult) pr = dvfs_policy_plan(p, &x, error);
  if (pr == NULL)
    return NULL;
  g_autoptr(SimPlan) plan = g_steal_pointer(&pr->plan);
  if (pr->power_limit_w >= 0)
    run->power_limit_w = pr->power_limit_w;
  if (kl->flags & DVFS_CLASS_PLANNED)
    report->plan = g_steal_pointer(&pr);
  g_autoptr(ClusterMachine) m = cluster_machine_new(run, w, s->catalogue,
                                                    opt->seed, error);
  if (m == NULL)
    return NULL;
  const PriceTable *table = cluster_machine_table(m);
  if (table != NULL && !price_table_check_plan(table, w, plan, error))
    return NULL;
  const SimMachine *sim = cluster_machine_sim(m);
  g_autoptr(StragglerMachine) sm = NULL;
  if (opt->stragglers != NULL) {
    sm = straggler_machine_new(sim, opt->stragglers, NULL, NULL);
    sim = straggler_machine_sim(sm);
  }
  guint64 need = sim_engine_estimate_bytes(w, sim, plan);
  if (!js_memory_check(s->max_memory, need, "the engine state", error))
    return NULL;
  g_autoptr(SimEngine) e = sim_engine_new(w, sim, error);
  if (e == NULL)
    return NULL;
  sim_engine_set_threads(e, opt->threads != 0 ? opt->threads : s->threads);
  gint sr = w->fold_rep == NULL ? step_rank(w) : -1;
  StepObs so = {opt->observer, opt->observer_data, NULL};
  if (sr >= 0) {
    so.recs = g_array_new(FALSE, FALSE, sizeof(SimOpRecord));
    sim_engine_set_observer(e, step_observe, &so);
  } else if (opt->observer != NULL) {
    sim_engine_set_observer(e, opt->observer, opt->observer_data);
  }
  g_autoptr(SimResult) r = sim_engine_run(e, plan, MAX(opt->iterations, 1),
                                          error);
  if (r != NULL && sr >= 0)
    report->steps = step_rows(w, sim, r, (guint)sr, &so);
  if (so.recs != NULL)
    g_array_unref(so.recs);
  if (r == NULL)
    return NULL;
  if (table != NULL && !cluster_machine_check(m, error))
    return NULL;
  assess_trust(s, run, w, p, run->power_limit_w, report);
  return g_steal_pointer(&r);
}
