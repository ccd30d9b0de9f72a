/* models/dvfs/knapsack.c -- the multiple-choice knapsack problem (MCKP):
 *
 *   minimise  sum_u c(u, x_u)   subject to   sum_u w(u, x_u) <= B
 *
 * over one item x_u per unit.  The DVFS planners use it with units = kernels
 * (or ops, segments, phases), items = clock pairs, w = added critical time,
 * c = energy.
 *
 * Algorithm
 * ---------
 * 1. Each unit keeps only its undominated items (increasing weight,
 *    strictly decreasing cost); the lightest item of every unit is the
 *    starting point.
 * 2. Greedy on the LP relaxation (Sinha and Zoltners 1979; Dyer 1984): the
 *    lower convex hull of every unit's items gives segments of cost slope
 *    dc/dw; take segments in order of steepest descent while they fit; a
 *    unit whose next segment does not fit is closed.  This is the LP
 *    optimum minus at most one fractional segment.
 * 3. Dynamic programming over the budget in NB bins (weights rounded up,
 *    so every DP solution is feasible), NB ~ 2e7 / (number of items),
 *    between 64 and 20,000.  Exact up to the rounding of weights, which
 *    only excludes solutions within (units x bin width) of the budget.
 * 4. On both solutions, a fill pass moves single units to heavier, cheaper
 *    items while the residual budget allows.
 * The better of (2) and (3) is returned.
 *
 * Accuracy: tests/test-dvfs.c compares against exhaustive search
 * (meet-in-the-middle) on random instances of 12 units x 10 items; the gap
 * must stay below 0.5% of the optimum (it is usually 0).
 *
 * Cost: O(I log I) for the greedy (I items), O(I x NB) for the DP (at most
 * ~2e7 steps, skipped for very large instances, where one unit's rounding
 * is negligible anyway).
 */
#include "models/dvfs/knapsack.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  double slope, dw, dc;
  guint32 unit, from, to;   /* hull positions */
} Segment;

struct DvfsKnapsack {
  GArray *items;     /* DvfsItem, per unit contiguous */
  GArray *off;       /* guint32, n_units + 1 */
  /* Greedy cache (independent of the budget; dropped by _add): */
  guint32 *hull, *hoff;  /* hull item indices per unit (CSR) */
  GArray *segs;          /* Segment, sorted by slope */
};

static void drop_cache(DvfsKnapsack *k)
{
  g_clear_pointer(&k->hull, g_free);
  g_clear_pointer(&k->hoff, g_free);
  g_clear_pointer(&k->segs, g_array_unref);
}

DvfsKnapsack *dvfs_knapsack_new(void)
{
  DvfsKnapsack *k = g_new0(DvfsKnapsack, 1);
  k->items = g_array_new(FALSE, FALSE, sizeof(DvfsItem));
  k->off = g_array_new(FALSE, FALSE, sizeof(guint32));
  guint32 z = 0;
  g_array_append_val(k->off, z);
  return k;
}

void dvfs_knapsack_free(DvfsKnapsack *k)
{
  if (k == NULL)
    return;
  drop_cache(k);
  g_array_unref(k->items);
  g_array_unref(k->off);
  g_free(k);
}

static int cmp_item(const void *a, const void *b)
{
  const DvfsItem *x = a, *y = b;
  if (x->w != y->w)
    return x->w < y->w ? -1 : 1;
  if (x->c != y->c)
    return x->c < y->c ? -1 : 1;
  return (x->tag > y->tag) - (x->tag < y->tag);
}

guint dvfs_knapsack_add(DvfsKnapsack *k, const DvfsItem *items, guint n)
{
  g_return_val_if_fail(n >= 1, 0);
  drop_cache(k);
  g_autofree DvfsItem *tmp = g_memdup2(items, sizeof(DvfsItem) * n);
  if (n > 1)
    qsort(tmp, n, sizeof(DvfsItem), cmp_item);
  double best = INFINITY;
  for (guint i = 0; i < n; i++) {
    if (tmp[i].c < best) {
      g_array_append_val(k->items, tmp[i]);
      best = tmp[i].c;
    }
  }
  guint32 end = k->items->len;
  g_array_append_val(k->off, end);
  return k->off->len - 2;
}

guint dvfs_knapsack_n_units(const DvfsKnapsack *k)
{
  return k->off->len - 1;
}

const DvfsItem *dvfs_knapsack_items(const DvfsKnapsack *k, guint unit,
                                    guint *n)
{
  const guint32 *off = (const guint32 *)(void *)k->off->data;
  *n = off[unit + 1] - off[unit];
  return &g_array_index(k->items, DvfsItem, off[unit]);
}

