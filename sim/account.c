/* sim/account.c -- one rank's energy and time partition for one iteration,
 * read back from the op log the replay wrote (sim/replay.c).
 *
 * Energy: once an iteration is scheduled, each rank's streams are swept
 * together (a k-way merge of their interval sequences, decoded from the log)
 * to split the iteration into segments, each attributed to the
 * highest-priority state (kernel > communication > blocked > idle; the lowest
 * stream wins a tie); see sim/engine.h for the power model.  Per op:
 * t_arrive <= t_start <= t_end, with [t_arrive, t_start) the blocked part of
 * a communication op.  While only one stream changes state (the common case:
 * stream 0's kernels, the others idle or in one long transfer), the sweep
 * runs that stream alone against the others' frozen states.  The sums are
 * accumulated in exactly the order of the straightforward merge, so results
 * are bit-identical to it.  A rank whose inputs equal those of an earlier
 * rank of its program is copied from it ("Ranks with the same inputs").
 *
 * Board power: each segment's power is idle plus the increments of every
 * stream.  While a kernel runs, the board's limit (SimMachine.power_limit_w)
 * holds that sum: the part above it is taken off the kernel's class and
 * phase (held_j).  The meter (below) reads the held power as the board's
 * sensor does, averaged over its window, for peak_power_w.
 */
#include "sim/oplog.h"
#include "sim/engine-private.h"

#include <string.h>

/* The accounting reads the replay's results through the op-log contract
 * (sim/oplog.h) alone.  It takes the engine object for the workload, the
 * machine's power constants, SimEngine.klog and the lane whose scratch
 * (memo, meter, copies) it uses, none of the replay's matching state. */

/* ---- reading the log ------------------------------------------------------- */

/* An op's times as the accounting sees them.  A split kernel is read as
 * its first part ([start, end) with inc), then its second ([end,
 * rest_end) with rest_inc); rest_end is 0 otherwise. */
typedef struct {
  gint64 arrive, start, end;
  float inc;
  float rest_inc;
  gint64 rest_end;
} Iv;

/* Where the accounting reads kernels from: */
enum {
  K_PRICE = 0, /* nowhere: no kernel log; each is priced again */
  K_LOG = 1,   /* the kernel log (SimEngine.klog), an escape sending the
                  reader to the overflow list */
  K_MEMO = 2   /* the lane's memo of the first pass (rs->log points at it
                  in the sweep's view of the rank), an escape meaning "too
                  long for 32 bits: priced again" */
};

/* Kernel i's duration and power increment: the logged (or memoised) ones,
 * or, when the iteration did not log kernels (SimEngine.klog), what the
 * replay computed for it: every kernel ran at the one pair, priced in the
 * rank's cache slot for its shape, which holds that pair all iteration.
 * FALSE: the log sends the reader to the overflow list. */
static inline gboolean kernel_entry(const RankState *rs, const SimOp *ops,
                                    guint32 i, guint kmode, gint64 *dur,
                                    float *inc)
{
  if (kmode != K_PRICE) {
    OpLog l = rs->log[i];
    if (G_LIKELY(l.dur != LOG_ESC)) {
      *dur = l.dur;
      *inc = bits_float(l.aux);
      return TRUE;
    }
    if (kmode == K_LOG)
      return FALSE;
  }
  const CostSlot *slot = &rs->cache[ops[i].shape];
  *dur = slot_ns(slot, &ops[i]);
  *inc = slot->inc;
  return TRUE;
}

/* Op i's times this iteration, given the end of the op before it on its
 * stream (the iteration start for the first); ci is its entry in the comm
 * log when it is a communication op. */
