/* sim/replay.c -- one iteration's dataflow replay: every (rank, stream)
 * runs its ops in order, communication is matched across ranks (its
 * transfers started in time order through an event queue, or without one
 * in eager and threaded order), kernels are priced by the machine (cached
 * per shape and clock pair), clock switches and the boost controller
 * adjust the prices, and every op's times land in the rank's op log
 * (sim/engine-private.h) for the accounting (sim/account.c).
 *
 * How a replay works
 * ------------------
 * One iteration at a time.  Every (rank, stream) pair has a cursor into the
 * rank's op array (ops grouped by stream, see sim/workload.h) and the time
 * its stream becomes free.  advance() runs a stream in a tight loop: a kernel
 * starts when the stream is free and its `wait` op has finished, lasts
 * llround(ref_ns * time_scale) (priced by the machine, cached per shape and
 * clock pair), and the cursor moves on.  No event is queued per kernel.
 *
 * A stream stops in two cases: its next op waits for an op (on another
 * stream of the same rank) that has not been scheduled yet, or its next op is
 * communication.  A communication op records the rank's arrival in a pending
 * record.  Collectives are matched by (group, the rank's sequence number on
 * that group): the sequence number is a counter per group membership, and
 * the open instances of a group sit in a small ring indexed by sequence
 * number, so matching is array indexing, not hashing.  Point-to-point ops
 * match FIFO per (src, dst) channel; a rank's incoming channels are a small
 * sorted array.  When the last member arrives the record's start time is
 * known (the latest arrival) and a COMM_START event is queued at that time.
 * Popping it prices the transfer (network callback), schedules every
 * member's op and resumes their streams.  Completing an op that another
 * stream waits for resumes that stream.  Resumptions go through a small work
 * stack, never recursion.
 *
 * Because every start time is a max over finish times (a max-plus
 * computation), the processing order cannot change the result; the event
 * queue's total order (time, priority, sequence) makes the processing itself
 * deterministic too, and puts transfer starts in time order (which a shared
 * bandwidth model needs).
 *
 * Clock switches
 * --------------
 * Per (rank, stream): the clocks in force, the last requested target and
 * when it lands (Stream.clk_*).  A kernel takes the steady path (its
 * request is the landed target: no pricing change, no check) or the slow
 * one (clocks_at: a landing applied, a new request made); only there can a
 * switch still be in flight, and when it lands before the kernel ends
 * split_kernel() prices the rest at the new clocks (sim_kernel_rest_ns)
 * and logs the kernel as an overflow record with both parts, which the
 * accounting reads as two intervals of one op.  One switch is in flight
 * at a time and requests come at kernel starts (or, early requests, at
 * most the latency before a kernel's end), so a kernel splits at most
 * once.  Early requests (SimPlan.ahead) are found like wait targets: a
 * per-stream cursor in the rank's list, the loop's fast path stopping at
 * the next one; plans without them cost one compare per kernel.
 *
 * Boost controller
 * ----------------
 * With SimMachine.boost a kernel runs at min(requested, the GPU's
 * ceiling); sim/boost.c tells how the ceiling moves.  The replay asks it
 * at a kernel's start (sim_boost_clocks when a decision is due, else
 * boost_cap) and tells it of every kernel (boost_note).
 *
 * Orders
 * ------
 * An iteration replays in one of three orders, SimEngine.order, which
 * the core reads in three places and nowhere else: comm_ready (a
 * transfer whose members have all arrived: queued, started at once, or
 * kept for the round's end), comm_arrive (what it checks on the way) and
 * advance's stop at a communication op (matched here, or sent to the
 * lane that matches it).  The drivers, and why an order is exact, are in
 * sim/order.c (the queue and eager) and sim/lanes.c (threads).
 */
#include "sim/boost.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- pricing ---------------------------------------------------------------- */

/* Cost of `shape` on GPU r at clocks c, through the rank's cache
 * (e->ranks[r].cache, which the caller may hold in a local). */
static inline const CostSlot *price_in(SimEngine *e, CostSlot *cache,
                                       guint r, guint32 shape, SimClocks c)
{
  CostSlot *slot = &cache[shape];
  guint32 tag = pack_clocks(c);
  if (G_UNLIKELY(slot->shape_pairs_tag != tag)) {
    e->m->kernel_cost(e->m->ctx, r, shape, c, e->iter, &slot->cost);
    slot->shape_pairs_tag = tag;
    slot->inc = (float)(slot->cost.power_w - e->ranks[r].idle_w);
  }
  return slot;
}

static inline const CostSlot *price(SimEngine *e, guint r, guint32 shape,
                                   SimClocks c)
{
  return price_in(e, e->ranks[r].cache, r, shape, c);
}

gint64 sim_kernel_rest_ns(gint64 old_ns, gint64 done_ns, double new_ns)
{
  g_return_val_if_fail(done_ns >= 0 && done_ns < old_ns, 0);
  /* The fraction of the work left, at the new clocks' full duration. */
  return sim_round_ns((double)(old_ns - done_ns) / (double)old_ns * new_ns);
}

