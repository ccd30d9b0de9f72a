/* tests/test-share.c -- sim_workload_share_alike (sim/share.c): ranks whose
 * ops are alike share one program, exactly.
 *
 * Every case builds a workload twice, shares one copy and checks that the
 * pass shared what it should (the count, the programs, the ops stored),
 * that every rank's ops, peers resolved, are what they were, that the
 * shared copy validates and that it replays, GPU by GPU with variability
 * on, exactly as the unshared one.  Cases: pairs of ranks that differ
 * only in their group and peer (shared, also with deltas that wrap below
 * 0), and the differences that must prevent sharing: a duration, the
 * peer field of a kernel, collectives on two groups whose ids do not
 * shift together.  Generated workloads (ranks already in programs,
 * folded workloads) are left alone; their materialised copies share
 * again where the pass's one-delta-per-kind rule allows.
 */
#include "sim/workload.h"
#include "models/dvfs/policy.h"
#include "models/gpu.h"
#include "models/straggler.h"
#include "traces/gpt.h"
#include "tests/testreplay.h"
#include "tests/testutil.h"
#include "tests/testwork.h"

#include <string.h>

typedef enum {
  V_PLAIN,       /* every pair alike: one sender and one receiver program */
  V_REVERSED,    /* the same, group ids and pairs numbered downwards */
  V_DURATION,    /* pair 1's sender runs a kernel 1 ns longer */
  V_KERNEL_PEER, /* pair 1's sender has a kernel whose peer field is 7 */
  V_TWO_GROUPS   /* a collective on the pair and one on the world group */
} Variant;

/* n_pairs pairs of ranks (2k sends to 2k+1) on groups {2k, 2k+1}: each
 * rank computes, all-reduces with its partner, sends or receives, and
 * computes again on a second stream after its first kernel. */
static SimWorkload *pairs(guint n_pairs, Variant v)
{
  guint n = 2 * n_pairs;
  SimWorkload *w = sim_workload_new(n);
  guint32 k = tw_shape(w, SIM_CLASS_GEMM, 1e6, 0);
  guint32 ar = tw_shape(w, SIM_CLASS_COMM, 1 << 20, SIM_COLL_ALL_REDUCE);
  guint32 p2p = tw_shape(w, SIM_CLASS_COMM, 1 << 16, SIM_COLL_SEND_RECV);
  /* Group g holds pair g (or pair n_pairs-1-g, reversed). */
  for (guint g = 0; g < n_pairs; g++) {
    guint q = v == V_REVERSED ? n_pairs - 1 - g : g;
    guint32 m[2] = { 2 * q, 2 * q + 1 };
    sim_workload_add_group(w, m, 2);
  }
  g_autofree guint32 *all = g_new(guint32, n);
  for (guint r = 0; r < n; r++)
    all[r] = r;
  guint32 world = sim_workload_add_group(w, all, n);
  g_autoptr(SimRankBuilder) b = sim_rank_builder_new();
  for (guint r = 0; r < n; r++) {
    guint q = r / 2;
    guint32 group = v == V_REVERSED ? n_pairs - 1 - q : q;
    gboolean sender = r % 2 == 0, odd = q == 1 && sender;
    guint32 h = tw_add(b, w, SIM_OP_KERNEL, 0,
                       v == V_DURATION && odd ? 1001 : 1000, k, 0,
                       SIM_NO_WAIT);
    tw_add(b, w, SIM_OP_COLLECTIVE, 0, 0, ar, group, SIM_NO_WAIT);
    if (v == V_TWO_GROUPS)
      tw_add(b, w, SIM_OP_COLLECTIVE, 0, 0, ar, world, SIM_NO_WAIT);
    tw_add(b, w, sender ? SIM_OP_SEND : SIM_OP_RECV, 0, 0, p2p,
           sender ? r + 1 : r - 1, SIM_NO_WAIT);
    tw_add(b, w, SIM_OP_KERNEL, 1, 500, k,
           v == V_KERNEL_PEER && odd ? 7 : 0, h);
    sim_rank_builder_finish(b, w, r);
  }
  GError *error = NULL;
  g_assert_true(sim_workload_validate(w, &error));
  g_assert_no_error(error);
  return w;
}

/* Every rank of a runs, peers resolved, the ops of the same rank of b. */
static void assert_same_resolved(const SimWorkload *a, const SimWorkload *b)
{
  g_assert_cmpuint(a->n_ranks, ==, b->n_ranks);
  for (guint r = 0; r < a->n_ranks; r++) {
    const SimRank *x = &a->ranks[r], *y = &b->ranks[r];
    g_assert_cmpuint(x->n_ops, ==, y->n_ops);
    g_assert_cmpuint(x->n_streams, ==, y->n_streams);
    g_assert_cmpuint(x->stage, ==, y->stage);
    if (x->n_ops > 0)
      g_assert_cmpmem(x->stream_off, sizeof(guint32) * (x->n_streams + 1),
                      y->stream_off, sizeof(guint32) * (y->n_streams + 1));
    for (guint32 i = 0; i < x->n_ops; i++) {
      SimOp p = x->ops[i], q = y->ops[i];
      p.peer = sim_op_peer(x, &p);
      q.peer = sim_op_peer(y, &q);
      p.patch = q.patch = 0;
      g_assert_cmpmem(&p, sizeof p, &q, sizeof q);
    }
  }
}

