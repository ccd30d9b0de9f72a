/* tests/test-cluster.c -- cluster validation and the SimMachine it builds:
 * rank/GPU mismatch, variability factors (off, in range, deterministic,
 * stable when the cluster grows), kernel time scaling against the
 * reference GPU, collective and p2p pricing by placement, overrides. */
#include "models/cluster.h"
#include "models/dvfs/policy.h"

#include <math.h>
#include <string.h>

#include "tests/testutil.h"

#define H100 "H100-SXM5-80GB"
#define A100 "A100-SXM4-80GB"

/* Shapes of the test workload. */
enum { SHAPE_GEMM, SHAPE_BIG_GEMM, SHAPE_ELEMWISE, SHAPE_AR, N_SHAPES };

typedef struct {
  GpuCatalogue *cat;
  NetSpec *net;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
  GError *error = NULL;
  f->cat = gpu_catalogue_new();
  f->net = net_preset("dgx-h100", &error);
  g_assert_no_error(error);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
  gpu_catalogue_free(f->cat);
  net_spec_free(f->net);
}

static const GpuSpec *spec(Fixture *f, const char *name)
{
  GError *error = NULL;
  const GpuSpec *s = gpu_catalogue_lookup(f->cat, name, &error);
  g_assert_no_error(error);
  g_assert_nonnull(s);
  return s;
}

static Cluster *cluster(Fixture *f, const char *gpu, guint n, guint per_node)
{
  GError *error = NULL;
  Cluster *c = cluster_new(spec(f, gpu), f->net, n, per_node, &error);
  g_assert_no_error(error);
  g_assert_nonnull(c);
  return c;
}

/* n ranks in groups: TP = consecutive blocks of `tp` ranks, then DP groups
 * of ranks equal modulo tp.  Every rank runs one GEMM, one big GEMM, one
 * elementwise kernel, an all-reduce in its TP group and one in its DP
 * group.  Group ids: TP groups first (n/tp of them), then DP (tp). */
static SimWorkload *workload(guint n, guint tp, const char *ref_gpu)
{
  g_assert_cmpuint(n % tp, ==, 0);
  SimWorkload *w = sim_workload_new(n);
  w->ref_gpu = g_strdup(ref_gpu);

  SimShape sh[N_SHAPES];
  memset(sh, 0, sizeof(sh));
  /* A 1024^3 BF16 GEMM: compute-bound, small enough for no power cap to
   * bind on an H100 at auto clocks (about 600 W of 700 in the model). */
  sh[SHAPE_GEMM].flops = 2.0 * 1024 * 1024 * 1024;
  sh[SHAPE_GEMM].bytes = 3.0 * 1024 * 1024 * 2;
  sh[SHAPE_GEMM].klass = SIM_CLASS_GEMM;
  sh[SHAPE_GEMM].tensor = TRUE;
  sh[SHAPE_GEMM].name = sim_workload_intern(w, "gemm1024");
  /* An 8192^3 GEMM: the one that hits the A100's power limit. */
  sh[SHAPE_BIG_GEMM].flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  sh[SHAPE_BIG_GEMM].bytes = 3.0 * 8192.0 * 8192.0 * 2;
  sh[SHAPE_BIG_GEMM].klass = SIM_CLASS_GEMM;
  sh[SHAPE_BIG_GEMM].tensor = TRUE;
  sh[SHAPE_BIG_GEMM].name = sim_workload_intern(w, "gemm8192");
  sh[SHAPE_ELEMWISE].bytes = 64e6;
  sh[SHAPE_ELEMWISE].flops = 8e6;
  sh[SHAPE_ELEMWISE].klass = SIM_CLASS_ELEMENTWISE;
  sh[SHAPE_ELEMWISE].name = sim_workload_intern(w, "gelu");
  sh[SHAPE_AR].bytes = 64e6;
  sh[SHAPE_AR].klass = SIM_CLASS_COMM;
  sh[SHAPE_AR].coll = SIM_COLL_ALL_REDUCE;
  sh[SHAPE_AR].name = sim_workload_intern(w, "allreduce");
  for (guint i = 0; i < N_SHAPES; i++)
    g_assert_cmpuint(sim_workload_add_shape(w, &sh[i]), ==, i);

  g_autofree guint32 *members = g_new(guint32, n);
  for (guint t = 0; t < n / tp; t++) {
    for (guint i = 0; i < tp; i++)
      members[i] = t * tp + i;
    g_assert_cmpuint(sim_workload_add_group(w, members, tp), ==, t);
  }
  for (guint d = 0; d < tp; d++) {
    for (guint i = 0; i < n / tp; i++)
      members[i] = d + i * tp;
    g_assert_cmpuint(sim_workload_add_group(w, members, n / tp), ==,
                     n / tp + d);
  }

  g_autoptr(SimRankBuilder) b = sim_rank_builder_new();
  for (guint r = 0; r < n; r++) {
    SimOp op = { 0 };
    op.wait = SIM_NO_WAIT;
    op.microbatch = G_MAXUINT16;
    op.layer = 255;
    op.kind = SIM_OP_KERNEL;
    for (guint s = SHAPE_GEMM; s <= SHAPE_ELEMWISE; s++) {
      op.shape = s;
      op.klass = sh[s].klass;
      op.name = sh[s].name;
      op.ref_ns = 1000;
      sim_rank_builder_add(b, &op);
    }
    op.kind = SIM_OP_COLLECTIVE;
    op.shape = SHAPE_AR;
    op.klass = SIM_CLASS_COMM;
    op.name = sh[SHAPE_AR].name;
    op.ref_ns = 0;
    op.peer = r / tp;
    sim_rank_builder_add(b, &op);
    op.peer = n / tp + r % tp;
    sim_rank_builder_add(b, &op);
    sim_rank_builder_finish(b, w, r);
  }
  GError *error = NULL;
  g_assert_true(sim_workload_validate(w, &error));
  g_assert_no_error(error);
  return w;
}

