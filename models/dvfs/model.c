/* models/dvfs/model.c -- the planners' model of one training iteration: a
 * folded dependency graph, its baseline schedule and an exact evaluator.
 *
 * Why
 * ---
 * A planner must try many plans.  Replaying each on the engine costs a full
 * simulation (seconds for a 1,024-GPU GPT-3 175B iteration); this model
 * evaluates a plan in milliseconds and gives the same answer to the
 * nanosecond, because it performs the same computation on fewer ops.
 *
 * Folding
 * -------
 * Ranks that run identical op sequences (kind, class, phase, stream, shape,
 * name, wait, reference duration; the communication peer may differ), on
 * GPUs with identical performance and power factors, form a class.  In a
 * Megatron workload every TP peer and DP replica of one pipeline stage is in
 * one class, so a 1,024-GPU TP8 PP8 DP16 iteration folds to 8 classes.  A
 * class is represented by its lowest rank; its ops are the model's *slots*.
 * Folding is exact when the class members also have identical baseline
 * timing (checked: an order-independent hash of every member's op times
 * must equal the representative's) and when plans give every member the
 * same clocks (the planners only build such plans).  Members' energies are
 * the representative's times the class size.
 *
 * A folded workload (SimWorkload.fold_rep, docs/architecture.md "Folded
 * replay") arrives with its classes made: only representatives hold ops
 * and the baseline replays only them.  Its members join their
 * representative's class; the representatives are classified as above
 * (two of them may still share a class), and classes are numbered by their
 * lowest rank, so the model's classes, slots and graph are those it builds
 * for the same workload unfolded.  A send to a folded rank matches the
 * receive on its representative (channels by (rep(src), rep(dst)), as the
 * engine matches them), and plans give representatives only
 * (sim_plan_unfold expands them).
 *
 * The graph
 * ---------
 * One node per kernel or marker slot, and one node per transfer: the slots
 * of every member of a collective (matched, as the engine does, by group and
 * the member's sequence number on that group) or of a send/recv pair
 * (matched FIFO per (src, dst)), merged with a union-find.  A slot depends
 * on the previous slot of its stream and on its `wait` slot.  Node times
 * follow the engine's max-plus rules:
 *
 *   ready(s)   = max(t0, end(pred(s)), end(wait(s)))
 *   kernel     start = ready, end = start + llround(ref_ns * time_scale)
 *   transfer   arrive(s) = ready(s) for each member s,
 *              start = max arrive(s), end = start + d   (d: baseline, fixed)
 *   host op    a transfer of one member that draws no GPU power
 *
 * with t0 the iteration start (iterations are separated by a barrier).
 * Transfer durations come from the baseline replay: the network model is a
 * pure function of the transfer (cluster.c: one collective at a time).
 *
 * Clocks and energy
 * -----------------
 * Every kernel requests its plan's pair; per (class, stream) the evaluator
 * keeps the engine's switch state: a request that differs from the last
 * target is a switch landing latency_ns later, kernels start at the clocks
 * then in force and a switch landing inside a kernel splits it
 * (sim_kernel_rest_ns), the first request of a run is free.  Energy per
 * class and iteration: P_idle * T + sum over kernels (float)(P - P_idle)
 * * d (per part of a split kernel) + sum over transfers (float)(P_comm -
 * P_idle) * d + (P_block - P_idle) * (start - arrive), the engine's
 * integral term for term (sim/engine.h), before the board limit's cut of
 * overlaps (SimResult.held_j): the per-kernel steady state the planners
 * plan against, which the engine's energy_j + held_j reproduces.  Plans
 * with early requests
 * (SimPlan.ahead) are not modelled: the planners here do not make them.
 *
 * Slack
 * -----
 * From the baseline, a reverse pass gives each node's latest finish LF
 * under deadline T_base; the longest path through slot s is M(s) = T_base -
 * (LF(s) - end(s)).  Any plan whose kernels each take at most d(s) *
 * T_base / M(s) keeps every path within T_base (for a path p of length M_p:
 * sum d(s) T/M(s) <= (T/M_p) sum d(s) <= T), which is how planners slow
 * ops off the critical path for free.
 *
 * Known limits
 * ------------
 * - Exact only while transfer durations do not depend on when they start
 *   or on each other (true of models/cluster.c today); dvfs_model_new
 *   checks the baseline against the engine and the planner re-checks its
 *   final plan on the engine.
 * - Costs are taken at iteration 0 (no stragglers).
 * - An unfolded model of a 1,024-GPU 175B iteration (with per-GPU
 *   variability every rank is its own class) needs ~100 bytes per op.
 */
#include "models/dvfs/model.h"
#include "models/dvfs/policy.h"
#include "models/dag.h"

#include <math.h>
#include <string.h>

/* ---- classes -------------------------------------------------------------- */

/* Structural hash of a rank: its program (timing fields) and its GPU's
 * variability factors. */
static guint64 rank_hash(const SimRank *rk, double perf, double pf)
{
  guint64 h = sim_rank_hash(rk, TRUE), bits;
  memcpy(&bits, &perf, sizeof bits);
  h = sim_mix64(h ^ bits);
  memcpy(&bits, &pf, sizeof bits);
  return sim_mix64(h ^ bits);
}

/* Assigns classes (and price groups) to ranks.  thash (may be NULL): per
 * rank timing hash of a previous replay; ranks must also agree on it.  On
 * a folded workload only representatives are classified (their members,
 * which hold no ops, join their class); classes are numbered by their
 * lowest rank either way, so a folded workload gets the classes, in the
 * order, of the same workload unfolded. */
