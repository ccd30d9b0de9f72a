/* sim/lanes.c -- the lanes and the threaded driver.  A lane is one
 * thread's share of a replay: its ranks (dealt in blocks, below), the
 * groups and channels it matches, its work stack and pool, and the
 * accounting's scratch.  A serial replay uses lane 0 alone.  The threaded
 * driver replays an iteration on every lane in rounds (sim_lane_replay)
 * and accounts it on them (sim_lanes_account).  It reaches the dataflow
 * core (sim/replay.c) through sim/replay.h.
 *
 * Threads
 * -------
 * With sim_engine_set_threads(n > 1), a thread-safe machine, no observer and
 * no boost controller, an iteration replays on n lanes in rounds. Lane k
 * owns the blocks b of R / 8n consecutive ranks with b mod n == k
 * (lane_of; sim_lanes_deal says why blocks).  A round: (1) every lane
 * applies the transfers handed to it (comm_apply) and runs its ranks'
 * streams as far as they go, sending each communication arrival, with its
 * time, to the lane that matches it (a group's collectives on the lane of
 * its member g mod size, a channel's transfers on the lane of rep(dst)); an
 * arrival the lane matches itself is matched at once, and a transfer that
 * completes so with every member on the lane starts at once (as in eager
 * order, sim/order.c), so most tensor-parallel collectives never wait for
 * a round; barrier;
 * (2) every lane matches the arrivals sent to it, lane by lane, in its own
 * pool, mseq and rings (line-aligned, so no line is written by two lanes),
 * prices every transfer that completed and hands its members to their lanes;
 * barrier; the iteration ends when a round completes no transfer.  No event
 * queue: start times are maxima of finish times, so the order transfers
 * start in does not change them (which is why the machine must promise that
 * the network's answers do not depend on call order).  The one thing the
 * processing order does decide is which instance an arrival joins when a
 * rank uses one group (or one channel) from two streams; a lane that sees
 * that sets order_hit, and the iteration is put back (streams, switch
 * counts) and replayed serially, as is every later one of the engine.  The
 * error a replay reports names a rank's first bad op by index (note_bad),
 * not the first one reached.  Accounting then runs on the lanes too, rank by
 * rank into per-rank totals that are added in rank order (sim/engine.c), so
 * every figure is the same bit for bit on any number of threads.
 */
#include "sim/engine-private.h"

#include <string.h>

/* ---- lanes ------------------------------------------------------------------ */

/* n lanes, lane 0 with the shared price cache (if any), the others with
 * their own copy. */
void sim_lanes_new(SimEngine *e, guint n)
{
  guint n_shapes = MAX(e->w->shapes->len, 1);
  gsize nm = MAX(e->w->group_ranks->len, 1);
  e->n_lanes = n;
  e->lanes = g_new0(Lane, n);
  for (guint k = 0; k < n; k++) {
    Lane *L = &e->lanes[k];
    L->e = e;
    L->cache = k == 0 ? e->shared_cache
               : e->shared_cache != NULL ? g_new0(CostSlot, n_shapes)
                                         : NULL;
    L->mseq = g_new0(guint32, nm);
    L->mstream = g_new0(guint8, nm);
    if (n > 1) {
      L->arr_to = g_new0(ArrList, n);
      L->done_to = g_new0(DoneList, n);
    }
  }
}

void sim_lanes_free(SimEngine *e)
{
  for (guint k = 0; k < e->n_lanes; k++) {
    Lane *L = &e->lanes[k];
    g_free(L->work);
    for (guint32 i = 0; i < L->pool.n_pend; i++)
      g_free(L->pool.pend[i].members);
    g_free(L->pool.pend);
    g_free(L->pool.pend_free);
    g_free(L->ready);
    for (guint j = 0; L->arr_to != NULL && j < e->n_lanes; j++) {
      g_free(L->arr_to[j].v);
      g_free(L->done_to[j].v);
    }
    g_free(L->arr_to);
    g_free(L->done_to);
    g_free(L->mseq);
    g_free(L->mstream);
    g_free(L->memo);
    g_free(L->meter);
    g_free(L->amemo);
    if (k > 0)
      g_free(L->cache);
  }
  g_clear_pointer(&e->lanes, g_free);
  e->n_lanes = 0;
}

