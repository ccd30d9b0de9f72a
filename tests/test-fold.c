/* tests/test-fold.c -- folded replay (sim/engine.c, sim/replay.c) and
 * fold detection (sim_workload_fold, sim/fold.c).
 *
 * The invariant: a folded workload replays to the same results as the
 * unfolded one -- total time to the nanosecond, per-GPU figures bit for
 * bit, totals (energy, by class, by phase, blocked, idle, waste, flops,
 * switches) to 1e-9 relative (they are sums in another order).  Checked on
 * generated Megatron workloads of every schedule, folded by the generator
 * (cfg.fold) and by sim_workload_fold, on the real cluster model with
 * uniform plans and with a per-op plan that switches clocks; then fold
 * detection on hand-made workloads whose ranks differ (an odd rank, an odd
 * partner), and every way a folded workload or run is refused.
 */
#include <math.h>
#include <string.h>

#include "run/session.h"
#include "models/cluster.h"
#include "models/dvfs/model.h"
#include "models/dvfs/planner.h"
#include "models/dvfs/policy.h"
#include "models/gpu.h"
#include "models/net.h"
#include "models/straggler.h"
#include "sim/engine.h"
#include "sim/workload.h"
#include "tests/testutil.h"
#include "tests/testwork.h"
#include "traces/gpt.h"

#define REF_GPU "A100-SXM4-80GB"

/* ---- comparing results ---------------------------------------------------- */

static void assert_te(const SimTE *a, const SimTE *b)
{
  g_assert_true(test_close(a->time_ns, b->time_ns, 1e-9));
  g_assert_true(test_close(a->energy_j, b->energy_j, 1e-9));
}

/* Folded result f against unfolded result u. */
static void assert_same_results(const SimResult *u, const SimResult *f)
{
  g_assert_cmpint(u->time_ns, ==, f->time_ns);
  g_assert_cmpuint(u->n_gpus, ==, f->n_gpus);
  g_assert_cmpuint(u->n_iterations, ==, f->n_iterations);
  for (guint i = 0; i < u->n_iterations; i++) {
    g_assert_cmpint(u->iterations[i].time_ns, ==, f->iterations[i].time_ns);
    g_assert_true(test_close(u->iterations[i].energy_j,
                             f->iterations[i].energy_j, 1e-9));
  }
  g_assert_true(test_close(u->energy_j, f->energy_j, 1e-9));
  g_assert_true(test_close(u->waste_j, f->waste_j, 1e-9));
  g_assert_true(test_close(u->flops, f->flops, 1e-9));
  g_assert_cmpfloat(u->peak_power_w, ==, f->peak_power_w);
  g_assert_cmpuint(u->switches, ==, f->switches);
  for (int c = 0; c < SIM_CLASS_COUNT; c++)
    assert_te(&u->by_class[c], &f->by_class[c]);
  for (int p = 0; p < SIM_PHASE_COUNT; p++)
    assert_te(&u->by_phase[p], &f->by_phase[p]);
  assert_te(&u->blocked, &f->blocked);
  assert_te(&u->idle, &f->idle);
  for (guint g = 0; g < u->n_gpus; g++)
    g_assert_cmpmem(&u->per_gpu[g], sizeof(SimGpuResult), &f->per_gpu[g],
                    sizeof(SimGpuResult));
  /* Ops: the folded run replays fewer but represents them all. */
  g_assert_cmpuint(u->ops, ==, u->ops_represented);
  g_assert_cmpuint(f->ops_represented, ==, u->ops);
  g_assert_cmpuint(f->ops, <=, f->ops_represented);
}

/* ---- generated workloads ---------------------------------------------------- */

typedef struct {
  const char *label;
  const char *model;
  guint tp, pp, dp, m;
  PipelineSchedule schedule;
  gboolean recompute, overlap;
  guint classes; /* expected representatives */
} Layout;

static const Layout layouts[] = {
  {"1.3b-t2p2d2", "gpt3-1.3b", 2, 2, 2, 6, PIPELINE_1F1B, FALSE, TRUE, 2},
  {"1.3b-t2p4d2-gpipe", "gpt3-1.3b", 2, 4, 2, 6, PIPELINE_GPIPE, FALSE,
   TRUE, 4},
  {"2.7b-t2p4d2-interleaved", "gpt3-2.7b", 2, 4, 2, 8,
   PIPELINE_INTERLEAVED, FALSE, TRUE, 4},
  {"6.7b-t4p2d4-recompute", "gpt3-6.7b", 4, 2, 4, 4, PIPELINE_1F1B, TRUE,
   TRUE, 2},
  {"350m-t1p1d8-nooverlap", "gpt3-350m", 1, 1, 8, 3, PIPELINE_1F1B,
   FALSE, FALSE, 1},
  {"350m-t8p1d1", "gpt3-350m", 8, 1, 1, 3, PIPELINE_1F1B, FALSE, TRUE, 1},
};

typedef struct {
  JsSession *s;
  const GpuSpec *gpu;
  Cluster *c;
} Env;

static void env_init(Env *env, guint n_gpus)
{
  GError *error = NULL;
  env->s = js_session_new(1);
  env->gpu = gpu_catalogue_lookup(env->s->catalogue, REF_GPU, &error);
  g_assert_no_error(error);
  g_autoptr(NetSpec) net = net_preset("dgx-a100", &error);
  g_assert_no_error(error);
  env->c = cluster_new(env->gpu, net, n_gpus, 8, &error);
  g_assert_no_error(error);
}

static void env_clear(Env *env)
{
  cluster_free(env->c);
  js_session_free(env->s);
}

static SimWorkload *generate(const Env *env, const Layout *l, gboolean fold)
{
  GError *error = NULL;
  GptConfig cfg;
  gpt_config_init(&cfg);
  g_assert_true(gpt_config_set_model(&cfg, l->model, &error));
  cfg.tp = l->tp;
  cfg.pp = l->pp;
  cfg.dp = l->dp;
  cfg.microbatches = l->m;
  cfg.schedule = l->schedule;
  cfg.recompute = l->recompute;
  cfg.dp_overlap = l->overlap;
  cfg.fold = fold;
  SimWorkload *w = gpt_generate(&cfg, env->gpu, &error);
  g_assert_no_error(error);
  return w;
}

static SimResult *simulate(Env *env, const SimWorkload *w, const DvfsPolicy *p,
                           guint iterations)
{
  GError *error = NULL;
  JsRunOptions opt = {.iterations = iterations, .seed = 3,
                      .switch_latency_ms = -1};
  SimResult *r = js_simulate(env->s, env->c, w, p, &opt, &error);
  g_assert_no_error(error);
  return r;
}

/* A plan that alternates two clock pairs every 5 ops (the same for every
 * rank, so classes stay classes) and the engine run under it with a
 * switching latency. */
static SimResult *run_switching(Env *env, const SimWorkload *w)
{
  GError *error = NULL;
  g_autoptr(ClusterMachine) cm = cluster_machine_new(env->c, w,
                                                     env->s->catalogue,
                                                     0, &error);
  g_assert_no_error(error);
  SimMachine m = *cluster_machine_sim(cm);
  m.switch_latency_ns = 20000;
  g_autoptr(SimPlan) plan = sim_plan_new_uniform(w->n_ranks,
                                                 (SimClocks){1410, 0});
  guint16 slow = sim_plan_add_pair(plan, (SimClocks){1005, 0});
  for (guint r = 0; r < w->n_ranks; r++) {
    guint16 *idx = sim_plan_rank_index(plan, r, w->ranks[r].n_ops);
    for (guint32 i = 0; i < w->ranks[r].n_ops; i++)
      idx[i] = (i / 5) % 2 ? slow : 0;
  }
  g_autoptr(SimEngine) e = sim_engine_new(w, &m, &error);
  g_assert_no_error(error);
  SimResult *res = sim_engine_run(e, plan, 2, &error);
  g_assert_no_error(error);
  return res;
}