static inline void decode(const RankState *rs, const SimOp *ops, guint32 i,
                          guint32 ci, guint kmode, gint64 prev_end, Iv *iv)
{
  const SimOp *op = &ops[i];
  gint64 arrive = prev_end;
  if (op->wait != SIM_NO_WAIT) {
    const Stream *owner = &rs->streams[ops[op->wait].stream];
    arrive = MAX(arrive, target_end(rs, owner, op->wait));
  }
  iv->arrive = arrive;
  iv->rest_end = 0;
  OpLog l;
  if (op->kind == SIM_OP_MARKER) {
    iv->start = iv->end = arrive;
    iv->inc = 0.0f;
    return;
  }
  if (op->kind == SIM_OP_KERNEL) {
    gint64 dur;
    if (G_LIKELY(kernel_entry(rs, ops, i, kmode, &dur, &iv->inc))) {
      iv->start = arrive;
      iv->end = arrive + dur;
      return;
    }
    l = rs->log[i];
  } else if (op->kind == SIM_OP_HOST) {
    if (kmode != K_LOG) {
      /* As the replay ran it (sim/replay.c, host_op). */
      iv->start = arrive;
      iv->end = arrive + MIN(op->ref_ns, TIME_MAX);
      iv->inc = 0.0f;
      return;
    }
    l = rs->log[i];
  } else {
    l = rs->clog[ci];
  }
  if (G_UNLIKELY(l.dur == LOG_ESC)) {
    const Overflow *o = &rs->ovf[l.aux];
    iv->arrive = o->arrive;
    iv->start = o->start;
    iv->end = o->end;
    iv->inc = o->inc;
    if (o->split != 0) {
      /* A split kernel: its first part now, the second after it. */
      iv->end = o->split;
      iv->rest_end = o->end;
      iv->rest_inc = o->inc2;
    }
    return;
  }
  if (op->kind == SIM_OP_HOST) {
    iv->start = arrive;
    iv->end = arrive + l.dur;
    iv->inc = 0.0f;
  } else {
    iv->start = arrive + l.aux;
    iv->end = iv->start + l.dur;
    iv->inc = rs->comm_inc;
  }
}

/* What a stream is doing at a point of the sweep.  The order is the
 * attribution's priority: a segment goes to the highest state of any
 * stream (the lowest stream on a tie). */
typedef enum {
  ATTR_IDLE = 0,    /* no op active, or a host op (the GPU idles) */
  ATTR_BLOCKED = 1, /* a communication op arrived, its transfer not begun */
  ATTR_COMM = 2,    /* a transfer running */
  ATTR_KERNEL = 3   /* a kernel running */
} AttrState;

/* Where a reader is within its current op. */
enum {
  RD_BEFORE = 0,  /* before the op's arrival */
  RD_BLOCKED = 1, /* arrive..start */
  RD_ACTIVE = 2   /* start..end */
};

/* One stream's interval sequence during the sweep. */
typedef struct {
  guint32 cur, end;
  guint32 ci;     /* the comm log's entry of the next communication op */
  guint32 phase;  /* RD_* */
  gint64 prev_end;
  Iv iv;
} Reader;

static inline gint64 reader_edge(const Reader *rd)
{
  return rd->phase == RD_BEFORE    ? rd->iv.arrive
         : rd->phase == RD_BLOCKED ? rd->iv.start
                                   : rd->iv.end;
}

/* Moves rd past every edge at or before tau.  FALSE when exhausted. */
static inline gboolean reader_skip(Reader *rd, const RankState *rs,
                                   const SimOp *ops, guint kmode, gint64 tau)
{
  for (;;) {
    if (rd->cur >= rd->end)
      return FALSE;
    if (reader_edge(rd) > tau)
      return TRUE;
    if (rd->phase == RD_ACTIVE) {
      if (G_UNLIKELY(rd->iv.rest_end != 0)) {
        /* Past the first part of a split kernel: its second part. */
        rd->iv.start = rd->iv.end;
        rd->iv.end = rd->iv.rest_end;
        rd->iv.inc = rd->iv.rest_inc;
        rd->iv.rest_end = 0;
        continue;
      }
      rd->prev_end = rd->iv.end;
      rd->ci += is_comm(ops[rd->cur].kind) ? 1u : 0u;
      rd->cur++;
      rd->phase = RD_BEFORE;
      if (rd->cur < rd->end)
        decode(rs, ops, rd->cur, rd->ci, kmode, rd->prev_end, &rd->iv);
    } else {
      rd->phase++;
    }
  }
}

/* The reader's state for the attribution (its power increment is
 * rd->iv.inc when it is ATTR_COMM or ATTR_KERNEL). */
static inline AttrState reader_state(const Reader *rd, const SimOp *ops)
{
  if (rd->phase == RD_BLOCKED)
    return ATTR_BLOCKED;
  if (rd->phase == RD_ACTIVE) {
    guint8 k = ops[rd->cur].kind;
    /* A running host op leaves the GPU idle. */
    return k == SIM_OP_KERNEL ? ATTR_KERNEL
           : k == SIM_OP_HOST ? ATTR_IDLE
                              : ATTR_COMM;
  }
  return ATTR_IDLE;
}

