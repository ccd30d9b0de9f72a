/* sim/engine.c -- dataflow replay of per-rank op streams with an event queue
 * for synchronisation points, and exact integration of an additive power
 * model.
 *
 * How a replay works
 * ------------------
 * One iteration at a time.  Every (rank, stream) pair has a cursor into the
 * rank's op array (ops grouped by stream, see sim/workload.h) and the time
 * its stream becomes free.  advance() runs a stream in a tight loop: a kernel
 * starts when the stream is free and its `wait` op has finished, lasts
 * ref_ns * time_scale (priced by the machine, cached per shape and clock
 * pair), and the cursor moves on.  No event is queued per kernel.
 *
 * A stream stops in two cases: its next op waits for an op (on another
 * stream of the same rank) that has not been scheduled yet, or its next op is
 * communication.  A communication op records the rank's arrival in a pending
 * record (collectives: keyed by group and the rank's sequence number on that
 * group; point-to-point: FIFO per (src, dst) pair).  When the last member
 * arrives the record's start time is known (the latest arrival) and a
 * COMM_START event is queued at that time.  Popping it prices the transfer
 * (network callback), schedules every member's op and resumes their streams.
 * Completing any op also resumes the streams of that rank that were waiting
 * for it.  Resumptions go through a small work stack, never recursion.
 *
 * Because every start time is a max over finish times (a max-plus
 * computation), the processing order cannot change the result; the event
 * queue's total order (time, priority, sequence) makes the processing itself
 * deterministic too, and puts transfer starts in time order (which a shared
 * bandwidth model needs).
 *
 * Energy: once an iteration is scheduled, each rank's streams are swept
 * together (a k-way merge of their interval sequences) to split the
 * iteration into segments, each attributed to the highest-priority state
 * (kernel > communication > blocked > idle); see sim/engine.h for the power
 * model.  Per op: t_arrive <= t_start <= t_end, with [t_arrive, t_start) the
 * blocked part of a communication op.
 *
 * Limits: the clocks in force at a kernel's start hold for the whole kernel;
 * clock-switch state is kept per (rank, stream); bandwidth sharing between
 * concurrent collectives is left to the network callback.
 */
#include "sim/engine.h"
#include "sim/queue.h"

#include <math.h>
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

void sim_result_free(SimResult *r)
{
  if (r == NULL)
    return;
  g_free(r->per_gpu);
  g_free(r->iterations);
  g_free(r);
}

/* ---- engine state --------------------------------------------------------- */

enum { EV_RESUME = 1, EV_COMM_START = 2 };
/* At equal times transfers start before streams resume, so a stream resumed
 * at t sees every transfer that began at t. */
enum { PRIO_COMM = 0, PRIO_RESUME = 1 };

enum { ST_RUN = 0, ST_WAIT_OP, ST_WAIT_COMM, ST_DONE };

typedef struct {
  guint32 cur, end;      /* cursor and end in the rank's op array */
  guint32 waiting_for;   /* ST_WAIT_OP: op index */
  guint8 state;
  gint64 free_ns;        /* stream free from */
  SimClocks clk_cur;     /* clocks in force */
  SimClocks clk_target;  /* last requested */
  gint64 clk_land_ns;    /* when clk_target takes effect */
  gboolean clk_init;
} Stream;

typedef struct {
  guint32 shape_pairs_tag; /* packed clocks + 1 of the cached cost; 0 = none */
  SimCost cost;
} CostSlot;

typedef struct {
  gint64 *t_arrive, *t_start, *t_end; /* per op, this iteration */
  float *inc_w;                       /* per op power increment above idle */
  Stream *streams;
  CostSlot *cache;                    /* per shape */
  guint n_streams;
  guint n_unfinished;                 /* streams not yet done */
  guint64 switches;                   /* this iteration */
} RankState;

typedef struct {
  guint32 rank, op;
} Member;

typedef struct {
  gboolean used;
  gboolean p2p;
  guint32 group_or_src, seq_or_dst;
  guint n_members, n_arrived;
  gint64 start_ns;
  gint64 ref_ns;     /* max recorded duration of members (0 = model) */
  double bytes;
  guint8 coll;
  Member *members;   /* n_members */
} Pending;

