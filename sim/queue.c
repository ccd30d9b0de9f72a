/* sim/queue.c -- the event queue: a 4-ary min-heap in one flat array.
 *
 * Invariants:
 *   - ev[0 .. len) holds every pending event; ev[len .. cap) is spare room.
 *   - Heap order: for every i > 0, key(ev[(i - 1) / 4]) <= key(ev[i]), where
 *     key = (time_ns, prio, seq) compared lexicographically.  The minimum is
 *     therefore ev[0]; the children of i are 4i + 1 .. 4i + 4.
 *   - seq values are unique (next_seq only grows, and clear() keeps it), so
 *     no two keys are equal and the pop order is a total order fixed by the
 *     pushes alone: the simulation is deterministic whatever the heap shape.
 *
 * Why 4-ary: a pop sifts down log4(n) levels instead of log2(n), and the
 * four children of a node are adjacent (128 bytes, two cache lines), so the
 * extra comparisons per level cost less than the levels saved.  Both push
 * and pop move a "hole" instead of swapping, writing each record once.
 *
 * Memory: the array doubles when full (amortised O(1) per push, no other
 * allocation) and never shrinks, except that sim_queue_free releases it.
 * Cancellation is the owner's business (see sim/queue.h): stale events stay
 * in the heap until popped.
 */
#include "sim/queue.h"

struct SimQueue {
  SimEvent *ev;     /* heap array, cap slots, len used */
  gsize len;
  gsize cap;
  guint64 next_seq; /* seq given to the next push */
};

/* Four children fill exactly two 64-byte cache lines. */
G_STATIC_ASSERT(sizeof(SimEvent) == 32);

/* Capacity of the first allocation (grows by doubling from there). */
#define QUEUE_MIN_CAP 64

/* Returns a new empty queue (owned by the caller; sim_queue_free). */
SimQueue *sim_queue_new(void)
{
  SimQueue *q = g_new0(SimQueue, 1);
  return q;
}

/* Frees q and every pending event in it.  NULL is allowed. */
void sim_queue_free(SimQueue *q)
{
  if (q == NULL)
    return;
  g_free(q->ev);
  g_free(q);
}

/* TRUE when a must pop before b. */
static inline gboolean queue_before(const SimEvent *a, const SimEvent *b)
{
  if (a->time_ns != b->time_ns)
    return a->time_ns < b->time_ns;
  if (a->prio != b->prio)
    return a->prio < b->prio;
  return a->seq < b->seq;
}

/* Makes room for one more event; aborts (g_renew) when memory runs out, as
 * every GLib allocation does. */
static void queue_grow(SimQueue *q)
{
  gsize cap = q->cap ? q->cap : QUEUE_MIN_CAP / 2;
  g_assert(cap <= G_MAXSIZE / 2 / sizeof(SimEvent));
  q->cap = cap * 2;
  q->ev = g_renew(SimEvent, q->ev, q->cap);
}

/* Queues an event; its seq is the number of pushes made before it, so of
 * two events with equal (time_ns, prio) the one pushed first pops first. */
void sim_queue_push(SimQueue *q, gint64 time_ns, guint32 prio, guint32 kind,
                    guint64 payload)
{
  g_return_if_fail(q != NULL);
  if (q->len == q->cap)
    queue_grow(q);

  SimEvent e = {
    .time_ns = time_ns,
    .prio = prio,
    .kind = kind,
    .seq = q->next_seq++,
    .payload = payload,
  };

  /* Sift up: move parents down into the hole while e beats them. */
  gsize i = q->len++;
  while (i > 0) {
    gsize parent = (i - 1) / 4;
    if (!queue_before(&e, &q->ev[parent]))
      break;
    q->ev[i] = q->ev[parent];
    i = parent;
  }
  q->ev[i] = e;
}

/* Removes the minimum into *ev (which may be NULL to discard it).  Returns
 * FALSE, leaving *ev untouched, when the queue is empty. */
gboolean sim_queue_pop(SimQueue *q, SimEvent *ev)
{
  g_return_val_if_fail(q != NULL, FALSE);
  if (q->len == 0)
    return FALSE;
  if (ev != NULL)
    *ev = q->ev[0];

  /* The last record fills the hole left at the root and sinks: at each
   * level the smallest child moves up while it beats the sinking record. */
  gsize n = --q->len;
  if (n == 0)
    return TRUE;
  SimEvent last = q->ev[n];
  gsize i = 0;
  for (;;) {
    gsize first = 4 * i + 1;
    if (first >= n)
      break;
    gsize end = MIN(first + 4, n);
    gsize best = first;
    for (gsize c = first + 1; c < end; c++)
      if (queue_before(&q->ev[c], &q->ev[best]))
        best = c;
    if (!queue_before(&q->ev[best], &last))
      break;
    q->ev[i] = q->ev[best];
    i = best;
  }
  q->ev[i] = last;
  return TRUE;
}

/* Copies the minimum into *ev without removing it; FALSE when empty. */
gboolean sim_queue_peek(const SimQueue *q, SimEvent *ev)
{
  g_return_val_if_fail(q != NULL, FALSE);
  g_return_val_if_fail(ev != NULL, FALSE);
  if (q->len == 0)
    return FALSE;
  *ev = q->ev[0];
  return TRUE;
}

/* Number of pending events (stale ones included). */
gsize sim_queue_len(const SimQueue *q)
{
  g_return_val_if_fail(q != NULL, 0);
  return q->len;
}

/* Drops every pending event.  The array is kept for reuse, and so is the
 * seq counter: events pushed after a clear still order after earlier pushes
 * of equal (time, prio), so a clear never makes seq values repeat. */
void sim_queue_clear(SimQueue *q)
{
  g_return_if_fail(q != NULL);
  q->len = 0;
}
