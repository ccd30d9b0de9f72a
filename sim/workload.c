/* sim/workload.c -- workload container, string interning, rank builder and
 * the invariant check the engine relies on.  See sim/workload.h. */
#include "sim/workload.h"

#include <string.h>

G_DEFINE_QUARK(sim-error-quark, sim_error)

static const char *const class_names[SIM_CLASS_COUNT] = {
  "gemm", "attention", "elementwise", "norm", "softmax", "reduction",
  "embedding", "optimizer", "memcpy", "comm", "other"};
static const char *const phase_names[SIM_PHASE_COUNT] = {
  "forward", "backward", "optimizer", "other"};
static const char *const kind_names[SIM_OP_KIND_COUNT] = {
  "kernel", "collective", "send", "recv", "marker"};
static const char *const coll_names[SIM_COLL_COUNT] = {
  "all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all",
  "send_recv"};

const char *sim_class_name(SimOpClass c)
{
  return (guint)c < SIM_CLASS_COUNT ? class_names[c] : "?";
}
const char *sim_phase_name(SimPhase p)
{
  return (guint)p < SIM_PHASE_COUNT ? phase_names[p] : "?";
}
const char *sim_kind_name(SimOpKind k)
{
  return (guint)k < SIM_OP_KIND_COUNT ? kind_names[k] : "?";
}
const char *sim_coll_name(SimCollType t)
{
  return (guint)t < SIM_COLL_COUNT ? coll_names[t] : "?";
}

static int lookup(const char *const *names, int n, const char *s)
{
  for (int i = 0; s != NULL && i < n; i++)
    if (strcmp(names[i], s) == 0)
      return i;
  return -1;
}
int sim_class_from_name(const char *s)
{
  return lookup(class_names, SIM_CLASS_COUNT, s);
}
int sim_coll_from_name(const char *s)
{
  return lookup(coll_names, SIM_COLL_COUNT, s);
}

SimWorkload *sim_workload_new(guint n_ranks)
{
  SimWorkload *w = g_new0(SimWorkload, 1);
  guint32 zero = 0;
  w->n_ranks = n_ranks;
  w->ranks = g_new0(SimRank, MAX(n_ranks, 1));
  w->shapes = g_array_new(FALSE, TRUE, sizeof(SimShape));
  w->names = g_ptr_array_new_with_free_func(g_free);
  w->name_index = g_hash_table_new(g_str_hash, g_str_equal);
  w->group_off = g_array_new(FALSE, FALSE, sizeof(guint32));
  g_array_append_val(w->group_off, zero);
  w->group_ranks = g_array_new(FALSE, FALSE, sizeof(guint32));
  w->provenance = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                        g_free);
  return w;
}

void sim_workload_free(SimWorkload *w)
{
  if (w == NULL)
    return;
  for (guint r = 0; r < w->n_ranks; r++) {
    g_free(w->ranks[r].ops);
    g_free(w->ranks[r].stream_off);
  }
  g_free(w->ranks);
  g_array_unref(w->shapes);
  g_hash_table_unref(w->name_index);
  g_ptr_array_unref(w->names);
  g_array_unref(w->group_off);
  g_array_unref(w->group_ranks);
  g_hash_table_unref(w->provenance);
  g_free(w->schedule);
  g_free(w->ref_gpu);
  g_free(w->fold_rep);
  g_free(w);
}

guint32 sim_workload_intern(SimWorkload *w, const char *name)
{
  gpointer v = g_hash_table_lookup(w->name_index, name);
  if (v != NULL)
    return GPOINTER_TO_UINT(v) - 1;
  char *copy = g_strdup(name);
  guint32 id = w->names->len;
  g_ptr_array_add(w->names, copy);
  g_hash_table_insert(w->name_index, copy, GUINT_TO_POINTER(id + 1));
  return id;
}

guint32 sim_workload_add_shape(SimWorkload *w, const SimShape *shape)
{
  g_array_append_vals(w->shapes, shape, 1);
  return w->shapes->len - 1;
}

guint32 sim_workload_add_group(SimWorkload *w, const guint32 *ranks, guint n)
{
  g_return_val_if_fail(n > 0, 0);
  g_array_append_vals(w->group_ranks, ranks, n);
  guint32 end = w->group_ranks->len;
  g_array_append_val(w->group_off, end);
  return w->group_off->len - 2;
}

guint sim_workload_n_groups(const SimWorkload *w)
{
  return w->group_off->len - 1;
}

