/* models/dvfs/policy_kernel.c -- js.policy.kernel{slowdown, granularity,
 * switch_latency_ms, min_segment_ms}: one clock pair per distinct kernel
 * (granularity "name"), per op ("op"), or, with a switching latency or a
 * minimum segment, per segment of consecutive kernels; within the
 * budget.  It keeps the pass and iteration plans as candidates, so it
 * saves at least as much (models/dvfs/planner.c, "Nesting").  Op plans
 * end with slack reclamation (reclaim), which is this policy's own.
 */
#include "models/dvfs/planner-private.h"
#include "models/dvfs/policy-private.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

static const char *const granularities[] = {"name", "op", NULL};
static const char *const keys[] = {"name", "slowdown", "granularity",
                                   "switch_latency_ms", "min_segment_ms",
                                   NULL};
static const DvfsArg args[] = {
  DVFS_ARG_SLOWDOWN(0),
  {"switch_latency_ms", DVFS_ARG_NUM, offsetof(DvfsPolicy, switch_latency_ms),
   -1, 0, 1e6, NULL, " ms (-1: the run's latency)"},
  {"granularity", DVFS_ARG_CHOICE, offsetof(DvfsPolicy, granularity),
   DVFS_GRANULARITY_NAME, 0, 0, granularities, NULL},
  {"min_segment_ms", DVFS_ARG_NUM, offsetof(DvfsPolicy, min_segment_ms), -1,
   0, 1e6, NULL, " ms (-1: the latency)"},
  {0}};

/* ---- slack reclamation (op granularity) ------------------------------------------ */

/* Latest finish of every node (lf, n_nodes) and total float of every slot
 * (tf, LF - EF) of the schedule last evaluated (one iteration from 0, in
 * m->ev_*) under the deadline, from a reverse pass. */
static void plan_floats(const Planner *P, gint64 deadline_ns, double *tf,
                        double *lf)
{
  const DvfsModel *m = P->m;
  guint32 nn = m->n_nodes;
  for (guint32 n = 0; n < nn; n++)
    lf[n] = (double)deadline_ns;
  for (guint32 k = nn; k-- > 0;) {
    guint32 n = m->topo[k];
    guint32 s0 = m->node_slots[m->node_off[n]];
    guint8 kind = m->slot_kind[s0];
    double dur = kind == SIM_OP_KERNEL || kind == SIM_OP_MARKER
                     ? (double)(m->ev_end[s0] - m->ev_start[s0])
                     : (double)m->node_dur_ns[n];
    double ls = lf[n] - dur;
    for (guint32 e = m->node_pred_off[n]; e < m->node_pred_off[n + 1]; e++)
      if (ls < lf[m->node_preds[e]])
        lf[m->node_preds[e]] = ls;
  }
  for (guint32 s = 0; s < m->n_slots; s++)
    tf[s] = MAX(0.0, lf[m->slot_node[s]] - (double)m->ev_end[s]);
}

/* Solves one run of ops [a, b) of ks (a sub-chain) with budget (ns):
 * ops may only get slower (into their float), cost = energy change less
 * the waiting power the absorbed float no longer draws. */
static void reclaim_run(const Planner *P, const guint32 *ks, guint32 a,
                        guint32 b, double budget, guint16 *intent)
{
  const DvfsModel *m = P->m;
  guint K = P->pr->n_pairs;
  g_autoptr(DvfsKnapsack) kn = dvfs_knapsack_new();
  g_autofree DvfsItem *items = g_new(DvfsItem, K);
  for (guint32 i = a; i < b; i++) {
    guint32 s = ks[i];
    guint32 c = m->slot_class[s];
    double mult = m->class_mult[c], idle = m->class_idle_w[c];
    double tcur = (double)(m->ev_end[s] - m->ev_start[s]);
    double pcur = m->ev_power_w[s];
    guint n = 0;
    for (guint k = 0; k < K; k++) {
      const DvfsCost *ck = dvfs_prices_at(P->pr, m, s, k);
      double t = (double)llround((double)m->slot_ref_ns[s] * ck->time_scale);
      if (k != intent[s] && t < tcur)
        continue;
      double w = k == intent[s] ? 0.0 : t - tcur;
      double e = k == intent[s]
                     ? 0.0
                     : (mult * ((ck->power_w - idle) * t - (pcur - idle) *
                                                               tcur) -
                        mult * m->class_wait_w[c] * w) *
                           1e-9;
      items[n++] = (DvfsItem){w, e, k};
    }
    dvfs_knapsack_add(kn, items, n);
  }
  g_autofree guint32 *tags = g_new(guint32, b - a);
  dvfs_knapsack_solve_greedy(kn, budget, tags, NULL, NULL);
  for (guint32 i = a; i < b; i++)
    intent[ks[i]] = (guint16)tags[i - a];
}