static void test_generated(gconstpointer data)
{
  const Layout *l = data;
  Env env;
  env_init(&env, l->tp * l->pp * l->dp);
  g_autoptr(SimWorkload) u = generate(&env, l, FALSE);
  g_autoptr(SimWorkload) gf = generate(&env, l, TRUE);
  g_autoptr(SimWorkload) sf = generate(&env, l, FALSE);
  GError *error = NULL;
  g_assert_true(sim_workload_fold(sf, &error));
  g_assert_no_error(error);
  g_assert_null(u->fold_rep);
  g_assert_nonnull(gf->fold_rep);
  g_assert_nonnull(sf->fold_rep);
  /* Detection finds the generator's classes and representatives. */
  guint reps = 0;
  for (guint r = 0; r < u->n_ranks; r++) {
    g_assert_cmpuint(sf->fold_rep[r], ==, gf->fold_rep[r]);
    reps += sf->fold_rep[r] == r;
    g_assert_cmpuint(sf->ranks[r].n_ops, ==, gf->ranks[r].n_ops);
  }
  g_assert_cmpuint(reps, ==, l->classes);
  g_assert_true(sim_workload_validate(sf, &error));

  DvfsPolicy pol;
  dvfs_policy_init(&pol, DVFS_MAX);
  g_autoptr(SimResult) ru = simulate(&env, u, &pol, 2);
  g_autoptr(SimResult) rg = simulate(&env, gf, &pol, 2);
  g_autoptr(SimResult) rs = simulate(&env, sf, &pol, 2);
  assert_same_results(ru, rg);
  assert_same_results(ru, rs);
  g_assert_cmpuint(rg->ops * u->n_ranks, ==, ru->ops * l->classes);

  dvfs_policy_init(&pol, DVFS_FIXED);
  pol.sm_mhz = 1110;
  g_autoptr(SimResult) fu = simulate(&env, u, &pol, 1);
  g_autoptr(SimResult) fg = simulate(&env, gf, &pol, 1);
  assert_same_results(fu, fg);

  g_autoptr(SimResult) su = run_switching(&env, u);
  g_autoptr(SimResult) sg = run_switching(&env, gf);
  g_assert_cmpuint(su->switches, >, 0);
  assert_same_results(su, sg);
  env_clear(&env);
}

/* ---- planning on classes ------------------------------------------------------
 *
 * Every planned and pipeline policy plans a folded workload on its
 * representatives.  The plan it makes gives representatives only; expanded
 * to every rank (sim_plan_unfold) it is, op for op, the plan the policy
 * makes on the unfolded workload, and both runs (the expanded plan on the
 * unfolded workload, the folded plan on the folded one) give the unfolded
 * plan's results. */

/* The clocks plan p gives op i of rank r. */
static SimClocks clocks_at(const SimPlan *p, guint r, guint32 i)
{
  guint16 k = p->index != NULL && p->index[r] != NULL ? p->index[r][i] : 0;
  return p->pairs[k < p->n_pairs ? k : 0];
}

static gboolean same_clocks(SimClocks a, SimClocks b)
{
  return a.sm_mhz == b.sm_mhz && a.mem_mhz == b.mem_mhz;
}

/* Plans u (unfolded) and x (expanded from a folded plan) request the same
 * clocks for every op, make the same early requests and start every stream
 * at the same clocks.  Returns how many early requests and set stream
 * clocks they have (to show a case exercised them). */
static guint assert_same_plan(const SimWorkload *w, const SimPlan *u,
                              const SimPlan *x)
{
  guint extras = 0;
  g_assert_cmpuint(u->n_ranks, ==, x->n_ranks);
  for (guint r = 0; r < w->n_ranks; r++) {
    for (guint32 i = 0; i < w->ranks[r].n_ops; i++)
      g_assert_true(same_clocks(clocks_at(u, r, i), clocks_at(x, r, i)));
    guint32 nu = u->ahead != NULL ? u->n_ahead[r] : 0;
    guint32 nx = x->ahead != NULL ? x->n_ahead[r] : 0;
    g_assert_cmpuint(nu, ==, nx);
    for (guint32 k = 0; k < nu; k++) {
      const SimAhead *a = &u->ahead[r][k], *b = &x->ahead[r][k];
      g_assert_cmpuint(a->op, ==, b->op);
      g_assert_cmpint(a->from_start, ==, b->from_start);
      g_assert_cmpint(a->lead_ns, ==, b->lead_ns);
      g_assert_true(same_clocks(u->pairs[a->pair], x->pairs[b->pair]));
    }
    extras += nu;
    const SimInit *iu = u->init != NULL ? u->init[r] : NULL;
    const SimInit *ix = x->init != NULL ? x->init[r] : NULL;
    for (guint s = 0; s < SIM_MAX_STREAMS; s++) {
      gboolean su = iu != NULL && iu[s].set, sx = ix != NULL && ix[s].set;
      g_assert_cmpint(su, ==, sx);
      if (!su)
        continue;
      g_assert_true(same_clocks(u->pairs[iu[s].cur], x->pairs[ix[s].cur]));
      g_assert_true(same_clocks(u->pairs[iu[s].target],
                                x->pairs[ix[s].target]));
      g_assert_cmpint(iu[s].land_ns, ==, ix[s].land_ns);
      extras++;
    }
  }
  return extras;
}

/* A plan for folded workload f gives its representatives only. */
static void assert_reps_only(const SimWorkload *f, const SimPlan *p)
{
  for (guint r = 0; r < f->n_ranks; r++) {
    if (f->fold_rep[r] == r)
      continue;
    g_assert_true(p->index == NULL || p->index[r] == NULL);
    g_assert_true(p->ahead == NULL || p->ahead[r] == NULL);
    g_assert_true(p->init == NULL || p->init[r] == NULL);
  }
}

/* Replays plan p (switches as planned: latency from c) on w for 2
 * iterations. */
static SimResult *run_plan(Env *env, const Cluster *c, const SimWorkload *w,
                           SimPlan *p)
{
  GError *error = NULL;
  g_autoptr(ClusterMachine) cm = cluster_machine_new(c, w, env->s->catalogue,
                                                     0, &error);
  g_assert_no_error(error);
  g_autoptr(SimEngine) e = sim_engine_new(w, cluster_machine_sim(cm), &error);
  g_assert_no_error(error);
  SimResult *r = sim_engine_run(e, p, 2, &error);
  g_assert_no_error(error);
  return r;
}

/* What the custom chooser was shown, to compare folded and unfolded. */
typedef struct {
  GString *seen;
} Chooser;

/* Chooses the least-energy option taking at most 2% more time than auto,
 * and records the unit (name, kind, count, slack and every option). */
