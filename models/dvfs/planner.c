/* models/dvfs/planner.c -- the planned DVFS policies' shared machinery
 * (DESIGN section 6).
 *
 * Definitions: baseline = the workload at auto clocks; saving = 1 -
 * E/E_base; slowdown = T/T_base - 1 (per iteration).  A plan made with
 * budget s keeps every evaluated iteration within T_base + floor(T_base *
 * s) ns at the switching latency it was made for (replays of more
 * iterations: within DVFS_SLOWDOWN_TOL more).
 *
 * Pipeline
 * --------
 * 1. Model (models/dvfs/model.c): one baseline replay on the engine, folded
 *    into a dependency graph whose evaluator reproduces the engine exactly
 *    and runs in milliseconds.  Every decision below is judged by that
 *    evaluator ("eval"), never by the approximate separable model alone.
 *    A folded workload (SimWorkload.fold_rep) is planned the same way on
 *    its representatives: the model takes its classes, and the plan gives
 *    representatives only (sim_plan_unfold expands it); exact because
 *    a class's members run the same ops at the same prices (docs/dvfs.md,
 *    "Folded workloads").  Variability is refused there
 *    (cluster_check_folded).
 * 2. Candidates: every (SM clock step, memory clock) pair of the GPU
 *    (optionally restricted), plus auto; each shape priced at each pair
 *    through the machine (power cap included).
 * 3. Separable model for the knapsack (models/dvfs/knapsack.c).  For kernel
 *    op s of class c (m GPUs) at candidate k, with baseline duration d,
 *    duration t_k, power P_k, baseline power P_b, idle power P_i, longest
 *    path through s M(s), baseline iteration T and float use phi in [0, 1]:
 *
 *      cap   = d * (1 + phi * (T / M(s) - 1))     free stretch (off the
 *                                                 critical path)
 *      w     = max(0, t_k - cap)                  added critical time
 *      c     = m * [(P_k - P_i) t_k - (P_b - P_i) d]
 *              - m * gamma_c * max(0, min(t_k, cap) - d)
 *              + lambda * w
 *
 *    gamma_c is the class's average waiting power above idle (a stretched
 *    op shortens a blocked wait), lambda the power of all GPUs during added
 *    iteration time.  A unit (a kernel name, an op, a segment, a phase)
 *    sums its ops.  With phi = 1, sum over units of w <= B bounds the
 *    added time of EVERY path by B (model.c, "Slack"), so the knapsack
 *    solution is feasible with budget B = s * T; it is conservative when
 *    parallel paths are both stretched, so the budget is then scaled by
 *    kappa (grown until the eval says infeasible, then bisected).  If no
 *    kappa works (switching latency), phi is lowered.
 * 4. Refinement: for plans with few units (phases, kernel names,
 *    segments), coordinate descent on the eval: each unit in turn tries its
 *    undominated options, keeping the best feasible improvement.  For op
 *    plans (latency 0), slack reclamation (reclaim()): kernels share the
 *    float of their chain of binding predecessors, each chain is a small
 *    knapsack, and a repair pass keeps every kernel within its latest
 *    finish, so the result is feasible by construction.
 * 5. Nesting: a finer plan space contains the coarser ones, and the
 *    planner keeps the coarser plans as candidates (kernel includes the
 *    pass plan, pass includes the iteration plan, op includes name), so
 *    kernel >= pass >= iteration in saving, by construction.
 * 6. Final check: the chosen plan is replayed on the engine; if it misses
 *    the budget (it cannot while the model is exact), the next candidate is
 *    tried, and auto clocks are the last resort.
 *
 * Policies
 * --------
 * Each planned policy's own part (its search or strategy, stated in its
 * PlannerClass: models/dvfs/planner-private.h) is in
 * models/dvfs/policy_NAME.c; this file holds what they share (candidates,
 * the separable model, budget search, descent, units, the run and its
 * report).
 * - powercap{watts}: auto clocks under that limit.  powercap{slowdown}:
 *   every limit from the GPU's minimum to maximum in 5 W steps, then 1 W
 *   steps around the best, each evaluated exactly; lowest energy within
 *   budget.
 * - iteration: every candidate pair, evaluated exactly (the true optimum
 *   over uniform clocks).
 * - pass: one pair per phase; knapsack + descent, starting from the
 *   iteration plan.
 * - kernel, granularity name: one pair per (kernel name, phase); knapsack
 *   + descent, starting from the pass plan.  granularity op: one pair per
 *   op of every rank class (ops with slack slowed for free); knapsack +
 *   slack reclamation, starting from the name plan.
 * - Switching latency L > 0 (or min_segment_ms > 0): kernels are merged
 *   into segments of consecutive ops on a stream lasting >= S = max(L,
 *   min_segment) at baseline (also 4S, 16S, ... up to the iteration: a
 *   coarser plan is valid too); one pair per segment (op granularity) or
 *   per distinct segment content (name granularity).  Switches are
 *   requested L ahead of the segment boundary in the plan's own predicted
 *   timeline (the ops just before it ask for the next pair and still run
 *   at the old one, as the engine's switch rule gives), so the clocks land
 *   on time.  Pass plans get the same look-ahead.  All candidates are
 *   evaluated with the latency over 2 iterations (the second starts with
 *   the first's clocks).
 * - custom: a chooser is called once per unit (kernel name, op or segment)
 *   with the time and energy of the unit at every candidate.
 *
 * Known limits
 * ------------
 * - The knapsack's separable model is approximate off the critical path
 *   (parallel paths, blocked-power credit); the evaluator keeps plans
 *   feasible, so this costs saving, not budget.
 * - Op-level plans on big workloads skip the descent (too many units).
 * - Segments are cut greedily by time, not at the best boundaries.
 * - Costs at iteration 0: stragglers are not planned for.
 */