/* Op i of rs ends past TIME_MAX: the error names the rank's first such
 * op (by index, whatever order the ops were replayed in). */
static inline void note_bad(RankState *rs, guint32 i)
{
  if (rs->bad_op == 0 || i + 1 < rs->bad_op)
    rs->bad_op = i + 1;
}

/* ---- the op log --------------------------------------------------------------- */

/* Appends an overflow record and points log entry l (of the op log or,
 * for communication, the comm log) at it. */
static void log_overflow(RankState *rs, OpLog *l, gint64 arrive, gint64 start,
                         gint64 end, float inc)
{
  if (rs->n_ovf == rs->cap_ovf) {
    rs->cap_ovf = MAX(8, 2 * rs->cap_ovf);
    rs->ovf = g_renew(Overflow, rs->ovf, rs->cap_ovf);
  }
  Overflow *o = &rs->ovf[rs->n_ovf];
  o->arrive = arrive;
  o->start = start;
  o->end = end;
  o->inc = inc;
  o->inc2 = 0.0f;
  o->split = 0;
  l->dur = LOG_ESC;
  l->aux = rs->n_ovf++;
}

/* Host op i (SIM_OP_HOST) of rank rs, ready at `ready`: it lasts its
 * ref_ns, whatever the clocks, with no power increment; logged when the
 * iteration logs kernels (SimEngine.klog; otherwise the accounting reads
 * ref_ns itself).  Returns its end (capped at TIME_MAX, which fails the
 * iteration as for kernels). */
static gint64 host_op(const SimEngine *e, RankState *rs, guint32 i,
                      const SimOp *op, gint64 ready)
{
  gint64 dur = op->ref_ns;
  if (G_LIKELY(dur >= 0 && dur < LOG_ESC && ready + dur <= TIME_MAX)) {
    if (e->klog) {
      rs->log[i].dur = (guint32)dur;
      rs->log[i].aux = 0;
    }
    return ready + dur;
  }
  gint64 end = ready + MIN(dur, TIME_MAX);
  if (end > TIME_MAX) {
    end = TIME_MAX;
    note_bad(rs, i);
  }
  if (e->klog)
    log_overflow(rs, &rs->log[i], ready, ready, end, 0.0f);
  return end;
}

/* ---- scheduling ------------------------------------------------------------- */

/* The limit an observer's record carries for rank r (0: none held). */
static inline double record_limit(const SimEngine *e, guint r)
{
  return e->m->power_limit_w != NULL ? e->m->power_limit_w[r] : 0.0;
}

/* Op i of rank r on stream st has been scheduled: stores its end when some
 * op waits for it, wakes the streams waiting for it, tells the observer. */
static inline void op_done(SimEngine *e, Lane *L, guint r, Stream *st,
                           guint32 i, gint64 arrive, gint64 start, gint64 end,
                           float inc)
{
  RankState *rs = &e->ranks[r];
  if (st->tgt < st->tgt_hi && rs->targets[st->tgt] == i) {
    rs->target_end[st->tgt++] = end;
    for (guint s = 0; s < rs->n_streams; s++) {
      Stream *o = &rs->streams[s];
      if (o->state == ST_WAIT_OP && o->waiting_for == i) {
        o->state = ST_RUN;
        lane_push(L, r, s);
      }
    }
  }
  if (G_UNLIKELY(e->observer != NULL)) {
    const SimOp *op = &e->w->ranks[r].ops[i];
    SimOpRecord rec = {e->iter, r, i, arrive, start, end, 0.0, {0, 0},
                       record_limit(e, r)};
    rec.power_w = rs->idle_w + inc;
    if (op->kind == SIM_OP_KERNEL) {
      const SimCost *c = &rs->cache[op->shape].cost;
      rec.clocks.sm_mhz = c->sm_mhz;
      rec.clocks.mem_mhz = c->mem_mhz;
    }
    e->observer(e->observer_data, &rec);
  }
}

static guint32 pending_alloc(Pool *pl)
{
  if (pl->n_free > 0)
    return pl->pend_free[--pl->n_free];
  if (pl->n_pend == pl->cap_pend) {
    pl->cap_pend = MAX(64, 2 * pl->cap_pend);
    pl->pend = g_renew(Pending, pl->pend, pl->cap_pend);
    pl->pend_free = g_renew(guint32, pl->pend_free, pl->cap_pend);
  }
  Pending *p = &pl->pend[pl->n_pend];
  memset(p, 0, sizeof *p);
  return pl->n_pend++;
}

static void pending_release(Pool *pl, guint32 idx)
{
  pl->pend_free[pl->n_free++] = idx;
}

/* Makes room for n members in pending record p. */
static inline void pending_reserve(Pending *p, guint n)
{
  if (p->members_cap < n) {
    p->members_cap = n;
    p->members = g_renew(Member, p->members, n);
  }
}

