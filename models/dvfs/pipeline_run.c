/* models/dvfs/pipeline_run.c -- the pipeline policies end to end
 * (perseus_run: max, Perseus, EnvPipe, Zeus, a given plan) and the
 * straggler-aware reaction Perseus runs at iteration boundaries
 * (PerseusReactor).  Planning: perseus_frontier.c, envpipe.c, zeus.c;
 * pricing and plans: perseus_model.c.
 *
 * Straggler-aware reaction (PerseusReactor): see perseus_reactor_new().
 *
 * Switching latency.  The frontier is planned latency-free; every plan
 * perseus_run simulates (and every plan the reactor installs) requests
 * its switches the latency ahead in its own latency-free timeline
 * (sim_plan_lookahead), so a plan whose clocks change no more often than
 * the latency on each stage runs as at 0 ms (the measured pipelines: every
 * computation lasts 45 ms or more against A100's 10 ms).  Where a stage
 * changes clocks faster than that (kernel-level workloads with short
 * computations) the engine's one switch in flight cannot follow, and
 * latency_budget() runs the first plan that meets the policy's budget on
 * the engine: the plan smoothed for the latency (smooth_choice: clocks
 * only rise), one clock per stage, auto clocks.
 */
#include "models/dvfs/perseus-private.h"
#include "models/dvfs/envpipe.h"
#include "models/dvfs/zeus.h"
#include "models/dvfs/policy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Straggler-aware reaction                                                   */

/* Assignment codes per pipeline: a frontier index, or ASSIGN_MAX. */
#define ASSIGN_MAX G_MAXUINT
#define ASSIGN_NONE (G_MAXUINT - 1)

struct PerseusReactor {
  const PerseusModel *pm;
  const PerseusFrontier *f;
  guint base;
  const StragglerSet *set;
  guint lag;
  guint16 *max_choice;
  guint *assign;     /* per pipeline, the plan in force */
  guint *next;       /* per pipeline, scratch */
  double *factor;    /* per stage, scratch */
  /* perseus_reactor_set_lookahead (borrowed; w NULL: none). */
  const SimWorkload *w;
  const SimMachine *m;
};

PerseusReactor *perseus_reactor_new(const PerseusModel *pm,
                                    const PerseusFrontier *f, guint base,
                                    const StragglerSet *set, guint lag)
{
  g_return_val_if_fail(pm != NULL && f != NULL && f->n_points > 0, NULL);
  g_return_val_if_fail(base < f->n_points, NULL);
  PerseusReactor *r = g_new0(PerseusReactor, 1);
  r->pm = pm;
  r->f = f;
  r->base = base;
  r->set = set;
  r->lag = lag;
  r->max_choice = perseus_dag_max_choice(pm->dag);
  guint np = pm->g->n_pipelines;
  r->assign = g_new(guint, np);
  r->next = g_new(guint, np);
  for (guint p = 0; p < np; p++)
    r->assign[p] = ASSIGN_NONE;
  r->factor = g_new(double, pm->g->n_stages);
  return r;
}

void perseus_reactor_free(PerseusReactor *r)
{
  if (r == NULL)
    return;
  g_free(r->max_choice);
  g_free(r->assign);
  g_free(r->next);
  g_free(r->factor);
  g_free(r);
}

