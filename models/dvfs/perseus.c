/* models/dvfs/perseus.c -- pipeline computation DAGs and their iteration
 * time-energy Pareto frontier (after Perseus, Chung et al., SOSP'24).
 *
 * The DAG
 * -------
 * Nodes are computations (one forward or backward pass of one microbatch on
 * one pipeline stage); node i runs on DAG GPU g(i) (its stage) and has
 * options k = (clock f_k, duration t_ik, energy E_ik).  Edges are the
 * schedule's precedences: consecutive computations of a stage, F(s,m) ->
 * F(s+1,m) (activations), B(s+1,m) -> B(s,m) (gradients); F(s,m) before
 * B(s,m) follows from the stage order.  Edges carry no delay: a
 * computation that starts with a receive includes the transfer in its own
 * duration, which is what the engine does (a receive is posted when the
 * previous computation of the stage ends and its transfer starts at
 * max(sender done, receiver posted)); sends run on their own streams and
 * cost the sender nothing.
 *
 * Energy of a plan (an option per node), as the real system spends it: a
 * GPU that is not computing is blocked (waiting in NCCL) at P_block, so
 * with n GPUs and iteration time T = longest path,
 *
 *   E(plan) = sum_i E_i + P_block * (n T - sum_i t_i)
 *           = sum_i c_i + P_block n T,      c_i = E_i - P_block t_i.
 *
 * So for a fixed T the energy is separable in c, and an option that is
 * slower and has a higher c than another is useless: each node's options
 * are pruned to the (t, c) Pareto set (c strictly decreasing as t grows).
 * Measured noise (a lower clock measured faster) is pruned the same way.
 *
 * The frontier
 * ------------
 * Choosing discrete options under a deadline is the discrete time-cost
 * trade-off problem, NP-hard in general.  Two methods, merged:
 *
 * (a) Exact dynamic programming (small DAGs).  Nodes in order of their
 *     all-fastest earliest start; the state of a partial plan is (finish
 *     time of every processed node that still has an unprocessed
 *     successor, latest finish of processed sinks, cost so far); a state
 *     no better than another in every component is dropped.  The last
 *     level is exactly the (T, cost) frontier.  It gives up beyond 4,096
 *     states per level or 2^25 dominance checks (a few stages and
 *     microbatches with a few clocks stay far below; an 8 x 12 pipeline
 *     with 38 clocks does not), and then (b) runs alone.
 *
 * (b) The min-cut trajectory, as Perseus (Phillips-Dessouky's iterative
 *     min-cut time-cost trade-off) but on the exact discrete options and
 *     without a fitted curve:
 *   1. Start with every node at its cheapest option (largest t, least c).
 *   2. Near-critical subgraph: nodes and edges with float < delta (delta =
 *      1e-4 x the all-fastest time; exact float 0 when that subgraph
 *      cannot be cut), integer ns.  Every path longer than T - delta lies
 *      in it.
 *   3. Minimum vertex cut of it (source = nodes without predecessors, sink
 *      = nodes without successors), node weight = the cost rate of moving
 *      it to its next option at least delta faster, (c_a - c_k) / (t_k -
 *      t_a) J/s, infinite at the fastest option; max-flow (Dinic) on the
 *      node-split graph with integer capacities (mJ/s).  Every such path
 *      crosses the cut, so the iteration shortens by at least delta (or to
 *      the next critical length).
 *   4. Reclaim: the new iteration time T' is a deadline; in topological
 *      order every node moves to its slowest (cheapest) option that still
 *      fits between its earliest start and latest finish.  This undoes
 *      speed-ups that turned out unneeded (the role of Phillips-Dessouky's
 *      backward cut arcs) and spends all new slack.
 *   5. Record (T', E), go to 2 until the cut is infinite: some critical
 *      path is all at fastest options, i.e. T' is the all-fastest time.
 *   6. The fastest point, the plan run without slowdown, gets more work:
 *      three candidates at the all-fastest time (where the trajectory
 *      ended; every node fastest then reclaimed in topological order; the
 *      same reclaimed in 16 rounds of halving saving rate, so slack goes to
 *      the steps that save most per second first) are each polished
 *      (repeatedly: speed one node up by one option, reclaim, keep it if
 *      the cost fell).
 *     Points are kept Pareto-filtered as they come, at least delta apart
 *     in time, so only frontier plans are stored.
 *
 * Quality, measured (tests/test-perseus.c checks the first two):
 *  - small DAGs (2-3 stages, 2-4 microbatches, 2-4 clocks): exact, equal
 *    to brute force;
 *  - the trajectory alone on the same DAGs, 220 random and measured
 *    instances: mean gap to the exact frontier 0.65% over 3,504 points,
 *    worst 11.5% (coarse clocks are its weak spot), fastest point within
 *    1.1%;
 *  - the 16 measured GPT-3/Bloom configurations: the fastest point saves
 *    more than EnvPipe at the same time in every one (docs/perseus.md).
 * Speed: a step is one longest-path pass, one max-flow on the near-critical
 * subgraph and one reclaim pass; GPT-3 8 stages x 96 microbatches (1,536
 * computations, 38 clocks) takes ~3 s of CPU (docs/perseus.md).
 *
 * Plans on workloads (PerseusModel) price every computation through the
 * machine's own kernel_cost at each candidate clock, so a computation-level
 * workload's option times are the engine's durations to the nanosecond and
 * a simulated plan reproduces the planner's time and energy when idle power
 * equals blocking power, the Perseus model.  With idle < blocking power the
 * engine charges time a GPU spends neither computing nor waiting in a
 * transfer (after its last computation) at idle power instead.
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
 *
 * Kernel-level clocks inside computations (perseus_kernel_plan, the
 * combined policy js.policy.perseus{ kernel = true }): given a frontier
 * point (clock k_i per computation i), each computation's kernels, grouped
 * by shape u on the stage's representative rank and priced exactly as
 * above (t_u(k), E_u(k)), get clocks x_u solving the multiple-choice
 * knapsack
 *
 *   min sum_u c_u(x_u),  c_u(k) = E_u(k) - P_block t_u(k)
 *   s.t. sum_u t_u(x_u) <= sum_u t_u(k_i)
 *
 * (models/dvfs/knapsack.h, greedy on the LP hull plus fill; the DP variant
 * gave the same simulated energy on GPT-3 1.3B at 6x the time).  The
 * single clock k_i is feasible, so the choice is kept only when it is
 * strictly cheaper and not longer (exact integer ns); then no computation
 * lengthens and, by the energy model above, the DAG's energy cannot rise.
 * perseus_run simulates both plans and runs the kernel-level one only when
 * the engine confirms it (time <= 1.001 x, energy < the point's), which
 * also covers switching
 * latency (every kernel clock change costs a switch on the engine) and
 * what the DAG does not model.  Candidate clocks are the model's SM clocks
 * (memory clock auto).
 *
 * Known limits
 * ------------
 * - Beyond the exact DP's reach the frontier is a heuristic's (above).
 * - Transfers are priced at their uncontended network time.
 * - Kernel-level workloads: a computation's option is its kernels at one
 *   clock plus its collectives and receive at fixed duration; waits inside
 *   a computation (TP collectives blocking on slower ranks) are not
 *   modelled.
 * - Kernel-level clocks inside computations keep the frontier point's
 *   clocks as budgets: the frontier itself is not re-planned on the
 *   kernel-refined options (which could move the point).
 */
#include "models/dvfs/perseus.h"
#include "models/dvfs/envpipe.h"
#include "models/dvfs/zeus.h"
#include "models/dvfs/knapsack.h"
#include "models/dvfs/policy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK(perseus-error-quark, perseus_error)

/* ======================================================================== */
/* Groups                                                                     */

void perseus_groups_free(PerseusGroups *g)
{
  if (g == NULL)
    return;
  if (g->node != NULL)
    for (guint r = 0; r < g->n_ranks; r++)
      g_free(g->node[r]);
  g_free(g->node);
  if (g->order != NULL)
    for (guint s = 0; s < g->n_stages; s++)
      g_free(g->order[s]);
  g_free(g->order);
  g_free(g->pipeline);
  g_free(g->stage);
  g_free(g->rep_rank);
  g_free(g);
}

gboolean perseus_schedule_order(const char *schedule, guint S, guint M,
                                guint s, guint32 *out)
{
  guint n = 0;
  if (g_strcmp0(schedule, "gpipe") == 0) {
    for (guint m = 0; m < M; m++)
      out[n++] = perseus_node_id(M, s, m, FALSE);
    for (guint m = 0; m < M; m++)
      out[n++] = perseus_node_id(M, s, m, TRUE);
    return TRUE;
  }
  if (g_strcmp0(schedule, "1f1b") != 0)
    return FALSE;
  guint warm = MIN(S - s - 1, M);
  for (guint m = 0; m < warm; m++)
    out[n++] = perseus_node_id(M, s, m, FALSE);
  for (guint i = 0; i < M - warm; i++) {
    out[n++] = perseus_node_id(M, s, warm + i, FALSE);
    out[n++] = perseus_node_id(M, s, i, TRUE);
  }
  for (guint m = M - warm; m < M; m++)
    out[n++] = perseus_node_id(M, s, m, TRUE);
  return TRUE;
}