/* Replaces ring's slots by a larger power of two in which its open
 * instances do not collide and slot seq & mask is free. */
static void ring_grow(const Pool *pl, Ring *ring, guint32 seq)
{
  guint32 old_cap = ring->slot != NULL ? ring->mask + 1 : 0;
  /* At least a cache line, line-aligned: the rings of different groups
   * are written by different lanes (threaded). */
  for (guint32 ncap = MAX(16u, 2 * old_cap);; ncap *= 2) {
    guint32 *ns = g_aligned_alloc0(ncap, sizeof(guint32), 64);
    gboolean ok = TRUE;
    for (guint32 k = 0; k < old_cap && ok; k++) {
      guint32 v = ring->slot[k];
      if (v == 0)
        continue;
      guint32 at = pl->pend[v - 1].seq_or_dst & (ncap - 1);
      if (ns[at] != 0)
        ok = FALSE;
      else
        ns[at] = v;
    }
    if (ok && ns[seq & (ncap - 1)] == 0) {
      g_aligned_free(ring->slot);
      ring->slot = ns;
      ring->mask = ncap - 1;
      return;
    }
    g_aligned_free(ns);
  }
}

/* Rank dst's incoming channel from ranks folding to src (created empty when
 * missing; the array stays sorted by src). */
static Channel *channel_of(SimEngine *e, guint32 dst, guint32 src)
{
  RankState *rs = &e->ranks[dst];
  guint32 lo;
  SIM_LOWER_BOUND(lo, 0, rs->n_chans, k, rs->chans[k].src, src);
  if (lo < rs->n_chans && rs->chans[lo].src == src)
    return &rs->chans[lo];
  if (rs->n_chans == rs->cap_chans) {
    rs->cap_chans = MAX(4, 2 * rs->cap_chans);
    rs->chans = g_renew(Channel, rs->chans, rs->cap_chans);
  }
  memmove(&rs->chans[lo + 1], &rs->chans[lo],
          sizeof(Channel) * (rs->n_chans - lo));
  rs->n_chans++;
  Channel *c = &rs->chans[lo];
  memset(c, 0, sizeof *c);
  c->src = src;
  return c;
}

/* Queues op v (rank << 32 | op) that arrived at t. */
static void channel_push(Channel *c, guint64 v, gint64 t)
{
  if (c->len == c->cap) {
    guint32 ncap = MAX(4, 2 * c->cap);
    guint64 *nq = g_new(guint64, ncap);
    gint64 *nt = g_new(gint64, ncap);
    for (guint32 k = 0; k < c->len; k++) {
      nq[k] = c->q[(c->head + k) % c->cap];
      nt[k] = c->qt[(c->head + k) % c->cap];
    }
    g_free(c->q);
    g_free(c->qt);
    c->q = nq;
    c->qt = nt;
    c->cap = ncap;
    c->head = 0;
  }
  c->q[(c->head + c->len) % c->cap] = v;
  c->qt[(c->head + c->len) % c->cap] = t;
  c->len++;
}

/* The oldest op of c; *t gets its arrival time. */
static guint64 channel_pop(Channel *c, gint64 *t)
{
  guint64 v = c->q[c->head];
  *t = c->qt[c->head];
  c->head = (c->head + 1) % c->cap;
  c->len--;
  return v;
}

static inline guint32 rep_of(const SimEngine *e, guint32 r)
{
  return e->folded ? e->w->fold_rep[r] : r;
}

static void comm_start(SimEngine *e, Lane *M, guint32 idx);

/* Whether every member of pending record idx of lane M is a rank of M. */
static gboolean members_on(const SimEngine *e, const Lane *M, guint32 idx)
{
  const Pending *p = &M->pool.pend[idx];
  guint me = (guint)(M - e->lanes);
  for (guint k = 0; k < p->n_members; k++)
    if (lane_of(e, p->members[k].rank) != me)
      return FALSE;
  return TRUE;
}

/* Pending record idx of lane M's pool has all its members: queued as a
 * COMM_START event at its start time, started at once (eager, or
 * threaded when it completes in the first phase of a round and all its
 * members are M's), or (threaded) kept for the round's end. */
static inline void comm_ready(SimEngine *e, Lane *M, guint32 idx)
{
  if (e->order == ORDER_LANES) {
    if (M->running && members_on(e, M, idx))
      comm_start(e, M, idx);
    else
      APPEND(M->ready, M->n_ready, M->cap_ready, idx);
  } else if (e->order == ORDER_EAGER)
    comm_start(e, M, idx);
  else
    sim_queue_push(e->queue, M->pool.pend[idx].start_ns, PRIO_COMM,
                   EV_COMM_START, idx);
}

/* The lane that matches rank r's communication op (threaded: a group's
 * collectives on one lane, a channel's transfers on one lane). */
static inline guint match_lane(const SimEngine *e, guint r, const SimOp *op)
{
  if (op->kind == SIM_OP_COLLECTIVE)
    return e->group_lane[sim_op_peer(&e->w->ranks[r], op)];
  return lane_of(e, rep_of(e, op->kind == SIM_OP_SEND
                                  ? sim_op_peer(&e->w->ranks[r], op)
                                  : r));
}