/* Fills r->next for iteration iter. */
static void react(PerseusReactor *r, guint iter)
{
  const PipelineGroups *g = r->pm->g;
  guint np = g->n_pipelines, S = g->n_stages, tp = g->tp;
  gint64 t_slow = -1;
  gboolean known = r->set != NULL && iter >= r->lag;
  guint seen = known ? iter - r->lag : 0;
  for (guint p = 0; p < np; p++) {
    r->next[p] = r->base;
    if (!known)
      continue;
    gboolean strag = FALSE;
    for (guint s = 0; s < S; s++) {
      double f = 1.0;
      for (guint t = 0; t < tp; t++)
        f = MAX(f, straggler_factor(r->set, t + tp * (p + np * s), seen));
      r->factor[s] = f;
      strag = strag || f > 1.0;
    }
    if (!strag)
      continue;
    r->next[p] = ASSIGN_MAX;
    gint64 T;
    double E;
    perseus_dag_eval(r->pm->dag, r->max_choice, r->factor, &T, &E);
    t_slow = MAX(t_slow, T);
  }
  if (t_slow < 0)
    return;
  /* The stages' tails (DP all-reduce, optimizer) synchronise the
   * pipelines at the end of the iteration in ways the DAG does not model:
   * a waiting pipeline aims to be done that much earlier. */
  guint fit = perseus_frontier_fit(r->f, t_slow - r->pm->max_tail_ns);
  for (guint p = 0; p < np; p++)
    if (r->next[p] != ASSIGN_MAX)
      r->next[p] = fit;
}

static SimPlan *assigned_plan(PerseusReactor *r)
{
  guint np = r->pm->g->n_pipelines;
  g_autofree const guint16 **ch = g_new(const guint16 *, np);
  for (guint p = 0; p < np; p++)
    ch[p] = r->assign[p] == ASSIGN_MAX ? r->max_choice
                                       : r->f->points[r->assign[p]].choice;
  return perseus_model_plan(r->pm, ch);
}

SimPlan *perseus_reactor_initial_plan(PerseusReactor *r)
{
  react(r, 0);
  memcpy(r->assign, r->next, sizeof(guint) * r->pm->g->n_pipelines);
  return assigned_plan(r);
}

void perseus_reactor_set_lookahead(PerseusReactor *r, const SimWorkload *w,
                                   const SimMachine *m)
{
  g_return_if_fail(r != NULL && (w == NULL) == (m == NULL));
  r->w = w;
  r->m = m;
}

gboolean perseus_reactor_hook(gpointer data, guint iter, SimPlan **plan,
                              GError **error)
{
  PerseusReactor *r = data;
  react(r, iter);
  guint np = r->pm->g->n_pipelines;
  if (memcmp(r->assign, r->next, sizeof(guint) * np) == 0)
    return TRUE;
  memcpy(r->assign, r->next, sizeof(guint) * np);
  g_autoptr(SimPlan) p = assigned_plan(r);
  if (r->w != NULL &&
      !sim_plan_lookahead(p, r->w, r->m, r->m->switch_latency_ns, error))
    return FALSE;
  /* The engine takes ownership of the new plan and frees the one it
   * owned; the caller's initial plan is never freed here. */
  *plan = g_steal_pointer(&p);
  return TRUE;
}

/* ======================================================================== */
/* The pipeline policies, end to end                                          */

void perseus_run_free(PerseusRun *r)
{
  if (r == NULL)
    return;
  sim_result_free(r->result);
  sim_plan_free(r->plan);
  perseus_frontier_free(r->frontier);
  g_free(r->clocks);
  g_free(r);
}

/* Zeus' view of the stragglers: per iteration, one group per distinct
 * per-stage factor vector (straggling pipelines alone, the others
 * together). */
static GArray *zeus_groups(const PerseusModel *pm, const StragglerSet *set,
                           guint iterations, GPtrArray *keep)
{
  const PipelineGroups *g = pm->g;
  guint S = g->n_stages, np = g->n_pipelines, tp = g->tp;
  GArray *out = g_array_new(FALSE, FALSE, sizeof(ZeusPipelines));
  for (guint it = 0; it < iterations; it++) {
    double plain = 0;
    for (guint p = 0; p < np; p++) {
      double *f = g_new(double, S);
      gboolean strag = FALSE;
      for (guint s = 0; s < S; s++) {
        f[s] = 1.0;
        for (guint t = 0; t < tp; t++)
          f[s] = MAX(f[s], straggler_factor(set, t + tp * (p + np * s), it));
        strag = strag || f[s] > 1.0;
      }
      if (!strag) {
        g_free(f);
        plain += 1;
        continue;
      }
      g_ptr_array_add(keep, f);
      ZeusPipelines z = {f, 1.0, it};
      g_array_append_val(out, z);
    }
    if (plain > 0) {
      ZeusPipelines z = {NULL, plain, it};
      g_array_append_val(out, z);
    }
  }
  return out;
}