#include "models/dvfs/planner-private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- candidates ------------------------------------------------------------- */

void planner_cand_free(gpointer p)
{
  Cand *c = p;
  if (c == NULL)
    return;
  g_free(c->intent);
  g_free(c->req);
  g_free(c->label);
  g_free(c);
}
Cand *planner_cand_new(const Planner *P, const char *label)
{
  Cand *c = g_new0(Cand, 1);
  gsize n = MAX(P->m->n_slots, 1u);
  c->intent = g_new0(guint16, n);
  c->req = g_new0(guint16, n);
  c->label = g_strdup(label);
  return c;
}

Cand *planner_cand_copy(const Planner *P, const Cand *src, const char *label)
{
  Cand *c = g_new0(Cand, 1);
  gsize n = MAX(P->m->n_slots, 1u);
  c->intent = g_memdup2(src->intent, sizeof(guint16) * n);
  c->req = g_memdup2(src->req, sizeof(guint16) * n);
  c->ev = src->ev;
  c->feasible = src->feasible;
  c->n_units = src->n_units;
  c->label = g_strdup(label != NULL ? label : src->label);
  return c;
}

/* Builds the per-stream kernel slot lists. */
static void build_streams(Planner *P)
{
  const DvfsModel *m = P->m;
  P->n_streams = m->n_states;
  P->ks_off = g_new0(guint32, P->n_streams + 1);
  for (guint32 s = 0; s < m->n_slots; s++)
    if (m->slot_kind[s] == SIM_OP_KERNEL)
      P->ks_off[m->slot_state[s] + 1]++;
  for (guint32 i = 0; i < P->n_streams; i++)
    P->ks_off[i + 1] += P->ks_off[i];
  P->ks = g_new(guint32, MAX(P->ks_off[P->n_streams], 1u));
  g_autofree guint32 *fill = g_memdup2(P->ks_off,
                                       sizeof(guint32) * (P->n_streams + 1));
  /* Slots of a stream are consecutive and in order. */
  for (guint32 s = 0; s < m->n_slots; s++)
    if (m->slot_kind[s] == SIM_OP_KERNEL)
      P->ks[fill[m->slot_state[s]]++] = s;
}

static gboolean uniform_intent(const Planner *P, const guint16 *intent)
{
  const DvfsModel *m = P->m;
  gint first = -1;
  for (guint32 s = 0; s < m->n_slots; s++) {
    if (m->slot_kind[s] != SIM_OP_KERNEL)
      continue;
    if (first < 0)
      first = intent[s];
    else if (intent[s] != first)
      return FALSE;
  }
  return TRUE;
}

/* Look-ahead: with latency L, each kernel requests the pair planned for
 * the kernel running L later (in the plan's own latency-free timeline), so
 * switches land where the plan changes.  Wraps into the next iteration. */
static void lookahead(Planner *P, const guint16 *intent, guint16 *req)
{
  DvfsModel *m = P->m;
  memcpy(req, intent, sizeof(guint16) * MAX(m->n_slots, 1u));
  if (P->latency_ns <= 0 || uniform_intent(P, intent))
    return;
  DvfsEvalOptions o = {1, 0};
  DvfsEval ev;
  dvfs_model_eval(m, P->pr, intent, &o, &ev);
  P->evals++;
  /* The engine's look-ahead rule, shared with pipeline plans. */
  for (guint32 st = 0; st < P->n_streams; st++)
    sim_plan_lookahead_stream(&P->ks[P->ks_off[st]],
                              P->ks_off[st + 1] - P->ks_off[st], m->ev_start,
                              ev.time_ns[0], P->latency_ns, intent, req);
}

/* Evaluates a candidate (look-ahead included) and records feasibility. */
void planner_eval(Planner *P, Cand *c)
{
  lookahead(P, c->intent, c->req);
  DvfsEvalOptions o = {P->iters, P->latency_ns};
  dvfs_model_eval(P->m, P->pr, c->req, &o, &c->ev);
  P->evals++;
  c->feasible = c->ev.max_time_ns <= P->deadline_ns;
}

/* Keeps a copy of c among the candidates when feasible. */
void planner_keep(Planner *P, const Cand *c, const char *label)
{
  if (c->feasible)
    g_ptr_array_add(P->cands, planner_cand_copy(P, c, label));
}

Cand *planner_best(Planner *P)
{
  Cand *best = NULL;
  for (guint i = 0; i < P->cands->len; i++) {
    Cand *c = g_ptr_array_index(P->cands, i);
    if (best == NULL || c->ev.mean_energy_j < best->ev.mean_energy_j)
      best = c;
  }
  return best;
}

