/* sim/plan.c -- clock plans (SimPlan, sim/plan.h): construction, the
 * checks of a plan against a workload (sim_plan_check), the expansion of
 * a folded workload's plan to every rank (sim_plan_unfold), and the
 * look-ahead that turns a latency-free plan into one whose requests are
 * made early enough to land in time (sim_plan_lookahead, see
 * sim/engine.h).  A plan is plain data the engine reads; the look-ahead
 * runs the engine once to learn the plan's latency-free timeline.
 */
#include "sim/engine-private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- plans --------------------------------------------------------------- */

SimPlan *sim_plan_new_uniform(guint n_ranks, SimClocks clocks)
{
  SimPlan *p = g_new0(SimPlan, 1);
  p->n_ranks = n_ranks;
  p->n_pairs = 1;
  p->pairs = g_new(SimClocks, 1);
  p->pairs[0] = clocks;
  return p;
}

void sim_plan_free(SimPlan *p)
{
  if (p == NULL)
    return;
  if (p->index != NULL)
    for (guint r = 0; r < p->n_ranks; r++)
      g_free(p->index[r]);
  g_free(p->index);
  if (p->ahead != NULL)
    for (guint r = 0; r < p->n_ranks; r++)
      g_free(p->ahead[r]);
  g_free(p->ahead);
  g_free(p->n_ahead);
  if (p->init != NULL)
    for (guint r = 0; r < p->n_ranks; r++)
      g_free(p->init[r]);
  g_free(p->init);
  g_free(p->pairs);
  g_free(p);
}

guint16 sim_plan_add_pair(SimPlan *p, SimClocks c)
{
  for (guint i = 0; i < p->n_pairs; i++)
    if (p->pairs[i].sm_mhz == c.sm_mhz && p->pairs[i].mem_mhz == c.mem_mhz)
      return (guint16)i;
  g_return_val_if_fail(p->n_pairs < G_MAXUINT16, 0);
  p->pairs = g_renew(SimClocks, p->pairs, p->n_pairs + 1);
  p->pairs[p->n_pairs] = c;
  return (guint16)p->n_pairs++;
}

guint16 *sim_plan_rank_index(SimPlan *p, guint r, guint32 n_ops)
{
  g_return_val_if_fail(r < p->n_ranks, NULL);
  if (p->index == NULL)
    p->index = g_new0(guint16 *, p->n_ranks);
  g_free(p->index[r]);
  p->index[r] = g_new0(guint16, MAX(n_ops, 1));
  return p->index[r];
}

SimAhead *sim_plan_rank_ahead(SimPlan *p, guint r, guint32 n)
{
  g_return_val_if_fail(r < p->n_ranks, NULL);
  if (p->ahead == NULL) {
    p->ahead = g_new0(SimAhead *, MAX(p->n_ranks, 1));
    p->n_ahead = g_new0(guint32, MAX(p->n_ranks, 1));
  }
  g_clear_pointer(&p->ahead[r], g_free);
  p->n_ahead[r] = n;
  if (n > 0)
    p->ahead[r] = g_new0(SimAhead, n);
  return p->ahead[r];
}

SimInit *sim_plan_rank_init(SimPlan *p, guint r)
{
  g_return_val_if_fail(r < p->n_ranks, NULL);
  if (p->init == NULL)
    p->init = g_new0(SimInit *, MAX(p->n_ranks, 1));
  g_free(p->init[r]);
  p->init[r] = g_new0(SimInit, SIM_MAX_STREAMS);
  return p->init[r];
}

/* ---- checks ------------------------------------------------------------- */

/* Plan p's early requests fit the workload: on kernel ops of each rank,
 * in time order (by op, those before its start first, each kind by
 * decreasing lead), valid pairs, leads >= 0. */
static gboolean check_ahead(const SimWorkload *w, const SimPlan *p,
                            GError **error)
{
  if (p->ahead == NULL)
    return TRUE;
  if (p->n_ranks != w->n_ranks || p->n_ahead == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "the plan's early requests do not match the workload (%u "
                "ranks)", w->n_ranks);
    return FALSE;
  }
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimAhead *a = p->ahead[r];
    const SimRank *rk = &w->ranks[r];
    for (guint32 k = 0; a != NULL && k < p->n_ahead[r]; k++) {
      gboolean order =
        k == 0 || a[k].op > a[k - 1].op ||
        (a[k].op == a[k - 1].op &&
         (a[k - 1].from_start > a[k].from_start ||
          (a[k - 1].from_start == a[k].from_start &&
           a[k].lead_ns <= a[k - 1].lead_ns)));
      if (a[k].op >= rk->n_ops || !order || a[k].lead_ns < 0 ||
          rk->ops[a[k].op].kind != SIM_OP_KERNEL || a[k].pair >= p->n_pairs) {
        g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                    "the plan's early request %u of rank %u (op %u, pair "
                    "%u, lead %" G_GINT64_FORMAT " ns) is not on a kernel, "
                    "out of order, has a negative lead or names no pair",
                    k, r, a[k].op, a[k].pair, a[k].lead_ns);
        return FALSE;
      }
    }
  }
  return TRUE;
}

