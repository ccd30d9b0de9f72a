/* tests/test-dvfs.c -- DVFS policies: the knapsack against exhaustive
 * search, the plan model against the engine, slowdown budgets over random
 * workloads, nesting of granularities, switching latency, the planner
 * against brute force, determinism, memory clocks, and the Lua API. */
#include "lua/bind.h"
#include "run/session.h"
#include "models/dvfs/knapsack.h"
#include "models/dvfs/model.h"
#include "models/dvfs/planner.h"
#include "models/net.h"
#include "sim/pcg.h"
#include "traces/gpt.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---------------------------------------------------------------- */

typedef struct {
  JsSession *s;
  SimWorkload *w;
  Cluster *c;
} Setup;

static void setup_full(Setup *st, const char *model, guint tp, guint pp,
                       guint dp, guint mb, guint seq, const char *gpu,
                       const char *net_name)
{
  GError *error = NULL;
  st->s = js_session_new(1);
  GptConfig cfg;
  gpt_config_init(&cfg);
  g_assert_true(gpt_config_set_model(&cfg, model, &error));
  cfg.tp = tp;
  cfg.pp = pp;
  cfg.dp = dp;
  cfg.microbatches = mb;
  cfg.seq_len = seq;
  const GpuSpec *g = gpu_catalogue_lookup(st->s->catalogue, gpu, &error);
  g_assert_no_error(error);
  st->w = gpt_generate(&cfg, g, &error);
  g_assert_no_error(error);
  g_autoptr(NetSpec) net = net_preset(net_name, &error);
  g_assert_no_error(error);
  st->c = cluster_new(g, net, tp * pp * dp, 8, &error);
  g_assert_no_error(error);
}

static void setup(Setup *st, const char *model, guint tp, guint pp, guint dp,
                  guint mb, guint seq, const char *gpu)
{
  setup_full(st, model, tp, pp, dp, mb, seq, gpu, "dgx-a100");
}

static void teardown(Setup *st)
{
  cluster_free(st->c);
  sim_workload_free(st->w);
  js_session_free(st->s);
}

/* Runs policy p for `iters` iterations at the given switching latency
 * (< 0: the GPU's); returns the result and optionally the plan report. */
static SimResult *run(Setup *st, const DvfsPolicy *p, guint iters,
                      double latency_ms, DvfsPlanResult **report)
{
  GError *error = NULL;
  JsRunOptions opt = {.iterations = iters, .seed = 1, .switch_latency_ms = latency_ms};
  DvfsPlanResult *pr = NULL;
  SimResult *r = js_simulate_planned(st->s, st->c, st->w, p, &opt, &pr,
                                     &error);
  g_assert_no_error(error);
  g_assert_nonnull(r);
  if (report != NULL)
    *report = pr;
  else
    dvfs_plan_result_free(pr);
  return r;
}

static double slowdown(const SimResult *base, const SimResult *r)
{
  return ((double)r->time_ns / r->n_iterations) /
             ((double)base->time_ns / base->n_iterations) -
         1.0;
}

static double saving(const SimResult *base, const SimResult *r)
{
  return 1.0 - (r->energy_j / r->n_iterations) /
                   (base->energy_j / base->n_iterations);
}

static DvfsPolicy policy(DvfsKind kind, double s)
{
  DvfsPolicy p;
  dvfs_policy_init(&p, kind);
  p.slowdown = s;
  return p;
}

/* ---- knapsack vs exhaustive search ------------------------------------------- */

typedef struct {
  double w, c;
} WC;

static int cmp_wc(const void *a, const void *b)
{
  const WC *x = a, *y = b;
  return (x->w > y->w) - (x->w < y->w);
}

/* All combinations of units [u0, u1): (weight, cost) pairs. */
static GArray *enumerate(const DvfsItem *items, const guint *nopt, guint u0,
                         guint u1, guint stride)
{
  GArray *a = g_array_new(FALSE, FALSE, sizeof(WC));
  WC z = {0, 0};
  g_array_append_val(a, z);
  for (guint u = u0; u < u1; u++) {
    GArray *b = g_array_sized_new(FALSE, FALSE, sizeof(WC), a->len * nopt[u]);
    for (guint i = 0; i < a->len; i++)
      for (guint k = 0; k < nopt[u]; k++) {
        const DvfsItem *it = &items[u * stride + k];
        WC x = {g_array_index(a, WC, i).w + it->w,
                g_array_index(a, WC, i).c + it->c};
        g_array_append_val(b, x);
      }
    g_array_unref(a);
    a = b;
  }
  return a;
}

/* Exact optima by meet in the middle, for n_b budgets at once (INFINITY
 * when infeasible). */
static void exhaustive(const DvfsItem *items, const guint *nopt, guint n,
                       guint stride, const double *budget, guint n_b,
                       double *best)
{
  g_autoptr(GArray) left = enumerate(items, nopt, 0, n / 2, stride);
  g_autoptr(GArray) right = enumerate(items, nopt, n / 2, n, stride);
  qsort(left->data, left->len, sizeof(WC), cmp_wc);
  WC *l = (WC *)(void *)left->data;
  for (guint i = 1; i < left->len; i++)
    l[i].c = MIN(l[i].c, l[i - 1].c); /* prefix minimum of cost */
  for (guint b = 0; b < n_b; b++)
    best[b] = INFINITY;
  for (guint j = 0; j < right->len; j++) {
    const WC *r = &g_array_index(right, WC, j);
    for (guint b = 0; b < n_b; b++) {
      double rem = budget[b] - r->w;
      if (rem < 0)
        continue;
      guint lo = 0, hi = left->len;
      while (lo < hi) {
        guint mid = (lo + hi) / 2;
        if (l[mid].w <= rem)
          lo = mid + 1;
        else
          hi = mid;
      }
      if (lo > 0)
        best[b] = MIN(best[b], l[lo - 1].c + r->c);
    }
  }
}