/* ---- the separable model ------------------------------------------------------- */

/* Adds slot s's w and c at every candidate to tau[] and cost[]. */
static void slot_items(const Planner *P, guint32 s, double phi, double *tau,
                       double *cost)
{
  const DvfsModel *m = P->m;
  guint32 c = m->slot_class[s];
  double mult = m->class_mult[c];
  double idle = m->class_idle_w[c];
  double gamma = m->class_wait_w[c];
  double d = (double)(m->base_end[s] - m->base_start[s]);
  double pb = m->base_power_w[s];
  double T = (double)m->base_time_ns;
  double cap = d * (1.0 + phi * (T / m->slot_longest_ns[s] - 1.0));
  double ref = (double)m->slot_ref_ns[s];
  for (guint k = 0; k < P->pr->n_pairs; k++) {
    const DvfsCost *ck = dvfs_prices_at(P->pr, m, s, k);
    double t = (double)llround(ref * ck->time_scale);
    double w = MAX(0.0, t - cap);
    double absorbed = MAX(0.0, MIN(t, cap) - d);
    tau[k] += w;
    cost[k] += (mult * ((ck->power_w - idle) * t - (pb - idle) * d) -
                mult * gamma * absorbed + m->lambda_t_w * w) *
               1e-9;
  }
}

/* Builds the knapsack of units (slot_unit: per slot a unit id or
 * DVFS_NONE; every unit has a kernel slot).  Items: tag = candidate. */
static DvfsKnapsack *build_knapsack(const Planner *P, const guint32 *slot_unit,
                                    guint n_units, double phi)
{
  const DvfsModel *m = P->m;
  guint K = P->pr->n_pairs;
  DvfsKnapsack *ks = dvfs_knapsack_new();
  g_autofree DvfsItem *items = g_new(DvfsItem, K);
  if ((double)n_units * K <= 4e6) {
    g_autofree double *tau = g_new0(double, (gsize)n_units * K);
    g_autofree double *cost = g_new0(double, (gsize)n_units * K);
    for (guint32 s = 0; s < m->n_slots; s++)
      if (slot_unit[s] != DVFS_NONE)
        slot_items(P, s, phi, &tau[(gsize)slot_unit[s] * K],
                   &cost[(gsize)slot_unit[s] * K]);
    for (guint u = 0; u < n_units; u++) {
      for (guint k = 0; k < K; k++)
        items[k] = (DvfsItem){tau[(gsize)u * K + k], cost[(gsize)u * K + k],
                              k};
      dvfs_knapsack_add(ks, items, K);
    }
    return ks;
  }
  /* Large: units are runs of consecutive slots, in order. */
  g_autofree double *tau = g_new0(double, K);
  g_autofree double *cost = g_new0(double, K);
  guint32 cur = DVFS_NONE;
  for (guint32 s = 0; s <= m->n_slots; s++) {
    guint32 u = s < m->n_slots ? slot_unit[s] : DVFS_NONE - 1;
    if (s < m->n_slots && u == DVFS_NONE)
      continue;
    if (u != cur && cur != DVFS_NONE) {
      g_assert(cur == dvfs_knapsack_n_units(ks));
      for (guint k = 0; k < K; k++)
        items[k] = (DvfsItem){tau[k], cost[k], k};
      dvfs_knapsack_add(ks, items, K);
      memset(tau, 0, sizeof(double) * K);
      memset(cost, 0, sizeof(double) * K);
    }
    cur = u;
    if (s < m->n_slots)
      slot_items(P, s, phi, tau, cost);
  }
  g_assert(dvfs_knapsack_n_units(ks) == n_units);
  return ks;
}

static void intent_from_tags(const Planner *P, const guint32 *slot_unit,
                             const guint32 *tags, guint16 *intent)
{
  const DvfsModel *m = P->m;
  for (guint32 s = 0; s < m->n_slots; s++)
    intent[s] = slot_unit[s] != DVFS_NONE ? (guint16)tags[slot_unit[s]] : 0;
}

/* Budget search: solves the knapsack at budget kappa * s * T for growing,
 * then bisected kappa, lowering phi when nothing is feasible.  Returns the
 * best feasible candidate (owned) or NULL. */