static void build_classes(DvfsModel *m, ClusterMachine *cm, gboolean fold,
                          const guint64 *thash)
{
  const SimWorkload *w = m->w;
  m->n_ranks = w->n_ranks;
  m->rank_class = g_new(guint32, MAX(m->n_ranks, 1u));
  /* Folded: the class of each representative classified so far. */
  g_autofree guint32 *rep_class = NULL;
  if (w->fold_rep != NULL) {
    rep_class = g_new(guint32, MAX(m->n_ranks, 1u));
    for (guint r = 0; r < m->n_ranks; r++)
      rep_class[r] = DVFS_NONE;
  }
  GArray *reps = g_array_new(FALSE, FALSE, sizeof(guint32));
  /* hash -> GArray of class ids with that hash */
  g_autoptr(GHashTable) by_hash = g_hash_table_new_full(
      g_int64_hash, g_int64_equal, g_free, (GDestroyNotify)g_array_unref);
  for (guint rr = 0; rr < m->n_ranks; rr++) {
    /* Rank rr is classified as its representative r (itself unfolded). */
    guint r = rep_class != NULL ? w->fold_rep[rr] : rr;
    if (rep_class != NULL && rep_class[r] != DVFS_NONE) {
      m->rank_class[rr] = rep_class[r];
      continue;
    }
    double perf = cluster_machine_perf_factor(cm, r);
    double pf = cluster_machine_power_factor(cm, r);
    guint32 cls = DVFS_NONE;
    if (fold) {
      gint64 h = (gint64)(rank_hash(&w->ranks[r], perf, pf) ^
                          (thash != NULL ? sim_mix64(thash[r]) : 0));
      GArray *cands = g_hash_table_lookup(by_hash, &h);
      if (cands == NULL) {
        cands = g_array_new(FALSE, FALSE, sizeof(guint32));
        gint64 *k = g_new(gint64, 1);
        *k = h;
        g_hash_table_insert(by_hash, k, cands);
      }
      for (guint i = 0; i < cands->len && cls == DVFS_NONE; i++) {
        guint32 c = g_array_index(cands, guint32, i);
        guint32 rep = g_array_index(reps, guint32, c);
        if (cluster_machine_perf_factor(cm, rep) == perf &&
            cluster_machine_power_factor(cm, rep) == pf &&
            (thash == NULL || thash[rep] == thash[r]) &&
            sim_rank_same_program(&w->ranks[rep], &w->ranks[r], TRUE))
          cls = c;
      }
      if (cls == DVFS_NONE) {
        cls = reps->len;
        g_array_append_val(cands, cls);
      }
    } else {
      cls = reps->len;
    }
    if (cls == reps->len) {
      guint32 q = r;
      g_array_append_val(reps, q);
    }
    if (rep_class != NULL)
      rep_class[r] = cls;
    m->rank_class[rr] = cls;
  }
  m->n_classes = reps->len;
  m->class_rep = (guint32 *)(void *)g_array_free(reps, FALSE);
  m->class_mult = g_new0(guint32, MAX(m->n_classes, 1u));
  for (guint r = 0; r < m->n_ranks; r++)
    m->class_mult[m->rank_class[r]]++;

  /* Price groups: classes whose GPUs have the same factors. */
  m->class_group = g_new(guint32, MAX(m->n_classes, 1u));
  GArray *gg = g_array_new(FALSE, FALSE, sizeof(guint32));
  for (guint c = 0; c < m->n_classes; c++) {
    guint32 rep = m->class_rep[c];
    double perf = cluster_machine_perf_factor(cm, rep);
    double pf = cluster_machine_power_factor(cm, rep);
    guint32 g = DVFS_NONE;
    /* Linear search is fine: without variability there is one group; with
     * it, the first GPUs' factors differ and the list stays short only
     * when folding succeeded anyway.  Bounded by a map for large counts. */
    if (gg->len < 64) {
      for (guint i = 0; i < gg->len && g == DVFS_NONE; i++) {
        guint32 o = g_array_index(gg, guint32, i);
        if (cluster_machine_perf_factor(cm, o) == perf &&
            cluster_machine_power_factor(cm, o) == pf)
          g = i;
      }
    }
    if (g == DVFS_NONE) {
      g = gg->len;
      g_array_append_val(gg, rep);
    }
    m->class_group[c] = g;
  }
  m->n_groups = gg->len;
  m->group_gpu = (guint32 *)(void *)g_array_free(gg, FALSE);

  const SimMachine *sm = m->sm;
  m->class_idle_w = g_new(double, MAX(m->n_classes, 1u));
  m->class_blocked_w = g_new(double, MAX(m->n_classes, 1u));
  m->class_comm_w = g_new(double, MAX(m->n_classes, 1u));
  m->class_wait_w = g_new0(double, MAX(m->n_classes, 1u));
  for (guint c = 0; c < m->n_classes; c++) {
    guint32 rep = m->class_rep[c];
    m->class_idle_w[c] = sm->idle_power_w[rep];
    m->class_blocked_w[c] = sm->blocked_power_w[rep];
    m->class_comm_w[c] = sm->comm_power_w[rep];
  }
}

/* ---- slots ------------------------------------------------------------------ */