/* A rank used one group or channel from two streams (threaded). */
static inline void order_check(SimEngine *e, guint8 *last, guint stream)
{
  if (*last != 0 && *last != stream + 1)
    g_atomic_int_set(&e->order_hit, TRUE);
  *last = (guint8)(stream + 1);
}

/* Records the arrival of rank r's communication op i at time t, matched
 * on lane M (lane 0 serially).  Readies the transfer (comm_ready) when its
 * last member has arrived. */
static void comm_arrive(SimEngine *e, Lane *M, guint r, guint32 i, gint64 t)
{
  const SimWorkload *w = e->w;
  const SimRank *rk = &w->ranks[r];
  const SimOp *op = &rk->ops[i];
  const SimShape *sh = &e->shapes[op->shape];
  guint32 peer = sim_op_peer(rk, op);
  const guint order = e->order;
  guint32 idx;
  Pending *p;
  if (op->kind == SIM_OP_COLLECTIVE) {
    guint32 g = peer;
    RankState *rs = &e->ranks[r];
    guint32 mpos;
    if (order == ORDER_LANES) {
      /* The rank's other groups are matched on other lanes: no cache. */
      mpos = sim_lower_bound_u32(e->group_ranks, e->group_off[g],
                                 e->group_off[g + 1], r);
      order_check(e, &M->mstream[mpos], op->stream);
    } else {
      /* Membership index: consecutive collectives of a rank are mostly on
       * one group (tensor parallelism), so remember the last one. */
      if (rs->last_group != g + 1) {
        rs->last_group = g + 1;
        rs->last_mpos = sim_lower_bound_u32(e->group_ranks, e->group_off[g],
                                            e->group_off[g + 1], r);
      }
      mpos = rs->last_mpos;
      if (order == ORDER_EAGER)
        order_check(e, &M->mstream[mpos], op->stream);
    }
    guint32 seq = M->mseq[mpos]++;
    Ring *ring = &e->rings[g];
    Pool *pl = &M->pool;
    guint32 v = ring->slot != NULL ? ring->slot[seq & ring->mask] : 0;
    if (v != 0 && pl->pend[v - 1].seq_or_dst == seq) {
      idx = v - 1;
      p = &pl->pend[idx];
    } else {
      if (v != 0 || ring->slot == NULL)
        ring_grow(pl, ring, seq);
      idx = pending_alloc(pl);
      p = &pl->pend[idx];
      p->p2p = FALSE;
      p->group_or_src = g;
      p->seq_or_dst = seq;
      p->n_members = e->group_expect[g];
      p->n_arrived = 0;
      p->start_ns = t;
      p->ref_ns = 0;
      p->bytes = sh->bytes;
      p->coll = sh->coll;
      pending_reserve(p, p->n_members);
      ring->slot[seq & ring->mask] = idx + 1;
    }
    p->members[p->n_arrived].rank = r;
    p->members[p->n_arrived].op = i;
    p->n_arrived++;
    p->start_ns = MAX(p->start_ns, t);
    p->ref_ns = MAX(p->ref_ns, op->ref_ns);
    p->bytes = MAX(p->bytes, sh->bytes);
    if (p->n_arrived == p->n_members) {
      ring->slot[seq & ring->mask] = 0;
      comm_ready(e, M, idx);
    }
    return;
  }
  /* Point-to-point: FIFO matching per (src, dst), both folded to their
   * representatives; the channel lives on the destination. */
  guint32 src = op->kind == SIM_OP_SEND ? r : peer;
  guint32 dst = op->kind == SIM_OP_SEND ? peer : r;
  Channel *ch = channel_of(e, rep_of(e, dst), rep_of(e, src));
  if (order != ORDER_QUEUE)
    order_check(e, &ch->side_stream[op->kind == SIM_OP_SEND], op->stream);
  /* The channel holds unmatched ops of one side only (sends or recvs). */
  gboolean other_side = FALSE;
  if (ch->len > 0) {
    guint64 h = ch->q[ch->head];
    other_side = w->ranks[h >> 32].ops[h & 0xffffffffu].kind != op->kind;
  }
  if (!other_side) {
    channel_push(ch, (guint64)r << 32 | i, t);
    return;
  }
  gint64 mate_arrive;
  guint64 mv = channel_pop(ch, &mate_arrive);
  guint32 mr = (guint32)(mv >> 32), mi = (guint32)(mv & 0xffffffffu);
  const SimOp *mop = &w->ranks[mr].ops[mi];
  idx = pending_alloc(&M->pool);
  p = &M->pool.pend[idx];
  p->p2p = TRUE;
  p->group_or_src = src;
  p->seq_or_dst = dst;
  p->n_members = 2;
  p->n_arrived = 2;
  pending_reserve(p, 2);
  p->members[0].rank = mr;
  p->members[0].op = mi;
  p->members[1].rank = r;
  p->members[1].op = i;
  p->start_ns = MAX(t, mate_arrive);
  p->ref_ns = MAX(op->ref_ns, mop->ref_ns);
  p->bytes = MAX(sh->bytes, e->shapes[mop->shape].bytes);
  p->coll = SIM_COLL_SEND_RECV;
  comm_ready(e, M, idx);
}

