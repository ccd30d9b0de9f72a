/* models/dvfs/maxflow.c -- Dinic's maximum flow (models/dvfs/maxflow.h).
 *
 * BFS levels from the source over arcs with residual capacity, then
 * blocking flows by DFS with current-arc pointers, until the sink is out
 * of reach or the flow reaches the caller's limit.  Arcs live in one array
 * in pairs (a, a ^ 1), each vertex's list threaded through `next` from
 * `head`, newest first.  The DFS recurses along level paths, so its depth
 * is at most the longest one (a few thousand for the DAGs Perseus cuts).
 */
#include "models/dvfs/maxflow.h"

#include <string.h>

typedef struct {
  gint32 to, next;
  gint64 cap;
} Arc;

void maxflow_init(MaxFlow *f)
{
  memset(f, 0, sizeof *f);
  f->arcs = g_array_new(FALSE, FALSE, sizeof(Arc));
}

void maxflow_clear(MaxFlow *f)
{
  g_free(f->head);
  g_free(f->it);
  g_free(f->level);
  g_free(f->queue);
  if (f->arcs != NULL)
    g_array_unref(f->arcs);
  memset(f, 0, sizeof *f);
}

void maxflow_reset(MaxFlow *f, guint nv)
{
  if (nv > f->cap_v) {
    f->head = g_renew(gint32, f->head, nv);
    f->it = g_renew(gint32, f->it, nv);
    f->level = g_renew(gint32, f->level, nv);
    f->queue = g_renew(gint32, f->queue, nv);
    f->cap_v = nv;
  }
  f->nv = nv;
  for (guint v = 0; v < nv; v++)
    f->head[v] = -1;
  g_array_set_size(f->arcs, 0);
}

void maxflow_arc(MaxFlow *f, gint32 u, gint32 v, gint64 cap)
{
  Arc a = {v, f->head[u], cap};
  g_array_append_val(f->arcs, a);
  f->head[u] = (gint32)f->arcs->len - 1;
  Arc b = {u, f->head[v], 0};
  g_array_append_val(f->arcs, b);
  f->head[v] = (gint32)f->arcs->len - 1;
}

/* BFS levels from s over arcs with residual capacity; returns TRUE when t
 * is reachable. */
static gboolean bfs(MaxFlow *f, gint32 s, gint32 t)
{
  Arc *A = (Arc *)(void *)f->arcs->data;
  for (guint v = 0; v < f->nv; v++)
    f->level[v] = -1;
  guint qh = 0, qt = 0;
  f->level[s] = 0;
  f->queue[qt++] = s;
  while (qh < qt) {
    gint32 u = f->queue[qh++];
    /* Beyond the sink's level nothing can be on a shortest path. */
    if (f->level[t] >= 0 && f->level[u] >= f->level[t])
      break;
    for (gint32 a = f->head[u]; a >= 0; a = A[a].next)
      if (A[a].cap > 0 && f->level[A[a].to] < 0) {
        f->level[A[a].to] = f->level[u] + 1;
        f->queue[qt++] = A[a].to;
      }
  }
  return f->level[t] >= 0;
}

/* Blocking-flow DFS with current-arc pointers, pushing along as many
 * paths as fit in `pushed` (recursion depth <= the longest level path, a
 * few thousand at most). */
static gint64 dfs(MaxFlow *f, gint32 u, gint32 t, gint64 pushed)
{
  if (u == t)
    return pushed;
  Arc *A = (Arc *)(void *)f->arcs->data;
  gint64 total = 0;
  for (; f->it[u] >= 0; f->it[u] = A[f->it[u]].next) {
    gint32 a = f->it[u];
    gint32 v = A[a].to;
    if (A[a].cap <= 0 || f->level[v] != f->level[u] + 1)
      continue;
    gint64 got = dfs(f, v, t, MIN(pushed - total, A[a].cap));
    if (got > 0) {
      A[a].cap -= got;
      A[a ^ 1].cap += got;
      total += got;
      if (total == pushed)
        return total; /* this arc may still have room: keep it current */
    }
  }
  f->level[u] = -1; /* dead end for the rest of this phase */
  return total;
}

/* Max flow from s to t, stopping once it reaches `limit`. */
gint64 maxflow_run(MaxFlow *f, gint32 s, gint32 t, gint64 limit)
{
  gint64 total = 0;
  while (total < limit && bfs(f, s, t)) {
    memcpy(f->it, f->head, sizeof(gint32) * f->nv);
    gint64 got;
    while (total < limit && (got = dfs(f, s, t, limit - total)) > 0)
      total += got;
  }
  return total;
}

void maxflow_cut(MaxFlow *f, gint32 s, gint32 t)
{
  bfs(f, s, t);
}