/* ---- the meter ------------------------------------------------------------- */

/* The board's power sensor: the highest average of board power over any
 * window of `win` ns inside the iteration [t0, t1) (win = MIN(the
 * machine's window, t1 - t0)), or with win = 0 the highest instantaneous
 * power.  Segments arrive in time order, back to back.  Board power is a
 * step function, so the window's integral is piecewise linear in the
 * window's end, with kinks where either edge crosses a step: the meter
 * evaluates it at every segment end (the window's end on a step) and at
 * every step + win (its start on one).  It keeps the steps of the last win
 * ns as (time, energy since t0) points, pt[head..n), the last one the end
 * of the last segment; each point is added and dropped once. */
typedef struct MeterPt {
  gint64 t;
  double e; /* W ns since t0 */
  double p; /* power of the step ending at t */
} MeterPt;

typedef struct {
  double limit;  /* board power limit; G_MAXDOUBLE: none */
  gint64 win;    /* 0: instantaneous */
  double peak;   /* W (instantaneous), or W ns (the window's integral) */
  MeterPt *pt;   /* the lane's scratch (Lane.meter), cap entries */
  guint32 head, n, cap;
} Meter;

/* Adds segment [tau, next) at power p to a windowed meter, which keeps
 * the highest integral (the average times win: no division per step). */
static __attribute__((noinline)) void meter_window(Meter *mt, gint64 tau,
                                                   gint64 next, double p)
{
  const gint64 win = mt->win;
  const double e_tau = mt->pt[mt->n - 1].e;
  const double e_next = e_tau + p * (double)(next - tau);
  double peak = mt->peak;
  /* The window's start on a step b: its end b + win inside this segment
   * (ends on earlier segments were met there). */
  for (guint32 i = mt->head; i < mt->n && mt->pt[i].t + win < next; i++) {
    gint64 s = mt->pt[i].t + win;
    if (s > tau)
      peak = MAX(peak, e_tau + p * (double)(s - tau) - mt->pt[i].e);
  }
  /* The window's end at next, once a whole window fits (pt[0] is t0
   * until the first point is dropped). */
  gint64 s0 = next - win;
  if (mt->head > 0 || s0 >= mt->pt[0].t) {
    while (mt->head + 1 < mt->n && mt->pt[mt->head + 1].t <= s0)
      mt->head++;
    /* s0 lies in the step ending at the next point, or in this one. */
    double e_s0 = mt->head + 1 == mt->n
                    ? e_tau - p * (double)(tau - s0)
                    : mt->pt[mt->head + 1].e -
                        mt->pt[mt->head + 1].p *
                          (double)(mt->pt[mt->head + 1].t - s0);
    peak = MAX(peak, e_next - e_s0);
  }
  mt->peak = peak;
  if (mt->n == mt->cap) {
    if (mt->head > 0) {
      memmove(mt->pt, mt->pt + mt->head,
              sizeof(MeterPt) * (mt->n - mt->head));
      mt->n -= mt->head;
      mt->head = 0;
    } else {
      mt->cap *= 2;
      mt->pt = g_renew(MeterPt, mt->pt, mt->cap);
    }
  }
  mt->pt[mt->n++] = (MeterPt){next, e_next, p};
}

/* Adds segment [tau, next) of board power p to the meter. */
static inline void meter_add(Meter *mt, gint64 tau, gint64 next, double p)
{
  if (G_LIKELY(mt->win == 0))
    mt->peak = MAX(mt->peak, p);
  else
    meter_window(mt, tau, next, p);
}

/* Board power p over [tau, next) while kernel o runs, held at the limit:
 * the part above it is taken off o's class and phase and counted as
 * held.  Returns the power the board draws. */
static inline double hold(const Meter *mt, Totals *tot, SimGpuResult *g,
                          const SimOp *o, double p, gint64 tau, gint64 next)
{
  if (G_LIKELY(p <= mt->limit))
    return p;
  double held = (p - mt->limit) * (double)(next - tau) * 1e-9;
  tot->by_class[o->klass].energy_j -= held;
  tot->by_phase[o->phase].energy_j -= held;
  tot->held_j += held;
  g->held_j += held;
  return mt->limit;
}

/* Adds segment [tau, next) attributed to `state` (to op `op` for
 * ATTR_COMM and ATTR_KERNEL), its board power held by the limit while a
 * kernel runs. */