static ClusterMachine *machine_seeded(Fixture *f, const Cluster *c,
                                      const SimWorkload *w, guint64 seed)
{
  GError *error = NULL;
  ClusterMachine *m = cluster_machine_new(c, w, f->cat, seed, &error);
  g_assert_no_error(error);
  g_assert_nonnull(m);
  return m;
}

static ClusterMachine *machine(Fixture *f, const Cluster *c,
                               const SimWorkload *w)
{
  return machine_seeded(f, c, w, 0);
}

static SimCost cost(ClusterMachine *m, guint gpu, guint32 shape, guint sm,
                    guint mem)
{
  const SimMachine *s = cluster_machine_sim(m);
  SimClocks req = { (guint16)sm, (guint16)mem };
  SimCost out;
  memset(&out, 0xff, sizeof(out));
  s->kernel_cost(s->ctx, gpu, shape, req, 0, &out);
  return out;
}

/* ------------------------------------------------------------------------ */

static void test_new_and_validate(Fixture *f, gconstpointer data)
{
  GError *error = NULL;
  const GpuSpec *h = spec(f, H100);

  g_autoptr(Cluster) c = cluster_new(h, f->net, 16, 0, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(c->gpus_per_node, ==, 8);
  g_assert_cmpuint(cluster_n_nodes(c), ==, 2);
  g_assert_cmpuint(cluster_gpu_node(c, 7), ==, 0);
  g_assert_cmpuint(cluster_gpu_node(c, 8), ==, 1);
  g_assert_true(c->gpu != h);
  g_assert_cmpstr(c->gpu->name, ==, h->name);
  g_assert_true(c->net != f->net);
  g_assert_cmpstr(c->net->name, ==, "dgx-h100");
  g_assert_cmpfloat(c->power_limit_w, ==, -1.0);
  g_assert_cmpfloat(c->idle_power_w, ==, -1.0);
  g_assert_cmpfloat(c->blocked_power_w, ==, -1.0);
  g_assert_cmpfloat(c->comm_power_w, ==, -1.0);
  g_assert_cmpfloat(c->switch_latency_ms, ==, -1.0);
  g_assert_cmpfloat(c->perf_spread, ==, 0.0);
  g_assert_cmpfloat(c->power_spread, ==, 0.0);
  g_assert_true(cluster_validate(c, &error));
  g_assert_no_error(error);

  SimClocks d = cluster_default_clocks(c);
  g_assert_cmpuint(d.sm_mhz, ==, 0);
  g_assert_cmpuint(d.mem_mhz, ==, 0);

  /* A partly filled last node. */
  g_autoptr(Cluster) p = cluster_new(h, f->net, 12, 8, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(cluster_n_nodes(p), ==, 2);

  static const guint bad[][2] = {
    { 0, 8 }, { CLUSTER_MAX_GPUS + 1, 8 }, { 8, 65 }, { 8, 1000 },
  };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    Cluster *x = cluster_new(h, f->net, bad[i][0], bad[i][1], &error);
    g_assert_null(x);
    g_assert_error(error, CLUSTER_ERROR, CLUSTER_ERROR_INVALID);
    g_clear_error(&error);
  }
  g_autoptr(Cluster) big = cluster_new(h, f->net, CLUSTER_MAX_GPUS, 64, &error);
  g_assert_no_error(error);
  g_assert_nonnull(big);

  /* An invalid network spec is refused with its own error. */
  g_autoptr(NetSpec) broken = net_spec_copy(f->net);
  broken->nic_bw_gbps = -1;
  g_assert_null(cluster_new(h, broken, 8, 8, &error));
  g_assert_error(error, NET_ERROR, NET_ERROR_INVALID);
  g_clear_error(&error);
}

static void test_mismatch(Fixture *f, gconstpointer data)
{
  g_autoptr(Cluster) c = cluster(f, H100, 16, 8);
  g_autoptr(SimWorkload) w = workload(8, 8, H100);
  GError *error = NULL;
  ClusterMachine *m = cluster_machine_new(c, w, f->cat, 0, &error);
  g_assert_null(m);
  g_assert_error(error, CLUSTER_ERROR, CLUSTER_ERROR_MISMATCH);
  g_assert_nonnull(strstr(error->message, "8 ranks"));
  g_assert_nonnull(strstr(error->message, "16 GPUs"));
  g_clear_error(&error);
}

static void test_bad_shape(Fixture *f, gconstpointer data)
{
  g_autoptr(Cluster) c = cluster(f, H100, 8, 8);
  g_autoptr(SimWorkload) w = workload(8, 8, H100);
  g_array_index(w->shapes, SimShape, SHAPE_ELEMWISE).bytes = NAN;
  GError *error = NULL;
  g_assert_null(cluster_machine_new(c, w, f->cat, 0, &error));
  g_assert_error(error, CLUSTER_ERROR, CLUSTER_ERROR_MISMATCH);
  g_assert_nonnull(strstr(error->message, "gelu"));
  g_clear_error(&error);
}

static void test_variability_off(Fixture *f, gconstpointer data)
{
  g_autoptr(Cluster) c = cluster(f, H100, 16, 8);
  g_autoptr(SimWorkload) w = workload(16, 8, H100);
  /* A seed alone changes nothing. */
  g_autoptr(ClusterMachine) m = machine_seeded(f, c, w, 1234);
  const SimMachine *s = cluster_machine_sim(m);
  g_assert_cmpuint(s->n_gpus, ==, 16);
  g_assert_null(s->iteration_begin);
  g_assert_true(s->ctx == m);

  for (guint g = 0; g < 16; g++) {
    g_assert_cmpfloat(cluster_machine_perf_factor(m, g), ==, 1.0);
    g_assert_cmpfloat(cluster_machine_power_factor(m, g), ==, 1.0);
    g_assert_cmpfloat(s->idle_power_w[g], ==, c->gpu->idle_power_w.v);
    g_assert_cmpfloat(s->blocked_power_w[g], ==, c->gpu->blocked_power_w.v);
    g_assert_cmpfloat(s->comm_power_w[g], ==, c->gpu->comm_power_w.v);
    for (guint32 sh = SHAPE_GEMM; sh <= SHAPE_ELEMWISE; sh++) {
      SimCost a = cost(m, 0, sh, 0, 0), b = cost(m, g, sh, 0, 0);
      g_assert_cmpfloat(a.time_scale, ==, b.time_scale);
      g_assert_cmpfloat(a.power_w, ==, b.power_w);
      g_assert_cmpuint(a.sm_mhz, ==, b.sm_mhz);
      g_assert_cmpuint(a.mem_mhz, ==, b.mem_mhz);
    }
  }
  g_assert_cmpint(s->switch_latency_ns, ==,
                  (gint64)llround(c->gpu->switch_latency_ms.v * 1e6));
}

static void test_variability_on(Fixture *f, gconstpointer data)
{
  g_autoptr(Cluster) c = cluster(f, H100, 64, 8);
  c->perf_spread = 0.05;
  c->power_spread = 0.1;
  g_autoptr(SimWorkload) w = workload(64, 8, H100);
  g_autoptr(ClusterMachine) m = machine_seeded(f, c, w, 42);
  g_autoptr(ClusterMachine) again = machine_seeded(f, c, w, 42);
  const SimMachine *s = cluster_machine_sim(m);

  gboolean perf_differs = FALSE, power_differs = FALSE;
  for (guint g = 0; g < 64; g++) {
    double pf = cluster_machine_perf_factor(m, g);
    double wf = cluster_machine_power_factor(m, g);
    g_assert_cmpfloat(pf, >=, 1.0);
    g_assert_cmpfloat(pf, <, 1.05);
    g_assert_cmpfloat(wf, >=, 0.9);
    g_assert_cmpfloat(wf, <, 1.1);
    perf_differs |= pf != cluster_machine_perf_factor(m, 0);
    power_differs |= wf != cluster_machine_power_factor(m, 0);
    /* Deterministic: the same cluster gives the same bits. */
    g_assert_cmpfloat(pf, ==, cluster_machine_perf_factor(again, g));
    g_assert_cmpfloat(wf, ==, cluster_machine_power_factor(again, g));
    /* Factors reach the power tables and the kernel costs. */
    g_assert_true(test_close(s->idle_power_w[g],
                             c->gpu->idle_power_w.v * wf, 1e-15));
    g_assert_true(test_close(s->comm_power_w[g],
                             c->gpu->comm_power_w.v * wf, 1e-15));
    SimCost k0 = cost(m, 0, SHAPE_GEMM, 0, 0), kg = cost(m, g, SHAPE_GEMM, 0, 0);
    g_assert_true(test_close(kg.time_scale / pf,
                             k0.time_scale / cluster_machine_perf_factor(m, 0),
                             1e-12));
    g_assert_true(test_close(
      kg.power_w / wf, k0.power_w / cluster_machine_power_factor(m, 0),
      1e-12));
  }
  g_assert_true(perf_differs);
  g_assert_true(power_differs);

  /* A GPU's factors do not move when the cluster grows. */
  g_autoptr(Cluster) small = cluster(f, H100, 8, 8);
  small->perf_spread = c->perf_spread;
  small->power_spread = c->power_spread;
  g_autoptr(SimWorkload) ws = workload(8, 8, H100);
  g_autoptr(ClusterMachine) ms = machine_seeded(f, small, ws, 42);
  for (guint g = 0; g < 8; g++) {
    g_assert_cmpfloat(cluster_machine_perf_factor(ms, g), ==,
                      cluster_machine_perf_factor(m, g));
    g_assert_cmpfloat(cluster_machine_power_factor(ms, g), ==,
                      cluster_machine_power_factor(m, g));
  }

  /* Another seed, other factors. */
  g_autoptr(ClusterMachine) other = machine_seeded(f, c, w, 43);
  gboolean seed_matters = FALSE;
  for (guint g = 0; g < 64; g++)
    seed_matters |= cluster_machine_perf_factor(other, g) !=
                    cluster_machine_perf_factor(m, g);
  g_assert_true(seed_matters);

  /* One spread at 0 keeps its factor exactly 1, the other still varies. */
  c->perf_spread = 0.0;
  g_autoptr(ClusterMachine) half = machine_seeded(f, c, w, 43);
  for (guint g = 0; g < 64; g++) {
    g_assert_cmpfloat(cluster_machine_perf_factor(half, g), ==, 1.0);
    g_assert_cmpfloat(cluster_machine_power_factor(half, g), ==,
                      cluster_machine_power_factor(other, g));
  }
}

static void test_time_scale(Fixture *f, gconstpointer data)
{
  g_autoptr(Cluster) c = cluster(f, H100, 8, 8);
  g_autoptr(SimWorkload) w = workload(8, 8, H100);
  g_autoptr(ClusterMachine) m = machine(f, c, w);
  guint sm_auto = gpu_snap_sm(c->gpu, 0);

  /* Reference GPU == cluster GPU, auto clocks, no cap: exactly the
   * recorded duration. */
  SimCost a = cost(m, 3, SHAPE_GEMM, 0, 0);
  g_assert_cmpuint(a.sm_mhz, ==, sm_auto);
  g_assert_cmpuint(a.mem_mhz, >, 0);
  g_assert_true(test_close(a.time_scale, 1.0, 1e-12));
  g_assert_cmpfloat(a.power_w, >, 0.0);
  g_assert_cmpfloat(a.power_w, <=, c->gpu->power_limit_w.v);

  /* Explicitly asking for the auto clocks is the same price. */
  SimCost e = cost(m, 3, SHAPE_GEMM, sm_auto, 0);
  g_assert_true(test_close(e.time_scale, a.time_scale, 1e-12));

  /* Lower SM clocks: slower, and never faster further down. */
  double prev = a.time_scale;
  for (guint sm = sm_auto - 15 * 20; sm >= c->gpu->sm_min_mhz.v + 15 * 10;
       sm -= 15 * 20) {
    SimCost lo = cost(m, 3, SHAPE_GEMM, sm, 0);
    g_assert_cmpfloat(lo.time_scale, >, 1.0);
    g_assert_cmpfloat(lo.time_scale, >=, prev);
    g_assert_cmpuint(lo.sm_mhz, <=, sm_auto);
    prev = lo.time_scale;
  }

  /* Pure: same arguments, same answer (cached or not, any iteration). */
  const SimMachine *s = cluster_machine_sim(m);
  for (guint i = 0; i < 3; i++) {
    SimClocks req = { 1005, 0 };
    SimCost x, y;
    s->kernel_cost(s->ctx, 1, SHAPE_ELEMWISE, req, i, &x);
    s->kernel_cost(s->ctx, 1, SHAPE_ELEMWISE, req, i + 7, &y);
    g_assert_cmpfloat(x.time_scale, ==, y.time_scale);
    g_assert_cmpfloat(x.power_w, ==, y.power_w);
    g_assert_cmpuint(x.sm_mhz, ==, y.sm_mhz);
    g_assert_cmpuint(x.mem_mhz, ==, y.mem_mhz);
  }
  /* The policy's plan snaps a request; the machine prices what it is
   * given (/cluster/snap-once prices a plan from 1013 MHz). */
  SimCost p = cost(m, 0, SHAPE_GEMM, gpu_snap_sm(c->gpu, 1201), 0);
  g_assert_cmpuint(p.sm_mhz, ==, 1200);

  /* NULL or unknown ref_gpu: the cluster's own GPU. */
  g_autoptr(SimWorkload) wn = workload(8, 8, NULL);
  g_autoptr(ClusterMachine) mn = machine(f, c, wn);
  g_assert_true(test_close(cost(mn, 0, SHAPE_GEMM, 0, 0).time_scale, 1.0,
                           1e-12));
  g_autoptr(SimWorkload) wu = workload(8, 8, "TPU-v9");
  g_autoptr(ClusterMachine) mu = machine(f, c, wu);
  g_assert_true(test_close(cost(mu, 0, SHAPE_GEMM, 0, 0).time_scale, 1.0,
                           1e-12));
  /* No catalogue at all: the same. */
  GError *error = NULL;
  g_autoptr(ClusterMachine) mc = cluster_machine_new(c, w, NULL, 0, &error);
  g_assert_no_error(error);
  g_assert_true(test_close(cost(mc, 0, SHAPE_GEMM, 0, 0).time_scale, 1.0,
                           1e-12));

  /* Recorded on an A100, replayed on an H100: a big GEMM gets faster. */
  g_autoptr(SimWorkload) wa = workload(8, 8, A100);
  g_autoptr(ClusterMachine) ma = machine(f, c, wa);
  g_assert_cmpfloat(cost(ma, 0, SHAPE_BIG_GEMM, 0, 0).time_scale, <, 1.0);
}

/* The reference time has no power cap: a power-limited big GEMM on the
 * same GPU is slower than its reference, and a lower limit makes it slower
 * still and draws no more than the limit. */
/* A GEMM at the clocks of fixed{sm, mem}'s plan on c for w, priced by m. */
static SimCost fixed_cost(ClusterMachine *m, const Cluster *c,
                          const SimWorkload *w, guint sm, guint mem)
{
  DvfsPolicy p;
  dvfs_policy_init(&p, DVFS_FIXED);
  p.sm_mhz = sm;
  p.mem_mhz = mem;
  GError *error = NULL;
  g_autoptr(SimPlan) plan = dvfs_plan(&p, c, w, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(plan->n_pairs, ==, 1);
  return cost(m, 0, SHAPE_GEMM, plan->pairs[0].sm_mhz,
              plan->pairs[0].mem_mhz);
}

/* The plan is where a requested clock becomes a supported one: 1013 MHz
 * on an A100 (steps of 15 from 210) is planned and priced as 1020,
 * exactly. */
static void test_snap_once(Fixture *f, gconstpointer data)
{
  g_autoptr(Cluster) c = cluster(f, A100, 8, 8);
  g_autoptr(SimWorkload) w = workload(8, 8, A100);
  g_autoptr(ClusterMachine) m = machine(f, c, w);
  SimCost asked = fixed_cost(m, c, w, 1013, 0);
  SimCost snapped = fixed_cost(m, c, w, 1020, 0);
  g_assert_cmpuint(asked.sm_mhz, ==, 1020);
  g_assert_cmpfloat(asked.time_scale, ==, snapped.time_scale);
  g_assert_cmpfloat(asked.power_w, ==, snapped.power_w);
  SimCost direct = cost(m, 0, SHAPE_GEMM, 1020, 0);
  g_assert_cmpfloat(asked.time_scale, ==, direct.time_scale);
  g_assert_cmpfloat(asked.power_w, ==, direct.power_w);
}

/* A boost controller whose steps are not whole SM clock steps (20 MHz on
 * a 15 MHz grid) hands the machine clocks off the grid: the machine snaps
 * those on the way to the model. */
static void test_off_grid(Fixture *f, gconstpointer data)
{
  g_autoptr(GpuSpec) g = gpu_spec_copy(spec(f, A100));
  g->boost_step_mhz.v = 20;
  GError *error = NULL;
  g_autoptr(Cluster) c = cluster_new(g, f->net, 8, 8, &error);
  g_assert_no_error(error);
  c->boost = CLUSTER_BOOST_CONTROLLER;
  g_autoptr(SimWorkload) w = workload(8, 8, A100);
  g_autoptr(ClusterMachine) m = machine(f, c, w);
  SimCost off = cost(m, 0, SHAPE_GEMM, 1013, 0);
  SimCost on = cost(m, 0, SHAPE_GEMM, 1020, 0);
  g_assert_cmpuint(off.sm_mhz, ==, 1020);
  g_assert_cmpfloat(off.time_scale, ==, on.time_scale);
  g_assert_cmpfloat(off.power_w, ==, on.power_w);
}

static void test_power_cap(Fixture *f, gconstpointer data)
{
  g_autoptr(Cluster) c = cluster(f, A100, 8, 8);
  g_autoptr(SimWorkload) w = workload(8, 8, A100);
  g_autoptr(ClusterMachine) m = machine(f, c, w);
  SimCost def = cost(m, 0, SHAPE_BIG_GEMM, 0, 0);
  g_assert_cmpfloat(def.time_scale, >=, 1.0);
  g_assert_cmpfloat(def.power_w, <=, c->gpu->power_limit_w.v + 1e-9);

  c->power_limit_w = c->gpu->power_min_w.v + 0.25 * (c->gpu->power_limit_w.v -
                                                     c->gpu->power_min_w.v);
  g_autoptr(ClusterMachine) capped = machine(f, c, w);
  SimCost low = cost(capped, 0, SHAPE_BIG_GEMM, 0, 0);
  g_assert_cmpfloat(low.time_scale, >, def.time_scale);
  g_assert_cmpfloat(low.power_w, <, def.power_w);
  g_assert_cmpuint(low.sm_mhz, <, def.sm_mhz);
}

static void test_overrides(Fixture *f, gconstpointer data)
{
  g_autoptr(Cluster) c = cluster(f, H100, 8, 8);
  /* Unset: the GPU model's powers. */
  g_assert_cmpfloat(cluster_idle_power_w(c), ==, c->gpu->idle_power_w.v);
  g_assert_cmpfloat(cluster_blocked_power_w(c), ==,
                    c->gpu->blocked_power_w.v);
  g_assert_cmpfloat(cluster_comm_power_w(c), ==, c->gpu->comm_power_w.v);
  c->idle_power_w = 77.0;
  c->blocked_power_w = 88.0;
  c->comm_power_w = 99.0;
  c->switch_latency_ms = 2.5;
  g_autoptr(SimWorkload) w = workload(8, 8, H100);
  g_autoptr(ClusterMachine) m = machine(f, c, w);
  const SimMachine *s = cluster_machine_sim(m);
  g_assert_cmpfloat(cluster_idle_power_w(c), ==, 77.0);
  g_assert_cmpfloat(cluster_blocked_power_w(c), ==, 88.0);
  g_assert_cmpfloat(cluster_comm_power_w(c), ==, 99.0);
  for (guint g = 0; g < 8; g++) {
    g_assert_cmpfloat(s->idle_power_w[g], ==, 77.0);
    g_assert_cmpfloat(s->blocked_power_w[g], ==, 88.0);
    g_assert_cmpfloat(s->comm_power_w[g], ==, 99.0);
  }
  g_assert_cmpint(s->switch_latency_ns, ==, 2500000);

  /* Zero is a value, not "unset". */
  c->switch_latency_ms = 0.0;
  c->idle_power_w = 0.0;
  g_autoptr(ClusterMachine) z = machine(f, c, w);
  g_assert_cmpint(cluster_machine_sim(z)->switch_latency_ns, ==, 0);
  g_assert_cmpfloat(cluster_machine_sim(z)->idle_power_w[0], ==, 0.0);
}

typedef struct {
  const char *what;
  gsize offset;  /* of the double field in Cluster */
  double value;
} BadOverride;

static const BadOverride bad_overrides[] = {
  { "power-too-low", G_STRUCT_OFFSET(Cluster, power_limit_w), 1.0 },
  { "power-too-high", G_STRUCT_OFFSET(Cluster, power_limit_w), 1e6 },
  { "power-nan", G_STRUCT_OFFSET(Cluster, power_limit_w), NAN },
  { "idle-inf", G_STRUCT_OFFSET(Cluster, idle_power_w), INFINITY },
  { "blocked-nan", G_STRUCT_OFFSET(Cluster, blocked_power_w), NAN },
  { "comm-inf", G_STRUCT_OFFSET(Cluster, comm_power_w), INFINITY },
  { "latency-nan", G_STRUCT_OFFSET(Cluster, switch_latency_ms), NAN },
  { "perf-spread-neg", G_STRUCT_OFFSET(Cluster, perf_spread), -0.1 },
  { "perf-spread-big", G_STRUCT_OFFSET(Cluster, perf_spread), 0.6 },
  { "power-spread-nan", G_STRUCT_OFFSET(Cluster, power_spread), NAN },
  { "power-spread-big", G_STRUCT_OFFSET(Cluster, power_spread), 0.51 },
};

static void test_bad_override(gconstpointer data)
{
  const BadOverride *b = data;
  Fixture fx;
  fixture_setup(&fx, NULL);
  {
    g_autoptr(Cluster) c = cluster(&fx, H100, 8, 8);
    g_autoptr(SimWorkload) w = workload(8, 8, H100);
    G_STRUCT_MEMBER(double, c, b->offset) = b->value;

    GError *error = NULL;
    g_assert_false(cluster_validate(c, &error));
    g_assert_error(error, CLUSTER_ERROR, CLUSTER_ERROR_INVALID);
    g_clear_error(&error);
    g_assert_null(cluster_machine_new(c, w, fx.cat, 0, &error));
    g_assert_error(error, CLUSTER_ERROR, CLUSTER_ERROR_INVALID);
    g_clear_error(&error);
  }
  fixture_teardown(&fx, NULL);
}

static void test_power_limit_range(Fixture *f, gconstpointer data)
{
  g_autoptr(Cluster) c = cluster(f, A100, 8, 8);
  GError *error = NULL;
  c->power_limit_w = c->gpu->power_min_w.v - 1.0;
  g_assert_false(cluster_validate(c, &error));
  g_assert_error(error, CLUSTER_ERROR, CLUSTER_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "power_limit_w"));
  g_assert_nonnull(strstr(error->message, A100));
  g_clear_error(&error);
  c->power_limit_w = c->gpu->power_min_w.v;
  g_assert_true(cluster_validate(c, &error));
  c->power_limit_w = c->gpu->power_max_w.v;
  g_assert_true(cluster_validate(c, &error));
  c->power_limit_w = -1.0;
  g_assert_true(cluster_validate(c, &error));
  g_assert_no_error(error);
}

/* The node and facility (models/node.h): "none" and pue 1 by default,
 * kept by cluster_copy, refused when out of range; a preset's wall power
 * at a hand-computed point (hgx-h100 at 8 x 700 W with the NVSwitches
 * active and the NICs idle: Latif et al.'s 8.4 kW, on which its other_w
 * is fitted) and an unknown preset named. */
static void test_node(Fixture *f, gconstpointer data)
{
  g_autoptr(Cluster) c = cluster(f, H100, 8, 8);
  GError *error = NULL;
  g_assert_cmpstr(c->node.name, ==, "none");
  g_assert_cmpfloat(c->pue, ==, 1.0);
  g_assert_cmpfloat(node_energy_j(&c->node, 1, 10.0, 123.0, 1, 1), ==, 123.0);
  g_assert_true(node_preset("hgx-h100", &c->node, &error));
  g_assert_cmpfloat_with_epsilon(node_energy_j(&c->node, 1, 1.0, 5600, 0, 1),
                                 8400, 1e-9);
  c->pue = 1.3;
  g_autoptr(Cluster) d = cluster_copy(c, &error);
  g_assert_nonnull(d);
  g_assert_cmpstr(d->node.name, ==, "hgx-h100");
  g_assert_cmpfloat(d->pue, ==, 1.3);
  d->pue = 0.99;
  g_assert_false(cluster_validate(d, &error));
  g_assert_error(error, NODE_ERROR, NODE_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "pue"));
  g_clear_error(&error);
  d->pue = 1.0;
  d->node.nvswitch_idle_w = -1;
  g_assert_false(cluster_validate(d, &error));
  g_assert_nonnull(strstr(error->message, "nvswitch"));
  g_clear_error(&error);
  d->node.nvswitch_idle_w = 0;
  d->node.psu_efficiency = 1.5;
  g_assert_false(cluster_validate(d, &error));
  g_assert_nonnull(strstr(error->message, "psu_efficiency"));
  g_clear_error(&error);
  NodeSpec n;
  g_assert_false(node_preset("dgx-b200", &n, &error));
  g_assert_error(error, NODE_ERROR, NODE_ERROR_UNKNOWN);
  g_assert_nonnull(strstr(error->message, "dgx-h100"));
  g_clear_error(&error);
  /* Every preset names a source for each of its 8 parts (run/trust.c
   * reads them); "none" and a script's node have none.  Only the H100
   * nodes' other_w is a fit (Latif et al.'s peak). */
  const char *const *names = node_preset_names();
  for (guint k = 0; names[k] != NULL; k++) {
    g_assert_true(node_preset(names[k], &n, NULL));
    gboolean none = strcmp(names[k], "none") == 0;
    const char *part, *src;
    guint i, fits = 0;
    for (i = 0; (part = node_part_source(&n, i, &src)) != NULL; i++) {
      g_assert_true(none ? src == NULL : src != NULL && *src != '\0');
      if (src != NULL && g_str_has_prefix(src, "fit")) {
        g_assert_cmpstr(part, ==, "other_w");
        fits++;
      }
    }
    g_assert_cmpuint(i, ==, 8);
    g_assert_cmpuint(fits, ==, g_str_has_suffix(names[k], "h100") ? 1 : 0);
    n.name = "custom";
    node_part_source(&n, 0, &src);
    g_assert_null(src);
  }
}