/* Deals the ranks to the n lanes in blocks of B consecutive ranks, block
 * b to lane b mod n, with B = R / 8n (at least 1): every lane gets 8
 * blocks.  Consecutive ranks (a tensor-parallel group; in Megatron's
 * order, TP then DP then PP, a 1,024-GPU block of 64 is 8 data-parallel
 * replicas of one stage) mostly talk to each other, so a block keeps most
 * transfers, their matching and their completions on one core; several
 * blocks per lane keep every lane its share of each pipeline stage's work
 * in each round ("Threads", above).  Measured on GPT-3 175B, TP8
 * PP8, 2 threads on 2 cores (bench case threads): rank r to lane r mod n
 * gave 1.22-1.24x at 1,024 GPUs and 1.61x at 8,192; one contiguous block
 * per lane 1.26-1.33x at 1,024; B = R / 8n 1.35x and 1.75x.
 *
 * Group g's collectives are matched on the lane of its member g mod size:
 * groups within a block (tensor parallel) stay on it, and groups across
 * blocks (data parallel) are dealt over the lanes.  On the first member
 * every data-parallel group of a Megatron layout went to lane 0 (rank r's
 * DP group has members r, r + TP, ...): perf of 175B/1,024 on 2 threads
 * put 13% of samples in lane 0's matching and lane 1 waiting.
 *
 * Both are tables, read for every communication op of a threaded replay;
 * computed there, each lookup took two integer divisions (0.8% of the
 * 2-thread replay's instructions; no change in wall time measured). */
void sim_lanes_deal(SimEngine *e)
{
  const SimWorkload *w = e->w;
  guint n = e->n_lanes, block = MAX(w->n_ranks / (8 * n), 1u);
  if (e->rank_lane == NULL) {
    e->rank_lane = g_new(guint8, MAX(w->n_ranks, 1));
    e->group_lane = g_new(guint8, MAX(e->n_groups, 1));
  }
  for (guint r = 0; r < w->n_ranks; r++)
    e->rank_lane[r] = (guint8)(r / block % n);
  for (guint g = 0; g < e->n_groups; g++) {
    guint32 lo = e->group_off[g], size = e->group_off[g + 1] - lo;
    e->group_lane[g] =
      size > 0 ? e->rank_lane[e->group_ranks[lo + g % size]] : 0;
  }
}

/* ---- rounds ----------------------------------------------------------------- */

static void barrier_wait(Barrier *b)
{
  gint gen = g_atomic_int_get(&b->gen);
  if ((guint)g_atomic_int_add(&b->count, 1) == b->n - 1) {
    g_atomic_int_set(&b->count, 0);
    g_mutex_lock(&b->lock);
    g_atomic_int_inc(&b->gen);
    g_cond_broadcast(&b->cond);
    g_mutex_unlock(&b->lock);
    return;
  }
  /* A round's phases last tens of microseconds, about what waking a
   * sleeping thread takes: spin first, up to 200 us, yielding the core
   * now and then (with more lanes than cores the others need it). */
  gint64 t0 = 0;
  for (guint k = 1;; k++) {
    if (g_atomic_int_get(&b->gen) != gen)
      return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((k & 255) == 0) {
      gint64 now = g_get_monotonic_time();
      if (t0 == 0)
        t0 = now;
      else if (now - t0 > 200)
        break;
      g_thread_yield();
    }
  }
  g_mutex_lock(&b->lock);
  while (g_atomic_int_get(&b->gen) == gen)
    g_cond_wait(&b->cond, &b->lock);
  g_mutex_unlock(&b->lock);
}

