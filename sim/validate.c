/* sim/validate.c -- the invariant check the engine relies on: every op's
 * fields in range, waits across streams only, collectives and
 * point-to-point ops that can match, a fold map that keeps its promise
 * (sim_workload_validate in sim/workload.h).  Whole workloads at once
 * (sim_workload_validate) or rank by rank as a loader streams them in
 * (SimValidator).
 */
#include "sim/workload-private.h"

/* fold_rep: representatives map to themselves, folded-away ranks carry no
 * ops (sim/workload.h). */
static gboolean validate_fold(const SimWorkload *w, GError **error)
{
  for (guint r = 0; r < w->n_ranks; r++) {
    guint32 q = w->fold_rep[r];
    if (q >= w->n_ranks) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                  "fold_rep: rank %u folds to rank %u, out of range (%u "
                  "ranks)", r, q, w->n_ranks);
      return FALSE;
    }
    if (w->fold_rep[q] != q) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                  "fold_rep: rank %u folds to rank %u, which is not a "
                  "representative (it folds to rank %u)", r, q,
                  w->fold_rep[q]);
      return FALSE;
    }
    if (q != r && w->ranks[r].n_ops > 0) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                  "fold_rep: rank %u folds to rank %u but carries %u ops of "
                  "its own (only representatives may)", r, q,
                  w->ranks[r].n_ops);
      return FALSE;
    }
  }
  return TRUE;
}

/* The first thing wrong with op i of rank r (stored in stream s), for the
 * error message; NULL when nothing is (the fast check was conservative). */
static char *op_problem(const SimWorkload *w, const SimRank *rk, guint s,
                        guint32 i)
{
  const SimOp *op = &rk->ops[i];
  if (op->stream != s)
    return g_strdup_printf("stream field %u but stored in stream %u",
                           op->stream, s);
  if (op->kind >= SIM_OP_KIND_COUNT || op->klass >= SIM_CLASS_COUNT ||
      op->phase >= SIM_PHASE_COUNT)
    return g_strdup("kind, class or phase out of range");
  if (op->shape >= w->shapes->len)
    return g_strdup_printf("shape %u out of range (%u shapes)", op->shape,
                           w->shapes->len);
  if (op->name >= w->names->len)
    return g_strdup_printf("name %u out of range", op->name);
  if (op->ref_ns < 0)
    return g_strdup("negative duration");
  if (op->patch >= SIM_PATCH_COUNT)
    return g_strdup_printf("peer patch %u out of range", op->patch);
  if (op->wait != SIM_NO_WAIT) {
    if (op->wait >= rk->n_ops)
      return g_strdup_printf("waits for op %u of %u", op->wait, rk->n_ops);
    if (rk->ops[op->wait].stream == op->stream)
      return g_strdup_printf("waits for op %u on its own stream", op->wait);
  }
  return NULL;
}

/* Validation state between the per-rank passes (see sim/workload.h). */
struct SimValidator {
  const SimWorkload *w;
  guint n_groups;
  GHashTable *p2p;   /* (src << 32 | dst) -> gint64[2] {key, sends - recvs} */
  guint32 *mcount;   /* per group membership: collectives issued */
  GArray **prog_comm; /* per shared program, once its ops are checked: the
                         indices of its communication ops (a sharer only
                         checks those: its peers are its own) */
};

void sim_validator_free(SimValidator *v)
{
  if (v == NULL)
    return;
  g_hash_table_unref(v->p2p);
  g_free(v->mcount);
  for (guint p = 0; p < v->w->programs->len; p++)
    if (v->prog_comm[p] != NULL)
      g_array_unref(v->prog_comm[p]);
  g_free(v->prog_comm);
  g_free(v);
}

SimValidator *sim_validator_new(const SimWorkload *w, GError **error)
{
  guint n_groups = sim_workload_n_groups(w);
  for (guint g = 0; g < n_groups; g++) {
    guint n;
    const guint32 *m = sim_workload_group(w, g, &n);
    for (guint i = 0; i < n; i++) {
      if (m[i] >= w->n_ranks || (i > 0 && m[i] <= m[i - 1])) {
        g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                    "group %u: members must be distinct ranks < %u in "
                    "ascending order", g, w->n_ranks);
        return NULL;
      }
    }
  }
  if (w->fold_rep != NULL && !validate_fold(w, error))
    return NULL;
  SimValidator *v = g_new0(SimValidator, 1);
  v->w = w;
  v->n_groups = n_groups;
  v->p2p = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  v->mcount = g_new0(guint32, MAX(w->group_ranks->len, 1));
  v->prog_comm = g_new0(GArray *, w->programs->len + 1);
  return v;
}