/* Plan p's clocks before the run name pairs it has and land in the run. */
static gboolean check_init(const SimWorkload *w, const SimPlan *p,
                           GError **error)
{
  if (p->init == NULL)
    return TRUE;
  for (guint r = 0; r < p->n_ranks; r++)
    for (guint s = 0; p->init[r] != NULL && s < SIM_MAX_STREAMS; s++) {
      const SimInit *x = &p->init[r][s];
      if (x->set && (p->n_ranks != w->n_ranks || x->cur >= p->n_pairs ||
                     x->target >= p->n_pairs || x->land_ns < 0)) {
        g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                    "the plan's clocks before the run for rank %u stream %u "
                    "name no pair or land before it", r, s);
        return FALSE;
      }
    }
  return TRUE;
}

gboolean sim_plan_check(const SimPlan *p, const SimWorkload *w,
                        GError **error)
{
  return check_ahead(w, p, error) && check_init(w, p, error);
}

/* ---- folded plans ----------------------------------------------------- */

/* A copy of n elements of `size` bytes (NULL stays NULL). */
static gpointer dup_n(gconstpointer src, gsize n, gsize size)
{
  return src != NULL ? g_memdup2(src, n * size) : NULL;
}

SimPlan *sim_plan_unfold(const SimPlan *p, const SimWorkload *w)
{
  g_return_val_if_fail(p != NULL && w != NULL, NULL);
  g_return_val_if_fail(p->n_ranks == w->n_ranks, NULL);
  SimPlan *u = g_new0(SimPlan, 1);
  u->n_ranks = p->n_ranks;
  u->n_pairs = p->n_pairs;
  u->pairs = g_memdup2(p->pairs, sizeof(SimClocks) * MAX(p->n_pairs, 1u));
  guint n = p->n_ranks;
  if (p->index != NULL)
    u->index = g_new0(guint16 *, MAX(n, 1u));
  if (p->ahead != NULL) {
    u->ahead = g_new0(SimAhead *, MAX(n, 1u));
    u->n_ahead = g_new0(guint32, MAX(n, 1u));
  }
  if (p->init != NULL)
    u->init = g_new0(SimInit *, MAX(n, 1u));
  for (guint r = 0; r < n; r++) {
    /* Rank r runs its representative's program: its op i is q's op i. */
    guint q = w->fold_rep != NULL ? w->fold_rep[r] : r;
    if (p->index != NULL)
      u->index[r] = dup_n(p->index[q], MAX(w->ranks[q].n_ops, 1u),
                          sizeof(guint16));
    if (p->ahead != NULL && p->ahead[q] != NULL && p->n_ahead[q] > 0) {
      u->ahead[r] = dup_n(p->ahead[q], p->n_ahead[q], sizeof(SimAhead));
      u->n_ahead[r] = p->n_ahead[q];
    }
    if (p->init != NULL)
      u->init[r] = dup_n(p->init[q], SIM_MAX_STREAMS, sizeof(SimInit));
  }
  return u;
}

/* ---- look-ahead --------------------------------------------------------- */

void sim_plan_lookahead_stream(const guint32 *ks, guint32 n,
                               const gint64 *start_ns, gint64 period_ns,
                               gint64 latency_ns, const guint16 *intent,
                               guint16 *req)
{
  double T = (double)MAX(period_ns, 1);
  /* Kernels of a stream start in stream order, so the targets tau rise
   * with i but where they wrap into the next iteration: a cursor finds
   * each target's kernel in one pass (planners call this once per
   * candidate on every stream).  Unordered starts (no timeline gives
   * them) fall back to a binary search per kernel; both pick the same
   * kernel. */
  gboolean sorted = TRUE;
  for (guint32 i = 1; i < n && sorted; i++)
    sorted = start_ns[ks[i]] >= start_ns[ks[i - 1]];
  if (sorted) {
    guint32 j = 0;
    double prev = -1.0;
    for (guint32 i = 0; i < n; i++) {
      double tau = (double)start_ns[ks[i]] + (double)latency_ns;
      if (tau >= T)
        tau = fmod(tau, T);
      if (tau < prev)
        j = 0; /* wrapped */
      prev = tau;
      /* the last kernel of the stream starting at or before tau (the
       * first when none does) */
      while (j + 1 < n && (double)start_ns[ks[j + 1]] <= tau)
        j++;
      req[ks[i]] = intent[ks[j]];
    }
    return;
  }
  for (guint32 i = 0; i < n; i++) {
    double tau = (double)start_ns[ks[i]] + (double)latency_ns;
    if (tau >= T)
      tau = fmod(tau, T);
    /* the last kernel of the stream starting at or before tau */
    guint32 after;
    SIM_UPPER_BOUND(after, 0, n, k, (double)start_ns[ks[k]], tau);
    guint32 j = after > 0 ? after - 1 : 0;
    req[ks[i]] = intent[ks[j]];
  }
}

