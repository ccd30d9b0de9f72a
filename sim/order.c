/* sim/order.c -- which order an iteration replays in, the event-queue
 * and eager drivers, and the put-back when an order turns out to matter;
 * the threaded driver is sim/lanes.c, the dataflow core they drive
 * sim/replay.c (through sim/replay.h).
 *
 * Orders
 * ------
 * An iteration replays in one of three orders (SimEngine.order): by the
 * event queue (time order, always exact), eagerly on one thread, or on
 * lanes (threads, sim/lanes.c "Threads").  The last two need a
 * thread-safe machine and no observer or boost controller, and are tried
 * first: sim_replay_iteration picks the lanes with several, eager order
 * with one, and the queue when neither applies or the order they tried
 * turned out to matter (order_end: the streams are put back, and the
 * engine keeps to the queue from then on, SimEngine.order_sensitive).
 *
 * Eager order
 * -----------
 * A serial replay (one lane) under the same conditions (a thread-safe
 * machine, no observer, no boost controller) uses no event queue either:
 * begin_iteration pushes every stream on the work stack, and a transfer
 * whose last member arrives starts at once (comm_ready calls comm_start)
 * instead of being queued at its start time.  The reason is the memory
 * hierarchy: in time order the replay touches a few ops of every rank in
 * turn, so at 8,192 GPUs each step misses cache on a cold rank; eagerly,
 * the stack runs one rank's streams, and the peers its transfers release,
 * as far as they go.  It is exact for the max-plus reason (sim/replay.c),
 * and the one order-dependent case is caught as for threads: order_check on
 * every collective membership (Lane.mstream) and channel side, and an
 * iteration that hits it is put back and replayed from the queue, as is
 * every later one (order_begin, order_end).  175B on 1,024 GPUs, one
 * core: 40.2 -> 46.1 M replayed ops/s (docs/performance.md).
 */
#include "sim/boost.h"

#include <string.h>

/* ---- orders ----------------------------------------------------------------- */

/* Whether a replay may run in an order other than the event queue's:
 * the network's answers do not depend on call order (the machine is
 * thread-safe), and no observer or boost controller needs time order. */
static gboolean any_order_ok(const SimEngine *e)
{
  return e->m->thread_safe && e->observer == NULL && e->boost == NULL &&
         !e->order_sensitive;
}

gboolean sim_replay_threaded(const SimEngine *e)
{
  return e->n_lanes > 1 && any_order_ok(e);
}

/* Whether this (serial) iteration replays in eager order. */
static gboolean replay_eager_ok(const SimEngine *e)
{
  return e->n_lanes == 1 && any_order_ok(e);
}

/* ---- an iteration ----------------------------------------------------------- */

/* Forgets every open transfer, channel entry and queued event. */
static void clear_matching(SimEngine *e)
{
  sim_queue_clear(e->queue);
  for (guint k = 0; k < e->n_lanes; k++) {
    Lane *L = &e->lanes[k];
    L->n_work = L->n_ready = 0;
    for (guint j = 0; L->arr_to != NULL && j < e->n_lanes; j++)
      L->arr_to[j].n = L->done_to[j].n = 0;
    Pool *pl = &L->pool;
    pl->n_free = 0;
    for (guint32 i = 0; i < pl->n_pend; i++)
      pl->pend_free[pl->n_free++] = pl->n_pend - 1 - i;
  }
  for (guint g = 0; g < e->n_groups; g++)
    if (e->rings[g].slot != NULL)
      memset(e->rings[g].slot, 0, sizeof(guint32) * (e->rings[g].mask + 1));
  for (guint r = 0; r < e->w->n_ranks; r++) {
    RankState *rs = &e->ranks[r];
    for (guint32 c = 0; c < rs->n_chans; c++) {
      Channel *ch = &rs->chans[c];
      ch->len = ch->head = 0;
      ch->side_stream[0] = ch->side_stream[1] = 0;
    }
  }
}

/* Sets every stream at the iteration's start t0 and queues it (serial) or
 * hands it to its lane (eager or lanes). */
static void begin_iteration(SimEngine *e, gint64 t0)
{
  const SimWorkload *w = e->w;
  e->n_unfinished_ranks = 0;
  for (guint k = 0; k < e->n_lanes; k++)
    e->lanes[k].finished = 0;
  for (guint k = 0; k < e->n_lanes; k++)
    memset(e->lanes[k].mseq, 0,
           sizeof(guint32) * MAX(w->group_ranks->len, 1));
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    RankState *rs = &e->ranks[r];
    rs->n_unfinished = 0;
    rs->n_ovf = 0;
    for (guint s = 0; s < rs->n_streams; s++) {
      Stream *st = &rs->streams[s];
      st->cur = rk->stream_off[s];
      st->end = rk->stream_off[s + 1];
      st->tgt = st->tgt_lo;
      st->comm = rs->comm_base[s];
      st->free_ns = t0;
      st->state = st->cur < st->end ? ST_RUN : ST_DONE;
      if (st->state == ST_RUN)
        rs->n_unfinished++;
    }
    if (rs->n_unfinished > 0)
      e->n_unfinished_ranks++;
    if (e->order != ORDER_QUEUE) {
      /* Pushed last stream first: the lane runs them in order. */
      Lane *L = &e->lanes[lane_of(e, r)];
      for (guint s = rs->n_streams; s-- > 0;)
        if (rs->streams[s].state == ST_RUN)
          lane_push(L, r, s);
      continue;
    }
    for (guint s = 0; s < rs->n_streams; s++)
      if (rs->streams[s].state == ST_RUN)
        sim_queue_push(e->queue, t0, PRIO_RESUME, EV_RESUME,
                       (guint64)r << 32 | s);
  }
}