static void test_knapsack_brute_force(void)
{
  SimPcg rng;
  sim_pcg_seed(&rng, 42, 7);
  double worst_gap = 0.0;
  for (int inst = 0; inst < 60; inst++) {
    gboolean big = inst < 3;
    guint n = big ? 12 : 2 + sim_pcg_bounded(&rng, 7);
    guint stride = 10;
    g_autofree DvfsItem *items = g_new(DvfsItem, n * stride);
    g_autofree guint *nopt = g_new(guint, n);
    double wsum = 0;
    for (guint u = 0; u < n; u++) {
      nopt[u] = big ? 10 : 2 + sim_pcg_bounded(&rng, 9);
      /* A kernel-like shape: option 0 fastest; slower options usually
       * cheaper, with noise so that some are dominated. */
      double t0 = 1 + 99 * sim_pcg_double(&rng);
      double e0 = 10 + 90 * sim_pcg_double(&rng);
      double wmax = 0;
      for (guint k = 0; k < nopt[u]; k++) {
        double dt = k == 0 ? 0 : t0 * 0.05 * k * (0.5 + sim_pcg_double(&rng));
        double de = k == 0 ? 0
                           : e0 * (0.04 * k - 0.004 * k * k) *
                                 (0.3 + sim_pcg_double(&rng));
        items[u * stride + k] = (DvfsItem){dt, e0 - de, k};
        wmax = MAX(wmax, dt);
      }
      wsum += wmax;
    }
    g_autoptr(DvfsKnapsack) ks = dvfs_knapsack_new();
    for (guint u = 0; u < n; u++)
      dvfs_knapsack_add(ks, &items[u * stride], nopt[u]);
    double budgets[4], opt[4];
    for (int b = 0; b < 4; b++)
      budgets[b] = wsum * (b == 0 ? 0.0 : 0.1 * b + 0.05 * (inst % 3));
    exhaustive(items, nopt, n, stride, budgets, 4, opt);
    for (int b = 0; b < 4; b++) {
      g_autofree guint32 *tags = g_new(guint32, n);
      double cost, weight;
      gboolean ok = dvfs_knapsack_solve(ks, budgets[b], tags, &cost, &weight);
      g_assert_true(ok);
      /* The reported totals match the tags, and they are feasible. */
      double c2 = 0, w2 = 0;
      for (guint u = 0; u < n; u++) {
        g_assert_cmpuint(tags[u], <, nopt[u]);
        c2 += items[u * stride + tags[u]].c;
        w2 += items[u * stride + tags[u]].w;
      }
      g_assert_true(test_close(c2, cost, 1e-12));
      g_assert_cmpfloat(w2, <=, budgets[b] + 1e-9);
      g_assert_true(isfinite(opt[b]));
      double gap = (cost - opt[b]) / opt[b];
      g_assert_cmpfloat(gap, >=, -1e-12);
      worst_gap = MAX(worst_gap, gap);
    }
  }
  g_assert_cmpfloat(worst_gap, <, 0.005);
  if (g_test_verbose())
    g_printerr("worst knapsack gap %.3g%%\n", 100 * worst_gap);
}

static void test_knapsack_infeasible(void)
{
  g_autoptr(DvfsKnapsack) ks = dvfs_knapsack_new();
  DvfsItem a[] = {{2, 5, 0}, {3, 4, 1}};
  dvfs_knapsack_add(ks, a, 2);
  guint32 tag;
  g_assert_false(dvfs_knapsack_solve(ks, 1.0, &tag, NULL, NULL));
  g_assert_cmpuint(tag, ==, 0); /* the lightest */
  /* Dominated items are dropped: (4, 9) is worse than (3, 4). */
  DvfsItem b[] = {{0, 10, 0}, {4, 9, 1}, {3, 4, 2}};
  guint u = dvfs_knapsack_add(ks, b, 3);
  guint n;
  const DvfsItem *it = dvfs_knapsack_items(ks, u, &n);
  g_assert_cmpuint(n, ==, 2);
  g_assert_cmpuint(it[1].tag, ==, 2);
}

/* ---- the plan model reproduces the engine -------------------------------------- */

typedef struct {
  const char *model;
  guint tp, pp, dp, mb;
  const char *gpu;
  double perf_spread;
} ModelCase;