const guint32 *sim_workload_group(const SimWorkload *w, guint32 g, guint *n)
{
  g_return_val_if_fail(g < sim_workload_n_groups(w), NULL);
  guint32 a = g_array_index(w->group_off, guint32, g);
  guint32 b = g_array_index(w->group_off, guint32, g + 1);
  *n = b - a;
  return &g_array_index(w->group_ranks, guint32, a);
}

void sim_workload_set_rank(SimWorkload *w, guint r, SimOp *ops, guint32 n_ops,
                           guint32 *stream_off, guint32 n_streams)
{
  g_return_if_fail(r < w->n_ranks);
  SimRank *rk = &w->ranks[r];
  g_free(rk->ops);
  g_free(rk->stream_off);
  rk->ops = ops;
  rk->n_ops = n_ops;
  rk->stream_off = stream_off;
  rk->n_streams = n_streams;
}

guint64 sim_workload_n_ops(const SimWorkload *w)
{
  guint64 n = 0;
  for (guint r = 0; r < w->n_ranks; r++)
    n += w->ranks[r].n_ops;
  return n;
}

static gboolean group_has(const SimWorkload *w, guint32 g, guint32 rank)
{
  guint n;
  const guint32 *m = sim_workload_group(w, g, &n);
  for (guint i = 0; i < n; i++)
    if (m[i] == rank)
      return TRUE;
  return FALSE;
}

gboolean sim_workload_validate(const SimWorkload *w, GError **error)
{
  guint n_groups = sim_workload_n_groups(w);
  /* Per group: how many collectives each member issues; per (src,dst) the
   * send and recv counts.  Counts are compared after the scan. */
  g_autoptr(GHashTable) p2p = g_hash_table_new_full(g_int64_hash,
                                                    g_int64_equal, g_free,
                                                    NULL);
  g_autofree gint64 *coll_count = g_new0(gint64, MAX(n_groups, 1));
  g_autofree gint64 *coll_first = g_new(gint64, MAX(n_groups, 1));
  for (guint g = 0; g < n_groups; g++) {
    guint n;
    const guint32 *m = sim_workload_group(w, g, &n);
    coll_first[g] = -1;
    for (guint i = 0; i < n; i++) {
      if (m[i] >= w->n_ranks || (i > 0 && m[i] <= m[i - 1])) {
        g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                    "group %u: members must be distinct ranks < %u in "
                    "ascending order", g, w->n_ranks);
        return FALSE;
      }
    }
  }
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    if (rk->n_ops > 0 && (rk->stream_off == NULL || rk->n_streams == 0 ||
                          rk->n_streams > SIM_MAX_STREAMS ||
                          rk->stream_off[0] != 0 ||
                          rk->stream_off[rk->n_streams] != rk->n_ops)) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                  "rank %u: inconsistent stream offsets", r);
      return FALSE;
    }
    g_autofree gint64 *mine = g_new0(gint64, MAX(n_groups, 1));
    for (guint s = 0; s < rk->n_streams; s++) {
      if (rk->stream_off[s + 1] < rk->stream_off[s]) {
        g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                    "rank %u: stream %u offsets decrease", r, s);
        return FALSE;
      }
      for (guint32 i = rk->stream_off[s]; i < rk->stream_off[s + 1]; i++) {
        const SimOp *op = &rk->ops[i];
#define BAD(...)                                                           \
  do {                                                                     \
    g_autofree char *m_ = g_strdup_printf(__VA_ARGS__);                    \
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID, "rank %u op %u: %s",  \
                r, i, m_);                                                 \
    return FALSE;                                                          \
  } while (0)
        if (op->stream != s)
          BAD("stream field %u but stored in stream %u", op->stream, s);
        if (op->kind >= SIM_OP_KIND_COUNT || op->klass >= SIM_CLASS_COUNT ||
            op->phase >= SIM_PHASE_COUNT)
          BAD("kind, class or phase out of range");
        if (op->shape >= w->shapes->len)
          BAD("shape %u out of range (%u shapes)", op->shape,
              w->shapes->len);
        if (op->name >= w->names->len)
          BAD("name %u out of range", op->name);
        if (op->ref_ns < 0)
          BAD("negative duration");
        if (op->wait != SIM_NO_WAIT) {
          if (op->wait >= rk->n_ops)
            BAD("waits for op %u of %u", op->wait, rk->n_ops);
          if (rk->ops[op->wait].stream == op->stream)
            BAD("waits for op %u on its own stream", op->wait);
        }
        switch (op->kind) {
        case SIM_OP_COLLECTIVE:
          if (op->peer >= n_groups)
            BAD("group %u out of range (%u groups)", op->peer, n_groups);
          if (!group_has(w, op->peer, r))
            BAD("collective on group %u which does not contain the rank",
                op->peer);
          mine[op->peer]++;
          break;
        case SIM_OP_SEND:
        case SIM_OP_RECV: {
          if (op->peer >= w->n_ranks || op->peer == r)
            BAD("peer %u invalid", op->peer);
          guint32 src = op->kind == SIM_OP_SEND ? r : op->peer;
          guint32 dst = op->kind == SIM_OP_SEND ? op->peer : r;
          gint64 key = ((gint64)src << 32) | dst;
          gint64 *cnt = g_hash_table_lookup(p2p, &key);
          if (cnt == NULL) {
            gint64 *k = g_new(gint64, 2);
            k[0] = key;
            k[1] = 0;
            g_hash_table_insert(p2p, k, k);
            cnt = k;
          }
          cnt[1] += op->kind == SIM_OP_SEND ? 1 : -1;
          break;
        }
        default:
          break;
        }