/* Fails the check of op i of rank r (both in scope, with `error`): "rank
 * R op I: ..." */
#define BAD(...)                                                           \
  do {                                                                     \
    g_autofree char *m_ = g_strdup_printf(__VA_ARGS__);                    \
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID, "rank %u op %u: %s",  \
                r, i, m_);                                                 \
    return FALSE;                                                          \
  } while (0)

/* Where a rank's last collective's membership was (consecutive ones are
 * mostly on one group). */
typedef struct {
  guint32 group;
  gint64 pos;
} LastGroup;

/* The per-rank checks of communication op i of rank r: its group or peer
 * (the rank's own, through its patch), and the counts that
 * sim_validator_finish compares. */
static gboolean check_comm(SimValidator *v, guint r, guint32 i,
                           LastGroup *last, GError **error)
{
  const SimWorkload *w = v->w;
  const guint32 *fold = w->fold_rep;
  const guint n_groups = v->n_groups;
  const SimRank *rk = &w->ranks[r];
  const SimOp *op = &rk->ops[i];
  guint32 peer = sim_op_peer(rk, op);
  switch (op->kind) {
  case SIM_OP_COLLECTIVE: {
    if (peer >= n_groups)
      BAD("group %u out of range (%u groups)", peer, n_groups);
    if (peer != last->group) {
      last->group = peer;
      last->pos = sim_member_pos(w, peer, r);
    }
    gint64 pos = last->pos;
    if (pos < 0)
      BAD("collective on group %u which does not contain the rank",
          peer);
    v->mcount[pos]++;
    break;
  }
  case SIM_OP_SEND:
  case SIM_OP_RECV: {
    if (peer >= w->n_ranks || peer == r)
      BAD("peer %u invalid", peer);
    guint32 src = op->kind == SIM_OP_SEND ? r : peer;
    guint32 dst = op->kind == SIM_OP_SEND ? peer : r;
    if (fold != NULL) {
      src = fold[src];
      dst = fold[dst];
    }
    gint64 key = ((gint64)src << 32) | dst;
    gint64 *cnt = g_hash_table_lookup(v->p2p, &key);
    if (cnt == NULL) {
      gint64 *k = g_new(gint64, 2);
      k[0] = key;
      k[1] = 0;
      g_hash_table_insert(v->p2p, k, k);
      cnt = k;
    }
    cnt[1] += op->kind == SIM_OP_SEND ? 1 : -1;
    break;
  }
  default:
    break;
  }
  return TRUE;
}