struct SimEngine {
  const SimWorkload *w;
  const SimMachine *m;
  RankState *ranks;
  SimQueue *queue;
  GArray *pending;          /* of Pending */
  GArray *pending_free;     /* guint32 indices */
  GHashTable *coll_index;   /* (group<<32|seq) -> pending index + 1 */
  GHashTable *seq;          /* (rank<<32|group) -> next seq (owned gint64[2]) */
  GHashTable *p2p_q;        /* (src<<32|dst) -> GQueue of Member* (unmatched) */
  GArray *work;             /* guint64 (rank<<32|stream) to advance */
  guint n_unfinished_ranks;
  guint iter;
  SimPlan *plan;            /* current (borrowed or replaced) */
  SimObserver observer;
  gpointer observer_data;
};

/* Keys pack two 32-bit ids (group<<32 | seq, src<<32 | dst, ...);
 * g_int64_hash folds them to a ^ b, which collides heavily (group 3 seq 5 =
 * group 5 seq 3).  The splitmix64 finalizer mixes every bit. */
static guint key_hash(gconstpointer k)
{
  guint64 x = (guint64)*(const gint64 *)k;
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return (guint)x;
}

static void free_member_queue(gpointer q)
{
  g_queue_free_full(q, g_free);
}

static gint64 *int64_key(guint64 v)
{
  gint64 *k = g_new(gint64, 2);
  k[0] = (gint64)v;
  k[1] = 0;
  return k;
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
  if (!sim_workload_validate(w, error))
    return NULL;
  SimEngine *e = g_new0(SimEngine, 1);
  e->w = w;
  e->m = m;
  e->ranks = g_new0(RankState, MAX(w->n_ranks, 1));
  guint n_shapes = w->shapes->len;
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    RankState *rs = &e->ranks[r];
    gsize n = MAX(rk->n_ops, 1);
    rs->t_arrive = g_new(gint64, n);
    rs->t_start = g_new(gint64, n);
    rs->t_end = g_new(gint64, n);
    rs->inc_w = g_new0(float, n);
    rs->n_streams = rk->n_ops > 0 ? rk->n_streams : 0;
    rs->streams = g_new0(Stream, MAX(rs->n_streams, 1));
    rs->cache = g_new0(CostSlot, MAX(n_shapes, 1));
  }
  e->queue = sim_queue_new();
  e->pending = g_array_new(FALSE, TRUE, sizeof(Pending));
  e->pending_free = g_array_new(FALSE, FALSE, sizeof(guint32));
  e->coll_index = g_hash_table_new_full(key_hash, g_int64_equal, g_free,
                                        NULL);
  e->seq = g_hash_table_new_full(key_hash, g_int64_equal, g_free, NULL);
  e->p2p_q = g_hash_table_new_full(key_hash, g_int64_equal, g_free,
                                   free_member_queue);
  e->work = g_array_new(FALSE, FALSE, sizeof(guint64));
  return e;
}

void sim_engine_free(SimEngine *e)
{
  if (e == NULL)
    return;
  for (guint r = 0; r < e->w->n_ranks; r++) {
    RankState *rs = &e->ranks[r];
    g_free(rs->t_arrive);
    g_free(rs->t_start);
    g_free(rs->t_end);
    g_free(rs->inc_w);
    g_free(rs->streams);
    g_free(rs->cache);
  }
  g_free(e->ranks);
  for (guint i = 0; i < e->pending->len; i++)
    g_free(g_array_index(e->pending, Pending, i).members);
  g_array_unref(e->pending);
  g_array_unref(e->pending_free);
  g_hash_table_unref(e->coll_index);
  g_hash_table_unref(e->seq);
  g_hash_table_unref(e->p2p_q);
  g_array_unref(e->work);
  sim_queue_free(e->queue);
  g_free(e);
}

void sim_engine_set_observer(SimEngine *e, SimObserver fn, gpointer data)
{
  e->observer = fn;
  e->observer_data = data;
}

/* ---- pricing ---------------------------------------------------------------- */

static inline SimClocks plan_clocks(const SimEngine *e, guint r, guint32 op)
{
  const SimPlan *p = e->plan;
  guint idx = 0;
  if (p->index != NULL && r < p->n_ranks && p->index[r] != NULL)
    idx = p->index[r][op];
  return p->pairs[idx < p->n_pairs ? idx : 0];
}