Cand *planner_search(Planner *P, const guint32 *slot_unit, guint n_units,
                    const char *label)
{
  static const double phis[] = {1.0, 0.5, 0.0};
  g_autofree guint32 *tags = g_new(guint32, MAX(n_units, 1u));
  Cand *best = NULL;
  Cand *c = planner_cand_new(P, label);
  c->n_units = n_units;
  double T = (double)P->m->base_time_ns;
  for (guint pi = 0; pi < G_N_ELEMENTS(phis) && best == NULL; pi++) {
    g_autoptr(DvfsKnapsack) ks = build_knapsack(P, slot_unit, n_units,
                                                phis[pi]);
    /* try(kappa): returns feasibility; keeps the best. */
    double lo = -1, hi = -1; /* largest feasible / smallest infeasible */
    int tries = 0;
    double kappa = 1.0;
    while (tries < 14) {
      tries++;
      dvfs_knapsack_solve(ks, kappa * P->s * T, tags, NULL, NULL);
      intent_from_tags(P, slot_unit, tags, c->intent);
      planner_eval(P, c);
      if (c->feasible) {
        if (best == NULL || c->ev.mean_energy_j < best->ev.mean_energy_j) {
          planner_cand_free(best);
          best = planner_cand_copy(P, c, NULL);
        }
        lo = MAX(lo, kappa);
      } else {
        hi = hi < 0 ? kappa : MIN(hi, kappa);
      }
      if (P->s <= 0)
        break;
      /* next kappa */
      if (hi < 0) {
        if (kappa >= 64)
          break;
        kappa *= 2;
      } else if (lo < 0) {
        if (kappa < 1.0 / 16) {
          if (kappa == 0)
            break;
          kappa = 0;
        } else {
          kappa /= 2;
        }
      } else {
        if (hi - lo < 0.02 * hi)
          break;
        kappa = 0.5 * (lo + hi);
      }
    }
    /* Smaller budgets too: the separable model overstates what added time
     * costs on parallel paths, so a plan using less of the budget can be
     * the better one. */
    static const double smaller[] = {0.5, 0.2, 0.05};
    for (guint i = 0; i < G_N_ELEMENTS(smaller) && P->s > 0 && lo >= 1.0;
         i++) {
      dvfs_knapsack_solve(ks, smaller[i] * P->s * T, tags, NULL, NULL);
      intent_from_tags(P, slot_unit, tags, c->intent);
      planner_eval(P, c);
      if (c->feasible && c->ev.mean_energy_j < best->ev.mean_energy_j) {
        planner_cand_free(best);
        best = planner_cand_copy(P, c, NULL);
      }
    }
  }
  planner_cand_free(c);
  return best;
}

void planner_unit_slots_build(const Planner *P, const guint32 *slot_unit,
                             guint n_units, UnitSlots *us)
{
  const DvfsModel *m = P->m;
  us->off = g_new0(guint32, n_units + 1);
  for (guint32 s = 0; s < m->n_slots; s++)
    if (slot_unit[s] != DVFS_NONE)
      us->off[slot_unit[s] + 1]++;
  for (guint u = 0; u < n_units; u++)
    us->off[u + 1] += us->off[u];
  us->slots = g_new(guint32, MAX(us->off[n_units], 1u));
  g_autofree guint32 *fill = g_memdup2(us->off, sizeof(guint32) *
                                                    (n_units + 1));
  for (guint32 s = 0; s < m->n_slots; s++)
    if (slot_unit[s] != DVFS_NONE)
      us->slots[fill[slot_unit[s]]++] = s;
}

void planner_unit_slots_clear(UnitSlots *us)
{
  g_free(us->off);
  g_free(us->slots);
}

void planner_set_unit(Cand *c, const UnitSlots *us, guint u, guint16 k)
{
  for (guint32 j = us->off[u]; j < us->off[u + 1]; j++)
    c->intent[us->slots[j]] = k;
}

static double unit_base_energy(const Planner *P, const UnitSlots *us, guint u)
{
  const DvfsModel *m = P->m;
  double e = 0;
  for (guint32 j = us->off[u]; j < us->off[u + 1]; j++) {
    guint32 s = us->slots[j];
    e += m->class_mult[m->slot_class[s]] * m->base_power_w[s] *
         (double)(m->base_end[s] - m->base_start[s]);
  }
  return e;
}

typedef struct {
  double e;
  guint u;
} UnitOrder;

static int cmp_unit_order(const void *a, const void *b)
{
  const UnitOrder *x = a, *y = b;
  if (x->e != y->e)
    return x->e > y->e ? -1 : 1;
  return (x->u > y->u) - (x->u < y->u);
}

/* Coordinate descent from `start` (its intent must be constant on every
 * unit) over the units' undominated options.  Returns the improved
 * candidate (owned; a copy of start when nothing improves). */