gboolean sim_validator_rank(SimValidator *v, guint r, GError **error)
{
  const SimWorkload *w = v->w;
  const guint n_shapes = w->shapes->len, n_names = w->names->len;
  const SimRank *rk = &w->ranks[r];
  LastGroup last = { G_MAXUINT32, -1 };
  g_autoptr(GArray) comm = NULL; /* the program's comm ops, on its first
                                    check */
  if (rk->program != SIM_NO_PROGRAM) {
    if (rk->program >= w->programs->len) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                  "rank %u: program %u out of range (%u programs)", r,
                  rk->program, w->programs->len);
      return FALSE;
    }
    GArray *done = v->prog_comm[rk->program];
    if (done != NULL) {
      /* Its ops passed with an earlier sharer: only its peers are new. */
      for (guint k = 0; k < done->len; k++)
        if (!check_comm(v, r, g_array_index(done, guint32, k), &last, error))
          return FALSE;
      return TRUE;
    }
    comm = g_array_new(FALSE, FALSE, sizeof(guint32));
  }
  if (rk->n_ops > 0 && (rk->stream_off == NULL || rk->n_streams == 0 ||
                        rk->n_streams > SIM_MAX_STREAMS ||
                        rk->stream_off[0] != 0 ||
                        rk->stream_off[rk->n_streams] != rk->n_ops)) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "rank %u: inconsistent stream offsets", r);
    return FALSE;
  }
  for (guint s = 0; s < rk->n_streams && rk->n_ops > 0; s++) {
    if (rk->stream_off[s + 1] < rk->stream_off[s]) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                  "rank %u: stream %u offsets decrease", r, s);
      return FALSE;
    }
    for (guint32 i = rk->stream_off[s]; i < rk->stream_off[s + 1]; i++) {
      const SimOp *op = &rk->ops[i];
      /* One branch for the common case; op_problem() names the fault. */
      if (G_UNLIKELY(op->stream != s || op->kind >= SIM_OP_KIND_COUNT ||
                     op->klass >= SIM_CLASS_COUNT ||
                     op->phase >= SIM_PHASE_COUNT ||
                     op->shape >= n_shapes || op->name >= n_names ||
                     op->ref_ns < 0 || op->patch >= SIM_PATCH_COUNT ||
                     (op->wait != SIM_NO_WAIT &&
                      (op->wait >= rk->n_ops ||
                       rk->ops[op->wait].stream == op->stream)))) {
        g_autofree char *why = op_problem(w, rk, s, i);
        if (why != NULL)
          BAD("%s", why);
      }
      if (op->kind == SIM_OP_COLLECTIVE || op->kind == SIM_OP_SEND ||
          op->kind == SIM_OP_RECV) {
        if (!check_comm(v, r, i, &last, error))
          return FALSE;
        if (comm != NULL)
          g_array_append_val(comm, i);
      }
    }
  }
  if (comm != NULL)
    v->prog_comm[rk->program] = g_steal_pointer(&comm);
  return TRUE;
}

#undef BAD

gboolean sim_validator_finish(SimValidator *v, GError **error)
{
  const SimWorkload *w = v->w;
  const guint32 *fold = w->fold_rep;
  /* Every member of a group issues as many collectives on it as the
   * others; a folded member counts as its representative, which must then
   * be a member that issues them itself. */
  for (guint g = 0; g < v->n_groups; g++) {
    guint n;
    const guint32 *m = sim_workload_group(w, g, &n);
    guint32 off = g_array_index(w->group_off, guint32, g);
    gint64 first = -1;
    for (guint i = 0; i < n; i++) {
      gint64 c;
      if (fold == NULL || fold[m[i]] == m[i]) {
        c = v->mcount[off + i];
      } else {
        gint64 pos = sim_member_pos(w, g, fold[m[i]]);
        c = pos < 0 ? 0 : v->mcount[pos];
      }
      if (i == 0) {
        first = c;
      } else if (c != first) {
        if (fold != NULL && fold[m[i]] != m[i])
          g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                      "group %u: rank %u folds to rank %u, which issues %"
                      G_GINT64_FORMAT " collectives on the group%s; rank %u "
                      "issues %" G_GINT64_FORMAT, g, m[i], fold[m[i]], c,
                      sim_member_pos(w, g, fold[m[i]]) < 0
                          ? " (it is not a member)"
                          : "",
                      m[0], first);
        else
          g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                      "group %u: rank %u issues %" G_GINT64_FORMAT
                      " collectives, another member %" G_GINT64_FORMAT,
                      g, m[i], c, first);
        return FALSE;
      }
    }
  }
  GHashTableIter it;
  gpointer k;
  g_hash_table_iter_init(&it, v->p2p);
  while (g_hash_table_iter_next(&it, &k, NULL)) {
    gint64 *c = k;
    if (c[1] != 0) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                  "sends from rank %u to rank %u do not match the receives "
                  "(difference %" G_GINT64_FORMAT ")%s",
                  (guint)(c[0] >> 32), (guint)(c[0] & 0xffffffff), c[1],
                  fold != NULL ? " (ranks folded to their representatives)"
                               : "");
      return FALSE;
    }
  }
  return TRUE;
}

gboolean sim_workload_validate(const SimWorkload *w, GError **error)
{
  g_autoptr(SimValidator) v = sim_validator_new(w, error);
  if (v == NULL)
    return FALSE;
  for (guint r = 0; r < w->n_ranks; r++)
    if (!sim_validator_rank(v, r, error))
      return FALSE;
  return sim_validator_finish(v, error);
}