/* 16 GPUs on 2 nodes, TP8 inside a node, DP2 across nodes. */
static void test_collectives(Fixture *f, gconstpointer data)
{
  g_autoptr(Cluster) c = cluster(f, H100, 16, 8);
  g_autoptr(SimWorkload) w = workload(16, 8, H100);
  g_autoptr(ClusterMachine) m = machine(f, c, w);
  const SimMachine *s = cluster_machine_sim(m);

  /* Placement: groups 0-1 TP (one node each), 2-9 DP (two nodes). */
  for (guint32 g = 0; g < 2; g++) {
    const NetGroupShape *sh = cluster_machine_group_shape(m, g);
    g_assert_cmpuint(sh->n_ranks, ==, 8);
    g_assert_cmpuint(sh->n_nodes, ==, 1);
    g_assert_cmpuint(sh->max_per_node, ==, 8);
  }
  for (guint32 g = 2; g < 10; g++) {
    const NetGroupShape *sh = cluster_machine_group_shape(m, g);
    g_assert_cmpuint(sh->n_ranks, ==, 2);
    g_assert_cmpuint(sh->n_nodes, ==, 2);
    g_assert_cmpuint(sh->max_per_node, ==, 1);
  }
  g_assert_null(cluster_machine_group_shape(m, 10));

  double bytes = 64e6;
  gint64 tp = s->collective_ns(s->ctx, 0, bytes, SIM_COLL_ALL_REDUCE, 0);
  gint64 dp = s->collective_ns(s->ctx, 2, bytes, SIM_COLL_ALL_REDUCE, 0);
  NetGroupShape nv = { 8, 1, 8 };
  double expect = net_collective_time_s(c->net, SIM_COLL_ALL_REDUCE, bytes,
                                        &nv, NET_ALGO_AUTO, 1);
  g_assert_cmpint(tp, ==, llround(expect * 1e9));
  /* NVLink: 64 MB reach > 75% of the 450 GB/s figure (latency eats the
   * rest); the NICs alone could not give more than 50 GB/s. */
  double busbw = bytes / (tp * 1e-9) * 2.0 * 7.0 / 8.0;
  g_assert_cmpfloat(busbw, >, 0.75 * c->net->intra_bw_gbps * 1e9);
  g_assert_cmpint(dp, >, tp);

  /* Every type, every group: positive, and the start time does not
   * matter. */
  for (guint32 g = 0; g < 10; g++)
    for (int t = 0; t < SIM_COLL_COUNT; t++) {
      gint64 d = s->collective_ns(s->ctx, g, bytes, (SimCollType)t, 0);
      g_assert_cmpint(d, >=, 1);
      g_assert_cmpint(d, ==, s->collective_ns(s->ctx, g, bytes,
                                              (SimCollType)t, 123456789));
    }
  /* Tiny messages still take at least a nanosecond. */
  g_assert_cmpint(s->collective_ns(s->ctx, 0, 0.0, SIM_COLL_ALL_REDUCE, 0),
                  >=, 1);

  /* A one-member group costs nothing. */
  g_autoptr(SimWorkload) w1 = workload(16, 8, H100);
  guint32 solo = 5;
  guint32 gid = sim_workload_add_group(w1, &solo, 1);
  g_autoptr(ClusterMachine) m1 = machine(f, c, w1);
  const SimMachine *s1 = cluster_machine_sim(m1);
  g_assert_cmpint(s1->collective_ns(s1->ctx, gid, bytes, SIM_COLL_ALL_REDUCE,
                                    0),
                  ==, 0);
}

