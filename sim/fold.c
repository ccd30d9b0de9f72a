/* sim/fold.c -- folding: sim_workload_fold() finds the ranks whose replays
 * are identical and keeps one representative per class (the algorithm is
 * described below), plus the rank hash and program comparison it is built
 * on.  See sim/workload.h.
 */
#include "sim/workload-private.h"

#include <string.h>

/* ---- folding ------------------------------------------------------------
 *
 * sim_workload_fold() finds ranks whose replays are identical and keeps one
 * representative per class.  The algorithm is a partition refinement (the
 * coarsest stable partition, as in DFA minimisation or colour refinement):
 *
 * 1. Content: ranks start in the same class when their op arrays are equal
 *    field by field except `peer` (kind, class, phase, stream, shape, name,
 *    wait, reference duration, layer, microbatch), with the same streams and
 *    pipeline stage.  Hashed, then compared exactly.
 * 2. Partners: a rank's timing also depends on its partners'.  The k-th
 *    collective of rank r on group g meets the k-th of every other member;
 *    its *instance signature* is the multiset {(class(m), op index of m's
 *    k-th collective on g) : m in g}.  A send meets the receive with the
 *    same ordinal on the (src, dst) pair; its signature is (class(peer),
 *    the partner's op index).  Ranks of one class whose sequences of
 *    signatures differ are split; repeat until no class splits.  Then, by
 *    induction over the replay (every start time is a max over finish times
 *    of ops whose ranks are class-wise the same), all members of a class
 *    have identical op times on a machine that prices them alike.
 * 3. Exactness: the refinement compares 64-bit hashes of signatures; the
 *    result is then verified exactly (sorted multisets, partner indices)
 *    and any rank that fails is made a class of its own and the refinement
 *    resumed, so a hash collision can only cost folding, never correctness.
 * 4. Representatives: the folded engine completes an instance on g when
 *    every distinct representative among g's members has arrived, and
 *    matches sends by (rep(src), rep(dst)).  That reproduces the unfolded
 *    replay when (a) no rank sends to, or receives from, two different
 *    ranks of one class (then a rank's k-th send to a class is its k-th
 *    send to its one peer there, at the op indices every member shares),
 *    and (b) for every representative q, each group g that q uses and each
 *    member m of g, rep(m) is a member of g whose collectives on g sit at
 *    the same op indices as m's.  Representatives are chosen by a
 *    breadth-first closure from the lowest rank (a partner's class takes
 *    that partner as its representative); a class that breaks (a) or (b)
 *    is split into single ranks and the whole procedure repeats.
 *
 * Conservative cases: a rank that issues collectives of one group, or p2p
 * ops to one peer in one direction, from more than one stream is never
 * folded (the engine matches those in arrival order, which the static
 * analysis cannot predict).  Not checked (sim/ knows no network): that the
 * network prices a member's groups and peers like its representative's;
 * true for the built-in model when nodes are full and the rank layout is
 * regular (Megatron's), the caller's contract otherwise.
 *
 * Cost: a few passes over the communication ops per refinement round (the
 * rounds needed are about the longest chain of distinct partners, 2-4 for
 * Megatron layouts) and two over all ops; memory 16 bytes per
 * communication op plus 8 per collective membership instance. */


typedef struct {
  guint32 op;    /* index in the rank's op array */
  guint32 peer;  /* collective: group; p2p: peer rank */
  guint32 aux;   /* collective: instance id; p2p: the partner's op index */
  guint8 kind;
} FoldComm;

/* One (src, dst) pair's sends (at src) and receives (at dst), in order. */
typedef struct {
  GArray *sends, *recvs;   /* guint32 op indices */
  guint32 ns, nr;          /* cursors while assigning partners */
  gint send_stream, recv_stream;
} FoldPair;

static void fold_pair_free(gpointer p)
{
  FoldPair *fp = p;
  g_array_unref(fp->sends);
  g_array_unref(fp->recvs);
  g_free(fp);
}

typedef struct {
  SimWorkload *w;
  guint n;
  guint32 *comm_off;    /* n + 1 */
  FoldComm *comm;
  guint32 *inst_off;    /* per group: first instance id; n_groups + 1 */
  guint32 *inst_group;  /* per instance: its group */
  guint32 n_inst;
  gboolean *solo;       /* the rank may not be folded */
  guint32 *cls;         /* class of each rank */
  guint32 n_cls;
} Folder;