static void test_model_exact(gconstpointer data)
{
  const ModelCase *mc = data;
  Setup st;
  setup(&st, mc->model, mc->tp, mc->pp, mc->dp, mc->mb, 256, mc->gpu);
  st.c->perf_spread = mc->perf_spread;
  GError *error = NULL;
  g_autoptr(ClusterMachine) cm = cluster_machine_new(st.c, st.w,
                                                     st.s->catalogue, 3,
                                                     &error);
  g_assert_no_error(error);
  g_autoptr(DvfsModel) m = dvfs_model_new(st.w, cm, TRUE, &error);
  g_assert_no_error(error);
  if (mc->perf_spread == 0 && mc->tp * mc->dp > 1)
    g_assert_cmpuint(m->n_classes, <, st.w->n_ranks); /* folded */
  const GpuSpec *g = st.c->gpu;
  SimClocks pairs[] = {{(guint16)gpu_sm_clock_at(g, gpu_sm_n_steps(g) / 2), 0},
                       {(guint16)gpu_sm_clock_at(g, gpu_sm_n_steps(g) / 3), 0},
                       {(guint16)g->sm_max_mhz.v, 0}};
  g_autoptr(DvfsPrices) pr = dvfs_prices_new(m, NULL, pairs, 3);
  SimPcg rng;
  sim_pcg_seed(&rng, 11, 1);
  g_autofree guint16 *req = g_new0(guint16, MAX(m->n_slots, 1u));
  static const double lat_ms[] = {0, 0.05, 2};
  for (guint t = 0; t < G_N_ELEMENTS(lat_ms); t++) {
    /* Random clocks, in runs so that some switches land. */
    guint16 k = 0;
    for (guint32 s = 0; s < m->n_slots; s++) {
      if (sim_pcg_bounded(&rng, 8) == 0)
        k = (guint16)sim_pcg_bounded(&rng, pr->n_pairs);
      req[s] = k;
    }
    gint64 lat = (gint64)llround(lat_ms[t] * 1e6);
    DvfsEvalOptions o = {2, lat};
    DvfsEval ev;
    dvfs_model_eval(m, pr, req, &o, &ev);
    g_autoptr(SimPlan) plan = dvfs_model_build_plan(m, pr, req);
    SimMachine vm = *cluster_machine_sim(cm);
    vm.switch_latency_ns = lat;
    g_autoptr(SimEngine) e = sim_engine_new(st.w, &vm, &error);
    g_assert_no_error(error);
    g_autoptr(SimResult) r = sim_engine_run(e, plan, 2, &error);
    g_assert_no_error(error);
    for (guint i = 0; i < 2; i++) {
      g_assert_cmpint(ev.time_ns[i], ==, r->iterations[i].time_ns);
      /* The model prices the additive sum; the engine's energy is that
       * less the board limit's cut of overlaps. */
      g_assert_cmpfloat(r->iterations[i].held_j, >=, 0.0);
      g_assert_true(test_close(ev.energy_j[i],
                               r->iterations[i].energy_j +
                                 r->iterations[i].held_j,
                               1e-9));
    }
    g_assert_cmpuint(ev.switches, ==, r->switches);
  }
  teardown(&st);
}

/* ---- budgets over random workloads ---------------------------------------------- */

static void test_budget_random(void)
{
  static const char *const gpus[] = {"A100-SXM4-80GB", "H100-SXM5-80GB",
                                     "A40", "RTX-3080-Ti"};
  static const double budgets[] = {0.0, 0.01, 0.05};
  SimPcg rng;
  sim_pcg_seed(&rng, 2024, 3);
  guint checked = 0;
  for (int inst = 0; inst < 10; inst++) {
    gboolean big = sim_pcg_bounded(&rng, 2);
    const char *model = big ? "gpt3-350m" : "gpt3-125m";
    guint tp = 1u << sim_pcg_bounded(&rng, 2);
    guint pp = 1u << sim_pcg_bounded(&rng, 3); /* 1, 2, 4 */
    guint dp = 1u << sim_pcg_bounded(&rng, 2);
    guint mb = 2 + sim_pcg_bounded(&rng, 3);
    const char *gpu = gpus[sim_pcg_bounded(&rng, G_N_ELEMENTS(gpus))];
    /* Short sequences and few layers keep it fast. */
    Setup st;
    GError *error = NULL;
    st.s = js_session_new(1);
    GptConfig cfg;
    gpt_config_init(&cfg);
    g_assert_true(gpt_config_set_model(&cfg, model, &error));
    cfg.layers = 4 * pp;
    cfg.tp = tp;
    cfg.pp = pp;
    cfg.dp = dp;
    cfg.microbatches = mb;
    cfg.seq_len = 128 << sim_pcg_bounded(&rng, 2);
    const GpuSpec *g = gpu_catalogue_lookup(st.s->catalogue, gpu, &error);
    g_assert_no_error(error);
    st.w = gpt_generate(&cfg, g, &error);
    g_assert_no_error(error);
    g_autoptr(NetSpec) net = net_preset("dgx-a100", &error);
    st.c = cluster_new(g, net, tp * pp * dp, 8, &error);
    g_assert_no_error(error);
    if (g_test_verbose())
      g_printerr("%s layers %u tp%u pp%u dp%u mb%u seq %u on %s\n", model,
                 cfg.layers, tp, pp, dp, mb, cfg.seq_len, gpu);
    DvfsPolicy base_p = policy(DVFS_MAX, 0);
    g_autoptr(SimResult) base = run(&st, &base_p, 1, -1, NULL);
    double s = budgets[sim_pcg_bounded(&rng, G_N_ELEMENTS(budgets))];
    DvfsPolicy ps[6];
    ps[0] = policy(DVFS_POWERCAP, s);
    ps[1] = policy(DVFS_ITERATION, s);
    ps[2] = policy(DVFS_PASS, s);
    ps[3] = policy(DVFS_KERNEL, s);
    ps[4] = policy(DVFS_KERNEL, s);
    ps[4].granularity = DVFS_GRANULARITY_OP;
    ps[5] = policy(DVFS_KERNEL, s);
    ps[5].granularity = sim_pcg_bounded(&rng, 2) ? DVFS_GRANULARITY_OP
                                                 : DVFS_GRANULARITY_NAME;
    for (guint i = 0; i < G_N_ELEMENTS(ps); i++) {
      /* The last one runs with a switching latency of 20% of the
       * iteration, the others with none. */
      double lat = i == 5 ? (double)base->time_ns * 1e-6 * 0.2 : 0.0;
      guint iters = i == 5 ? 3 : 1;
      g_autoptr(SimResult) b2 = run(&st, &base_p, iters, lat, NULL);
      g_autoptr(SimResult) r = run(&st, &ps[i], iters, lat, NULL);
      double sd = slowdown(b2, r);
      if (sd > s + DVFS_SLOWDOWN_TOL)
        g_error("%s tp%u pp%u dp%u on %s, policy %d, s = %g: slowdown %.9f",
                model, tp, pp, dp, gpu, i, s, sd);
      g_assert_cmpfloat(saving(b2, r), >=, -1e-9);
      checked++;
    }
    teardown(&st);
  }
  g_assert_cmpuint(checked, ==, 60);
}

