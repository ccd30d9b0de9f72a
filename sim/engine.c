/* sim/engine.c -- dataflow replay of per-rank op streams (every start a
 * maximum of finish times), exact integration of an additive power model,
 * and folded replay of identical ranks.  With a thread-safe machine and no
 * observer or boost controller, an iteration replays eagerly (one thread)
 * or on lanes (several) and queues no event; otherwise, and from the
 * first iteration whose processing order turned out to matter on, its
 * transfers start in time order through an event queue (sim/order.c).
 *
 * The engine's API lives in sim/engine.h; its internals are split over
 * sim/engine.c (this file: creation, the run), sim/plan.c, sim/replay.c,
 * sim/order.c, sim/lanes.c, sim/boost.c and sim/account.c, which share
 * sim/engine-private.h (it lists them).  How one
 * iteration is replayed is told in sim/replay.c, how it is accounted in
 * sim/account.c.
 *
 * Folded replay
 * -------------
 * With w->fold_rep set, only representatives (fold_rep[r] == r) carry ops and
 * are replayed.  A collective on group g completes when every distinct
 * representative among g's members has arrived (the network model is still
 * asked about g itself, with all its members); a send from a to b matches a
 * receive on rep(b) from a peer folding to a: channels are keyed by
 * (rep(src), rep(dst)).  Each representative's results stand for its whole
 * class: per-GPU results of a member are its representative's, totals are
 * weighted by the class size.  sim_engine_new() checks that the machine's
 * per-GPU power constants agree within each class; pricing by kernel_cost
 * and the network cannot be checked here and is the caller's contract
 * (run/session.c refuses variability and stragglers).  A plan is read for
 * representatives only (a member has no ops), so it is one per class by
 * construction; sim_plan_unfold (sim/plan.c) expands it to every rank.
 *
 * Limits: clock-switch state is kept per (rank, stream); bandwidth sharing
 * between concurrent collectives is left to the network callback; a switch
 * costs time only through its latency (no stall, no energy of its own).
 * Sequence numbers on a group, and the FIFO order of a p2p channel, follow
 * the order in which a rank's arrivals are processed: program order when a
 * rank uses a group (or a channel) from one stream, as every generated and
 * imported workload so far does; with several streams, the processing order
 * decides (deterministically).
 */
#include "sim/boost.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void sim_result_free(SimResult *r)
{
  if (r == NULL)
    return;
  g_free(r->per_gpu);
  g_free(r->iterations);
  g_free(r);
}

/* ---- creation ------------------------------------------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
  guint32 x = *(const guint32 *)a, y = *(const guint32 *)b;
  return (x > y) - (x < y);
}


/* Backs the pages of a fresh block at once (madvise MADV_POPULATE_WRITE,
 * Linux >= 5.14) rather than one page fault at a time as the first
 * iteration writes the op log: faulting in the 205 MB log of 175B on 1,024
 * GPUs was ~20% of the replay's CPU time (sys 0.4-0.6 s against 1.5 s
 * user; docs/performance.md).  Only pages wholly inside the block; where
 * the call is unknown the pages fault in as before. */
static void populate(gpointer p, gsize n)
{
#ifdef MADV_POPULATE_WRITE
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0 || (page & (page - 1)) != 0)
    return;
  guintptr a = ((guintptr)p + (guintptr)page - 1) & ~((guintptr)page - 1);
  guintptr e = ((guintptr)p + n) & ~((guintptr)page - 1);
  if (e > a)
    (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)n;
#endif
}

/* What lane_populate backs: a block of `bytes`. */
typedef struct {
  gpointer mem;
  gsize bytes;
} Block;

/* Lane k of n populates the k-th n-th of the block. */
static gpointer lane_populate(gpointer data)
{
  Lane *L = data;
  SimEngine *e = L->e;
  const Block *b = e->lane_job;
  guint k = (guint)(L - e->lanes), n = e->n_lanes;
  gsize lo = b->bytes / n * k;
  gsize hi = k + 1 == n ? b->bytes : b->bytes / n * (k + 1);
  populate((guint8 *)b->mem + lo, hi - lo);
  return NULL;
}

/* Backs a log before the first run writes it (once: *backed): on every
 * lane when the run is threaded (the kernel zeroes the pages on both
 * cores). */
