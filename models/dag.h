/* models/dag.h -- directed acyclic graphs of nodes 0..n-1 from an edge
 * list: CSR adjacency, a deterministic topological order, earliest starts,
 * latest finishes and the longest path under per-node durations.
 *
 * Orders (each user relies on its exact tie-break):
 *  - Dag.topo, built with the graph: Kahn's algorithm with a FIFO queue,
 *    the sources in index order first, then each node's successors in the
 *    order their edges were listed as they become free.  On a cycle only
 *    the nodes before it are ordered (n_ordered < n).
 *  - dag_order_lowest(): Kahn's algorithm taking the lowest-index free
 *    node each time (an imported trace's file order), releasing the
 *    lowest-index waiting node when a cycle blocks it.
 *
 * Users: the Perseus DAG (models/dvfs/perseus.c) and the planners on it
 * (EnvPipe, Zeus, the frontier), the DVFS model's node graph
 * (models/dvfs/model.c), the Chakra importer (traces/chakra.c).
 */
#ifndef MODELS_DAG_H
#define MODELS_DAG_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  guint32 n, n_edges;
  /* Successors of node i at succ[succ_off[i] .. succ_off[i+1]), predecessors
   * at pred[pred_off[i] .. pred_off[i+1]), both in edge-list order; an edge
   * listed twice appears twice. */
  guint32 *succ_off, *succ;
  guint32 *pred_off, *pred;
  guint32 *topo;       /* n entries; the first n_ordered are the order */
  guint32 n_ordered;   /* n when the graph is acyclic */
} Dag;

/* The graph of n nodes and n_edges edges edges[2k] -> edges[2k+1].  NULL
 * when an edge names a node >= n or is a self-loop (*bad_edge, may be
 * NULL: the first such k).  A cycle is not an error: see n_ordered.
 * Caller owns the result. */
Dag *dag_new(guint32 n, const guint32 *edges, guint32 n_edges,
             guint32 *bad_edge);
void dag_free(Dag *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Dag, dag_free)

static inline gboolean dag_acyclic(const Dag *d)
{
  return d->n_ordered == d->n;
}

/* Earliest starts es[i] = max over predecessors p of es[p] + dur[p] (0
 * for sources), in topological order; returns the longest path, the
 * largest es[i] + dur[i] (0 for an empty graph).  Acyclic graphs only. */
gint64 dag_earliest(const Dag *d, const gint64 *dur, gint64 *es);
/* Latest finishes for deadline T: lf[i] = min(T, min over successors s of
 * lf[s] - dur[s]), in reverse topological order.  Acyclic graphs only. */
void dag_latest(const Dag *d, const gint64 *dur, gint64 T, gint64 *lf);
/* The longest path under dur (dag_earliest without the starts). */
gint64 dag_longest_path(const Dag *d, const gint64 *dur);

/* Every node into order (n entries), lowest free index first; a cycle is
 * broken by releasing the lowest-index node not yet ordered, whose edges
 * from nodes still unordered are dropped: returns how many were (0 for an
 * acyclic graph, where the order is the lowest-index topological one). */
guint32 dag_order_lowest(const Dag *d, guint32 *order);

G_END_DECLS

#endif