static void build_slots(DvfsModel *m)
{
  const SimWorkload *w = m->w;
  m->class_off = g_new(guint32, m->n_classes + 1);
  m->class_state_off = g_new(guint32, m->n_classes + 1);
  guint64 n = 0, ns = 0;
  for (guint c = 0; c < m->n_classes; c++) {
    const SimRank *rk = &w->ranks[m->class_rep[c]];
    m->class_off[c] = (guint32)n;
    m->class_state_off[c] = (guint32)ns;
    n += rk->n_ops;
    ns += rk->n_ops > 0 ? rk->n_streams : 0;
  }
  g_assert(n < DVFS_NONE);
  m->class_off[m->n_classes] = (guint32)n;
  m->class_state_off[m->n_classes] = (guint32)ns;
  m->n_slots = (guint32)n;
  m->n_states = (guint32)ns;
  gsize N = MAX(m->n_slots, 1u);
  m->slot_class = g_new(guint32, N);
  m->slot_pred = g_new(guint32, N);
  m->slot_wait = g_new(guint32, N);
  m->slot_node = g_new(guint32, N);
  m->slot_state = g_new(guint32, N);
  m->slot_shape = g_new(guint32, N);
  m->slot_ref_ns = g_new(gint64, N);
  m->slot_kind = g_new(guint8, N);
  for (guint c = 0; c < m->n_classes; c++) {
    const SimRank *rk = &w->ranks[m->class_rep[c]];
    guint32 off = m->class_off[c];
    for (guint32 s = 0; s < rk->n_streams && rk->n_ops > 0; s++) {
      for (guint32 i = rk->stream_off[s]; i < rk->stream_off[s + 1]; i++) {
        const SimOp *op = &rk->ops[i];
        guint32 slot = off + i;
        m->slot_class[slot] = c;
        m->slot_pred[slot] = i > rk->stream_off[s] ? slot - 1 : DVFS_NONE;
        m->slot_wait[slot] = op->wait != SIM_NO_WAIT ? off + op->wait
                                                      : DVFS_NONE;
        m->slot_state[slot] = m->class_state_off[c] + s;
        m->slot_shape[slot] = op->shape;
        m->slot_ref_ns[slot] = op->ref_ns;
        m->slot_kind[slot] = op->kind;
      }
    }
  }
}

/* ---- transfers: union-find over communication slots --------------------------- */

static guint32 uf_find(guint32 *parent, guint32 x)
{
  while (parent[x] != x) {
    parent[x] = parent[parent[x]];
    x = parent[x];
  }
  return x;
}

static void uf_union(guint32 *parent, guint32 a, guint32 b)
{
  a = uf_find(parent, a);
  b = uf_find(parent, b);
  if (a == b)
    return;
  if (a < b)
    parent[b] = a;
  else
    parent[a] = b;
}

/* The first slot seen for sequence number n in *arr (grown on demand,
 * DVFS_NONE = none yet): unions slot with it, or records it. */
static void match_seq(GArray *arr, guint32 n, guint32 slot, guint32 *parent)
{
  if (n >= arr->len) {
    guint32 old = arr->len;
    g_array_set_size(arr, n + 1);
    for (guint32 i = old; i <= n; i++)
      g_array_index(arr, guint32, i) = DVFS_NONE;
  }
  guint32 *first = &g_array_index(arr, guint32, n);
  if (*first == DVFS_NONE)
    *first = slot;
  else
    uf_union(parent, *first, slot);
}

static guint hash_u64(gconstpointer p)
{
  return (guint)sim_mix64(*(const guint64 *)p);
}

static void free_array(gpointer a)
{
  if (a != NULL)
    g_array_unref(a);
}

/* Builds nodes: merges the slots of every transfer, numbers nodes in slot
 * order, and fills the member and predecessor CSR arrays.  Transfers are
 * matched as the engine matches them: the n-th collective of each member
 * on a group, the n-th send from a to b with the n-th receive on b from
 * a. */