/* ---- nesting and latency --------------------------------------------------------- */

static void test_nesting(void)
{
  static const struct {
    guint tp, pp, dp;
  } cases[] = {{1, 1, 1}, {2, 2, 1}};
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    Setup st;
    setup(&st, "gpt3-125m", cases[c].tp, cases[c].pp, cases[c].dp, 4, 256,
          "A100-SXM4-80GB");
    DvfsPolicy bp = policy(DVFS_MAX, 0);
    g_autoptr(SimResult) base = run(&st, &bp, 1, 0, NULL);
    for (double s = 0; s <= 0.011; s += 0.01) {
      DvfsPolicy pi = policy(DVFS_ITERATION, s), pp = policy(DVFS_PASS, s);
      DvfsPolicy pk = policy(DVFS_KERNEL, s), po = policy(DVFS_KERNEL, s);
      po.granularity = DVFS_GRANULARITY_OP;
      g_autoptr(SimResult) ri = run(&st, &pi, 1, 0, NULL);
      g_autoptr(SimResult) rp = run(&st, &pp, 1, 0, NULL);
      g_autoptr(SimResult) rk = run(&st, &pk, 1, 0, NULL);
      g_autoptr(SimResult) ro = run(&st, &po, 1, 0, NULL);
      double si = saving(base, ri), sp = saving(base, rp);
      double sk = saving(base, rk), so = saving(base, ro);
      g_assert_cmpfloat(sp, >=, si - 1e-12);
      g_assert_cmpfloat(sk, >=, sp - 1e-12);
      g_assert_cmpfloat(so, >=, sk - 1e-12);
      if (s > 0)
        g_assert_cmpfloat(sk, >, 0.0);
    }
    teardown(&st);
  }
}

static void test_latency_longer_than_iteration(void)
{
  static const struct {
    guint tp, pp, dp;
  } cases[] = {{1, 1, 1}, {2, 1, 2}};
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    Setup st;
    setup(&st, "gpt3-125m", cases[c].tp, cases[c].pp, cases[c].dp, 4, 256,
          "A100-SXM4-80GB");
    DvfsPolicy bp = policy(DVFS_MAX, 0);
    g_autoptr(SimResult) base = run(&st, &bp, 1, 0, NULL);
    double lat = 10 * (double)base->time_ns * 1e-6; /* 10 iterations */
    DvfsPolicy pi = policy(DVFS_ITERATION, 0.01);
    DvfsPolicy pk = policy(DVFS_KERNEL, 0.01);
    pk.granularity = DVFS_GRANULARITY_OP;
    g_autoptr(SimResult) ri = run(&st, &pi, 2, lat, NULL);
    g_autoptr(SimResult) rk = run(&st, &pk, 2, lat, NULL);
    g_autoptr(SimResult) b2 = run(&st, &bp, 2, lat, NULL);
    g_assert_cmpfloat(saving(b2, rk), <=, saving(b2, ri) + 1e-9);
    g_assert_cmpfloat(slowdown(b2, rk), <=, 0.01 + DVFS_SLOWDOWN_TOL);
    /* And without latency the kernel level does better. */
    g_autoptr(SimResult) r0 = run(&st, &pk, 1, 0, NULL);
    g_autoptr(SimResult) i0 = run(&st, &pi, 1, 0, NULL);
    g_assert_cmpfloat(saving(base, r0), >, saving(base, i0));
    teardown(&st);
  }
}

/* ---- the planner against brute force ---------------------------------------------- */

