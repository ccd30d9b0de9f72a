/* models/dag.c -- CSR graphs, topological orders and path lengths
 * (models/dag.h).
 *
 * Both adjacency lists are filled by one counting pass and one placing
 * pass over the edge list, so each node's lists keep the edge-list order;
 * the orders in dag.h follow from that.  dag_order_lowest keeps its free
 * nodes in the engine's event queue (sim/queue.h) keyed by index: keys
 * are distinct, so the order does not depend on the heap.
 */
#include "models/dag.h"
#include "sim/queue.h"

#include <string.h>

/* Kahn's algorithm with a FIFO queue (dag.h). */
static void order_fifo(Dag *d)
{
  guint32 n = d->n;
  g_autofree guint32 *indeg = g_new(guint32, MAX(n, 1u));
  for (guint32 i = 0; i < n; i++)
    indeg[i] = d->pred_off[i + 1] - d->pred_off[i];
  guint32 head = 0, tail = 0;
  for (guint32 i = 0; i < n; i++)
    if (indeg[i] == 0)
      d->topo[tail++] = i;
  while (head < tail) {
    guint32 u = d->topo[head++];
    for (guint32 k = d->succ_off[u]; k < d->succ_off[u + 1]; k++)
      if (--indeg[d->succ[k]] == 0)
        d->topo[tail++] = d->succ[k];
  }
  d->n_ordered = tail;
}

Dag *dag_new(guint32 n, const guint32 *edges, guint32 n_edges,
             guint32 *bad_edge)
{
  for (guint32 k = 0; k < n_edges; k++)
    if (edges[2 * k] >= n || edges[2 * k + 1] >= n ||
        edges[2 * k] == edges[2 * k + 1]) {
      if (bad_edge != NULL)
        *bad_edge = k;
      return NULL;
    }
  Dag *d = g_new0(Dag, 1);
  d->n = n;
  d->n_edges = n_edges;
  d->succ_off = g_new0(guint32, (gsize)n + 1);
  d->pred_off = g_new0(guint32, (gsize)n + 1);
  for (guint32 k = 0; k < n_edges; k++) {
    d->succ_off[edges[2 * k] + 1]++;
    d->pred_off[edges[2 * k + 1] + 1]++;
  }
  for (guint32 i = 0; i < n; i++) {
    d->succ_off[i + 1] += d->succ_off[i];
    d->pred_off[i + 1] += d->pred_off[i];
  }
  d->succ = g_new(guint32, MAX(n_edges, 1u));
  d->pred = g_new(guint32, MAX(n_edges, 1u));
  g_autofree guint32 *fs = g_memdup2(d->succ_off, sizeof(guint32) * MAX(n, 1u));
  g_autofree guint32 *fp = g_memdup2(d->pred_off, sizeof(guint32) * MAX(n, 1u));
  for (guint32 k = 0; k < n_edges; k++) {
    d->succ[fs[edges[2 * k]]++] = edges[2 * k + 1];
    d->pred[fp[edges[2 * k + 1]]++] = edges[2 * k];
  }
  d->topo = g_new(guint32, MAX(n, 1u));
  order_fifo(d);
  return d;
}

void dag_free(Dag *d)
{
  if (d == NULL)
    return;
  g_free(d->succ_off);
  g_free(d->succ);
  g_free(d->pred_off);
  g_free(d->pred);
  g_free(d->topo);
  g_free(d);
}

gint64 dag_earliest(const Dag *d, const gint64 *dur, gint64 *es)
{
  gint64 T = 0;
  for (guint32 q = 0; q < d->n_ordered; q++) {
    guint32 i = d->topo[q];
    gint64 e = 0;
    for (guint32 k = d->pred_off[i]; k < d->pred_off[i + 1]; k++)
      e = MAX(e, es[d->pred[k]] + dur[d->pred[k]]);
    es[i] = e;
    T = MAX(T, e + dur[i]);
  }
  return T;
}

void dag_latest(const Dag *d, const gint64 *dur, gint64 T, gint64 *lf)
{
  for (guint32 q = d->n_ordered; q-- > 0;) {
    guint32 i = d->topo[q];
    gint64 l = T;
    for (guint32 k = d->succ_off[i]; k < d->succ_off[i + 1]; k++)
      l = MIN(l, lf[d->succ[k]] - dur[d->succ[k]]);
    lf[i] = l;
  }
}

gint64 dag_longest_path(const Dag *d, const gint64 *dur)
{
  g_autofree gint64 *es = g_new(gint64, MAX(d->n, 1u));
  return dag_earliest(d, dur, es);
}

guint32 dag_order_lowest(const Dag *d, guint32 *order)
{
  guint32 n = d->n, no = 0, scan = 0, dropped = 0;
  g_autofree guint32 *indeg = g_new(guint32, MAX(n, 1u));
  g_autofree gboolean *queued = g_new0(gboolean, MAX(n, 1u));
  g_autoptr(SimQueue) q = sim_queue_new();
  for (guint32 i = 0; i < n; i++) {
    indeg[i] = d->pred_off[i + 1] - d->pred_off[i];
    if (indeg[i] == 0) {
      queued[i] = TRUE;
      sim_queue_push(q, i, 0, 0, 0);
    }
  }
  while (no < n) {
    if (sim_queue_len(q) == 0) {
      /* A cycle: release the lowest node still waiting. */
      while (queued[scan])
        scan++;
      dropped += indeg[scan];
      indeg[scan] = 0;
      queued[scan] = TRUE;
      sim_queue_push(q, scan, 0, 0, 0);
    }
    SimEvent ev;
    sim_queue_pop(q, &ev);
    guint32 top = (guint32)ev.time_ns;
    order[no++] = top;
    for (guint32 k = d->succ_off[top]; k < d->succ_off[top + 1]; k++) {
      guint32 c = d->succ[k];
      if (!queued[c] && --indeg[c] == 0) {
        queued[c] = TRUE;
        sim_queue_push(q, c, 0, 0, 0);
      }
    }
  }
  return dropped;
}