static gboolean choose_frugal(gpointer data, const DvfsUnitInfo *u,
                              SimClocks *out, GError **error)
{
  Chooser *ch = data;
  g_string_append_printf(ch->seen, "%s %s %" G_GUINT64_FORMAT " %.9g %.9g:",
                         u->name, u->kind, u->count, u->slack_s,
                         u->critical_frac);
  guint best = 0;
  for (guint k = 0; k < u->n_options; k++) {
    const DvfsOption *o = &u->options[k];
    g_string_append_printf(ch->seen, " %u/%u %.9g %.9g", o->clocks.sm_mhz,
                           o->clocks.mem_mhz, o->time_s, o->energy_j);
    if (o->time_s <= u->options[0].time_s * 1.02 &&
        o->energy_j < u->options[best].energy_j)
      best = k;
  }
  g_string_append_c(ch->seen, '\n');
  *out = u->options[best].clocks;
  return TRUE;
}

typedef struct {
  const char *label;
  DvfsKind kind;
  DvfsGranularity granularity;
  double latency_ms;     /* < 0: the GPU's */
  gboolean kernel_within; /* perseus */
} PlanCase;

static const PlanCase plan_cases[] = {
  {"kernel-name", DVFS_KERNEL, DVFS_GRANULARITY_NAME, 0, FALSE},
  {"kernel-op", DVFS_KERNEL, DVFS_GRANULARITY_OP, 0, FALSE},
  {"kernel-name-latency", DVFS_KERNEL, DVFS_GRANULARITY_NAME, -1, FALSE},
  {"kernel-op-latency", DVFS_KERNEL, DVFS_GRANULARITY_OP, -1, FALSE},
  {"pass", DVFS_PASS, DVFS_GRANULARITY_NAME, -1, FALSE},
  {"iteration", DVFS_ITERATION, DVFS_GRANULARITY_NAME, 0, FALSE},
  {"powercap", DVFS_POWERCAP, DVFS_GRANULARITY_NAME, 0, FALSE},
  {"custom-name", DVFS_CUSTOM, DVFS_GRANULARITY_NAME, 0, FALSE},
  {"custom-op", DVFS_CUSTOM, DVFS_GRANULARITY_OP, 0, FALSE},
  {"custom-segment", DVFS_CUSTOM, DVFS_GRANULARITY_NAME, -1, FALSE},
  {"perseus", DVFS_PERSEUS, DVFS_GRANULARITY_NAME, 0, FALSE},
  {"perseus-latency", DVFS_PERSEUS, DVFS_GRANULARITY_NAME, -1, FALSE},
  {"perseus-kernel", DVFS_PERSEUS, DVFS_GRANULARITY_NAME, 0, TRUE},
  {"envpipe", DVFS_ENVPIPE, DVFS_GRANULARITY_NAME, 0, FALSE},
  {"zeus", DVFS_ZEUS, DVFS_GRANULARITY_NAME, 0, FALSE},
};

/* One policy on one layout: planned unfolded and on the generator's
 * folding; with `full`, also on sim_workload_fold's and through the
 * session. */
static void plan_layout(const PlanCase *pc, const Layout *l, gboolean full)
{
  Env env;
  env_init(&env, l->tp * l->pp * l->dp);
  GError *error = NULL;
  g_autoptr(Cluster) run = cluster_copy(env.c, &error);
  g_assert_no_error(error);
  run->switch_latency_ms = pc->latency_ms;
  g_autoptr(SimWorkload) u = generate(&env, l, FALSE);
  g_autoptr(SimWorkload) gf = generate(&env, l, TRUE);
  g_autoptr(SimWorkload) sf = generate(&env, l, FALSE);
  g_assert_true(sim_workload_fold(sf, &error));
  g_assert_no_error(error);
  const SimWorkload *folded[2] = {gf, sf};
  guint n_folded = full ? 2 : 1;

  DvfsPolicy pol;
  dvfs_policy_init(&pol, pc->kind);
  pol.slowdown = 0.05;
  pol.granularity = pc->granularity;
  pol.kernel_within = pc->kernel_within;
  Chooser ch[3] = {{g_string_new(NULL)}, {g_string_new(NULL)},
                   {g_string_new(NULL)}};
  pol.choose = choose_frugal;
  const DvfsPolicyClass *kl = dvfs_policy_class(pc->kind);
  g_assert_true(dvfs_policy_check(&pol, run, &error));
  g_assert_no_error(error);

  if (kl->run != NULL) {
    /* Pipeline policies: the run's own plan. */
    DvfsContext xu = {run, u, env.s->catalogue, NULL, 2, NULL, NULL, 0};
    g_autoptr(PerseusRun) ru = kl->run(&pol, &xu, &error);
    g_assert_no_error(error);
    g_assert_nonnull(ru->plan);
    for (guint k = 0; k < n_folded; k++) {
      DvfsContext xf = {run, folded[k], env.s->catalogue, NULL, 2, NULL, NULL,
                        0};
      g_autoptr(PerseusRun) rf = kl->run(&pol, &xf, &error);
      g_assert_no_error(error);
      /* The same DAG and plan... */
      g_assert_cmpint(rf->allmax_time_ns, ==, ru->allmax_time_ns);
      g_assert_cmpint(rf->plan_time_ns, ==, ru->plan_time_ns);
      g_assert_true(test_close(rf->plan_energy_j, ru->plan_energy_j, 1e-12));
      g_assert_cmpuint(rf->point, ==, ru->point);
      g_assert_cmpuint(rf->kernel_used, ==, ru->kernel_used);
      g_assert_cmpuint(rf->latency_fallback, ==, ru->latency_fallback);
      g_assert_cmpfloat(rf->limit_w, ==, ru->limit_w);
      assert_reps_only(folded[k], rf->plan);
      g_autoptr(SimPlan) x = sim_plan_unfold(rf->plan, folded[k]);
      guint extras = assert_same_plan(u, ru->plan, x);
      if (pc->latency_ms < 0)
        g_assert_cmpuint(extras, >, 0); /* early requests expanded too */
      /* ...and the same runs. */
      assert_same_results(ru->result, rf->result);
      g_autoptr(SimResult) rx = run_plan(&env, run, u, x);
      assert_same_results(ru->result, rx);
    }
  } else {
    pol.choose_data = &ch[0];
    DvfsContext xu = {run, u, env.s->catalogue, NULL, 2, NULL, NULL, 0};
    g_autoptr(DvfsPlanResult) pu = kl->plan(&pol, &xu, &error);
    g_assert_no_error(error);
    g_autoptr(Cluster) limited = cluster_copy(run, &error);
    g_assert_no_error(error);
    if (pu->power_limit_w >= 0)
      limited->power_limit_w = pu->power_limit_w;
    g_autoptr(SimResult) ru = run_plan(&env, limited, u, pu->plan);
    for (guint k = 0; k < n_folded; k++) {
      pol.choose_data = &ch[1 + k];
      DvfsContext xf = {run, folded[k], env.s->catalogue, NULL, 2, NULL, NULL,
                        0};
      g_autoptr(DvfsPlanResult) pf = kl->plan(&pol, &xf, &error);
      g_assert_no_error(error);
      /* The same classes, model and choice... */
      g_assert_cmpuint(pf->n_classes, ==, pu->n_classes);
      g_assert_cmpuint(pf->n_units, ==, pu->n_units);
      g_assert_cmpstr(pf->chosen, ==, pu->chosen);
      g_assert_cmpfloat(pf->power_limit_w, ==, pu->power_limit_w);
      g_assert_true(test_close(pf->base_time_s, pu->base_time_s, 1e-12));
      g_assert_true(test_close(pf->base_energy_j, pu->base_energy_j, 1e-9));
      g_assert_true(test_close(pf->time_s, pu->time_s, 1e-12));
      g_assert_true(test_close(pf->energy_j, pu->energy_j, 1e-9));
      g_assert_cmpuint(pf->switches, ==, pu->switches);
      if (pc->kind == DVFS_CUSTOM)
        g_assert_cmpstr(ch[1 + k].seen->str, ==, ch[0].seen->str);
      assert_reps_only(folded[k], pf->plan);
      g_autoptr(SimPlan) x = sim_plan_unfold(pf->plan, folded[k]);
      assert_same_plan(u, pu->plan, x);
      /* ...and the same runs. */
      g_autoptr(SimResult) rf = run_plan(&env, limited, folded[k], pf->plan);
      assert_same_results(ru, rf);
      g_autoptr(SimResult) rx = run_plan(&env, limited, u, x);
      assert_same_results(ru, rx);
    }
  }
  if (pc->kind == DVFS_CUSTOM)
    g_assert_cmpuint(ch[0].seen->len, >, 0);
  for (guint k = 0; k < 3; k++)
    g_string_free(ch[k].seen, TRUE);

  /* Through the session: js_simulate plans and runs the folded workload
   * as the unfolded one. */
  if (!full) {
    env_clear(&env);
    return;
  }
  JsRunOptions opt = {.iterations = 2, .seed = 3,
                      .switch_latency_ms = pc->latency_ms};
  pol.choose_data = &ch[0];
  ch[0].seen = g_string_new(NULL);
  g_autoptr(SimResult) su = js_simulate(env.s, env.c, u, &pol, &opt, &error);
  g_assert_no_error(error);
  g_autoptr(SimResult) sg = js_simulate(env.s, env.c, gf, &pol, &opt, &error);
  g_assert_no_error(error);
  g_string_free(ch[0].seen, TRUE);
  assert_same_results(su, sg);
  env_clear(&env);
}