/* Rewrites plan for the run's switching latency (sim's) and replays it
 * `iterations` times on mach (sim, or sim wrapped with stragglers).  The
 * result, or NULL with error set (also when a price went out of the
 * measured range, cluster_machine_check). */
static SimResult *run_plan(const SimWorkload *w, const SimMachine *sim,
                           const SimMachine *mach, ClusterMachine *cm,
                           SimPlan *plan, guint iterations, GError **error)
{
  if (!sim_plan_lookahead(plan, w, sim, sim->switch_latency_ns, error))
    return NULL;
  g_autoptr(SimEngine) e = sim_engine_new(w, mach, error);
  if (e == NULL)
    return NULL;
  g_autoptr(SimResult) res = sim_engine_run(e, plan, iterations, error);
  if (res == NULL || !cluster_machine_check(cm, error))
    return NULL;
  return g_steal_pointer(&res);
}

/* Every iteration of res within limit_ns. */
static gboolean iterations_within(const SimResult *res, double limit_ns)
{
  for (guint i = 0; i < res->n_iterations; i++)
    if ((double)res->iterations[i].time_ns > limit_ns)
      return FALSE;
  return TRUE;
}

/* One clock per stage for every computation: the highest that `choice`
 * gives any of them, so a stage never switches between computations and
 * no computation runs slower than in `choice`.  Caller frees it. */
static guint16 *stage_choice(const PerseusModel *pm, const guint16 *choice)
{
  guint S = pm->g->n_stages, M = pm->g->n_microbatches;
  /* Tail nodes (after the 2SM computations) keep their option. */
  guint16 *out = g_memdup2(choice, sizeof(guint16) *
                                       perseus_dag_n_nodes(pm->dag));
  for (guint s = 0; s < S; s++) {
    guint16 k = 0;
    for (guint m = 0; m < 2 * M; m++)
      k = MAX(k, choice[pipeline_node_id(M, s, m / 2, m % 2)]);
    for (guint m = 0; m < 2 * M; m++)
      out[pipeline_node_id(M, s, m / 2, m % 2)] = k;
  }
  return out;
}

/* Earliest start of every node of d under `choice` (st, n entries), and
 * the iteration time. */
static gint64 dag_starts(const PerseusDag *d, const guint16 *choice,
                         gint64 *st)
{
  guint n = perseus_dag_n_nodes(d);
  g_autofree gint64 *t = g_new(gint64, MAX(n, 1u));
  for (guint i = 0; i < n; i++)
    t[i] = perseus_dag_option(d, i, choice[i])->time_ns;
  return dag_earliest(perseus_dag_graph(d), t, st);
}

/* `choice` made followable with switching latency L: on every stage a
 * run of computations at one clock must last at least L from its start
 * to the next run's (one switch at most per L, the engine keeping one in
 * flight), in the DAG's timeline.  The shortest run under L is merged with
 * the neighbouring run whose clock is nearest (the higher on a tie) at
 * the higher of the two clocks, until none is left: clocks only rise, so
 * no computation gets slower and neither does the iteration.  A stage
 * whose kernels outside computations (the optimizer) run at auto clocks
 * after them has one more run, at the highest clock, from its last
 * computation's end to the next iteration's first; when that is under L
 * the last run rises to the highest clock (the optimizer then runs at it
 * instead of waiting for a switch that cannot land).  Caller frees it. */