static void build_nodes(DvfsModel *m)
{
  const SimWorkload *w = m->w;
  gsize N = MAX(m->n_slots, 1u);
  g_autofree guint32 *parent = g_new(guint32, N);
  for (guint32 s = 0; s < m->n_slots; s++)
    parent[s] = s;
  guint n_groups = sim_workload_n_groups(w);
  /* per group: first slot of each sequence number */
  g_autoptr(GPtrArray) coll = g_ptr_array_new_full(n_groups, free_array);
  g_ptr_array_set_size(coll, (gint)n_groups);
  /* (src, dst) -> first slot of each sequence number */
  g_autoptr(GHashTable) p2p = g_hash_table_new_full(hash_u64, g_int64_equal,
                                                    g_free, free_array);
  /* per-rank counters, reset through the touched lists */
  g_autofree guint32 *coll_cnt = g_new0(guint32, MAX(n_groups, 1u));
  g_autofree guint32 *send_cnt = g_new0(guint32, MAX(w->n_ranks, 1u));
  g_autofree guint32 *recv_cnt = g_new0(guint32, MAX(w->n_ranks, 1u));
  g_autoptr(GArray) touched_g = g_array_new(FALSE, FALSE, sizeof(guint32));
  g_autoptr(GArray) touched_r = g_array_new(FALSE, FALSE, sizeof(guint32));
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    guint32 off = m->class_off[m->rank_class[r]];
    for (guint32 i = 0; i < rk->n_ops; i++) {
      const SimOp *op = &rk->ops[i];
      guint32 peer = sim_op_peer(rk, op);
      if (op->kind == SIM_OP_COLLECTIVE) {
        if (peer >= n_groups)
          continue; /* validated by the engine; never here */
        if (coll_cnt[peer] == 0)
          g_array_append_val(touched_g, peer);
        guint32 n = coll_cnt[peer]++;
        GArray *a = g_ptr_array_index(coll, peer);
        if (a == NULL) {
          a = g_array_new(FALSE, FALSE, sizeof(guint32));
          g_ptr_array_index(coll, peer) = a;
        }
        match_seq(a, n, off + i, parent);
      } else if (op->kind == SIM_OP_SEND || op->kind == SIM_OP_RECV) {
        if (peer >= w->n_ranks)
          continue;
        /* Folded: channels join representatives, as the engine's do. */
        guint32 q = w->fold_rep != NULL ? w->fold_rep[peer] : peer;
        gboolean send = op->kind == SIM_OP_SEND;
        guint32 *cnt = send ? &send_cnt[q] : &recv_cnt[q];
        if (send_cnt[q] == 0 && recv_cnt[q] == 0)
          g_array_append_val(touched_r, q);
        guint32 n = (*cnt)++;
        guint64 key = send ? (guint64)r * w->n_ranks + q
                           : (guint64)q * w->n_ranks + r;
        GArray *a = g_hash_table_lookup(p2p, &key);
        if (a == NULL) {
          guint64 *k = g_new(guint64, 1);
          *k = key;
          a = g_array_new(FALSE, FALSE, sizeof(guint32));
          g_hash_table_insert(p2p, k, a);
        }
        match_seq(a, n, off + i, parent);
      }
    }
    for (guint i = 0; i < touched_g->len; i++)
      coll_cnt[g_array_index(touched_g, guint32, i)] = 0;
    for (guint i = 0; i < touched_r->len; i++) {
      guint32 q = g_array_index(touched_r, guint32, i);
      send_cnt[q] = recv_cnt[q] = 0;
    }
    g_array_set_size(touched_g, 0);
    g_array_set_size(touched_r, 0);
  }
  /* Node ids in slot order: kernels/markers their own, transfers by root. */
  g_autofree guint32 *root_node = g_new(guint32, N);
  for (guint32 s = 0; s < m->n_slots; s++)
    root_node[s] = DVFS_NONE;
  guint32 nn = 0;
  for (guint32 s = 0; s < m->n_slots; s++) {
    guint8 k = m->slot_kind[s];
    if (k == SIM_OP_KERNEL || k == SIM_OP_MARKER) {
      m->slot_node[s] = nn++;
      continue;
    }
    guint32 root = uf_find(parent, s);
    if (root_node[root] == DVFS_NONE)
      root_node[root] = nn++;
    m->slot_node[s] = root_node[root];
  }
  m->n_nodes = nn;
  m->node_off = g_new0(guint32, nn + 1);
  for (guint32 s = 0; s < m->n_slots; s++)
    m->node_off[m->slot_node[s] + 1]++;
  for (guint32 i = 0; i < nn; i++)
    m->node_off[i + 1] += m->node_off[i];
  m->node_slots = g_new(guint32, N);
  g_autofree guint32 *fill = g_memdup2(m->node_off, sizeof(guint32) * (nn + 1));
  for (guint32 s = 0; s < m->n_slots; s++)
    m->node_slots[fill[m->slot_node[s]]++] = s;

  /* Predecessors: the nodes of each member's stream predecessor and wait. */
  m->node_pred_off = g_new0(guint32, nn + 1);
  for (guint32 n = 0; n < nn; n++) {
    guint32 cnt = 0;
    for (guint32 j = m->node_off[n]; j < m->node_off[n + 1]; j++) {
      guint32 s = m->node_slots[j];
      if (m->slot_pred[s] != DVFS_NONE && m->slot_node[m->slot_pred[s]] != n)
        cnt++;
      if (m->slot_wait[s] != DVFS_NONE && m->slot_node[m->slot_wait[s]] != n)
        cnt++;
    }
    m->node_pred_off[n + 1] = m->node_pred_off[n] + cnt;
  }
  m->node_preds = g_new(guint32, MAX(m->node_pred_off[nn], 1u));
  for (guint32 n = 0; n < nn; n++) {
    guint32 k = m->node_pred_off[n];
    for (guint32 j = m->node_off[n]; j < m->node_off[n + 1]; j++) {
      guint32 s = m->node_slots[j];
      if (m->slot_pred[s] != DVFS_NONE && m->slot_node[m->slot_pred[s]] != n)
        m->node_preds[k++] = m->slot_node[m->slot_pred[s]];
      if (m->slot_wait[s] != DVFS_NONE && m->slot_node[m->slot_wait[s]] != n)
        m->node_preds[k++] = m->slot_node[m->slot_wait[s]];
    }
  }
  m->node_dur_ns = g_new0(gint64, MAX(nn, 1u));
}

/* The topological order of the node graph (models/dag.h: Kahn with a FIFO
 * queue, sources in node-id order, successors in node-id order: the
 * edges are listed by target).  FALSE when the graph has a cycle. */
static gboolean build_topo(DvfsModel *m)
{
  guint32 nn = m->n_nodes;
  guint32 ne = m->node_pred_off[nn];
  g_autofree guint32 *edges = g_new(guint32, 2 * (gsize)MAX(ne, 1u));
  for (guint32 n = 0; n < nn; n++)
    for (guint32 e = m->node_pred_off[n]; e < m->node_pred_off[n + 1]; e++) {
      edges[2 * e] = m->node_preds[e];
      edges[2 * e + 1] = n;
    }
  g_autoptr(Dag) g = dag_new(nn, edges, ne, NULL);
  g_assert(g != NULL); /* no self-loops: a node's own slots are not edges */
  m->topo = g_steal_pointer(&g->topo);
  return dag_acyclic(g);
}

/* ---- prices ------------------------------------------------------------------ */

guint dvfs_prices_find(const DvfsPrices *p, SimClocks c)
{
  for (guint k = 0; k < p->n_pairs; k++)
    if (p->pairs[k].sm_mhz == c.sm_mhz && p->pairs[k].mem_mhz == c.mem_mhz)
      return k;
  return DVFS_NONE;
}

DvfsPrices *dvfs_prices_new(const DvfsModel *m, const SimMachine *sm,
                            const SimClocks *pairs, guint n)
{
  if (sm == NULL)
    sm = m->sm;
  DvfsPrices *p = g_new0(DvfsPrices, 1);
  p->pairs = g_new(SimClocks, n + 1);
  p->pairs[0] = (SimClocks){0, 0};
  p->n_pairs = 1;
  for (guint i = 0; i < n; i++) {
    if (dvfs_prices_find(p, pairs[i]) == DVFS_NONE)
      p->pairs[p->n_pairs++] = pairs[i];
  }
  g_assert(p->n_pairs <= G_MAXUINT16);
  p->n_shapes = m->w->shapes->len;
  p->n_groups = m->n_groups;
  gsize nrows = (gsize)p->n_groups * MAX(p->n_shapes, 1u);
  p->rows = g_new0(DvfsCost *, nrows);
  for (guint32 s = 0; s < m->n_slots; s++) {
    if (m->slot_kind[s] != SIM_OP_KERNEL)
      continue;
    guint32 g = m->class_group[m->slot_class[s]];
    gsize row = (gsize)g * p->n_shapes + m->slot_shape[s];
    if (p->rows[row] != NULL)
      continue;
    DvfsCost *r = g_new(DvfsCost, p->n_pairs);
    for (guint k = 0; k < p->n_pairs; k++) {
      SimCost c;
      sm->kernel_cost(sm->ctx, m->group_gpu[g], m->slot_shape[s], p->pairs[k],
                      0, &c);
      r[k].time_scale = c.time_scale;
      r[k].power_w = c.power_w;
      r[k].sm_mhz = c.sm_mhz;
      r[k].mem_mhz = c.mem_mhz;
    }
    p->rows[row] = r;
  }
  return p;
}

