/* tests/test-pipeline.c -- computation-level pipeline workloads and
 * table-driven pricing: structure, the 1F1B/GPipe bubble through the
 * engine, measured prices (interpolation, range errors, power cap), the
 * price table's text form, and configuration errors. */
#include <math.h>
#include <string.h>

#include "models/cluster.h"
#include "models/table.h"
#include "sim/engine.h"
#include "tests/testreplay.h"
#include "tests/testutil.h"
#include "traces/pipeline.h"
#include "traces/profile.h"

#define A100_PROFILE "tests/data/profiles/gpt3-175b+a100_sxm_bf16.csv"

/* Writes a balanced S-stage profile: forward tf, backward tb at 1400 MHz,
 * 1.25x slower at 1000 MHz, 1.1x at 1200; power 300 / 200 / 240 W. */
static char *write_profile(const char *dir, guint S, double tf, double tb,
                           gboolean drop_last_backward)
{
  char *path = g_build_filename(dir, "stages.csv", NULL);
  GString *s = g_string_new("stage,instruction,frequency,time,energy\n");
  const guint f[3] = {1000, 1200, 1400};
  const double slow[3] = {1.25, 1.1, 1.0}, pw[3] = {200, 240, 300};
  for (guint st = 0; st < S; st++)
    for (guint b = 0; b < 2; b++) {
      if (drop_last_backward && b == 1 && st == S - 1)
        continue;
      for (guint k = 0; k < 3; k++) {
        double t = (b ? tb : tf) * slow[k];
        g_string_append_printf(s, "%u,%s,%u,%.9f,%.9f\n", st,
                               b ? "backward" : "forward", f[k], t,
                               t * pw[k]);
      }
    }
  g_assert_true(g_file_set_contents(path, s->str, -1, NULL));
  g_string_free(s, TRUE);
  return path;
}

static SimWorkload *make(const char *path, guint M, guint S, guint dp,
                         PipelineSchedule sch)
{
  GError *err = NULL;
  g_autoptr(Profile) p = profile_load(path, &err);
  g_assert_no_error(err);
  PipelineConfig cfg;
  pipeline_config_init(&cfg);
  cfg.microbatches = M;
  cfg.stages = S;
  cfg.dp = dp;
  cfg.schedule = sch;
  SimWorkload *w = pipeline_from_profile(p, &cfg, &err);
  g_assert_no_error(err);
  return w;
}

typedef struct {
  GpuCatalogue *cat;
  Cluster *c;
  ClusterMachine *m;
} Mach;

static void mach_new(Mach *x, const SimWorkload *w, const char *gpu,
                     double limit_w)
{
  GError *err = NULL;
  x->cat = gpu_catalogue_new();
  const GpuSpec *g = gpu_catalogue_lookup(x->cat, gpu, &err);
  g_assert_no_error(err);
  g_autoptr(NetSpec) net = net_preset("dgx-a100", &err);
  g_assert_no_error(err);
  x->c = cluster_new(g, net, w->n_ranks, 8, &err);
  g_assert_no_error(err);
  x->c->blocked_power_w = 80;
  x->c->idle_power_w = 80;
  x->c->switch_latency_ms = 0;
  x->c->power_limit_w = limit_w;
  x->m = cluster_machine_new(x->c, w, x->cat, 0, &err);
  g_assert_no_error(err);
}

static void mach_free(Mach *x)
{
  cluster_machine_free(x->m);
  cluster_free(x->c);
  gpu_catalogue_free(x->cat);
}

static SimResult *simulate(const SimWorkload *w, Mach *x, guint16 sm,
                           GError **error)
{
  SimClocks c = {sm, 0};
  g_autoptr(SimPlan) plan = sim_plan_new_uniform(w->n_ranks, c);
  g_autoptr(SimEngine) e = sim_engine_new(w, cluster_machine_sim(x->m), error);
  if (e == NULL)
    return NULL;
  SimResult *r = sim_engine_run(e, plan, 1, error);
  if (r != NULL && !cluster_machine_check(x->m, error)) {
    sim_result_free(r);
    return NULL;
  }
  return r;
}

/* ---- structure ------------------------------------------------------------ */