static guint16 *smooth_choice(const PerseusModel *pm, const guint16 *choice,
                              gint64 latency_ns)
{
  const PerseusDag *d = pm->dag;
  guint n = perseus_dag_n_nodes(d), S = pm->g->n_stages;
  guint len = 2 * pm->g->n_microbatches;
  guint16 *out = g_memdup2(choice, sizeof(guint16) * MAX(n, 1u));
  g_autofree gint64 *st = g_new(gint64, MAX(n, 1u));
  const guint16 top_k = (guint16)(pm->n_clocks - 1);
  for (;;) {
    gint64 T = dag_starts(d, out, st);
    guint best_s = G_MAXUINT, best_a = 0, best_b = 0;
    gint64 best_span = latency_ns;
    for (guint s = 0; s < S; s++) {
      const guint32 *ord = pm->g->order[s];
      guint last = ord[len - 1];
      gint64 comp_end = st[last] + perseus_dag_option(d, last, out[last])
                                     ->time_ns;
      for (guint a = 0, b; a < len; a = b) {
        for (b = a + 1; b < len && out[ord[b]] == out[ord[a]]; b++)
          ;
        if (a == 0 && b == len)
          break; /* one clock for the computations: no neighbour */
        gint64 next = b < len ? st[ord[b]] : pm->auto_tail[s] ? comp_end : T;
        gint64 span = next - st[ord[a]];
        if (span < best_span) {
          best_span = span;
          best_s = s;
          best_a = a;
          best_b = b;
        }
      }
      if (pm->auto_tail[s] && out[last] != top_k &&
          T - comp_end + st[ord[0]] < best_span) {
        /* The optimizer's run (best_a == len marks it). */
        best_span = T - comp_end + st[ord[0]];
        best_s = s;
        best_a = best_b = len;
      }
    }
    if (best_s == G_MAXUINT)
      return out;
    const guint32 *ord = pm->g->order[best_s];
    if (best_a == len) {
      for (guint x = len; x > 0 && out[ord[x - 1]] == out[ord[len - 1]];)
        out[ord[--x]] = top_k;
      continue;
    }
    guint16 k = out[ord[best_a]];
    /* Neighbours: the run ending at best_a, the one starting at best_b. */
    gint kp = best_a > 0 ? out[ord[best_a - 1]] : -1;
    gint kn = best_b < len ? out[ord[best_b]] : -1;
    gboolean with_prev =
      kn < 0 || (kp >= 0 && (abs(kp - (gint)k) < abs(kn - (gint)k) ||
                             (abs(kp - (gint)k) == abs(kn - (gint)k) &&
                              kp > kn)));
    guint lo = best_a, hi = best_b;
    guint16 other = (guint16)(with_prev ? kp : kn);
    if (with_prev)
      while (lo > 0 && out[ord[lo - 1]] == other)
        lo--;
    else
      while (hi < len && out[ord[hi]] == other)
        hi++;
    guint16 top = MAX(k, other);
    for (guint x = lo; x < hi; x++)
      out[ord[x]] = top;
  }
}

/* TRUE for the combined policy: Perseus with kernel-level clocks inside
 * each computation (kernel_within belongs to the perseus class alone). */
static gboolean combined(const DvfsPolicy *p)
{
  return p->kind == DVFS_PERSEUS && p->kernel_within;
}

/* The combined policy's own figures follow its fallback: what ran for the
 * frontier point (kernel-level clocks were not used). */
static void fallback_single(PerseusRun *r, const DvfsPolicy *p)
{
  if (!combined(p))
    return;
  r->single_time_ns = r->result->time_ns;
  r->single_energy_j = r->result->energy_j;
}

