/* tests/test-threads.c -- the threaded replay (sim_engine_set_threads,
 * js.simulate{ threads = }): every figure of a result is the same bit for
 * bit on 1, 2, 4 and 7 threads, on generated workloads with per-GPU
 * variability, stragglers and clock plans; the engine says how many
 * threads it used, and goes serial where threads could change the answer
 * (a group or channel used from two streams of one rank), where the
 * machine does not promise thread safety, and under an observer. */
#include "models/cluster.h"
#include "models/dvfs/policy.h"
#include "models/gpu.h"
#include "models/net.h"
#include "models/straggler.h"
#include "run/session.h"
#include "sim/engine.h"
#include "tests/testutil.h"
#include "tests/testwork.h"
#include "traces/gpt.h"

#include <string.h>

static const guint thread_counts[] = {2, 4, 7};

/* ---- generated workloads through js.simulate ---------------------------- */

typedef enum { V_PLAIN, V_VARIABILITY, V_STRAGGLERS, V_KERNEL_PLAN,
               V_POWERCAP } Variant;

typedef struct {
  const char *name;
  guint tp, pp, dp, mb;
  PipelineSchedule schedule;
  gboolean fold;
  Variant variant;
} Case;

static const Case cases[] = {
  {"1f1b-tp2-pp2-dp2", 2, 2, 2, 8, PIPELINE_1F1B, FALSE, V_PLAIN},
  {"1f1b-variability", 2, 2, 2, 8, PIPELINE_1F1B, FALSE, V_VARIABILITY},
  {"1f1b-stragglers", 2, 2, 2, 8, PIPELINE_1F1B, FALSE, V_STRAGGLERS},
  {"1f1b-kernel-plan", 2, 2, 2, 8, PIPELINE_1F1B, FALSE, V_KERNEL_PLAN},
  {"1f1b-powercap", 2, 2, 2, 8, PIPELINE_1F1B, FALSE, V_POWERCAP},
  {"interleaved-pp3-dp2", 1, 3, 2, 6, PIPELINE_INTERLEAVED, FALSE,
   V_STRAGGLERS},
  {"gpipe-tp4-pp2", 4, 2, 1, 4, PIPELINE_GPIPE, FALSE, V_VARIABILITY},
  {"tp4-dp4", 4, 1, 4, 2, PIPELINE_1F1B, FALSE, V_KERNEL_PLAN},
  {"folded-tp2-pp2-dp4", 2, 2, 4, 8, PIPELINE_1F1B, TRUE, V_PLAIN},
  /* 64 ranks: lanes own blocks of 4 ranks on 2 threads, 2 on 4, 1 on 7
   * (sim_engine_set_threads). */
  {"blocks-tp2-pp2-dp16", 2, 2, 16, 4, PIPELINE_1F1B, FALSE, V_STRAGGLERS},
};

typedef struct {
  JsSession *s;
  Cluster *c;
  SimWorkload *w;
  StragglerSet *set;
  DvfsPolicy pol;
  guint iterations;
} Setup;

