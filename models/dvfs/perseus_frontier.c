/* models/dvfs/perseus_frontier.c -- the iteration time-energy Pareto
 * frontier of a finished computation DAG (perseus_frontier_with): the
 * exact dynamic program for small DAGs and the min-cut trajectory
 * (max-flow in models/dvfs/maxflow.c) for the rest.  The DAG and its
 * energy model: models/dvfs/perseus.c.
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
 */
#include "models/dvfs/perseus-private.h"
#include "models/dvfs/maxflow.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


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
  MaxFlow flow;
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
  MaxFlow *f = &p->flow;
  maxflow_reset(f, nv);
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
    maxflow_arc(f, (gint32)(2 * i), (gint32)(2 * i + 1), cap);
    if (d->pred_off[i] == d->pred_off[i + 1])
      maxflow_arc(f, src, (gint32)(2 * i), CAP_INF);
    if (d->succ_off[i] == d->succ_off[i + 1])
      maxflow_arc(f, (gint32)(2 * i + 1), snk, CAP_INF);
    gint64 fin = p->es[i] + cur_t(p, i);
    for (guint k = d->succ_off[i]; k < d->succ_off[i + 1]; k++) {
      guint v = d->succ[k];
      if (p->crit[v] && p->lf[v] - cur_t(p, v) - fin < thr)
        maxflow_arc(f, (gint32)(2 * i + 1), (gint32)(2 * v), CAP_INF);
    }
  }
  gint64 flow = maxflow_run(f, src, snk, CAP_INF);
  if (flow >= CAP_INF)
    return FALSE;
  /* Source side of the minimum cut: reachable in the residual graph. */
  maxflow_cut(f, src, snk);
  gboolean moved = FALSE;
  for (guint i = 0; i < n; i++)
    if (p->crit[i] && maxflow_reached(f, (gint32)(2 * i)) &&
        !maxflow_reached(f, (gint32)(2 * i + 1))) {
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

/* Every state of the DP's last level is a frontier plan: backtracks its
 * choices through the levels and appends it to out. */
static void dp_points(const PerseusDag *d, const GPtrArray *levels,
                      const guint *order, GArray *out)
{
  guint n = d->n;
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

/* The DP's node order (all-fastest earliest start, ties by topological
 * position) into order, and per node the position of its last successor
 * in it (-1 for sinks) into lastpos. */
static void dp_order(const PerseusDag *d, guint *order, gint *lastpos)
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
  memcpy(order, d->topo, sizeof(guint) * n);
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
  for (guint i = 0; i < n; i++) {
    gint lp = -1;
    for (guint k = d->succ_off[i]; k < d->succ_off[i + 1]; k++)
      lp = MAX(lp, (gint)pos[d->succ[k]]);
    lastpos[i] = lp;
  }
}

/* The exact (time, energy) frontier of finished DAG d by the DP above:
 * appends each frontier plan to out as a PerseusPoint (its `choice`
 * handed over with it) and returns TRUE.  FALSE, with
 * out untouched, when a level passes DP_MAX_STATES states or the dominance
 * checks pass DP_MAX_WORK (perseus_frontier_with then relies on the
 * trajectory). */
static gboolean dp_frontier(const PerseusDag *d, GArray *out)
{
  guint n = d->n;
  g_autofree guint *order = g_new(guint, n);
  g_autofree gint *lastpos = g_new(gint, n);
  dp_order(d, order, lastpos);

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
      /* No frontier nodes yet (pa = 0): nothing to read, and the empty
       * array's data may be NULL. */
      const gint64 *pf =
          pa == 0 ? NULL
                  : (const gint64 *)(void *)prev_fin->data + (gsize)si * pa;
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
  if (ok)
    dp_points(d, levels, order, out);
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
  maxflow_init(&p.flow);
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
  maxflow_clear(&p.flow);
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
    perseus_invalid(error, "the computation graph is not finished");
    return NULL;
  }
  if (!(o->resolution >= 0.0 && o->resolution <= 0.1)) {
    perseus_invalid(error, "frontier resolution %g must be in [0, 0.1]",
            o->resolution);
    return NULL;
  }
  if (!o->trajectory && !o->exact) {
    perseus_invalid(error, "frontier: neither the trajectory nor the exact method "
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