/* The slowdown budget with a switching latency.  Perseus (slowdown s) and
 * EnvPipe (no slowdown) promise iterations within (1 + s) x the all-max
 * engine iteration at 0 ms (pm->allmax_ns, DVFS_SLOWDOWN_TOL as the DVFS
 * planners).  A plan that switches more often than the latency on some
 * stream cannot be followed exactly even when requested ahead; when the
 * run misses the budget, the plan smoothed for the latency (smooth_choice)
 * is tried, then one clock per stage (stage_choice), then auto clocks (no
 * switch: the baseline), and r->latency_fallback says which ran.  Not
 * checked without a latency, with stragglers (the budget is against
 * all-max without them) or for Zeus (it trades time for energy).  FALSE
 * with error set when a replay fails. */
static gboolean latency_budget(PerseusRun *r, const DvfsPolicy *p,
                               const PerseusModel *pm, const SimWorkload *w,
                               const SimMachine *sim, const SimMachine *mach,
                               ClusterMachine *cm,
                               const StragglerSet *stragglers,
                               const guint16 *run_choice, guint iterations,
                               GError **error)
{
  if (sim->switch_latency_ns <= 0 || stragglers != NULL ||
      (p->kind != DVFS_PERSEUS && p->kind != DVFS_ENVPIPE))
    return TRUE;
  double s = p->kind == DVFS_PERSEUS ? p->slowdown : 0.0;
  double limit = (double)pm->allmax_ns * (1.0 + s + DVFS_SLOWDOWN_TOL);
  if (iterations_within(r->result, limit))
    return TRUE;
  r->kernel_used = FALSE;
  for (guint f = 1; f <= 2; f++) {
    g_autofree guint16 *ch = f == 1 ? smooth_choice(pm, run_choice,
                                                    sim->switch_latency_ns)
                                    : stage_choice(pm, run_choice);
    g_autoptr(SimPlan) sp = perseus_model_plan_uniform(pm, ch);
    g_autoptr(SimResult) rs = run_plan(w, sim, mach, cm, sp, iterations,
                                       error);
    if (rs == NULL)
      return FALSE;
    if (iterations_within(rs, limit)) {
      sim_result_free(r->result);
      r->result = g_steal_pointer(&rs);
      sim_plan_free(r->plan);
      r->plan = g_steal_pointer(&sp);
      r->latency_fallback = f;
      fallback_single(r, p);
      perseus_dag_eval(pm->dag, ch, NULL, &r->plan_time_ns,
                       &r->plan_energy_j);
      return TRUE;
    }
  }
  sim_result_free(r->result);
  SimClocks auto_clk = {0, 0};
  g_autoptr(SimPlan) ap = sim_plan_new_uniform(pm->n_ranks, auto_clk);
  r->result = run_plan(w, sim, mach, cm, ap, iterations, error);
  if (r->result == NULL)
    return FALSE;
  sim_plan_free(r->plan);
  r->plan = g_steal_pointer(&ap);
  r->latency_fallback = 3;
  fallback_single(r, p);
  r->plan_time_ns = r->allmax_time_ns;
  r->plan_energy_j = r->allmax_energy_j;
  return TRUE;
}

/* The choice (an option per node of pm's DAG) that runs the plan's clock
 * for every computation: the candidate clock nearest to it, the higher on
 * a tie; *snapped counts the computations whose clock was not a
 * candidate.  NULL with an error naming both shapes when the plan's
 * stages or microbatches differ from the workload's.  Caller frees. */
static guint16 *plan_choice(const PerseusModel *pm, const DvfsPolicy *p,
                            guint *snapped, GError **error)
{
  guint S = pm->g->n_stages, M = pm->g->n_microbatches;
  if (p->plan_mhz == NULL || p->plan_stages != S ||
      p->plan_microbatches != M) {
    perseus_invalid(error, "plan: the plan has %u stages x %u microbatches, the "
            "workload %u stages x %u microbatches", p->plan_stages,
            p->plan_microbatches, S, M);
    return NULL;
  }
  guint16 *ch = perseus_dag_max_choice(pm->dag);
  *snapped = 0;
  for (guint i = 0; i < 2 * S * M; i++) {
    guint best = 0;
    gint64 bd = G_MAXINT64;
    for (guint k = 0; k < pm->n_clocks; k++) {
      gint64 d = ABS((gint64)pm->clocks[k] - (gint64)p->plan_mhz[i]);
      if (d < bd || (d == bd && pm->clocks[k] > pm->clocks[best])) {
        bd = d;
        best = k;
      }
    }
    ch[i] = (guint16)best;
    *snapped += bd != 0;
  }
  return ch;
}