/* Two layouts: every rank class a pipeline stage (t2p2d2), and four
 * stages, two of them alike but for their partners (t2p4d2). */
static const Layout plan_layouts[] = {
  {"125m-t2p2d2", "gpt3-125m", 2, 2, 2, 4, PIPELINE_1F1B, FALSE, TRUE, 2},
  {"125m-t2p4d2", "gpt3-125m", 2, 4, 2, 4, PIPELINE_1F1B, FALSE, TRUE, 4},
};

static void test_plan_classes(gconstpointer data)
{
  const PlanCase *pc = data;
  for (guint i = 0; i < G_N_ELEMENTS(plan_layouts); i++)
    plan_layout(pc, &plan_layouts[i], i == 0);
}

/* ---- hand-made workloads ---------------------------------------------------- */

#define IDLE_W 60.0

static void fake_cost(gpointer ctx, guint gpu, guint32 shape, SimClocks c,
                      guint iter, SimCost *out)
{
  out->time_scale = c.sm_mhz == 0 ? 1.0 : 1000.0 / c.sm_mhz;
  out->power_w = 250.0 + 10.0 * (shape % 3);
  out->sm_mhz = c.sm_mhz;
  out->mem_mhz = c.mem_mhz;
}
static gint64 fake_coll(gpointer ctx, guint32 g, double bytes, SimCollType t,
                        gint64 start)
{
  return 700 + (gint64)bytes;
}
static gint64 fake_p2p(gpointer ctx, guint s, guint d, double bytes,
                       gint64 start)
{
  return 300 + (gint64)bytes / 2;
}

typedef struct {
  SimMachine m;
  double idle[16], block[16], comm[16];
} Fake;

static void fake_init(Fake *f, guint n)
{
  memset(f, 0, sizeof *f);
  g_assert_cmpuint(n, <=, 16);
  for (guint i = 0; i < 16; i++) {
    f->idle[i] = IDLE_W;
    f->block[i] = 90.0;
    f->comm[i] = 130.0;
  }
  f->m.n_gpus = n;
  f->m.idle_power_w = f->idle;
  f->m.blocked_power_w = f->block;
  f->m.comm_power_w = f->comm;
  f->m.kernel_cost = fake_cost;
  f->m.collective_ns = fake_coll;
  f->m.p2p_ns = fake_p2p;
}

/* n ranks: each step computes (rank `odd` slower by odd_ns), runs a second
 * kernel on stream 1 after it, with `p2p` sends to the next rank and
 * receives from the previous one (a ring), every third step all-reduces on
 * the world group and, with `pairs`, every other step on its pair group
 * {2k, 2k+1}. */
static SimWorkload *ring(guint n, guint steps, guint odd, gint64 odd_ns,
                         gboolean p2p, gboolean pairs)
{
  SimWorkload *w = sim_workload_new(n);
  g_autoptr(SimRankBuilder) b = sim_rank_builder_new();
  guint32 k = tw_shape(w, SIM_CLASS_GEMM, 0, 0);
  guint32 k2 = tw_shape(w, SIM_CLASS_NORM, 0, 0);
  guint32 ar = tw_shape(w, SIM_CLASS_COMM, 5000, SIM_COLL_ALL_REDUCE);
  guint32 msg = tw_shape(w, SIM_CLASS_COMM, 800, SIM_COLL_SEND_RECV);
  guint32 *all = g_new(guint32, n);
  for (guint r = 0; r < n; r++)
    all[r] = r;
  guint32 world = sim_workload_add_group(w, all, n);
  g_free(all);
  guint32 pair_g[8];
  for (guint p = 0; pairs && p < n / 2; p++) {
    guint32 m[2] = {2 * p, 2 * p + 1};
    pair_g[p] = sim_workload_add_group(w, m, 2);
  }
  for (guint r = 0; r < n; r++) {
    guint32 last = SIM_NO_WAIT;
    for (guint s = 0; s < steps; s++) {
      gint64 t = 1000 + 100 * (s % 3) + (r == odd ? odd_ns : 0);
      guint32 rv = SIM_NO_WAIT;
      if (p2p && s > 0)
        rv = tw_add(b, w, SIM_OP_RECV, 3, 0, msg, (r + n - 1) % n, SIM_NO_WAIT);
      last = tw_add(b, w, SIM_OP_KERNEL, 0, t, k, 0, rv);
      tw_add(b, w, SIM_OP_KERNEL, 1, 400, k2, 0, last);
      if (p2p && s + 1 < steps)
        tw_add(b, w, SIM_OP_SEND, 2, 0, msg, (r + 1) % n, last);
      if (s % 3 == 2)
        tw_add(b, w, SIM_OP_COLLECTIVE, 4, 0, ar, world, last);
      if (pairs && s % 2 == 1)
        tw_add(b, w, SIM_OP_COLLECTIVE, 5, 0, ar, pair_g[r / 2], last);
    }
    sim_rank_builder_finish(b, w, r);
  }
  return w;
}

static SimResult *run_fake(const SimWorkload *w, guint iterations)
{
  GError *error = NULL;
  Fake f;
  fake_init(&f, w->n_ranks);
  g_autoptr(SimEngine) e = sim_engine_new(w, &f.m, &error);
  g_assert_no_error(error);
  g_autoptr(SimPlan) plan = sim_plan_new_uniform(w->n_ranks,
                                                 (SimClocks){0, 0});
  SimResult *r = sim_engine_run(e, plan, iterations, &error);
  g_assert_no_error(error);
  return r;
}

/* Identical ranks fold to one, ring peers included (a rank's sends to
 * its class go to one peer); results as unfolded. */