/* Copies every rank's streams and switch count to e->saved (save) or
 * back from it. */
static void keep_streams(SimEngine *e, gboolean save)
{
  Stream *at = e->saved;
  for (guint r = 0; r < e->w->n_ranks; r++) {
    RankState *rs = &e->ranks[r];
    if (rs->n_streams == 0)
      continue;
    gsize n = sizeof(Stream) * rs->n_streams;
    if (save) {
      memcpy(at, rs->streams, n);
      e->saved_switches[r] = rs->switches;
    } else {
      memcpy(rs->streams, at, n);
      rs->switches = e->saved_switches[r];
      rs->bad_op = 0;
    }
    at += rs->n_streams;
  }
}

/* Before an iteration in an order other than the event queue's (threaded
 * or eager): every stream kept, to be put back if the order matters. */
static void order_begin(SimEngine *e)
{
  const SimWorkload *w = e->w;
  if (e->saved == NULL) {
    gsize n_streams = 0;
    for (guint r = 0; r < w->n_ranks; r++)
      n_streams += e->ranks[r].n_streams;
    e->saved = g_new(Stream, MAX(n_streams, 1));
    e->saved_switches = g_new(guint64, MAX(w->n_ranks, 1));
  }
  keep_streams(e, TRUE);
  for (guint k = 0; k < e->n_lanes; k++)
    memset(e->lanes[k].mstream, 0, MAX(w->group_ranks->len, 1));
  g_atomic_int_set(&e->order_hit, FALSE);
}

/* After it: TRUE when the order did not matter; otherwise the streams are
 * put back, the matching state cleared and the engine replays by the
 * event queue from now on (FALSE). */
static gboolean order_end(SimEngine *e)
{
  if (!g_atomic_int_get(&e->order_hit))
    return TRUE;
  keep_streams(e, FALSE);
  clear_matching(e);
  e->order_sensitive = TRUE;
  return FALSE;
}

/* The iteration on the lanes.  FALSE when a rank turned out to use one
 * group or channel from two streams: the order its arrivals are matched
 * in then depends on the processing order, which threads change, so the
 * streams are put back as they were and the engine goes serial. */
static gboolean replay_lanes(SimEngine *e, gint64 t0)
{
  order_begin(e);
  e->order = ORDER_LANES;
  begin_iteration(e, t0);
  e->bar.n = e->n_lanes;
  sim_lanes_run(e, sim_lane_replay);
  e->order = ORDER_QUEUE;
  return order_end(e);
}

/* The iteration in eager order, on the calling thread.  FALSE, as for
 * replay_lanes, when the order turned out to matter. */
static gboolean replay_eager(SimEngine *e, gint64 t0)
{
  order_begin(e);
  e->order = ORDER_EAGER;
  begin_iteration(e, t0);
  sim_replay_drain(e, &e->lanes[0]);
  e->order = ORDER_QUEUE;
  return order_end(e);
}

/* The iteration by the event queue, in time order: always exact. */
static void replay_queue(SimEngine *e, gint64 t0)
{
  begin_iteration(e, t0);
  SimEvent ev;
  while (sim_queue_pop(e->queue, &ev)) {
    if (ev.kind == EV_RESUME)
      lane_push(&e->lanes[0], (guint)(ev.payload >> 32),
                (guint)(ev.payload & 0xffffffffu));
    else
      sim_replay_start(e, &e->lanes[0], (guint32)ev.payload);
    sim_replay_drain(e, &e->lanes[0]);
  }
}

/* Replays one iteration from t0 (sim/engine-private.h): on the lanes or
 * eagerly when the order cannot matter, by the queue when it can or
 * turned out to. */
gboolean sim_replay_iteration(SimEngine *e, gint64 t0, gint64 *t1,
                              GError **error)
{
  const SimWorkload *w = e->w;
  SimRunStats *stats = &e->stats;
  gboolean tried = sim_replay_threaded(e);
  gboolean done = tried && replay_lanes(e, t0);
  if (done)
    stats->lanes_iterations++;
  if (!done && replay_eager_ok(e)) {
    tried = TRUE;
    done = replay_eager(e, t0);
    if (done)
      stats->eager_iterations++;
  }
  if (tried && !done)
    stats->put_back++;
  if (!done) {
    stats->queue_iterations++;
    replay_queue(e, t0);
  }
  for (guint k = 0; k < e->n_lanes; k++)
    e->n_unfinished_ranks -= e->lanes[k].finished;
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
    if (G_UNLIKELY(rs->bad_op != 0)) {
      guint32 i = rs->bad_op - 1;
      const SimOp *op = &w->ranks[r].ops[i];
      g_set_error(error, SIM_ERROR, SIM_ERROR_LIMIT,
                  "iteration %u: rank %u op %u (%s %s) ends past the "
                  "engine's time range (2^62 ns, 146 years of simulated "
                  "time): a duration in the input, or a slowdown, is absurd",
                  e->iter, r, i, sim_kind_name(op->kind),
                  sim_workload_name(w, op->name));
      return FALSE;
    }
  }
  if (G_UNLIKELY(end >= TIME_MAX)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_LIMIT,
                "iteration %u ends past the engine's time range (2^62 ns, "
                "146 years of simulated time)", e->iter);
    return FALSE;
  }
  *t1 = end;
  return TRUE;
}

/* Forgets whatever a failed earlier run left behind. */
void sim_replay_reset(SimEngine *e)
{
  clear_matching(e);
  for (guint r = 0; r < e->w->n_ranks; r++) {
    RankState *rs = &e->ranks[r];
    for (guint s = 0; s < rs->n_streams; s++)
      rs->streams[s].clk_init = FALSE;
    rs->switches = 0;
    rs->bad_op = 0;
  }
  if (e->boost != NULL)
    sim_boost_reset(e);
}