/* Shares w and checks it against its unshared copy u: the ops, the
 * validation, the replay. */
static guint share_and_check(SimWorkload *w, const SimWorkload *u)
{
  guint shared = sim_workload_share_alike(w);
  GError *error = NULL;
  g_assert_true(sim_workload_validate(w, &error));
  g_assert_no_error(error);
  assert_same_resolved(w, u);
  test_assert_same_replay(w, u, "A100-SXM4-80GB");
  /* A second pass finds nothing more (ranks in programs are left alone). */
  g_assert_cmpuint(sim_workload_share_alike(w), ==, 0);
  return shared;
}

typedef struct {
  const char *name;
  Variant v;
  guint shared;    /* ranks expected to run another's program */
  guint programs;  /* sim_workload_n_programs afterwards */
} Case;

static const Case cases[] = {
  /* 4 pairs: senders 2, 4, 6 run rank 0's ops, receivers rank 1's. */
  { "plain", V_PLAIN, 6, 2 },
  { "reversed", V_REVERSED, 6, 2 },
  /* Pair 1's sender alone keeps its ops. */
  { "duration", V_DURATION, 5, 3 },
  { "kernel-peer", V_KERNEL_PEER, 5, 3 },
  /* The pair's group id moves, the world group's does not: one delta
   * cannot serve both, nobody shares. */
  { "two-groups", V_TWO_GROUPS, 0, 8 },
};

static void test_pairs(gconstpointer data)
{
  const Case *c = data;
  g_autoptr(SimWorkload) w = pairs(4, c->v);
  g_autoptr(SimWorkload) u = pairs(4, c->v);
  guint64 ops = sim_workload_n_ops(w);
  g_assert_cmpuint(share_and_check(w, u), ==, c->shared);
  g_assert_cmpuint(sim_workload_n_programs(w), ==, c->programs);
  g_assert_cmpuint(sim_workload_n_ops(w), ==, ops);
  /* Each rank that shares stops storing its ops. */
  g_assert_cmpuint(sim_workload_n_stored_ops(w), ==,
                   ops - c->shared * w->ranks[0].n_ops);
  if (c->v == V_PLAIN || c->v == V_REVERSED) {
    /* Sender 2 runs sender 0's ops, its group and partner shifted. */
    const SimRank *s = &w->ranks[2];
    g_assert_cmpuint(s->program, ==, w->ranks[0].program);
    g_assert_cmpuint(s->program, !=, SIM_NO_PROGRAM);
    g_assert_cmpuint(s->peer_delta[1], ==,
                     c->v == V_PLAIN ? 1u : G_MAXUINT32); /* -1 */
    g_assert_cmpuint(s->peer_delta[2], ==, 0);
    g_assert_cmpuint(s->peer_delta[3], ==, 2);
    g_assert_cmpuint(w->ranks[0].peer_delta[1], ==, 0);
  }
}

static SimWorkload *gen(guint tp, guint pp, guint dp, gboolean fold)
{
  GError *error = NULL;
  GptConfig cfg;
  gpt_config_init(&cfg);
  g_assert_true(gpt_config_set_model(&cfg, "gpt3-125m", &error));
  cfg.tp = tp;
  cfg.pp = pp;
  cfg.dp = dp;
  cfg.microbatches = 2;
  cfg.seq_len = 128;
  cfg.fold = fold;
  g_autoptr(GpuCatalogue) cat = gpu_catalogue_new();
  const GpuSpec *gpu = gpu_catalogue_lookup(cat, "A100-SXM4-80GB", &error);
  g_assert_no_error(error);
  SimWorkload *w = gpt_generate(&cfg, gpu, &error);
  g_assert_no_error(error);
  return w;
}

/* Generated workloads already share (left alone, also folded); their
 * materialised copies share again wherever one delta per kind explains a
 * stage's ranks.  On one stage, DP 4 (one DP group) and TP 4 (one TP
 * group) share fully.  With two stages the first and last stage hold the
 * embedding tie groups, whose ids move with the rank while the stage's
 * TP (or DP) group stays: one collective delta cannot serve both, so TP 2
 * x PP 2 and DP 2 x PP 2 do not share at all.  The replay is the same
 * either way. */