/* The duration of pending record p's transfer, from its start: the
 * recorded one, else the network's; in [0, DUR_CAP]. */
static gint64 comm_dur(const SimEngine *e, const Pending *p)
{
  const SimMachine *m = e->m;
  gint64 dur;
  if (p->ref_ns > 0)
    dur = p->ref_ns;
  else if (p->p2p)
    dur = m->p2p_ns(m->ctx, p->group_or_src, p->seq_or_dst, p->bytes,
                    p->start_ns);
  else
    dur = m->collective_ns(m->ctx, p->group_or_src, p->bytes,
                           (SimCollType)p->coll, p->start_ns);
  return CLAMP(dur, 0, DUR_CAP);
}

/* Member op i of rank r ran its transfer [start, start + dur): logs it,
 * moves its stream on and wakes what waits for it (on lane L). */
static void comm_apply(SimEngine *e, Lane *L, guint r, guint32 i, gint64 start,
                       gint64 dur)
{
  RankState *rs = &e->ranks[r];
  gint64 end = start + dur;
  if (G_UNLIKELY(end > TIME_MAX)) {
    end = TIME_MAX;
    note_bad(rs, i);
  }
  const SimOp *op = &e->w->ranks[r].ops[i];
  Stream *st = &rs->streams[op->stream];
  gint64 arrive = st->arrive_ns;
  gint64 blocked = start - arrive;
  /* A stream's communication ops complete in its order: its cursor in the
   * comm log is the entry of op i. */
  OpLog *l = &rs->clog[st->comm++];
  if (G_LIKELY(dur < LOG_ESC && blocked < LOG_ESC)) {
    l->dur = (guint32)dur;
    l->aux = (guint32)blocked;
  } else {
    log_overflow(rs, l, arrive, start, end, rs->comm_inc);
  }
  st->free_ns = end;
  st->cur = i + 1;
  st->state = ST_RUN;
  lane_push(L, r, op->stream);
  op_done(e, L, r, st, i, arrive, start, end, rs->comm_inc);
}

/* Runs the transfer of pending record idx of lane L's pool from its start
 * time: every member's op is done and its stream goes on L's work. */
static void comm_start(SimEngine *e, Lane *L, guint32 idx)
{
  Pending *p = &L->pool.pend[idx];
  gint64 dur = comm_dur(e, p);
  for (guint k = 0; k < p->n_members; k++)
    comm_apply(e, L, p->members[k].rank, p->members[k].op, p->start_ns, dur);
  pending_release(&L->pool, idx);
}

/* Stream st requests clocks c at time t (>= every earlier request of the
 * stream): a switch landing the latency later when c differs from the
 * target.  A switch in flight that has not landed by t never lands. */
static inline void request_clocks(SimEngine *e, RankState *rs, Stream *st,
                                  SimClocks c, gint64 t)
{
  if (st->clk_land_ns <= t)
    st->clk_cur = st->clk_target;
  if (c.sm_mhz != st->clk_target.sm_mhz ||
      c.mem_mhz != st->clk_target.mem_mhz) {
    rs->switches++;
    st->clk_target = c;
    st->clk_land_ns = t + e->m->switch_latency_ns;
    if (e->m->switch_latency_ns == 0)
      st->clk_cur = c;
  }
}

/* Applies the clock-switch rules to stream st for a kernel requesting c at
 * time t, and returns the clocks in force at t.  init: the stream's clocks
 * before the run from the plan, or NULL. */
static inline SimClocks clocks_at(SimEngine *e, RankState *rs, Stream *st,
                                  SimClocks c, gint64 t, const SimPlan *plan,
                                  const SimInit *init)
{
  if (G_UNLIKELY(!st->clk_init)) {
    st->clk_init = TRUE;
    if (init == NULL || !init->set) {
      /* Clocks are set before the run starts: no switch for the first. */
      st->clk_cur = st->clk_target = c;
      st->clk_land_ns = 0;
      return c;
    }
    /* As after an iteration of the plan, then the kernel's own request. */
    st->clk_cur = plan->pairs[init->cur];
    st->clk_target = plan->pairs[init->target];
    st->clk_land_ns = init->land_ns;
  }
  request_clocks(e, rs, st, c, t);
  return st->clk_cur;
}

/* The switch in flight on stream st lands inside kernel i of rank r, which
 * started at `start` and would last `dur` at the clocks in force (priced
 * in `slot`): splits the kernel there (sim/engine.h), logs both parts (an
 * overflow record), reports the first part to the observer and returns the
 * kernel's end; *inc2 gets the second part's increment.  The switch has
 * landed afterwards.  Out of line: it runs once per landing at most. */