/* One GPU, five kernel names of different intensities, three ops each. */
static SimWorkload *tiny_workload(const GpuSpec *g)
{
  SimWorkload *w = sim_workload_new(1);
  static const struct {
    const char *name;
    SimOpClass klass;
    double flops, bytes;
    gboolean tensor;
  } k[] = {
    {"gemm_big", SIM_CLASS_GEMM, 4e12, 2e9, TRUE},
    {"gemm_small", SIM_CLASS_GEMM, 2e11, 4e8, TRUE},
    {"attention", SIM_CLASS_ATTENTION, 6e11, 3e9, TRUE},
    {"layernorm", SIM_CLASS_NORM, 0, 6e9, FALSE},
    {"softmax", SIM_CLASS_SOFTMAX, 0, 9e9, FALSE},
  };
  g_autoptr(SimRankBuilder) b = sim_rank_builder_new();
  guint32 shape[G_N_ELEMENTS(k)];
  gint64 ref[G_N_ELEMENTS(k)];
  for (guint i = 0; i < G_N_ELEMENTS(k); i++) {
    SimShape sh = {k[i].flops, k[i].bytes, sim_workload_intern(w, k[i].name),
                   (guint8)k[i].klass, 0, (guint8)k[i].tensor, 0};
    shape[i] = sim_workload_add_shape(w, &sh);
    GpuKernel gk = {k[i].klass, k[i].flops, k[i].bytes, k[i].tensor};
    GpuCost c;
    gpu_kernel_cost(g, &gk, 0, 0, GPU_POWER_UNCAPPED, &c);
    ref[i] = (gint64)llround(c.time_s * 1e9);
  }
  for (guint rep = 0; rep < 3; rep++)
    for (guint i = 0; i < G_N_ELEMENTS(k); i++) {
      SimOp op = {0};
      op.ref_ns = ref[i] * (gint64)(rep + 1);
      op.shape = shape[i];
      op.name = g_array_index(w->shapes, SimShape, shape[i]).name;
      op.peer = 0;
      op.wait = SIM_NO_WAIT;
      op.microbatch = G_MAXUINT16;
      op.layer = 255;
      op.kind = SIM_OP_KERNEL;
      op.klass = (guint8)k[i].klass;
      op.phase = SIM_PHASE_FORWARD;
      sim_rank_builder_add(b, &op);
    }
  sim_rank_builder_finish(b, w, 0);
  return w;
}

static void test_planner_brute_force(void)
{
  GError *error = NULL;
  g_autoptr(JsSession) s = js_session_new(1);
  const GpuSpec *g = gpu_catalogue_lookup(s->catalogue, "A100-SXM4-80GB",
                                          &error);
  g_autoptr(SimWorkload) w = tiny_workload(g);
  g_assert_true(sim_workload_validate(w, &error));
  g_autoptr(NetSpec) net = net_preset("dgx-a100", &error);
  g_autoptr(Cluster) c = cluster_new(g, net, 1, 8, &error);
  g_assert_no_error(error);
  c->switch_latency_ms = 0;
  static const guint sm[] = {1410, 1305, 1200, 1110, 1020, 930, 840, 750};
  /* The model and candidates the planner uses: auto + the 8 clocks. */
  g_autoptr(ClusterMachine) cm = cluster_machine_new(c, w, s->catalogue,
                                                     0, &error);
  g_autoptr(DvfsModel) m = dvfs_model_new(w, cm, TRUE, &error);
  g_assert_no_error(error);
  SimClocks pairs[G_N_ELEMENTS(sm)];
  for (guint i = 0; i < G_N_ELEMENTS(sm); i++)
    pairs[i] = (SimClocks){(guint16)sm[i], 0};
  g_autoptr(DvfsPrices) pr = dvfs_prices_new(m, NULL, pairs,
                                             G_N_ELEMENTS(sm));
  guint K = pr->n_pairs, names = 5;
  g_assert_cmpuint(K, ==, 9);
  g_autofree guint16 *req = g_new0(guint16, m->n_slots);
  static const double budgets[] = {0.0, 0.005, 0.02, 0.05, 0.15};
  for (guint b = 0; b < G_N_ELEMENTS(budgets); b++) {
    double sl = budgets[b];
    gint64 T = m->base_time_ns;
    gint64 deadline = T + (gint64)floor((double)T * sl);
    double best = INFINITY;
    guint total = 1;
    for (guint i = 0; i < names; i++)
      total *= K;
    DvfsEvalOptions o = {1, 0};
    for (guint code = 0; code < total; code++) {
      guint x = code;
      guint16 opt[5];
      for (guint i = 0; i < names; i++) {
        opt[i] = (guint16)(x % K);
        x /= K;
      }
      for (guint32 q = 0; q < m->n_slots; q++)
        req[q] = opt[dvfs_model_op(m, q)->name];
      DvfsEval ev;
      dvfs_model_eval(m, pr, req, &o, &ev);
      if (ev.max_time_ns <= deadline)
        best = MIN(best, ev.mean_energy_j);
    }
    DvfsPolicy p = policy(DVFS_KERNEL, sl);
    p.sm_clocks = sm;
    p.n_sm_clocks = G_N_ELEMENTS(sm);
    g_autoptr(DvfsPlanResult) res = dvfs_planner_run(&p, c, w, s->catalogue,
                                                     0, &error);
    g_assert_no_error(error);
    g_assert_cmpfloat(res->time_s * 1e9, <=, (double)deadline);
    double gap = (res->energy_j - best) / best;
    if (g_test_verbose())
      g_printerr("s = %g: planner %.6f J, brute force %.6f J, gap %.3g%%\n",
                 sl, res->energy_j, best, 100 * gap);
    g_assert_cmpfloat(gap, <, 0.005);
    g_assert_cmpfloat(gap, >=, -1e-9); /* brute force is the optimum */
  }
}

/* ---- determinism ------------------------------------------------------------------- */