static inline void emit(Totals *tot, SimGpuResult *g, const SimOp *ops,
                        double idle_w, gint64 tau, gint64 next,
                        AttrState state, guint32 op, double inc_sum,
                        Meter *mt)
{
  double p = idle_w + inc_sum;
  double len = (double)(next - tau);
  double base_j = idle_w * len * 1e-9;
  switch (state) {
  case ATTR_KERNEL:
  case ATTR_COMM: {
    const SimOp *o = &ops[op];
    tot->by_class[o->klass].energy_j += base_j;
    tot->by_phase[o->phase].energy_j += base_j;
    if (state == ATTR_KERNEL) {
      g->kernel_ns += len;
      p = hold(mt, tot, g, o, p, tau, next);
    } else {
      g->comm_ns += len;
    }
    break;
  }
  case ATTR_BLOCKED:
    tot->blocked.energy_j += base_j;
    tot->blocked.time_ns += len;
    g->blocked_j += base_j;
    g->blocked_ns += len;
    break;
  default:
    tot->idle.energy_j += base_j;
    tot->idle.time_ns += len;
    g->idle_j += base_j;
    g->idle_ns += len;
    break;
  }
  meter_add(mt, tau, next, p);
}

/* ---- the sweep -------------------------------------------------------------- */

/* The steps below are one function cut at its step comments: always
 * inlined, so the sweep compiles as the single loop it was, its state in
 * registers. */
#define SWEEP_INLINE static inline __attribute__((always_inline))

/* The state of one rank's sweep, a local of sim_account_rank. */
typedef struct {
  Totals *tot;
  SimGpuResult *g;
  const SimOp *ops;
  const RankState *rs;
  guint kmode;       /* K_LOG or K_MEMO */
  double idle_w;
  double block_inc;  /* blocked power - idle power */
  guint ns;          /* streams */
  gint64 tau;        /* the sweep has accounted [t0, tau) */
  gint64 t1;
  Meter mt;
  Reader rd[SIM_MAX_STREAMS];
  gint64 edge[SIM_MAX_STREAMS];       /* each live reader's next edge */
  AttrState state[SIM_MAX_STREAMS];   /* each live reader's state */
  gboolean live[SIM_MAX_STREAMS];
} Sweep;

/* Step 1: increments, attributed to their own op (or to blocked), added
 * to `energy` (returned).  Only durations are needed here, and the logs
 * hold them directly (kernel_entry). */
SWEEP_INLINE double add_increments(const SimEngine *e, const SimRank *rk,
                                   const RankState *rs, double block_inc,
                                   Totals *tot, SimGpuResult *g,
                                   double energy, const gboolean klog,
                                   OpLog *memo)
{
  const SimOp *ops = rk->ops;
  const SimShape *shapes = e->shapes;
  const guint32 n_ops = rk->n_ops;
  const double comm_inc = rs->comm_inc;
  guint32 ci = 0; /* ops are grouped by stream: comm log order */
  for (guint32 i = 0; i < n_ops; i++) {
    const SimOp *op = &ops[i];
    OpLog l;
    double d, inc, blocked;
    const Overflow *split = NULL; /* a kernel split by a clock switch */
    if (G_UNLIKELY(op->kind == SIM_OP_HOST))
      continue; /* CPU time: no increment, no GPU class time */
    if (op->kind == SIM_OP_KERNEL) {
      gint64 kd;
      float ki;
      if (G_LIKELY(kernel_entry(rs, ops, i, klog ? K_LOG : K_PRICE, &kd,
                                &ki))) {
        if (!klog) {
          /* For the sweep, which reads it instead of pricing again. */
          memo[i].dur = kd < LOG_ESC ? (guint32)kd : LOG_ESC;
          memo[i].aux = float_bits(ki);
        }
        d = (double)kd;
        inc = ki;
        blocked = 0;
        goto add;
      }
      l = rs->log[i];
    } else if (op->kind == SIM_OP_MARKER) {
      continue; /* lasts nothing: adds 0 to every sum below */
    } else {
      l = rs->clog[ci++];
    }
    if (G_UNLIKELY(l.dur == LOG_ESC)) {
      const Overflow *o = &rs->ovf[l.aux];
      d = (double)(o->end - o->start);
      inc = o->inc;
      blocked = (double)(o->start - o->arrive);
      if (o->split != 0)
        split = o;
    } else {
      d = (double)l.dur;
      inc = comm_inc;
      blocked = (double)l.aux;
    }
  add:;
    double ej = inc * d * 1e-9;
    if (G_UNLIKELY(split != NULL))
      /* Each part at its own clocks' power. */
      ej = (double)split->inc * (double)(split->split - split->start) * 1e-9 +
           (double)split->inc2 * (double)(split->end - split->split) * 1e-9;
    tot->by_class[op->klass].time_ns += d;
    tot->by_class[op->klass].energy_j += ej;
    tot->by_phase[op->phase].time_ns += d;
    tot->by_phase[op->phase].energy_j += ej;
    energy += ej;
    if (op->kind == SIM_OP_KERNEL)
      g->flops += shapes[op->shape].flops;
    if (blocked > 0) {
      double bj = block_inc * blocked * 1e-9;
      tot->blocked.energy_j += bj;
      g->blocked_j += bj;
      energy += bj;
    }
  }
  return energy;
}

