/* sim/workload.c -- workload container, string interning, the name tables,
 * shared programs and the rank builder.  See sim/workload.h.  The
 * invariant check the engine relies on is sim/validate.c, folding
 * identical ranks sim/fold.c, sharing alike ranks' ops sim/share.c;
 * sim/workload-private.h holds what the first three share.
 */
#include "sim/workload-private.h"
#include "sim/search.h"
#include "io/fault.h"

#include <string.h>

G_DEFINE_QUARK(sim-error-quark, sim_error)

static const char *const class_names[SIM_CLASS_COUNT] = {
  "gemm", "attention", "elementwise", "norm", "softmax", "reduction",
  "embedding", "optimizer", "memcpy", "comm", "other"};
static const char *const phase_names[SIM_PHASE_COUNT] = {
  "forward", "backward", "optimizer", "other"};
static const char *const kind_names[SIM_OP_KIND_COUNT] = {
  "kernel", "collective", "send", "recv", "marker", "host"};
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

static void program_free(gpointer p)
{
  SimProgram *pg = p;
  g_free(pg->ops);
  g_free(pg->stream_off);
  g_free(pg);
}

/* Drops what a rank holds: frees its own arrays, or lets go of its
 * program (which stays with w->programs); it is left empty. */
void sim_rank_release(SimRank *rk)
{
  if (rk->program == SIM_NO_PROGRAM) {
    g_free((SimOp *)rk->ops);
    g_free((guint32 *)rk->stream_off);
  }
  rk->ops = NULL;
  rk->stream_off = NULL;
  rk->n_ops = rk->n_streams = 0;
  rk->program = SIM_NO_PROGRAM;
  memset(rk->peer_delta, 0, sizeof rk->peer_delta);
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
  w->programs = g_ptr_array_new_with_free_func(program_free);
  for (guint r = 0; r < n_ranks; r++)
    w->ranks[r].program = SIM_NO_PROGRAM;
  return w;
}

void sim_workload_free(SimWorkload *w)
{
  if (w == NULL)
    return;
  for (guint r = 0; r < w->n_ranks; r++)
    sim_rank_release(&w->ranks[r]);
  g_free(w->ranks);
  g_ptr_array_unref(w->programs);
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
  sim_rank_release(rk);
  rk->ops = ops;
  rk->n_ops = n_ops;
  rk->stream_off = stream_off;
  rk->n_streams = n_streams;
}

void sim_workload_share_rank(SimWorkload *w, guint r, guint src,
                             const guint32 delta[SIM_PATCH_COUNT])
{
  g_return_if_fail(r < w->n_ranks && src < w->n_ranks && r != src);
  SimRank *from = &w->ranks[src];
  if (from->program == SIM_NO_PROGRAM) {
    /* src's own arrays become a shared program (src's peers are its ops'
     * own, so its deltas stay 0). */
    SimProgram *pg = g_new(SimProgram, 1);
    pg->ops = (SimOp *)from->ops;
    pg->stream_off = (guint32 *)from->stream_off;
    pg->n_ops = from->n_ops;
    pg->n_streams = from->n_streams;
    from->program = w->programs->len;
    g_ptr_array_add(w->programs, pg);
  }
  SimRank *rk = &w->ranks[r];
  sim_rank_release(rk);
  rk->ops = from->ops;
  rk->n_ops = from->n_ops;
  rk->stream_off = from->stream_off;
  rk->n_streams = from->n_streams;
  rk->program = from->program;
  for (guint k = 1; k < SIM_PATCH_COUNT; k++)
    rk->peer_delta[k] = from->peer_delta[k] + delta[k];
}

guint32 sim_workload_add_program(SimWorkload *w, SimOp *ops, guint32 n_ops,
                                 guint32 *stream_off, guint32 n_streams)
{
  SimProgram *pg = g_new(SimProgram, 1);
  pg->ops = ops;
  pg->stream_off = stream_off;
  pg->n_ops = n_ops;
  pg->n_streams = n_streams;
  g_ptr_array_add(w->programs, pg);
  return w->programs->len - 1;
}

void sim_workload_set_rank_program(SimWorkload *w, guint r, guint32 p,
                                   const guint32 delta[SIM_PATCH_COUNT])
{
  g_return_if_fail(r < w->n_ranks && p < w->programs->len &&
                   delta[0] == 0);
  const SimProgram *pg = g_ptr_array_index(w->programs, p);
  SimRank *rk = &w->ranks[r];
  sim_rank_release(rk);
  rk->ops = pg->ops;
  rk->n_ops = pg->n_ops;
  rk->stream_off = pg->stream_off;
  rk->n_streams = pg->n_streams;
  rk->program = p;
  memcpy(rk->peer_delta, delta, sizeof rk->peer_delta);
}