#undef BAD
      }
    }
    for (guint g = 0; g < n_groups; g++) {
      if (!group_has(w, g, r))
        continue;
      if (coll_first[g] < 0) {
        coll_first[g] = mine[g];
      } else if (coll_first[g] != mine[g]) {
        g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                    "group %u: rank %u issues %" G_GINT64_FORMAT
                    " collectives, another member %" G_GINT64_FORMAT,
                    g, r, mine[g], coll_first[g]);
        return FALSE;
      }
      coll_count[g] += mine[g];
    }
  }
  GHashTableIter it;
  gpointer k;
  g_hash_table_iter_init(&it, p2p);
  while (g_hash_table_iter_next(&it, &k, NULL)) {
    gint64 *c = k;
    if (c[1] != 0) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                  "sends from rank %u to rank %u do not match the receives "
                  "(difference %" G_GINT64_FORMAT ")",
                  (guint)(c[0] >> 32), (guint)(c[0] & 0xffffffff), c[1]);
      return FALSE;
    }
  }
  return TRUE;
}

/* ---- rank builder ---------------------------------------------------- */

struct SimRankBuilder {
  GArray *ops; /* SimOp in append order; wait fields are handles */
};

SimRankBuilder *sim_rank_builder_new(void)
{
  SimRankBuilder *b = g_new0(SimRankBuilder, 1);
  b->ops = g_array_new(FALSE, FALSE, sizeof(SimOp));
  return b;
}

void sim_rank_builder_free(SimRankBuilder *b)
{
  if (b == NULL)
    return;
  g_array_unref(b->ops);
  g_free(b);
}

guint32 sim_rank_builder_add(SimRankBuilder *b, const SimOp *op)
{
  g_assert(op->stream < SIM_MAX_STREAMS);
  g_array_append_vals(b->ops, op, 1);
  return b->ops->len - 1;
}

/* Counting sort by stream (stable), then handles -> final indices. */
void sim_rank_builder_finish(SimRankBuilder *b, SimWorkload *w, guint r)
{
  guint32 n = b->ops->len;
  guint32 n_streams = 0;
  const SimOp *src = (const SimOp *)(void *)b->ops->data;
  for (guint32 i = 0; i < n; i++)
    n_streams = MAX(n_streams, (guint32)src[i].stream + 1);
  if (n == 0)
    n_streams = 1;
  guint32 *off = g_new0(guint32, n_streams + 1);
  for (guint32 i = 0; i < n; i++)
    off[src[i].stream + 1]++;
  for (guint32 s = 0; s < n_streams; s++)
    off[s + 1] += off[s];
  g_autofree guint32 *pos = g_new(guint32, MAX(n, 1));
  g_autofree guint32 *fill = g_memdup2(off, sizeof(guint32) * n_streams);
  for (guint32 i = 0; i < n; i++)
    pos[i] = fill[src[i].stream]++;
  SimOp *ops = g_new(SimOp, MAX(n, 1));
  for (guint32 i = 0; i < n; i++) {
    SimOp op = src[i];
    if (op.wait != SIM_NO_WAIT) {
      g_assert(op.wait < n);
      op.wait = pos[op.wait];
    }
    ops[pos[i]] = op;
  }
  sim_workload_set_rank(w, r, ops, n, off, n_streams);
  g_array_set_size(b->ops, 0);
}