static void test_structure(void)
{
  g_autoptr(SimWorkload) w = make(A100_PROFILE, 6, 0, 3, PIPELINE_1F1B);
  GError *err = NULL;
  g_assert_true(sim_workload_validate(w, &err));
  g_assert_cmpuint(w->n_ranks, ==, 8 * 3);
  g_assert_cmpuint(w->pp, ==, 8);
  g_assert_cmpuint(w->dp, ==, 3);
  g_assert_cmpuint(w->tp, ==, 1);
  g_assert_cmpstr(w->schedule, ==, "1f1b");
  g_assert_cmpuint(sim_workload_n_groups(w), ==, 8);
  /* The 3 pipelines' ranks of a stage share one program. */
  g_assert_cmpuint(sim_workload_n_programs(w), ==, 8);
  for (guint r = 0; r < w->n_ranks; r++)
    g_assert_cmpuint(w->ranks[r].program, ==, w->ranks[r - r % 3].program);
  for (guint s = 0; s < 8; s++) {
    guint n;
    const guint32 *g = sim_workload_group(w, s, &n);
    g_assert_cmpuint(n, ==, 3);
    for (guint q = 0; q < 3; q++)
      g_assert_cmpuint(g[q], ==, q + 3 * s);
  }
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    guint s = r / 3;
    g_assert_cmpuint(rk->stage, ==, s);
    guint kern = 0, send = 0, recv = 0, coll = 0;
    for (guint32 i = 0; i < rk->n_ops; i++) {
      const SimOp *op = &rk->ops[i];
      kern += op->kind == SIM_OP_KERNEL;
      send += op->kind == SIM_OP_SEND;
      recv += op->kind == SIM_OP_RECV;
      coll += op->kind == SIM_OP_COLLECTIVE;
      if (op->kind == SIM_OP_SEND || op->kind == SIM_OP_RECV)
        g_assert_cmpint(op->ref_ns, ==, 1); /* free transfers */
    }
    guint links = (s > 0) + (s < 7);
    g_assert_cmpuint(kern, ==, 12);
    g_assert_cmpuint(send, ==, 6 * links);
    g_assert_cmpuint(recv, ==, 6 * links);
    g_assert_cmpuint(coll, ==, 1);
  }
  /* The price table travels with the workload; kernel ref_ns is the
   * measured time at the highest clock. */
  g_autoptr(PriceTable) t = price_table_from_workload(w, &err);
  g_assert_no_error(err);
  g_assert_nonnull(t);
  g_autoptr(Profile) p = profile_load(A100_PROFILE, &err);
  for (guint32 i = 0; i < w->ranks[0].n_ops; i++) {
    const SimOp *op = &w->ranks[0].ops[i];
    if (op->kind != SIM_OP_KERNEL)
      continue;
    gint e = price_table_shape_entry(t, op->shape);
    g_assert_cmpint(e, >=, 0);
    g_assert_cmpuint(price_table_max_mhz(t, (guint)e), ==, 1410);
    g_assert_cmpuint(price_table_min_mhz(t, (guint)e), ==, 855);
    const ProfileOp *po = profile_find_stage(
      p, 0, op->phase == SIM_PHASE_BACKWARD ? "backward" : "forward");
    double tm;
    g_assert_true(profile_op_at(po, 1410, 0, &tm, NULL, NULL));
    g_assert_cmpint(op->ref_ns, ==, (gint64)llround(tm * 1e9));
  }
  /* Stages 0-6 of GPT-3 are the same computation: shared entries. */
  g_assert_cmpuint(price_table_n_entries(t), ==, 4);
  /* Its computations group as pipeline_node_id says. */
  g_autoptr(PipelineGroups) g = pipeline_computations(w, &err);
  g_assert_no_error(err);
  for (guint r = 0; r < w->n_ranks; r++)
    for (guint32 i = 0; i < w->ranks[r].n_ops; i++) {
      const SimOp *op = &w->ranks[r].ops[i];
      if (op->kind == SIM_OP_KERNEL)
        g_assert_cmpuint(g->node[r][i], ==,
                         pipeline_node_id(6, r / 3, op->microbatch,
                                          op->phase == SIM_PHASE_BACKWARD));
    }
}

/* ---- the bubble ------------------------------------------------------------- */