void dvfs_prices_free(DvfsPrices *p)
{
  if (p == NULL)
    return;
  gsize nrows = (gsize)p->n_groups * MAX(p->n_shapes, 1u);
  for (gsize i = 0; i < nrows; i++)
    g_free(p->rows[i]);
  g_free(p->rows);
  g_free(p->pairs);
  g_free(p);
}

/* ---- evaluator ------------------------------------------------------------------ */

/* The engine's clocks_at(): returns the candidate in force for a kernel
 * requesting `req` at time t, counting switches. */
static inline guint16 clock_at(DvfsClockState *st, guint16 req, gint64 t,
                               gint64 latency_ns, guint64 *switches)
{
  if (!st->init) {
    st->cur = st->target = req;
    st->land_ns = 0;
    st->init = TRUE;
    return req;
  }
  if (st->land_ns <= t)
    st->cur = st->target;
  if (req != st->target) {
    (*switches)++;
    st->target = req;
    st->land_ns = t + latency_ns;
    if (latency_ns == 0)
      st->cur = req;
  }
  return st->cur;
}

/* The program.  dvfs_model_eval walks the nodes in topological order and
 * reads, per node, a dozen per-slot arrays at scattered indices (slot,
 * node, class, shape, reference time, predecessor and wait slots, their
 * end times): a profile of the kernel planner on GPT-3 175B, 8,192 GPUs
 * folded, 64 microbatches, at the A100's 10 ms latency, put 79% of the
 * planning in the evaluator, most of it waiting on those loads.  So the
 * model compiles the walk once into one 32-byte step per node, in the
 * walk's order, with what the walk needs inline: a kernel's or marker's
 * slot, clock state, price row, class and reference time, and the
 * topological positions of the nodes it waits for, whose end times live
 * in one array by position (ev_node_end; its last entry holds the
 * iteration start, for "no predecessor").  A transfer's step points at
 * its members, which carry the same for each member slot.  The walk
 * computes what it did before, in the same order (sums included, so
 * results are bit-identical), and writes the per-slot times of the last
 * iteration only. */
struct DvfsEvStep {
  guint32 pred, wait;  /* kernel, marker: topological positions (n_nodes:
                          none); transfer: its members [pred, wait) */
  guint32 slot;        /* kernel, marker: the slot; transfer: DVFS_NONE */
  guint32 state;       /* kernel: its (class, stream) clock state */
  guint32 row;         /* kernel: price row (group * n_shapes + shape);
                          marker: DVFS_NONE */
  guint32 cls;         /* kernel: class */
  union {
    double ref_ns;     /* kernel: reference duration */
    gint64 dur_ns;     /* transfer: duration */
  } u;
};
G_STATIC_ASSERT(sizeof(struct DvfsEvStep) == 32);

struct DvfsEvMember {
  guint32 pred, wait;  /* topological positions (n_nodes: none) */
  guint32 slot, cls;
  guint32 host;        /* a host op: the GPU idles */
};

/* Compiles the walk (needs topo, slot_node and node_dur_ns). */
static void build_program(DvfsModel *m)
{
  guint32 nn = m->n_nodes;
  g_autofree guint32 *pos = g_new(guint32, MAX(nn, 1u));
  for (guint32 k = 0; k < nn; k++)
    pos[m->topo[k]] = k;
  guint32 n_members = 0;
  for (guint32 n = 0; n < nn; n++) {
    guint8 kind = m->slot_kind[m->node_slots[m->node_off[n]]];
    if (kind != SIM_OP_KERNEL && kind != SIM_OP_MARKER)
      n_members += m->node_off[n + 1] - m->node_off[n];
  }
  m->ev_steps = g_new0(struct DvfsEvStep, MAX(nn, 1u));
  m->ev_members = g_new0(struct DvfsEvMember, MAX(n_members, 1u));
  m->ev_node_end = g_new0(gint64, nn + 1);
  m->ev_member_arrive = g_new0(gint64, MAX(n_members, 1u));
  guint n_shapes = m->w->shapes->len;
#define POS(x) ((x) != DVFS_NONE ? pos[m->slot_node[x]] : nn)
  guint32 mi = 0;
  for (guint32 k = 0; k < nn; k++) {
    guint32 n = m->topo[k];
    struct DvfsEvStep *st = &m->ev_steps[k];
    guint32 s0 = m->node_slots[m->node_off[n]];
    guint8 kind = m->slot_kind[s0];
    if (kind == SIM_OP_KERNEL || kind == SIM_OP_MARKER) {
      guint32 c = m->slot_class[s0];
      st->pred = POS(m->slot_pred[s0]);
      st->wait = POS(m->slot_wait[s0]);
      st->slot = s0;
      st->state = m->slot_state[s0];
      st->row = kind == SIM_OP_KERNEL
                  ? m->class_group[c] * n_shapes + m->slot_shape[s0]
                  : DVFS_NONE;
      st->cls = c;
      st->u.ref_ns = (double)m->slot_ref_ns[s0];
      continue;
    }
    st->slot = DVFS_NONE;
    st->pred = mi;
    for (guint32 j = m->node_off[n]; j < m->node_off[n + 1]; j++) {
      guint32 s = m->node_slots[j];
      struct DvfsEvMember *mb = &m->ev_members[mi++];
      mb->pred = POS(m->slot_pred[s]);
      mb->wait = POS(m->slot_wait[s]);
      mb->slot = s;
      mb->cls = m->slot_class[s];
      mb->host = m->slot_kind[s] == SIM_OP_HOST;
    }
    st->wait = mi;
    st->u.dur_ns = m->node_dur_ns[n];
  }
#undef POS
}