static inline guint32 pack_clocks(SimClocks c)
{
  return ((guint32)c.sm_mhz << 16 | c.mem_mhz) + 1u;
}

/* Cost of `shape` on GPU r at clocks c, through the per-rank cache. */
static inline const SimCost *price(SimEngine *e, guint r, guint32 shape,
                                   SimClocks c)
{
  CostSlot *slot = &e->ranks[r].cache[shape];
  guint32 tag = pack_clocks(c);
  if (slot->shape_pairs_tag != tag) {
    e->m->kernel_cost(e->m->ctx, r, shape, c, e->iter, &slot->cost);
    slot->shape_pairs_tag = tag;
  }
  return &slot->cost;
}

/* ---- scheduling ------------------------------------------------------------- */

static void push_work(SimEngine *e, guint r, guint s)
{
  guint64 v = (guint64)r << 32 | s;
  g_array_append_val(e->work, v);
}

/* Marks op i of rank r scheduled and wakes the streams waiting for it. */
static void op_done(SimEngine *e, guint r, guint32 i)
{
  RankState *rs = &e->ranks[r];
  for (guint s = 0; s < rs->n_streams; s++) {
    Stream *st = &rs->streams[s];
    if (st->state == ST_WAIT_OP && st->waiting_for == i) {
      st->state = ST_RUN;
      push_work(e, r, s);
    }
  }
  if (e->observer != NULL) {
    const SimOp *op = &e->w->ranks[r].ops[i];
    SimOpRecord rec = {e->iter, r, i, rs->t_arrive[i], rs->t_start[i],
                       rs->t_end[i], 0.0, {0, 0}};
    double idle = e->m->idle_power_w[r];
    rec.power_w = idle + rs->inc_w[i];
    if (op->kind == SIM_OP_KERNEL) {
      const SimCost *c = &e->ranks[r].cache[op->shape].cost;
      rec.clocks.sm_mhz = c->sm_mhz;
      rec.clocks.mem_mhz = c->mem_mhz;
    }
    e->observer(e->observer_data, &rec);
  }
}

static guint32 pending_alloc(SimEngine *e)
{
  guint32 idx;
  if (e->pending_free->len > 0) {
    idx = g_array_index(e->pending_free, guint32, e->pending_free->len - 1);
    g_array_set_size(e->pending_free, e->pending_free->len - 1);
  } else {
    Pending z = {0};
    g_array_append_val(e->pending, z);
    idx = e->pending->len - 1;
  }
  return idx;
}

static Pending *pending_at(SimEngine *e, guint32 idx)
{
  return &g_array_index(e->pending, Pending, idx);
}

/* Records the arrival of rank r's communication op i at time t.  Queues a
 * COMM_START event when the transfer's last member has arrived. */