static void check_bubble(PipelineSchedule sch, guint S, guint M)
{
  g_autofree char *dir = test_tmpdir();
  const double tf = 0.010, tb = 0.021;
  g_autofree char *path = write_profile(dir, S, tf, tb, FALSE);
  g_autoptr(SimWorkload) w = make(path, M, 0, 1, sch);
  Mach x;
  mach_new(&x, w, "A100-SXM4-80GB", -1);
  GError *err = NULL;
  g_autoptr(SimResult) r = simulate(w, &x, 0, &err);
  g_assert_no_error(err);
  /* Balanced stages: T = (M + S - 1)(tf + tb), up to the 1 ns receives on
   * the critical path. */
  double T = (M + S - 1) * (tf + tb);
  g_assert_cmpfloat(fabs((double)r->time_ns * 1e-9 - T), <, 1e-6);
  double busy = 0;
  for (guint g = 0; g < S; g++) {
    g_assert_cmpfloat(fabs(r->per_gpu[g].kernel_ns * 1e-9 - M * (tf + tb)),
                      <, 1e-6);
    busy += r->per_gpu[g].kernel_ns;
  }
  /* Bubble fraction (S-1)/(M+S-1). */
  double bubble = 1 - busy / ((double)r->time_ns * S);
  g_assert_cmpfloat(fabs(bubble - (double)(S - 1) / (M + S - 1)), <, 1e-6);
  /* Energy: computations at 300 W, the rest blocked/idle at 80 W. */
  double e = S * M * (tf + tb) * 300 + 80 * (T * S - S * M * (tf + tb));
  g_assert_true(test_close(r->energy_j, e, 1e-6));
  mach_free(&x);
  test_rmdir(dir);
}

static void test_bubble(void)
{
  check_bubble(PIPELINE_1F1B, 4, 8);
  check_bubble(PIPELINE_1F1B, 3, 2);
  check_bubble(PIPELINE_1F1B, 8, 12);
  check_bubble(PIPELINE_GPIPE, 4, 8);
  check_bubble(PIPELINE_GPIPE, 2, 5);
}

/* ---- table-driven prices ------------------------------------------------------- */

static void test_prices(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = write_profile(dir, 1, 0.010, 0.020, FALSE);
  g_autoptr(SimWorkload) w = make(path, 1, 0, 1, PIPELINE_1F1B);
  Mach x;
  mach_new(&x, w, "A100-SXM4-80GB", -1);
  GError *err = NULL;
  /* Measured clock: measured time and energy. */
  g_autoptr(SimResult) r1 = simulate(w, &x, 1000, &err);
  g_assert_no_error(err);
  g_assert_cmpint(r1->time_ns, ==, (gint64)llround(0.030 * 1.25 * 1e9));
  g_assert_true(test_close(r1->energy_j, 0.030 * 1.25 * 200, 1e-6));
  /* Between measured clocks: linear interpolation (1100 MHz: halfway). */
  g_autoptr(SimResult) r2 = simulate(w, &x, 1100, &err);
  g_assert_no_error(err);
  double t = 0.030 * (1.25 + 1.1) / 2;
  double e = 0.030 * (1.25 * 200 + 1.1 * 240) / 2;
  g_assert_true(test_close((double)r2->time_ns * 1e-9, t, 1e-7));
  g_assert_true(test_close(r2->energy_j, e, 1e-6));
  /* Outside the measured range: an error, never an extrapolation. */
  g_autoptr(SimResult) r3 = simulate(w, &x, 900, &err);
  g_assert_null(r3);
  g_assert_error(err, TABLE_ERROR, TABLE_ERROR_RANGE);
  g_assert_nonnull(strstr(err->message, "900 MHz"));
  g_clear_error(&err);
  mach_free(&x);

  /* An explicit power limit caps a table-priced op at the highest
   * measured clock that fits (300 W at 1400, 240 W at 1200). */
  mach_new(&x, w, "A100-SXM4-80GB", 250);
  g_autoptr(SimResult) r4 = simulate(w, &x, 0, &err);
  g_assert_no_error(err);
  g_assert_cmpint(r4->time_ns, ==, (gint64)llround(0.030 * 1.1 * 1e9));
  g_assert_true(test_close(r4->energy_j, 0.030 * 1.1 * 240, 1e-6));
  mach_free(&x);
  test_rmdir(dir);
}