/* The predecessor slot that set slot x's start in the schedule last
 * evaluated (m->ev_*), through which a delay would propagate; DVFS_NONE
 * when x started with the iteration or (a transfer) when another member
 * arrived later, which absorbs a delay up to the gap. */
static guint32 binder(const DvfsModel *m, guint32 x)
{
  gint64 a = m->ev_arrive[x];
  guint8 kind = m->slot_kind[x];
  if (kind != SIM_OP_KERNEL && kind != SIM_OP_MARKER && m->ev_start[x] != a)
    return DVFS_NONE;
  guint32 p = m->slot_pred[x], w = m->slot_wait[x];
  if (p != DVFS_NONE && m->ev_end[p] == a)
    return p;
  if (w != DVFS_NONE && m->ev_end[w] == a)
    return w;
  return DVFS_NONE;
}

/* The kernel whose end sets kernel b's start through a chain of binding
 * transfers and markers, or DVFS_NONE. */
static guint32 parent_kernel(const DvfsModel *m, guint32 b)
{
  guint32 x = binder(m, b);
  while (x != DVFS_NONE && m->slot_kind[x] != SIM_OP_KERNEL)
    x = binder(m, x);
  return x;
}

/* Makes a proposed op-level plan safe: replays it in topological order
 * (latency 0, exactly as the evaluator) and, wherever a kernel would end
 * after its latest finish lf (computed for the current plan `cur`), gives
 * it the slowest option no slower than proposed that ends in time (the
 * current option always does: every predecessor ends by its own latest
 * finish, which is at most this kernel's latest start).  The result keeps
 * every node within lf, hence the iteration within the deadline. */
static void repair(Planner *P, const guint16 *cur, guint16 *prop,
                   const double *lf)
{
  DvfsModel *m = P->m;
  gint64 *end = m->ev_end, *arrive = m->ev_arrive;
  guint K = P->pr->n_pairs;
  for (guint32 k = 0; k < m->n_nodes; k++) {
    guint32 n = m->topo[k];
    guint32 j0 = m->node_off[n], j1 = m->node_off[n + 1];
    guint32 s0 = m->node_slots[j0];
    guint8 kind = m->slot_kind[s0];
    if (kind == SIM_OP_KERNEL || kind == SIM_OP_MARKER) {
      gint64 a = 0;
      if (m->slot_pred[s0] != DVFS_NONE)
        a = MAX(a, end[m->slot_pred[s0]]);
      if (m->slot_wait[s0] != DVFS_NONE)
        a = MAX(a, end[m->slot_wait[s0]]);
      gint64 d = 0;
      if (kind == SIM_OP_KERNEL) {
        double ref = (double)m->slot_ref_ns[s0];
        const DvfsCost *cp = dvfs_prices_at(P->pr, m, s0, prop[s0]);
        d = (gint64)llround(ref * cp->time_scale);
        if ((double)(a + d) > lf[n]) {
          gint64 tp = d, best_t = -1;
          guint16 best = cur[s0];
          for (guint o = 0; o < K; o++) {
            const DvfsCost *co = dvfs_prices_at(P->pr, m, s0, o);
            gint64 t = (gint64)llround(ref * co->time_scale);
            if (t <= tp && (double)(a + t) <= lf[n] && t > best_t) {
              best_t = t;
              best = (guint16)o;
            }
          }
          prop[s0] = best;
          d = (gint64)llround(
              ref * dvfs_prices_at(P->pr, m, s0, best)->time_scale);
        }
      }
      arrive[s0] = a;
      end[s0] = a + d;
      continue;
    }
    gint64 st = 0;
    for (guint32 j = j0; j < j1; j++) {
      guint32 x = m->node_slots[j];
      gint64 a = 0;
      if (m->slot_pred[x] != DVFS_NONE)
        a = MAX(a, end[m->slot_pred[x]]);
      if (m->slot_wait[x] != DVFS_NONE)
        a = MAX(a, end[m->slot_wait[x]]);
      st = MAX(st, a);
    }
    for (guint32 j = j0; j < j1; j++)
      end[m->node_slots[j]] = st + m->node_dur_ns[n];
  }
}