/* Step 2, the k-way merge: every reader past tau, the segment from tau to
 * the nearest edge of any stream attributed, tau moved there. */
SWEEP_INLINE void merge_step(Sweep *sw)
{
  const SimOp *ops = sw->ops;
  const RankState *rs = sw->rs;
  const gint64 tau = sw->tau;
  gint64 next = sw->t1;
  AttrState best = ATTR_IDLE;
  guint32 best_op = 0;
  double inc_sum = 0.0;
  for (guint s = 0; s < sw->ns; s++) {
    sw->live[s] = reader_skip(&sw->rd[s], rs, ops, sw->kmode, tau);
    if (!sw->live[s])
      continue;
    sw->edge[s] = reader_edge(&sw->rd[s]);
    next = MIN(next, sw->edge[s]);
    sw->state[s] = reader_state(&sw->rd[s], ops);
    if (sw->state[s] == ATTR_BLOCKED)
      inc_sum += sw->block_inc;
    else if (sw->state[s] >= ATTR_COMM)
      inc_sum += sw->rd[s].iv.inc;
    if (sw->state[s] > best) {
      best = sw->state[s];
      best_op = sw->rd[s].cur;
    }
  }
  if (next > tau)
    emit(sw->tot, sw->g, ops, sw->idle_w, tau, next, best, best_op, inc_sum,
         &sw->mt);
  sw->tau = next;
}

/* The one stream that changes at tau while the others hold their states
 * until *limit (> tau); G_MAXUINT when there is none. */
SWEEP_INLINE guint solo_stream(const Sweep *sw, gint64 *limit)
{
  guint solo = G_MAXUINT, n_at = 0;
  gint64 lim = sw->t1;
  for (guint s = 0; s < sw->ns; s++) {
    if (!sw->live[s])
      continue;
    if (sw->edge[s] == sw->tau) {
      solo = s;
      n_at++;
    } else {
      lim = MIN(lim, sw->edge[s]);
    }
  }
  *limit = lim;
  return n_at == 1 && lim > sw->tau ? solo : G_MAXUINT;
}

/* The frozen streams around the solo one: their best state (the first
 * stream with the highest) and their increments before and after it, in
 * stream order. */
typedef struct {
  AttrState state;
  guint stream;
  guint32 op;
  double inc_before;
  double inc_after[SIM_MAX_STREAMS];
  guint n_after;
} Others;

SWEEP_INLINE void others_of(const Sweep *sw, guint solo, Others *o)
{
  o->state = ATTR_IDLE;
  o->stream = 0;
  o->op = 0;
  o->inc_before = 0.0;
  o->n_after = 0;
  for (guint s = 0; s < sw->ns; s++) {
    if (!sw->live[s] || s == solo)
      continue;
    double inc = sw->state[s] == ATTR_BLOCKED ? sw->block_inc
                                              : (double)sw->rd[s].iv.inc;
    if (sw->state[s] >= ATTR_BLOCKED) {
      if (s < solo)
        o->inc_before += inc;
      else
        o->inc_after[o->n_after++] = inc;
    }
    if (sw->state[s] > o->state) {
      o->state = sw->state[s];
      o->stream = s;
      o->op = sw->rd[s].cur;
    }
  }
}