static int cmp_segment(const void *a, const void *b)
{
  const Segment *x = a, *y = b;
  if (x->slope != y->slope)
    return x->slope < y->slope ? -1 : 1;
  if (x->unit != y->unit)
    return x->unit < y->unit ? -1 : 1;
  return (x->from > y->from) - (x->from < y->from);
}

/* Moves units to heavier, cheaper items while the residual allows.  `sel`
 * holds item indices (global); returns the new residual. */
static double fill(const DvfsKnapsack *k, guint32 *sel, double residual)
{
  const guint32 *off = (const guint32 *)(void *)k->off->data;
  const DvfsItem *it = (const DvfsItem *)(void *)k->items->data;
  guint n = dvfs_knapsack_n_units(k);
  for (int pass = 0; pass < 3; pass++) {
    gboolean changed = FALSE;
    for (guint u = 0; u < n; u++) {
      guint32 cur = sel[u], best = cur;
      double gain = 0.0;
      for (guint32 j = cur + 1; j < off[u + 1]; j++) {
        double dw = it[j].w - it[cur].w;
        if (dw > residual)
          break;
        double g = it[cur].c - it[j].c;
        if (g > gain) {
          gain = g;
          best = j;
        }
      }
      if (best != cur) {
        residual -= it[best].w - it[cur].w;
        sel[u] = best;
        changed = TRUE;
      }
    }
    if (!changed)
      break;
  }
  return residual;
}

static double total_cost(const DvfsKnapsack *k, const guint32 *sel)
{
  const DvfsItem *it = (const DvfsItem *)(void *)k->items->data;
  double c = 0.0;
  for (guint u = 0; u < dvfs_knapsack_n_units(k); u++)
    c += it[sel[u]].c;
  return c;
}

/* Builds the hulls and the sorted segment list once. */
static void build_hulls(DvfsKnapsack *k)
{
  if (k->segs != NULL)
    return;
  const guint32 *off = (const guint32 *)(void *)k->off->data;
  const DvfsItem *it = (const DvfsItem *)(void *)k->items->data;
  guint n = dvfs_knapsack_n_units(k);
  guint32 ni = k->items->len;
  guint32 *hull = g_new(guint32, MAX(ni, 1u));
  guint32 *hoff = g_new(guint32, n + 1);
  GArray *segs = g_array_new(FALSE, FALSE, sizeof(Segment));
  guint32 h = 0;
  for (guint u = 0; u < n; u++) {
    hoff[u] = h;
    for (guint32 j = off[u]; j < off[u + 1]; j++) {
      /* Pop while the last two and j make a non-convex turn. */
      while (h - hoff[u] >= 2) {
        const DvfsItem *a = &it[hull[h - 2]], *b = &it[hull[h - 1]];
        double s1 = (b->c - a->c) / (b->w - a->w);
        double s2 = (it[j].c - b->c) / (it[j].w - b->w);
        if (s2 <= s1)
          h--;
        else
          break;
      }
      hull[h++] = j;
    }
    for (guint32 p = hoff[u]; p + 1 < h; p++) {
      const DvfsItem *a = &it[hull[p]], *b = &it[hull[p + 1]];
      Segment s = {(b->c - a->c) / (b->w - a->w), b->w - a->w, b->c - a->c,
                   u, p - hoff[u], p + 1 - hoff[u]};
      g_array_append_val(segs, s);
    }
  }
  hoff[n] = h;
  if (segs->len > 1)
    qsort(segs->data, segs->len, sizeof(Segment), cmp_segment);
  k->hull = hull;
  k->hoff = hoff;
  k->segs = segs;
}

/* Greedy on the convex hulls; writes item indices to sel. */
static void solve_greedy(DvfsKnapsack *k, double residual, guint32 *sel)
{
  build_hulls(k);
  guint n = dvfs_knapsack_n_units(k);
  g_autofree guint32 *pos = g_new0(guint32, MAX(n, 1u));
  g_autofree gboolean *closed = g_new0(gboolean, MAX(n, 1u));
  for (guint i = 0; i < k->segs->len; i++) {
    const Segment *s = &g_array_index(k->segs, Segment, i);
    if (s->slope >= 0)
      break;
    if (closed[s->unit] || pos[s->unit] != s->from)
      continue;
    if (s->dw <= residual) {
      residual -= s->dw;
      pos[s->unit] = s->to;
    } else {
      closed[s->unit] = TRUE;
    }
  }
  for (guint u = 0; u < n; u++)
    sel[u] = k->hull[k->hoff[u] + pos[u]];
  fill(k, sel, residual);
}