static void comm_arrive(SimEngine *e, guint r, guint32 i, gint64 t)
{
  const SimWorkload *w = e->w;
  const SimOp *op = &w->ranks[r].ops[i];
  const SimShape *sh = &g_array_index(w->shapes, SimShape, op->shape);
  e->ranks[r].t_arrive[i] = t;
  guint32 idx;
  Pending *p;
  if (op->kind == SIM_OP_COLLECTIVE) {
    guint n_members;
    sim_workload_group(w, op->peer, &n_members);
    gint64 skey = (gint64)((guint64)r << 32 | op->peer);
    gint64 *cnt = g_hash_table_lookup(e->seq, &skey);
    if (cnt == NULL) {
      cnt = int64_key((guint64)skey);
      g_hash_table_insert(e->seq, cnt, cnt);
    }
    guint32 seq = (guint32)cnt[1]++;
    gint64 ckey = (gint64)((guint64)op->peer << 32 | seq);
    gpointer v = g_hash_table_lookup(e->coll_index, &ckey);
    if (v == NULL) {
      idx = pending_alloc(e);
      p = pending_at(e, idx);
      p->used = TRUE;
      p->p2p = FALSE;
      p->group_or_src = op->peer;
      p->seq_or_dst = seq;
      p->n_members = n_members;
      p->n_arrived = 0;
      p->start_ns = t;
      p->ref_ns = 0;
      p->bytes = sh->bytes;
      p->coll = sh->coll;
      p->members = g_renew(Member, p->members, n_members);
      g_hash_table_insert(e->coll_index, int64_key((guint64)ckey),
                          GUINT_TO_POINTER(idx + 1));
    } else {
      idx = GPOINTER_TO_UINT(v) - 1;
      p = pending_at(e, idx);
    }
    p->members[p->n_arrived].rank = r;
    p->members[p->n_arrived].op = i;
    p->n_arrived++;
    p->start_ns = MAX(p->start_ns, t);
    p->ref_ns = MAX(p->ref_ns, op->ref_ns);
    p->bytes = MAX(p->bytes, sh->bytes);
    if (p->n_arrived == p->n_members) {
      g_hash_table_remove(e->coll_index, &ckey);
      sim_queue_push(e->queue, p->start_ns, PRIO_COMM, EV_COMM_START, idx);
    }
    return;
  }
  /* Point-to-point: FIFO matching per (src, dst). */
  guint32 src = op->kind == SIM_OP_SEND ? r : op->peer;
  guint32 dst = op->kind == SIM_OP_SEND ? op->peer : r;
  gint64 key = (gint64)((guint64)src << 32 | dst);
  GQueue *q = g_hash_table_lookup(e->p2p_q, &key);
  if (q == NULL) {
    q = g_queue_new();
    g_hash_table_insert(e->p2p_q, int64_key((guint64)key), q);
  }
  /* The queue holds unmatched ops of one side only (sends or recvs). */
  Member *head = g_queue_peek_head(q);
  gboolean other_side = head != NULL &&
                        w->ranks[head->rank].ops[head->op].kind != op->kind;
  if (!other_side) {
    Member *m = g_new(Member, 1);
    m->rank = r;
    m->op = i;
    g_queue_push_tail(q, m);
    return;
  }
  Member *mate = g_queue_pop_head(q);
  const SimOp *mop = &w->ranks[mate->rank].ops[mate->op];
  idx = pending_alloc(e);
  p = pending_at(e, idx);
  p->used = TRUE;
  p->p2p = TRUE;
  p->group_or_src = src;
  p->seq_or_dst = dst;
  p->n_members = 2;
  p->n_arrived = 2;
  p->members = g_renew(Member, p->members, 2);
  p->members[0] = *mate;
  p->members[1].rank = r;
  p->members[1].op = i;
  p->start_ns = MAX(t, e->ranks[mate->rank].t_arrive[mate->op]);
  p->ref_ns = MAX(op->ref_ns, mop->ref_ns);
  p->bytes = MAX(sh->bytes,
                 g_array_index(w->shapes, SimShape, mop->shape).bytes);
  p->coll = SIM_COLL_SEND_RECV;
  g_free(mate);
  sim_queue_push(e->queue, p->start_ns, PRIO_COMM, EV_COMM_START, idx);
}

/* Schedules the transfer of pending record idx at its start time. */
static void comm_start(SimEngine *e, guint32 idx)
{
  Pending *p = pending_at(e, idx);
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
  dur = MAX(dur, 0);
  for (guint k = 0; k < p->n_members; k++) {
    guint r = p->members[k].rank;
    guint32 i = p->members[k].op;
    RankState *rs = &e->ranks[r];
    const SimOp *op = &e->w->ranks[r].ops[i];
    rs->t_start[i] = p->start_ns;
    rs->t_end[i] = p->start_ns + dur;
    rs->inc_w[i] = (float)(m->comm_power_w[r] - m->idle_power_w[r]);
    Stream *st = &rs->streams[op->stream];
    st->free_ns = rs->t_end[i];
    st->cur = i + 1;
    st->state = ST_RUN;
    push_work(e, r, op->stream);
    op_done(e, r, i);
  }
  p->used = FALSE;
  g_array_append_val(e->pending_free, idx);
}

/* Applies the clock-switch rules to stream st for a kernel requesting c at
 * time t, and returns the clocks in force at t. */