static void folder_clear(Folder *f)
{
  g_free(f->comm_off);
  g_free(f->comm);
  g_free(f->inst_off);
  g_free(f->inst_group);
  g_free(f->solo);
  g_free(f->cls);
}

/* Lists every rank's communication ops, numbers collective instances and
 * pairs sends with receives.  Marks ranks that use one group or p2p
 * direction from several streams as solo. */
static void fold_index(Folder *f)
{
  SimWorkload *w = f->w;
  guint n_groups = sim_workload_n_groups(w);
  f->comm_off = g_new0(guint32, f->n + 1);
  f->solo = g_new0(gboolean, MAX(f->n, 1));
  guint64 total = 0;
  for (guint r = 0; r < f->n; r++) {
    const SimRank *rk = &w->ranks[r];
    for (guint32 i = 0; i < rk->n_ops; i++) {
      guint8 k = rk->ops[i].kind;
      total += k == SIM_OP_COLLECTIVE || k == SIM_OP_SEND || k == SIM_OP_RECV;
    }
    g_assert(total < G_MAXUINT32);
    f->comm_off[r + 1] = (guint32)total;
  }
  f->comm = g_new(FoldComm, MAX(total, 1));
  /* Per membership: collectives issued so far and the stream (+1) used. */
  guint nm = w->group_ranks->len;
  g_autofree guint32 *mcount = g_new0(guint32, MAX(nm, 1));
  g_autofree guint8 *mstream = g_new0(guint8, MAX(nm, 1));
  g_autoptr(GHashTable) pairs = g_hash_table_new_full(
      g_int64_hash, g_int64_equal, g_free, fold_pair_free);
  for (guint r = 0; r < f->n; r++) {
    const SimRank *rk = &w->ranks[r];
    FoldComm *c = &f->comm[f->comm_off[r]];
    for (guint32 i = 0; i < rk->n_ops; i++) {
      const SimOp *op = &rk->ops[i];
      if (op->kind != SIM_OP_COLLECTIVE && op->kind != SIM_OP_SEND &&
          op->kind != SIM_OP_RECV)
        continue;
      guint32 peer = sim_op_peer(rk, op);
      c->op = i;
      c->peer = peer;
      c->kind = op->kind;
      c->aux = 0;
      if (op->kind == SIM_OP_COLLECTIVE) {
        gint64 pos = sim_member_pos(w, peer, r);
        g_assert(pos >= 0); /* validated */
        c->aux = mcount[pos]++; /* ordinal; made an instance id below */
        if (mstream[pos] == 0)
          mstream[pos] = op->stream + 1;
        else if (mstream[pos] != op->stream + 1)
          f->solo[r] = TRUE;
      } else {
        guint32 src = op->kind == SIM_OP_SEND ? r : peer;
        guint32 dst = op->kind == SIM_OP_SEND ? peer : r;
        gint64 key = (gint64)((guint64)src << 32 | dst);
        FoldPair *fp = g_hash_table_lookup(pairs, &key);
        if (fp == NULL) {
          fp = g_new0(FoldPair, 1);
          fp->sends = g_array_new(FALSE, FALSE, sizeof(guint32));
          fp->recvs = g_array_new(FALSE, FALSE, sizeof(guint32));
          fp->send_stream = fp->recv_stream = -1;
          gint64 *k = g_new(gint64, 1);
          *k = key;
          g_hash_table_insert(pairs, k, fp);
        }
        gint *stream = op->kind == SIM_OP_SEND ? &fp->send_stream
                                               : &fp->recv_stream;
        if (*stream < 0)
          *stream = op->stream;
        else if (*stream != op->stream)
          f->solo[r] = TRUE;
        g_array_append_val(op->kind == SIM_OP_SEND ? fp->sends : fp->recvs, i);
      }
      c++;
    }
  }
  /* Instances: group g has as many as each member issues (validated). */
  f->inst_off = g_new0(guint32, n_groups + 1);
  for (guint g = 0; g < n_groups; g++) {
    guint32 a = g_array_index(w->group_off, guint32, g);
    guint32 b = g_array_index(w->group_off, guint32, g + 1);
    f->inst_off[g + 1] = f->inst_off[g] + (b > a ? mcount[a] : 0);
  }
  f->n_inst = f->inst_off[n_groups];
  f->inst_group = g_new(guint32, MAX(f->n_inst, 1));
  for (guint g = 0; g < n_groups; g++)
    for (guint32 k = f->inst_off[g]; k < f->inst_off[g + 1]; k++)
      f->inst_group[k] = g;
  for (guint r = 0; r < f->n; r++) {
    for (guint32 p = f->comm_off[r]; p < f->comm_off[r + 1]; p++) {
      FoldComm *c = &f->comm[p];
      if (c->kind == SIM_OP_COLLECTIVE) {
        c->aux += f->inst_off[c->peer];
        continue;
      }
      guint32 src = c->kind == SIM_OP_SEND ? r : c->peer;
      guint32 dst = c->kind == SIM_OP_SEND ? c->peer : r;
      gint64 key = (gint64)((guint64)src << 32 | dst);
      FoldPair *fp = g_hash_table_lookup(pairs, &key);
      /* The k-th send of the pair meets the k-th receive (validated). */
      if (c->kind == SIM_OP_SEND)
        c->aux = g_array_index(fp->recvs, guint32, fp->ns++);
      else
        c->aux = g_array_index(fp->sends, guint32, fp->nr++);
    }
  }
}