/* Step 4, back-to-back kernels (no wait, no gap, no overflow) of the solo
 * reader sr, which has just entered a kernel's active phase at tau, that
 * end before `limit`: the reader moves straight to each one's active
 * phase, which is what reader_skip would do through two empty phases; the
 * segment sums are those emit() would add, in the same order, with the
 * reader and the GPU's kernel time kept in locals.  Not from the first
 * part of a split kernel (it does not end at tau). */
SWEEP_INLINE void back_to_back(const Sweep *sw, Reader *sr, gint64 limit,
                               const Others *ot, gint64 *tau, Meter *mt)
{
  const SimOp *ops = sw->ops;
  const RankState *rs = sw->rs;
  const guint kmode = sw->kmode;
  Totals *tot = sw->tot;
  SimGpuResult *g = sw->g;
  const double idle_w = sw->idle_w;
  guint32 n = sr->cur + 1, last = sr->cur;
  gint64 t = *tau, last_start = sr->iv.start;
  float last_inc = sr->iv.inc;
  double kns = g->kernel_ns;
  for (; n < sr->end; n++) {
    const SimOp *o = &ops[n];
    if (o->kind != SIM_OP_KERNEL || o->wait != SIM_NO_WAIT)
      break;
    gint64 dur;
    float inc;
    if (!kernel_entry(rs, ops, n, kmode, &dur, &inc))
      break;
    gint64 end = t + dur;
    if (end >= limit)
      break;
    last = n;
    last_start = t;
    last_inc = inc;
    if (end > t) {
      double len = (double)(end - t);
      double base_j = idle_w * len * 1e-9;
      tot->by_class[o->klass].energy_j += base_j;
      tot->by_phase[o->phase].energy_j += base_j;
      kns += len;
      /* The streams' increments in stream order, as the merge adds them. */
      double sum = ot->inc_before + (double)last_inc;
      for (guint a = 0; a < ot->n_after; a++)
        sum += ot->inc_after[a];
      meter_add(mt, t, end, hold(mt, tot, g, o, idle_w + sum, t, end));
      t = end;
    }
  }
  g->kernel_ns = kns;
  if (last != sr->cur) {
    sr->prev_end = last_start;
    sr->cur = last;
    sr->iv.arrive = sr->iv.start = last_start;
    sr->iv.end = t;
    sr->iv.inc = last_inc;
    *tau = t;
  }
}

/* Step 3, the fast path: only stream `solo` changes until `limit`; run it
 * alone against the others' frozen states. */
SWEEP_INLINE void solo_run(Sweep *sw, guint solo, gint64 limit)
{
  Others o;
  others_of(sw, solo, &o);
  /* The sums of increments for the solo stream idle or blocked, added in
   * stream order as the merge adds them. */
  double sum_k[2] = {o.inc_before, o.inc_before + sw->block_inc};
  for (guint a = 0; a < o.n_after; a++) {
    sum_k[0] += o.inc_after[a];
    sum_k[1] += o.inc_after[a];
  }
  gboolean kernel_wins =
    ATTR_KERNEL > o.state || (o.state == ATTR_KERNEL && solo < o.stream);
  /* The sweep's fields in locals: the stores into the totals below could
   * otherwise alias them for the compiler. */
  Totals *tot = sw->tot;
  SimGpuResult *g = sw->g;
  const SimOp *ops = sw->ops;
  const RankState *rs = sw->rs;
  const guint kmode = sw->kmode;
  const double idle_w = sw->idle_w;
  gint64 tau = sw->tau;
  Meter mt = sw->mt;
  Reader *sr = &sw->rd[solo];
  for (;;) {
    if (!reader_skip(sr, rs, ops, kmode, tau))
      break;
    gint64 ed = reader_edge(sr);
    if (ed >= limit)
      break;
    AttrState k = reader_state(sr, ops);
    double sum;
    if (k <= ATTR_BLOCKED) {
      sum = sum_k[k];
    } else {
      sum = o.inc_before + (double)sr->iv.inc;
      for (guint a = 0; a < o.n_after; a++)
        sum += o.inc_after[a];
    }
    gboolean mine = k > o.state || (k == o.state && solo < o.stream);
    emit(tot, g, ops, idle_w, tau, ed, mine ? k : o.state,
         mine ? sr->cur : o.op, sum, &mt);
    tau = ed;
    if (k != ATTR_KERNEL || !kernel_wins || sr->iv.rest_end != 0)
      continue;
    back_to_back(sw, sr, limit, &o, &tau, &mt);
  }
  sw->tau = tau;
  sw->mt = mt;
}