static gboolean invalid(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static gboolean invalid(GError **error, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error_literal(error, PERSEUS_ERROR, PERSEUS_ERROR_INVALID, msg);
  return FALSE;
}

PerseusGroups *perseus_groups_new(const SimWorkload *w, GError **error)
{
  g_return_val_if_fail(w != NULL, NULL);
  guint S = w->pp, M = w->microbatches, dp = w->dp, tp = w->tp;
  if (S == 0 || M == 0 || dp == 0 || tp == 0) {
    invalid(error, "the workload has no pipeline layout (pp = %u, "
            "microbatches = %u, dp = %u, tp = %u): per-computation planning "
            "needs a pipelined workload (js.pipeline or js.gpt)", S, M, dp, tp);
    return NULL;
  }
  if (w->schedule != NULL && g_strcmp0(w->schedule, "1f1b") != 0 &&
      g_strcmp0(w->schedule, "gpipe") != 0) {
    invalid(error, "schedule '%s': per-computation planning knows the "
            "\"1f1b\" and \"gpipe\" schedules (one computation per stage, "
            "microbatch and pass)", w->schedule);
    return NULL;
  }
  if ((guint64)tp * dp * S != w->n_ranks) {
    invalid(error, "the workload has %u ranks but tp * dp * pp = %u * %u * "
            "%u", w->n_ranks, tp, dp, S);
    return NULL;
  }
  if ((guint64)2 * S * M > PERSEUS_MAX_NODES) {
    g_set_error(error, PERSEUS_ERROR, PERSEUS_ERROR_LIMIT,
                "%u stages x %u microbatches is more than %u computations",
                S, M, PERSEUS_MAX_NODES);
    return NULL;
  }
  g_autoptr(PerseusGroups) g = g_new0(PerseusGroups, 1);
  g->n_stages = S;
  g->n_microbatches = M;
  g->n_pipelines = dp;
  g->tp = tp;
  g->n_ranks = w->n_ranks;
  g->node = g_new0(guint32 *, w->n_ranks);
  g->pipeline = g_new0(guint, w->n_ranks);
  g->stage = g_new0(guint, w->n_ranks);
  g->rep_rank = g_new0(guint, S);
  g->order = g_new0(guint32 *, S);
  g_autofree guint8 *seen = g_new0(guint8, 2 * M);

  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    guint s = rk->stage;
    if (s != r / (tp * dp)) {
      invalid(error, "rank %u has stage %u, but Megatron order (rank = tp_i "
              "+ tp * (dp_i + dp * pp_i)) puts it on stage %u", r, s,
              r / (tp * dp));
      return NULL;
    }
    g->stage[r] = s;
    g->pipeline[r] = (r / tp) % dp;
    guint32 *nd = g->node[r] = g_new(guint32, MAX(rk->n_ops, 1));
    memset(seen, 0, 2 * M);
    for (guint32 i = 0; i < rk->n_ops; i++) {
      const SimOp *op = &rk->ops[i];
      nd[i] = PERSEUS_NO_NODE;
      if (op->kind != SIM_OP_KERNEL && op->kind != SIM_OP_COLLECTIVE &&
          op->kind != SIM_OP_RECV)
        continue;
      if (op->phase != SIM_PHASE_FORWARD && op->phase != SIM_PHASE_BACKWARD)
        continue;
      if (op->microbatch == G_MAXUINT16)
        continue;
      if (op->microbatch >= M) {
        invalid(error, "rank %u op %u ('%s'): microbatch %u, but the "
                "workload has %u microbatches", r, i,
                sim_workload_name(w, op->name), op->microbatch, M);
        return NULL;
      }
      gboolean b = op->phase == SIM_PHASE_BACKWARD;
      nd[i] = perseus_node_id(M, s, op->microbatch, b);
      seen[op->microbatch * 2 + (b ? 1 : 0)] = 1;
    }
    for (guint k = 0; k < 2 * M; k++)
      if (!seen[k]) {
        invalid(error, "rank %u (stage %u) has no op in the %s of microbatch "
                "%u", r, s, k % 2 ? "backward" : "forward", k / 2);
        return NULL;
      }
  }
  /* Program order of each stage, from its representative rank. */
  for (guint s = 0; s < S; s++) {
    guint rep = s * tp * dp;
    g->rep_rank[s] = rep;
    guint32 *ord = g->order[s] = g_new(guint32, 2 * M);
    memset(seen, 0, 2 * M);
    guint n = 0;
    const SimRank *rk = &w->ranks[rep];
    for (guint32 i = 0; i < rk->n_ops; i++) {
      guint32 id = g->node[rep][i];
      if (id == PERSEUS_NO_NODE || rk->ops[i].kind != SIM_OP_KERNEL)
        continue;
      guint32 local = id - perseus_node_id(M, s, 0, FALSE);
      if (!seen[local]) {
        seen[local] = 1;
        ord[n++] = id;
      }
    }
    if (n != 2 * M) {
      invalid(error, "stage %u: %u of its %u computations have kernels "
              "(a computation made of collectives only cannot be planned)",
              s, n, 2 * M);
      return NULL;
    }
  }
  return g_steal_pointer(&g);
}

/* ======================================================================== */
/* DAG                                                                        */

struct PerseusDag {
  guint n_gpus;
  double p_block;
  gboolean finished;
  GArray *gpu;       /* guint per node */
  GArray *opt_off;   /* guint, n + 1 */
  GArray *opts;      /* PerseusOption */
  GArray *edges;     /* guint32 pairs */
  /* After finish: */
  guint n;
  guint *succ_off, *succ, *pred_off, *pred;
  guint *topo;
  guint *pr_off;     /* pruned options, n + 1 offsets */
  gint64 *pr_t;
  double *pr_c;
  guint16 *pr_orig;  /* index into the node's own options */
};

PerseusDag *perseus_dag_new(guint n_gpus, double p_block_w)
{
  PerseusDag *d = g_new0(PerseusDag, 1);
  d->n_gpus = n_gpus;
  d->p_block = p_block_w;
  d->gpu = g_array_new(FALSE, FALSE, sizeof(guint));
  d->opt_off = g_array_new(FALSE, FALSE, sizeof(guint));
  guint zero = 0;
  g_array_append_val(d->opt_off, zero);
  d->opts = g_array_new(FALSE, FALSE, sizeof(PerseusOption));
  d->edges = g_array_new(FALSE, FALSE, sizeof(guint32));
  return d;
}

void perseus_dag_free(PerseusDag *d)
{
  if (d == NULL)
    return;
  g_array_unref(d->gpu);
  g_array_unref(d->opt_off);
  g_array_unref(d->opts);
  g_array_unref(d->edges);
  g_free(d->succ_off);
  g_free(d->succ);
  g_free(d->pred_off);
  g_free(d->pred);
  g_free(d->topo);
  g_free(d->pr_off);
  g_free(d->pr_t);
  g_free(d->pr_c);
  g_free(d->pr_orig);
  g_free(d);
}

guint perseus_dag_add_node(PerseusDag *d, guint gpu, const PerseusOption *opts,
                           guint n)
{
  g_return_val_if_fail(d != NULL && !d->finished, 0);
  g_array_append_val(d->gpu, gpu);
  g_array_append_vals(d->opts, opts, n);
  guint end = d->opts->len;
  g_array_append_val(d->opt_off, end);
  return d->gpu->len - 1;
}

void perseus_dag_add_edge(PerseusDag *d, guint from, guint to)
{
  g_return_if_fail(d != NULL && !d->finished);
  guint32 e[2] = {from, to};
  g_array_append_vals(d->edges, e, 2);
}

guint perseus_dag_n_nodes(const PerseusDag *d)
{
  return d->gpu->len;
}

guint perseus_dag_n_gpus(const PerseusDag *d)
{
  return d->n_gpus;
}

double perseus_dag_p_block(const PerseusDag *d)
{
  return d->p_block;
}

guint perseus_dag_gpu(const PerseusDag *d, guint node)
{
  return g_array_index(d->gpu, guint, node);
}

guint perseus_dag_n_options(const PerseusDag *d, guint node)
{
  const guint *off = (const guint *)(void *)d->opt_off->data;
  return off[node + 1] - off[node];
}

const PerseusOption *perseus_dag_option(const PerseusDag *d, guint node,
                                        guint k)
{
  const guint *off = (const guint *)(void *)d->opt_off->data;
  g_return_val_if_fail(k < off[node + 1] - off[node], NULL);
  return &g_array_index(d->opts, PerseusOption, off[node] + k);
}

typedef struct {
  gint64 t;
  double c;
  guint16 orig;
} Cand;

static int cmp_cand(const void *a, const void *b)
{
  const Cand *x = a, *y = b;
  if (x->t != y->t)
    return x->t < y->t ? -1 : 1;
  if (x->c != y->c)
    return x->c < y->c ? -1 : 1;
  return (x->orig > y->orig) - (x->orig < y->orig);
}

/* Builds the CSR adjacency and a topological order (Kahn, lowest index
 * first, so the order is deterministic). */
static gboolean build_graph(PerseusDag *d, GError **error)
{
  guint n = d->n;
  guint ne = d->edges->len / 2;
  const guint32 *e = (const guint32 *)(void *)d->edges->data;
  d->succ_off = g_new0(guint, n + 1);
  d->pred_off = g_new0(guint, n + 1);
  for (guint i = 0; i < ne; i++) {
    if (e[2 * i] >= n || e[2 * i + 1] >= n || e[2 * i] == e[2 * i + 1])
      return invalid(error, "edge %u -> %u: nodes out of range (%u nodes) "
                     "or a self-loop", e[2 * i], e[2 * i + 1], n);
    d->succ_off[e[2 * i] + 1]++;
    d->pred_off[e[2 * i + 1] + 1]++;
  }
  for (guint i = 0; i < n; i++) {
    d->succ_off[i + 1] += d->succ_off[i];
    d->pred_off[i + 1] += d->pred_off[i];
  }
  d->succ = g_new(guint, MAX(ne, 1u));
  d->pred = g_new(guint, MAX(ne, 1u));
  g_autofree guint *fs = g_memdup2(d->succ_off, sizeof(guint) * n);
  g_autofree guint *fp = g_memdup2(d->pred_off, sizeof(guint) * n);
  for (guint i = 0; i < ne; i++) {
    d->succ[fs[e[2 * i]]++] = e[2 * i + 1];
    d->pred[fp[e[2 * i + 1]]++] = e[2 * i];
  }
  g_autofree guint *indeg = g_new(guint, MAX(n, 1u));
  for (guint i = 0; i < n; i++)
    indeg[i] = d->pred_off[i + 1] - d->pred_off[i];
  d->topo = g_new(guint, MAX(n, 1u));
  guint head = 0, tail = 0;
  for (guint i = 0; i < n; i++)
    if (indeg[i] == 0)
      d->topo[tail++] = i;
  while (head < tail) {
    guint u = d->topo[head++];
    for (guint k = d->succ_off[u]; k < d->succ_off[u + 1]; k++)
      if (--indeg[d->succ[k]] == 0)
        d->topo[tail++] = d->succ[k];
  }
  if (tail != n)
    return invalid(error, "the computation graph has a cycle (%u of %u "
                   "nodes ordered)", tail, n);
  return TRUE;
}

gboolean perseus_dag_finish(PerseusDag *d, GError **error)
{
  g_return_val_if_fail(d != NULL && !d->finished, FALSE);
  guint n = d->n = d->gpu->len;
  if (n == 0)
    return invalid(error, "the computation graph is empty");
  if (n > PERSEUS_MAX_NODES) {
    g_set_error(error, PERSEUS_ERROR, PERSEUS_ERROR_LIMIT,
                "%u computations is more than %u", n, PERSEUS_MAX_NODES);
    return FALSE;
  }
  if (!(isfinite(d->p_block) && d->p_block >= 0.0))
    return invalid(error, "blocking power %g W must be finite and >= 0",
                   d->p_block);
  const guint *off = (const guint *)(void *)d->opt_off->data;
  d->pr_off = g_new0(guint, n + 1);
  GArray *pt = g_array_new(FALSE, FALSE, sizeof(gint64));
  GArray *pc = g_array_new(FALSE, FALSE, sizeof(double));
  GArray *po = g_array_new(FALSE, FALSE, sizeof(guint16));
  g_autofree Cand *cand = NULL;
  guint cap = 0;
  gboolean ok = TRUE;
  for (guint i = 0; i < n && ok; i++) {
    guint g = g_array_index(d->gpu, guint, i);
    guint no = off[i + 1] - off[i];
    if (g >= d->n_gpus) {
      ok = invalid(error, "node %u runs on GPU %u of %u", i, g, d->n_gpus);
      break;
    }
    if (no == 0 || no > G_MAXUINT16) {
      ok = invalid(error, "node %u has %u options (must be 1..65535)", i, no);
      break;
    }
    if (no > cap) {
      cap = no;
      cand = g_renew(Cand, cand, cap);
    }
    for (guint k = 0; k < no; k++) {
      const PerseusOption *o = &g_array_index(d->opts, PerseusOption,
                                              off[i] + k);
      if (o->time_ns <= 0 || !(isfinite(o->energy_j) && o->energy_j >= 0)) {
        ok = invalid(error, "node %u option %u (%u MHz): time %" G_GINT64_FORMAT
                     " ns and energy %g J must be > 0 and finite", i, k,
                     o->sm_mhz, o->time_ns, o->energy_j);
        break;
      }
      cand[k].t = o->time_ns;
      cand[k].c = o->energy_j - d->p_block * (double)o->time_ns * 1e-9;
      cand[k].orig = (guint16)k;
    }
    if (!ok)
      break;
    qsort(cand, no, sizeof(Cand), cmp_cand);
    /* Keep the (t, c) Pareto set: c strictly decreasing as t grows. */
    double best = G_MAXDOUBLE;
    for (guint k = 0; k < no; k++) {
      if (cand[k].c < best) {
        best = cand[k].c;
        g_array_append_val(pt, cand[k].t);
        g_array_append_val(pc, cand[k].c);
        g_array_append_val(po, cand[k].orig);
      }
    }
    d->pr_off[i + 1] = pt->len;
  }
  d->pr_t = (gint64 *)(void *)g_array_free(pt, FALSE);
  d->pr_c = (double *)(void *)g_array_free(pc, FALSE);
  d->pr_orig = (guint16 *)(void *)g_array_free(po, FALSE);
  if (!ok || !build_graph(d, error))
    return FALSE;
  d->finished = TRUE;
  return TRUE;
}