static __attribute__((noinline)) gint64
split_kernel(SimEngine *e, guint r, Stream *st, guint32 i, gint64 start,
             gint64 dur, const CostSlot *slot, float *inc2)
{
  RankState *rs = &e->ranks[r];
  const SimOp *op = &e->w->ranks[r].ops[i];
  gint64 split = st->clk_land_ns;
  /* slot is the shape's cache entry, about to be repriced: copy first. */
  float inc1 = slot->inc;
  SimClocks c1 = {slot->cost.sm_mhz, slot->cost.mem_mhz};
  st->clk_cur = st->clk_target;
  SimClocks c2 = G_UNLIKELY(e->boost != NULL) ? boost_cap(e, r, st->clk_cur)
                                              : st->clk_cur;
  const CostSlot *now = price(e, r, op->shape, c2);
  gint64 rest = sim_kernel_rest_ns(dur, split - start,
                                   (double)op->ref_ns * now->cost.time_scale);
  gint64 end;
  if (G_UNLIKELY(split >= TIME_MAX || rest > TIME_MAX - split)) {
    end = TIME_MAX;
    split = MIN(split, end);
    note_bad(rs, i);
  } else {
    end = split + rest;
  }
  log_overflow(rs, &rs->log[i], start, start, end, inc1);
  Overflow *o = &rs->ovf[rs->n_ovf - 1];
  o->split = split;
  o->inc2 = now->inc;
  if (G_UNLIKELY(e->observer != NULL)) {
    SimOpRecord rec = {e->iter, r, i, start, start, split, 0.0, c1,
                       record_limit(e, r)};
    rec.power_w = rs->idle_w + inc1;
    e->observer(e->observer_data, &rec);
  }
  *inc2 = now->inc;
  return end;
}

/* Whether stream st is steady at pair c: its clocks set, c the landed
 * target (a kernel asking for c then needs no switch rule). */
static inline gboolean steady_at(const Stream *st, SimClocks c)
{
  return st->clk_init && pack_clocks(c) == pack_clocks(st->clk_target) &&
         pack_clocks(st->clk_cur) == pack_clocks(c);
}

/* First early request of the ascending list a[0, n) on an op >= i. */
static inline guint32 ahead_from(const SimAhead *a, guint32 n, guint32 i)
{
  guint32 at;
  SIM_LOWER_BOUND(at, 0, n, k, a[k].op, i);
  return at;
}

/* Whether op's wait (if any) is done; if so *ready becomes the later of
 * *ready and its end.  Ops of a stream are scheduled in order, so op j is
 * done exactly when its stream's cursor has moved past it. */
static inline gboolean wait_ready(const RankState *rs, const SimOp *ops,
                                  const SimOp *op, gint64 *ready)
{
  if (op->wait == SIM_NO_WAIT)
    return TRUE;
  const Stream *owner = &rs->streams[ops[op->wait].stream];
  if (owner->cur <= op->wait)
    return FALSE;
  *ready = MAX(*ready, target_end(rs, owner, op->wait));
  return TRUE;
}

/* advance()'s fast path: from op i of stream st (of rank r), the run of
 * kernels that take the steady path (each at `c`, the stream's landed
 * target) with nothing else to do: no kernel log, no observer, and none
 * of them a wait target.  Returns the first op it leaves to advance()
 * (not a kernel, a wait target, waiting for an op not yet done, or one
 * whose duration overflows the log's 32 bits); *t is the stream's time
 * after the kernels before it.  The same expressions as advance()'s, in a
 * loop small enough for its state to stay in registers (in advance()'s
 * body the compiler spills it). */
static __attribute__((noinline)) guint32
steady_kernels(SimEngine *e, const RankState *rs, CostSlot *cache, guint r,
               const SimOp *ops, guint32 i, guint32 end_i, guint32 stop,
               SimClocks c, gint64 *t)
{
  gint64 now = *t;
  for (; i < end_i && i != stop; i++) {
    const SimOp *op = &ops[i];
    if (op->kind != SIM_OP_KERNEL)
      break;
    gint64 ready = now;
    if (!wait_ready(rs, ops, op, &ready))
      break;
    const CostSlot *slot = price_in(e, cache, r, op->shape, c);
    gint64 dur = slot_ns(slot, op);
    if (G_UNLIKELY(dur < 0 || dur >= LOG_ESC || dur > TIME_MAX - ready))
      break; /* the slow path clamps it at TIME_MAX */
    now = ready + dur;
  }
  *t = now;
  return i;
}

/* Runs stream s of rank r as far as it can go.
 *
 * One long function on purpose (as Lua's luaV_execute): it is
 * the replay's inner loop, a few instructions per kernel, and its state
 * (cursor, stream time, the next wait target and early request) lives in
 * registers across iterations.  Everything rare is already out of line
 * (clocks_at, split_kernel, sim_boost_clocks, log_overflow, comm_arrive). */