static void test_p2p(Fixture *f, gconstpointer data)
{
  g_autoptr(Cluster) c = cluster(f, H100, 16, 8);
  g_autoptr(SimWorkload) w = workload(16, 8, H100);
  g_autoptr(ClusterMachine) m = machine(f, c, w);
  const SimMachine *s = cluster_machine_sim(m);
  double bytes = 24e6;
  gint64 same = s->p2p_ns(s->ctx, 0, 7, bytes, 0);
  gint64 cross = s->p2p_ns(s->ctx, 7, 8, bytes, 0);
  g_assert_cmpint(same, <, cross);
  g_assert_cmpint(same, ==,
                  llround(net_p2p_time_s(c->net, bytes, TRUE) * 1e9));
  g_assert_cmpint(cross, ==,
                  llround(net_p2p_time_s(c->net, bytes, FALSE) * 1e9));
  g_assert_cmpint(s->p2p_ns(s->ctx, 8, 15, bytes, 0), ==, same);
}

/* Placement follows gpus_per_node: with 4 per node the TP8 groups span two
 * nodes and become hierarchical, and slower. */
static void test_gpus_per_node(Fixture *f, gconstpointer data)
{
  g_autoptr(Cluster) c8 = cluster(f, H100, 16, 8);
  g_autoptr(Cluster) c4 = cluster(f, H100, 16, 4);
  g_autoptr(SimWorkload) w = workload(16, 8, H100);
  g_autoptr(ClusterMachine) m8 = machine(f, c8, w);
  g_autoptr(ClusterMachine) m4 = machine(f, c4, w);
  const NetGroupShape *sh = cluster_machine_group_shape(m4, 0);
  g_assert_cmpuint(sh->n_nodes, ==, 2);
  g_assert_cmpuint(sh->max_per_node, ==, 4);
  const SimMachine *s8 = cluster_machine_sim(m8);
  const SimMachine *s4 = cluster_machine_sim(m4);
  g_assert_cmpint(s8->collective_ns(s8->ctx, 0, 1e8, SIM_COLL_ALL_REDUCE, 0),
                  <,
                  s4->collective_ns(s4->ctx, 0, 1e8, SIM_COLL_ALL_REDUCE, 0));
}