static void test_determinism(void)
{
  Setup st;
  setup(&st, "gpt3-125m", 2, 2, 1, 4, 256, "A100-SXM4-80GB");
  DvfsPolicy p = policy(DVFS_KERNEL, 0.01);
  p.granularity = DVFS_GRANULARITY_OP;
  DvfsPlanResult *a = NULL, *b = NULL;
  g_autoptr(SimResult) ra = run(&st, &p, 2, 0.5, &a);
  g_autoptr(SimResult) rb = run(&st, &p, 2, 0.5, &b);
  g_assert_cmpint(ra->time_ns, ==, rb->time_ns);
  g_assert_true(memcmp(&ra->energy_j, &rb->energy_j, sizeof(double)) == 0);
  g_assert_cmpuint(ra->switches, ==, rb->switches);
  g_assert_cmpstr(a->chosen, ==, b->chosen);
  g_assert_cmpuint(a->summary->len, ==, b->summary->len);
  for (guint i = 0; i < a->summary->len; i++) {
    const DvfsSummaryRow *x = &g_array_index(a->summary, DvfsSummaryRow, i);
    const DvfsSummaryRow *y = &g_array_index(b->summary, DvfsSummaryRow, i);
    g_assert_cmpstr(x->name, ==, y->name);
    g_assert_true(memcmp(&x->energy_j, &y->energy_j, sizeof(double)) == 0);
    g_assert_cmpuint(x->sm_mhz, ==, y->sm_mhz);
  }
  dvfs_plan_result_free(a);
  dvfs_plan_result_free(b);
  teardown(&st);
}

/* ---- report --------------------------------------------------------------------------- */

static void test_summary(void)
{
  Setup st;
  setup(&st, "gpt3-125m", 1, 1, 1, 2, 256, "A100-SXM4-80GB");
  DvfsPolicy bp = policy(DVFS_MAX, 0);
  g_autoptr(SimResult) base = run(&st, &bp, 1, 0, NULL);
  DvfsPolicy p = policy(DVFS_KERNEL, 0.02);
  DvfsPlanResult *pr = NULL;
  g_autoptr(SimResult) r = run(&st, &p, 1, 0, &pr);
  g_assert_nonnull(pr);
  g_assert_nonnull(pr->summary);
  g_assert_cmpuint(pr->summary->len, >, 10);
  double t = 0, e = 0, tb = 0, eb = 0;
  guint64 count = 0;
  gboolean lowered = FALSE;
  for (guint i = 0; i < pr->summary->len; i++) {
    const DvfsSummaryRow *row = &g_array_index(pr->summary, DvfsSummaryRow, i);
    t += row->time_s;
    e += row->energy_j;
    tb += row->base_time_s;
    eb += row->base_energy_j;
    count += row->count;
    if (row->sm_mhz != 0 && row->energy_j < row->base_energy_j)
      lowered = TRUE;
    if (i > 0) /* by decreasing base energy */
      g_assert_cmpfloat(row->base_energy_j, <=,
                        g_array_index(pr->summary, DvfsSummaryRow, i - 1)
                            .base_energy_j);
  }
  g_assert_true(lowered);
  /* One GPU, one stream: kernel times add up to the busy time. */
  g_assert_true(test_close(tb, base->per_gpu[0].kernel_ns * 1e-9, 1e-9));
  g_assert_true(test_close(t, r->per_gpu[0].kernel_ns * 1e-9, 1e-9));
  g_assert_cmpfloat(e, <, eb);
  g_assert_true(test_close(pr->energy_j, r->energy_j, 1e-9));
  guint64 kernels = 0;
  for (guint32 i = 0; i < st.w->ranks[0].n_ops; i++)
    kernels += st.w->ranks[0].ops[i].kind == SIM_OP_KERNEL;
  g_assert_cmpuint(count, ==, kernels);
  dvfs_plan_result_free(pr);
  teardown(&st);
}

/* ---- power cap ------------------------------------------------------------------------- */

static void test_powercap(void)
{
  Setup st;
  setup(&st, "gpt3-125m", 1, 1, 1, 2, 512, "A100-SXM4-80GB");
  DvfsPolicy bp = policy(DVFS_MAX, 0);
  g_autoptr(SimResult) base = run(&st, &bp, 1, 0, NULL);
  DvfsPolicy p = policy(DVFS_POWERCAP, 0);
  p.watts = 200;
  DvfsPlanResult *pr = NULL;
  g_autoptr(SimResult) r = run(&st, &p, 1, 0, &pr);
  g_assert_cmpfloat(pr->power_limit_w, ==, 200);
  g_assert_cmpfloat(r->per_gpu[0].peak_power_w, <=, 200 + 1e-6);
  g_assert_cmpfloat(base->per_gpu[0].peak_power_w, >, 200);
  dvfs_plan_result_free(pr);
  DvfsPolicy q = policy(DVFS_POWERCAP, 0.02);
  g_autoptr(SimResult) r2 = run(&st, &q, 1, 0, &pr);
  g_assert_cmpfloat(slowdown(base, r2), <=, 0.02 + DVFS_SLOWDOWN_TOL);
  g_assert_cmpfloat(saving(base, r2), >, 0);
  g_assert_cmpfloat(pr->power_limit_w, >=, st.c->gpu->power_min_w.v);
  dvfs_plan_result_free(pr);
  /* Out of range. */
  GError *error = NULL;
  p.watts = 5000;
  JsRunOptions opt = {.iterations = 1, .seed = 1, .switch_latency_ms = 0};
  g_autoptr(SimResult) bad = js_simulate(st.s, st.c, st.w, &p, &opt, &error);
  g_assert_null(bad);
  g_assert_error(error, DVFS_ERROR, DVFS_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "watts"));
  g_clear_error(&error);
  teardown(&st);
}