void dvfs_model_eval(DvfsModel *m, const DvfsPrices *p, const guint16 *request,
                     const DvfsEvalOptions *o, DvfsEval *out)
{
  guint iters = CLAMP(o->n_iterations, 1u, (guint)DVFS_EVAL_MAX_ITERATIONS);
  memset(out, 0, sizeof *out);
  for (guint32 i = 0; i < m->n_states; i++)
    m->ev_clock[i].init = FALSE;
  g_autofree double *inc_j = g_new(double, MAX(m->n_classes, 1u));
  g_autofree guint64 *sw = g_new(guint64, MAX(m->n_classes, 1u));
  gint64 *arrive = m->ev_arrive, *start = m->ev_start, *end = m->ev_end;
  gint64 *ne = m->ev_node_end, *marr = m->ev_member_arrive;
  const struct DvfsEvStep *prog = m->ev_steps;
  const struct DvfsEvMember *mem = m->ev_members;
  DvfsCost *const *rows = p->rows;
  const double *idle_w = m->class_idle_w;
  guint32 nn = m->n_nodes;
  gint64 latency = o->latency_ns;
  gint64 t0 = 0;
  for (guint it = 0; it < iters; it++) {
    gboolean last = it + 1 == iters;
    memset(inc_j, 0, sizeof(double) * MAX(m->n_classes, 1u));
    memset(sw, 0, sizeof(guint64) * MAX(m->n_classes, 1u));
    /* Every end this iteration is >= t0, so "no predecessor" reads t0. */
    ne[nn] = t0;
    gint64 t_end = t0;
    for (guint32 k = 0; k < nn; k++) {
      const struct DvfsEvStep *st = &prog[k];
      if (st->slot != DVFS_NONE) {
        gint64 a = MAX(ne[st->pred], ne[st->wait]);
        gint64 d = 0;
        guint32 s0 = st->slot;
        if (st->row != DVFS_NONE) {
          guint32 c = st->cls;
          guint16 req = request != NULL ? request[s0] : 0;
          DvfsClockState *cs = &m->ev_clock[st->state];
          guint16 in = clock_at(cs, req, a, latency, &sw[c]);
          const DvfsCost *row = rows[st->row];
          const DvfsCost *cost = &row[in];
          d = sim_round_ns(st->u.ref_ns * cost->time_scale);
          float inc = (float)(cost->power_w - idle_w[c]);
          float pw;
          if (G_UNLIKELY(cs->cur != cs->target && cs->land_ns < a + d)) {
            /* The switch in flight lands inside: the engine's split. */
            gint64 d1 = cs->land_ns - a;
            cs->cur = cs->target;
            const DvfsCost *c2 = &row[cs->cur];
            gint64 d2 = sim_kernel_rest_ns(d, d1, st->u.ref_ns *
                                                      c2->time_scale);
            float inc2 = (float)(c2->power_w - idle_w[c]);
            inc_j[c] += (double)inc * (double)d1 * 1e-9 +
                        (double)inc2 * (double)d2 * 1e-9;
            d = d1 + d2;
            pw = d > 0 ? (float)((cost->power_w * (double)d1 +
                                  c2->power_w * (double)d2) / (double)d)
                       : (float)c2->power_w;
          } else {
            inc_j[c] += (double)inc * (double)d * 1e-9;
            pw = (float)cost->power_w;
          }
          if (last)
            m->ev_power_w[s0] = pw;
        }
        ne[k] = a + d;
        if (last) {
          arrive[s0] = start[s0] = a;
          end[s0] = a + d;
        }
        t_end = MAX(t_end, a + d);
        continue;
      }
      /* A transfer: every member arrives, the last arrival starts it. */
      gint64 sa = t0;
      for (guint32 j = st->pred; j < st->wait; j++) {
        gint64 a = MAX(ne[mem[j].pred], ne[mem[j].wait]);
        marr[j] = a;
        sa = MAX(sa, a);
      }
      gint64 en = sa + st->u.dur_ns;
      for (guint32 j = st->pred; j < st->wait; j++) {
        const struct DvfsEvMember *mb = &mem[j];
        guint32 c = mb->cls;
        if (last) {
          arrive[mb->slot] = marr[j];
          start[mb->slot] = sa;
          end[mb->slot] = en;
        }
        if (mb->host)
          continue; /* CPU time: the GPU idles, no increment */
        float inc = (float)(m->class_comm_w[c] - idle_w[c]);
        inc_j[c] += (double)inc * (double)(en - sa) * 1e-9;
        inc_j[c] += (m->class_blocked_w[c] - idle_w[c]) *
                    (double)(sa - marr[j]) * 1e-9;
      }
      ne[k] = en;
      t_end = MAX(t_end, en);
    }
    gint64 T = t_end - t0;
    double e = 0.0;
    guint64 switches = 0;
    for (guint c = 0; c < m->n_classes; c++) {
      e += (double)m->class_mult[c] *
           (m->class_idle_w[c] * (double)T * 1e-9 + inc_j[c]);
      switches += sw[c] * m->class_mult[c];
    }
    out->time_ns[it] = T;
    out->energy_j[it] = e;
    out->max_time_ns = MAX(out->max_time_ns, T);
    out->mean_energy_j += e / iters;
    out->mean_time_ns += (double)T / iters;
    out->switches += switches;
    t0 = t_end;
  }
}