/* Rounds of slack reclamation from a feasible op-level plan.  In its
 * schedule every kernel has a total float TF (plan_floats) and a parent:
 * the kernel whose delay would reach it (parent_kernel).  Delays add up
 * along parent chains and TF never decreases from parent to child, so a
 * chain may use TF(child) - TF(parent) more at each step: kernels with
 * equal TF in a chain form a run sharing TF(run) - TF(parent run), and no
 * kernel then finishes after its latest finish.  Each run is a small
 * knapsack (ops may only get slower; cost = energy change less the
 * waiting power the absorbed float no longer draws).  Each round is
 * checked exactly; a failed round halves the floats used (transfers that
 * absorb only part of a delay are where the rule is optimistic).
 * Latency 0 only (one iteration). */
static Cand *reclaim(Planner *P, const Cand *start, gboolean free_only)
{
  const DvfsModel *m = P->m;
  gsize N = MAX(m->n_slots, 1u);
  Cand *cur = planner_cand_copy(P, start, "kernel(op)");
  Cand *trial = planner_cand_copy(P, start, "kernel(op)");
  g_autofree double *tf = g_new(double, N);
  g_autofree double *lf = g_new(double, MAX(m->n_nodes, 1u));
  g_autofree guint32 *run_of = g_new(guint32, N);
  g_autofree gboolean *continued = g_new(gboolean, N);
  g_autoptr(GArray) budget = g_array_new(FALSE, FALSE, sizeof(double));
  g_autofree guint32 *run_off = NULL, *run_slots = NULL;
  double scale = 1.0;
  for (int round = 0; round < 8 && scale > 1.0 / 16; round++) {
    DvfsEvalOptions o = {1, 0};
    DvfsEval ev;
    dvfs_model_eval(P->m, P->pr, cur->req, &o, &ev);
    P->evals++;
    /* free_only: floats up to the plan's own iteration time (stretching
     * costs no added time); else up to the deadline. */
    plan_floats(P, free_only ? ev.time_ns[0] : P->deadline_ns, tf, lf);
    /* Runs, in topological order (parents first). */
    g_array_set_size(budget, 0);
    for (guint32 s = 0; s < m->n_slots; s++)
      run_of[s] = DVFS_NONE;
    for (guint32 k = 0; k < m->n_nodes; k++) {
      guint32 s = m->node_slots[m->node_off[m->topo[k]]];
      continued[s] = FALSE;
      run_of[s] = DVFS_NONE;
      if (m->slot_kind[s] != SIM_OP_KERNEL)
        continue;
      guint32 par = parent_kernel(m, s);
      if (par != DVFS_NONE && tf[s] == tf[par] && !continued[par]) {
        run_of[s] = run_of[par];
        continued[par] = TRUE;
        continue;
      }
      double b = par != DVFS_NONE ? MAX(0.0, tf[s] - tf[par]) : tf[s];
      run_of[s] = budget->len;
      g_array_append_val(budget, b);
    }
    guint nr = budget->len;
    g_free(run_off);
    g_free(run_slots);
    run_off = g_new0(guint32, nr + 1);
    for (guint32 s = 0; s < m->n_slots; s++)
      if (run_of[s] != DVFS_NONE)
        run_off[run_of[s] + 1]++;
    for (guint r = 0; r < nr; r++)
      run_off[r + 1] += run_off[r];
    run_slots = g_new(guint32, MAX(run_off[nr], 1u));
    {
      g_autofree guint32 *fill = g_memdup2(run_off, sizeof(guint32) *
                                                        (nr + 1));
      for (guint32 s = 0; s < m->n_slots; s++)
        if (run_of[s] != DVFS_NONE)
          run_slots[fill[run_of[s]]++] = s;
    }
    memcpy(trial->intent, cur->intent, sizeof(guint16) * N);
    for (guint r = 0; r < nr; r++) {
      double b = g_array_index(budget, double, r) * scale;
      if (b >= 1.0)
        reclaim_run(P, run_slots, run_off[r], run_off[r + 1], b,
                    trial->intent);
    }
    repair(P, cur->intent, trial->intent, lf);
    planner_eval(P, trial);
    if (trial->feasible && trial->ev.mean_energy_j < cur->ev.mean_energy_j) {
      double gain = cur->ev.mean_energy_j - trial->ev.mean_energy_j;
      memcpy(cur->intent, trial->intent, sizeof(guint16) * N);
      memcpy(cur->req, trial->req, sizeof(guint16) * N);
      cur->ev = trial->ev;
      if (gain < 1e-5 * cur->ev.mean_energy_j)
        break;
    } else if (trial->feasible) {
      break; /* no float left to use */
    } else {
      scale *= 0.5;
    }
  }
  planner_cand_free(trial);
  return cur;
}

