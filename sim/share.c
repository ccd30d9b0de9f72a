/* sim/share.c -- sim_workload_share_alike(): ranks that run the same ops,
 * naming groups and peers shifted by one constant, share one program.
 * See sim/workload.h, "Shared programs".
 *
 * The generator knows its layout and shares each stage's template as it
 * builds it.  Imported workloads arrive with every rank owning its ops;
 * this pass finds the ranks among them that could have shared, exactly:
 *
 *   Rank r can run rank t's ops when the two hold the same streams and,
 *   op by op, the same records in every field but the peer, and their
 *   peers differ by one constant per kind of name: d_c for every
 *   collective's group id, d_p for every send's and receive's peer rank,
 *   0 for the rest (kernels, markers and host ops name nothing, but their
 *   peer fields must agree too, so that nothing of r changes).
 *
 * t's ops then become a program with patch 1 on every collective, 3 on
 * every send and receive and 0 elsewhere (t runs it with deltas 0, so its
 * own peers do not move), and r runs it with peer_delta[1] = d_c and
 * peer_delta[3] = d_p (mod 2^32, as sim_op_peer adds).  Patch 2 is left
 * unused: the generator's third delta (its TP index) has no counterpart
 * in a layout that is not known.
 *
 * Finding the pairs: each rank's *normal form* is its op records with the
 * patch byte 0 and the peer of a collective (send/receive) made relative
 * to the rank's first collective (send/receive), so two ranks can share
 * exactly when their normal forms are equal, and the constants are the
 * differences of those first peers.  Normal forms are hashed (64-bit) and
 * bucketed; a rank joins the first earlier rank of its bucket whose
 * normal form is equal (compared in full, so a collision costs a
 * comparison, never a wrong share), else it starts a template of its own.
 * Cost: two passes over the ops of each rank, no per-op memory.
 *
 * What is left alone: ranks without ops, ranks that already run a shared
 * program (whose patch bytes mark other deltas), and folded workloads
 * (fold_rep: only representatives carry ops).
 */
#include "sim/workload.h"

#include <string.h>

/* The patch bytes the pass marks (see above). */
enum { SHARE_PATCH_COLL = 1, SHARE_PATCH_P2P = 3 };

/* The peers a rank's normal form is relative to: its first collective's
 * group and its first send's or receive's peer (0 when it has none). */
typedef struct {
  guint32 coll0, p2p0;
} ShareBase;

static ShareBase share_base(const SimRank *rk)
{
  ShareBase b = { 0, 0 };
  gboolean have_c = FALSE, have_p = FALSE;
  for (guint32 i = 0; i < rk->n_ops && !(have_c && have_p); i++) {
    const SimOp *op = &rk->ops[i];
    if (op->kind == SIM_OP_COLLECTIVE && !have_c) {
      b.coll0 = op->peer;
      have_c = TRUE;
    } else if ((op->kind == SIM_OP_SEND || op->kind == SIM_OP_RECV) &&
               !have_p) {
      b.p2p0 = op->peer;
      have_p = TRUE;
    }
  }
  return b;
}

/* Op i of a rank in normal form. */
static inline SimOp share_normal(const SimOp *op, ShareBase b)
{
  SimOp x = *op;
  x.patch = 0;
  if (x.kind == SIM_OP_COLLECTIVE)
    x.peer -= b.coll0;
  else if (x.kind == SIM_OP_SEND || x.kind == SIM_OP_RECV)
    x.peer -= b.p2p0;
  return x;
}

static guint64 share_hash(const SimRank *rk, ShareBase b)
{
  guint64 h = sim_mix64(((guint64)rk->n_ops << 8) ^ rk->n_streams);
  for (guint32 s = 0; s <= rk->n_streams; s++)
    h = sim_mix64(h ^ rk->stream_off[s]);
  for (guint32 i = 0; i < rk->n_ops; i++) {
    SimOp x = share_normal(&rk->ops[i], b);
    guint64 word[4];
    G_STATIC_ASSERT(sizeof word == sizeof x);
    memcpy(word, &x, sizeof x);
    h = sim_mix64(h ^ word[0]) + sim_mix64(word[1] ^ (h >> 7));
    h = sim_mix64(h ^ word[2]) + sim_mix64(word[3] ^ (h >> 11));
  }
  return h;
}