/* Plans policy p on pm (d its DAG, mx its all-max plan): r's frontier,
 * point, Zeus limit and snapped count; *run_choice the plan every pipeline
 * runs (borrowed from mx, r's frontier or *choice, which the caller
 * frees); a straggler-aware Perseus also makes *reactor and its initial
 * *plan. */
static gboolean plan_policy(PerseusRun *r, const DvfsPolicy *p,
                            const PerseusModel *pm, const Cluster *run,
                            const StragglerSet *stragglers, guint iterations,
                            const guint16 *mx, guint16 **choice,
                            const guint16 **run_choice,
                            PerseusReactor **reactor, SimPlan **plan,
                            GError **error)
{
  const PerseusDag *d = pm->dag;
  switch (p->kind) {
  case DVFS_MAX:
    *run_choice = mx;
    break;
  case DVFS_PERSEUS: {
    PerseusOptions o;
    perseus_options_init(&o);
    o.resolution = p->resolution;
    r->frontier = perseus_frontier_with(d, &o, error);
    if (r->frontier == NULL)
      return FALSE;
    gint64 budget = (gint64)floor((double)r->allmax_time_ns *
                                  (1.0 + p->slowdown));
    r->point = perseus_frontier_fit(r->frontier, budget);
    *run_choice = r->frontier->points[r->point].choice;
    if (p->straggler_aware && stragglers != NULL) {
      *reactor = perseus_reactor_new(pm, r->frontier, r->point,
                                     stragglers, p->lag);
      *plan = perseus_reactor_initial_plan(*reactor);
    }
    break;
  }
  case DVFS_ENVPIPE:
    *run_choice = *choice = envpipe_plan(d);
    break;
  case DVFS_PLAN:
    *run_choice = *choice = plan_choice(pm, p, &r->plan_snapped, error);
    if (*choice == NULL)
      return FALSE;
    break;
  case DVFS_ZEUS: {
    /* The GPU's limit range, up to the highest computation power so that
     * "no cap" is among the candidates (the measured A100 is a 500 W
     * card). */
    double top = run->gpu->power_max_w.v;
    for (guint i = 0; i < perseus_dag_n_nodes(d); i++)
      for (guint k = 0; k < perseus_dag_n_options(d, i); k++) {
        const PerseusOption *o = perseus_dag_option(d, i, k);
        top = MAX(top, o->energy_j / ((double)o->time_ns * 1e-9));
      }
    ZeusConfig zc = {p->eta, run->gpu->power_min_w.v, ceil(top),
                     p->step_w};
    g_autoptr(GPtrArray) keep = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GArray) groups = NULL;
    if (stragglers != NULL)
      groups = zeus_groups(pm, stragglers, iterations, keep);
    ZeusChoice zch;
    if (!zeus_choose(d, &zc, groups ? (ZeusPipelines *)(void *)groups->data
                                    : NULL,
                     groups ? groups->len : 0, &zch, error))
      return FALSE;
    r->limit_w = zch.limit_w;
    r->n_tried = zch.n_tried;
    *run_choice = *choice = zeus_plan_at(d, zch.limit_w);
    break;
  }
  default:
    g_assert_not_reached();
  }
  return TRUE;
}

/* Replays what r ran once more, with x's observer: r's plan (already
 * rewritten for the latency by run_plan) on mach, or, for a
 * straggler-aware run (r->plan NULL), a fresh reactor's plans, as the
 * first replay made them.  The engine is deterministic: the observed run
 * is r's, to the bit (asserted on its time and energy).  FALSE with error
 * set when the replay fails. */