PerseusDag *perseus_dag_pipeline(guint S, guint M, const guint32 *const *order,
                                 const PerseusOption *const *opts,
                                 const guint *n_opts, const gint64 *tail_ns,
                                 double p_block_w, GError **error)
{
  g_return_val_if_fail(order != NULL && opts != NULL && n_opts != NULL, NULL);
  if (S == 0 || M == 0 || (guint64)2 * S * M > PERSEUS_MAX_NODES) {
    g_set_error(error, PERSEUS_ERROR, PERSEUS_ERROR_LIMIT,
                "a pipeline of %u stages x %u microbatches cannot be planned "
                "(1..%u computations)", S, M, PERSEUS_MAX_NODES);
    return NULL;
  }
  guint n = 2 * S * M;
  g_autoptr(PerseusDag) d = perseus_dag_new(S, p_block_w);
  for (guint id = 0; id < n; id++)
    perseus_dag_add_node(d, id / (2 * M), opts[id], n_opts[id]);
  g_autofree guint8 *seen = g_new0(guint8, n);
  for (guint s = 0; s < S; s++) {
    for (guint k = 0; k < 2 * M; k++) {
      guint32 id = order[s][k];
      if (id >= n || id / (2 * M) != s || seen[id]) {
        invalid(error, "stage %u: position %u of its order names node %u "
                "(not one of its own computations, or twice)", s, k, id);
        return NULL;
      }
      if ((id & 1u) && !seen[id - 1]) {
        invalid(error, "stage %u: the backward of microbatch %u comes before "
                "its forward", s, (id / 2) % M);
        return NULL;
      }
      seen[id] = 1;
      if (k > 0)
        perseus_dag_add_edge(d, order[s][k - 1], id);
    }
  }
  /* F(s,m) -> B(s,m) holds through the stage order (checked above), so it
   * is not added: fewer edges, narrower DP states. */
  for (guint s = 0; s < S; s++)
    for (guint m = 0; m < M; m++) {
      if (s + 1 < S) {
        perseus_dag_add_edge(d, perseus_node_id(M, s, m, FALSE),
                             perseus_node_id(M, s + 1, m, FALSE));
        perseus_dag_add_edge(d, perseus_node_id(M, s + 1, m, TRUE),
                             perseus_node_id(M, s, m, TRUE));
      }
    }
  for (guint s = 0; tail_ns != NULL && s < S; s++) {
    if (tail_ns[s] <= 0)
      continue;
    PerseusOption o = {0, tail_ns[s], p_block_w * (double)tail_ns[s] * 1e-9};
    guint t = perseus_dag_add_node(d, s, &o, 1);
    perseus_dag_add_edge(d, order[s][2 * M - 1], t);
  }
  if (!perseus_dag_finish(d, error))
    return NULL;
  return g_steal_pointer(&d);
}

void perseus_dag_structure(const PerseusDag *d, const guint **topo,
                           const guint **pred_off, const guint **pred,
                           const guint **succ_off, const guint **succ,
                           guint *n_edges)
{
  g_return_if_fail(d != NULL && d->finished);
  *topo = d->topo;
  *pred_off = d->pred_off;
  *pred = d->pred;
  *succ_off = d->succ_off;
  *succ = d->succ;
  *n_edges = d->edges->len / 2;
}

guint16 *perseus_dag_max_choice(const PerseusDag *d)
{
  guint n = perseus_dag_n_nodes(d);
  guint16 *c = g_new0(guint16, MAX(n, 1u));
  for (guint i = 0; i < n; i++) {
    guint no = perseus_dag_n_options(d, i);
    guint best = 0;
    for (guint k = 1; k < no; k++) {
      const PerseusOption *o = perseus_dag_option(d, i, k);
      const PerseusOption *b = perseus_dag_option(d, i, best);
      if (o->sm_mhz > b->sm_mhz)
        best = k;
    }
    c[i] = (guint16)best;
  }
  return c;
}

/* Duration of node i under option k of its own list, scaled by f. */
static inline gint64 scaled_ns(gint64 t, double f)
{
  return f == 1.0 ? t : (gint64)llround((double)t * f);
}

void perseus_dag_eval(const PerseusDag *d, const guint16 *choice,
                      const double *gpu_factor, gint64 *time_ns,
                      double *energy_j)
{
  g_return_if_fail(d != NULL && d->finished && choice != NULL);
  guint n = d->n;
  g_autofree gint64 *fin = g_new(gint64, n);
  gint64 T = 0;
  double e = 0.0, busy_s = 0.0;
  for (guint q = 0; q < n; q++) {
    guint i = d->topo[q];
    gint64 es = 0;
    for (guint k = d->pred_off[i]; k < d->pred_off[i + 1]; k++)
      es = MAX(es, fin[d->pred[k]]);
    const PerseusOption *o = perseus_dag_option(d, i, choice[i]);
    double f = gpu_factor != NULL && o->sm_mhz != 0
                 ? gpu_factor[g_array_index(d->gpu, guint, i)]
                 : 1.0;
    gint64 t = scaled_ns(o->time_ns, f);
    fin[i] = es + t;
    T = MAX(T, fin[i]);
    e += o->energy_j * f;
    busy_s += (double)t * 1e-9;
  }
  *time_ns = T;
  *energy_j = e + d->p_block * ((double)T * 1e-9 * d->n_gpus - busy_s);
}

/* ======================================================================== */
/* Frontier                                                                   */

/* Max-flow (Dinic) on an arc list with int64 capacities. */
typedef struct {
  gint32 to, next;
  gint64 cap;
} Arc;

typedef struct {
  guint nv;
  gint32 *head, *it, *level, *queue;
  GArray *arcs;   /* Arc, paired: a and a ^ 1 */
} Flow;

static void flow_reset(Flow *f, guint nv)
{
  if (nv > f->nv) {
    f->head = g_renew(gint32, f->head, nv);
    f->it = g_renew(gint32, f->it, nv);
    f->level = g_renew(gint32, f->level, nv);
    f->queue = g_renew(gint32, f->queue, nv);
    f->nv = nv;
  }
  for (guint v = 0; v < nv; v++)
    f->head[v] = -1;
  g_array_set_size(f->arcs, 0);
}

static void flow_arc(Flow *f, gint32 u, gint32 v, gint64 cap)
{
  Arc a = {v, f->head[u], cap};
  g_array_append_val(f->arcs, a);
  f->head[u] = (gint32)f->arcs->len - 1;
  Arc b = {u, f->head[v], 0};
  g_array_append_val(f->arcs, b);
  f->head[v] = (gint32)f->arcs->len - 1;
}

/* BFS levels from s over arcs with residual capacity; returns TRUE when t
 * is reachable. */
static gboolean flow_bfs(Flow *f, guint nv, gint32 s, gint32 t)
{
  Arc *A = (Arc *)(void *)f->arcs->data;
  for (guint v = 0; v < nv; v++)
    f->level[v] = -1;
  guint qh = 0, qt = 0;
  f->level[s] = 0;
  f->queue[qt++] = s;
  while (qh < qt) {
    gint32 u = f->queue[qh++];
    /* Beyond the sink's level nothing can be on a shortest path. */
    if (f->level[t] >= 0 && f->level[u] >= f->level[t])
      break;
    for (gint32 a = f->head[u]; a >= 0; a = A[a].next)
      if (A[a].cap > 0 && f->level[A[a].to] < 0) {
        f->level[A[a].to] = f->level[u] + 1;
        f->queue[qt++] = A[a].to;
      }
  }
  return f->level[t] >= 0;
}

/* Blocking-flow DFS with current-arc pointers, pushing along as many
 * paths as fit in `pushed` (recursion depth <= the longest level path, a
 * few thousand at most). */
static gint64 flow_dfs(Flow *f, gint32 u, gint32 t, gint64 pushed)
{
  if (u == t)
    return pushed;
  Arc *A = (Arc *)(void *)f->arcs->data;
  gint64 total = 0;
  for (; f->it[u] >= 0; f->it[u] = A[f->it[u]].next) {
    gint32 a = f->it[u];
    gint32 v = A[a].to;
    if (A[a].cap <= 0 || f->level[v] != f->level[u] + 1)
      continue;
    gint64 got = flow_dfs(f, v, t, MIN(pushed - total, A[a].cap));
    if (got > 0) {
      A[a].cap -= got;
      A[a ^ 1].cap += got;
      total += got;
      if (total == pushed)
        return total; /* this arc may still have room: keep it current */
    }
  }
  f->level[u] = -1; /* dead end for the rest of this phase */
  return total;
}

/* Max flow from s to t, stopping once it reaches `limit`. */
static gint64 flow_max(Flow *f, guint nv, gint32 s, gint32 t, gint64 limit)
{
  gint64 total = 0;
  while (total < limit && flow_bfs(f, nv, s, t)) {
    memcpy(f->it, f->head, sizeof(gint32) * nv);
    gint64 got;
    while (total < limit && (got = flow_dfs(f, s, t, limit - total)) > 0)
      total += got;
  }
  return total;
}

/* Node capacity at a node's fastest option, and the cap on finite ones: a
 * cut of finite capacities always sums to less than CAP_INF. */
#define CAP_INF ((gint64)1 << 60)
#define CAP_MAX ((gint64)1 << 40)

typedef struct {
  const PerseusDag *d;
  guint n;
  guint *k;           /* pruned option index per node */
  gint64 *es, *lf;
  guint8 *crit;
  Flow flow;
  GArray *stack;      /* PerseusPoint: the frontier, fastest first */
  gint64 delta;       /* least time a cut node gains per step (ns) */
  gint64 keep;        /* least time between two kept points (ns) */
  guint *tgt;         /* per node: option it moves to if cut */
} Planner;