/* ---- the policy ---------------------------------------------------------------- */

/* Kernel names without segments: knapsack + descent from the best of it
 * and the pass plan. */
static Cand *plan_kernel_name(Planner *P)
{
  g_autoptr(Cand) pass = planner_pass(P);
  g_autofree guint32 *su = g_new(guint32, MAX(P->m->n_slots, 1u));
  guint n = planner_units_name(P, su);
  g_autoptr(Cand) k = planner_search(P, su, n, "kernel(name)");
  const Cand *start = k != NULL && k->ev.mean_energy_j < pass->ev.mean_energy_j
                          ? k
                          : pass;
  Cand *best;
  if (n <= 4096) {
    best = planner_descend(P, su, n, start, "kernel(name)");
  } else {
    best = planner_cand_copy(P, start, NULL);
  }
  planner_keep(P, best, NULL);
  return best;
}

static Cand *search_kernel(Planner *P)
{
  const DvfsPolicy *pol = P->pol;
  g_autofree guint32 *su = g_new(guint32, MAX(P->m->n_slots, 1u));
  if (P->min_segment_ns > 0) {
    /* Segments of at least the minimum length, and (a coarser plan is
     * also valid) 4x, 16x, ... longer ones, up to the iteration. */
    planner_cand_free(planner_pass(P)); /* kept among the candidates */
    gboolean content = pol->granularity == DVFS_GRANULARITY_NAME;
    const char *label = content ? "kernel(segments by content)"
                                : "kernel(segments)";
    for (gint64 seg = P->min_segment_ns;; seg *= 4) {
      guint n = planner_units_segment(P, su, seg, content);
      g_autoptr(Cand) k = planner_search(P, su, n, label);
      if (k != NULL) {
        planner_keep(P, k, NULL);
        if (n <= 1024) { /* exact descent: few enough units */
          g_autoptr(Cand) d = planner_descend(P, su, n, k, label);
          planner_keep(P, d, NULL);
        }
      }
      if (seg >= P->m->base_time_ns || seg > G_MAXINT64 / 8)
        break;
    }
    return planner_best(P) != NULL ? planner_cand_copy(P, planner_best(P), NULL) : NULL;
  }
  planner_cand_free(plan_kernel_name(P)); /* kept among the candidates */
  if (pol->granularity == DVFS_GRANULARITY_OP) {
    guint n = planner_units_op(P, su);
    g_autoptr(Cand) k = planner_search(P, su, n, "kernel(op)");
    if (k != NULL)
      planner_keep(P, k, NULL);
    /* Slack reclamation from the best op-expressible plan so far: within
     * its own iteration time (free), and up to the deadline. */
    for (int mode = 0; mode < 2; mode++) {
      const Cand *b = planner_best(P);
      g_autoptr(Cand) r = reclaim(P, b, mode == 0);
      r->n_units = n;
      planner_keep(P, r, NULL);
    }
  }
  return planner_cand_copy(P, planner_best(P), NULL);
}

static char *label(const DvfsPolicy *p)
{
  GString *s = g_string_new("kernel");
  g_string_append_printf(s, "(%s", dvfs_granularity_name(p->granularity));
  g_string_append_printf(s, ",%s=%g", "s", p->slowdown);
  if (p->switch_latency_ms >= 0)
    g_string_append_printf(s, ",lat=%gms", p->switch_latency_ms);
  if (p->min_segment_ms >= 0)
    g_string_append_printf(s, ",seg=%gms", p->min_segment_ms);
  g_string_append_c(s, ')');
  return g_string_free(s, FALSE);
}

static const PlannerClass planned = {PLANNER_SEGMENTS, search_kernel, NULL};

const DvfsPolicyClass dvfs_class_kernel = {
  .name = "kernel",
  .keys = keys,
  .args = args,
  .flags = DVFS_CLASS_PLANNED,
  .planner = &planned,
  .label = label,
  .check = dvfs_check_standard,
  .plan = planner_plan,
};