void sim_lanes_run(SimEngine *e, GThreadFunc fn)
{
  g_autofree GThread **t = g_new0(GThread *, e->n_lanes);
  for (guint k = 1; k < e->n_lanes; k++)
    t[k] = g_thread_new("joulesim-lane", fn, &e->lanes[k]);
  fn(&e->lanes[0]);
  for (guint k = 1; k < e->n_lanes; k++)
    g_thread_join(t[k]);
}

/* Lane L's matching, the second half of a round: the arrivals every lane
 * sent it, lane by lane, then every transfer that completed handed to the
 * lanes of its members. */
static void match_round(SimEngine *e, Lane *L)
{
  guint me = (guint)(L - e->lanes);
  for (guint k = 0; k < e->n_lanes; k++) {
    ArrList *a = &e->lanes[k].arr_to[me];
    for (gsize j = 0; j < a->n; j++)
      sim_replay_arrive(e, L, (guint)(a->v[j].key >> 32),
                        (guint32)(a->v[j].key & 0xffffffffu), a->v[j].t);
    a->n = 0;
  }
  gsize handed = 0;
  for (gsize q = 0; q < L->n_ready; q++) {
    guint32 idx = L->ready[q];
    Pending *p = &L->pool.pend[idx];
    gint64 dur = sim_replay_comm_dur(e, p);
    for (guint k = 0; k < p->n_members; k++) {
      Done d = {p->members[k].rank, p->members[k].op, p->start_ns, dur};
      DoneList *dl = &L->done_to[lane_of(e, d.rank)];
      APPEND(dl->v, dl->n, dl->cap, d);
    }
    handed += p->n_members;
    sim_replay_release(&L->pool, idx);
  }
  L->n_ready = 0;
  L->handed = handed;
}

/* One lane's replay: rounds of (apply the transfers handed to it, run its
 * ranks as far as they go) | (match the arrivals of its groups and
 * channels) until a round completes no transfer on any lane. */
gpointer sim_lane_replay(gpointer data)
{
  Lane *L = data;
  SimEngine *e = L->e;
  guint me = (guint)(L - e->lanes);
  for (;;) {
    L->running = TRUE;
    for (guint k = 0; k < e->n_lanes; k++) {
      DoneList *dl = &e->lanes[k].done_to[me];
      for (gsize j = 0; j < dl->n; j++) {
        sim_replay_apply(e, L, dl->v[j].rank, dl->v[j].op, dl->v[j].start,
                         dl->v[j].dur);
        sim_replay_drain(e, L);
      }
      dl->n = 0;
    }
    sim_replay_drain(e, L);
    L->running = FALSE;
    barrier_wait(&e->bar);
    match_round(e, L);
    barrier_wait(&e->bar);
    gsize handed = 0;
    for (guint k = 0; k < e->n_lanes; k++)
      handed += e->lanes[k].handed;
    if (handed == 0)
      break;
  }
  return NULL;
}

/* ---- accounting ------------------------------------------------------------- */

/* What the lanes of a threaded accounting share. */
typedef struct {
  SimResult *res;
  gint64 t0, t1;
  Totals *part;   /* per rank */
  double *energy; /* per rank */
} AccountJob;

static gpointer lane_account(gpointer data)
{
  Lane *L = data;
  SimEngine *e = L->e;
  AccountJob *j = e->lane_job;
  for (guint r = 0; r < e->w->n_ranks; r++) {
    if (lane_of(e, r) != (guint)(L - e->lanes) || e->ranks[r].weight == 0)
      continue;
    memset(&j->part[r], 0, sizeof(Totals));
    j->energy[r] = sim_account_rank(e, r, j->t0, j->t1, &j->part[r],
                                    &j->res->per_gpu[r]);
  }
  return NULL;
}

/* The threaded accounting (sim/engine.c, account_iteration): each lane
 * accounts its ranks into their own slots, which the caller then adds in
 * rank order. */
void sim_lanes_account(SimEngine *e, SimResult *res, gint64 t0, gint64 t1,
                       Totals *part, double *energy)
{
  AccountJob j = {res, t0, t1, part, energy};
  e->lane_job = &j;
  sim_lanes_run(e, lane_account);
  e->lane_job = NULL;
}