static inline SimClocks clocks_at(SimEngine *e, RankState *rs, Stream *st,
                                  SimClocks c, gint64 t)
{
  if (!st->clk_init) {
    /* Clocks are set before the run starts: no switch for the first. */
    st->clk_cur = st->clk_target = c;
    st->clk_land_ns = 0;
    st->clk_init = TRUE;
    return c;
  }
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
  return st->clk_cur;
}

/* Runs stream s of rank r as far as it can go. */
static void advance(SimEngine *e, guint r, guint s)
{
  RankState *rs = &e->ranks[r];
  Stream *st = &rs->streams[s];
  const SimOp *ops = e->w->ranks[r].ops;
  if (st->state != ST_RUN)
    return;
  gint64 t = st->free_ns;
  guint32 i = st->cur;
  for (; i < st->end; i++) {
    const SimOp *op = &ops[i];
    gint64 ready = t;
    if (op->wait != SIM_NO_WAIT) {
      /* Ops of a stream are scheduled in order, so op j is done exactly
       * when its stream's cursor has moved past it. */
      const SimOp *wop = &ops[op->wait];
      if (rs->streams[wop->stream].cur <= op->wait) {
        st->state = ST_WAIT_OP;
        st->waiting_for = op->wait;
        break;
      }
      ready = MAX(ready, rs->t_end[op->wait]);
    }
    if (op->kind == SIM_OP_KERNEL) {
      SimClocks req = plan_clocks(e, r, i);
      SimClocks c = clocks_at(e, rs, st, req, ready);
      const SimCost *cost = price(e, r, op->shape, c);
      gint64 dur = (gint64)llround((double)op->ref_ns * cost->time_scale);
      rs->t_arrive[i] = rs->t_start[i] = ready;
      rs->t_end[i] = t = ready + dur;
      rs->inc_w[i] = (float)(cost->power_w - e->m->idle_power_w[r]);
      op_done(e, r, i);
    } else if (op->kind == SIM_OP_MARKER) {
      rs->t_arrive[i] = rs->t_start[i] = rs->t_end[i] = t = ready;
      rs->inc_w[i] = 0.0f;
      op_done(e, r, i);
    } else {
      st->state = ST_WAIT_COMM;
      st->cur = i;
      st->free_ns = t;
      comm_arrive(e, r, i, ready);
      return;
    }
  }
  st->cur = i;
  st->free_ns = t;
  if (i == st->end && st->state == ST_RUN) {
    st->state = ST_DONE;
    if (--rs->n_unfinished == 0)
      e->n_unfinished_ranks--;
  }
}

static void drain_work(SimEngine *e)
{
  while (e->work->len > 0) {
    guint64 v = g_array_index(e->work, guint64, e->work->len - 1);
    g_array_set_size(e->work, e->work->len - 1);
    advance(e, (guint)(v >> 32), (guint)(v & 0xffffffffu));
  }
}

/* ---- accounting ------------------------------------------------------------- */

typedef struct {
  SimResult *res;
  double iter_energy_j;
} Acc;

