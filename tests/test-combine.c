/* tests/test-combine.c -- the combined policy (Perseus frontier point with
 * kernel-level clocks inside each computation, perseus_kernel_plan and
 * js.policy.perseus{ kernel = true }) on kernel-level GPT-3 workloads:
 * never slower (0.1%) nor costlier than the Perseus point on the engine,
 * compared with the kernel-level policy alone, deterministic, and its
 * arguments checked. */
#include <math.h>
#include <string.h>

#include "models/cluster.h"
#include "models/dvfs/perseus.h"
#include "models/dvfs/planner.h"
#include "tests/testlua.h"
#include "tests/testutil.h"
#include "traces/gpt.h"

typedef struct {
  GpuCatalogue *cat;
  Cluster *c;
  SimWorkload *w;
} Setup;

static void setup_free(Setup *s)
{
  sim_workload_free(s->w);
  cluster_free(s->c);
  gpu_catalogue_free(s->cat);
}

static void setup_gpt(Setup *s, const char *model, guint tp, guint pp,
                      guint dp, guint M, guint seq, double latency_ms)
{
  GError *err = NULL;
  memset(s, 0, sizeof *s);
  s->cat = gpu_catalogue_new();
  const GpuSpec *g = gpu_catalogue_lookup(s->cat, "A100-SXM4-80GB", &err);
  g_assert_no_error(err);
  GptConfig cfg;
  gpt_config_init(&cfg);
  g_assert_true(gpt_config_set_model(&cfg, model, &err));
  cfg.tp = tp;
  cfg.pp = pp;
  cfg.dp = dp;
  cfg.microbatches = M;
  cfg.seq_len = seq;
  s->w = gpt_generate(&cfg, g, &err);
  g_assert_no_error(err);
  g_autoptr(NetSpec) net = net_preset("dgx-a100", &err);
  g_assert_no_error(err);
  s->c = cluster_new(g, net, s->w->n_ranks, 8, &err);
  g_assert_no_error(err);
  s->c->switch_latency_ms = latency_ms;
}

static PerseusRun *run_perseus(Setup *s, gboolean kernel)
{
  GError *err = NULL;
  DvfsPolicy pol;
  dvfs_policy_init(&pol, DVFS_PERSEUS);
  pol.kernel_within = kernel;
  DvfsContext x = {s->c, s->w, s->cat, NULL, 1, NULL, NULL, 0};
  PerseusRun *r = perseus_run(&pol, &x, &err);
  g_assert_no_error(err);
  g_assert_nonnull(r);
  return r;
}

/* js.policy.kernel{ slowdown = 0 } alone, simulated for one iteration. */
static SimResult *run_kernel_policy(Setup *s)
{
  GError *err = NULL;
  DvfsPolicy p;
  dvfs_policy_init(&p, DVFS_KERNEL);
  p.slowdown = 0;
  g_autoptr(DvfsPlanResult) res = dvfs_planner_run(&p, s->c, s->w, s->cat,
                                                   0, &err);
  g_assert_no_error(err);
  g_autoptr(ClusterMachine) m = cluster_machine_new(s->c, s->w, s->cat, 0,
                                                    &err);
  g_assert_no_error(err);
  g_autoptr(SimEngine) e = sim_engine_new(s->w, cluster_machine_sim(m), &err);
  g_assert_no_error(err);
  SimResult *r = sim_engine_run(e, res->plan, 1, &err);
  g_assert_no_error(err);
  return r;
}

static SimResult *run_max(Setup *s)
{
  GError *err = NULL;
  g_autoptr(ClusterMachine) m = cluster_machine_new(s->c, s->w, s->cat, 0,
                                                    &err);
  g_assert_no_error(err);
  g_autoptr(SimEngine) e = sim_engine_new(s->w, cluster_machine_sim(m), &err);
  g_assert_no_error(err);
  SimClocks autoc = {0, 0};
  g_autoptr(SimPlan) plan = sim_plan_new_uniform(s->w->n_ranks, autoc);
  SimResult *r = sim_engine_run(e, plan, 1, &err);
  g_assert_no_error(err);
  return r;
}

typedef struct {
  const char *model;
  guint tp, pp, dp, M, seq;
  double latency_ms;
} Case;

static const Case cases[] = {
  {"gpt3-125m", 2, 4, 2, 4, 512, 0.0},
  {"gpt3-350m", 1, 2, 1, 4, 512, 0.0},
  {"gpt3-350m", 2, 3, 1, 3, 512, 0.0},
  /* With a switching latency the engine's check decides. */
  {"gpt3-125m", 1, 2, 2, 4, 512, 1.0},
};

