/* sim/queue.h -- the event queue: a flat-array 4-ary min-heap.
 *
 * Records are 32 bytes: time, a priority, an insertion sequence (which makes
 * the order total and so the simulation deterministic), a 64-bit payload
 * handle and a 32-bit kind.  Order: (time, priority, seq) ascending.
 * Cancellation is lazy: the owner marks its payload stale and ignores the
 * event when it pops.
 */
#ifndef SIM_QUEUE_H
#define SIM_QUEUE_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  gint64 time_ns;
  guint32 prio;     /* lower runs first at equal time */
  guint32 kind;     /* caller-defined */
  guint64 seq;      /* set by push: insertion order */
  guint64 payload;  /* caller-defined */
} SimEvent;

typedef struct SimQueue SimQueue;

SimQueue *sim_queue_new(void);
void sim_queue_free(SimQueue *q);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimQueue, sim_queue_free)
void sim_queue_push(SimQueue *q, gint64 time_ns, guint32 prio, guint32 kind,
                    guint64 payload);
/* Pops the smallest event into *ev; FALSE when empty. */
gboolean sim_queue_pop(SimQueue *q, SimEvent *ev);
/* Smallest event without removing it; FALSE when empty. */
gboolean sim_queue_peek(const SimQueue *q, SimEvent *ev);
gsize sim_queue_len(const SimQueue *q);
void sim_queue_clear(SimQueue *q);

G_END_DECLS

#endif