/* Sweeps rank r over [t0, t1) and adds its energy and time breakdown. */
static void account_rank(SimEngine *e, guint r, gint64 t0, gint64 t1, Acc *acc)
{
  const SimMachine *m = e->m;
  const SimRank *rk = &e->w->ranks[r];
  RankState *rs = &e->ranks[r];
  SimResult *res = acc->res;
  SimGpuResult *g = &res->per_gpu[r];
  const double idle_w = m->idle_power_w[r];
  const double block_inc = m->blocked_power_w[r] - idle_w;
  double energy = idle_w * (double)(t1 - t0) * 1e-9;

  /* Increments, attributed to their own op (or to blocked). */
  for (guint32 i = 0; i < rk->n_ops; i++) {
    const SimOp *op = &rk->ops[i];
    double d = (double)(rs->t_end[i] - rs->t_start[i]);
    double ej = (double)rs->inc_w[i] * d * 1e-9;
    res->by_class[op->klass].time_ns += d;
    res->by_class[op->klass].energy_j += ej;
    res->by_phase[op->phase].time_ns += d;
    res->by_phase[op->phase].energy_j += ej;
    energy += ej;
    if (op->kind == SIM_OP_KERNEL)
      g->flops += g_array_index(e->w->shapes, SimShape, op->shape).flops;
    double blocked = (double)(rs->t_start[i] - rs->t_arrive[i]);
    if (blocked > 0) {
      double bj = block_inc * blocked * 1e-9;
      res->blocked.energy_j += bj;
      g->blocked_j += bj;
      energy += bj;
    }
  }

  /* k-way sweep over streams for the baseline and the time partition. */
  guint ns = rs->n_streams;
  guint32 cur[SIM_MAX_STREAMS];
  guint8 phase[SIM_MAX_STREAMS]; /* 0 before arrive, 1 blocked, 2 active */
  for (guint s = 0; s < ns; s++) {
    cur[s] = rk->stream_off[s];
    phase[s] = 0;
  }
  gint64 tau = t0;
  double peak = idle_w;
  while (tau < t1) {
    gint64 next = t1;
    int best_kind = 0; /* 3 kernel, 2 comm, 1 blocked, 0 idle */
    guint32 best_op = 0;
    double inc_sum = 0.0;
    for (guint s = 0; s < ns; s++) {
      /* Skip intervals that ended at or before tau. */
      for (;;) {
        if (cur[s] >= rk->stream_off[s + 1])
          break;
        guint32 i = cur[s];
        gint64 edge = phase[s] == 0 ? rs->t_arrive[i]
                      : phase[s] == 1 ? rs->t_start[i]
                                      : rs->t_end[i];
        if (edge > tau)
          break;
        if (phase[s] == 2) {
          cur[s]++;
          phase[s] = 0;
        } else {
          phase[s]++;
        }
      }
      if (cur[s] >= rk->stream_off[s + 1])
        continue;
      guint32 i = cur[s];
      gint64 edge = phase[s] == 0 ? rs->t_arrive[i]
                    : phase[s] == 1 ? rs->t_start[i]
                                    : rs->t_end[i];
      next = MIN(next, edge);
      int kind = 0;
      if (phase[s] == 1) {
        kind = 1;
        inc_sum += block_inc;
      } else if (phase[s] == 2) {
        kind = rk->ops[i].kind == SIM_OP_KERNEL ? 3 : 2;
        inc_sum += rs->inc_w[i];
      }
      if (kind > best_kind) {
        best_kind = kind;
        best_op = i;
      }
    }
    double len = (double)(next - tau);
    double base_j = idle_w * len * 1e-9;
    switch (best_kind) {
    case 3:
    case 2: {
      const SimOp *op = &rk->ops[best_op];
      res->by_class[op->klass].energy_j += base_j;
      res->by_phase[op->phase].energy_j += base_j;
      if (best_kind == 3)
        g->kernel_ns += len;
      else
        g->comm_ns += len;
      break;
    }
    case 1:
      res->blocked.energy_j += base_j;
      res->blocked.time_ns += len;
      g->blocked_j += base_j;
      g->blocked_ns += len;
      break;
    default:
      res->idle.energy_j += base_j;
      res->idle.time_ns += len;
      g->idle_j += base_j;
      g->idle_ns += len;
      break;
    }
    if (len > 0)
      peak = MAX(peak, idle_w + inc_sum);
    tau = next;
  }
  g->energy_j += energy;
  g->switches += rs->switches;
  acc->res->switches += rs->switches;
  rs->switches = 0;
  g->peak_power_w = MAX(g->peak_power_w, peak);
  acc->iter_energy_j += energy;
}

/* ---- the run ---------------------------------------------------------------- */