/* The clocks of pair index k of plan p, packed, as the engine reads it
 * (an index past the pairs means pair 0). */
static guint32 plan_clocks(const SimPlan *p, guint16 k)
{
  return pack_clocks(p->pairs[k < p->n_pairs ? k : 0]);
}

/* A plan's latency-free timeline: per rank (NULL: not recorded) every
 * op's start and end in iteration 0. */
typedef struct {
  gint64 **start, **end;
} Timeline;

static void record_times(gpointer data, const SimOpRecord *rec)
{
  Timeline *tl = data;
  if (rec->iter == 0 && tl->start[rec->gpu] != NULL) {
    tl->start[rec->gpu][rec->op] = rec->start_ns;
    tl->end[rec->gpu][rec->op] = rec->end_ns;
  }
}

/* The last of kernels ks[0, n) whose start is <= t (n if none). */
static guint32 kernel_at(const guint32 *ks, guint32 n, const gint64 *start,
                         gint64 t)
{
  guint32 after;
  SIM_UPPER_BOUND(after, 0, n, k, start[ks[k]], t);
  return after > 0 ? after - 1 : n;
}

/* Appends to `out` the early requests of one stream's kernels ks[0, n)
 * (sim_plan_lookahead): for every change of the intended pair, at kernel
 * j, one made latency_ns before j starts, by the kernel running then or
 * (in a wait) the first one after it.  The caller sorts them. */
static void stream_ahead(const SimPlan *p, const guint32 *ks, guint32 n,
                         const gint64 *start, const gint64 *end,
                         gint64 period_ns, gint64 latency_ns,
                         const guint16 *intent, const guint16 *req,
                         GArray *out)
{
  for (guint32 j = 0; j < n && n > 1; j++) {
    guint32 prev = j > 0 ? j - 1 : n - 1;
    if (plan_clocks(p, intent[ks[j]]) == plan_clocks(p, intent[ks[prev]]))
      continue;
    /* The anchor: the kernel running at tau - latency_ns, in this
     * iteration or the previous one (times shifted by a period). */
    gint64 t = start[ks[j]] - latency_ns, shift = 0;
    guint32 a = kernel_at(ks, n, start, t);
    if (a == n) {
      shift = period_ns;
      a = kernel_at(ks, n, start, t + shift);
      if (a == n)
        continue;
    }
    guint32 k = ks[a];
    gint64 s_a = start[k] - shift, e_a = end[k] - shift;
    /* Not needed when the anchor's own start request already asks for
     * j's pair (it starts exactly then, or asks for it anyway). */
    if (a == j || s_a + latency_ns >= start[ks[j]] ||
        plan_clocks(p, req[k]) == plan_clocks(p, intent[ks[j]]))
      continue;
    SimAhead x = {k, intent[ks[j]], FALSE, latency_ns};
    if (a != prev && e_a > t) {
      x.lead_ns = e_a - t; /* inside kernel a */
    } else if (a != prev) {
      /* t falls in the wait after kernel a: the next kernel asks, that
       * long before it starts. */
      guint32 b = a + 1 < n ? a + 1 : 0;
      x.op = ks[b];
      x.from_start = TRUE;
      x.lead_ns = start[ks[b]] - (a + 1 < n ? shift : shift - period_ns) - t;
    }
    g_array_append_val(out, x);
  }
}

/* Early requests in the order they are made: by op; for one op, those
 * before its start first; each kind by decreasing lead. */
static gint cmp_ahead(gconstpointer pa, gconstpointer pb)
{
  const SimAhead *a = pa, *b = pb;
  if (a->op != b->op)
    return a->op < b->op ? -1 : 1;
  if (a->from_start != b->from_start)
    return a->from_start ? -1 : 1;
  return (a->lead_ns < b->lead_ns) - (a->lead_ns > b->lead_ns);
}