Cand *planner_descend(Planner *P, const guint32 *slot_unit, guint n_units,
                     const Cand *start, const char *label)
{
  UnitSlots us;
  planner_unit_slots_build(P, slot_unit, n_units, &us);
  g_autoptr(DvfsKnapsack) ks = build_knapsack(P, slot_unit, n_units, 1.0);
  Cand *cur = planner_cand_copy(P, start, label);
  cur->n_units = n_units;
  Cand *trial = planner_cand_copy(P, start, label);
  g_autofree UnitOrder *order = g_new(UnitOrder, MAX(n_units, 1u));
  for (guint u = 0; u < n_units; u++)
    order[u] = (UnitOrder){unit_base_energy(P, &us, u), u};
  if (n_units > 1)
    qsort(order, n_units, sizeof(UnitOrder), cmp_unit_order);
  guint used = 0;
  guint budget = MIN(P->eval_budget, 40 * n_units + 100);
  for (int sweep = 0; sweep < 4 && used < budget; sweep++) {
    gboolean improved = FALSE;
    for (guint oi = 0; oi < n_units && used < budget; oi++) {
      guint u = order[oi].u;
      if (us.off[u] == us.off[u + 1])
        continue;
      guint16 now = cur->intent[us.slots[us.off[u]]];
      guint16 best_k = now;
      double best_e = cur->ev.mean_energy_j;
      DvfsEval best_ev = cur->ev;
      guint n_items;
      const DvfsItem *items = dvfs_knapsack_items(ks, u, &n_items);
      memcpy(trial->intent, cur->intent,
             sizeof(guint16) * MAX(P->m->n_slots, 1u));
      for (guint i = 0; i < n_items && used < budget; i++) {
        guint16 k = (guint16)items[i].tag;
        if (k == now)
          continue;
        planner_set_unit(trial, &us, u, k);
        planner_eval(P, trial);
        used++;
        if (trial->feasible &&
            trial->ev.mean_energy_j < best_e - 1e-12 * fabs(best_e)) {
          best_e = trial->ev.mean_energy_j;
          best_k = k;
          best_ev = trial->ev;
        }
      }
      if (best_k != now) {
        planner_set_unit(cur, &us, u, best_k);
        cur->ev = best_ev;
        improved = TRUE;
      }
    }
    if (!improved)
      break;
  }
  /* Re-evaluate to refresh req (look-ahead) for the final assignment. */
  planner_eval(P, cur);
  planner_cand_free(trial);
  planner_unit_slots_clear(&us);
  return cur;
}

/* ---- units -------------------------------------------------------------------- */

/* Kernel names: unit = (name, phase). */
guint planner_units_name(const Planner *P, guint32 *slot_unit)
{
  const DvfsModel *m = P->m;
  g_autoptr(GHashTable) ids = g_hash_table_new_full(g_int64_hash,
                                                    g_int64_equal, g_free,
                                                    NULL);
  guint n = 0;
  for (guint32 s = 0; s < m->n_slots; s++) {
    slot_unit[s] = DVFS_NONE;
    if (m->slot_kind[s] != SIM_OP_KERNEL)
      continue;
    const SimOp *op = dvfs_model_op(m, s);
    gint64 key = ((gint64)op->name << 8) | op->phase;
    gpointer v = g_hash_table_lookup(ids, &key);
    if (v == NULL) {
      gint64 *k = g_new(gint64, 1);
      *k = key;
      v = GUINT_TO_POINTER(++n);
      g_hash_table_insert(ids, k, v);
    }
    slot_unit[s] = GPOINTER_TO_UINT(v) - 1;
  }
  return n;
}

/* Ops: unit = kernel slot, in slot order. */
guint planner_units_op(const Planner *P, guint32 *slot_unit)
{
  const DvfsModel *m = P->m;
  guint n = 0;
  for (guint32 s = 0; s < m->n_slots; s++)
    slot_unit[s] = m->slot_kind[s] == SIM_OP_KERNEL ? n++ : DVFS_NONE;
  return n;
}

/* Segments of consecutive kernels of a stream lasting >= seg_ns at
 * baseline (the last, shorter one joins its predecessor).  by_content:
 * segments with the same (name, phase) sequence share a unit; else units
 * are numbered in slot order. */
guint planner_units_segment(const Planner *P, guint32 *slot_unit,
                           gint64 seg_ns, gboolean by_content)
{
  const DvfsModel *m = P->m;
  for (guint32 s = 0; s < m->n_slots; s++)
    slot_unit[s] = DVFS_NONE;
  /* First pass: segment ids in slot order. */
  guint nseg = 0;
  for (guint32 st = 0; st < P->n_streams; st++) {
    const guint32 *ks = &P->ks[P->ks_off[st]];
    guint32 n = P->ks_off[st + 1] - P->ks_off[st];
    if (n == 0)
      continue;
    guint first_seg = nseg;
    gint64 seg_start = m->base_start[ks[0]];
    nseg++;
    guint32 last_cut = 0;
    for (guint32 i = 0; i < n; i++) {
      if (i > 0 && m->base_start[ks[i]] - seg_start >= seg_ns) {
        seg_start = m->base_start[ks[i]];
        nseg++;
        last_cut = i;
      }
      slot_unit[ks[i]] = nseg - 1;
    }
    /* Merge a short tail into the previous segment. */
    if (nseg - 1 > first_seg &&
        m->base_end[ks[n - 1]] - m->base_start[ks[last_cut]] < seg_ns) {
      for (guint32 i = last_cut; i < n; i++)
        slot_unit[ks[i]] = nseg - 2;
      nseg--;
    }
  }
  if (!by_content)
    return nseg;
  /* Content keys: hash of the (name, phase) sequence and its length. */
  g_autofree guint64 *h = g_new0(guint64, MAX(nseg, 1u));
  g_autofree guint32 *len = g_new0(guint32, MAX(nseg, 1u));
  for (guint32 s = 0; s < m->n_slots; s++) {
    guint32 u = slot_unit[s];
    if (u == DVFS_NONE)
      continue;
    const SimOp *op = dvfs_model_op(m, s);
    guint64 x = ((guint64)op->name << 8) ^ op->phase ^ ((guint64)len[u] << 40);
    h[u] = (h[u] * 31u) ^ sim_mix64(x);
    len[u]++;
  }
  g_autoptr(GHashTable) ids = g_hash_table_new_full(g_int64_hash,
                                                    g_int64_equal, g_free,
                                                    NULL);
  g_autofree guint32 *remap = g_new(guint32, MAX(nseg, 1u));
  guint n = 0;
  for (guint u = 0; u < nseg; u++) {
    gint64 key = (gint64)(h[u] ^ ((guint64)len[u] << 48));
    gpointer v = g_hash_table_lookup(ids, &key);
    if (v == NULL) {
      gint64 *k = g_new(gint64, 1);
      *k = key;
      v = GUINT_TO_POINTER(++n);
      g_hash_table_insert(ids, k, v);
    }
    remap[u] = GPOINTER_TO_UINT(v) - 1;
  }
  for (guint32 s = 0; s < m->n_slots; s++)
    if (slot_unit[s] != DVFS_NONE)
      slot_unit[s] = remap[slot_unit[s]];
  return n;
}