/* DP over the residual budget in bins; FALSE when too large to run. */
static gboolean solve_dp(const DvfsKnapsack *k, double residual,
                         guint32 *sel)
{
  const guint32 *off = (const guint32 *)(void *)k->off->data;
  const DvfsItem *it = (const DvfsItem *)(void *)k->items->data;
  guint n = dvfs_knapsack_n_units(k);
  guint32 ni = k->items->len;
  if (!(residual > 0) || n == 0)
    return FALSE;
  double nb_f = CLAMP(2e7 / MAX(ni, 1u), 64.0, 20000.0);
  guint nb = (guint)nb_f;
  if ((double)ni * nb > 4e7 || (double)n * (nb + 1) > 2e7)
    return FALSE;
  double bw = residual / nb;
  g_autofree double *dp = g_new0(double, nb + 1);
  g_autofree double *nx = g_new(double, nb + 1);
  g_autofree guint16 *choice = g_new(guint16, (gsize)n * (nb + 1));
  for (guint u = 0; u < n; u++) {
    const DvfsItem *first = &it[off[u]];
    guint16 *ch = &choice[(gsize)u * (nb + 1)];
    for (guint b = 0; b <= nb; b++) {
      nx[b] = dp[b];
      ch[b] = 0;
    }
    guint32 cnt = MIN(off[u + 1] - off[u], (guint32)G_MAXUINT16);
    for (guint32 j = 1; j < cnt; j++) {
      double rw = (it[off[u] + j].w - first->w) / bw;
      if (rw > nb + 1e-9)
        break;
      guint wb = (guint)ceil(rw - 1e-9);
      double dc = it[off[u] + j].c - first->c;
      for (guint b = wb; b <= nb; b++) {
        double v = dp[b - wb] + dc;
        if (v < nx[b]) {
          nx[b] = v;
          ch[b] = (guint16)j;
        }
      }
    }
    memcpy(dp, nx, sizeof(double) * (nb + 1));
  }
  /* Backtrack from the full budget (dp is "at most b" by construction). */
  guint b = nb;
  for (guint u = n; u-- > 0;) {
    guint16 j = choice[(gsize)u * (nb + 1) + b];
    sel[u] = off[u] + j;
    if (j > 0) {
      double rw = (it[off[u] + j].w - it[off[u]].w) / bw;
      b -= (guint)ceil(rw - 1e-9);
    }
  }
  double used = 0.0;
  for (guint u = 0; u < n; u++)
    used += it[sel[u]].w - it[off[u]].w;
  fill(k, sel, residual - used);
  return TRUE;
}

static gboolean solve(DvfsKnapsack *k, double budget, gboolean exact,
                      guint32 *tags, double *cost, double *weight)
{
  const guint32 *off = (const guint32 *)(void *)k->off->data;
  const DvfsItem *it = (const DvfsItem *)(void *)k->items->data;
  guint n = dvfs_knapsack_n_units(k);
  g_autofree guint32 *sel = g_new(guint32, MAX(n, 1u));
  double w0 = 0.0;
  for (guint u = 0; u < n; u++) {
    sel[u] = off[u];
    w0 += it[off[u]].w;
  }
  gboolean feasible = w0 <= budget + 1e-9 * MAX(fabs(budget), 1.0);
  if (feasible) {
    double residual = MAX(budget - w0, 0.0);
    solve_greedy(k, residual, sel);
    g_autofree guint32 *alt = g_new(guint32, MAX(n, 1u));
    if (exact && solve_dp(k, residual, alt) &&
        total_cost(k, alt) < total_cost(k, sel))
      memcpy(sel, alt, sizeof(guint32) * n);
  }
  double c = 0.0, w = 0.0;
  for (guint u = 0; u < n; u++) {
    tags[u] = it[sel[u]].tag;
    c += it[sel[u]].c;
    w += it[sel[u]].w;
  }
  if (cost != NULL)
    *cost = c;
  if (weight != NULL)
    *weight = w;
  return feasible;
}

gboolean dvfs_knapsack_solve(DvfsKnapsack *k, double budget, guint32 *tags,
                             double *cost, double *weight)
{
  return solve(k, budget, TRUE, tags, cost, weight);
}

gboolean dvfs_knapsack_solve_greedy(DvfsKnapsack *k, double budget,
                                    guint32 *tags, double *cost,
                                    double *weight)
{
  return solve(k, budget, FALSE, tags, cost, weight);
}