static void advance(SimEngine *e, Lane *L, guint r, guint s)
{
  RankState *rs = &e->ranks[r];
  Stream *st = &rs->streams[s];
  if (st->state != ST_RUN)
    return;
  const SimOp *ops = e->w->ranks[r].ops;
  OpLog *log = rs->log;
  /* Whether kernels are logged: when not, every kernel runs at the one
   * pair, never split, and the accounting prices it again (klog). */
  const gboolean klog = e->klog;
  const SimPlan *plan = e->plan;
  const guint16 *pidx = plan->index != NULL && r < plan->n_ranks
                            ? plan->index[r]
                            : NULL;
  const SimClocks *pairs = plan->pairs;
  const guint n_pairs = plan->n_pairs;
  /* op_done() only matters for wait targets and observers. */
  const gboolean observed = e->observer != NULL;
  guint32 next_tgt = st->tgt < st->tgt_hi ? rs->targets[st->tgt] : G_MAXUINT32;
  /* Early requests of this stream (plans made for a latency), found from
   * the cursor; the loop stops its fast path at the next one as at the
   * next wait target. */
  const SimAhead *ah = NULL;
  guint32 n_ah = 0, ka = 0, next_ahead = G_MAXUINT32;
  if (G_UNLIKELY(plan->ahead != NULL) && r < plan->n_ranks &&
      plan->ahead[r] != NULL) {
    ah = plan->ahead[r];
    n_ah = plan->n_ahead[r];
    ka = ahead_from(ah, n_ah, st->cur);
    if (ka < n_ah && ah[ka].op < st->end)
      next_ahead = ah[ka].op;
  }
  guint32 next_stop = MIN(next_tgt, next_ahead);
  /* Without a per-op plan every kernel asks for pairs[0], so whether the
   * stream is steady at it (the pair is its landed target) changes only
   * where its clocks do: clocks_at, split_kernel and early requests,
   * after which it is found again (STEADY0).  With one, per kernel. */
  const SimClocks req0 = n_pairs > 0 ? pairs[0] : (SimClocks){0, 0};
#define STEADY0() (pidx == NULL && steady_at(st, req0))
  gboolean steady0 = STEADY0();
  /* Loop invariants in locals: the loop's stores and its out-of-line
   * calls would otherwise have them loaded again for every kernel. */
  const guint32 end_i = st->end;
  const gboolean boosted = e->boost != NULL;
  CostSlot *const cache = rs->cache;
  /* The fast path's conditions: kernels not logged (so no per-op plan, no
   * early requests, no initial clocks, no boost controller) and no
   * observer. */
  const gboolean fast = !klog && !observed;
  gint64 t = st->free_ns;
  guint32 i = st->cur;
  for (; i < end_i; i++) {
    if (fast && steady0) {
      guint32 from = i;
      i = steady_kernels(e, rs, cache, r, ops, i, end_i, next_stop, req0, &t);
      L->steady_kernels += i - from;
      if (i == end_i)
        break;
    }
    const SimOp *op = &ops[i];
    gint64 ready = t;
    if (!wait_ready(rs, ops, op, &ready)) {
      st->state = ST_WAIT_OP;
      st->waiting_for = op->wait;
      break;
    }
    if (G_LIKELY(op->kind == SIM_OP_KERNEL)) {
      if (G_UNLIKELY(i == next_ahead)) {
        /* Requests made before this kernel starts, in the wait before it
         * (not before the stream's previous op ended at t). */
        for (; i == next_ahead && ah[ka].from_start; ka++) {
          if (st->clk_init)
            request_clocks(e, rs, st, pairs[ah[ka].pair],
                           MAX(t, ready - ah[ka].lead_ns));
          next_ahead = ka + 1 < n_ah && ah[ka + 1].op < st->end
                           ? ah[ka + 1].op
                           : G_MAXUINT32;
        }
        next_stop = MIN(next_tgt, next_ahead);
        steady0 = STEADY0();
      }
      SimClocks req = req0, c;
      gboolean steady = steady0;
      if (pidx != NULL) {
        guint k = pidx[i];
        req = pairs[k < n_pairs ? k : 0];
        steady = steady_at(st, req);
      }
      if (G_LIKELY(steady))
        c = req;
      else
        c = clocks_at(e, rs, st, req, ready, plan,
                      plan->init != NULL && r < plan->n_ranks &&
                              plan->init[r] != NULL
                          ? &plan->init[r][s]
                          : NULL);
      if (G_UNLIKELY(boosted))
        c = sim_boost_clocks(e, r, c, ready);
      const CostSlot *slot = price_in(e, cache, r, op->shape, c);
      gint64 dur = slot_ns(slot, op);
      float inc = slot->inc;
      gint64 end = ready + dur;
      gint64 split = 0; /* when a switch landed inside it (0: none) */
      if (G_UNLIKELY(!steady &&
                     pack_clocks(st->clk_cur) != pack_clocks(st->clk_target) &&
                     st->clk_land_ns < end)) {
        /* A switch in flight (it lands after `ready`, or clocks_at would
         * have applied it) lands before the kernel ends. */
        split = st->clk_land_ns;
        end = split_kernel(e, r, st, i, ready, dur, slot, &inc);
      } else if (G_LIKELY(dur >= 0 && dur < LOG_ESC && end <= TIME_MAX)) {
        if (klog) {
          log[i].dur = (guint32)dur;
          log[i].aux = float_bits(inc);
        }
      } else {
        if (G_UNLIKELY(end > TIME_MAX)) {
          end = TIME_MAX;
          note_bad(rs, i);
        }
        if (klog)
          log_overflow(rs, &log[i], ready, ready, end, inc);
      }
      if (G_UNLIKELY(!steady))
        steady0 = STEADY0();
      t = end;
      if (G_UNLIKELY(boosted))
        boost_note(e, r, end, inc);
      if (G_UNLIKELY(i == next_stop || observed)) {
        for (; i == next_ahead; ka++) {
          /* Made lead_ns before the kernel ends, but not before it starts,
           * nor before the switch that landed inside it, nor so early
           * that it would land inside it too (the list is in time order,
           * so requests stay in order). */
          gint64 lead = MIN(ah[ka].lead_ns, e->m->switch_latency_ns);
          gint64 tq = MAX(MAX(ready, split), end - lead);
          request_clocks(e, rs, st, pairs[ah[ka].pair], tq);
          next_ahead = ka + 1 < n_ah && ah[ka + 1].op < st->end
                           ? ah[ka + 1].op
                           : G_MAXUINT32;
          steady0 = STEADY0();
        }
        gint64 from = split != 0 ? split : ready; /* the last part */
        op_done(e, L, r, st, i, from, from, end, inc);
        next_tgt = st->tgt < st->tgt_hi ? rs->targets[st->tgt] : G_MAXUINT32;
        next_stop = MIN(next_tgt, next_ahead);
      }
    } else if (op->kind == SIM_OP_MARKER) {
      /* Not logged: the accounting knows it lasts nothing. */
      t = ready;
      op_done(e, L, r, st, i, ready, ready, ready, 0.0f);
      next_tgt = st->tgt < st->tgt_hi ? rs->targets[st->tgt] : G_MAXUINT32;
      next_stop = MIN(next_tgt, next_ahead);
    } else if (op->kind == SIM_OP_HOST) {
      /* CPU time: its recorded duration at any clocks, no GPU power. */
      t = host_op(e, rs, i, op, ready);
      op_done(e, L, r, st, i, ready, ready, t, 0.0f);
      next_tgt = st->tgt < st->tgt_hi ? rs->targets[st->tgt] : G_MAXUINT32;
      next_stop = MIN(next_tgt, next_ahead);
    } else {
      st->state = ST_WAIT_COMM;
      st->cur = i;
      st->free_ns = t;
      st->arrive_ns = ready;
      if (e->order == ORDER_LANES) {
        /* Matched on its own lane at once; on another, at the round's
         * end (no lane writes another's matching state). */
        guint ml = match_lane(e, r, op);
        if (ml == (guint)(L - e->lanes)) {
          comm_arrive(e, L, r, i, ready);
        } else {
          ArrList *a = &L->arr_to[ml];
          Arr x = {(guint64)r << 32 | i, ready};
          APPEND(a->v, a->n, a->cap, x);
        }
      } else {
        comm_arrive(e, L, r, i, ready);
      }
      return;
    }
  }
  st->cur = i;
  st->free_ns = t;
  if (i == st->end && st->state == ST_RUN) {
    st->state = ST_DONE;
    if (--rs->n_unfinished == 0)
      L->finished++;
  }
}

#undef STEADY0

static void drain_work(SimEngine *e, Lane *L)
{
  while (L->n_work > 0) {
    guint64 v = L->work[--L->n_work];
    advance(e, L, (guint)(v >> 32), (guint)(v & 0xffffffffu));
  }
}

/* ---- the core's entry points for its drivers (sim/replay.h) -------------- */

/* Out-of-line doors to the static functions above, so that the calls the
 * core makes within itself are the ones the compiler sees in this file. */
void sim_replay_drain(SimEngine *e, Lane *L)
{
  drain_work(e, L);
}

void sim_replay_start(SimEngine *e, Lane *L, guint32 idx)
{
  comm_start(e, L, idx);
}

void sim_replay_arrive(SimEngine *e, Lane *M, guint r, guint32 i, gint64 t)
{
  comm_arrive(e, M, r, i, t);
}

void sim_replay_apply(SimEngine *e, Lane *L, guint r, guint32 i,
                      gint64 start, gint64 dur)
{
  comm_apply(e, L, r, i, start, dur);
}

gint64 sim_replay_comm_dur(const SimEngine *e, const Pending *p)
{
  return comm_dur(e, p);
}

void sim_replay_release(Pool *pl, guint32 idx)
{
  pending_release(pl, idx);
}