/* ---- result -------------------------------------------------------------------------- */

void dvfs_plan_result_free(DvfsPlanResult *r)
{
  if (r == NULL)
    return;
  sim_plan_free(r->plan);
  g_free(r->chosen);
  if (r->summary != NULL) {
    for (guint i = 0; i < r->summary->len; i++)
      g_free(g_array_index(r->summary, DvfsSummaryRow, i).name);
    g_array_unref(r->summary);
  }
  g_free(r);
}

static int cmp_rows(const void *a, const void *b)
{
  const DvfsSummaryRow *x = a, *y = b;
  if (x->base_energy_j != y->base_energy_j)
    return x->base_energy_j > y->base_energy_j ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Per-kernel-name rows from the model's last evaluation (ev_*). */
static GArray *build_summary(const Planner *P, const DvfsPrices *pr,
                             const guint16 *intent)
{
  const DvfsModel *m = P->m;
  GArray *rows = g_array_new(FALSE, TRUE, sizeof(DvfsSummaryRow));
  guint n_names = m->w->names->len;
  g_autofree guint32 *row_of = g_new(guint32, MAX(n_names, 1u));
  for (guint i = 0; i < n_names; i++)
    row_of[i] = DVFS_NONE;
  /* time per (row, pair) for the dominant pair */
  g_autoptr(GHashTable) pair_time = g_hash_table_new_full(
      g_int64_hash, g_int64_equal, g_free, g_free);
  for (guint32 s = 0; s < m->n_slots; s++) {
    if (m->slot_kind[s] != SIM_OP_KERNEL)
      continue;
    const SimOp *op = dvfs_model_op(m, s);
    if (row_of[op->name] == DVFS_NONE) {
      DvfsSummaryRow r = {0};
      r.name = g_strdup(sim_workload_name(m->w, op->name));
      r.klass = (SimOpClass)op->klass;
      r.phase = (SimPhase)op->phase;
      row_of[op->name] = rows->len;
      g_array_append_val(rows, r);
    }
    guint32 ri = row_of[op->name];
    DvfsSummaryRow *r = &g_array_index(rows, DvfsSummaryRow, ri);
    double mult = m->class_mult[m->slot_class[s]];
    double d = (double)(m->base_end[s] - m->base_start[s]) * 1e-9;
    double t = (double)(m->ev_end[s] - m->ev_start[s]) * 1e-9;
    r->count += m->class_mult[m->slot_class[s]];
    r->base_time_s += mult * d;
    r->base_energy_j += mult * m->base_power_w[s] * d;
    r->time_s += mult * t;
    r->energy_j += mult * m->ev_power_w[s] * t;
    gint64 key = ((gint64)ri << 16) | intent[s];
    double *acc = g_hash_table_lookup(pair_time, &key);
    if (acc == NULL) {
      gint64 *k = g_new(gint64, 1);
      *k = key;
      acc = g_new0(double, 1);
      g_hash_table_insert(pair_time, k, acc);
      r->n_pairs++;
    }
    *acc += mult * d;
  }
  /* Dominant pair per row (ties: lower candidate index). */
  g_autofree double *best_t = g_new(double, MAX(rows->len, 1u));
  g_autofree guint *best_k = g_new(guint, MAX(rows->len, 1u));
  for (guint i = 0; i < rows->len; i++) {
    best_t[i] = -1;
    best_k[i] = 0;
  }
  GHashTableIter it;
  gpointer kp, vp;
  g_hash_table_iter_init(&it, pair_time);
  while (g_hash_table_iter_next(&it, &kp, &vp)) {
    gint64 key = *(gint64 *)kp;
    guint ri = (guint)(key >> 16), k = (guint)(key & 0xffff);
    double t = *(double *)vp;
    if (t > best_t[ri] || (t == best_t[ri] && k < best_k[ri])) {
      best_t[ri] = t;
      best_k[ri] = k;
    }
  }
  for (guint i = 0; i < rows->len; i++) {
    DvfsSummaryRow *r = &g_array_index(rows, DvfsSummaryRow, i);
    r->sm_mhz = pr->pairs[best_k[i]].sm_mhz;
    r->mem_mhz = pr->pairs[best_k[i]].mem_mhz;
  }
  if (rows->len > 1)
    qsort(rows->data, rows->len, sizeof(DvfsSummaryRow), cmp_rows);
  return rows;
}

gboolean planner_engine_check(Planner *P, const SimMachine *sm,
                             const SimPlan *plan, const DvfsEval *ev,
                             gboolean *match, GError **error)
{
  SimMachine vm = *sm;
  vm.switch_latency_ns = P->latency_ns;
  g_autoptr(SimEngine) e = sim_engine_new(P->w, &vm, error);
  if (e == NULL)
    return FALSE;
  SimPlan *pl = (SimPlan *)plan;
  g_autoptr(SimResult) r = sim_engine_run(e, pl, P->iters, error);
  P->sims++;
  if (r == NULL)
    return FALSE;
  gboolean ok = TRUE;
  *match = TRUE;
  for (guint i = 0; i < r->n_iterations; i++) {
    if (r->iterations[i].time_ns > P->deadline_ns)
      ok = FALSE;
    if (r->iterations[i].time_ns != ev->time_ns[i])
      *match = FALSE;
  }
  return ok;
}

/* The clock pairs to consider: SM steps x memory clocks (restricted by the
 * policy), the top memory clock written as 0 (auto). */
static GArray *candidate_pairs(const DvfsPolicy *p, const GpuSpec *g)
{
  GArray *a = g_array_new(FALSE, FALSE, sizeof(SimClocks));
  g_autoptr(GArray) sms = g_array_new(FALSE, FALSE, sizeof(guint));
  if (p->n_sm_clocks > 0) {
    for (guint i = 0; i < p->n_sm_clocks; i++) {
      guint v = gpu_snap_sm(g, p->sm_clocks[i]);
      g_array_append_val(sms, v);
    }
  } else {
    for (guint i = gpu_sm_n_steps(g); i-- > 0;) {
      guint v = gpu_sm_clock_at(g, i);
      g_array_append_val(sms, v);
    }
  }
  guint top = (guint)lround(g->mem_mhz[g->n_mem_clocks - 1].v);
  g_autoptr(GArray) mems = g_array_new(FALSE, FALSE, sizeof(guint));
  if (p->n_mem_clocks > 0) {
    for (guint i = 0; i < p->n_mem_clocks; i++) {
      guint v = gpu_snap_mem(g, p->mem_clocks[i]);
      v = v == top ? 0 : v;
      g_array_append_val(mems, v);
    }
  } else {
    for (guint i = g->n_mem_clocks; i-- > 0;) {
      guint v = (guint)lround(g->mem_mhz[i].v);
      v = v == top ? 0 : v;
      g_array_append_val(mems, v);
    }
  }
  for (guint j = 0; j < mems->len; j++)
    for (guint i = 0; i < sms->len; i++) {
      SimClocks c = {(guint16)g_array_index(sms, guint, i),
                     (guint16)g_array_index(mems, guint, j)};
      g_array_append_val(a, c);
    }
  return a;
}

static void planner_clear(Planner *P)
{
  if (P->cands != NULL)
    g_ptr_array_unref(P->cands);
  dvfs_prices_free(P->pr);
  dvfs_model_free(P->m);
  cluster_machine_free(P->cm);
  g_free(P->ks_off);
  g_free(P->ks);
  dvfs_prices_free(P->alt_prices);
  cluster_machine_free(P->alt_cm);
  cluster_free(P->alt_cluster);
}

void planner_price_candidates(Planner *P, DvfsPlanResult *res)
{
  g_autoptr(GArray) pairs = candidate_pairs(P->pol, P->run->gpu);
  P->pr = dvfs_prices_new(P->m, NULL, (const SimClocks *)(void *)pairs->data,
                          pairs->len);
  res->n_candidates = P->pr->n_pairs;
}

void planner_final_eval(Planner *P, Cand *win)
{
  DvfsEvalOptions o = {P->iters, P->latency_ns};
  dvfs_model_eval(P->m, P->pr, win->req, &o, &win->ev);
  P->evals++;
}

/* The searched policies' strategy (iteration, pass, kernel): the
 * baseline is kept as a candidate, search(P) adds its own, and the best is
 * checked on the engine, falling back in order, auto clocks last; the
 * winner is evaluated for the summary.  NULL with an error. */
static Cand *planner_checked(Planner *P, DvfsPlanResult *res,
                             const DvfsPrices **prices,
                             Cand *(*search)(Planner *P), GError **error)
{
  planner_price_candidates(P, res);
  *prices = P->pr;
  /* The baseline is always a candidate. */
  Cand *base = planner_cand_new(P, "auto");
  planner_eval(P, base);
  planner_keep(P, base, NULL);
  planner_cand_free(base);
  planner_cand_free(search(P));
  /* Best first; check on the engine, falling back in order. */
  const SimMachine *sm = cluster_machine_sim(P->cm);
  Cand *win = NULL;
  for (int attempt = 0; attempt < 3 && P->cands->len > 0; attempt++) {
    Cand *b = planner_best(P);
    g_autoptr(SimPlan) plan = dvfs_model_build_plan(P->m, P->pr, b->req);
    gboolean match;
    gboolean ok = planner_engine_check(P, sm, plan, &b->ev, &match, error);
    if (error != NULL && *error != NULL)
      return NULL;
    if (ok) {
      win = planner_cand_copy(P, b, NULL);
      break;
    }
    g_ptr_array_remove_fast(P->cands, b);
  }
  if (win == NULL) {
    win = planner_cand_new(P, "auto");
    planner_eval(P, win);
  }
  /* Leave the winner's last iteration in the scratch for the summary. */
  planner_final_eval(P, win);
  return win;
}

DvfsPlanResult *planner_plan(const DvfsPolicy *p, const DvfsContext *x,
                             GError **error)
{
  const PlannerClass *pc = dvfs_policy_class(p->kind)->planner;
  g_return_val_if_fail(pc != NULL, NULL);
  guint flags = pc->flags;
  const Cluster *run = x->run;
  const SimWorkload *w = x->w;
  /* Plans are made (and checked) against the per-kernel cap, the
   * controller's steady state: the plan model reproduces the engine only
   * for a pricing that does not depend on the schedule.  The run of the
   * plan then uses the cluster's own boost mode (docs/dvfs.md). */
  g_autoptr(Cluster) steady = NULL;
  if (run->boost != CLUSTER_BOOST_PER_KERNEL) {
    steady = cluster_copy(run, error);
    if (steady == NULL)
      return NULL;
    steady->boost = CLUSTER_BOOST_PER_KERNEL;
    run = steady;
  }
  /* A folded workload is planned per class, on its representatives:
   * exact where members are priced like them. */
  if (!cluster_check_folded(run, w, error))
    return NULL;
  Planner P = {0};
  P.pol = p;
  P.run = run;
  P.w = w;
  P.cat = x->catalogue;
  P.seed = x->seed;
  P.s = p->slowdown;
  P.cands = g_ptr_array_new_with_free_func(planner_cand_free);
  DvfsPlanResult *res = NULL;

  P.cm = cluster_machine_new(run, w, P.cat, P.seed, error);
  if (P.cm == NULL)
    goto out;
  P.m = dvfs_model_new(w, P.cm, TRUE, error);
  if (P.m == NULL)
    goto out;
  P.sims = 1;
  build_streams(&P);
  gint64 run_latency = cluster_machine_sim(P.cm)->switch_latency_ns;
  P.latency_ns = p->switch_latency_ms >= 0
                     ? (gint64)llround(p->switch_latency_ms * 1e6)
                     : run_latency;
  if (flags & PLANNER_NO_SWITCH)
    P.latency_ns = 0; /* uniform plans never switch */
  if (flags & PLANNER_SEGMENTS) {
    gint64 seg = p->min_segment_ms >= 0
                     ? (gint64)llround(p->min_segment_ms * 1e6)
                     : 0;
    P.min_segment_ns = MAX(seg, P.latency_ns);
  }
  P.iters = P.latency_ns > 0 ? 2 : 1;
  gint64 T = P.m->base_time_ns;
  P.deadline_ns = T + (gint64)floor((double)T * P.s);
  P.eval_budget = (guint)CLAMP(5e7 / (MAX(P.m->n_slots, 1u) * P.iters),
                               64.0, 4000.0);

  res = g_new0(DvfsPlanResult, 1);
  res->power_limit_w = -1;
  res->latency_ms = (double)P.latency_ns * 1e-6;
  res->n_classes = P.m->n_classes;
  res->base_time_s = (double)T * 1e-9;
  res->base_energy_j = P.m->base_energy_j;

  const DvfsPrices *prices = NULL;
  Cand *win = pc->search != NULL
                  ? planner_checked(&P, res, &prices, pc->search, error)
                  : pc->strategy(&P, res, &prices, error);
  if (win == NULL) {
    dvfs_plan_result_free(res);
    res = NULL;
    goto out;
  }
  res->plan = dvfs_model_build_plan(P.m, prices, win->req);
  res->chosen = g_strdup(win->label);
  res->time_s = win->ev.mean_time_ns * 1e-9;
  res->energy_j = win->ev.mean_energy_j;
  res->switches = win->ev.switches / MAX(P.iters, 1u);
  res->n_units = win->n_units;
  res->summary = build_summary(&P, prices, win->intent);
  res->evaluations = P.evals;
  res->simulations = P.sims;
  planner_cand_free(win);
out:
  planner_clear(&P);
  return res;
}

DvfsPlanResult *dvfs_planner_run(const DvfsPolicy *p, const Cluster *run,
                                 const SimWorkload *w,
                                 const GpuCatalogue *catalogue, guint64 seed,
                                 GError **error)
{
  g_return_val_if_fail(p != NULL && run != NULL && w != NULL, NULL);
  if (!dvfs_policy_check(p, run, error))
    return NULL;
  if (!dvfs_policy_is_planned(p)) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "policy '%s' is not planned (use dvfs_plan)",
                dvfs_kind_name(p->kind));
    return NULL;
  }
  DvfsContext x = {run, w, catalogue, NULL, 1, NULL, NULL, seed};
  return dvfs_policy_class(p->kind)->plan(p, &x, error);
}