/* The additions happen in the order of a plain per-op pass (step 1)
 * followed by a k-way merge of the streams (steps 2-4), one segment per
 * edge of any stream (zero-length segments add nothing). */
SWEEP_INLINE double account_rank(SimEngine *e, guint r, gint64 t0,
                                 gint64 t1, Totals *tot_out,
                                 SimGpuResult *g_out, const gboolean klog)
{
  /* Local copies: the same additions in the same order, but the compiler
   * knows they alias nothing (results are written back at the end). */
  Totals lt = *tot_out;
  SimGpuResult lg = *g_out;
  const SimRank *rk = &e->w->ranks[r];
  RankState *rs = &e->ranks[r];
  /* Without the kernel log the first pass memoises each kernel's entry in
   * its lane's scratch (8 B per op of the rank, in L2 for a GPT stage),
   * and the sweep reads it through a view of the rank whose log is the
   * memo, instead of pricing every kernel again (175B/1,024: 7.57 ->
   * 7.44 G instructions per replay, 0.511 -> 0.483 s). */
  OpLog *memo = NULL;
  RankState view;
  Lane *L = &e->lanes[lane_of(e, r)];
  if (!klog) {
    if (L->memo_cap < rk->n_ops) {
      g_free(L->memo);
      L->memo = g_new(OpLog, rk->n_ops);
      L->memo_cap = rk->n_ops;
    }
    memo = L->memo;
    view = *rs;
    view.log = memo;
  }
  Sweep sw;
  sw.tot = &lt;
  sw.g = &lg;
  sw.ops = rk->ops;
  sw.kmode = klog ? K_LOG : K_MEMO;
  sw.rs = klog ? rs : &view;
  sw.idle_w = rs->idle_w;
  sw.block_inc = e->m->blocked_power_w[r] - sw.idle_w;
  sw.ns = rs->n_streams;
  sw.tau = t0;
  sw.t1 = t1;
  sw.mt.limit = e->m->power_limit_w != NULL ? e->m->power_limit_w[r]
                                            : G_MAXDOUBLE;
  sw.mt.win = MIN(e->m->sensor_window_ns, t1 - t0);
  sw.mt.peak = sw.idle_w;
  sw.mt.pt = L->meter;
  sw.mt.cap = L->meter_cap;
  sw.mt.head = sw.mt.n = 0;
  if (sw.mt.win > 0) {
    if (sw.mt.cap == 0) {
      sw.mt.cap = 64;
      sw.mt.pt = g_new(MeterPt, sw.mt.cap);
    }
    sw.mt.pt[sw.mt.n++] = (MeterPt){t0, 0.0, 0.0};
    sw.mt.peak = 0.0; /* an integral until the end */
  }

  double energy = sw.idle_w * (double)(t1 - t0) * 1e-9;
  energy = add_increments(e, rk, rs, sw.block_inc, &lt, &lg, energy, klog,
                          memo);

  /* k-way sweep over streams for the baseline and the time partition. */
  for (guint s = 0; s < sw.ns; s++) {
    Reader *rd = &sw.rd[s];
    rd->cur = rk->stream_off[s];
    rd->end = rk->stream_off[s + 1];
    rd->ci = rs->comm_base[s];
    rd->phase = RD_BEFORE;
    rd->prev_end = t0;
    if (rd->cur < rd->end)
      decode(sw.rs, sw.ops, rd->cur, rd->ci, sw.kmode, t0, &rd->iv);
  }
  while (sw.tau < t1) {
    merge_step(&sw);
    gint64 limit;
    guint solo = solo_stream(&sw, &limit);
    if (solo != G_MAXUINT)
      solo_run(&sw, solo, limit);
  }
  L->meter = sw.mt.pt;
  L->meter_cap = sw.mt.cap;
  energy -= lt.held_j; /* the limit's cut, off the additive sum */
  lg.energy_j += energy;
  lg.switches += rs->switches;
  if (sw.mt.win > 0)
    sw.mt.peak = MAX(sw.mt.peak / (double)sw.mt.win, sw.idle_w);
  lg.peak_power_w = MAX(lg.peak_power_w, sw.mt.peak);
  *tot_out = lt;
  *g_out = lg;
  return energy;
}

/* ---- ranks with the same inputs -------------------------------------------- */