static void test_ring_identical(void)
{
  g_autoptr(SimWorkload) u = ring(6, 9, 0, 0, TRUE, TRUE);
  g_autoptr(SimWorkload) f = ring(6, 9, 0, 0, TRUE, TRUE);
  GError *error = NULL;
  g_assert_true(sim_workload_fold(f, &error));
  g_assert_no_error(error);
  for (guint r = 0; r < 6; r++) {
    g_assert_cmpuint(f->fold_rep[r], ==, 0);
    g_assert_cmpuint(f->ranks[r].n_ops, ==, r == 0 ? u->ranks[0].n_ops : 0);
  }
  g_autoptr(SimResult) ru = run_fake(u, 2);
  g_autoptr(SimResult) rf = run_fake(f, 2);
  assert_same_results(ru, rf);
  g_assert_cmpfloat(ru->blocked.energy_j, >, 0);
  /* A folded workload cannot be folded again. */
  g_assert_false(sim_workload_fold(f, &error));
  g_assert_error(error, SIM_ERROR, SIM_ERROR_INVALID);
  g_clear_error(&error);
}

/* One slow rank stays alone, and so does its pair partner, which waits for
 * it; the other six fold into rank 0. */
static void test_odd_rank(void)
{
  g_autoptr(SimWorkload) u = ring(8, 10, 3, 250, FALSE, TRUE);
  g_autoptr(SimWorkload) f = ring(8, 10, 3, 250, FALSE, TRUE);
  GError *error = NULL;
  g_assert_true(sim_workload_fold(f, &error));
  g_assert_no_error(error);
  static const guint32 expect[8] = {0, 0, 2, 3, 0, 0, 0, 0};
  g_assert_cmpmem(f->fold_rep, sizeof expect, expect, sizeof expect);
  g_autoptr(SimResult) ru = run_fake(u, 2);
  g_autoptr(SimResult) rf = run_fake(f, 2);
  assert_same_results(ru, rf);
  g_assert_cmpfloat(rf->per_gpu[2].blocked_j, >, rf->per_gpu[0].blocked_j);
}

/* On a directed ring every distance to the slow rank is a different
 * partner history: the refinement separates all eight ranks, though seven
 * have the same ops, and nothing folds. */
static void test_ring_odd_rank(void)
{
  g_autoptr(SimWorkload) f = ring(8, 10, 3, 250, TRUE, FALSE);
  GError *error = NULL;
  g_assert_true(sim_workload_fold(f, &error));
  g_assert_no_error(error);
  g_assert_null(f->fold_rep);
}

/* Content identical, partners not: ranks 0-3 run the same ops, but rank
 * 3's pair partner (rank 2 in group {2,3}) ... here ranks {0,1} pair with
 * each other and {2,3} too, while rank 3 computes longer: rank 2 then waits
 * for rank 3 in their all-reduce, so rank 2 may not fold into rank 0. */
static void test_partner_split(void)
{
  SimWorkload *w[2];
  for (int v = 0; v < 2; v++) {
    w[v] = sim_workload_new(4);
    g_autoptr(SimRankBuilder) b = sim_rank_builder_new();
    guint32 k = tw_shape(w[v], SIM_CLASS_GEMM, 0, 0);
    guint32 ar = tw_shape(w[v], SIM_CLASS_COMM, 100, SIM_COLL_ALL_REDUCE);
    guint32 m01[2] = {0, 1}, m23[2] = {2, 3};
    guint32 g01 = sim_workload_add_group(w[v], m01, 2);
    guint32 g23 = sim_workload_add_group(w[v], m23, 2);
    for (guint r = 0; r < 4; r++) {
      for (int s = 0; s < 4; s++) {
        tw_add(b, w[v], SIM_OP_KERNEL, 0, r == 3 ? 2000 : 1000, k, 0,
            SIM_NO_WAIT);
        tw_add(b, w[v], SIM_OP_COLLECTIVE, 0, 0, ar, r < 2 ? g01 : g23,
            SIM_NO_WAIT);
      }
      sim_rank_builder_finish(b, w[v], r);
    }
  }
  GError *error = NULL;
  g_assert_true(sim_workload_fold(w[1], &error));
  g_assert_no_error(error);
  g_assert_cmpuint(w[1]->fold_rep[0], ==, 0);
  g_assert_cmpuint(w[1]->fold_rep[1], ==, 0);
  g_assert_cmpuint(w[1]->fold_rep[2], ==, 2);
  g_assert_cmpuint(w[1]->fold_rep[3], ==, 3);
  g_autoptr(SimResult) ru = run_fake(w[0], 1);
  g_autoptr(SimResult) rf = run_fake(w[1], 1);
  assert_same_results(ru, rf);
  /* Rank 2 is blocked for rank 3 every step; ranks 0 and 1 never are. */
  g_assert_cmpfloat(rf->per_gpu[2].blocked_ns, ==, 4 * 1000.0);
  g_assert_cmpfloat(rf->per_gpu[0].blocked_ns, ==, 0);
  sim_workload_free(w[0]);
  sim_workload_free(w[1]);
}

/* No two ranks alike: nothing folds and the workload is untouched. */
static void test_nothing_to_fold(void)
{
  g_autoptr(SimWorkload) w = sim_workload_new(3);
  g_autoptr(SimRankBuilder) b = sim_rank_builder_new();
  guint32 k = tw_shape(w, SIM_CLASS_GEMM, 0, 0);
  for (guint r = 0; r < 3; r++) {
    tw_add(b, w, SIM_OP_KERNEL, 0, 100 * (r + 1), k, 0, SIM_NO_WAIT);
    sim_rank_builder_finish(b, w, r);
  }
  GError *error = NULL;
  g_assert_true(sim_workload_fold(w, &error));
  g_assert_null(w->fold_rep);
  for (guint r = 0; r < 3; r++)
    g_assert_cmpuint(w->ranks[r].n_ops, ==, 1);
}

/* A rank that issues one group's collectives from two streams is never
 * folded (the engine matches them in arrival order). */
static void test_multistream_group_not_folded(void)
{
  g_autoptr(SimWorkload) w = sim_workload_new(2);
  g_autoptr(SimRankBuilder) b = sim_rank_builder_new();
  guint32 k = tw_shape(w, SIM_CLASS_GEMM, 0, 0);
  guint32 ar = tw_shape(w, SIM_CLASS_COMM, 10, SIM_COLL_ALL_REDUCE);
  guint32 m[2] = {0, 1};
  guint32 g = sim_workload_add_group(w, m, 2);
  for (guint r = 0; r < 2; r++) {
    guint32 a = tw_add(b, w, SIM_OP_KERNEL, 0, 500, k, 0, SIM_NO_WAIT);
    tw_add(b, w, SIM_OP_COLLECTIVE, 1, 0, ar, g, a);
    tw_add(b, w, SIM_OP_COLLECTIVE, 2, 0, ar, g, a);
    sim_rank_builder_finish(b, w, r);
  }
  GError *error = NULL;
  g_assert_true(sim_workload_fold(w, &error));
  g_assert_null(w->fold_rep);
}

/* ---- refusals --------------------------------------------------------------- */

typedef enum {
  BAD_NOT_SELF,     /* a representative that folds elsewhere */
  BAD_RANGE,        /* fold_rep out of range */
  BAD_OPS,          /* a folded-away rank with ops */
  BAD_GROUP,        /* a member folds to a rank outside the group */
  BAD_P2P,          /* sends and receives do not pair up between classes */
  BAD_POWER,        /* a member's idle power differs from its rep's */
} BadFold;

static const struct {
  const char *name;
  BadFold kind;
  const char *needle;
} bad_folds[] = {
  {"not-self", BAD_NOT_SELF, "not a representative"},
  {"range", BAD_RANGE, "out of range"},
  {"ops", BAD_OPS, "carries"},
  {"group", BAD_GROUP, "not a member"},
  {"p2p", BAD_P2P, "do not match the receives"},
  {"power", BAD_POWER, "idle powers differ"},
};