static void back_log(SimEngine *e, gpointer mem, gsize bytes,
                     gboolean *backed)
{
  if (*backed)
    return;
  *backed = TRUE;
  if (!sim_replay_threaded(e)) {
    populate(mem, bytes);
    return;
  }
  Block b = {mem, bytes};
  e->lane_job = &b;
  sim_lanes_run(e, lane_populate);
  e->lane_job = NULL;
}

gboolean sim_engine_logs_kernels(const SimMachine *m, const SimPlan *plan)
{
  return m->boost != NULL || plan->index != NULL || plan->ahead != NULL ||
         plan->init != NULL;
}

/* The kernel log, allocated by the first iteration that needs it
 * (e->klog), each rank's part of it, its pages backed. */
static gboolean need_kernel_log(SimEngine *e, GError **error)
{
  if (e->log_mem != NULL)
    return TRUE;
  const SimWorkload *w = e->w;
  guint64 total_ops = sim_workload_n_ops(w);
  gsize bytes = (gsize)total_ops * sizeof(OpLog);
  /* Zeroed: the entries of ops it never holds (communication ops, in the
   * comm log; markers) stay so, and two ranks' logs compare byte for byte
   * (sim/account.c, "Ranks with the same inputs"). */
  e->log_mem = g_try_malloc0(MAX(bytes, 1));
  if (e->log_mem == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_LIMIT,
                "cannot allocate the engine's op log (%" G_GUINT64_FORMAT
                " ops, %.0f MB): this run's clocks change from kernel to "
                "kernel, so every op is logged", total_ops,
                (double)bytes / 1e6);
    return FALSE;
  }
  e->log_bytes = bytes;
  OpLog *log = e->log_mem;
  for (guint r = 0; r < w->n_ranks; r++) {
    e->ranks[r].log = log;
    log += w->ranks[r].n_ops;
  }
  back_log(e, e->log_mem, e->log_bytes, &e->log_backed);
  return TRUE;
}

/* Rank rk's communication ops before each stream (n_streams + 1 entries;
 * the last is the rank's total). */
static guint32 *comm_bases(const SimRank *rk)
{
  guint32 *base = g_new(guint32, rk->n_streams + 1);
  guint32 n = 0;
  for (guint s = 0; s < rk->n_streams; s++) {
    base[s] = n;
    for (guint32 i = rk->stream_off[s]; i < rk->stream_off[s + 1]; i++)
      n += is_comm(rk->ops[i].kind) ? 1u : 0u;
  }
  base[rk->n_streams] = n;
  return base;
}

/* Each stream's range of rank rs's wait targets. */
static void target_ranges(RankState *rs, const SimRank *rk)
{
  guint32 n = rs->n_targets;
  rs->target_end = g_new0(gint64, MAX(n, 1));
  for (guint s = 0; s < rs->n_streams; s++) {
    Stream *st = &rs->streams[s];
    st->tgt_lo = sim_lower_bound_u32(rs->targets, 0, n, rk->stream_off[s]);
    st->tgt_hi = sim_lower_bound_u32(rs->targets, st->tgt_lo, n,
                                     rk->stream_off[s + 1]);
  }
}

/* Rank r's wait targets: the distinct ops some op of r waits for, sorted,
 * and each stream's range of them.  `owner` is the rank state that already
 * found them for r's shared program, or NULL: r shares that list (the
 * targets depend on the ops only), and keeps its own end times. */
static void find_targets(RankState *rs, const SimRank *rk,
                         const RankState *owner)
{
  if (owner != NULL) {
    rs->targets = owner->targets;
    rs->n_targets = owner->n_targets;
    rs->comm_base = owner->comm_base;
    rs->borrowed_targets = 1;
    target_ranges(rs, rk);
    return;
  }
  rs->comm_base = comm_bases(rk);
  guint32 cap = 16, n = 0;
  rs->targets = g_new(guint32, cap);
  gboolean sorted = TRUE;
  for (guint32 i = 0; i < rk->n_ops; i++) {
    guint32 j = rk->ops[i].wait;
    if (G_LIKELY(j == SIM_NO_WAIT))
      continue;
    if (n > 0 && j <= rs->targets[n - 1]) {
      if (j == rs->targets[n - 1])
        continue;
      sorted = FALSE;
    }
    if (n == cap) {
      cap *= 2;
      rs->targets = g_renew(guint32, rs->targets, cap);
    }
    rs->targets[n++] = j;
  }
  if (!sorted) {
    qsort(rs->targets, n, sizeof(guint32), cmp_u32);
    guint32 u = 0;
    for (guint32 k = 0; k < n; k++)
      if (u == 0 || rs->targets[k] != rs->targets[u - 1])
        rs->targets[u++] = rs->targets[k];
    n = u;
  }
  rs->n_targets = n;
  target_ranges(rs, rk);
}