static void setup_case(const Case *k, Setup *x)
{
  GError *error = NULL;
  memset(x, 0, sizeof *x);
  x->s = js_session_new(1);
  GptConfig cfg;
  gpt_config_init(&cfg);
  g_assert_true(gpt_config_set_model(&cfg, "gpt3-125m", &error));
  g_assert_no_error(error);
  cfg.seq_len = 512;
  cfg.tp = k->tp;
  cfg.pp = k->pp;
  cfg.dp = k->dp;
  cfg.microbatches = k->mb;
  cfg.schedule = k->schedule;
  cfg.fold = k->fold;
  const GpuSpec *gpu = gpu_catalogue_lookup(x->s->catalogue, "A100-SXM4-80GB",
                                            &error);
  g_assert_no_error(error);
  x->w = gpt_generate(&cfg, gpu, &error);
  g_assert_no_error(error);
  g_autoptr(NetSpec) net = net_preset("dgx-a100", &error);
  g_assert_no_error(error);
  x->c = cluster_new(gpu, net, x->w->n_ranks, 8, &error);
  g_assert_no_error(error);
  x->iterations = 2;
  x->pol.kind = DVFS_MAX;
  switch (k->variant) {
  case V_PLAIN:
    break;
  case V_VARIABILITY:
    x->c->perf_spread = 0.05;
    x->c->power_spread = 0.05;
    break;
  case V_STRAGGLERS: {
    x->iterations = 3;
    x->set = straggler_set_new(x->w->n_ranks, k->tp, k->dp, x->iterations,
                               &error);
    g_assert_no_error(error);
    StragglerSpec sp = {.gpu = 1, .pipeline = -1, .slowdown = 1.3,
                        .from_iteration = 1, .to_iteration = 1};
    g_assert_true(straggler_set_add(x->set, &sp, &error));
    StragglerRandom rnd = {.rate = 0.3, .slow_lo = 1.1, .slow_hi = 1.5,
                           .dur_lo = 1, .dur_hi = 2};
    g_assert_true(straggler_set_add_random(x->set, &rnd, 9, &error));
    g_assert_no_error(error);
    break;
  }
  case V_KERNEL_PLAN:
    /* A plan that switches clocks within the iteration, with the GPU's
     * switching latency: kernels split by landing switches. */
    dvfs_policy_init(&x->pol, DVFS_KERNEL);
    x->pol.slowdown = 0.05;
    break;
  case V_POWERCAP:
    dvfs_policy_init(&x->pol, DVFS_POWERCAP);
    x->pol.slowdown = 0.05;
    break;
  }
  g_assert_true(cluster_validate(x->c, &error));
  g_assert_no_error(error);
}

static void clear_setup(Setup *x)
{
  straggler_set_free(x->set);
  cluster_free(x->c);
  sim_workload_free(x->w);
  js_session_free(x->s);
}

static void count_ops(gpointer data, const SimOpRecord *rec);

/* The case on `threads` threads; `queued`: under an observer, which keeps
 * the replay in the event queue's order (the reference for the eager
 * order of a serial replay and for the threads). */
static SimResult *simulate_as(Setup *x, guint threads, gboolean queued)
{
  GError *error = NULL;
  guint n_records = 0;
  JsRunOptions opt = {.iterations = x->iterations, .seed = 5,
                      .switch_latency_ms = -1, .stragglers = x->set,
                      .threads = threads};
  if (queued) {
    opt.observer = count_ops;
    opt.observer_data = &n_records;
  }
  SimResult *r = js_simulate(x->s, x->c, x->w, &x->pol, &opt, &error);
  g_assert_no_error(error);
  g_assert_nonnull(r);
  if (queued)
    g_assert_cmpuint(n_records, >, 0);
  return r;
}

static SimResult *simulate(Setup *x, guint threads)
{
  return simulate_as(x, threads, FALSE);
}

static void test_identical(gconstpointer data)
{
  const Case *k = data;
  Setup x;
  setup_case(k, &x);
  g_autoptr(SimResult) one = simulate(&x, 1);
  g_assert_cmpint(one->time_ns, >, 0);
  /* One thread runs in eager order (no event queue); the queue's order
   * gives the same figures.  (An observer, which keeps that order, is
   * refused on a folded workload; test-fold checks folded against
   * unfolded.) */
  if (!k->fold) {
    g_autoptr(SimResult) queued = simulate_as(&x, 1, TRUE);
    test_assert_same_result(queued, one);
  }
  for (guint i = 0; i < G_N_ELEMENTS(thread_counts); i++) {
    g_autoptr(SimResult) r = simulate(&x, thread_counts[i]);
    test_assert_same_result(one, r);
  }
  clear_setup(&x);
}

/* The cluster machine promises thread safety, so an engine on it uses the
 * threads it is given (up to its ranks), and gives the serial answer. */
static void check_uses_threads(Setup *sx);

static void test_uses_threads(void)
{
  Setup x;
  setup_case(&cases[1], &x); /* variability: a price cache per rank */
  check_uses_threads(&x);
  clear_setup(&x);
}