/* The combined policy against Perseus alone and the kernel policy alone. */
static void test_combined(gconstpointer data)
{
  const Case *k = data;
  Setup s;
  setup_gpt(&s, k->model, k->tp, k->pp, k->dp, k->M, k->seq, k->latency_ms);
  g_autoptr(PerseusRun) rp = run_perseus(&s, FALSE);
  g_autoptr(PerseusRun) rc = run_perseus(&s, TRUE);
  g_autoptr(SimResult) rk = run_kernel_policy(&s);
  g_autoptr(SimResult) rm = run_max(&s);
  /* The frontier point's plan, simulated inside the combined run, is
   * exactly the Perseus run. */
  g_assert_cmpint(rc->single_time_ns, ==, rp->result->time_ns);
  g_assert_cmpfloat(rc->single_energy_j, ==, rp->result->energy_j);
  g_assert_cmpuint(rc->point, ==, rp->point);
  /* Never slower than the Perseus point (0.1%), never costlier. */
  g_assert_cmpfloat((double)rc->result->time_ns, <=,
                    (double)rp->result->time_ns * 1.001);
  g_assert_cmpfloat(rc->result->energy_j, <=, rp->result->energy_j);
  if (rc->kernel_used)
    g_assert_cmpfloat(rc->result->energy_j, <, rp->result->energy_j);
  else
    g_assert_cmpfloat(rc->result->energy_j, ==, rp->result->energy_j);
  if (k->latency_ms == 0) {
    /* Without switching cost the kernel-level clocks must pay off: some
     * computation is refined and the engine confirms it. */
    g_assert_cmpuint(rc->kernel_refined, >, 0);
    g_assert_true(rc->kernel_used);
    /* At least the kernel policy's saving (slowdown 0) on the same
     * workload. */
    g_assert_cmpfloat(rc->result->energy_j, <=, rk->energy_j);
  }
  if (g_test_verbose())
    g_printerr("%s tp%u pp%u dp%u m%u: max %.1f J %.4f s; perseus -%.2f%% "
               "%.4f s; kernel -%.2f%% %.4f s; combined -%.2f%% %.4f s "
               "(%u computations refined, %s)\n",
               k->model, k->tp, k->pp, k->dp, k->M, rm->energy_j,
               rm->time_ns * 1e-9,
               100 * (1 - rp->result->energy_j / rm->energy_j),
               rp->result->time_ns * 1e-9,
               100 * (1 - rk->energy_j / rm->energy_j), rk->time_ns * 1e-9,
               100 * (1 - rc->result->energy_j / rm->energy_j),
               rc->result->time_ns * 1e-9, rc->kernel_refined,
               rc->kernel_used ? "used" : "kept the point");
  setup_free(&s);
}

/* Same inputs, same bits. */
static void test_deterministic(void)
{
  Setup s;
  setup_gpt(&s, "gpt3-125m", 2, 2, 1, 4, 512, 0.0);
  g_autoptr(PerseusRun) a = run_perseus(&s, TRUE);
  g_autoptr(PerseusRun) b = run_perseus(&s, TRUE);
  g_assert_cmpint(a->result->time_ns, ==, b->result->time_ns);
  g_assert_cmpmem(&a->result->energy_j, sizeof(double), &b->result->energy_j,
                  sizeof(double));
  g_assert_cmpuint(a->kernel_refined, ==, b->kernel_refined);
  setup_free(&s);
}

static void check_plans(Setup *s_);

/* The combined plan, priced by the DAG model, keeps every computation
 * within its frontier time and does not change ops outside computations. */
static void test_plan_structure(void)
{
  Setup s;
  setup_gpt(&s, "gpt3-125m", 1, 2, 1, 3, 512, 0.0);
  check_plans(&s);
  setup_free(&s);
}