guint64 sim_rank_hash(const SimRank *rk, gboolean timing_only)
{
  guint64 h = sim_mix64(rk->n_ops) ^
              sim_mix64((guint64)(timing_only ? 0 : rk->stage) << 40 |
                        rk->n_streams);
  for (guint32 s = 0; s <= rk->n_streams && rk->n_ops > 0; s++)
    h = sim_mix64(h ^ rk->stream_off[s]);
  for (guint32 i = 0; i < rk->n_ops; i++) {
    const SimOp *o = &rk->ops[i];
    guint64 a = (guint64)o->ref_ns ^ ((guint64)o->shape << 32) ^ o->name;
    guint64 b = ((guint64)o->wait << 32) ^ ((guint64)o->kind << 40) ^
                ((guint64)o->klass << 48) ^ ((guint64)o->phase << 56) ^
                o->stream;
    if (!timing_only)
      b ^= ((guint64)o->microbatch << 16) ^ ((guint64)o->layer << 8);
    h = sim_mix64(h ^ a) + sim_mix64(b ^ (h >> 7));
  }
  return h;
}

gboolean sim_rank_same_program(const SimRank *a, const SimRank *b,
                               gboolean timing_only)
{
  if (a->n_ops != b->n_ops || (!timing_only && a->stage != b->stage))
    return FALSE;
  if (a->n_ops == 0 || (a->program == b->program &&
                        a->program != SIM_NO_PROGRAM))
    return TRUE;
  if (a->n_streams != b->n_streams ||
      memcmp(a->stream_off, b->stream_off,
             sizeof(guint32) * (a->n_streams + 1)) != 0)
    return FALSE;
  for (guint32 i = 0; i < a->n_ops; i++) {
    SimOp x = a->ops[i], y = b->ops[i];
    x.peer = y.peer = 0;
    x.patch = y.patch = 0;
    if (timing_only) {
      x.microbatch = y.microbatch = 0;
      x.layer = y.layer = 0;
    }
    if (memcmp(&x, &y, sizeof x) != 0)
      return FALSE;
  }
  return TRUE;
}

/* Step 1: classes by content (solo ranks alone). */
static void fold_initial(Folder *f)
{
  f->cls = g_new(guint32, MAX(f->n, 1));
  g_autoptr(GArray) reps = g_array_new(FALSE, FALSE, sizeof(guint32));
  g_autoptr(GHashTable) by_hash = g_hash_table_new_full(
      g_int64_hash, g_int64_equal, g_free, (GDestroyNotify)g_array_unref);
  for (guint r = 0; r < f->n; r++) {
    guint32 cls = G_MAXUINT32;
    if (!f->solo[r]) {
      gint64 h = (gint64)sim_rank_hash(&f->w->ranks[r], FALSE);
      GArray *cands = g_hash_table_lookup(by_hash, &h);
      if (cands == NULL) {
        cands = g_array_new(FALSE, FALSE, sizeof(guint32));
        gint64 *k = g_new(gint64, 1);
        *k = h;
        g_hash_table_insert(by_hash, k, cands);
      }
      for (guint i = 0; i < cands->len && cls == G_MAXUINT32; i++) {
        guint32 c = g_array_index(cands, guint32, i);
        guint32 rep = g_array_index(reps, guint32, c);
        if (sim_rank_same_program(&f->w->ranks[rep], &f->w->ranks[r], FALSE))
          cls = c;
      }
      if (cls == G_MAXUINT32) {
        cls = reps->len;
        g_array_append_val(cands, cls);
      }
    } else {
      cls = reps->len;
    }
    if (cls == reps->len) {
      guint32 rr = r;
      g_array_append_val(reps, rr);
    }
    f->cls[r] = cls;
  }
  f->n_cls = reps->len;
}