/* ---- memory clocks ------------------------------------------------------------------------ */

/* On a power-limited card, a lower memory clock leaves more of the power
 * budget to the SM clock, so a compute-bound GEMM can run faster. */
static void test_memory_clock_speeds_up_capped_gemm(void)
{
  GError *error = NULL;
  g_autoptr(GpuCatalogue) cat = gpu_catalogue_new();
  const GpuSpec *g = gpu_catalogue_lookup(cat, "RTX-3080-Ti", &error);
  g_assert_no_error(error);
  g_assert_cmpuint(g->n_mem_clocks, ==, 5);
  static const double mems[] = {405, 810, 5001, 9251, 9501};
  for (guint i = 0; i < 5; i++)
    g_assert_cmpfloat(g->mem_mhz[i].v, ==, mems[i]);
  double n = 8192;
  GpuKernel k = {SIM_CLASS_GEMM, 2 * n * n * n, 3 * n * n * 2, TRUE};
  GpuCost top, best = {0};
  gpu_kernel_cost(g, &k, 0, 9501, 0, &top);
  g_assert_true(top.capped);
  best.time_s = INFINITY;
  for (guint i = 0; i + 1 < g->n_mem_clocks; i++) {
    GpuCost c;
    gpu_kernel_cost(g, &k, 0, (guint)g->mem_mhz[i].v, 0, &c);
    if (c.time_s < best.time_s)
      best = c;
  }
  g_assert_cmpfloat(best.time_s, <, top.time_s * 0.99);
  g_assert_cmpuint(best.sm_mhz, >, top.sm_mhz);
}

/* The planner uses memory clocks on a card that has several. */
static void test_memory_clock_candidates(void)
{
  Setup st;
  setup_full(&st, "gpt3-125m", 1, 1, 1, 2, 256, "RTX-3080-Ti", "pcie");
  DvfsPolicy p = policy(DVFS_KERNEL, 0.05);
  DvfsPlanResult *pr = NULL;
  g_autoptr(SimResult) r = run(&st, &p, 1, 0, &pr);
  g_assert_cmpuint(pr->n_candidates, ==,
                   gpu_sm_n_steps(st.c->gpu) * 5 + 1);
  dvfs_plan_result_free(pr);
  teardown(&st);
}

/* ---- Lua ----------------------------------------------------------------------------------- */

static void lua_ok(const char *src)
{
  g_autoptr(JsSession) s = js_session_new(1);
  GError *error = NULL;
  gboolean ok = js_run_string(s, "=test", src, &error);
  if (!ok)
    g_error("%s", error->message);
}

static void lua_fails(const char *src, const char *pattern)
{
  g_autoptr(JsSession) s = js_session_new(1);
  GError *error = NULL;
  g_assert_false(js_run_string(s, "=test", src, &error));
  g_assert_error(error, JS_ERROR, JS_ERROR_SCRIPT);
  if (strstr(error->message, pattern) == NULL)
    g_error("message '%s' lacks '%s'", error->message, pattern);
  g_error_free(error);
}

#define LUA_SETUP                                                           \
  "local js = require 'joulesim'\n"                                         \
  "local c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 1 }\n"              \
  "local w = js.gpt{ model = 'gpt3-125m', microbatches = 2, seq_len = 256 }\n"

static void test_lua_policies(void)
{
  lua_ok(LUA_SETUP
         "local base = js.simulate{ cluster = c, workload = w }\n"
         "for _, p in ipairs{ js.policy.max(), js.policy.auto(),\n"
         "    js.policy.fixed{ sm = 1200 }, js.policy.powercap{ watts = 250 },\n"
         "    js.policy.powercap{ slowdown = 0.01 },\n"
         "    js.policy.iteration{ slowdown = 0.01 },\n"
         "    js.policy.pass{ slowdown = 0.01 },\n"
         "    js.policy.kernel{ slowdown = 0.01 },\n"
         "    js.policy.kernel{ slowdown = 0.01, granularity = 'op',\n"
         "                      switch_latency_ms = 1 } } do\n"
         "  local r = js.simulate{ cluster = c, workload = w, policy = p }\n"
         "  local cmp = js.compare(base, r)\n"
         "  assert(cmp.slowdown <= 0.0100001 or p.name == 'fixed' or p.watts,\n"
         "         r.policy .. ' ' .. cmp.slowdown)\n"
         "  if p.name ~= 'max' and p.name ~= 'fixed' then\n"
         "    assert(r.plan and r.plan.chosen, r.policy)\n"
         "    assert(#r.plan_summary > 5)\n"
         "    local row = r.plan_summary[1]\n"
         "    assert(row.kernel and row.class and row.count > 0 and\n"
         "           row.base_energy_j > 0 and row.sm_mhz and row.mem_mhz)\n"
         "  else\n"
         "    assert(r.plan == nil and r.plan_summary == nil)\n"
         "  end\n"
         "end\n"
         "local r = js.simulate{ cluster = c, workload = w,\n"
         "                       policy = js.policy.powercap{ watts = 250 } }\n"
         "assert(r.plan.power_limit_w == 250 and r.peak_power_w <= 250.001)\n");
}

