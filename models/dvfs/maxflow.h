/* models/dvfs/maxflow.h -- maximum flow (Dinic) on a small directed graph
 * with 64-bit integer capacities, and the source side of a minimum cut.
 *
 * A MaxFlow is reused across graphs: maxflow_reset() clears it for nv
 * vertices (0..nv-1) keeping its buffers, maxflow_arc() adds arcs,
 * maxflow_run() pushes flow, maxflow_cut() then marks the vertices the
 * source reaches in the residual graph.  The perseus frontier
 * (models/dvfs/perseus_frontier.c) is its user.  See maxflow.c.
 */
#ifndef MODELS_DVFS_MAXFLOW_H
#define MODELS_DVFS_MAXFLOW_H

#include <glib.h>

G_BEGIN_DECLS

/* The fields are maxflow.c's; a zeroed struct (maxflow_init) is empty. */
typedef struct {
  guint cap_v;                        /* vertices the buffers hold */
  guint nv;                           /* vertices of the current graph */
  gint32 *head, *it, *level, *queue;
  GArray *arcs;                       /* paired: arc a and its reverse a ^ 1 */
} MaxFlow;

void maxflow_init(MaxFlow *f);
/* Frees the buffers; f can be initialised again. */
void maxflow_clear(MaxFlow *f);
/* An empty graph of nv vertices. */
void maxflow_reset(MaxFlow *f, guint nv);
/* Adds arc u -> v with capacity cap >= 0 (and its residual reverse). */
void maxflow_arc(MaxFlow *f, gint32 u, gint32 v, gint64 cap);
/* Pushes the maximum flow from s to t, stopping once it reaches `limit`;
 * returns it. */
gint64 maxflow_run(MaxFlow *f, gint32 s, gint32 t, gint64 limit);
/* After maxflow_run: marks the vertices s reaches over arcs with residual
 * capacity (the source side of a minimum cut when the flow is maximum). */
void maxflow_cut(MaxFlow *f, gint32 s, gint32 t);
/* After maxflow_cut: TRUE when v is on the source side. */
static inline gboolean maxflow_reached(const MaxFlow *f, gint32 v)
{
  return f->level[v] >= 0;
}

G_END_DECLS

#endif