static void check_uses_threads(Setup *sx)
{
  Setup x = *sx;
  GError *error = NULL;
  g_autoptr(ClusterMachine) m = cluster_machine_new(x.c, x.w, x.s->catalogue,
                                                    0, &error);
  g_assert_no_error(error);
  const SimMachine *sm = cluster_machine_sim(m);
  g_assert_true(sm->thread_safe);
  g_autoptr(SimPlan) plan = sim_plan_new_uniform(x.w->n_ranks,
                                                 (SimClocks){0, 0});
  g_autoptr(SimEngine) e1 = sim_engine_new(x.w, sm, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(sim_engine_threads_used(e1), ==, 0);
  g_autoptr(SimResult) a = sim_engine_run(e1, plan, 2, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(sim_engine_threads_used(e1), ==, 1);
  g_autoptr(SimEngine) e3 = sim_engine_new(x.w, sm, &error);
  g_assert_no_error(error);
  sim_engine_set_threads(e3, 3);
  g_autoptr(SimResult) b = sim_engine_run(e3, plan, 2, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(sim_engine_threads_used(e3), ==, 3);
  test_assert_same_result(a, b);
  /* Asking for more threads than ranks gives one per rank; the same
   * engine runs again, on a new thread count, to the same answer. */
  sim_engine_set_threads(e3, 100);
  g_autoptr(SimResult) c = sim_engine_run(e3, plan, 2, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(sim_engine_threads_used(e3), ==, x.w->n_ranks);
  test_assert_same_result(a, c);
}

/* ---- hand-built workloads on a fake machine ------------------------------- */

typedef struct {
  SimMachine m;
  double idle[4], block[4], comm[4];
} Fake;

static void fake_cost(gpointer ctx, guint gpu, guint32 shape, SimClocks c,
                      guint iter, SimCost *out)
{
  out->time_scale = 1.0 + 0.25 * gpu;
  out->power_w = 300.0;
  out->sm_mhz = c.sm_mhz;
  out->mem_mhz = c.mem_mhz;
}

static gint64 fake_coll(gpointer ctx, guint32 g, double bytes, SimCollType t,
                        gint64 start)
{
  return 1000 + (gint64)bytes;
}

static gint64 fake_p2p(gpointer ctx, guint s, guint d, double bytes,
                       gint64 start)
{
  return 500 + (gint64)bytes;
}

static void fake_init(Fake *f, guint n, gboolean thread_safe)
{
  memset(f, 0, sizeof *f);
  for (guint i = 0; i < 4; i++) {
    f->idle[i] = 50;
    f->block[i] = 80;
    f->comm[i] = 120;
  }
  f->m.n_gpus = n;
  f->m.idle_power_w = f->idle;
  f->m.blocked_power_w = f->block;
  f->m.comm_power_w = f->comm;
  f->m.kernel_cost = fake_cost;
  f->m.collective_ns = fake_coll;
  f->m.p2p_ns = fake_p2p;
  f->m.ctx = f;
  f->m.thread_safe = thread_safe;
}

/* Runs w on f with `threads` threads; *used gets the threads used. */
static SimResult *run_fake(const SimWorkload *w, const Fake *f, guint threads,
                           guint *used, GError **error)
{
  g_autoptr(SimEngine) e = sim_engine_new(w, &f->m, error);
  if (e == NULL)
    g_error("%s", (*error)->message);
  sim_engine_set_threads(e, threads);
  g_autoptr(SimPlan) plan = sim_plan_new_uniform(w->n_ranks,
                                                 (SimClocks){0, 0});
  SimResult *r = sim_engine_run(e, plan, 2, error);
  *used = sim_engine_threads_used(e);
  return r;
}

/* Four ranks, each two streams; an all-reduce on the group of all four
 * per stream; `shared_group`: both streams use one group (the order of a
 * rank's arrivals on it then decides which instance an op joins). */
static SimWorkload *two_stream_workload(gboolean shared_group)
{
  SimWorkload *w = sim_workload_new(4);
  g_autoptr(SimRankBuilder) b = sim_rank_builder_new();
  guint32 k = tw_shape(w, SIM_CLASS_GEMM, 0, 0);
  guint32 ar = tw_shape(w, SIM_CLASS_COMM, 4000, SIM_COLL_ALL_REDUCE);
  guint32 ar2 = tw_shape(w, SIM_CLASS_COMM, 9000, SIM_COLL_ALL_REDUCE);
  guint32 members[4] = {0, 1, 2, 3};
  guint32 g0 = sim_workload_add_group(w, members, 4);
  guint32 g1 = shared_group ? g0 : sim_workload_add_group(w, members, 4);
  for (guint r = 0; r < 4; r++) {
    for (guint s = 0; s < 2; s++)
      for (guint i = 0; i < 3; i++) {
        tw_add(b, w, SIM_OP_KERNEL, s, 1000 * (1 + r + 3 * s) + 100 * i, k,
               0, SIM_NO_WAIT);
        tw_add(b, w, SIM_OP_COLLECTIVE, s, 0, s == 0 ? ar : ar2,
               s == 0 ? g0 : g1, SIM_NO_WAIT);
      }
    sim_rank_builder_finish(b, w, r);
  }
  return w;
}

static void test_two_streams_one_group(void)
{
  GError *error = NULL;
  Fake f;
  fake_init(&f, 4, TRUE);
  for (int shared = 0; shared < 2; shared++) {
    g_autoptr(SimWorkload) w = two_stream_workload(shared);
    guint used1 = 0, used = 0;
    g_autoptr(SimResult) a = run_fake(w, &f, 1, &used1, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(used1, ==, 1);
    for (guint i = 0; i < G_N_ELEMENTS(thread_counts); i++) {
      g_autoptr(SimResult) r = run_fake(w, &f, thread_counts[i], &used,
                                        &error);
      g_assert_no_error(error);
      /* Separate groups: threads; one group from two streams: serial. */
      g_assert_cmpuint(used, ==, shared ? 1 : MIN(thread_counts[i], 4u));
      test_assert_same_result(a, r);
    }
  }
}

/* Rank 0 sends to rank 1 from two streams (one channel, two streams):
 * serial, the same answer. */
static void test_two_streams_one_channel(void)
{
  GError *error = NULL;
  g_autoptr(SimWorkload) w = sim_workload_new(2);
  g_autoptr(SimRankBuilder) b = sim_rank_builder_new();
  guint32 k = tw_shape(w, SIM_CLASS_GEMM, 0, 0);
  guint32 msg = tw_shape(w, SIM_CLASS_COMM, 3000, SIM_COLL_SEND_RECV);
  for (guint s = 0; s < 2; s++) {
    tw_add(b, w, SIM_OP_KERNEL, s, 700 + 900 * s, k, 0, SIM_NO_WAIT);
    tw_add(b, w, SIM_OP_SEND, s, 0, msg, 1, SIM_NO_WAIT);
  }
  sim_rank_builder_finish(b, w, 0);
  tw_add(b, w, SIM_OP_RECV, 0, 0, msg, 0, SIM_NO_WAIT);
  tw_add(b, w, SIM_OP_KERNEL, 0, 400, k, 0, SIM_NO_WAIT);
  tw_add(b, w, SIM_OP_RECV, 0, 0, msg, 0, SIM_NO_WAIT);
  sim_rank_builder_finish(b, w, 1);
  Fake f;
  fake_init(&f, 2, TRUE);
  guint used = 0;
  g_autoptr(SimResult) a = run_fake(w, &f, 1, &used, &error);
  g_assert_no_error(error);
  g_autoptr(SimResult) r = run_fake(w, &f, 2, &used, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(used, ==, 1);
  test_assert_same_result(a, r);
}

/* A machine that does not promise thread safety, or an observer, keeps
 * the replay serial. */
static void count_ops(gpointer data, const SimOpRecord *rec)
{
  (*(guint *)data)++;
}

static void test_serial_when_needed(void)
{
  GError *error = NULL;
  g_autoptr(SimWorkload) w = two_stream_workload(FALSE);
  Fake f;
  fake_init(&f, 4, FALSE);
  guint used = 0;
  g_autoptr(SimResult) a = run_fake(w, &f, 4, &used, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(used, ==, 1);

  fake_init(&f, 4, TRUE);
  g_autoptr(SimEngine) e = sim_engine_new(w, &f.m, &error);
  g_assert_no_error(error);
  sim_engine_set_threads(e, 4);
  guint seen = 0;
  sim_engine_set_observer(e, count_ops, &seen);
  g_autoptr(SimPlan) plan = sim_plan_new_uniform(4, (SimClocks){0, 0});
  g_autoptr(SimResult) b = sim_engine_run(e, plan, 2, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(sim_engine_threads_used(e), ==, 1);
  g_assert_cmpuint(seen, ==, 2 * sim_workload_n_ops(w));
  test_assert_same_result(a, b);
}

/* A deadlock (ranks 0 and 1 enter all-reduce A then B, ranks 2 and 3 B
 * then A) and an absurd duration fail alike on any thread count, naming
 * the same op. */
static void test_errors(void)
{
  Fake f;
  fake_init(&f, 4, TRUE);
  g_autoptr(SimWorkload) w = sim_workload_new(4);
  g_autoptr(SimRankBuilder) b = sim_rank_builder_new();
  guint32 k = tw_shape(w, SIM_CLASS_GEMM, 0, 0);
  guint32 ar = tw_shape(w, SIM_CLASS_COMM, 4000, SIM_COLL_ALL_REDUCE);
  guint32 members[4] = {0, 1, 2, 3};
  guint32 ga = sim_workload_add_group(w, members, 4);
  guint32 gb = sim_workload_add_group(w, members, 4);
  for (guint r = 0; r < 4; r++) {
    tw_add(b, w, SIM_OP_KERNEL, 0, 1000 + r, k, 0, SIM_NO_WAIT);
    tw_add(b, w, SIM_OP_COLLECTIVE, 0, 0, ar, r < 2 ? ga : gb, SIM_NO_WAIT);
    tw_add(b, w, SIM_OP_COLLECTIVE, 0, 0, ar, r < 2 ? gb : ga, SIM_NO_WAIT);
    sim_rank_builder_finish(b, w, r);
  }
  g_autofree char *msg1 = NULL;
  for (guint t = 1; t <= 4; t++) {
    GError *error = NULL;
    guint used = 0;
    SimResult *r = run_fake(w, &f, t, &used, &error);
    g_assert_null(r);
    g_assert_error(error, SIM_ERROR, SIM_ERROR_DEADLOCK);
    if (msg1 == NULL)
      msg1 = g_strdup(error->message);
    g_assert_cmpstr(error->message, ==, msg1);
    g_error_free(error);
  }
  g_assert_nonnull(strstr(msg1, "rank 0 stream 0 stuck at op 1"));

  /* Two absurd kernels on two streams of rank 1: the first by index is
   * named, whichever the replay reaches first. */
  g_autoptr(SimWorkload) v = sim_workload_new(2);
  k = tw_shape(v, SIM_CLASS_GEMM, 0, 0);
  tw_add(b, v, SIM_OP_KERNEL, 0, 5000, k, 0, SIM_NO_WAIT);
  sim_rank_builder_finish(b, v, 0);
  tw_add(b, v, SIM_OP_KERNEL, 0, 900, k, 0, SIM_NO_WAIT);
  tw_add(b, v, SIM_OP_KERNEL, 0, (G_GINT64_CONSTANT(1) << 62) - 10, k, 0,
         SIM_NO_WAIT);
  tw_add(b, v, SIM_OP_KERNEL, 1, G_GINT64_CONSTANT(1) << 62, k, 0,
         SIM_NO_WAIT);
  sim_rank_builder_finish(b, v, 1);
  fake_init(&f, 2, TRUE);
  for (guint t = 1; t <= 2; t++) {
    GError *error = NULL;
    guint used = 0;
    SimResult *r = run_fake(v, &f, t, &used, &error);
    g_assert_null(r);
    g_assert_error(error, SIM_ERROR, SIM_ERROR_LIMIT);
    g_test_message("%s", error->message);
    g_assert_nonnull(strstr(error->message, "rank 1 op 1 "));
    g_error_free(error);
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *path = g_strdup_printf("/threads/identical/%s",
                                            cases[i].name);
    g_test_add_data_func(path, &cases[i], test_identical);
  }
  g_test_add_func("/threads/uses-threads", test_uses_threads);
  g_test_add_func("/threads/two-streams-one-group",
                  test_two_streams_one_group);
  g_test_add_func("/threads/two-streams-one-channel",
                  test_two_streams_one_channel);
  g_test_add_func("/threads/serial-when-needed", test_serial_when_needed);
  g_test_add_func("/threads/errors", test_errors);
  return g_test_run();
}