static inline gint64 cur_t(const Planner *p, guint i)
{
  return p->d->pr_t[p->d->pr_off[i] + p->k[i]];
}

/* Earliest starts; returns the iteration time. */
static gint64 forward(Planner *p)
{
  const PerseusDag *d = p->d;
  gint64 T = 0;
  for (guint q = 0; q < p->n; q++) {
    guint i = d->topo[q];
    gint64 es = 0;
    for (guint k = d->pred_off[i]; k < d->pred_off[i + 1]; k++) {
      guint u = d->pred[k];
      es = MAX(es, p->es[u] + cur_t(p, u));
    }
    p->es[i] = es;
    T = MAX(T, es + cur_t(p, i));
  }
  return T;
}

/* Latest finishes for deadline T. */
static void backward(Planner *p, gint64 T)
{
  const PerseusDag *d = p->d;
  for (guint q = p->n; q-- > 0;) {
    guint i = d->topo[q];
    gint64 lf = T;
    for (guint k = d->succ_off[i]; k < d->succ_off[i + 1]; k++) {
      guint v = d->succ[k];
      lf = MIN(lf, p->lf[v] - cur_t(p, v));
    }
    p->lf[i] = lf;
  }
}

/* Moves every node, in topological order, to its slowest option that fits
 * between its earliest start (from its final predecessors) and its latest
 * finish (from its untouched successors) under deadline T. */
static void reclaim_at(Planner *p, gint64 T, double lambda)
{
  const PerseusDag *d = p->d;
  backward(p, T);
  for (guint q = 0; q < p->n; q++) {
    guint i = d->topo[q];
    gint64 es = 0;
    for (guint k = d->pred_off[i]; k < d->pred_off[i + 1]; k++) {
      guint u = d->pred[k];
      es = MAX(es, p->es[u] + cur_t(p, u));
    }
    p->es[i] = es;
    gint64 window = p->lf[i] - es;
    guint base = d->pr_off[i], last = d->pr_off[i + 1] - base - 1;
    while (p->k[i] < last && d->pr_t[base + p->k[i] + 1] <= window) {
      guint a = base + p->k[i];
      /* Saving per second of slack this step spends. */
      double rate = (d->pr_c[a] - d->pr_c[a + 1]) /
                    ((double)(d->pr_t[a + 1] - d->pr_t[a]) * 1e-9);
      if (rate < lambda)
        break;
      p->k[i]++;
    }
  }
}

static void reclaim(Planner *p, gint64 T)
{
  reclaim_at(p, T, 0.0);
}

/* Reclaim in rounds of decreasing saving rate, so that slack goes to the
 * steps that save the most per second first, wherever they are in the
 * DAG (a plain topological pass hands it to the earliest nodes). */
#define RECLAIM_ROUNDS 16
static void reclaim_rated(Planner *p, gint64 T)
{
  const PerseusDag *d = p->d;
  double top = 0.0;
  for (guint i = 0; i < p->n; i++) {
    guint base = d->pr_off[i], last = d->pr_off[i + 1] - base - 1;
    for (guint k = p->k[i]; k < last; k++) {
      guint a = base + k;
      top = MAX(top, (d->pr_c[a] - d->pr_c[a + 1]) /
                       ((double)(d->pr_t[a + 1] - d->pr_t[a]) * 1e-9));
    }
  }
  double lambda = top;
  for (guint r = 0; r < RECLAIM_ROUNDS; r++, lambda *= 0.5)
    reclaim_at(p, T, lambda);
  reclaim_at(p, T, 0.0);
}

static double plan_cost(const Planner *p)
{
  const PerseusDag *d = p->d;
  double c = 0.0;
  for (guint i = 0; i < p->n; i++)
    c += d->pr_c[d->pr_off[i] + p->k[i]];
  return c;
}

/* Local improvement at deadline T: speeding one node up by one option and
 * reclaiming may free slack worth more elsewhere; keep every such move
 * that lowers the cost, until none does. */
static void polish(Planner *p, gint64 T)
{
  const PerseusDag *d = p->d;
  guint n = p->n;
  g_autofree guint *save = g_new(guint, n);
  double cost = plan_cost(p);
  gboolean improved = TRUE;
  guint passes = 0;
  while (improved && passes++ < 8) {
    improved = FALSE;
    for (guint q = 0; q < n; q++) {
      guint a = d->topo[q];
      if (p->k[a] == 0)
        continue;
      memcpy(save, p->k, sizeof(guint) * n);
      p->k[a]--;
      reclaim(p, T);
      double c2 = plan_cost(p);
      if (c2 < cost - 1e-12 * MAX(1.0, fabs(cost))) {
        cost = c2;
        improved = TRUE;
      } else {
        memcpy(p->k, save, sizeof(guint) * n);
      }
    }
  }
}

/* Records the current plan (iteration time T) as a frontier candidate:
 * p->stack is kept a Pareto frontier (time ascending, energy strictly
 * descending), so only frontier plans are ever stored. */
static void record(Planner *p, gint64 T, gboolean force)
{
  const PerseusDag *d = p->d;
  double E = plan_cost(p) + d->p_block * d->n_gpus * (double)T * 1e-9;
  GArray *a = p->stack;
  PerseusPoint *pts = (PerseusPoint *)(void *)a->data;
  /* j = first point slower than T. */
  guint lo = 0, hi = a->len;
  while (lo < hi) {
    guint mid = (lo + hi) / 2;
    if (pts[mid].time_ns <= T)
      lo = mid + 1;
    else
      hi = mid;
  }
  guint j = lo;
  if (j > 0 && pts[j - 1].energy_j <= E)
    return; /* as fast or faster and no dearer: dominated */
  /* Points no faster and no cheaper than this one are dominated by it. */
  guint from = (j > 0 && pts[j - 1].time_ns == T) ? j - 1 : j;
  guint to = from;
  while (to < a->len && pts[to].energy_j >= E)
    to++;
  /* Thin: a point closer than `keep` to the next slower one it does not
   * dominate adds nothing worth storing (unless forced: the endpoints). */
  if (!force && to < a->len && pts[to].time_ns - T < p->keep)
    return;
  for (guint q = from; q < to; q++)
    g_free(pts[q].choice);
  if (to > from)
    g_array_remove_range(a, from, to - from);
  PerseusPoint pt;
  pt.time_ns = T;
  pt.energy_j = E;
  pt.choice = g_new(guint16, MAX(p->n, 1u));
  for (guint i = 0; i < p->n; i++)
    pt.choice[i] = d->pr_orig[d->pr_off[i] + p->k[i]];
  g_array_insert_val(a, from, pt);
}

/* One compression step at iteration time T (es current): the minimum
 * vertex cut of every path longer than T - thr (thr = 1: the critical
 * paths exactly), each cut node moving to its option at least delta
 * faster.  Returns FALSE when the cut is infinite (some such path is all
 * at fastest options). */
static gboolean compress(Planner *p, gint64 T, gint64 thr)
{
  const PerseusDag *d = p->d;
  guint n = p->n;
  backward(p, T);
  for (guint i = 0; i < n; i++)
    p->crit[i] = p->lf[i] - p->es[i] - cur_t(p, i) < thr;
  guint nv = 2 * n + 2;
  gint32 src = (gint32)(2 * n), snk = (gint32)(2 * n + 1);
  Flow *f = &p->flow;
  flow_reset(f, nv);
  for (guint i = 0; i < n; i++) {
    if (!p->crit[i])
      continue;
    gint64 cap = CAP_INF;
    if (p->k[i] > 0) {
      /* The next faster option at least delta faster (else the fastest):
       * tiny measured steps would make tiny iterations. */
      guint base = d->pr_off[i], b = base + p->k[i], a = b - 1;
      while (a > base && d->pr_t[b] - d->pr_t[a] < p->delta)
        a--;
      p->tgt[i] = a - base;
      double dc = d->pr_c[a] - d->pr_c[b];
      double dt = (double)(d->pr_t[b] - d->pr_t[a]) * 1e-9;
      double rate = dc / dt * 1e3; /* mJ per second of speed-up */
      cap = rate >= (double)CAP_MAX ? CAP_MAX : MAX((gint64)llround(rate), 1);
    }
    flow_arc(f, (gint32)(2 * i), (gint32)(2 * i + 1), cap);
    if (d->pred_off[i] == d->pred_off[i + 1])
      flow_arc(f, src, (gint32)(2 * i), CAP_INF);
    if (d->succ_off[i] == d->succ_off[i + 1])
      flow_arc(f, (gint32)(2 * i + 1), snk, CAP_INF);
    gint64 fin = p->es[i] + cur_t(p, i);
    for (guint k = d->succ_off[i]; k < d->succ_off[i + 1]; k++) {
      guint v = d->succ[k];
      if (p->crit[v] && p->lf[v] - cur_t(p, v) - fin < thr)
        flow_arc(f, (gint32)(2 * i + 1), (gint32)(2 * v), CAP_INF);
    }
  }
  gint64 flow = flow_max(f, nv, src, snk, CAP_INF);
  if (flow >= CAP_INF)
    return FALSE;
  /* Source side of the minimum cut: reachable in the residual graph. */
  flow_bfs(f, nv, src, snk);
  gboolean moved = FALSE;
  for (guint i = 0; i < n; i++)
    if (p->crit[i] && f->level[2 * i] >= 0 && f->level[2 * i + 1] < 0) {
      g_assert(p->k[i] > 0);
      p->k[i] = p->tgt[i];
      moved = TRUE;
    }
  return moved;
}

/* ---- the exact frontier of small DAGs ----------------------------------- */

/* Dynamic programming over Pareto states.  Nodes are taken in order of
 * their all-fastest earliest start (a topological order); after node q the
 * state of a partial plan is (finish time of every processed node that
 * still has an unprocessed successor, latest finish of processed sink
 * nodes, cost so far).  What a completion costs and how long it takes
 * depends on nothing else, and is monotone in each component, so a state
 * no better than another in every component can be dropped: the last
 * level's states are exactly the (T, cost) frontier.  The state sets grow
 * with the DAG's width and option count, so the DP gives up (returns
 * FALSE) beyond DP_MAX_STATES states per level or DP_MAX_WORK dominance
 * checks: it is exact for small pipelines (a few stages and microbatches),
 * where the min-cut trajectory is weakest, and never runs long. */
#define DP_MAX_STATES 4096u
#define DP_MAX_WORK ((guint64)1 << 25)

typedef struct {
  double cost;
  gint64 sink;
  guint32 parent;   /* state index in the previous level */
  guint16 opt;      /* pruned option of this level's node */
} DpState;

typedef struct {
  const DpState *st;
} DpSort;

static int cmp_dp(const void *a, const void *b, gpointer data)
{
  const DpSort *ds = data;
  const DpState *x = &ds->st[*(const guint32 *)a], *y = &ds->st[*(const guint32 *)b];
  if (x->cost != y->cost)
    return x->cost < y->cost ? -1 : 1;
  if (x->sink != y->sink)
    return x->sink < y->sink ? -1 : 1;
  guint32 ia = *(const guint32 *)a, ib = *(const guint32 *)b;
  return (ia > ib) - (ia < ib);
}