/* ---- baseline ---------------------------------------------------------------------- */

typedef struct {
  DvfsModel *m;
  guint64 *hash;    /* per rank */
} Observe;

static void observe(gpointer data, const SimOpRecord *rec)
{
  Observe *ob = data;
  DvfsModel *m = ob->m;
  ob->hash[rec->gpu] += sim_mix64(((guint64)rec->op << 20) ^
                              sim_mix64((guint64)rec->arrive_ns) ^
                              sim_mix64((guint64)rec->start_ns * 3u) ^
                              sim_mix64((guint64)rec->end_ns * 5u));
  guint32 c = m->rank_class[rec->gpu];
  if (m->class_rep[c] != rec->gpu)
    return;
  guint32 s = m->class_off[c] + rec->op;
  m->base_start[s] = rec->start_ns;
  m->base_end[s] = rec->end_ns;
  m->base_power_w[s] = (float)rec->power_w;
}

/* Reverse pass: latest finishes under deadline T, then M per slot. */
static void build_slack(DvfsModel *m)
{
  guint32 nn = m->n_nodes;
  g_autofree double *lf = g_new(double, MAX(nn, 1u));
  g_autofree double *dur = g_new(double, MAX(nn, 1u));
  g_autofree double *ef = g_new(double, MAX(nn, 1u));
  double T = (double)m->base_time_ns;
  for (guint32 n = 0; n < nn; n++) {
    guint32 s0 = m->node_slots[m->node_off[n]];
    lf[n] = T;
    ef[n] = (double)m->base_end[s0];
    dur[n] = (double)(m->base_end[s0] - m->base_start[s0]);
  }
  for (guint32 k = nn; k-- > 0;) {
    guint32 n = m->topo[k];
    double ls = lf[n] - dur[n];
    for (guint32 e = m->node_pred_off[n]; e < m->node_pred_off[n + 1]; e++) {
      guint32 p = m->node_preds[e];
      if (ls < lf[p])
        lf[p] = ls;
    }
  }
  m->slot_longest_ns = g_new(double, MAX(m->n_slots, 1u));
  for (guint32 s = 0; s < m->n_slots; s++) {
    guint32 n = m->slot_node[s];
    double tf = MAX(lf[n] - ef[n], 0.0);
    m->slot_longest_ns[s] = MAX(T - tf, 1.0);
  }
}

void dvfs_model_free(DvfsModel *m)
{
  if (m == NULL)
    return;
  g_free(m->rank_class);
  g_free(m->class_rep);
  g_free(m->class_mult);
  g_free(m->class_off);
  g_free(m->class_state_off);
  g_free(m->class_group);
  g_free(m->group_gpu);
  g_free(m->class_idle_w);
  g_free(m->class_blocked_w);
  g_free(m->class_comm_w);
  g_free(m->class_wait_w);
  g_free(m->slot_class);
  g_free(m->slot_pred);
  g_free(m->slot_wait);
  g_free(m->slot_node);
  g_free(m->slot_state);
  g_free(m->slot_shape);
  g_free(m->slot_ref_ns);
  g_free(m->slot_kind);
  g_free(m->node_off);
  g_free(m->node_slots);
  g_free(m->node_pred_off);
  g_free(m->node_preds);
  g_free(m->topo);
  g_free(m->node_dur_ns);
  g_free(m->base_start);
  g_free(m->base_end);
  g_free(m->base_power_w);
  g_free(m->slot_longest_ns);
  g_free(m->ev_arrive);
  g_free(m->ev_start);
  g_free(m->ev_end);
  g_free(m->ev_power_w);
  g_free(m->ev_clock);
  g_free(m->ev_steps);
  g_free(m->ev_members);
  g_free(m->ev_node_end);
  g_free(m->ev_member_arrive);
  g_free(m);
}

/* One attempt.  thash: timing hashes of an earlier attempt (NULL the
 * first time).  On failure, *retry says whether another attempt may work
 * and *hash_out (when not NULL) receives this replay's timing hashes. */