/* Rank r's look-ahead (sim_plan_lookahead): replaces p->index[r] by the
 * requests and sets its early requests.  ks: scratch of n_ops entries. */
static void lookahead_rank(SimPlan *p, const SimRank *rk, guint r,
                           const gint64 *start, const gint64 *end,
                           gint64 period_ns, gint64 latency_ns, guint32 *ks)
{
  const guint16 *intent = p->index[r];
  guint16 *req = g_memdup2(intent, sizeof(guint16) * MAX(rk->n_ops, 1));
  g_autoptr(GArray) ahead = g_array_new(FALSE, FALSE, sizeof(SimAhead));
  for (guint s = 0; s < rk->n_streams; s++) {
    guint32 n = 0;
    for (guint32 i = rk->stream_off[s]; i < rk->stream_off[s + 1]; i++)
      if (rk->ops[i].kind == SIM_OP_KERNEL)
        ks[n++] = i;
    sim_plan_lookahead_stream(ks, n, start, period_ns, latency_ns, intent,
                              req);
    stream_ahead(p, ks, n, start, end, period_ns, latency_ns, intent, req,
                 ahead);
    if (n > 0 && plan_clocks(p, req[ks[0]]) != plan_clocks(p, intent[ks[0]])) {
      /* The clocks change within the latency of the first kernel: start
       * the run as an iteration starts, the next pair in flight since
       * the previous one (landing where it changes). */
      guint32 j = 1;
      while (j < n && plan_clocks(p, intent[ks[j]]) ==
                          plan_clocks(p, intent[ks[0]]))
        j++;
      if (p->init == NULL || p->init[r] == NULL)
        sim_plan_rank_init(p, r);
      SimInit *x = &p->init[r][s];
      x->set = TRUE;
      x->cur = intent[ks[0]];
      x->target = req[ks[0]];
      x->land_ns = j < n ? start[ks[j]] : start[ks[0]] + latency_ns;
    }
  }
  g_array_sort(ahead, cmp_ahead);
  g_free(p->index[r]);
  p->index[r] = req;
  if (ahead->len > 0) {
    SimAhead *dst = sim_plan_rank_ahead(p, r, ahead->len);
    memcpy(dst, ahead->data, sizeof(SimAhead) * ahead->len);
  }
}

gboolean sim_plan_lookahead(SimPlan *p, const SimWorkload *w,
                            const SimMachine *m, gint64 latency_ns,
                            GError **error)
{
  g_return_val_if_fail(p != NULL && w != NULL && m != NULL, FALSE);
  /* Look-ahead rewrites the intended pairs: once per plan. */
  g_return_val_if_fail(p->ahead == NULL && p->init == NULL, FALSE);
  if (latency_ns <= 0 || p->index == NULL)
    return TRUE;
  /* The plan's own timeline: its clocks at once, no hook. */
  SimMachine vm = *m;
  vm.switch_latency_ns = 0;
  vm.iteration_begin = NULL;
  g_autoptr(SimEngine) e = sim_engine_new(w, &vm, error);
  if (e == NULL)
    return FALSE;
  guint n = w->n_ranks;
  Timeline tl = {g_new0(gint64 *, MAX(n, 1)), g_new0(gint64 *, MAX(n, 1))};
  guint32 max_ops = 0;
  for (guint r = 0; r < n && r < p->n_ranks; r++)
    if (p->index[r] != NULL && w->ranks[r].n_ops > 0) {
      tl.start[r] = g_new0(gint64, w->ranks[r].n_ops);
      tl.end[r] = g_new0(gint64, w->ranks[r].n_ops);
      max_ops = MAX(max_ops, w->ranks[r].n_ops);
    }
  sim_engine_set_observer(e, record_times, &tl);
  SimResult *res = sim_engine_run(e, p, 1, error);
  gboolean ok = res != NULL;
  if (ok) {
    gint64 period = res->iterations[0].time_ns;
    g_autofree guint32 *ks = g_new(guint32, MAX(max_ops, 1));
    for (guint r = 0; r < n; r++)
      if (tl.start[r] != NULL)
        lookahead_rank(p, &w->ranks[r], r, tl.start[r], tl.end[r], period,
                       latency_ns, ks);
  }
  sim_result_free(res);
  for (guint r = 0; r < n; r++) {
    g_free(tl.start[r]);
    g_free(tl.end[r]);
  }
  g_free(tl.start);
  g_free(tl.end);
  return ok;
}