static gboolean dp_frontier(const PerseusDag *d, GArray *out)
{
  guint n = d->n;
  /* Order: all-fastest earliest start, ties by topological position. */
  g_autofree gint64 *es0 = g_new0(gint64, n);
  g_autofree guint *tpos = g_new(guint, n);
  for (guint q = 0; q < n; q++) {
    guint i = d->topo[q];
    tpos[i] = q;
    gint64 e = 0;
    for (guint k = d->pred_off[i]; k < d->pred_off[i + 1]; k++) {
      guint u = d->pred[k];
      e = MAX(e, es0[u] + d->pr_t[d->pr_off[u]]);
    }
    es0[i] = e;
  }
  g_autofree guint *order = g_memdup2(d->topo, sizeof(guint) * n);
  /* Insertion sort by (es0, topological position): n is small here, and
   * the topological order is already nearly sorted. */
  for (guint q = 1; q < n; q++) {
    guint v = order[q], r = q;
    while (r > 0 && (es0[order[r - 1]] > es0[v] ||
                     (es0[order[r - 1]] == es0[v] && tpos[order[r - 1]] > tpos[v]))) {
      order[r] = order[r - 1];
      r--;
    }
    order[r] = v;
  }
  g_autofree guint *pos = g_new(guint, n);
  for (guint q = 0; q < n; q++)
    pos[order[q]] = q;
  g_autofree gint *lastpos = g_new(gint, n);
  for (guint i = 0; i < n; i++) {
    gint lp = -1;
    for (guint k = d->succ_off[i]; k < d->succ_off[i + 1]; k++)
      lp = MAX(lp, (gint)pos[d->succ[k]]);
    lastpos[i] = lp;
  }

  GPtrArray *levels = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
  g_autoptr(GArray) prevA = g_array_new(FALSE, FALSE, sizeof(guint));
  g_autoptr(GArray) nextA = g_array_new(FALSE, FALSE, sizeof(guint));
  g_autoptr(GArray) prev_fin = g_array_new(FALSE, FALSE, sizeof(gint64));
  g_autoptr(GArray) next_fin = g_array_new(FALSE, FALSE, sizeof(gint64));
  g_autoptr(GArray) cfin = g_array_new(FALSE, FALSE, sizeof(gint64));
  g_autoptr(GArray) kept_idx = g_array_new(FALSE, FALSE, sizeof(guint32));
  g_autoptr(GArray) sorted = g_array_new(FALSE, FALSE, sizeof(guint32));
  g_autofree gint *map = g_new(gint, n + 1);
  g_autofree gint *pidx = g_new(gint, n);
  GArray *prev = g_array_new(FALSE, FALSE, sizeof(DpState));
  DpState root = {0.0, 0, 0, 0};
  g_array_append_val(prev, root);
  g_ptr_array_add(levels, prev);
  guint64 work = 0;
  gboolean ok = TRUE;

  for (guint q = 0; q < n && ok; q++) {
    guint v = order[q];
    /* Next active list: previous minus nodes whose last successor is v,
     * plus v when it has successors; map[j] = index in prevA or -1 = v. */
    for (guint j = 0; j < prevA->len; j++)
      pidx[g_array_index(prevA, guint, j)] = (gint)j;
    g_array_set_size(nextA, 0);
    guint nm = 0;
    for (guint j = 0; j < prevA->len; j++) {
      guint u = g_array_index(prevA, guint, j);
      if (lastpos[u] > (gint)q) {
        g_array_append_val(nextA, u);
        map[nm++] = (gint)j;
      }
    }
    if (lastpos[v] >= 0) {
      g_array_append_val(nextA, v);
      map[nm++] = -1;
    }
    guint na = nextA->len, pa = prevA->len;
    guint no = d->pr_off[v + 1] - d->pr_off[v];
    /* Children. */
    GArray *cur = g_array_new(FALSE, FALSE, sizeof(DpState));
    g_array_set_size(cfin, 0);
    for (guint si = 0; si < prev->len; si++) {
      const DpState *ps = &g_array_index(prev, DpState, si);
      const gint64 *pf = (const gint64 *)(void *)prev_fin->data + (gsize)si * pa;
      gint64 start = 0;
      for (guint k = d->pred_off[v]; k < d->pred_off[v + 1]; k++)
        start = MAX(start, pf[pidx[d->pred[k]]]);
      for (guint o = 0; o < no; o++) {
        gint64 f = start + d->pr_t[d->pr_off[v] + o];
        DpState c;
        c.cost = ps->cost + d->pr_c[d->pr_off[v] + o];
        c.sink = lastpos[v] < 0 ? MAX(ps->sink, f) : ps->sink;
        c.parent = si;
        c.opt = (guint16)o;
        g_array_append_val(cur, c);
        for (guint j = 0; j < na; j++) {
          gint64 x = map[j] < 0 ? f : pf[map[j]];
          g_array_append_val(cfin, x);
        }
      }
    }
    /* Pareto filter: by cost, each child against the kept ones. */
    g_array_set_size(sorted, cur->len);
    for (guint c = 0; c < cur->len; c++)
      g_array_index(sorted, guint32, c) = c;
    DpSort ds = {(const DpState *)(void *)cur->data};
    g_array_sort_with_data(sorted, cmp_dp, &ds);
    g_array_set_size(kept_idx, 0);
    const gint64 *CF = (const gint64 *)(void *)cfin->data;
    const DpState *CS = (const DpState *)(void *)cur->data;
    for (guint c = 0; c < sorted->len && ok; c++) {
      guint32 ci = g_array_index(sorted, guint32, c);
      gboolean dominated = FALSE;
      for (guint kk = 0; kk < kept_idx->len && !dominated; kk++) {
        guint32 ki = g_array_index(kept_idx, guint32, kk);
        if (CS[ki].sink > CS[ci].sink)
          continue;
        gboolean le = TRUE;
        for (guint j = 0; j < na && le; j++)
          le = CF[(gsize)ki * na + j] <= CF[(gsize)ci * na + j];
        dominated = le;
      }
      work += kept_idx->len;
      if (!dominated)
        g_array_append_val(kept_idx, ci);
      if (kept_idx->len > DP_MAX_STATES || work > DP_MAX_WORK)
        ok = FALSE;
    }
    if (!ok) {
      g_array_unref(cur);
      break;
    }
    GArray *lvl = g_array_new(FALSE, FALSE, sizeof(DpState));
    g_array_set_size(next_fin, 0);
    for (guint kk = 0; kk < kept_idx->len; kk++) {
      guint32 ki = g_array_index(kept_idx, guint32, kk);
      g_array_append_val(lvl, CS[ki]);
      g_array_append_vals(next_fin, &CF[(gsize)ki * na], na);
    }
    g_array_unref(cur);
    g_ptr_array_add(levels, lvl);
    prev = lvl;
    GArray *t = prev_fin;
    prev_fin = next_fin;
    next_fin = t;
    t = prevA;
    prevA = nextA;
    nextA = t;
  }
  if (ok) {
    /* Every final state is a plan: backtrack its choices. */
    const GArray *last = g_ptr_array_index(levels, levels->len - 1);
    for (guint si = 0; si < last->len; si++) {
      PerseusPoint pt;
      const DpState *st = &g_array_index(last, DpState, si);
      pt.time_ns = st->sink;
      pt.energy_j = st->cost + d->p_block * d->n_gpus * (double)st->sink * 1e-9;
      pt.choice = g_new(guint16, MAX(n, 1u));
      guint32 idx = si;
      for (guint q = n; q-- > 0;) {
        const GArray *lv = g_ptr_array_index(levels, q + 1);
        const DpState *x = &g_array_index(lv, DpState, idx);
        guint v = order[q];
        pt.choice[v] = d->pr_orig[d->pr_off[v] + x->opt];
        idx = x->parent;
      }
      g_array_append_val(out, pt);
    }
  }
  g_ptr_array_unref(levels);
  return ok;
}

#define MAX_STEPS 10000000u

/* Time, then energy, then the plan itself: a total order, so equal points
 * merge the same way everywhere. */
static int cmp_point(const void *a, const void *b, gpointer data)
{
  const PerseusPoint *x = a, *y = b;
  if (x->time_ns != y->time_ns)
    return x->time_ns < y->time_ns ? -1 : 1;
  if (x->energy_j != y->energy_j)
    return x->energy_j < y->energy_j ? -1 : 1;
  return memcmp(x->choice, y->choice, sizeof(guint16) * GPOINTER_TO_UINT(data));
}

/* The min-cut trajectory (steps 1-5 of the opening comment) at the given
 * resolution; appends its frontier to `out` and returns its step count. */
static guint64 trajectory(const PerseusDag *d, double resolution, GArray *out)
{
  Planner p = {0};
  p.d = d;
  p.n = d->n;
  p.k = g_new(guint, p.n);
  p.es = g_new(gint64, p.n);
  p.lf = g_new(gint64, p.n);
  p.crit = g_new(guint8, p.n);
  p.tgt = g_new0(guint, p.n);
  p.flow.arcs = g_array_new(FALSE, FALSE, sizeof(Arc));
  p.stack = g_array_new(FALSE, FALSE, sizeof(PerseusPoint));
  /* Resolution relative to the all-fastest iteration time. */
  for (guint i = 0; i < p.n; i++)
    p.k[i] = 0;
  gint64 t_fast = forward(&p);
  p.delta = (gint64)((double)t_fast * resolution);
  p.keep = p.delta;

  /* 1. The cheapest plan. */
  for (guint i = 0; i < p.n; i++)
    p.k[i] = d->pr_off[i + 1] - d->pr_off[i] - 1;
  gint64 T = forward(&p);
  record(&p, T, TRUE);
  guint64 steps = 0;
  /* 2-5. Compress until a critical path is all-fastest: near-critical
   * paths first (within delta of T, so every step gains at least delta),
   * the exact critical paths when those cannot be cut. */
  while (steps < MAX_STEPS &&
         (compress(&p, T, MAX(p.delta, (gint64)1)) || compress(&p, T, 1))) {
    steps++;
    gint64 Tn = forward(&p);
    g_assert(Tn < T);
    reclaim(&p, Tn);
    T = forward(&p);
    g_assert(T == Tn);
    record(&p, T, FALSE);
  }
  /* The fastest plans: where the trajectory ended, and the all-fastest
   * plan with its slack reclaimed in topological order and in rounds of
   * decreasing saving rate; each polished (the plan that runs without
   * slowdown deserves the extra work). */
  g_autofree guint *end = g_memdup2(p.k, sizeof(guint) * p.n);
  for (guint round = 0; round < 3; round++) {
    if (round == 0) {
      memcpy(p.k, end, sizeof(guint) * p.n);
    } else {
      for (guint i = 0; i < p.n; i++)
        p.k[i] = 0;
      T = forward(&p);
      if (round == 1)
        reclaim(&p, T);
      else
        reclaim_rated(&p, T);
    }
    T = forward(&p);
    record(&p, T, TRUE);
    polish(&p, T);
    T = forward(&p);
    record(&p, T, TRUE);
  }

  g_array_append_vals(out, p.stack->data, p.stack->len);
  g_array_unref(p.stack);
  g_free(p.k);
  g_free(p.es);
  g_free(p.lf);
  g_free(p.crit);
  g_free(p.tgt);
  g_free(p.flow.head);
  g_free(p.flow.it);
  g_free(p.flow.level);
  g_free(p.flow.queue);
  g_array_unref(p.flow.arcs);
  return steps;
}