static gboolean share_equal(const SimRank *a, ShareBase ba, const SimRank *b,
                            ShareBase bb)
{
  if (a->n_ops != b->n_ops || a->n_streams != b->n_streams ||
      memcmp(a->stream_off, b->stream_off,
             sizeof(guint32) * (a->n_streams + 1)) != 0)
    return FALSE;
  for (guint32 i = 0; i < a->n_ops; i++) {
    SimOp x = share_normal(&a->ops[i], ba);
    SimOp y = share_normal(&b->ops[i], bb);
    if (memcmp(&x, &y, sizeof x) != 0)
      return FALSE;
  }
  return TRUE;
}

/* Marks template t's own ops with the pass's patches (its deltas are 0,
 * so its peers stay what they were). */
static void share_mark(SimWorkload *w, guint t)
{
  SimOp *ops = sim_workload_rank_ops_mut(w, t); /* owned: no copy */
  for (guint32 i = 0; i < w->ranks[t].n_ops; i++) {
    SimOp *op = &ops[i];
    op->patch = op->kind == SIM_OP_COLLECTIVE ? SHARE_PATCH_COLL
                : op->kind == SIM_OP_SEND || op->kind == SIM_OP_RECV
                  ? SHARE_PATCH_P2P
                  : 0;
  }
}

guint sim_workload_share_alike(SimWorkload *w)
{
  g_return_val_if_fail(w != NULL, 0);
  if (w->fold_rep != NULL)
    return 0;
  guint n = w->n_ranks, shared = 0;
  g_autofree ShareBase *base = g_new0(ShareBase, MAX(n, 1));
  /* Templates found so far, by hash: a GArray of rank ids each. */
  g_autoptr(GHashTable) by_hash = g_hash_table_new_full(
      g_int64_hash, g_int64_equal, g_free, (GDestroyNotify)g_array_unref);
  /* 1: t is a template whose ops already carry the pass's patches. */
  g_autofree guint8 *marked = g_new0(guint8, MAX(n, 1));
  for (guint r = 0; r < n; r++) {
    const SimRank *rk = &w->ranks[r];
    if (rk->program != SIM_NO_PROGRAM || rk->n_ops == 0 ||
        rk->stream_off == NULL)
      continue;
    base[r] = share_base(rk);
    gint64 h = (gint64)share_hash(rk, base[r]);
    GArray *cands = g_hash_table_lookup(by_hash, &h);
    if (cands == NULL) {
      cands = g_array_new(FALSE, FALSE, sizeof(guint32));
      g_hash_table_insert(by_hash, g_memdup2(&h, sizeof h), cands);
    }
    guint32 t = G_MAXUINT32;
    for (guint k = 0; k < cands->len && t == G_MAXUINT32; k++) {
      guint32 c = g_array_index(cands, guint32, k);
      if (share_equal(&w->ranks[c], base[c], rk, base[r]))
        t = c;
    }
    if (t == G_MAXUINT32) {
      guint32 self = r;
      g_array_append_val(cands, self);
      continue;
    }
    if (!marked[t]) {
      share_mark(w, t);
      marked[t] = 1;
    }
    guint32 delta[SIM_PATCH_COUNT] = { 0 };
    delta[SHARE_PATCH_COLL] = base[r].coll0 - base[t].coll0;
    delta[SHARE_PATCH_P2P] = base[r].p2p0 - base[t].p2p0;
    /* t's deltas are 0 (it owned its ops), so these are r's own. */
    sim_workload_share_rank(w, r, t, delta);
    shared++;
  }
  return shared;
}