/* Folding: every member of a class must have its representative's per-GPU
 * power constants (the engine only ever prices the representative). */
static gboolean check_fold_machine(const SimWorkload *w, const SimMachine *m,
                                   GError **error)
{
  for (guint r = 0; r < w->n_ranks; r++) {
    guint32 q = w->fold_rep[r];
    if (q == r)
      continue;
    const char *what = NULL;
    if (m->idle_power_w[r] != m->idle_power_w[q])
      what = "idle";
    else if (m->blocked_power_w[r] != m->blocked_power_w[q])
      what = "blocked";
    else if (m->comm_power_w[r] != m->comm_power_w[q])
      what = "communication";
    else if (m->power_limit_w != NULL &&
             m->power_limit_w[r] != m->power_limit_w[q])
      what = "limit";
    if (what != NULL) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                  "folded workload: GPU %u folds to GPU %u but their %s "
                  "powers differ (%g W vs %g W); a folded workload needs "
                  "every GPU of a class priced alike (no variability)", r, q,
                  what,
                  what[0] == 'i'   ? m->idle_power_w[r]
                  : what[0] == 'b' ? m->blocked_power_w[r]
                  : what[0] == 'l' ? m->power_limit_w[r]
                                   : m->comm_power_w[r],
                  what[0] == 'i'   ? m->idle_power_w[q]
                  : what[0] == 'b' ? m->blocked_power_w[q]
                  : what[0] == 'l' ? m->power_limit_w[q]
                                   : m->comm_power_w[q]);
      return FALSE;
    }
  }
  return TRUE;
}

/* One price cache for all ranks when the machine prices every GPU alike
 * and their idle powers (hence the cached increments) agree. */
static gboolean shares_cache(const SimWorkload *w, const SimMachine *m)
{
  gboolean shared = m->uniform_pricing && w->n_ranks > 0;
  for (guint r = 1; shared && r < w->n_ranks; r++)
    shared = m->idle_power_w[r] == m->idle_power_w[0];
  return shared;
}