static DvfsModel *model_try(const SimWorkload *w, ClusterMachine *cm,
                            gboolean fold, const guint64 *thash,
                            gboolean *retry, guint64 **hash_out,
                            GError **error)
{
  *retry = FALSE;
  g_autoptr(DvfsModel) m = g_new0(DvfsModel, 1);
  m->w = w;
  m->sm = cluster_machine_sim(cm);
  m->folded = fold;
  build_classes(m, cm, fold, thash);
  build_slots(m);
  gsize N = MAX(m->n_slots, 1u);
  m->base_start = g_new0(gint64, N);
  m->base_end = g_new0(gint64, N);
  m->base_power_w = g_new0(float, N);

  /* The baseline replay, observed: representatives' op times, and every
   * rank's timing hash to check the folding. */
  g_autoptr(SimEngine) e = sim_engine_new(w, m->sm, error);
  if (e == NULL)
    return NULL;
  g_autofree guint64 *hash = g_new0(guint64, MAX(w->n_ranks, 1u));
  Observe ob = {m, hash};
  sim_engine_set_observer(e, observe, &ob);
  g_autoptr(SimPlan) auto_plan = sim_plan_new_uniform(w->n_ranks,
                                                      (SimClocks){0, 0});
  g_autoptr(SimResult) base = sim_engine_run(e, auto_plan, 1, error);
  if (base == NULL)
    return NULL;
  m->engine_ops = base->ops;
  for (guint r = 0; r < w->n_ranks; r++)
    if ((w->fold_rep == NULL || w->fold_rep[r] == r) &&
        hash[r] != hash[m->class_rep[m->rank_class[r]]]) {
      *retry = fold;
      if (hash_out != NULL)
        *hash_out = g_steal_pointer(&hash);
      g_set_error(error, DVFS_ERROR, DVFS_ERROR_INTERNAL,
                  "rank %u and rank %u run identical ops but with different "
                  "timing", r, m->class_rep[m->rank_class[r]]);
      return NULL;
    }

  build_nodes(m);
  if (!build_topo(m)) {
    *retry = fold;
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INTERNAL,
                "the workload's dependency graph has a cycle%s",
                fold ? " (folded)" : "");
    return NULL;
  }
  m->ev_arrive = g_new0(gint64, N);
  m->ev_start = g_new0(gint64, N);
  m->ev_end = g_new0(gint64, N);
  m->ev_power_w = g_new0(float, N);
  m->ev_clock = g_new0(DvfsClockState, MAX(m->n_states, 1u));
  for (guint32 n = 0; n < m->n_nodes; n++) {
    guint32 s0 = m->node_slots[m->node_off[n]];
    if (m->slot_kind[s0] != SIM_OP_KERNEL && m->slot_kind[s0] != SIM_OP_MARKER)
      m->node_dur_ns[n] = m->base_end[s0] - m->base_start[s0];
  }
  build_program(m);
  m->base_time_ns = base->time_ns;
  /* The plan model prices the per-kernel steady state: power adds, and
   * the board limit's cut of overlaps (held_j) is the engine's alone. */
  m->base_energy_j = base->energy_j + base->held_j;

  /* The evaluator must reproduce the engine. */
  g_autoptr(DvfsPrices) p = dvfs_prices_new(m, NULL, NULL, 0);
  DvfsEvalOptions eo = {1, 0};
  DvfsEval ev;
  dvfs_model_eval(m, p, NULL, &eo, &ev);
  gboolean same_times = ev.time_ns[0] == base->time_ns;
  for (guint32 s = 0; s < m->n_slots && same_times; s++)
    same_times = m->ev_start[s] == m->base_start[s] &&
                 m->ev_end[s] == m->base_end[s];
  if (!same_times ||
      fabs(ev.energy_j[0] - m->base_energy_j) >
        1e-9 * MAX(m->base_energy_j, 1.0)) {
    *retry = fold;
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INTERNAL,
                "the plan model disagrees with the engine on the baseline "
                "(%" G_GINT64_FORMAT " vs %" G_GINT64_FORMAT " ns, %.9g vs "
                "%.9g J)%s", ev.time_ns[0], base->time_ns, ev.energy_j[0],
                m->base_energy_j, fold ? "" : " even unfolded");
    return NULL;
  }
  build_slack(m);

  /* Waiting power per class and the price of added iteration time. */
  double lambda = 0.0;
  for (guint c = 0; c < m->n_classes; c++) {
    const SimGpuResult *g = &base->per_gpu[m->class_rep[c]];
    double wait = g->blocked_ns + g->idle_ns;
    m->class_wait_w[c] = wait > 0 ? (m->class_blocked_w[c] -
                                     m->class_idle_w[c]) *
                                        g->blocked_ns / wait
                                  : 0.0;
    lambda += m->class_mult[c] * (m->class_idle_w[c] + m->class_wait_w[c]);
  }
  m->lambda_t_w = lambda;
  return g_steal_pointer(&m);
}

DvfsModel *dvfs_model_new(const SimWorkload *w, ClusterMachine *cm,
                          gboolean fold, GError **error)
{
  g_return_val_if_fail(w != NULL && cm != NULL, NULL);
  gboolean retry = FALSE;
  GError *err = NULL;
  g_autofree guint64 *hash = NULL;
  /* Fold by structure; if members turn out to differ in timing, fold by
   * structure and timing (one more replay); if that still fails, unfold. */
  DvfsModel *m = model_try(w, cm, fold, NULL, &retry, &hash, &err);
  if (m == NULL && retry && hash != NULL) {
    g_clear_error(&err);
    m = model_try(w, cm, TRUE, hash, &retry, NULL, &err);
  }
  if (m == NULL && retry) {
    g_clear_error(&err);
    m = model_try(w, cm, FALSE, NULL, &retry, NULL, &err);
  }
  if (m == NULL)
    g_propagate_error(error, err);
  return m;
}

SimPlan *dvfs_model_build_plan(const DvfsModel *m, const DvfsPrices *p,
                               const guint16 *request)
{
  /* Uniform requests give a uniform plan (no per-op index). */
  gint first = -1;
  gboolean uniform = TRUE;
  for (guint32 s = 0; s < m->n_slots && uniform; s++) {
    if (m->slot_kind[s] != SIM_OP_KERNEL)
      continue;
    guint16 k = request != NULL ? request[s] : 0;
    if (first < 0)
      first = k;
    else if (k != first)
      uniform = FALSE;
  }
  if (uniform)
    return sim_plan_new_uniform(m->n_ranks, p->pairs[MAX(first, 0)]);
  SimPlan *plan = sim_plan_new_uniform(m->n_ranks, (SimClocks){0, 0});
  g_autofree guint16 *map = g_new(guint16, p->n_pairs);
  for (guint k = 0; k < p->n_pairs; k++)
    map[k] = G_MAXUINT16;
  map[0] = 0;
  for (guint r = 0; r < m->n_ranks; r++) {
    /* Folded: a plan for the representatives (sim_plan_unfold gives
     * every rank its entries). */
    if (m->w->fold_rep != NULL && m->w->fold_rep[r] != r)
      continue;
    guint32 c = m->rank_class[r];
    guint32 n = m->w->ranks[r].n_ops;
    guint16 *idx = sim_plan_rank_index(plan, r, n);
    const guint16 *cr = &request[m->class_off[c]];
    for (guint32 i = 0; i < n; i++) {
      guint16 k = cr[i];
      if (map[k] == G_MAXUINT16)
        map[k] = sim_plan_add_pair(plan, p->pairs[k]);
      idx[i] = map[k];
    }
  }
  return plan;
}