static gboolean run_iteration(SimEngine *e, gint64 t0, gint64 *t1,
                              GError **error)
{
  const SimWorkload *w = e->w;
  e->n_unfinished_ranks = 0;
  g_hash_table_remove_all(e->seq);
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    RankState *rs = &e->ranks[r];
    rs->n_unfinished = 0;
    for (guint s = 0; s < rs->n_streams; s++) {
      Stream *st = &rs->streams[s];
      st->cur = rk->stream_off[s];
      st->end = rk->stream_off[s + 1];
      st->free_ns = t0;
      st->state = st->cur < st->end ? ST_RUN : ST_DONE;
      if (st->state == ST_RUN)
        rs->n_unfinished++;
    }
    if (rs->n_unfinished > 0)
      e->n_unfinished_ranks++;
    for (guint s = 0; s < rs->n_streams; s++)
      if (rs->streams[s].state == ST_RUN)
        sim_queue_push(e->queue, t0, PRIO_RESUME, EV_RESUME,
                       (guint64)r << 32 | s);
  }
  SimEvent ev;
  while (sim_queue_pop(e->queue, &ev)) {
    if (ev.kind == EV_RESUME)
      push_work(e, (guint)(ev.payload >> 32),
                (guint)(ev.payload & 0xffffffffu));
    else
      comm_start(e, (guint32)ev.payload);
    drain_work(e);
  }
  if (e->n_unfinished_ranks > 0) {
    for (guint r = 0; r < w->n_ranks; r++) {
      RankState *rs = &e->ranks[r];
      for (guint s = 0; s < rs->n_streams; s++) {
        Stream *st = &rs->streams[s];
        if (st->state == ST_DONE)
          continue;
        const SimOp *op = &w->ranks[r].ops[st->cur];
        g_set_error(error, SIM_ERROR, SIM_ERROR_DEADLOCK,
                    "replay deadlocked in iteration %u: rank %u stream %u "
                    "stuck at op %u (%s %s)%s",
                    e->iter, r, s, st->cur, sim_kind_name(op->kind),
                    sim_workload_name(w, op->name),
                    st->state == ST_WAIT_COMM
                        ? ", waiting for its communication partners"
                        : ", waiting for an op of another stream");
        return FALSE;
      }
    }
  }
  gint64 end = t0;
  for (guint r = 0; r < w->n_ranks; r++) {
    RankState *rs = &e->ranks[r];
    for (guint s = 0; s < rs->n_streams; s++)
      end = MAX(end, rs->streams[s].free_ns);
  }
  *t1 = end;
  return TRUE;
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
  g_autoptr(SimResult) res = g_new0(SimResult, 1);
  res->n_gpus = w->n_ranks;
  res->per_gpu = g_new0(SimGpuResult, MAX(w->n_ranks, 1));
  res->n_iterations = iterations;
  res->iterations = g_new0(SimIterResult, iterations);
  SimPlan *owned = NULL; /* a plan handed to us by iteration_begin */
  e->plan = plan;
  /* Forget anything a failed earlier run left behind. */
  sim_queue_clear(e->queue);
  g_hash_table_remove_all(e->coll_index);
  g_hash_table_remove_all(e->p2p_q);
  g_array_set_size(e->work, 0);
  for (guint i = 0; i < e->pending->len; i++)
    g_array_index(e->pending, Pending, i).used = FALSE;
  g_array_set_size(e->pending_free, 0);
  for (guint i = 0; i < e->pending->len; i++) {
    guint32 v = i;
    g_array_append_val(e->pending_free, v);
  }
  for (guint r = 0; r < w->n_ranks; r++)
    for (guint s = 0; s < e->ranks[r].n_streams; s++)
      e->ranks[r].streams[s].clk_init = FALSE;
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
      }
      /* Costs may depend on the iteration (stragglers): drop the cache. */
      for (guint r = 0; r < w->n_ranks; r++)
        memset(e->ranks[r].cache, 0, sizeof(CostSlot) * MAX(w->shapes->len, 1));
    }
    gint64 t1;
    if (!run_iteration(e, t0, &t1, error)) {
      sim_plan_free(owned);
      return NULL;
    }
    Acc acc = {res, 0.0};
    for (guint r = 0; r < w->n_ranks; r++)
      account_rank(e, r, t0, t1, &acc);
    res->iterations[it].time_ns = t1 - t0;
    res->iterations[it].energy_j = acc.iter_energy_j;
    t0 = t1;
  }
  sim_plan_free(owned);
  e->plan = NULL;
  res->time_ns = t0;
  for (guint r = 0; r < w->n_ranks; r++) {
    SimGpuResult *g = &res->per_gpu[r];
    res->energy_j += g->energy_j;
    res->waste_j += g->blocked_j + g->idle_j;
    res->flops += g->flops;
    res->peak_power_w = MAX(res->peak_power_w, g->peak_power_w);
  }
  res->ops = sim_workload_n_ops(w) * iterations;
  return g_steal_pointer(&res);
}