static void test_invalid_fold(gconstpointer data)
{
  BadFold kind = bad_folds[GPOINTER_TO_UINT(data)].kind;
  const char *needle = bad_folds[GPOINTER_TO_UINT(data)].needle;
  /* Four ranks: 0 and 1 all-reduce on {0,1}, 2 and 3 on {2,3}; 0 sends to
   * 2 and 1 to 3.  Valid folding: 1 -> 0, 3 -> 2. */
  g_autoptr(SimWorkload) w = sim_workload_new(4);
  g_autoptr(SimRankBuilder) b = sim_rank_builder_new();
  guint32 k = tw_shape(w, SIM_CLASS_GEMM, 0, 0);
  guint32 ar = tw_shape(w, SIM_CLASS_COMM, 100, SIM_COLL_ALL_REDUCE);
  guint32 msg = tw_shape(w, SIM_CLASS_COMM, 100, SIM_COLL_SEND_RECV);
  guint32 m01[2] = {0, 1}, m23[2] = {2, 3}, m02[2] = {0, 2};
  guint32 g01 = sim_workload_add_group(w, m01, 2);
  guint32 g23 = sim_workload_add_group(w, m23, 2);
  sim_workload_add_group(w, m02, 2);
  for (guint r = 0; r < 4; r++) {
    if (r == 0 || r == 2 || kind == BAD_OPS) {
      guint32 a = tw_add(b, w, SIM_OP_KERNEL, 0, 1000, k, 0, SIM_NO_WAIT);
      tw_add(b, w, SIM_OP_COLLECTIVE, 0, 0, ar, r < 2 ? g01 : g23, SIM_NO_WAIT);
      if (r < 2)
        tw_add(b, w, SIM_OP_SEND, 1, 0, msg, r + 2, a);
      else
        tw_add(b, w, SIM_OP_RECV, 1, 0, msg, r - 2, SIM_NO_WAIT);
    }
    sim_rank_builder_finish(b, w, r);
  }
  w->fold_rep = g_new(guint32, 4);
  guint32 map[4] = {0, 0, 2, 2};
  memcpy(w->fold_rep, map, sizeof map);
  Fake f;
  fake_init(&f, 4);
  GError *error = NULL;
  if (kind != BAD_OPS) {
    /* The valid folding runs. */
    g_autoptr(SimEngine) ok = sim_engine_new(w, &f.m, &error);
    g_assert_no_error(error);
  }
  switch (kind) {
  case BAD_NOT_SELF:
    w->fold_rep[1] = 3; /* 3 folds to 2 */
    break;
  case BAD_RANGE:
    w->fold_rep[3] = 9;
    break;
  case BAD_OPS:
    break;
  case BAD_GROUP:
    /* Rank 1 folds to rank 3, a representative outside group {0,1}, on
     * which rank 0 all-reduces. */
    w->fold_rep[1] = 3;
    w->fold_rep[3] = 3;
    break;
  case BAD_P2P:
    /* Rank 0 sends to rank 1 (its own class) instead of rank 2, which
     * still expects a message from rank 0's class. */
    g_assert_cmpuint(w->ranks[0].ops[2].kind, ==, SIM_OP_SEND);
    sim_workload_rank_ops_mut(w, 0)[2].peer = 1;
    break;
  case BAD_POWER:
    f.idle[3] = IDLE_W + 1;
    break;
  }
  SimEngine *e = sim_engine_new(w, &f.m, &error);
  g_assert_null(e);
  g_assert_error(error, SIM_ERROR, SIM_ERROR_INVALID);
  if (strstr(error->message, needle) == NULL)
    g_error("message '%s' lacks '%s'", error->message, needle);
  g_clear_error(&error);
}

/* sim_plan_unfold on a hand-made plan with per-op indices, early requests
 * and clocks before the run: every rank gets its representative's, the
 * folded-away ranks' own entries are ignored, and the expanded plan runs on
 * the unfolded workload as the plan does on the folded one. */
static SimPlan *ring_plan(const SimWorkload *w, guint r)
{
  SimPlan *p = sim_plan_new_uniform(w->n_ranks, (SimClocks){0, 0});
  guint16 slow = sim_plan_add_pair(p, (SimClocks){800, 0});
  guint16 mid = sim_plan_add_pair(p, (SimClocks){900, 0});
  const SimRank *rk = &w->ranks[r];
  guint16 *idx = sim_plan_rank_index(p, r, rk->n_ops);
  guint32 first = G_MAXUINT32, n_k = 0;
  for (guint32 i = 0; i < rk->n_ops; i++)
    if (rk->ops[i].kind == SIM_OP_KERNEL) {
      idx[i] = (n_k++ / 2) % 2 ? slow : 0;
      first = MIN(first, i);
    }
  SimAhead *a = sim_plan_rank_ahead(p, r, 1);
  *a = (SimAhead){first, mid, FALSE, 300};
  SimInit *in = sim_plan_rank_init(p, r);
  in[0] = (SimInit){TRUE, slow, 0, 500};
  return p;
}

static SimResult *run_fake_plan(const SimWorkload *w, const SimPlan *p)
{
  GError *error = NULL;
  Fake f;
  fake_init(&f, w->n_ranks);
  f.m.switch_latency_ns = 700;
  g_autoptr(SimEngine) e = sim_engine_new(w, &f.m, &error);
  g_assert_no_error(error);
  SimResult *r = sim_engine_run(e, (SimPlan *)p, 2, &error);
  g_assert_no_error(error);
  return r;
}