static void check_plans(Setup *s_)
{
  GError *err = NULL;
  Setup s = *s_;
  g_autoptr(ClusterMachine) m = cluster_machine_new(s.c, s.w, s.cat, 0, &err);
  g_assert_no_error(err);
  const SimMachine *sim = cluster_machine_sim(m);
  g_autoptr(PerseusModel) pm = perseus_model_new(s.w, sim, s.c->gpu, NULL,
                                                 &err);
  g_assert_no_error(err);
  const PerseusDag *d = perseus_model_dag(pm);
  g_autoptr(PerseusFrontier) f = perseus_frontier(d, &err);
  g_assert_no_error(err);
  /* Every frontier point: the kernel plan is no slower on the engine (with
   * no switching cost, computations only shorten). */
  g_autoptr(SimEngine) e = sim_engine_new(s.w, sim, &err);
  g_assert_no_error(err);
  for (guint j = 0; j < f->n_points; j += MAX(1u, f->n_points / 3)) {
    guint n = 0;
    g_autoptr(SimPlan) kp = perseus_kernel_plan(pm, s.w, sim,
                                                f->points[j].choice, &n);
    g_autoptr(SimPlan) sp = perseus_model_plan_uniform(pm,
                                                       f->points[j].choice);
    g_autoptr(SimResult) rk = sim_engine_run(e, kp, 1, &err);
    g_assert_no_error(err);
    g_autoptr(SimResult) rs = sim_engine_run(e, sp, 1, &err);
    g_assert_no_error(err);
    g_assert_cmpfloat((double)rk->time_ns, <=, (double)rs->time_ns * 1.001);
    if (n > 0)
      g_assert_cmpfloat(rk->energy_j, <, rs->energy_j);
    else
      g_assert_cmpfloat(rk->energy_j, ==, rs->energy_j);
  }
}

static void test_errors(void)
{
  Setup s;
  setup_gpt(&s, "gpt3-125m", 1, 2, 1, 2, 512, 0.0);
  DvfsPolicy pol;
  GError *err = NULL;
  DvfsContext x = {s.c, s.w, s.cat, NULL, 1, NULL, NULL, 0};
  dvfs_policy_init(&pol, DVFS_PERSEUS);
  pol.kernel_within = TRUE;
  pol.straggler_aware = TRUE;
  PerseusRun *r = perseus_run(&pol, &x, &err);
  g_assert_null(r);
  g_assert_error(err, PERSEUS_ERROR, PERSEUS_ERROR_INVALID);
  g_assert_nonnull(strstr(err->message, "kernel"));
  g_clear_error(&err);
  dvfs_policy_init(&pol, DVFS_ENVPIPE);
  pol.kernel_within = TRUE;
  r = perseus_run(&pol, &x, &err);
  g_assert_null(r);
  g_assert_error(err, PERSEUS_ERROR, PERSEUS_ERROR_INVALID);
  g_clear_error(&err);
  setup_free(&s);
}

/* ---- through Lua -------------------------------------------------------- */

#define LUA_SETUP                                                           \
  "local js = require 'joulesim'\n"                                         \
  "local w = js.gpt{ model = 'gpt3-125m', tp = 1, pp = 2, dp = 1,\n"        \
  "  microbatches = 3, seq_len = 512, gpu = 'A100-SXM4-80GB' }\n"           \
  "local c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 2,\n"               \
  "  switch_latency_ms = 0 }\n"

static void test_lua(void)
{
  test_lua_expect_ok(LUA_SETUP
    "local p = js.simulate{ cluster = c, workload = w,\n"
    "  policy = js.policy.perseus{} }\n"
    "local k = js.simulate{ cluster = c, workload = w,\n"
    "  policy = js.policy.perseus{ kernel = true } }\n"
    "assert(k.time_s <= p.time_s * 1.001, k.time_s .. ' vs ' .. p.time_s)\n"
    "assert(k.energy_j < p.energy_j, k.energy_j .. ' vs ' .. p.energy_j)\n"
    "local k2 = js.simulate{ cluster = c, workload = w,\n"
    "  policy = js.policy.perseus{ kernel = true } }\n"
    "assert(k2.energy_j == k.energy_j)\n");

  static const struct {
    const char *src, *want;
  } bad[] = {
    {"js.policy.perseus{ kernel = 1 }", "'kernel'"},
    {"js.policy.perseus{ kernal = true }", "did you mean 'kernel'"},
    {"js.simulate{ cluster = c, workload = w, policy =\n"
     "  js.policy.perseus{ kernel = true, straggler_aware = true } }",
     "straggler_aware"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *src = g_strconcat(LUA_SETUP, bad[i].src, "\n", NULL);
    test_lua_expect_error(src, bad[i].want, NULL);
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *path = g_strdup_printf(
      "/combine/vs-perseus/%s-tp%u-pp%u-dp%u-m%u%s", cases[i].model,
      cases[i].tp, cases[i].pp, cases[i].dp, cases[i].M,
      cases[i].latency_ms > 0 ? "-latency" : "");
    g_test_add_data_func(path, &cases[i], test_combined);
  }
  g_test_add_func("/combine/deterministic", test_deterministic);
  g_test_add_func("/combine/plan", test_plan_structure);
  g_test_add_func("/combine/errors", test_errors);
  g_test_add_func("/combine/lua", test_lua);
  return g_test_run();
}