typedef struct {
  guint32 cls;
  guint32 rank;
  guint64 sig;
} FoldKey;

static int fold_key_cmp(const void *a, const void *b)
{
  const FoldKey *x = a, *y = b;
  if (x->cls != y->cls)
    return x->cls < y->cls ? -1 : 1;
  if (x->sig != y->sig)
    return x->sig < y->sig ? -1 : 1;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* Step 2: refines the classes until no class splits. */
static void fold_refine(Folder *f)
{
  g_autofree guint64 *H = g_new(guint64, MAX(f->n_inst, 1));
  g_autofree FoldKey *keys = g_new(FoldKey, MAX(f->n, 1));
  g_autofree guint32 *ncls = g_new(guint32, MAX(f->n, 1));
  g_autofree guint32 *renum = g_new(guint32, MAX(f->n, 1));
  for (;;) {
    memset(H, 0, sizeof(guint64) * MAX(f->n_inst, 1));
    for (guint r = 0; r < f->n; r++)
      for (guint32 p = f->comm_off[r]; p < f->comm_off[r + 1]; p++) {
        const FoldComm *c = &f->comm[p];
        if (c->kind == SIM_OP_COLLECTIVE)
          H[c->aux] += sim_mix64((guint64)f->cls[r] << 32 | c->op);
      }
    for (guint r = 0; r < f->n; r++) {
      guint64 s = sim_mix64(f->cls[r]);
      for (guint32 p = f->comm_off[r]; p < f->comm_off[r + 1]; p++) {
        const FoldComm *c = &f->comm[p];
        guint64 v = c->kind == SIM_OP_COLLECTIVE
                        ? H[c->aux]
                        : sim_mix64(((guint64)f->cls[c->peer] << 32 | c->aux) ^
                                   ((guint64)c->kind << 62));
        s = sim_mix64(s ^ v);
      }
      keys[r].cls = f->cls[r];
      keys[r].rank = r;
      keys[r].sig = s;
    }
    qsort(keys, f->n, sizeof(FoldKey), fold_key_cmp);
    guint32 n_new = 0;
    for (guint i = 0; i < f->n; i++) {
      if (i > 0 && (keys[i].cls != keys[i - 1].cls ||
                    keys[i].sig != keys[i - 1].sig))
        n_new++;
      ncls[keys[i].rank] = n_new;
    }
    n_new = f->n > 0 ? n_new + 1 : 0;
    if (n_new == f->n_cls)
      return;
    /* Number the new classes by their lowest rank (deterministic). */
    for (guint i = 0; i < n_new; i++)
      renum[i] = G_MAXUINT32;
    guint32 next = 0;
    for (guint r = 0; r < f->n; r++) {
      if (renum[ncls[r]] == G_MAXUINT32)
        renum[ncls[r]] = next++;
      f->cls[r] = renum[ncls[r]];
    }
    f->n_cls = n_new;
  }
}

/* Gives rank r a class of its own. */
static void fold_isolate(Folder *f, guint r)
{
  f->solo[r] = TRUE;
  f->cls[r] = f->n_cls++;
}

static int cmp_u64(const void *a, const void *b)
{
  guint64 x = *(const guint64 *)a, y = *(const guint64 *)b;
  return (x > y) - (x < y);
}

/* Step 3: checks the partition exactly against each class's lowest rank;
 * isolates every rank that fails.  Returns the number isolated. */
static guint fold_verify(Folder *f)
{
  SimWorkload *w = f->w;
  /* Instance multisets, sorted: (class << 32 | op index) per member. */
  g_autofree guint32 *list_off = g_new0(guint32, f->n_inst + 1);
  for (guint32 k = 0; k < f->n_inst; k++) {
    guint n;
    sim_workload_group(w, f->inst_group[k], &n);
    list_off[k + 1] = list_off[k] + n;
  }
  g_autofree guint64 *list = g_new(guint64, MAX(list_off[f->n_inst], 1));
  g_autofree guint32 *fill = g_new0(guint32, MAX(f->n_inst, 1));
  for (guint r = 0; r < f->n; r++)
    for (guint32 p = f->comm_off[r]; p < f->comm_off[r + 1]; p++) {
      const FoldComm *c = &f->comm[p];
      if (c->kind == SIM_OP_COLLECTIVE)
        list[list_off[c->aux] + fill[c->aux]++] =
            (guint64)f->cls[r] << 32 | c->op;
    }
  for (guint32 k = 0; k < f->n_inst; k++)
    qsort(&list[list_off[k]], list_off[k + 1] - list_off[k], sizeof(guint64),
          cmp_u64);
  g_autofree guint32 *low = g_new(guint32, MAX(f->n_cls, 1));
  for (guint32 c = 0; c < f->n_cls; c++)
    low[c] = G_MAXUINT32;
  for (guint r = 0; r < f->n; r++)
    if (low[f->cls[r]] == G_MAXUINT32)
      low[f->cls[r]] = r;
  g_autoptr(GArray) bad = g_array_new(FALSE, FALSE, sizeof(guint32));
  for (guint r = 0; r < f->n; r++) {
    guint32 q = low[f->cls[r]];
    if (q == r)
      continue;
    gboolean ok = f->comm_off[r + 1] - f->comm_off[r] ==
                  f->comm_off[q + 1] - f->comm_off[q];
    for (guint32 p = 0; ok && p < f->comm_off[r + 1] - f->comm_off[r]; p++) {
      const FoldComm *a = &f->comm[f->comm_off[r] + p];
      const FoldComm *b = &f->comm[f->comm_off[q] + p];
      if (a->kind != b->kind || a->op != b->op) {
        ok = FALSE;
      } else if (a->kind == SIM_OP_COLLECTIVE) {
        guint32 la = list_off[a->aux + 1] - list_off[a->aux];
        guint32 lb = list_off[b->aux + 1] - list_off[b->aux];
        ok = a->aux == b->aux ||
             (la == lb && memcmp(&list[list_off[a->aux]],
                                 &list[list_off[b->aux]],
                                 sizeof(guint64) * la) == 0);
      } else {
        ok = f->cls[a->peer] == f->cls[b->peer] && a->aux == b->aux;
      }
    }
    if (!ok)
      g_array_append_val(bad, r);
  }
  for (guint i = 0; i < bad->len; i++)
    fold_isolate(f, g_array_index(bad, guint32, i));
  return bad->len;
}

/* TRUE when ranks a and b have their collectives on group g at the same
 * op indices (both are members; their ops are identical). */
static gboolean fold_same_positions(const Folder *f, guint a, guint b,
                                    guint32 g)
{
  guint32 na = f->comm_off[a + 1] - f->comm_off[a];
  if (na != f->comm_off[b + 1] - f->comm_off[b])
    return FALSE;
  for (guint32 p = 0; p < na; p++) {
    const FoldComm *x = &f->comm[f->comm_off[a] + p];
    const FoldComm *y = &f->comm[f->comm_off[b] + p];
    gboolean xg = x->kind == SIM_OP_COLLECTIVE && x->peer == g;
    gboolean yg = y->kind == SIM_OP_COLLECTIVE && y->peer == g;
    if (xg != yg || x->op != y->op)
      return FALSE;
  }
  return TRUE;
}

/* Point-to-point ops are matched by (rep(src), rep(dst)) when folded, which
 * merges the channels of a rank to all peers of one class.  That is exact
 * when no rank sends to (or receives from) two different ranks of one
 * class: its k-th send to the class is then its k-th send to the one peer,
 * which the partner analysis placed at the same op indices as in every
 * other member.  Returns a class that breaks this (to be split) or
 * G_MAXUINT32. */
static guint32 fold_check_peers(const Folder *f)
{
  g_autoptr(GArray) seen = g_array_new(FALSE, FALSE, sizeof(guint64) * 2);
  for (guint r = 0; r < f->n; r++) {
    g_array_set_size(seen, 0);
    for (guint32 p = f->comm_off[r]; p < f->comm_off[r + 1]; p++) {
      const FoldComm *c = &f->comm[p];
      if (c->kind == SIM_OP_COLLECTIVE)
        continue;
      guint64 key = (guint64)(c->kind == SIM_OP_SEND) << 40 | f->cls[c->peer];
      gboolean found = FALSE;
      for (guint i = 0; i < seen->len && !found; i++) {
        guint64 *e = &g_array_index(seen, guint64, 2 * i);
        if (e[0] != key)
          continue;
        found = TRUE;
        if (e[1] != c->peer)
          return f->cls[c->peer];
      }
      if (!found) {
        guint64 e[2] = {key, c->peer};
        g_array_append_vals(seen, e, 1);
      }
    }
  }
  return G_MAXUINT32;
}

/* Step 4: representatives by closure.  Fills rep (per class) and returns
 * G_MAXUINT32, or returns a class that cannot have a consistent one. */
static guint32 fold_choose_reps(const Folder *f, guint32 *rep)
{
  SimWorkload *w = f->w;
  guint n_groups = sim_workload_n_groups(w);
  for (guint32 c = 0; c < f->n_cls; c++)
    rep[c] = G_MAXUINT32;
  g_autofree guint32 *queue = g_new(guint32, MAX(f->n, 1));
  g_autofree guint32 *seen = g_new(guint32, MAX(n_groups, 1));
  for (guint g = 0; g < n_groups; g++)
    seen[g] = G_MAXUINT32;
  for (guint r0 = 0; r0 < f->n; r0++) {
    if (rep[f->cls[r0]] != G_MAXUINT32)
      continue;
    guint head = 0, tail = 0;
    rep[f->cls[r0]] = r0;
    queue[tail++] = r0;
    while (head < tail) {
      guint32 q = queue[head++];
      for (guint32 p = f->comm_off[q]; p < f->comm_off[q + 1]; p++) {
        const FoldComm *c = &f->comm[p];
        if (c->kind != SIM_OP_COLLECTIVE) {
          /* Any member of the peer's class will do (fold_check_peers). */
          guint32 pc = f->cls[c->peer];
          if (rep[pc] == G_MAXUINT32) {
            rep[pc] = c->peer;
            queue[tail++] = c->peer;
          }
          continue;
        }
        if (seen[c->peer] == q)
          continue;
        seen[c->peer] = q;
        guint n;
        const guint32 *m = sim_workload_group(w, c->peer, &n);
        for (guint i = 0; i < n; i++) {
          guint32 mc = f->cls[m[i]];
          if (rep[mc] == G_MAXUINT32) {
            rep[mc] = m[i];
            queue[tail++] = m[i];
          } else if (rep[mc] != m[i] &&
                     (sim_member_pos(w, c->peer, rep[mc]) < 0 ||
                      !fold_same_positions(f, m[i], rep[mc], c->peer))) {
            return mc;
          }
        }
      }
    }
  }
  return G_MAXUINT32;
}

gboolean sim_workload_fold(SimWorkload *w, GError **error)
{
  g_return_val_if_fail(w != NULL, FALSE);
  if (w->fold_rep != NULL) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "the workload is already folded");
    return FALSE;
  }
  if (!sim_workload_validate(w, error))
    return FALSE;
  Folder f = {0};
  f.w = w;
  f.n = w->n_ranks;
  fold_index(&f);
  fold_initial(&f);
  g_autofree guint32 *rep = NULL;
  for (;;) {
    do
      fold_refine(&f);
    while (fold_verify(&f) > 0);
    guint32 bad = fold_check_peers(&f);
    if (bad == G_MAXUINT32) {
      g_free(rep);
      rep = g_new(guint32, MAX(f.n_cls, 1));
      bad = fold_choose_reps(&f, rep);
    }
    if (bad == G_MAXUINT32)
      break;
    /* No consistent representative, or ambiguous peers: unfold that
     * class. */
    for (guint r = 0; r < f.n; r++)
      if (f.cls[r] == bad)
        fold_isolate(&f, r);
  }
  if (f.n_cls == f.n) { /* nothing to fold */
    folder_clear(&f);
    return TRUE;
  }
  /* Check the folded form before committing: hide the other members' ops
   * and validate; on failure (a bug) the workload is left as it was. */
  guint32 *map = g_new(guint32, MAX(f.n, 1));
  g_autofree guint32 *saved = g_new(guint32, MAX(f.n, 1));
  for (guint r = 0; r < f.n; r++) {
    map[r] = rep[f.cls[r]];
    saved[r] = w->ranks[r].n_ops;
    if (map[r] != r)
      w->ranks[r].n_ops = 0;
  }
  w->fold_rep = map;
  GError *err = NULL;
  if (!sim_workload_validate(w, &err)) {
    for (guint r = 0; r < f.n; r++)
      w->ranks[r].n_ops = saved[r];
    w->fold_rep = NULL;
    g_free(map);
    folder_clear(&f);
    g_set_error(error, SIM_ERROR, SIM_ERROR_INVALID,
                "folding produced an inconsistent workload (a bug): %s",
                err->message);
    g_error_free(err);
    return FALSE;
  }
  for (guint r = 0; r < f.n; r++) {
    if (map[r] == r)
      continue;
    sim_rank_release(&w->ranks[r]);
  }
  folder_clear(&f);
  return TRUE;
}