gboolean sim_workload_materialise_rank(SimWorkload *w, guint r,
                                       GError **error)
{
  g_return_val_if_fail(r < w->n_ranks, FALSE);
  SimRank *rk = &w->ranks[r];
  if (rk->program == SIM_NO_PROGRAM)
    return TRUE;
  SimOp *ops = fault_try_alloc(MAX(rk->n_ops, 1), sizeof(SimOp),
                               "workload: op array", SIM_ERROR,
                               SIM_ERROR_LIMIT, error);
  if (ops == NULL) {
    g_prefix_error(error, "rank %u: ", r);
    return FALSE;
  }
  for (guint32 i = 0; i < rk->n_ops; i++) {
    ops[i] = rk->ops[i];
    ops[i].peer = sim_op_peer(rk, &rk->ops[i]);
    ops[i].patch = 0;
  }
  guint32 *off = g_memdup2(rk->stream_off,
                           sizeof(guint32) * (rk->n_streams + 1));
  guint32 n_ops = rk->n_ops, n_streams = rk->n_streams;
  rk->program = SIM_NO_PROGRAM; /* the program stays with w->programs */
  rk->ops = NULL;
  rk->stream_off = NULL;
  sim_workload_set_rank(w, r, ops, n_ops, off, n_streams);
  return TRUE;
}

gboolean sim_workload_materialise(SimWorkload *w, GError **error)
{
  for (guint r = 0; r < w->n_ranks; r++)
    if (!sim_workload_materialise_rank(w, r, error))
      return FALSE;
  return TRUE;
}

SimOp *sim_workload_rank_ops_mut(SimWorkload *w, guint r)
{
  GError *err = NULL;
  if (!sim_workload_materialise_rank(w, r, &err))
    g_error("%s", err->message);
  return (SimOp *)w->ranks[r].ops;
}

guint sim_workload_n_programs(const SimWorkload *w)
{
  guint n = 0;
  g_autofree guint8 *used = g_new0(guint8, MAX(w->programs->len, 1));
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    if (rk->program == SIM_NO_PROGRAM)
      n += rk->n_ops > 0;
    else if (!used[rk->program])
      used[rk->program] = 1, n++;
  }
  return n;
}

guint64 sim_workload_n_stored_ops(const SimWorkload *w)
{
  guint64 n = 0;
  g_autofree guint8 *used = g_new0(guint8, MAX(w->programs->len, 1));
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    if (rk->program == SIM_NO_PROGRAM)
      n += rk->n_ops;
    else if (!used[rk->program])
      used[rk->program] = 1, n += rk->n_ops;
  }
  return n;
}

guint64 sim_workload_n_ops(const SimWorkload *w)
{
  guint64 n = 0;
  for (guint r = 0; r < w->n_ranks; r++)
    n += w->ranks[r].n_ops;
  return n;
}

static gint cmp_str(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

GPtrArray *sim_workload_provenance_keys(const SimWorkload *w)
{
  GPtrArray *keys = g_ptr_array_new();
  GHashTableIter it;
  gpointer k;
  g_hash_table_iter_init(&it, w->provenance);
  while (g_hash_table_iter_next(&it, &k, NULL))
    g_ptr_array_add(keys, k);
  g_ptr_array_sort(keys, cmp_str);
  return keys;
}

/* Position of `rank` among group g's members (ascending), or -1. */
gint64 sim_member_pos(const SimWorkload *w, guint32 g, guint32 rank)
{
  const guint32 *off = (const guint32 *)(void *)w->group_off->data;
  const guint32 *mem = (const guint32 *)(void *)w->group_ranks->data;
  guint32 at = sim_lower_bound_u32(mem, off[g], off[g + 1], rank);
  return at < off[g + 1] && mem[at] == rank ? (gint64)at : -1;
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

/* Counting sort by stream (stable), then handles -> final indices.  The op
 * array, the one allocation as large as the workload, is allocated first
 * and may fail (io/fault.h): nothing has changed then. */
gboolean sim_rank_builder_try_finish(SimRankBuilder *b, SimWorkload *w,
                                     guint r, GError **error)
{
  guint32 n = b->ops->len;
  guint32 n_streams = 0;
  const SimOp *src = (const SimOp *)(void *)b->ops->data;
  SimOp *ops = fault_try_alloc(n, sizeof(SimOp), "workload: op array",
                               SIM_ERROR, SIM_ERROR_LIMIT, error);
  if (ops == NULL) {
    g_prefix_error(error, "rank %u: ", r);
    return FALSE;
  }
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
  return TRUE;
}

/* sim_rank_builder_try_finish() for producers without an error path: a
 * failed allocation aborts, as g_new() does. */
void sim_rank_builder_finish(SimRankBuilder *b, SimWorkload *w, guint r)
{
  GError *err = NULL;
  if (!sim_rank_builder_try_finish(b, w, r, &err))
    g_error("%s", err->message);
}