static gboolean observe_kept(PerseusRun *r, const DvfsPolicy *p,
                             const DvfsContext *x, const PerseusModel *pm,
                             const SimMachine *sim, const SimMachine *mach,
                             GError **error)
{
  const SimWorkload *w = x->w;
  g_autoptr(PerseusReactor) reactor = NULL;
  g_autoptr(StragglerMachine) smach = NULL;
  g_autoptr(SimPlan) fresh = NULL;
  SimPlan *plan = r->plan;
  if (plan == NULL) {
    reactor = perseus_reactor_new(pm, r->frontier, r->point,
                                  x->stragglers, p->lag);
    fresh = perseus_reactor_initial_plan(reactor);
    perseus_reactor_set_lookahead(reactor, w, sim);
    if (!sim_plan_lookahead(fresh, w, sim, sim->switch_latency_ns, error))
      return FALSE;
    smach = straggler_machine_new(sim, x->stragglers, perseus_reactor_hook,
                                  reactor);
    mach = straggler_machine_sim(smach);
    plan = fresh;
  }
  g_autoptr(SimEngine) e = sim_engine_new(w, mach, error);
  if (e == NULL)
    return FALSE;
  sim_engine_set_observer(e, x->observer, x->observer_data);
  g_autoptr(SimResult) res = sim_engine_run(e, plan, x->iterations, error);
  if (res == NULL)
    return FALSE;
  g_assert(res->time_ns == r->result->time_ns &&
           res->energy_j == r->result->energy_j);
  return TRUE;
}

/* max, or a kind perseus_run plans (the built-in pipeline classes). */
static gboolean pipeline_kind(DvfsKind k)
{
  return k == DVFS_MAX || k == DVFS_PERSEUS || k == DVFS_ENVPIPE ||
         k == DVFS_ZEUS || k == DVFS_PLAN;
}

/* The checks perseus_run makes before it builds anything: p by its
 * class's table, then what the table cannot say (the combined policy's
 * limits, the run's shape). */
static gboolean check_run(const DvfsPolicy *p, const DvfsContext *x,
                          GError **error)
{
  if (!pipeline_kind(p->kind)) {
    perseus_invalid(error, "'%s' is not a pipeline policy",
                    dvfs_kind_name(p->kind));
    return FALSE;
  }
  if (!dvfs_policy_check(p, x->run, error))
    return FALSE;
  if (p->kernel_within && (p->kind != DVFS_PERSEUS || p->straggler_aware)) {
    perseus_invalid(error, "perseus: kernel = true needs the perseus policy "
            "without straggler_aware");
    return FALSE;
  }
  if (x->iterations == 0) {
    perseus_invalid(error, "iterations must be at least 1");
    return FALSE;
  }
  if (x->stragglers != NULL &&
      straggler_set_n_gpus(x->stragglers) != x->w->n_ranks) {
    perseus_invalid(error, "the stragglers are for %u GPUs but the workload has %u "
            "ranks", straggler_set_n_gpus(x->stragglers), x->w->n_ranks);
    return FALSE;
  }
  /* A folded workload is planned on its representatives and run folded:
   * exact where members are priced like them (cluster_check_folded) and
   * every pipeline runs the same plan (no stragglers: a slow GPU no longer
   * runs like its representative, nor a reacting pipeline like the
   * others). */
  if (!cluster_check_folded(x->run, x->w, error))
    return FALSE;
  if (x->stragglers != NULL && x->w->fold_rep != NULL &&
      !straggler_set_empty(x->stragglers)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "the workload is folded but the run has stragglers: a slow "
                "GPU no longer runs like its representative%s",
                CLUSTER_FOLDED_HINT);
    return FALSE;
  }
  return TRUE;
}

