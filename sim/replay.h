/* sim/replay.h -- the dataflow core's matching state (transfers being
 * matched, group rings, point-to-point channels) and the entry points an
 * order driver calls into the core.  The core is sim/replay.c; its
 * drivers are the event queue and eager order (sim/order.c) and the
 * lanes (sim/lanes.c).  Included by sim/lanes.h, so by every file of the
 * engine through sim/engine-private.h, but read only by the replay and
 * the lanes: the accounting reads the op log (sim/oplog.h), never this.
 */
#ifndef JOULESIM_SIM_REPLAY_H
#define JOULESIM_SIM_REPLAY_H

#include "sim/oplog.h"

/* A rank's incoming point-to-point channel: FIFO of unmatched ops of one
 * side (sends or receives) from ranks folding to `src`. */
typedef struct Channel {
  guint32 src;
  guint32 head, len, cap;
  guint64 *q;            /* (rank << 32 | op), ring of cap entries */
  gint64 *qt;            /* their arrival times */
  guint8 side_stream[2]; /* threaded: stream + 1 of the last receive [0]
                            and send [1] through it (0: none) */
} Channel;

typedef struct {
  guint32 rank, op;
} Member;

typedef struct {
  guint32 group_or_src, seq_or_dst; /* p2p: the real pair the network prices */
  guint n_members, n_arrived;
  gint64 start_ns;
  gint64 ref_ns;     /* max recorded duration of members (0 = model) */
  double bytes;
  guint8 p2p;
  guint8 coll;
  guint members_cap;
  Member *members;
} Pending;

/* Open instances of one group, by sequence number: slot[seq & mask] holds a
 * pending index + 1 (0 = none).  Grows when two open instances collide. */
typedef struct {
  guint32 *slot;
  guint32 mask;
} Ring;

/* Pending transfers: a pool with a free list. */
typedef struct {
  Pending *pend;
  guint32 n_pend, cap_pend;
  guint32 *pend_free;
  guint32 n_free;
} Pool;

/* Appends v to the growable array *a of *n (capacity *cap) entries of
 * `size` bytes. */
#define APPEND(a, n, cap, v)                                                \
  do {                                                                      \
    if (G_UNLIKELY((n) == (cap))) {                                         \
      (cap) = MAX(64, 2 * (cap));                                           \
      (a) = g_realloc_n((a), (cap), sizeof *(a));                           \
    }                                                                       \
    (a)[(n)++] = (v);                                                       \
  } while (0)

typedef struct Lane Lane;

enum { EV_RESUME = 1, EV_COMM_START = 2 };
/* At equal times transfers start before streams resume, so a stream resumed
 * at t sees every transfer that began at t. */
enum { PRIO_COMM = 0, PRIO_RESUME = 1 };

/* Runs lane L's work stack empty: every stream on it as far as it goes. */
void sim_replay_drain(SimEngine *e, Lane *L);
/* Starts transfer idx of lane L's pool: prices it, schedules its members'
 * ops and resumes their streams. */
void sim_replay_start(SimEngine *e, Lane *L, guint32 idx);
/* Rank r's communication op i arrived at t, matched on lane M. */
void sim_replay_arrive(SimEngine *e, Lane *M, guint r, guint32 i, gint64 t);
/* Rank r's communication op i ran [start, start + dur): logs it and
 * resumes its stream on lane L. */
void sim_replay_apply(SimEngine *e, Lane *L, guint r, guint32 i,
                      gint64 start, gint64 dur);
/* The duration of transfer p, from its start (in [0, DUR_CAP]). */
gint64 sim_replay_comm_dur(const SimEngine *e, const Pending *p);
/* Returns pending record idx to its pool. */
void sim_replay_release(Pool *pl, guint32 idx);

#endif