SimEngine *sim_engine_new(const SimWorkload *w, const SimMachine *m,
                          GError **error)
{
  if (m->n_gpus != w->n_ranks) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "the workload has %u ranks but the machine %u GPUs",
                w->n_ranks, m->n_gpus);
    return NULL;
  }
  if (m->switch_latency_ns < 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "negative clock switching latency");
    return NULL;
  }
  if (m->sensor_window_ns < 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "negative power sensor window");
    return NULL;
  }
  for (guint r = 0; m->power_limit_w != NULL && r < m->n_gpus; r++)
    if (!(m->power_limit_w[r] > 0)) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                  "GPU %u: board power limit %g W is not positive", r,
                  m->power_limit_w[r]);
      return NULL;
    }
  for (guint r = 0; m->boost != NULL && r < m->n_gpus; r++) {
    const SimBoost *b = &m->boost[r];
    if (!(b->window_ns > 0 && b->period_ns > 0 && b->step_mhz > 0 &&
          b->min_mhz <= b->max_mhz && b->max_mhz > 0 &&
          isfinite(b->limit_w) && b->limit_w > 0 && b->margin_w >= 0)) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                  "GPU %u: boost controller needs window, period and step > "
                  "0, 0 < min <= max clock and a positive limit", r);
      return NULL;
    }
  }
  /* The workload is validated rank by rank, each rank's wait targets
   * collected right after its check, while its ops are in cache. */
  g_autoptr(SimValidator) v = sim_validator_new(w, error);
  if (v == NULL)
    return NULL;
  if (w->fold_rep != NULL && !check_fold_machine(w, m, error))
    return NULL;
  g_autoptr(SimEngine) e = g_new0(SimEngine, 1);
  e->w = w;
  e->m = m;
  e->folded = w->fold_rep != NULL;
  e->shapes = (const SimShape *)(void *)w->shapes->data;
  e->ranks = g_aligned_alloc0(MAX(w->n_ranks, 1), sizeof(RankState), 64);
  if (m->boost != NULL)
    e->boost = g_new0(BoostState, MAX(w->n_ranks, 1));
  e->queue = sim_queue_new();
  g_mutex_init(&e->bar.lock);
  g_cond_init(&e->bar.cond);
  guint n_shapes = w->shapes->len;
  gboolean shared = shares_cache(w, m);
  if (shared)
    e->shared_cache = g_new0(CostSlot, MAX(n_shapes, 1));
  sim_lanes_new(e, 1);
  /* Per shared program: the rank (+1) whose targets its sharers reuse. */
  g_autofree guint32 *prog_owner = g_new0(guint32, w->programs->len + 1);
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    RankState *rs = &e->ranks[r];
    if (!sim_validator_rank(v, r, error))
      return NULL;
    rs->n_streams = rk->n_ops > 0 ? rk->n_streams : 0;
    rs->idle_w = m->idle_power_w[r];
    rs->comm_inc = (float)(m->comm_power_w[r] - m->idle_power_w[r]);
    rs->weight = e->folded ? 0 : 1;
    if (rk->n_ops == 0)
      continue; /* nothing to replay (folded away, or idle) */
    rs->streams = g_aligned_alloc0(MAX(rs->n_streams, 1), sizeof(Stream), 64);
    rs->cache = shared ? e->shared_cache : g_new0(CostSlot, MAX(n_shapes, 1));
    const RankState *owner = NULL;
    if (rk->program != SIM_NO_PROGRAM) {
      if (prog_owner[rk->program] != 0)
        owner = &e->ranks[prog_owner[rk->program] - 1];
      else
        prog_owner[rk->program] = r + 1;
    }
    find_targets(rs, rk, owner);
  }
  if (!sim_validator_finish(v, error))
    return NULL;
  /* The comm log: one entry per communication op of every rank. */
  guint64 n_comm = 0;
  for (guint r = 0; r < w->n_ranks; r++)
    if (e->ranks[r].comm_base != NULL)
      n_comm += e->ranks[r].comm_base[e->ranks[r].n_streams];
  e->clog_bytes = (gsize)n_comm * sizeof(OpLog);
  e->clog_mem = g_try_malloc(MAX(e->clog_bytes, 1));
  if (e->clog_mem == NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_LIMIT,
                "cannot allocate the engine's communication log (%"
                G_GUINT64_FORMAT " ops, %.0f MB)", n_comm,
                (double)e->clog_bytes / 1e6);
    return NULL;
  }
  OpLog *clog = e->clog_mem;
  for (guint r = 0; r < w->n_ranks; r++) {
    RankState *rs = &e->ranks[r];
    rs->clog = clog;
    if (rs->comm_base != NULL)
      clog += rs->comm_base[rs->n_streams];
  }
  if (e->folded)
    for (guint r = 0; r < w->n_ranks; r++)
      e->ranks[w->fold_rep[r]].weight++;
  /* Collective matching state. */
  e->n_groups = sim_workload_n_groups(w);
  e->group_off = (const guint32 *)(void *)w->group_off->data;
  e->group_ranks = (const guint32 *)(void *)w->group_ranks->data;
  e->group_expect = g_new0(guint32, MAX(e->n_groups, 1));
  e->rings = g_new0(Ring, MAX(e->n_groups, 1));
  g_autofree guint32 *stamp = NULL;
  if (e->folded) {
    stamp = g_new(guint32, MAX(w->n_ranks, 1));
    memset(stamp, 0xff, sizeof(guint32) * MAX(w->n_ranks, 1));
  }
  for (guint g = 0; g < e->n_groups; g++) {
    guint32 a = e->group_off[g], b = e->group_off[g + 1];
    if (!e->folded) {
      e->group_expect[g] = b - a;
      continue;
    }
    guint32 n = 0; /* distinct representatives */
    for (guint32 k = a; k < b; k++) {
      guint32 q = w->fold_rep[e->group_ranks[k]];
      if (stamp[q] != g) {
        stamp[q] = g;
        n++;
      }
    }
    e->group_expect[g] = n;
  }
  sim_lanes_deal(e);
  return g_steal_pointer(&e);
}