static void test_plan_unfold(void)
{
  g_autoptr(SimWorkload) u = ring(4, 9, G_MAXUINT, 0, TRUE, TRUE);
  g_autoptr(SimWorkload) f = ring(4, 9, G_MAXUINT, 0, TRUE, TRUE);
  GError *error = NULL;
  g_assert_true(sim_workload_fold(f, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(f->fold_rep[3], ==, 0);
  g_autoptr(SimPlan) p = ring_plan(f, 0);
  /* Entries of a folded-away rank are not read by the engine and not
   * copied by the expansion. */
  sim_plan_rank_index(p, 2, 1)[0] = 1;
  g_autoptr(SimPlan) x = sim_plan_unfold(p, f);
  g_autoptr(SimPlan) ref = ring_plan(u, 0);
  for (guint r = 1; r < 4; r++) {
    /* The unfolded reference: every rank planned as rank 0. */
    g_free(ref->index[r]);
    ref->index[r] = g_memdup2(ref->index[0], sizeof(guint16) *
                                                 u->ranks[0].n_ops);
    *sim_plan_rank_ahead(ref, r, 1) = ref->ahead[0][0];
    sim_plan_rank_init(ref, r)[0] = ref->init[0][0];
  }
  g_assert_cmpuint(assert_same_plan(u, ref, x), ==, 8);
  g_autoptr(SimResult) rf = run_fake_plan(f, p);
  g_autoptr(SimResult) rx = run_fake_plan(u, x);
  g_autoptr(SimResult) rr = run_fake_plan(u, ref);
  g_assert_cmpuint(rr->switches, >, 0);
  assert_same_results(rr, rf);
  assert_same_results(rr, rx);
  /* Unfolded, the expansion is a copy. */
  g_autoptr(SimPlan) c = sim_plan_unfold(ref, u);
  g_assert_cmpuint(assert_same_plan(u, ref, c), ==, 8);
  g_autoptr(SimResult) rc = run_fake_plan(u, c);
  assert_same_results(rr, rc);
}

/* Four ranks in two classes of two: the even ranks run program A, the odd
 * ones program B (shorter GEMMs); each step a rank computes (a GEMM that
 * waits for its partner's message, then a memory-bound kernel), sends to
 * its partner r ^ 2 and every other step all-reduces on the world group.
 * Kernel times are the GPU model's at auto clocks. */
static SimWorkload *partners(const GpuSpec *g, guint steps)
{
  SimWorkload *w = sim_workload_new(4);
  g_autoptr(SimRankBuilder) b = sim_rank_builder_new();
  SimShape gemm = {4e12, 2e9, sim_workload_intern(w, "gemm"),
                   SIM_CLASS_GEMM, 0, SIM_MATH_TENSOR, 0};
  SimShape norm = {0, 6e9, sim_workload_intern(w, "norm"), SIM_CLASS_NORM,
                   0, SIM_MATH_VECTOR, 0};
  guint32 kg = sim_workload_add_shape(w, &gemm);
  guint32 kn = sim_workload_add_shape(w, &norm);
  guint32 ar = tw_shape(w, SIM_CLASS_COMM, 5e7, SIM_COLL_ALL_REDUCE);
  guint32 msg = tw_shape(w, SIM_CLASS_COMM, 2e7, SIM_COLL_SEND_RECV);
  guint32 all[4] = {0, 1, 2, 3};
  guint32 world = sim_workload_add_group(w, all, 4);
  GpuKernel gk = {SIM_CLASS_GEMM, gemm.flops, gemm.bytes, TRUE};
  GpuKernel nk = {SIM_CLASS_NORM, norm.flops, norm.bytes, FALSE};
  GpuCost cg, cn;
  gpu_kernel_cost(g, &gk, 0, 0, GPU_POWER_UNCAPPED, &cg);
  gpu_kernel_cost(g, &nk, 0, 0, GPU_POWER_UNCAPPED, &cn);
  for (guint r = 0; r < 4; r++) {
    for (guint s = 0; s < steps; s++) {
      gint64 tg = (gint64)llround(cg.time_s * 1e9 * (r % 2 ? 0.5 : 1.0) *
                                  (1 + s % 3));
      guint32 rv = SIM_NO_WAIT;
      if (s > 0)
        rv = tw_add(b, w, SIM_OP_RECV, 3, 0, msg, r ^ 2, SIM_NO_WAIT);
      guint32 k = tw_add(b, w, SIM_OP_KERNEL, 0, tg, kg, 0, rv);
      guint32 k2 = tw_add(b, w, SIM_OP_KERNEL, 0,
                          (gint64)llround(cn.time_s * 1e9), kn, 0,
                          SIM_NO_WAIT);
      if (s + 1 < steps)
        tw_add(b, w, SIM_OP_SEND, 2, 0, msg, r ^ 2, k);
      if (s % 2 == 1)
        tw_add(b, w, SIM_OP_COLLECTIVE, 4, 0, ar, world, k2);
    }
    sim_rank_builder_finish(b, w, r);
  }
  /* Kernel names: the shapes'. */
  for (guint r = 0; r < 4; r++)
    for (guint32 i = 0; i < w->ranks[r].n_ops; i++) {
      SimOp *op = &sim_workload_rank_ops_mut(w, r)[i];
      if (op->kind == SIM_OP_KERNEL)
        op->name = g_array_index(w->shapes, SimShape, op->shape).name;
    }
  return w;
}

/* A hand-made folding whose representatives are not their classes' lowest
 * ranks and send to folded-away ranks (2 -> 0, 1 -> 3): the planner, on the
 * representatives, makes the plan it makes unfolded. */
static void test_plan_hand_folded(void)
{
  Env env;
  GError *error = NULL;
  env.s = js_session_new(1);
  env.gpu = gpu_catalogue_lookup(env.s->catalogue, REF_GPU, &error);
  g_assert_no_error(error);
  g_autoptr(NetSpec) net = net_preset("dgx-a100", &error);
  g_assert_no_error(error);
  env.c = cluster_new(env.gpu, net, 4, 4, &error);
  g_assert_no_error(error);
  env.c->switch_latency_ms = 0;
  g_autoptr(SimWorkload) u = partners(env.gpu, 8);
  g_autoptr(SimWorkload) f = partners(env.gpu, 8);
  g_assert_true(sim_workload_validate(u, &error));
  g_assert_no_error(error);
  static const guint32 rep[4] = {2, 1, 2, 1};
  f->fold_rep = g_memdup2(rep, sizeof rep);
  for (guint r = 0; r < 4; r++)
    if (rep[r] != r) {
      sim_workload_set_rank(f, r, NULL, 0, NULL, 0); /* folded away */
    }
  /* The plan model: the same classes, in the same order (by lowest rank),
   * the same slots and graph. */
  {
    g_autoptr(ClusterMachine) cu = cluster_machine_new(env.c, u, NULL,
                                                       0, &error);
    g_assert_no_error(error);
    g_autoptr(ClusterMachine) cf = cluster_machine_new(env.c, f, NULL,
                                                       0, &error);
    g_assert_no_error(error);
    g_autoptr(DvfsModel) mu = dvfs_model_new(u, cu, TRUE, &error);
    g_assert_no_error(error);
    g_autoptr(DvfsModel) mf = dvfs_model_new(f, cf, TRUE, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(mf->n_classes, ==, 2);
    g_assert_cmpmem(mf->rank_class, 4 * sizeof(guint32), mu->rank_class,
                    4 * sizeof(guint32));
    g_assert_cmpmem(mf->class_mult, 2 * sizeof(guint32), mu->class_mult,
                    2 * sizeof(guint32));
    g_assert_cmpuint(mf->class_rep[0], ==, 2); /* class of rank 0 */
    g_assert_cmpuint(mf->n_slots, ==, mu->n_slots);
    g_assert_cmpuint(mf->n_nodes, ==, mu->n_nodes);
    g_assert_cmpmem(mf->node_off, (mf->n_nodes + 1) * sizeof(guint32),
                    mu->node_off, (mu->n_nodes + 1) * sizeof(guint32));
    g_assert_cmpmem(mf->base_end, mf->n_slots * sizeof(gint64), mu->base_end,
                    mu->n_slots * sizeof(gint64));
    g_assert_cmpuint(mf->engine_ops * 2, ==, mu->engine_ops);
  }
  static const DvfsKind kinds[] = {DVFS_KERNEL, DVFS_PASS, DVFS_ITERATION};
  for (guint i = 0; i < G_N_ELEMENTS(kinds); i++) {
    DvfsPolicy pol;
    dvfs_policy_init(&pol, kinds[i]);
    pol.slowdown = 0.05;
    pol.granularity = DVFS_GRANULARITY_OP;
    g_autoptr(DvfsPlanResult) pu = dvfs_planner_run(&pol, env.c, u,
                                                    env.s->catalogue, 0,
                                                    &error);
    g_assert_no_error(error);
    g_autoptr(DvfsPlanResult) pf = dvfs_planner_run(&pol, env.c, f,
                                                    env.s->catalogue, 0,
                                                    &error);
    g_assert_no_error(error);
    g_assert_cmpuint(pu->n_classes, ==, 2);
    g_assert_cmpuint(pf->n_classes, ==, 2);
    g_assert_true(test_close(pf->energy_j, pu->energy_j, 1e-9));
    g_assert_true(test_close(pf->time_s, pu->time_s, 1e-12));
    g_assert_true(pf->energy_j < pf->base_energy_j); /* it saved some */
    assert_reps_only(f, pf->plan);
    g_autoptr(SimPlan) x = sim_plan_unfold(pf->plan, f);
    assert_same_plan(u, pu->plan, x);
    g_autoptr(SimResult) ru = run_plan(&env, env.c, u, pu->plan);
    g_autoptr(SimResult) rf = run_plan(&env, env.c, f, pf->plan);
    g_autoptr(SimResult) rx = run_plan(&env, env.c, u, x);
    assert_same_results(ru, rf);
    assert_same_results(ru, rx);
  }
  env_clear(&env);
}

/* The session refuses what would price members unlike their
 * representative, naming the cause, whatever the policy (planned and
 * pipeline policies plan folded workloads per class: /fold/plan/...); so do
 * the planner and perseus_run called directly. */
static void test_session_refusals(void)
{
  static const Layout l = {"t2p2d2", "gpt3-350m", 2, 2, 2, 3,
                           PIPELINE_1F1B, FALSE, TRUE, 2};
  Env env;
  env_init(&env, 8);
  g_autoptr(SimWorkload) w = generate(&env, &l, TRUE);
  GError *error = NULL;
  g_autoptr(StragglerSet) ss = straggler_set_new(8, 2, 2, 1, &error);
  g_assert_no_error(error);
  StragglerSpec spec = {0};
  spec.gpu = 5;
  spec.pipeline = -1;
  spec.slowdown = 1.2;
  spec.from_iteration = 0;
  spec.to_iteration = 0;
  g_assert_true(straggler_set_add(ss, &spec, &error));
  static const DvfsKind kinds[] = {DVFS_MAX, DVFS_KERNEL, DVFS_PASS,
                                   DVFS_PERSEUS};
  for (guint i = 0; i < G_N_ELEMENTS(kinds); i++) {
    DvfsPolicy pol;
    dvfs_policy_init(&pol, kinds[i]);
    pol.slowdown = 0.05;
    JsRunOptions opt = {.iterations = 1, .seed = 1, .switch_latency_ms = -1};

    env.c->perf_spread = 0.03;
    SimResult *r = js_simulate(env.s, env.c, w, &pol, &opt, &error);
    g_assert_null(r);
    g_assert_error(error, SIM_ERROR, SIM_ERROR_INVALID);
    g_assert_nonnull(strstr(error->message, "variability"));
    g_assert_nonnull(strstr(error->message, "fold = false"));
    g_clear_error(&error);
    env.c->perf_spread = 0;

    opt.stragglers = ss;
    r = js_simulate(env.s, env.c, w, &pol, &opt, &error);
    g_assert_null(r);
    g_assert_error(error, SIM_ERROR, SIM_ERROR_INVALID);
    g_assert_nonnull(strstr(error->message, "stragglers"));
    g_clear_error(&error);
    opt.stragglers = NULL;

    opt.observer = (SimObserver)(void (*)(void))g_free; /* never called */
    r = js_simulate(env.s, env.c, w, &pol, &opt, &error);
    g_assert_null(r);
    g_assert_error(error, SIM_ERROR, SIM_ERROR_INVALID);
    g_assert_nonnull(strstr(error->message, "timeline"));
    g_clear_error(&error);
    opt.observer = NULL;

    /* And the plain run works. */
    r = js_simulate(env.s, env.c, w, &pol, &opt, &error);
    g_assert_no_error(error);
    sim_result_free(r);
  }

  /* Called directly, the planner refuses variability and perseus_run
   * variability and stragglers. */
  DvfsPolicy pol;
  dvfs_policy_init(&pol, DVFS_KERNEL);
  pol.slowdown = 0.05;
  env.c->power_spread = 0.02;
  DvfsPlanResult *pr = dvfs_planner_run(&pol, env.c, w, env.s->catalogue,
                                        0, &error);
  g_assert_null(pr);
  g_assert_error(error, SIM_ERROR, SIM_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "variability"));
  g_clear_error(&error);
  DvfsPolicy pp;
  dvfs_policy_init(&pp, DVFS_PERSEUS);
  DvfsContext x = {env.c, w, env.s->catalogue, NULL, 1, NULL, NULL, 0};
  PerseusRun *run = perseus_run(&pp, &x, &error);
  g_assert_null(run);
  g_assert_error(error, SIM_ERROR, SIM_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "variability"));
  g_clear_error(&error);
  env.c->power_spread = 0;
  pp.straggler_aware = TRUE;
  x.stragglers = ss;
  run = perseus_run(&pp, &x, &error);
  g_assert_null(run);
  g_assert_error(error, SIM_ERROR, SIM_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "stragglers"));
  g_clear_error(&error);
  env_clear(&env);
}