void perseus_options_init(PerseusOptions *o)
{
  o->resolution = PERSEUS_RESOLUTION;
  o->exact = TRUE;
  o->trajectory = TRUE;
}

PerseusFrontier *perseus_frontier_with(const PerseusDag *d,
                                       const PerseusOptions *o,
                                       GError **error)
{
  g_return_val_if_fail(d != NULL && o != NULL, NULL);
  if (!d->finished) {
    invalid(error, "the computation graph is not finished");
    return NULL;
  }
  if (!(o->resolution >= 0.0 && o->resolution <= 0.1)) {
    invalid(error, "frontier resolution %g must be in [0, 0.1]",
            o->resolution);
    return NULL;
  }
  if (!o->trajectory && !o->exact) {
    invalid(error, "frontier: neither the trajectory nor the exact method "
            "was asked for");
    return NULL;
  }
  GArray *all = g_array_new(FALSE, FALSE, sizeof(PerseusPoint));
  guint64 steps = 0;
  gboolean exact = FALSE;
  if (o->exact)
    exact = dp_frontier(d, all);
  if (o->trajectory && !exact)
    steps = trajectory(d, o->resolution, all);
  if (all->len == 0) {
    g_array_unref(all);
    g_set_error(error, PERSEUS_ERROR, PERSEUS_ERROR_LIMIT,
                "frontier: the DAG is too large for the exact method alone "
                "(%u computations)", d->n);
    return NULL;
  }
  /* Merge: fastest first, strictly decreasing energy. */
  g_array_sort_with_data(all, cmp_point, GUINT_TO_POINTER(MAX(d->n, 1u)));
  PerseusFrontier *fr = g_new0(PerseusFrontier, 1);
  fr->n_nodes = d->n;
  fr->steps = steps;
  fr->exact = exact;
  fr->points = g_new(PerseusPoint, MAX(all->len, 1u));
  for (guint j = 0; j < all->len; j++) {
    PerseusPoint *pt = &g_array_index(all, PerseusPoint, j);
    if (fr->n_points > 0 &&
        fr->points[fr->n_points - 1].energy_j <= pt->energy_j) {
      g_free(pt->choice);
      continue;
    }
    fr->points[fr->n_points++] = *pt;
  }
  g_array_unref(all);
  return fr;
}

PerseusFrontier *perseus_frontier(const PerseusDag *d, GError **error)
{
  PerseusOptions o;
  perseus_options_init(&o);
  return perseus_frontier_with(d, &o, error);
}

void perseus_frontier_free(PerseusFrontier *f)
{
  if (f == NULL)
    return;
  for (guint j = 0; j < f->n_points; j++)
    g_free(f->points[j].choice);
  g_free(f->points);
  g_free(f);
}

guint perseus_frontier_fit(const PerseusFrontier *f, gint64 time_ns)
{
  guint best = 0;
  for (guint j = 0; j < f->n_points; j++)
    if (f->points[j].time_ns <= time_ns)
      best = j;
  return best;
}

/* ======================================================================== */
/* Workloads on machines                                                      */

struct PerseusModel {
  PerseusGroups *g;
  PerseusDag *dag;
  guint n_clocks;
  guint16 *clocks;     /* option k of every node runs clocks[k] */
  guint n_ranks;
  guint32 *n_ops;      /* per rank */
  gint64 max_tail_ns;  /* the longest stage tail (model_tails) */
  gint64 allmax_ns;    /* the all-max plan's engine iteration, latency 0 */
  gboolean *auto_tail; /* per stage: kernels outside computations (the
                          optimizer), run at auto clocks after them */
};

void perseus_model_free(PerseusModel *pm)
{
  if (pm == NULL)
    return;
  perseus_groups_free(pm->g);
  perseus_dag_free(pm->dag);
  g_free(pm->clocks);
  g_free(pm->n_ops);
  g_free(pm->auto_tail);
  g_free(pm);
}

const PerseusDag *perseus_model_dag(const PerseusModel *pm)
{
  return pm->dag;
}

const PerseusGroups *perseus_model_groups(const PerseusModel *pm)
{
  return pm->g;
}

guint perseus_model_tp(const PerseusModel *pm)
{
  return pm->g->tp;
}

const guint16 *perseus_model_clocks(const PerseusModel *pm, guint *n)
{
  *n = pm->n_clocks;
  return pm->clocks;
}

static int cmp_u16(const void *a, const void *b)
{
  guint x = *(const guint16 *)a, y = *(const guint16 *)b;
  return (x > y) - (x < y);
}

/* The candidate clocks (see perseus_model_new). */
static gboolean model_clocks(PerseusModel *pm, const SimWorkload *w,
                             const GpuSpec *gpu, const PriceTable *table,
                             GError **error)
{
  g_autoptr(GArray) clk = g_array_new(FALSE, FALSE, sizeof(guint16));
  if (table != NULL) {
    guint lo = 0, hi = G_MAXUINT;
    g_autoptr(GHashTable) used = g_hash_table_new(g_direct_hash,
                                                  g_direct_equal);
    for (guint s = 0; s < pm->g->n_stages; s++) {
      guint r = pm->g->rep_rank[s];
      const SimRank *rk = &w->ranks[r];
      for (guint32 i = 0; i < rk->n_ops; i++) {
        if (pm->g->node[r][i] == PERSEUS_NO_NODE ||
            rk->ops[i].kind != SIM_OP_KERNEL)
          continue;
        gint e = price_table_shape_entry(table, rk->ops[i].shape);
        if (e < 0 || g_hash_table_contains(used, GINT_TO_POINTER(e + 1)))
          continue;
        g_hash_table_add(used, GINT_TO_POINTER(e + 1));
        lo = MAX(lo, price_table_min_mhz(table, (guint)e));
        hi = MIN(hi, price_table_max_mhz(table, (guint)e));
        guint np;
        const TablePoint *pts = price_table_points(table, (guint)e, &np);
        for (guint k = 0; k < np; k++) {
          guint16 f = (guint16)pts[k].sm_mhz;
          g_array_append_val(clk, f);
        }
      }
    }
    if (g_hash_table_size(used) > 0) {
      if (lo > hi)
        return invalid(error, "the measured profiles of the computations "
                       "share no clock range");
      g_array_sort(clk, cmp_u16);
      guint n = 0;
      for (guint k = 0; k < clk->len; k++) {
        guint16 f = g_array_index(clk, guint16, k);
        if (f < lo || f > hi || (n > 0 &&
                                 g_array_index(clk, guint16, n - 1) == f))
          continue;
        g_array_index(clk, guint16, n++) = f;
      }
      g_array_set_size(clk, n);
    }
  }
  if (clk->len == 0) {
    if (gpu == NULL)
      return invalid(error, "no GPU to take candidate clocks from");
    guint ns = gpu_sm_n_steps(gpu);
    for (guint k = 0; k < ns; k++) {
      guint16 f = (guint16)gpu_sm_clock_at(gpu, k);
      g_array_append_val(clk, f);
    }
  }
  if (clk->len == 0 || clk->len >= G_MAXUINT16)
    return invalid(error, "%u candidate clocks", clk->len);
  pm->n_clocks = clk->len;
  pm->clocks = g_memdup2(clk->data, sizeof(guint16) * clk->len);
  return TRUE;
}

typedef struct {
  const PerseusGroups *g;
  const gint *rep_stage;   /* per rank: its stage if representative, else -1 */
  gint64 *last_comp, *end; /* per stage */
} TailObs;

static void tail_observe(gpointer data, const SimOpRecord *rec)
{
  TailObs *o = data;
  if (rec->iter != 0 || o->rep_stage[rec->gpu] < 0)
    return;
  guint s = (guint)o->rep_stage[rec->gpu];
  o->end[s] = MAX(o->end[s], rec->end_ns);
  if (o->g->node[rec->gpu][rec->op] != PERSEUS_NO_NODE)
    o->last_comp[s] = MAX(o->last_comp[s], rec->end_ns);
}

/* Per stage, what its representative rank does after its last computation
 * (DP all-reduce, optimizer step, ...), measured in one engine iteration
 * with every computation at the highest candidate clock and clocks
 * switching at once (the latency-free timeline every plan is made in);
 * *allmax_ns gets that iteration's time. */
static gboolean model_tails(const PerseusModel *pm, const SimWorkload *w,
                            const SimMachine *m, gint64 *tail,
                            gint64 *allmax_ns, GError **error)
{
  const PerseusGroups *g = pm->g;
  guint S = g->n_stages, n = 2 * S * g->n_microbatches;
  g_autofree guint16 *top = g_new(guint16, n);
  for (guint i = 0; i < n; i++)
    top[i] = (guint16)(pm->n_clocks - 1);
  g_autoptr(SimPlan) plan = perseus_model_plan_uniform(pm, top);
  g_autofree gint *rep_stage = g_new(gint, w->n_ranks);
  for (guint r = 0; r < w->n_ranks; r++)
    rep_stage[r] = -1;
  for (guint s = 0; s < S; s++)
    rep_stage[g->rep_rank[s]] = (gint)s;
  g_autofree gint64 *last = g_new0(gint64, S);
  g_autofree gint64 *end = g_new0(gint64, S);
  TailObs obs = {g, rep_stage, last, end};
  SimMachine m0 = *m;
  m0.switch_latency_ns = 0;
  g_autoptr(SimEngine) e = sim_engine_new(w, &m0, error);
  if (e == NULL)
    return FALSE;
  sim_engine_set_observer(e, tail_observe, &obs);
  g_autoptr(SimResult) r = sim_engine_run(e, plan, 1, error);
  if (r == NULL)
    return FALSE;
  for (guint s = 0; s < S; s++)
    tail[s] = MAX(end[s] - last[s], (gint64)0);
  *allmax_ns = r->iterations[0].time_ns;
  return TRUE;
}