void sim_engine_free(SimEngine *e)
{
  if (e == NULL)
    return;
  for (guint r = 0; r < e->w->n_ranks; r++) {
    RankState *rs = &e->ranks[r];
    g_aligned_free(rs->streams);
    if (e->shared_cache == NULL)
      g_free(rs->cache);
    if (!rs->borrowed_targets) {
      g_free(rs->targets);
      g_free(rs->comm_base);
    }
    g_free(rs->target_end);
    g_free(rs->ovf);
    for (guint32 c = 0; c < rs->n_chans; c++) {
      g_free(rs->chans[c].q);
      g_free(rs->chans[c].qt);
    }
    g_free(rs->chans);
  }
  g_aligned_free(e->ranks);
  g_free(e->boost);
  g_free(e->log_mem);
  g_free(e->clog_mem);
  g_free(e->shared_cache);
  g_free(e->group_expect);
  for (guint g = 0; e->rings != NULL && g < e->n_groups; g++)
    g_aligned_free(e->rings[g].slot);
  g_free(e->rings);
  sim_lanes_free(e);
  g_free(e->rank_lane);
  g_free(e->group_lane);
  g_free(e->saved);
  g_free(e->saved_switches);
  g_mutex_clear(&e->bar.lock);
  g_cond_clear(&e->bar.cond);
  sim_queue_free(e->queue);
  g_free(e);
}

void sim_engine_set_threads(SimEngine *e, guint n)
{
  const SimWorkload *w = e->w;
  n = CLAMP(n, 1u, MIN(SIM_MAX_THREADS, MAX(w->n_ranks, 1u)));
  if (n == e->n_lanes)
    return;
  /* Whatever the old lanes held (open transfers of a failed run) goes:
   * every run starts by clearing the matching state. */
  sim_lanes_free(e);
  sim_lanes_new(e, n);
  sim_lanes_deal(e);
  /* A shared price cache is kept per lane: no two threads write a slot. */
  for (guint r = 0; e->shared_cache != NULL && r < w->n_ranks; r++)
    if (e->ranks[r].cache != NULL)
      e->ranks[r].cache = e->lanes[lane_of(e, r)].cache;
}

guint sim_engine_threads_used(const SimEngine *e)
{
  return e->threads_used;
}

void sim_engine_run_stats(const SimEngine *e, SimRunStats *out)
{
  *out = e->stats;
  out->threads = e->threads_used;
  for (guint k = 0; k < e->n_lanes; k++) {
    out->steady_kernels += e->lanes[k].steady_kernels;
    out->ranks_copied += e->lanes[k].ranks_copied;
  }
}

void sim_engine_set_observer(SimEngine *e, SimObserver fn, gpointer data)
{
  e->observer = fn;
  e->observer_data = data;
}

/* Rank rk's communication ops, and its wait targets as find_targets
 * collects them before it sorts (exact when the waits ascend, as in
 * generated workloads; an upper bound otherwise). */
typedef struct {
  guint32 comm, targets;
} OpCounts;

static OpCounts count_ops(const SimRank *rk)
{
  OpCounts c = {0, 0};
  guint32 last = SIM_NO_WAIT;
  for (guint32 i = 0; i < rk->n_ops; i++) {
    const SimOp *op = &rk->ops[i];
    c.comm += is_comm(op->kind) ? 1u : 0u;
    if (op->wait != SIM_NO_WAIT && op->wait != last) {
      c.targets++;
      last = op->wait;
    }
  }
  return c;
}