PerseusRun *perseus_run(const DvfsPolicy *p, const DvfsContext *x,
                        GError **error)
{
  g_return_val_if_fail(p != NULL && x != NULL && x->run != NULL &&
                       x->w != NULL, NULL);
  if (!check_run(p, x, error))
    return NULL;
  const Cluster *run = x->run;
  const SimWorkload *w = x->w;
  const StragglerSet *stragglers = x->stragglers;
  guint iterations = x->iterations;
  g_autoptr(ClusterMachine) cm = cluster_machine_new(run, w, x->catalogue,
                                                     x->seed, error);
  if (cm == NULL)
    return NULL;
  const SimMachine *sim = cluster_machine_sim(cm);
  g_autoptr(PerseusModel) pm = perseus_model_new(w, sim, run->gpu,
                                                 cluster_machine_table(cm),
                                                 error);
  if (pm == NULL)
    return NULL;
  const PerseusDag *d = pm->dag;
  g_autoptr(PerseusRun) r = g_new0(PerseusRun, 1);
  r->tp = pm->g->tp;
  r->limit_w = -1;
  r->clocks = g_memdup2(pm->clocks, sizeof(guint16) * pm->n_clocks);
  r->n_clocks = pm->n_clocks;
  g_autofree guint16 *mx = perseus_dag_max_choice(d);
  perseus_dag_eval(d, mx, NULL, &r->allmax_time_ns, &r->allmax_energy_j);

  g_autoptr(SimPlan) plan = NULL;
  g_autoptr(PerseusReactor) reactor = NULL;
  g_autofree guint16 *choice = NULL;
  const guint16 *run_choice = NULL;
  if (!plan_policy(r, p, pm, run, stragglers, iterations, mx, &choice,
                   &run_choice, &reactor, &plan, error))
    return NULL;
  perseus_dag_eval(d, run_choice, NULL, &r->plan_time_ns, &r->plan_energy_j);
  if (plan == NULL)
    plan = perseus_model_plan_uniform(pm, run_choice);

  /* With a switching latency every plan requests its switches that much
   * ahead, in its own latency-free timeline (sim_plan_lookahead), so the
   * clocks of each computation are in force when it starts. */
  if (reactor != NULL)
    perseus_reactor_set_lookahead(reactor, w, sim);
  g_autoptr(StragglerMachine) smach = straggler_machine_new(
    sim, stragglers, reactor != NULL ? perseus_reactor_hook : NULL, reactor);
  const SimMachine *mach = straggler_machine_sim(smach);
  r->result = run_plan(w, sim, mach, cm, plan, iterations, error);
  if (r->result == NULL)
    return NULL;
  if (reactor == NULL)
    r->plan = g_steal_pointer(&plan);
  if (combined(p)) {
    /* The combined policy: kernel-level clocks inside every computation,
     * run only when the engine confirms it is no slower (0.1%) and
     * cheaper than the frontier point's own plan. */
    r->single_time_ns = r->result->time_ns;
    r->single_energy_j = r->result->energy_j;
    g_autoptr(SimPlan) kplan = perseus_kernel_plan(pm, w, sim, run_choice,
                                                   &r->kernel_refined);
    g_autoptr(SimResult) rk = run_plan(w, sim, mach, cm, kplan, iterations,
                                       error);
    if (rk == NULL)
      return NULL;
    if ((double)rk->time_ns <= (double)r->single_time_ns * 1.001 &&
        rk->energy_j < r->single_energy_j) {
      sim_result_free(r->result);
      r->result = g_steal_pointer(&rk);
      sim_plan_free(r->plan);
      r->plan = g_steal_pointer(&kplan);
      r->kernel_used = TRUE;
    }
  }
  if (!latency_budget(r, p, pm, w, sim, mach, cm, stragglers, run_choice,
                      iterations, error))
    return NULL;
  if (x->observer != NULL &&
      !observe_kept(r, p, x, pm, sim, mach, error))
    return NULL;
  return g_steal_pointer(&r);
}