/* Callbacks may be called from several threads: the cache must give the
 * same answers as a single-threaded machine. */
typedef struct {
  ClusterMachine *m;
  double sum;
} ThreadArg;

static gpointer hammer(gpointer data)
{
  ThreadArg *a = data;
  const SimMachine *s = cluster_machine_sim(a->m);
  for (guint i = 0; i < 2000; i++) {
    SimClocks req = { (guint16)(900 + 15 * (i % 40)), 0 };
    SimCost out;
    s->kernel_cost(s->ctx, i % 8, i % 3, req, 0, &out);
    a->sum += out.time_scale + out.power_w;
  }
  return NULL;
}

static void test_threads(Fixture *f, gconstpointer data)
{
  g_autoptr(Cluster) c = cluster(f, H100, 8, 8);
  g_autoptr(SimWorkload) w = workload(8, 8, H100);
  g_autoptr(ClusterMachine) m = machine(f, c, w);
  g_autoptr(ClusterMachine) ref = machine(f, c, w);
  ThreadArg args[4];
  GThread *th[4];
  for (guint i = 0; i < 4; i++) {
    args[i].m = m;
    args[i].sum = 0;
    th[i] = g_thread_new("hammer", hammer, &args[i]);
  }
  ThreadArg single = { ref, 0 };
  hammer(&single);
  for (guint i = 0; i < 4; i++) {
    g_thread_join(th[i]);
    g_assert_cmpfloat(args[i].sum, ==, single.sum);
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
#define ADD(path, fn)                                                         \
  g_test_add("/cluster/" path, Fixture, NULL, fixture_setup, fn,              \
             fixture_teardown)
  ADD("new-validate", test_new_and_validate);
  ADD("mismatch", test_mismatch);
  ADD("bad-shape", test_bad_shape);
  ADD("variability-off", test_variability_off);
  ADD("variability-on", test_variability_on);
  ADD("time-scale", test_time_scale);
  ADD("snap-once", test_snap_once);
  ADD("off-grid", test_off_grid);
  ADD("power-cap", test_power_cap);
  ADD("overrides", test_overrides);
  ADD("power-limit-range", test_power_limit_range);
  ADD("node", test_node);
  ADD("collectives", test_collectives);
  ADD("p2p", test_p2p);
  ADD("gpus-per-node", test_gpus_per_node);
  ADD("threads", test_threads);
#undef ADD
  for (guint i = 0; i < G_N_ELEMENTS(bad_overrides); i++) {
    g_autofree char *p =
      g_strdup_printf("/cluster/bad-override/%s", bad_overrides[i].what);
    g_test_add_data_func(p, &bad_overrides[i], test_bad_override);
  }
  return g_test_run();
}