guint64 sim_engine_estimate_bytes(const SimWorkload *w, const SimMachine *m,
                                  const SimPlan *plan)
{
  g_return_val_if_fail(w != NULL && m != NULL && plan != NULL, 0);
  const gboolean kernel_log = sim_engine_logs_kernels(m, plan);
  const gboolean shared = shares_cache(w, m);
  guint64 n_shapes = MAX(w->shapes->len, 1);
  guint64 bytes = sizeof(SimEngine) + (shared ? n_shapes * sizeof(CostSlot)
                                              : 0);
  /* Per open transfer: a pending record with two members, its event, a
   * work-stack slot and a free-list slot; at most one per stream. */
  const guint64 per_stream = sizeof(Stream) + sizeof(Pending) +
                             2 * sizeof(Member) + sizeof(SimEvent) +
                             sizeof(guint64) + sizeof(guint32);
  g_autofree guint8 *prog_seen = g_new0(guint8, w->programs->len + 1);
  /* Per shared program: its counts (made on its first rank). */
  g_autofree OpCounts *prog_counts = g_new0(OpCounts, w->programs->len + 1);
  guint32 max_ops = 0;
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    bytes += sizeof(RankState) + sizeof(guint8); /* and its lane */
    if (rk->n_ops == 0)
      continue;
    max_ops = MAX(max_ops, rk->n_ops);
    /* The target list is held once per shared program, end times per
     * rank. */
    gboolean first = rk->program == SIM_NO_PROGRAM || !prog_seen[rk->program];
    OpCounts n = first ? count_ops(rk) : prog_counts[rk->program];
    if (rk->program != SIM_NO_PROGRAM) {
      prog_seen[rk->program] = 1;
      prog_counts[rk->program] = n;
    }
    guint ns = rk->n_streams;
    bytes += ns * per_stream + (shared ? 0 : n_shapes * sizeof(CostSlot)) +
             (guint64)n.comm * sizeof(OpLog) +
             (kernel_log ? (guint64)rk->n_ops * sizeof(OpLog) : 0) +
             (first ? (ns + 1) * sizeof(guint32) : 0);
    /* Wait targets: the list once per program, end times per rank. */
    bytes += (guint64)n.targets * ((first ? sizeof(guint32) : 0) +
                                   sizeof(gint64));
  }
  /* The accounting's kernel memo and its last rank of each shared program
   * (per thread; sim/account.c). */
  if (!kernel_log)
    bytes += (guint64)max_ops * sizeof(OpLog);
  bytes += (guint64)w->programs->len * sizeof(AcctMemo);
  /* Sequence counter and last stream per group membership (and its
   * member slot); ring, expectation and first ring slots per group. */
  bytes += (guint64)w->group_ranks->len *
           (sizeof(guint32) + sizeof(guint8) + sizeof(Member));
  bytes += (guint64)sim_workload_n_groups(w) *
           (sizeof(Ring) + sizeof(guint32) + 4 * sizeof(guint32) +
            sizeof(guint8));
  return bytes;
}

/* ---- the run ---------------------------------------------------------------- */

/* Adds w times the scratch totals s to the result. */
static void add_weighted(SimResult *res, const Totals *s, double w)
{
  for (int c = 0; c < SIM_CLASS_COUNT; c++) {
    res->by_class[c].time_ns += w * s->by_class[c].time_ns;
    res->by_class[c].energy_j += w * s->by_class[c].energy_j;
  }
  for (int p = 0; p < SIM_PHASE_COUNT; p++) {
    res->by_phase[p].time_ns += w * s->by_phase[p].time_ns;
    res->by_phase[p].energy_j += w * s->by_phase[p].energy_j;
  }
  res->blocked.time_ns += w * s->blocked.time_ns;
  res->blocked.energy_j += w * s->blocked.energy_j;
  res->idle.time_ns += w * s->idle.time_ns;
  res->idle.energy_j += w * s->idle.energy_j;
  res->held_j += w * s->held_j;
}

/* Adds rank r's share of an iteration (its energy `energy`, its totals
 * `part`) to the result, weighted by its class size. */
static double add_rank(SimEngine *e, SimResult *res, guint r,
                       const Totals *part, double energy)
{
  RankState *rs = &e->ranks[r];
  double wt = (double)rs->weight;
  add_weighted(res, part, wt);
  res->switches += rs->switches * rs->weight;
  rs->switches = 0;
  return wt * energy;
}

/* Accounts iteration [t0, t1) of every rank into res; returns its energy.
 * Each rank's totals are summed on their own, then added to the result in
 * rank order: the same additions whether the ranks are accounted on one
 * thread or on the lanes. */
static double account_iteration(SimEngine *e, SimResult *res, gint64 t0,
                                gint64 t1)
{
  const SimWorkload *w = e->w;
  double iter_energy = 0.0;
  e->account_pass++;
  if (sim_replay_threaded(e)) {
    Totals *part = g_new(Totals, MAX(w->n_ranks, 1));
    double *energy = g_new(double, MAX(w->n_ranks, 1));
    sim_lanes_account(e, res, t0, t1, part, energy);
    for (guint r = 0; r < w->n_ranks; r++)
      if (e->ranks[r].weight != 0)
        iter_energy += add_rank(e, res, r, &part[r], energy[r]);
    g_free(part);
    g_free(energy);
    return iter_energy;
  }
  Totals part;
  for (guint r = 0; r < w->n_ranks; r++) {
    if (e->ranks[r].weight == 0)
      continue;
    memset(&part, 0, sizeof part);
    double energy = sim_account_rank(e, r, t0, t1, &part, &res->per_gpu[r]);
    iter_energy += add_rank(e, res, r, &part, energy);
  }
  return iter_energy;
}

