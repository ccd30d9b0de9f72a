/* models/dvfs/perseus_model.c -- Perseus on workloads and machines: the
 * computation DAG of a pipelined workload priced on a machine
 * (perseus_model_new), engine plans from per-computation choices, and
 * kernel-level clocks inside computations (perseus_kernel_plan).
 *
 * Plans on workloads (PerseusModel) price every computation through the
 * machine's own kernel_cost at each candidate clock, so a computation-level
 * workload's option times are the engine's durations to the nanosecond and
 * a simulated plan reproduces the planner's time and energy when idle power
 * equals blocking power, the Perseus model.  With idle < blocking power the
 * engine charges time a GPU spends neither computing nor waiting in a
 * transfer (after its last computation) at idle power instead.
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
#include "models/dvfs/perseus-private.h"
#include "models/dvfs/knapsack.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void perseus_model_free(PerseusModel *pm)
{
  if (pm == NULL)
    return;
  pipeline_groups_free(pm->g);
  perseus_dag_free(pm->dag);
  g_free(pm->clocks);
  g_free(pm->n_ops);
  g_free(pm->fold_rep);
  g_free(pm->auto_tail);
  g_free(pm);
}

const PerseusDag *perseus_model_dag(const PerseusModel *pm)
{
  return pm->dag;
}

const PipelineGroups *perseus_model_groups(const PerseusModel *pm)
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
        if (pm->g->node[r][i] == PIPELINE_NO_NODE ||
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
        return perseus_invalid(error, "the measured profiles of the computations "
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
      return perseus_invalid(error, "no GPU to take candidate clocks from");
    guint ns = gpu_sm_n_steps(gpu);
    for (guint k = 0; k < ns; k++) {
      guint16 f = (guint16)gpu_sm_clock_at(gpu, k);
      g_array_append_val(clk, f);
    }
  }
  if (clk->len == 0 || clk->len >= G_MAXUINT16)
    return perseus_invalid(error, "%u candidate clocks", clk->len);
  pm->n_clocks = clk->len;
  pm->clocks = g_memdup2(clk->data, sizeof(guint16) * clk->len);
  return TRUE;
}

typedef struct {
  const PipelineGroups *g;
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
  if (o->g->node[rec->gpu][rec->op] != PIPELINE_NO_NODE)
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
  const PipelineGroups *g = pm->g;
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
  pm->g = pipeline_groups_new(w, error);
  if (pm->g == NULL)
    return NULL;
  if (m->n_gpus != w->n_ranks) {
    perseus_invalid(error, "the machine has %u GPUs but the workload %u ranks",
            m->n_gpus, w->n_ranks);
    return NULL;
  }
  if (!model_clocks(pm, w, gpu, table, error))
    return NULL;
  pm->n_ranks = w->n_ranks;
  pm->n_ops = g_new(guint32, w->n_ranks);
  for (guint r = 0; r < w->n_ranks; r++)
    pm->n_ops[r] = w->ranks[r].n_ops;
  if (w->fold_rep != NULL)
    pm->fold_rep = g_memdup2(w->fold_rep, sizeof(guint32) * w->n_ranks);

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
      if (id == PIPELINE_NO_NODE) {
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
                  ? m->p2p_ns(m->ctx, sim_op_peer(rk, op), r, sh->bytes, 0)
                  : m->collective_ns(m->ctx, sim_op_peer(rk, op), sh->bytes,
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
    if (ch == NULL || (pm->fold_rep != NULL && pm->fold_rep[r] != r))
      continue;
    guint16 *idx = sim_plan_rank_index(plan, r, pm->n_ops[r]);
    const guint32 *nd = pm->g->node[r];
    for (guint32 i = 0; i < pm->n_ops[r]; i++)
      idx[i] = nd[i] == PIPELINE_NO_NODE ? 0 : (guint16)(1 + ch[nd[i]]);
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

/* The knapsack of one computation: its n units lst[0..n) (times t, energies
 * e, nc clocks each) within the time they take at its single clock ks.
 * Sets uclk of its units (ks, or the knapsack's clocks when those are
 * strictly cheaper and not longer: then TRUE).  items (nc) and tags (n)
 * are scratch. */
static gboolean refine_computation(const gint64 *t, const double *e, guint nc,
                                   double pb, const guint *lst, guint n,
                                   guint ks, DvfsItem *items, guint32 *tags,
                                   guint16 *uclk)
{
  double w_single = 0, c_single = 0;
  gint64 t_single = 0;
  g_autoptr(DvfsKnapsack) ks_ = dvfs_knapsack_new();
  for (guint j = 0; j < n; j++) {
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
  for (guint j = 0; j < n; j++) {
    gsize x = (gsize)lst[j] * nc + tags[j];
    t_new += t[x];
    c_new += e[x] - pb * (double)t[x] * 1e-9;
  }
  if (!(t_new <= t_single && c_new < c_single - 1e-9 * fabs(c_single)))
    return FALSE;
  for (guint j = 0; j < n; j++)
    uclk[lst[j]] = (guint16)tags[j];
  return TRUE;
}

SimPlan *perseus_kernel_plan(const PerseusModel *pm, const SimWorkload *w,
                             const SimMachine *m, const guint16 *choice,
                             guint *n_refined)
{
  const PipelineGroups *g = pm->g;
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
      if (id == PIPELINE_NO_NODE || op->kind != SIM_OP_KERNEL)
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
    if (refine_computation(t, e, nc, pb, &lst[a], b - a, choice[id], items,
                           tags, uclk) &&
        n_refined != NULL)
      (*n_refined)++;
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
    if (pm->fold_rep != NULL && pm->fold_rep[r] != r)
      continue; /* folded away: its representative's plan */
    guint16 *idx = sim_plan_rank_index(plan, r, pm->n_ops[r]);
    const guint32 *nd = g->node[r];
    for (guint32 i = 0; i < pm->n_ops[r]; i++) {
      if (nd[i] == PIPELINE_NO_NODE)
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