/* Within one pass (one iteration: the same t0 and t1), a rank's
 * accounting is a function of its program, its logs, its wait targets'
 * ends, its prices (the kernel log's entries when kernels were logged,
 * else its price cache), its power figures, its clock switches and what
 * its per-GPU result held before.  Ranks that share all of them come out
 * the same bit for bit: on a uniform cluster the tensor- and data-parallel
 * peers of one stage, with a straggler the ranks it does not hold up, under
 * a plan the ranks it treats alike (GPT-3 6.7B, TP4 PP4 DP4, 2 iterations:
 * 120 of 128 rank-iterations copied at max clocks, 76 with one straggling
 * GPU, 60 of 256 under the kernel planner's replays).  So a rank is copied
 * from the last rank of its program that its lane accounted in this pass
 * when their inputs compare equal byte for byte (padding included, which
 * can only refuse a copy).  Ranks that differ differ early (a blocked time
 * in the comm log, a price): with per-GPU variability nothing is copied
 * and the comparisons cost 0.03% of the instructions.  Results are the
 * same bits with or without it, on any number of threads (a lane compares
 * its own ranks).  /engine/account-copies sets one input apart at a time. */

/* Whether rank r, whose per-GPU result holds *g, has the same inputs as
 * the memo's rank (of the same program, accounted in this pass). */
static gboolean same_inputs(const SimEngine *e, const AcctMemo *m,
                            guint r, const SimGpuResult *g)
{
  const RankState *a = &e->ranks[r], *b = &e->ranks[m->rank];
  const double *blocked_w = e->m->blocked_power_w;
  if (a->switches != b->switches || a->n_ovf != b->n_ovf ||
      memcmp(&a->idle_w, &b->idle_w, sizeof a->idle_w) != 0 ||
      memcmp(&a->comm_inc, &b->comm_inc, sizeof a->comm_inc) != 0 ||
      memcmp(&blocked_w[r], &blocked_w[m->rank], sizeof *blocked_w) != 0 ||
      (e->m->power_limit_w != NULL &&
       memcmp(&e->m->power_limit_w[r], &e->m->power_limit_w[m->rank],
              sizeof(double)) != 0) ||
      memcmp(g, &m->before, sizeof *g) != 0)
    return FALSE;
  /* The program fixes the streams, the wait targets and the comm ops. */
  guint32 n_comm = a->comm_base[a->n_streams];
  if (memcmp(a->clog, b->clog, sizeof(OpLog) * n_comm) != 0 ||
      memcmp(a->target_end, b->target_end, sizeof(gint64) * a->n_targets) !=
        0 ||
      (a->n_ovf > 0 &&
       memcmp(a->ovf, b->ovf, sizeof(Overflow) * a->n_ovf) != 0))
    return FALSE;
  if (e->klog)
    return memcmp(a->log, b->log, sizeof(OpLog) * e->w->ranks[r].n_ops) == 0;
  return a->cache == b->cache ||
         memcmp(a->cache, b->cache,
                sizeof(CostSlot) * MAX(e->w->shapes->len, 1)) == 0;
}

/* One copy of the sweep per value of SimEngine.klog, which every per-op
 * step tests: each then compiles without the test (175B on 1,024 GPUs,
 * with e->shapes held in a local: 7.76 -> 7.61 G instructions per
 * replay). */
double sim_account_rank(SimEngine *e, guint r, gint64 t0, gint64 t1,
                        Totals *tot_out, SimGpuResult *g_out)
{
  const SimRank *rk = &e->w->ranks[r];
  AcctMemo *m = NULL;
  if (rk->program != SIM_NO_PROGRAM) {
    Lane *L = &e->lanes[lane_of(e, r)];
    if (L->amemo == NULL)
      L->amemo = g_new0(AcctMemo, e->w->programs->len);
    m = &L->amemo[rk->program];
    if (m->pass == e->account_pass && same_inputs(e, m, r, g_out)) {
      L->ranks_copied++;
      *tot_out = m->part;
      *g_out = m->after;
      return m->energy;
    }
  }
  SimGpuResult before = *g_out;
  double energy = e->klog
                    ? account_rank(e, r, t0, t1, tot_out, g_out, TRUE)
                    : account_rank(e, r, t0, t1, tot_out, g_out, FALSE);
  if (m != NULL) {
    m->pass = e->account_pass;
    m->rank = r;
    m->before = before;
    m->after = *g_out;
    m->part = *tot_out;
    m->energy = energy;
  }
  return energy;
}