SimResult *sim_engine_run(SimEngine *e, SimPlan *plan, guint iterations,
                          GError **error)
{
  const SimWorkload *w = e->w;
  g_return_val_if_fail(plan != NULL, NULL);
  if (iterations == 0) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "iterations must be at least 1");
    return NULL;
  }
  if (plan->n_pairs == 0 || (plan->index != NULL && plan->n_ranks != w->n_ranks)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "the plan does not match the workload (%u ranks)",
                w->n_ranks);
    return NULL;
  }
  if (!sim_plan_check(plan, w, error))
    return NULL;
  g_autoptr(SimResult) res = g_new0(SimResult, 1);
  res->n_gpus = w->n_ranks;
  res->per_gpu = g_new0(SimGpuResult, MAX(w->n_ranks, 1));
  res->n_iterations = iterations;
  res->iterations = g_new0(SimIterResult, iterations);
  SimPlan *owned = NULL; /* a plan handed to us by iteration_begin */
  e->plan = plan;
  back_log(e, e->clog_mem, e->clog_bytes, &e->clog_backed);
  sim_replay_reset(e);
  e->threads_used = e->n_lanes;
  e->stats = (SimRunStats){.iterations = iterations};
  for (guint k = 0; k < e->n_lanes; k++)
    e->lanes[k].steady_kernels = e->lanes[k].ranks_copied = 0;
  gint64 t0 = 0;
  for (guint it = 0; it < iterations; it++) {
    e->iter = it;
    if (e->m->iteration_begin != NULL) {
      SimPlan *p = e->plan;
      if (!e->m->iteration_begin(e->m->ctx, it, &p, error)) {
        sim_plan_free(owned);
        return NULL;
      }
      if (p != e->plan) {
        sim_plan_free(owned);
        owned = p;
        e->plan = p;
        if (!sim_plan_check(p, w, error)) {
          sim_plan_free(owned);
          return NULL;
        }
      }
      /* Costs may depend on the iteration (stragglers): drop the cache. */
      gsize cache_bytes = sizeof(CostSlot) * MAX(w->shapes->len, 1);
      if (e->shared_cache != NULL)
        for (guint k = 0; k < e->n_lanes; k++)
          memset(e->lanes[k].cache, 0, cache_bytes);
      else
        for (guint r = 0; r < w->n_ranks; r++)
          if (e->ranks[r].cache != NULL)
            memset(e->ranks[r].cache, 0, cache_bytes);
    }
    e->klog = sim_engine_logs_kernels(e->m, e->plan);
    e->stats.kernel_log |= e->klog;
    if (e->klog && !need_kernel_log(e, error)) {
      sim_plan_free(owned);
      return NULL;
    }
    gint64 t1;
    if (!sim_replay_iteration(e, t0, &t1, error)) {
      sim_plan_free(owned);
      return NULL;
    }
    if (!sim_replay_threaded(e))
      e->threads_used = 1;
    double held_before = res->held_j;
    double iter_energy = account_iteration(e, res, t0, t1);
    res->iterations[it].time_ns = t1 - t0;
    res->iterations[it].energy_j = iter_energy;
    res->iterations[it].held_j = res->held_j - held_before;
    t0 = t1;
  }
  sim_plan_free(owned);
  e->plan = NULL;
  res->time_ns = t0;
  if (e->folded)
    for (guint r = 0; r < w->n_ranks; r++)
      if (w->fold_rep[r] != r)
        res->per_gpu[r] = res->per_gpu[w->fold_rep[r]];
  guint64 represented = 0;
  for (guint r = 0; r < w->n_ranks; r++) {
    SimGpuResult *g = &res->per_gpu[r];
    res->energy_j += g->energy_j;
    res->waste_j += g->blocked_j + g->idle_j;
    res->flops += g->flops;
    res->peak_power_w = MAX(res->peak_power_w, g->peak_power_w);
    represented += w->ranks[e->folded ? w->fold_rep[r] : r].n_ops;
  }
  res->ops = sim_workload_n_ops(w) * iterations;
  res->ops_represented = represented * iterations;
  return g_steal_pointer(&res);
}