static void test_table(void)
{
  GError *err = NULL;
  g_autoptr(PriceTable) t = price_table_new();
  TablePoint p[3] = {{1400, 1.0 / 3, 100.0 / 7},
                     {1000, 0.5, 77.7},
                     {1200, 0.4, 80.1}};
  guint e;
  g_assert_true(price_table_add(t, "a b", p, 3, &e, &err));
  g_assert_cmpuint(e, ==, 0);
  g_assert_cmpstr(price_table_entry_name(t, 0), ==, "a_b");
  guint e2;
  g_assert_true(price_table_add(t, "same", p, 3, &e2, &err));
  g_assert_cmpuint(e2, ==, 0); /* identical points are shared */
  g_assert_true(price_table_map_shape(t, 5, 0, &err));
  g_assert_cmpint(price_table_shape_entry(t, 5), ==, 0);
  g_assert_cmpint(price_table_shape_entry(t, 4), ==, -1);
  g_assert_cmpint(price_table_shape_entry(t, 99), ==, -1);
  double tt, ee;
  g_assert_true(price_table_at(t, 0, 1100, &tt, &ee, &err));
  g_assert_true(test_close(tt, 0.45, 1e-12));
  g_assert_true(test_close(ee, (77.7 + 80.1) / 2, 1e-12));
  g_assert_true(price_table_at(t, 0, 0, &tt, &ee, &err));
  g_assert_cmpfloat(tt, ==, 1.0 / 3);
  g_assert_false(price_table_at(t, 0, 1410, &tt, &ee, &err));
  g_assert_error(err, TABLE_ERROR, TABLE_ERROR_RANGE);
  g_clear_error(&err);
  /* Round trip, bit for bit. */
  g_autofree char *txt = price_table_to_string(t);
  g_autoptr(PriceTable) u = price_table_from_string(txt, &err);
  g_assert_no_error(err);
  guint n;
  const TablePoint *q = price_table_points(u, 0, &n);
  g_assert_cmpuint(n, ==, 3);
  g_assert_cmpuint(q[0].sm_mhz, ==, 1000);
  g_assert_cmpfloat(q[2].time_s, ==, 1.0 / 3);
  g_assert_cmpfloat(q[2].energy_j, ==, 100.0 / 7);
  g_assert_cmpint(price_table_shape_entry(u, 5), ==, 0);
  /* Bad points and bad text name what is wrong. */
  TablePoint dup[2] = {{1000, 1, 1}, {1000, 2, 2}};
  g_assert_false(price_table_add(t, "d", dup, 2, &e, &err));
  g_assert_error(err, TABLE_ERROR, TABLE_ERROR_INVALID);
  g_assert_nonnull(strstr(err->message, "twice"));
  g_clear_error(&err);
  TablePoint neg[1] = {{1000, -1, 1}};
  g_assert_false(price_table_add(t, "n", neg, 1, &e, &err));
  g_assert_nonnull(strstr(err->message, "> 0"));
  g_clear_error(&err);
  g_assert_false(price_table_map_shape(t, 1, 7, &err));
  g_clear_error(&err);
  static const char *const bad[] = {
    "", "price_table 2\n", "price_table 1\nentry x 2 1000 1 1\n",
    "price_table 1\nentry x 1 1000 1 1 9\n", "price_table 1\nshape 1 0\n",
    "price_table 1\nbogus\n", "price_table 1\nentry x 1 1000 abc 1\n", NULL};
  for (guint i = 0; bad[i] != NULL; i++) {
    g_autoptr(PriceTable) b = price_table_from_string(bad[i], &err);
    g_assert_null(b);
    g_assert_error(err, TABLE_ERROR, TABLE_ERROR_INVALID);
    g_assert_nonnull(strstr(err->message, "line"));
    g_clear_error(&err);
  }
  /* A workload without a table has none; a table naming a shape the
   * workload lacks is refused. */
  g_autoptr(SimWorkload) w = sim_workload_new(1);
  g_assert_null(price_table_from_workload(w, &err));
  g_assert_no_error(err);
  price_table_attach(t, w);
  g_assert_null(price_table_from_workload(w, &err));
  g_assert_error(err, TABLE_ERROR, TABLE_ERROR_INVALID);
  g_clear_error(&err);
}

/* A plan asking for an unmeasured clock is caught before the run. */
static void test_check_plan(void)
{
  g_autoptr(SimWorkload) w = make(A100_PROFILE, 2, 2, 1, PIPELINE_1F1B);
  GError *err = NULL;
  g_autoptr(PriceTable) t = price_table_from_workload(w, &err);
  SimClocks ok = {1005, 0}, bad = {1980, 0};
  g_autoptr(SimPlan) p1 = sim_plan_new_uniform(w->n_ranks, ok);
  g_assert_true(price_table_check_plan(t, w, p1, &err));
  g_autoptr(SimPlan) p2 = sim_plan_new_uniform(w->n_ranks, bad);
  g_assert_false(price_table_check_plan(t, w, p2, &err));
  g_assert_error(err, TABLE_ERROR, TABLE_ERROR_RANGE);
  g_assert_nonnull(strstr(err->message, "855..1410"));
  g_clear_error(&err);
}

/* ---- errors -------------------------------------------------------------------- */