/* A cluster whose last node is partly filled is refused for a folded
 * workload (its groups are not priced like their representatives'). */
static void test_partial_node_refused(void)
{
  static const Layout l = {"t2p2d3", "gpt3-125m", 2, 2, 3, 2,
                           PIPELINE_1F1B, FALSE, TRUE, 2};
  Env env;
  env_init(&env, 12);
  g_autoptr(SimWorkload) w = generate(&env, &l, TRUE);
  GError *error = NULL;
  static const DvfsKind kinds[] = {DVFS_MAX, DVFS_KERNEL, DVFS_PERSEUS};
  for (guint i = 0; i < G_N_ELEMENTS(kinds); i++) {
    DvfsPolicy pol;
    dvfs_policy_init(&pol, kinds[i]);
    JsRunOptions opt = {.iterations = 1, .seed = 1, .switch_latency_ms = -1};
    SimResult *r = js_simulate(env.s, env.c, w, &pol, &opt, &error);
    g_assert_null(r);
    g_assert_error(error, SIM_ERROR, SIM_ERROR_INVALID);
    g_assert_nonnull(strstr(error->message, "partly filled"));
    g_clear_error(&error);
  }
  env_clear(&env);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS(layouts); i++) {
    char *path = g_strdup_printf("/fold/generated/%s", layouts[i].label);
    g_test_add_data_func(path, &layouts[i], test_generated);
    g_free(path);
  }
  g_test_add_func("/fold/ring/identical", test_ring_identical);
  g_test_add_func("/fold/odd-rank", test_odd_rank);
  g_test_add_func("/fold/ring/odd-rank", test_ring_odd_rank);
  g_test_add_func("/fold/partner-split", test_partner_split);
  g_test_add_func("/fold/nothing-to-fold", test_nothing_to_fold);
  g_test_add_func("/fold/multistream-group", test_multistream_group_not_folded);
  for (guint i = 0; i < G_N_ELEMENTS(bad_folds); i++) {
    char *path = g_strdup_printf("/fold/invalid/%s", bad_folds[i].name);
    g_test_add_data_func(path, GUINT_TO_POINTER(i), test_invalid_fold);
    g_free(path);
  }
  g_test_add_func("/fold/session-refusals", test_session_refusals);
  g_test_add_func("/fold/partial-node", test_partial_node_refused);
  g_test_add_func("/fold/plan/unfold", test_plan_unfold);
  g_test_add_func("/fold/plan/hand-folded", test_plan_hand_folded);
  for (guint i = 0; i < G_N_ELEMENTS(plan_cases); i++) {
    char *path = g_strdup_printf("/fold/plan/%s", plan_cases[i].label);
    g_test_add_data_func(path, &plan_cases[i], test_plan_classes);
    g_free(path);
  }
  return g_test_run();
}