static void test_generated(void)
{
  g_autoptr(SimWorkload) g = gen(2, 2, 2, FALSE);
  guint programs = sim_workload_n_programs(g);
  g_assert_cmpuint(sim_workload_share_alike(g), ==, 0);
  g_assert_cmpuint(sim_workload_n_programs(g), ==, programs);
  g_autoptr(SimWorkload) f = gen(2, 2, 2, TRUE);
  g_assert_cmpuint(sim_workload_share_alike(f), ==, 0);

  static const struct {
    guint tp, pp, dp, shared;
  } layouts[] = { { 1, 1, 4, 3 }, { 4, 1, 1, 3 }, { 2, 2, 1, 0 },
                  { 1, 2, 2, 0 } };
  for (gsize i = 0; i < G_N_ELEMENTS(layouts); i++) {
    g_autoptr(SimWorkload) m = gen(layouts[i].tp, layouts[i].pp,
                                   layouts[i].dp, FALSE);
    g_autoptr(SimWorkload) u = gen(layouts[i].tp, layouts[i].pp,
                                   layouts[i].dp, FALSE);
    GError *error = NULL;
    g_assert_true(sim_workload_materialise(m, &error));
    g_assert_no_error(error);
    guint shared = share_and_check(m, u);
    g_test_message("tp %u pp %u dp %u: %u of %u ranks share", layouts[i].tp,
                   layouts[i].pp, layouts[i].dp, shared, m->n_ranks);
    g_assert_cmpuint(shared, ==, layouts[i].shared);
  }
}

/* The accounting copies a rank's figures from an earlier rank of its
 * program whose inputs are equal (sim/account.c, "Ranks with the same
 * inputs"); a materialised copy has no programs, so every rank of it is
 * accounted.  Both give the same bits on a cluster without variability,
 * where ranks are alike, and wherever one input sets a rank apart from the
 * peer before it: a straggler from the second iteration on (its prices,
 * then its per-GPU figures before the third), power spread alone (idle,
 * blocked and comm power differ, the prices do not), a kernel-level plan
 * by op (the kernel log, clock switches) and a power cap; on 1 and 3
 * threads. */
static void test_account_copies(void)
{
  g_autoptr(SimWorkload) w = gen(2, 2, 2, FALSE);
  g_autoptr(SimWorkload) u = gen(2, 2, 2, FALSE);
  GError *error = NULL;
  g_assert_true(sim_workload_materialise(u, &error));
  g_assert_no_error(error);
  for (guint r = 0; r < w->n_ranks; r++) {
    g_assert_cmpuint(w->ranks[r].program, !=, SIM_NO_PROGRAM);
    g_assert_cmpuint(u->ranks[r].program, ==, SIM_NO_PROGRAM);
  }
  g_assert_cmpuint(w->ranks[3].program, ==, w->ranks[2].program);
  g_autoptr(JsSession) s = js_session_new(1);
  const GpuSpec *gpu =
    gpu_catalogue_lookup(s->catalogue, "A100-SXM4-80GB", &error);
  g_assert_no_error(error);
  g_autoptr(NetSpec) net = net_preset("dgx-a100", &error);
  g_assert_no_error(error);
  g_autoptr(StragglerSet) ss = straggler_set_new(w->n_ranks, 2, 2, 3, &error);
  g_assert_no_error(error);
  /* GPU 3: the second rank of TP group (dp 1, pp 0), a TP peer of 2. */
  StragglerSpec spec = {.gpu = 3, .pipeline = -1, .slowdown = 1.4,
                        .from_iteration = 1,
                        .to_iteration = STRAGGLER_FOREVER};
  g_assert_true(straggler_set_add(ss, &spec, &error));
  g_assert_no_error(error);
  enum { UNIFORM, STRAGGLER, POWER_SPREAD, KERNEL_PLAN, POWER_CAP, N_RUNS };
  for (guint k = 0; k < N_RUNS; k++)
    for (guint threads = 1; threads <= 3; threads += 2) {
      g_autoptr(Cluster) c = cluster_new(gpu, net, w->n_ranks, 8, &error);
      g_assert_no_error(error);
      DvfsPolicy pol = {.kind = DVFS_MAX};
      JsRunOptions opt = {.iterations = 3, .seed = 7,
                          .switch_latency_ms = -1, .threads = threads};
      if (k == STRAGGLER)
        opt.stragglers = ss;
      if (k == POWER_SPREAD)
        c->power_spread = 0.05;
      if (k == KERNEL_PLAN) {
        dvfs_policy_init(&pol, DVFS_KERNEL);
        pol.slowdown = 0.02;
        pol.granularity = DVFS_GRANULARITY_OP;
      }
      if (k == POWER_CAP) {
        dvfs_policy_init(&pol, DVFS_POWERCAP);
        pol.watts = 250;
      }
      g_autoptr(SimResult) x = js_simulate(s, c, w, &pol, &opt, &error);
      g_assert_no_error(error);
      g_autoptr(SimResult) y = js_simulate(s, c, u, &pol, &opt, &error);
      g_assert_no_error(error);
      test_assert_same_result(x, y);
      if (k == STRAGGLER) {
        /* The straggler is set apart from its peer. */
        g_assert_cmpfloat(x->per_gpu[3].kernel_ns, >,
                          x->per_gpu[2].kernel_ns);
      }
    }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *name = g_strdup_printf("/share/pairs/%s",
                                            cases[i].name);
    g_test_add_data_func(name, &cases[i], test_pairs);
  }
  g_test_add_func("/share/generated", test_generated);
  g_test_add_func("/share/account-copies", test_account_copies);
  return g_test_run();
}