PerseusModel *perseus_model_new(const SimWorkload *w, const SimMachine *m,
                                const GpuSpec *gpu, const PriceTable *table,
                                GError **error)
{
  g_return_val_if_fail(w != NULL && m != NULL, NULL);
  g_autoptr(PerseusModel) pm = g_new0(PerseusModel, 1);
  pm->g = perseus_groups_new(w, error);
  if (pm->g == NULL)
    return NULL;
  if (m->n_gpus != w->n_ranks) {
    invalid(error, "the machine has %u GPUs but the workload %u ranks",
            m->n_gpus, w->n_ranks);
    return NULL;
  }
  if (!model_clocks(pm, w, gpu, table, error))
    return NULL;
  pm->n_ranks = w->n_ranks;
  pm->n_ops = g_new(guint32, w->n_ranks);
  for (guint r = 0; r < w->n_ranks; r++)
    pm->n_ops[r] = w->ranks[r].n_ops;

  guint S = pm->g->n_stages, M = pm->g->n_microbatches, nc = pm->n_clocks;
  guint n = 2 * S * M;
  guint n_shapes = w->shapes->len;
  /* Per-option totals, then per-(shape, clock) prices computed once. */
  g_autofree gint64 *t_ns = g_new0(gint64, (gsize)n * nc);
  g_autofree double *e_j = g_new0(double, (gsize)n * nc);
  g_autofree SimCost *cost = g_new0(SimCost, (gsize)MAX(n_shapes, 1u) * nc);
  g_autofree guint8 *have = g_new0(guint8, (gsize)MAX(n_shapes, 1u) * nc);
  pm->auto_tail = g_new0(gboolean, S);
  for (guint s = 0; s < S; s++) {
    guint r = pm->g->rep_rank[s];
    const SimRank *rk = &w->ranks[r];
    double comm_w = m->comm_power_w[r];
    for (guint32 i = 0; i < rk->n_ops; i++) {
      guint32 id = pm->g->node[r][i];
      if (id == PERSEUS_NO_NODE) {
        pm->auto_tail[s] |= rk->ops[i].kind == SIM_OP_KERNEL;
        continue;
      }
      const SimOp *op = &rk->ops[i];
      if (op->kind != SIM_OP_KERNEL) {
        /* A collective inside the computation, or the receive it starts
         * with (posted when the previous computation ends, so its transfer
         * time adds to this computation's). */
        const SimShape *sh = &g_array_index(w->shapes, SimShape, op->shape);
        gint64 dur = op->ref_ns;
        if (dur <= 0)
          dur = op->kind == SIM_OP_RECV
                  ? m->p2p_ns(m->ctx, op->peer, r, sh->bytes, 0)
                  : m->collective_ns(m->ctx, op->peer, sh->bytes,
                                     (SimCollType)sh->coll, 0);
        dur = MAX(dur, 0);
        for (guint k = 0; k < nc; k++) {
          t_ns[(gsize)id * nc + k] += dur;
          e_j[(gsize)id * nc + k] += comm_w * (double)dur * 1e-9;
        }
        continue;
      }
      for (guint k = 0; k < nc; k++) {
        gsize ci = (gsize)op->shape * nc + k;
        if (!have[ci]) {
          SimClocks c = {pm->clocks[k], 0};
          m->kernel_cost(m->ctx, r, op->shape, c, 0, &cost[ci]);
          have[ci] = 1;
        }
        /* Exactly the engine's duration and energy of this kernel. */
        gint64 dur = (gint64)llround((double)op->ref_ns * cost[ci].time_scale);
        t_ns[(gsize)id * nc + k] += dur;
        e_j[(gsize)id * nc + k] += cost[ci].power_w * (double)dur * 1e-9;
      }
    }
  }
  g_autofree PerseusOption *opts = g_new(PerseusOption, (gsize)n * nc);
  g_autofree const PerseusOption **optp = g_new(const PerseusOption *, n);
  g_autofree guint *nopt = g_new(guint, n);
  for (guint id = 0; id < n; id++) {
    for (guint k = 0; k < nc; k++) {
      PerseusOption *o = &opts[(gsize)id * nc + k];
      o->sm_mhz = pm->clocks[k];
      o->time_ns = MAX(t_ns[(gsize)id * nc + k], (gint64)1);
      o->energy_j = e_j[(gsize)id * nc + k];
    }
    optp[id] = &opts[(gsize)id * nc];
    nopt[id] = nc;
  }
  g_autofree gint64 *tail = g_new0(gint64, S);
  if (!model_tails(pm, w, m, tail, &pm->allmax_ns, error))
    return NULL;
  for (guint s = 0; s < S; s++)
    pm->max_tail_ns = MAX(pm->max_tail_ns, tail[s]);
  double p_block = m->blocked_power_w[pm->g->rep_rank[0]];
  pm->dag = perseus_dag_pipeline(S, M, (const guint32 *const *)pm->g->order,
                                 optp, nopt, tail, p_block, error);
  if (pm->dag == NULL)
    return NULL;
  return g_steal_pointer(&pm);
}

SimPlan *perseus_model_plan(const PerseusModel *pm,
                            const guint16 *const *choice)
{
  SimClocks auto_clk = {0, 0};
  SimPlan *plan = sim_plan_new_uniform(pm->n_ranks, auto_clk);
  /* Pair 1 + k is clock k (pair 0 is auto). */
  for (guint k = 0; k < pm->n_clocks; k++) {
    SimClocks c = {pm->clocks[k], 0};
    guint16 idx = sim_plan_add_pair(plan, c);
    g_assert(idx == k + 1);
  }
  for (guint r = 0; r < pm->n_ranks; r++) {
    const guint16 *ch = choice[pm->g->pipeline[r]];
    if (ch == NULL)
      continue;
    guint16 *idx = sim_plan_rank_index(plan, r, pm->n_ops[r]);
    const guint32 *nd = pm->g->node[r];
    for (guint32 i = 0; i < pm->n_ops[r]; i++)
      idx[i] = nd[i] == PERSEUS_NO_NODE ? 0 : (guint16)(1 + ch[nd[i]]);
  }
  return plan;
}

SimPlan *perseus_model_plan_uniform(const PerseusModel *pm,
                                    const guint16 *choice)
{
  guint np = pm->g->n_pipelines;
  g_autofree const guint16 **ch = g_new(const guint16 *, np);
  for (guint p = 0; p < np; p++)
    ch[p] = choice;
  return perseus_model_plan(pm, ch);
}

/* ---- kernel-level clocks inside computations ---------------------------- */

/* Key of (computation, kernel shape). */
static inline guint64 unit_key(guint32 node, guint32 shape)
{
  return ((guint64)node << 32) | shape;
}

SimPlan *perseus_kernel_plan(const PerseusModel *pm, const SimWorkload *w,
                             const SimMachine *m, const guint16 *choice,
                             guint *n_refined)
{
  const PerseusGroups *g = pm->g;
  guint S = g->n_stages, nc = pm->n_clocks;
  guint n_nodes = 2 * S * g->n_microbatches;
  guint n_shapes = w->shapes->len;
  double pb = perseus_dag_p_block(pm->dag);
  if (n_refined != NULL)
    *n_refined = 0;

  /* Units: the distinct (computation, shape) kernels of every stage's
   * representative rank, with their summed time and energy per clock,
   * exactly as perseus_model_new prices them. */
  guint32 n_kernels = 0;
  for (guint s = 0; s < S; s++)
    n_kernels += w->ranks[g->rep_rank[s]].n_ops;
  g_autofree guint64 *keys = g_new(guint64, MAX(n_kernels, 1u));
  g_autoptr(GHashTable) unit_of = g_hash_table_new(g_int64_hash,
                                                   g_int64_equal);
  g_autoptr(GArray) unode = g_array_new(FALSE, FALSE, sizeof(guint32));
  g_autoptr(GArray) ut = g_array_new(FALSE, TRUE, sizeof(gint64));
  g_autoptr(GArray) ue = g_array_new(FALSE, TRUE, sizeof(double));
  g_autofree SimCost *cost = g_new0(SimCost, (gsize)MAX(n_shapes, 1u) * nc);
  g_autofree guint8 *have = g_new0(guint8, (gsize)MAX(n_shapes, 1u) * nc);
  guint32 nk = 0;
  for (guint s = 0; s < S; s++) {
    guint r = g->rep_rank[s];
    const SimRank *rk = &w->ranks[r];
    for (guint32 i = 0; i < rk->n_ops; i++) {
      guint32 id = g->node[r][i];
      const SimOp *op = &rk->ops[i];
      if (id == PERSEUS_NO_NODE || op->kind != SIM_OP_KERNEL)
        continue;
      keys[nk] = unit_key(id, op->shape);
      gpointer v = g_hash_table_lookup(unit_of, &keys[nk]);
      guint u;
      if (v == NULL) {
        u = unode->len;
        g_hash_table_insert(unit_of, &keys[nk], GUINT_TO_POINTER(u + 1));
        nk++;
        g_array_append_val(unode, id);
        g_array_set_size(ut, (guint)((gsize)(u + 1) * nc));
        g_array_set_size(ue, (guint)((gsize)(u + 1) * nc));
      } else {
        u = GPOINTER_TO_UINT(v) - 1;
      }
      for (guint k = 0; k < nc; k++) {
        gsize ci = (gsize)op->shape * nc + k;
        if (!have[ci]) {
          SimClocks c = {pm->clocks[k], 0};
          m->kernel_cost(m->ctx, r, op->shape, c, 0, &cost[ci]);
          have[ci] = 1;
        }
        gint64 dur = (gint64)llround((double)op->ref_ns * cost[ci].time_scale);
        g_array_index(ut, gint64, (gsize)u * nc + k) += dur;
        g_array_index(ue, double, (gsize)u * nc + k) +=
          cost[ci].power_w * (double)dur * 1e-9;
      }
    }
  }
  guint n_units = unode->len;
  const gint64 *t = (const gint64 *)(const void *)ut->data;
  const double *e = (const double *)(const void *)ue->data;
  /* Units of every computation (CSR, in unit order). */
  g_autofree guint *off = g_new0(guint, n_nodes + 1);
  g_autofree guint *lst = g_new(guint, MAX(n_units, 1u));
  for (guint u = 0; u < n_units; u++)
    off[g_array_index(unode, guint32, u) + 1]++;
  for (guint i = 0; i < n_nodes; i++)
    off[i + 1] += off[i];
  {
    g_autofree guint *fill = g_memdup2(off, sizeof(guint) * n_nodes);
    for (guint u = 0; u < n_units; u++)
      lst[fill[g_array_index(unode, guint32, u)]++] = u;
  }

  /* Per computation: the knapsack within the single clock's time. */
  g_autofree guint16 *uclk = g_new(guint16, MAX(n_units, 1u));
  g_autofree DvfsItem *items = g_new(DvfsItem, nc);
  g_autofree guint32 *tags = g_new(guint32, MAX(n_units, 1u));
  for (guint id = 0; id < n_nodes; id++) {
    guint a = off[id], b = off[id + 1];
    if (a == b)
      continue;
    guint ks = choice[id];
    double w_single = 0, c_single = 0;
    gint64 t_single = 0;
    g_autoptr(DvfsKnapsack) ks_ = dvfs_knapsack_new();
    for (guint j = a; j < b; j++) {
      guint u = lst[j];
      gint64 tmin = G_MAXINT64;
      for (guint k = 0; k < nc; k++)
        tmin = MIN(tmin, t[(gsize)u * nc + k]);
      for (guint k = 0; k < nc; k++) {
        gsize x = (gsize)u * nc + k;
        items[k].w = (double)(t[x] - tmin);
        items[k].c = e[x] - pb * (double)t[x] * 1e-9;
        items[k].tag = k;
      }
      w_single += items[ks].w;
      c_single += items[ks].c;
      t_single += t[(gsize)u * nc + ks];
      uclk[u] = (guint16)ks;
      dvfs_knapsack_add(ks_, items, nc);
    }
    double cst = 0;
    dvfs_knapsack_solve_greedy(ks_, w_single, tags, &cst, NULL);
    /* Exact totals of the knapsack's choice; keep it only when it is
     * strictly cheaper and not longer. */
    gint64 t_new = 0;
    double c_new = 0;
    for (guint j = a; j < b; j++) {
      gsize x = (gsize)lst[j] * nc + tags[j - a];
      t_new += t[x];
      c_new += e[x] - pb * (double)t[x] * 1e-9;
    }
    if (t_new <= t_single && c_new < c_single - 1e-9 * fabs(c_single)) {
      for (guint j = a; j < b; j++)
        uclk[lst[j]] = (guint16)tags[j - a];
      if (n_refined != NULL)
        (*n_refined)++;
    }
  }

  /* The plan: pair 1 + k is clock k; every rank of a stage runs its
   * representative's choice for the same (computation, shape). */
  SimClocks auto_clk = {0, 0};
  SimPlan *plan = sim_plan_new_uniform(pm->n_ranks, auto_clk);
  for (guint k = 0; k < nc; k++) {
    SimClocks c = {pm->clocks[k], 0};
    guint16 idx = sim_plan_add_pair(plan, c);
    g_assert(idx == k + 1);
  }
  for (guint r = 0; r < pm->n_ranks; r++) {
    guint16 *idx = sim_plan_rank_index(plan, r, pm->n_ops[r]);
    const guint32 *nd = g->node[r];
    for (guint32 i = 0; i < pm->n_ops[r]; i++) {
      if (nd[i] == PERSEUS_NO_NODE)
        continue;
      idx[i] = (guint16)(1 + choice[nd[i]]);
      const SimOp *op = &w->ranks[r].ops[i];
      if (op->kind != SIM_OP_KERNEL)
        continue;
      guint64 key = unit_key(nd[i], op->shape);
      gpointer v = g_hash_table_lookup(unit_of, &key);
      if (v != NULL)
        idx[i] = (guint16)(1 + uclk[GPOINTER_TO_UINT(v) - 1]);
    }
  }
  return plan;
}

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
  const PerseusGroups *g = r->pm->g;
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