static void test_lua_function_policy(void)
{
  lua_ok(LUA_SETUP
         "local calls, seen = 0, {}\n"
         "local r = js.simulate{ cluster = c, workload = w,\n"
         "  switch_latency_ms = 0, policy = function(k)\n"
         "    calls = calls + 1\n"
         "    assert(k.name and k.class and k.count > 0 and #k.options > 10)\n"
         "    assert(k.options[1].sm == 0 and k.options[1].time_s == k.time_s)\n"
         "    seen[k.name] = true\n"
         "    if k.class == 'gemm' then return { sm = 1200 } end\n"
         "    if k.class == 'norm' then return 1005, 0 end\n"
         "    return nil\n"
         "  end }\n"
         "assert(calls > 10 and r.plan.chosen == 'custom', calls)\n"
         "for _, row in ipairs(r.plan_summary) do\n"
         "  if row.class == 'gemm' then assert(row.sm_mhz == 1200) end\n"
         "  if row.class == 'norm' then assert(row.sm_mhz == 1005) end\n"
         "  if row.class == 'softmax' then assert(row.sm_mhz == 0) end\n"
         "end\n"
         /* custom{} with options, per op */
         "local n = 0\n"
         "js.simulate{ cluster = c, workload = w, policy = js.policy.custom{\n"
         "  switch_latency_ms = 0, granularity = 'op',\n"
         "  fn = function(k) n = n + 1 end } }\n"
         "assert(n > calls)\n"
         /* with the GPU's 10 ms latency: segments */
         "local segs = 0\n"
         "js.simulate{ cluster = c, workload = w, policy = function(k)\n"
         "  assert(k.kind == 'segment'); segs = segs + 1 end }\n"
         "assert(segs >= 1 and segs < calls)\n");
  lua_fails(LUA_SETUP
            "js.simulate{ cluster = c, workload = w,\n"
            "  policy = function(k)\n"
            "    error('boom')\n"
            "  end }\n",
            "test:6: boom");
  lua_fails(LUA_SETUP
            "js.simulate{ cluster = c, workload = w,\n"
            "  policy = function(k) return 'fast' end }\n",
            "policy function returned string");
  lua_fails(LUA_SETUP
            "js.simulate{ cluster = c, workload = w,\n"
            "  policy = function(k) return 9000 end }\n",
            "9000");
}

static void test_lua_errors(void)
{
  lua_fails(LUA_SETUP "js.policy.kernel{ slowdown = 0.01, granularty = 'op' }",
            "did you mean 'granularity'");
  lua_fails(LUA_SETUP "js.policy.kernel{ granularity = 'ops' }",
            "\"name\", \"op\"");
  lua_fails(LUA_SETUP "js.policy.powercap{}", "give either 'watts'");
  lua_fails(LUA_SETUP "js.policy.powercap{ watts = 200, slowdown = 0 }",
            "give either 'watts'");
  lua_fails(LUA_SETUP "js.policy.iteration{ slowdown = -1 }", "'slowdown'");
  lua_fails(LUA_SETUP "js.policy.fixed{}", "give 'sm'");
  lua_fails(LUA_SETUP "js.policy.custom{ granularity = 'op' }", "'fn'");
  lua_fails(LUA_SETUP "js.simulate{ cluster = c, workload = w,\n"
                      "  policy = { name = 'kernel', slowdown = 'x' } }",
            "js.policy.kernel: argument 'slowdown'");
  lua_fails(LUA_SETUP "js.simulate{ cluster = c, workload = w,\n"
                      "  policy = js.policy.powercap{ watts = 9000 } }",
            "test:4: js.simulate: watts = 9000 is outside");
  lua_fails(LUA_SETUP "js.simulate{ cluster = c, workload = w,\n"
                      "  policy = { name = 'turbo' } }",
            "\"iteration\"");
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/dvfs/knapsack/brute-force", test_knapsack_brute_force);
  g_test_add_func("/dvfs/knapsack/infeasible", test_knapsack_infeasible);
  static const ModelCase cases[] = {
    {"gpt3-125m", 1, 1, 1, 2, "A100-SXM4-80GB", 0},
    {"gpt3-125m", 2, 2, 2, 4, "A100-SXM4-80GB", 0},
    {"gpt3-125m", 2, 4, 1, 4, "H100-SXM5-80GB", 0},
    {"gpt3-125m", 1, 2, 2, 3, "A40", 0.05},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *name = g_strdup_printf(
        "/dvfs/model/exact/tp%u-pp%u-dp%u-%s%s", cases[i].tp, cases[i].pp,
        cases[i].dp, cases[i].gpu, cases[i].perf_spread > 0 ? "-varied" : "");
    g_test_add_data_func(name, &cases[i], test_model_exact);
  }
  g_test_add_func("/dvfs/budget/random-workloads", test_budget_random);
  g_test_add_func("/dvfs/nesting", test_nesting);
  g_test_add_func("/dvfs/latency/longer-than-iteration",
                  test_latency_longer_than_iteration);
  g_test_add_func("/dvfs/planner/brute-force", test_planner_brute_force);
  g_test_add_func("/dvfs/determinism", test_determinism);
  g_test_add_func("/dvfs/summary", test_summary);
  g_test_add_func("/dvfs/powercap", test_powercap);
  g_test_add_func("/dvfs/memory-clock/capped-gemm",
                  test_memory_clock_speeds_up_capped_gemm);
  g_test_add_func("/dvfs/memory-clock/candidates",
                  test_memory_clock_candidates);
  g_test_add_func("/dvfs/lua/policies", test_lua_policies);
  g_test_add_func("/dvfs/lua/function", test_lua_function_policy);
  g_test_add_func("/dvfs/lua/errors", test_lua_errors);
  return g_test_run();
}