static void test_errors(void)
{
  GError *err = NULL;
  g_autoptr(Profile) p = profile_load(A100_PROFILE, &err);
  g_assert_no_error(err);
  PipelineConfig cfg;
  pipeline_config_init(&cfg);
  g_assert_null(pipeline_from_profile(p, &cfg, &err)); /* microbatches 0 */
  g_assert_error(err, PIPELINE_ERROR, PIPELINE_ERROR_INVALID);
  g_assert_nonnull(strstr(err->message, "microbatches"));
  g_clear_error(&err);
  cfg.microbatches = 4;
  cfg.stages = 9;
  g_assert_null(pipeline_from_profile(p, &cfg, &err));
  g_assert_error(err, PIPELINE_ERROR, PIPELINE_ERROR_INVALID);
  g_assert_nonnull(strstr(err->message, "stages"));
  g_clear_error(&err);
  cfg.stages = 0;
  cfg.activation_bytes = -1;
  g_assert_null(pipeline_from_profile(p, &cfg, &err));
  g_assert_nonnull(strstr(err->message, "activation_bytes"));
  g_clear_error(&err);
  cfg.activation_bytes = 0;
  cfg.dp = 0;
  g_assert_null(pipeline_from_profile(p, &cfg, &err));
  g_assert_nonnull(strstr(err->message, "dp"));
  g_clear_error(&err);
  PipelineSchedule sch;
  g_assert_false(pipeline_schedule_from_name("interleaved", &sch, &err));
  g_assert_nonnull(strstr(err->message, "gpipe"));
  g_clear_error(&err);
  g_assert_true(pipeline_schedule_from_name("gpipe", &sch, &err));
  g_assert_cmpint(sch, ==, PIPELINE_GPIPE);

  /* A profile lacking a stage's backward names it. */
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = write_profile(dir, 3, 0.01, 0.02, TRUE);
  g_autoptr(Profile) q = profile_load(path, &err);
  g_assert_no_error(err);
  cfg.dp = 1;
  g_assert_null(pipeline_from_profile(q, &cfg, &err));
  g_assert_error(err, PIPELINE_ERROR, PIPELINE_ERROR_PROFILE);
  g_assert_nonnull(strstr(err->message, "'backward' rows for stage 2"));
  g_clear_error(&err);
  /* Two stages of it are fine. */
  cfg.stages = 2;
  g_autoptr(SimWorkload) w = pipeline_from_profile(q, &cfg, &err);
  g_assert_no_error(err);
  g_assert_cmpuint(w->n_ranks, ==, 2);
  test_rmdir(dir);
}

/* A pipeline that straggles makes the others wait, blocked, at the DP
 * synchronisation; transfers with bytes go through the network. */
static void test_dp_sync(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = write_profile(dir, 2, 0.010, 0.020, FALSE);
  g_autoptr(Profile) p = profile_load(path, NULL);
  PipelineConfig cfg;
  pipeline_config_init(&cfg);
  cfg.microbatches = 4;
  cfg.dp = 2;
  cfg.activation_bytes = 1e8;
  cfg.grad_bytes = 1e9;
  GError *err = NULL;
  g_autoptr(SimWorkload) w = pipeline_from_profile(p, &cfg, &err);
  g_assert_no_error(err);
  Mach x;
  mach_new(&x, w, "A100-SXM4-80GB", -1);
  x.c->idle_power_w = 40; /* tell blocked from idle */
  cluster_machine_free(x.m);
  x.m = cluster_machine_new(x.c, w, x.cat, 0, &err);
  g_assert_no_error(err);
  g_autoptr(SimResult) r = simulate(w, &x, 0, &err);
  g_assert_no_error(err);
  /* Real transfers: slower than the free-transfer bubble formula. */
  g_assert_cmpfloat((double)r->time_ns * 1e-9, >, (4 + 1) * 0.030 + 1e-3);
  for (guint g = 0; g < w->n_ranks; g++)
    g_assert_cmpfloat(r->per_gpu[g].comm_ns, >, 0);
  mach_free(&x);
  /* The two pipelines share each stage's program; the workload replays
   * exactly as its materialised copy. */
  g_assert_cmpuint(sim_workload_n_programs(w), ==, 2);
  g_autoptr(SimWorkload) m = pipeline_from_profile(p, &cfg, &err);
  g_assert_no_error(err);
  g_assert_true(sim_workload_materialise(m, &err));
  g_assert_cmpuint(sim_workload_n_programs(m), ==, 4);
  test_assert_same_replay(w, m, "A100-SXM4-80GB");
  test_rmdir(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/pipeline/structure", test_structure);
  g_test_add_func("/pipeline/bubble", test_bubble);
  g_test_add_func("/pipeline/prices", test_prices);
  g_test_add_func("/pipeline/table", test_table);
  g_test_add_func("/pipeline/check-plan", test_check_plan);
  g_test_add_func("/pipeline/errors", test_errors);
  g_test_add_func("/pipeline/dp-sync", test_dp_sync);
  return g_test_run();
}