static const char *const run_kind_names[PERSEUS_RUN_KIND_COUNT] = {
  "max", "perseus", "envpipe", "zeus", "plan"};

const char *perseus_run_kind_name(PerseusRunKind k)
{
  return (guint)k < PERSEUS_RUN_KIND_COUNT ? run_kind_names[k] : "?";
}

void perseus_policy_init(PerseusPolicy *p, PerseusRunKind kind)
{
  memset(p, 0, sizeof *p);
  p->kind = kind;
  p->eta = 0.5;
  p->step_w = 5.0;
  perseus_options_init(&p->frontier);
}

void perseus_run_free(PerseusRun *r)
{
  if (r == NULL)
    return;
  sim_result_free(r->result);
  perseus_frontier_free(r->frontier);
  g_free(r);
}

/* Zeus' view of the stragglers: per iteration, one group per distinct
 * per-stage factor vector (straggling pipelines alone, the others
 * together). */
static GArray *zeus_groups(const PerseusModel *pm, const StragglerSet *set,
                           guint iterations, GPtrArray *keep)
{
  const PerseusGroups *g = pm->g;
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
      k = MAX(k, choice[perseus_node_id(M, s, m / 2, m % 2)]);
    for (guint m = 0; m < 2 * M; m++)
      out[perseus_node_id(M, s, m / 2, m % 2)] = k;
  }
  return out;
}

/* Earliest start of every node of d under `choice` (st, n entries), and
 * the iteration time. */
static gint64 dag_starts(const PerseusDag *d, const guint16 *choice,
                         gint64 *st)
{
  const guint *topo = NULL, *pred_off = NULL, *pred = NULL, *succ_off = NULL,
              *succ = NULL;
  guint n_edges = 0, n = perseus_dag_n_nodes(d);
  perseus_dag_structure(d, &topo, &pred_off, &pred, &succ_off, &succ,
                        &n_edges);
  g_autofree gint64 *fin = g_new(gint64, MAX(n, 1u));
  gint64 T = 0;
  for (guint q = 0; q < n; q++) {
    guint i = topo[q];
    gint64 es = 0;
    for (guint k = pred_off[i]; k < pred_off[i + 1]; k++)
      es = MAX(es, fin[pred[k]]);
    st[i] = es;
    fin[i] = es + perseus_dag_option(d, i, choice[i])->time_ns;
    T = MAX(T, fin[i]);
  }
  return T;
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

/* The combined policy's own figures follow its fallback: what ran for the
 * frontier point (kernel-level clocks were not used). */
static void fallback_single(PerseusRun *r, const PerseusPolicy *pol)
{
  if (!pol->kernel)
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
static gboolean latency_budget(PerseusRun *r, const PerseusPolicy *pol,
                               const PerseusModel *pm, const SimWorkload *w,
                               const SimMachine *sim, const SimMachine *mach,
                               ClusterMachine *cm,
                               const StragglerSet *stragglers,
                               const guint16 *run_choice, guint iterations,
                               GError **error)
{
  if (sim->switch_latency_ns <= 0 || stragglers != NULL ||
      (pol->kind != PERSEUS_RUN_PERSEUS && pol->kind != PERSEUS_RUN_ENVPIPE))
    return TRUE;
  double s = pol->kind == PERSEUS_RUN_PERSEUS ? pol->slowdown : 0.0;
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
      r->latency_fallback = f;
      fallback_single(r, pol);
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
  r->latency_fallback = 3;
  fallback_single(r, pol);
  r->plan_time_ns = r->allmax_time_ns;
  r->plan_energy_j = r->allmax_energy_j;
  return TRUE;
}

/* The choice (an option per node of pm's DAG) that runs the plan's clock
 * for every computation: the candidate clock nearest to it, the higher on
 * a tie; *snapped counts the computations whose clock was not a
 * candidate.  NULL with an error naming both shapes when the plan's
 * stages or microbatches differ from the workload's.  Caller frees. */
static guint16 *plan_choice(const PerseusModel *pm, const PerseusPolicy *pol,
                            guint *snapped, GError **error)
{
  guint S = pm->g->n_stages, M = pm->g->n_microbatches;
  if (pol->plan_mhz == NULL || pol->plan_stages != S ||
      pol->plan_microbatches != M) {
    invalid(error, "plan: the plan has %u stages x %u microbatches, the "
            "workload %u stages x %u microbatches", pol->plan_stages,
            pol->plan_microbatches, S, M);
    return NULL;
  }
  guint16 *ch = perseus_dag_max_choice(pm->dag);
  *snapped = 0;
  for (guint i = 0; i < 2 * S * M; i++) {
    guint best = 0;
    gint64 bd = G_MAXINT64;
    for (guint k = 0; k < pm->n_clocks; k++) {
      gint64 d = ABS((gint64)pm->clocks[k] - (gint64)pol->plan_mhz[i]);
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

PerseusRun *perseus_run(const PerseusPolicy *pol, const Cluster *run,
                        const SimWorkload *w, const GpuCatalogue *catalogue,
                        const StragglerSet *stragglers, guint iterations,
                        GError **error)
{
  g_return_val_if_fail(pol != NULL && run != NULL && w != NULL, NULL);
  if ((guint)pol->kind >= PERSEUS_RUN_KIND_COUNT) {
    invalid(error, "unknown pipeline policy %d", (int)pol->kind);
    return NULL;
  }
  if (!(isfinite(pol->slowdown) && pol->slowdown >= 0.0 &&
        pol->slowdown <= 10.0)) {
    invalid(error, "perseus: slowdown = %g must be in [0, 10]", pol->slowdown);
    return NULL;
  }
  if (pol->kernel && (pol->kind != PERSEUS_RUN_PERSEUS ||
                      pol->straggler_aware)) {
    invalid(error, "perseus: kernel = true needs the perseus policy "
            "without straggler_aware");
    return NULL;
  }
  if (iterations == 0) {
    invalid(error, "iterations must be at least 1");
    return NULL;
  }
  if (stragglers != NULL && straggler_set_n_gpus(stragglers) != w->n_ranks) {
    invalid(error, "the stragglers are for %u GPUs but the workload has %u "
            "ranks", straggler_set_n_gpus(stragglers), w->n_ranks);
    return NULL;
  }
  g_autoptr(ClusterMachine) cm = cluster_machine_new(run, w, catalogue, error);
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
  g_autofree guint16 *mx = perseus_dag_max_choice(d);
  perseus_dag_eval(d, mx, NULL, &r->allmax_time_ns, &r->allmax_energy_j);

  g_autoptr(SimPlan) plan = NULL;
  g_autoptr(PerseusReactor) reactor = NULL;
  g_autofree guint16 *choice = NULL;
  const guint16 *run_choice = NULL;
  switch (pol->kind) {
  case PERSEUS_RUN_MAX:
    run_choice = mx;
    break;
  case PERSEUS_RUN_PERSEUS: {
    r->frontier = perseus_frontier_with(d, &pol->frontier, error);
    if (r->frontier == NULL)
      return NULL;
    gint64 budget = (gint64)floor((double)r->allmax_time_ns *
                                  (1.0 + pol->slowdown));
    r->point = perseus_frontier_fit(r->frontier, budget);
    run_choice = r->frontier->points[r->point].choice;
    if (pol->straggler_aware && stragglers != NULL) {
      reactor = perseus_reactor_new(pm, r->frontier, r->point, stragglers,
                                    pol->lag);
      plan = perseus_reactor_initial_plan(reactor);
    }
    break;
  }
  case PERSEUS_RUN_ENVPIPE:
    run_choice = choice = envpipe_plan(d);
    break;
  case PERSEUS_RUN_PLAN:
    run_choice = choice = plan_choice(pm, pol, &r->plan_snapped, error);
    if (choice == NULL)
      return NULL;
    break;
  case PERSEUS_RUN_ZEUS: {
    /* The GPU's limit range, up to the highest computation power so that
     * "no cap" is among the candidates (the measured A100 is a 500 W
     * card). */
    double top = run->gpu->power_max_w.v;
    for (guint i = 0; i < perseus_dag_n_nodes(d); i++)
      for (guint k = 0; k < perseus_dag_n_options(d, i); k++) {
        const PerseusOption *o = perseus_dag_option(d, i, k);
        top = MAX(top, o->energy_j / ((double)o->time_ns * 1e-9));
      }
    ZeusConfig zc = {pol->eta, run->gpu->power_min_w.v, ceil(top),
                     pol->step_w};
    g_autoptr(GPtrArray) keep = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GArray) groups = NULL;
    if (stragglers != NULL)
      groups = zeus_groups(pm, stragglers, iterations, keep);
    ZeusChoice zch;
    if (!zeus_choose(d, &zc, groups ? (ZeusPipelines *)(void *)groups->data
                                    : NULL,
                     groups ? groups->len : 0, &zch, error))
      return NULL;
    r->limit_w = zch.limit_w;
    r->n_tried = zch.n_tried;
    run_choice = choice = zeus_plan_at(d, zch.limit_w);
    break;
  }
  default:
    g_assert_not_reached();
  }
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
  if (pol->kind == PERSEUS_RUN_PERSEUS && pol->kernel) {
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
      r->kernel_used = TRUE;
    }
  }
  if (!latency_budget(r, pol, pm, w, sim, mach, cm, stragglers, run_choice,
                      iterations, error))
    return NULL;
  return g_steal_pointer(&r);
}
