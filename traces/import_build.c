/* traces/import_build.c -- the builder that turns raw profiler records
 * (Kineto JSON, Nsight Systems SQLite) into a workload: communication
 * (step 6), costs and emission (step 7), and trace_raw_build.
 *
 * The builder (trace_raw_build)
 * -----------------------------
 * Input: one TraceRawRank per rank, holding every GPU activity of the file
 * (kernels, memcpys, memsets with GPU start, duration, device, stream,
 * launch correlation id), the CPU launch times by correlation id, the CPU
 * ranges that mark iterations (ProfilerStep#N, NVTX "iteration N") and
 * phases (autograd backward, optimizer step, "## forward ##", ...), and the
 * cross-stream waits the profiler recorded.
 *
 *  1. Ranks: the files' own global ranks (distributedInfo) when present,
 *     else file order; workload rank i is the i-th smallest global rank.
 *  2. Iteration: with iteration ranges, op o belongs to iteration k when its
 *     CPU launch (found through its correlation id; its GPU start when the
 *     launch is missing) lies in [start, end) of the k-th range in time
 *     order.  Ranks are aligned by step number: the reference rank (the
 *     smallest with ranges) picks the number, the others use the range with
 *     the same number.  TRACE_ITERATION_ALL keeps every op.
 *  3. Phase: optimizer if the launch lies in an optimizer range, else
 *     backward if in a backward range (autograd::engine::evaluate_function
 *     and friends, see traces/classify.c), else forward when the file marks
 *     phases at all, else other.  Ranges are matched by time, not thread:
 *     a training step runs its phases one after the other.
 *  4. Streams: one SimOp stream per (device, CUDA stream) with ops, ordered
 *     by (device, stream id); ops in GPU start order within a stream.  One
 *     rank replays on one GPU even when its file shows several devices
 *     (warned).  At most SIM_MAX_STREAMS streams per rank.
 *  5. Cross-stream dependencies: only those the trace records (Kineto's
 *     cuda_sync "Stream Wait Event" records: consumer = first op launched on
 *     the waiting stream after the wait call, producer = last op launched on
 *     the recorded stream before the event record).  A dependency whose
 *     recorded times contradict it (producer ending after the consumer
 *     started) is dropped.  Otherwise streams are ordered only by their own
 *     order.  An op waiting on several streams gets zero-duration marker
 *     ops on its stream, one per extra producer, so that every wait is
 *     exact (SimOp has one wait field).
 *  6. Communication: NCCL kernels become collectives, sends or receives.
 *     A collective whose member list (Process Group Ranks, or the process
 *     group's ranks from distributedInfo) is entirely among the imported
 *     ranks becomes a collective on that group, matched across ranks and
 *     priced by the network model (ref_ns = 0; or its recorded duration
 *     with opt->comm_recorded).  A send/receive whose peer is imported
 *     becomes a p2p op.  Everything else -- members absent from the import,
 *     unknown members, batched SendRecv kernels without peers -- becomes a
 *     collective on a one-rank group with ref_ns = the recorded duration:
 *     the engine cannot match it with ranks it does not have, and the
 *     recorded duration already includes the wait for them.  (Groups
 *     restricted to the present ranks would be matched, but the engine
 *     gives a matched collective the longest member's duration, inflating
 *     every other member's busy time; a one-rank group replays each rank
 *     exactly as recorded.)  When the matched ops of a group (or of a
 *     send/receive pair) do not pair up -- the files cut different windows
 *     -- that group falls back to recorded durations too, with a warning.
 *  7. Costs: kernels keep their recorded duration as ref_ns.  A kernel
 *     whose CPU operator's recorded shapes priced it (see "kernel shapes"
 *     below) has a shape per (name, FLOPs, bytes, class, math unit),
 *     priced on the roofline; the others are per (name, class) with no
 *     FLOPs or bytes, so the GPU model scales them by its relative form
 *     (models/gpu.c, F = B = 0).  Communication shapes are per (name,
 *     type, bytes).
 *
 * Limits: the CPU side is not replayed, so launch-bound gaps between
 * kernels vanish in replay; GPU busy time is preserved exactly.
 */
#include "traces/import-private.h"
#include "traces/classify.h"
#include "io/fault.h"
#include "sim/search.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Step 6, first half: how each communication op of rank i replays. */
static void resolve_comm(Build *b, guint i, gboolean complete)
{
  RankWork *rw = &b->rw[i];
  TraceRawRank *raw = rw->raw;
  for (guint32 k = 0; k < rw->sel->len; k++) {
    Sel *s = &g_array_index(rw->sel, Sel, k);
    s->cm = CM_NONE;
    if (s->host != HS_GPU)
      continue;
    const TraceRawOp *op = &g_array_index(raw->ops, TraceRawOp, s->raw);
    if (op->comm == G_MAXUINT32)
      continue;
    const TraceRawComm *c = &g_array_index(raw->comms, TraceRawComm,
                                           op->comm);
    s->cm = CM_SOLO;
    /* Members (global ranks), from the op or its process group. */
    const char *ml = c->ranks;
    if (ml == NULL && c->pg_name != NULL)
      ml = g_hash_table_lookup(raw->pg_ranks, c->pg_name);
    g_autoptr(GArray) members = trace_parse_members(ml);
    if (members == NULL && c->group_size > 0 && complete &&
        (guint64)c->group_size == b->n) {
      members = g_array_new(FALSE, FALSE, sizeof(gint64));
      for (guint r = 0; r < b->n; r++)
        g_array_append_val(members, b->global[r]);
    }
    if (c->kind == TRACE_COMM_COLL) {
      if (members == NULL)
        continue;
      GArray *local = g_array_new(FALSE, FALSE, sizeof(guint32));
      gboolean all = TRUE, self = FALSE;
      for (guint m = 0; m < members->len && all; m++) {
        gint l = trace_local_rank(b, g_array_index(members, gint64, m));
        if (l < 0)
          all = FALSE;
        else {
          guint32 lu = (guint32)l;
          g_array_append_val(local, lu);
          self |= lu == i;
        }
      }
      if (!all || !self || local->len < 2) {
        g_array_unref(local);
        continue;
      }
      s->cm = CM_COLL;
      s->gkey = trace_gkey_intern(b, local);
    } else if (c->kind == TRACE_COMM_SEND || c->kind == TRACE_COMM_RECV) {
      if (c->peer < 0)
        continue;
      gint64 peer = c->peer;
      /* Src/Dst Rank are process-group ranks: map through the members. */
      if (members != NULL) {
        if ((guint64)peer >= members->len)
          continue;
        peer = g_array_index(members, gint64, peer);
      }
      gint l = trace_local_rank(b, peer);
      if (l < 0 || (guint)l == i)
        continue;
      s->cm = c->kind == TRACE_COMM_SEND ? CM_SEND : CM_RECV;
      s->peer = (guint32)l;
    }
  }
}

/* Step 6, second half: matched ops of a group (or p2p pair) that do not
 * pair up across ranks fall back to recorded durations. */
static void check_matching(Build *b)
{
  guint ng = b->gkeys->len;
  guint n = b->n;
  g_autofree gint64 *cnt = g_new0(gint64, (gsize)MAX(ng, 1) * n);
  g_autofree gint64 *p2p = g_new0(gint64, (gsize)n * n);
  for (guint i = 0; i < n; i++) {
    GArray *sel = b->rw[i].sel;
    for (guint32 k = 0; k < sel->len; k++) {
      const Sel *s = &g_array_index(sel, Sel, k);
      if (s->cm == CM_COLL)
        cnt[(gsize)s->gkey * n + i]++;
      else if (s->cm == CM_SEND)
        p2p[(gsize)i * n + s->peer]++;
      else if (s->cm == CM_RECV)
        p2p[(gsize)s->peer * n + i]--;
    }
  }
  g_autofree gboolean *bad_g = g_new0(gboolean, MAX(ng, 1));
  for (guint g = 0; g < ng; g++) {
    GArray *m = g_ptr_array_index(b->gkeys, g);
    for (guint k = 1; k < m->len; k++)
      if (cnt[(gsize)g * n + g_array_index(m, guint32, k)] !=
          cnt[(gsize)g * n + g_array_index(m, guint32, 0)])
        bad_g[g] = TRUE;
    if (bad_g[g])
      trace_warn(b->opt, "collectives of the group of %u ranks starting at "
                 "rank %u do not pair up across the files; they replay "
                 "at their recorded durations", m->len,
                 g_array_index(m, guint32, 0));
  }
  gboolean any_bad_p2p = FALSE;
  for (gsize k = 0; k < (gsize)n * n; k++)
    any_bad_p2p |= p2p[k] != 0;
  if (any_bad_p2p)
    trace_warn(b->opt, "some sends and receives do not pair up across the "
               "files; they replay at their recorded durations");
  for (guint i = 0; i < n; i++) {
    GArray *sel = b->rw[i].sel;
    for (guint32 k = 0; k < sel->len; k++) {
      Sel *s = &g_array_index(sel, Sel, k);
      if ((s->cm == CM_COLL && bad_g[s->gkey]) ||
          (s->cm == CM_SEND && p2p[(gsize)i * n + s->peer] != 0) ||
          (s->cm == CM_RECV && p2p[(gsize)s->peer * n + i] != 0))
        s->cm = CM_SOLO;
      if (s->cm == CM_SOLO)
        b->solo_ops++;
    }
  }
}

/* Shape caches of the workload being built. */
typedef struct {
  SimWorkload *w;
  GHashTable *kernel;   /* name id -> shape + 1 */
  GHashTable *comm;     /* "name|coll|bytes" -> shape + 1 */
  GHashTable *work;     /* WorkKey -> shape + 1 */
  GHashTable *names;    /* name id -> 1 + (class << 1 | name says TF32) */
  guint32 marker_shape, marker_name;
  guint32 host_shape;   /* G_MAXUINT32 until the first host op */
} Shapes;

static guint32 kernel_shape(Shapes *sh, guint32 name, TraceRawKind kind,
                            SimOpClass *klass)
{
  gpointer v = g_hash_table_lookup(sh->kernel, GUINT_TO_POINTER(name + 1));
  if (v != NULL) {
    guint32 id = GPOINTER_TO_UINT(v) - 1;
    *klass = (SimOpClass)g_array_index(sh->w->shapes, SimShape, id).klass;
    return id;
  }
  SimShape s = {0};
  s.name = name;
  s.klass = kind == TRACE_RAW_KERNEL
                ? (guint8)trace_classify_kernel(sim_workload_name(sh->w,
                                                                  name))
                : SIM_CLASS_MEMCPY;
  /* An NCCL kernel replayed as a kernel would never be (comm ops take the
   * comm path), but keep the class sane for kernels named "nccl" that the
   * caller decided are not communication. */
  if (s.klass == SIM_CLASS_COMM)
    s.klass = SIM_CLASS_OTHER;
  s.tensor = s.klass == SIM_CLASS_GEMM || s.klass == SIM_CLASS_ATTENTION;
  guint32 id = sim_workload_add_shape(sh->w, &s);
  g_hash_table_insert(sh->kernel, GUINT_TO_POINTER(name + 1),
                      GUINT_TO_POINTER(id + 1));
  *klass = (SimOpClass)s.klass;
  return id;
}

/* The math unit of a kernel doing `w`: 16-bit (and 8-bit) GEMMs and
 * attention on the tensor cores; FP32 ones on the tensor cores at the TF32
 * rate when the kernel name says so (cuBLAS "ampere_tf32_s1688gemm_tf32",
 * "sm80_xmma_gemm_f32f32_tf32f32"), else on the CUDA cores ("ampere_sgemm",
 * the default since PyTorch 1.12 turned TF32 matmuls off); everything
 * else on the CUDA cores. */
/* A kernel name's class and whether it says TF32, cached per name. */
static SimOpClass name_info(Shapes *sh, guint32 name, gboolean *tf32)
{
  gpointer v = g_hash_table_lookup(sh->names, GUINT_TO_POINTER(name + 1));
  if (v == NULL) {
    const char *nm = sim_workload_name(sh->w, name);
    g_autofree char *low = g_ascii_strdown(nm, -1);
    guint code = (guint)trace_classify_kernel(nm) << 1 |
                 (strstr(low, "tf32") != NULL);
    v = GUINT_TO_POINTER(code + 1);
    g_hash_table_insert(sh->names, GUINT_TO_POINTER(name + 1), v);
  }
  guint code = GPOINTER_TO_UINT(v) - 1;
  *tf32 = code & 1;
  return (SimOpClass)(code >> 1);
}

static guint8 work_math(const TraceRawWork *w, SimOpClass klass,
                        gboolean tf32)
{
  if (klass != SIM_CLASS_GEMM && klass != SIM_CLASS_ATTENTION)
    return SIM_MATH_VECTOR;
  if (w->elem > 0 && w->elem <= 2)
    return SIM_MATH_TENSOR;
  return w->elem == 4 && tf32 ? SIM_MATH_TF32 : SIM_MATH_VECTOR;
}

/* Key of a priced kernel shape (all bytes set: hashed as memory). */
typedef struct {
  double flops, bytes;
  guint32 name;
  guint8 klass, math, pad_[2];
} WorkKey;

static guint work_key_hash(gconstpointer p)
{
  return sim_hash_bytes(p, sizeof(WorkKey));
}

static gboolean work_key_equal(gconstpointer a, gconstpointer b)
{
  return memcmp(a, b, sizeof(WorkKey)) == 0;
}

/* The shape of a kernel priced from its operator's work: the class its
 * name gives (the operator's when the name says nothing), the work's
 * FLOPs and bytes. */
static guint32 work_shape(Shapes *sh, guint32 name, const TraceRawWork *w,
                          SimOpClass *klass)
{
  gboolean tf32;
  SimOpClass c = name_info(sh, name, &tf32);
  if (c == SIM_CLASS_OTHER || c == SIM_CLASS_COMM)
    c = (SimOpClass)w->klass;
  WorkKey key;
  memset(&key, 0, sizeof key);
  key.flops = w->flops;
  key.bytes = w->bytes;
  key.name = name;
  key.klass = (guint8)c;
  key.math = work_math(w, c, tf32);
  guint8 math = key.math;
  *klass = c;
  gpointer v = g_hash_table_lookup(sh->work, &key);
  if (v != NULL)
    return GPOINTER_TO_UINT(v) - 1;
  SimShape s = {0};
  s.name = name;
  s.klass = (guint8)c;
  s.flops = w->flops;
  s.bytes = w->bytes;
  s.tensor = math;
  guint32 id = sim_workload_add_shape(sh->w, &s);
  g_hash_table_insert(sh->work, g_memdup2(&key, sizeof key),
                      GUINT_TO_POINTER(id + 1));
  return id;
}

static guint32 comm_shape(Shapes *sh, guint32 name, SimCollType coll,
                          double bytes)
{
  char key[96];
  g_snprintf(key, sizeof key, "%u|%d|%.17g", name, (int)coll, bytes);
  gpointer v = g_hash_table_lookup(sh->comm, key);
  if (v != NULL)
    return GPOINTER_TO_UINT(v) - 1;
  SimShape s = {0};
  s.name = name;
  s.klass = SIM_CLASS_COMM;
  s.coll = (guint8)coll;
  s.bytes = bytes;
  guint32 id = sim_workload_add_shape(sh->w, &s);
  g_hash_table_insert(sh->comm, g_strdup(key), GUINT_TO_POINTER(id + 1));
  return id;
}

static int cmp_u32(const void *a, const void *b)
{
  guint32 x = *(const guint32 *)a, y = *(const guint32 *)b;
  return x < y ? -1 : x > y;
}

/* Would the engine finish ops[0..n) (streams by off[0..ns])?  Every
 * stream runs in order and an op also needs its wait target done: a
 * replay without times. */
static gboolean rank_acyclic(const SimOp *ops, guint32 n, const guint32 *off,
                             guint ns)
{
  guint32 cur[SIM_MAX_STREAMS];
  for (guint s = 0; s < ns; s++)
    cur[s] = off[s];
  guint32 done = 0;
  gboolean progress = TRUE;
  while (progress) {
    progress = FALSE;
    for (guint s = 0; s < ns; s++)
      while (cur[s] < off[s + 1]) {
        guint32 j = ops[cur[s]].wait;
        if (j != SIM_NO_WAIT && cur[ops[j].stream] <= j)
          break;
        cur[s]++;
        done++;
        progress = TRUE;
      }
  }
  return done == n;
}

/* Drops rank rw's host streams: its selection and dependencies go back to
 * the GPU ops alone. */
static void strip_host(RankWork *rw)
{
  guint32 n = rw->n_gpu;
  g_array_set_size(rw->sel, n);
  rw->n_streams = rw->ns_gpu;
  guint32 *d = (guint32 *)(void *)rw->deps->data;
  guint k = 0;
  for (guint j = 0; j < rw->deps->len; j++)
    if (d[2 * j] < n && d[2 * j + 1] < n) {
      d[2 * k] = d[2 * j];
      d[2 * k + 1] = d[2 * j + 1];
      k++;
    }
  g_array_set_size(rw->deps, k);
}

/* Fills host entry s of rank i as op (its stream and wait are the
 * caller's). */
static void emit_host(Build *b, guint i, Shapes *sh, const Sel *s, SimOp *op)
{
  SimWorkload *w = sh->w;
  if (sh->host_shape == G_MAXUINT32) {
    SimShape hs = {0};
    hs.name = sim_workload_intern(w, "host");
    hs.klass = SIM_CLASS_OTHER;
    sh->host_shape = sim_workload_add_shape(w, &hs);
  }
  op->shape = sh->host_shape;
  op->klass = SIM_CLASS_OTHER;
  op->phase = SIM_PHASE_OTHER;
  op->microbatch = G_MAXUINT16;
  op->layer = 255;
  op->ref_ns = s->host_ns;
  if (s->host == HS_STEP) {
    const TraceRawRange *r = &g_array_index(b->win[i].steps, TraceRawRange,
                                            s->peer);
    g_autofree char *nm = g_strdup_printf("ProfilerStep#%" G_GINT64_FORMAT,
                                          r->step);
    op->kind = SIM_OP_MARKER;
    op->name = sim_workload_intern(w, nm);
    return;
  }
  op->kind = SIM_OP_HOST;
  op->name = s->hname == HN_GAP    ? sim_workload_intern(w, "host: cpu time")
             : s->hname == HN_TAIL ? sim_workload_intern(w,
                                                         "host: to step end")
                                   : s->hname;
}

/* The producers each selected op of rw waits for: its recorded
 * dependencies reduced to the latest producer per producer stream.
 * prod[prod_off[c], prod_off[c+1]) are op c's, in stream order. */
static void reduce_producers(const RankWork *rw, GArray *prod,
                             guint32 *prod_off)
{
  guint32 n = rw->sel->len;
  /* Producers per consumer: (consumer, producer) sorted, then reduced to
   * the latest producer per producer stream. */
  GArray *deps = rw->deps;
  g_array_sort(deps, cmp_u32); /* by consumer (first word), stable enough */
  g_autofree guint32 *dep_start = g_new0(guint32, n + 1);
  for (guint k = 0; k < deps->len; k++)
    dep_start[((guint32 *)(void *)deps->data)[2 * k] + 1]++;
  for (guint32 k = 0; k < n; k++)
    dep_start[k + 1] += dep_start[k];
  /* For each consumer, keep max producer position per stream. */
  g_autofree guint32 *latest = g_new(guint32, SIM_MAX_STREAMS);
  /* First pass: count markers to size the output. */
  for (guint s = 0; s < SIM_MAX_STREAMS; s++)
    latest[s] = G_MAXUINT32;
  for (guint32 c = 0; c < n; c++) {
    if (dep_start[c] == dep_start[c + 1]) {
      prod_off[c + 1] = prod->len;
      continue;
    }
    for (guint32 k = dep_start[c]; k < dep_start[c + 1]; k++) {
      guint32 p = ((guint32 *)(void *)deps->data)[2 * k + 1];
      guint ps = g_array_index(rw->sel, Sel, p).stream;
      if (latest[ps] == G_MAXUINT32 || p > latest[ps])
        latest[ps] = p;
    }
    for (guint s = 0; s < SIM_MAX_STREAMS; s++)
      if (latest[s] != G_MAXUINT32) {
        g_array_append_val(prod, latest[s]);
        latest[s] = G_MAXUINT32;
      }
    prod_off[c + 1] = prod->len;
  }
}

/* Fills communication op op of selection s (raw op ro) of rank i: a
 * matched collective on its group, a p2p op, or a one-rank collective at
 * its recorded duration (the group *solo, created on first use). */
static void emit_comm(Shapes *sh, guint i, const TraceRawRank *raw,
                      const Sel *s, const TraceRawOp *ro, const guint32 *gid,
                      gboolean comm_recorded, guint32 *solo, SimOp *op)
{
  SimWorkload *w = sh->w;
  const TraceRawComm *cm = &g_array_index(raw->comms, TraceRawComm,
                                          ro->comm);
  SimCollType coll = cm->kind == TRACE_COMM_COLL ? (SimCollType)cm->coll
                                                 : SIM_COLL_SEND_RECV;
  op->klass = SIM_CLASS_COMM;
  op->shape = comm_shape(sh, ro->name, coll, cm->bytes);
  switch (s->cm) {
  case CM_COLL:
    op->kind = SIM_OP_COLLECTIVE;
    op->peer = gid[s->gkey];
    op->ref_ns = comm_recorded ? ro->dur_ns : 0;
    break;
  case CM_SEND:
  case CM_RECV:
    op->kind = s->cm == CM_SEND ? SIM_OP_SEND : SIM_OP_RECV;
    op->peer = s->peer;
    op->ref_ns = comm_recorded ? ro->dur_ns : 0;
    break;
  default:
    if (*solo == G_MAXUINT32)
      *solo = sim_workload_add_group(w, &i, 1);
    op->kind = SIM_OP_COLLECTIVE;
    op->peer = *solo;
    op->ref_ns = ro->dur_ns;
    break;
  }
}

/* Step 7: writes workload rank i (ops, markers, waits, shapes).  gid maps
 * member-list keys to workload groups; the rank's one-rank group for
 * communication replayed at recorded durations is added on first use. */
static gboolean emit_rank(Build *b, guint i, Shapes *sh, const guint32 *gid,
                          gboolean comm_recorded, GError **error)
{
  RankWork *rw = &b->rw[i];
  TraceRawRank *raw = rw->raw;
  SimWorkload *w = sh->w;
  guint32 n = rw->sel->len;
  g_autoptr(GArray) prod = g_array_new(FALSE, FALSE, sizeof(guint32));
  g_autofree guint32 *prod_off = g_new0(guint32, n + 1);
  reduce_producers(rw, prod, prod_off);
  /* Output positions: each op preceded by (producers - 1) markers. */
  g_autofree guint32 *pos = g_new(guint32, n);
  guint32 total = 0;
  g_autofree guint32 *off = g_new0(guint32, rw->n_streams + 1);
  for (guint32 c = 0; c < n; c++) {
    guint32 np = prod_off[c + 1] - prod_off[c];
    total += np > 1 ? np - 1 : 0;
    pos[c] = total++;
    off[g_array_index(rw->sel, Sel, c).stream + 1] = total;
  }
  for (guint s = 0; s < rw->n_streams; s++)
    off[s + 1] = MAX(off[s + 1], off[s]);
  SimOp *ops = fault_try_alloc0(total, sizeof(SimOp), "import: op array",
                                TRACE_ERROR, TRACE_ERROR_IO, error);
  if (ops == NULL) {
    g_prefix_error(error, "%s: ", raw->path);
    return FALSE;
  }
  guint32 solo = G_MAXUINT32;
  guint64 n_kernels = 0, shaped_kernels = 0;
  gint64 kernel_ns = 0, shaped_ns = 0;
  for (guint32 c = 0; c < n; c++) {
    const Sel *s = &g_array_index(rw->sel, Sel, c);
    const TraceRawOp *ro = s->host == HS_GPU
                               ? &g_array_index(raw->ops, TraceRawOp, s->raw)
                               : NULL;
    guint32 np = prod_off[c + 1] - prod_off[c];
    const guint32 *pp = np > 0 ? &g_array_index(prod, guint32, prod_off[c])
                               : NULL;
    guint32 at = pos[c] - (np > 1 ? np - 1 : 0);
    if (np > 1 && sh->marker_shape == G_MAXUINT32) {
      SimShape ms = {0};
      ms.name = sh->marker_name = sim_workload_intern(w, "stream wait");
      ms.klass = SIM_CLASS_OTHER;
      sh->marker_shape = sim_workload_add_shape(w, &ms);
    }
    for (guint32 m = 0; m + 1 < np; m++) {
      SimOp *mk = &ops[at++];
      mk->kind = SIM_OP_MARKER;
      mk->klass = SIM_CLASS_OTHER;
      mk->phase = s->phase;
      mk->stream = (guint8)s->stream;
      mk->shape = sh->marker_shape;
      mk->name = sh->marker_name;
      mk->wait = pos[pp[m]];
      mk->microbatch = G_MAXUINT16;
      mk->layer = 255;
    }
    SimOp *op = &ops[pos[c]];
    if (s->host != HS_GPU) {
      emit_host(b, i, sh, s, op);
      op->stream = (guint8)s->stream;
      op->wait = np > 0 ? pos[pp[np - 1]] : SIM_NO_WAIT;
      continue;
    }
    op->ref_ns = ro->dur_ns;
    op->name = ro->name;
    op->phase = s->phase;
    op->stream = (guint8)s->stream;
    op->wait = np > 0 ? pos[pp[np - 1]] : SIM_NO_WAIT;
    op->microbatch = G_MAXUINT16;
    op->layer = 255;
    if (s->cm == CM_NONE) {
      SimOpClass k;
      op->kind = SIM_OP_KERNEL;
      if (ro->work != G_MAXUINT32 && ro->kind == TRACE_RAW_KERNEL) {
        op->shape = work_shape(sh, ro->name,
                               &g_array_index(raw->works, TraceRawWork,
                                              ro->work), &k);
        shaped_kernels++;
        shaped_ns = trace_ns_add(shaped_ns, ro->dur_ns);
      } else {
        op->shape = kernel_shape(sh, ro->name, (TraceRawKind)ro->kind, &k);
      }
      n_kernels++;
      kernel_ns = trace_ns_add(kernel_ns, ro->dur_ns);
      op->klass = (guint8)k;
      continue;
    }
    emit_comm(sh, i, raw, s, ro, gid, comm_recorded, &solo, op);
  }
  if (rw->n_streams > rw->ns_gpu &&
      !rank_acyclic(ops, total, off, rw->n_streams)) {
    /* A damaged trace made the host dependencies circular: GPU order. */
    g_free(ops);
    b->host_cycles++;
    trace_warn(b->opt, "%s: the runtime calls' dependencies form a cycle "
               "(inconsistent times or correlation ids); the rank replays in "
               "GPU order only", raw->path);
    strip_host(rw);
    return emit_rank(b, i, sh, gid, comm_recorded, error);
  }
  sim_workload_set_rank(w, i, ops, total, g_steal_pointer(&off),
                        rw->n_streams);
  b->n_kernels += n_kernels;
  b->shaped_kernels += shaped_kernels;
  b->kernel_ns = trace_ns_add(b->kernel_ns, kernel_ns);
  b->shaped_ns = trace_ns_add(b->shaped_ns, shaped_ns);
  return TRUE;
}

typedef struct {
  gint64 rank;
  guint idx;
} RankOrder;

static int cmp_rank_order(const void *a, const void *b)
{
  const RankOrder *x = a, *y = b;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* Step 1: workload rank i is the i-th smallest global rank; files without
 * one take the smallest ranks not taken.  Fills b->global and b->rw[].raw;
 * *world receives the job's size (at least the ranks seen). */
static gboolean order_ranks(Build *b, GPtrArray *raws, gint64 *world,
                            GError **error)
{
  const TraceImportOptions *opt = b->opt;
  guint n = b->n;
  g_autofree RankOrder *ro = g_new(RankOrder, n);
  guint with_rank = 0;
  for (guint i = 0; i < n; i++) {
    const TraceRawRank *r = g_ptr_array_index(raws, i);
    with_rank += r->rank >= 0;
  }
  {
    /* Files without a rank take the smallest ranks not taken. */
    g_autoptr(GHashTable) taken = g_hash_table_new_full(g_int64_hash,
                                                        g_int64_equal, g_free,
                                                        NULL);
    for (guint i = 0; i < n; i++) {
      const TraceRawRank *r = g_ptr_array_index(raws, i);
      if (r->rank < 0)
        continue;
      if (g_hash_table_contains(taken, &r->rank)) {
        const char *other = NULL;
        for (guint k = 0; k < i; k++)
          if (((TraceRawRank *)g_ptr_array_index(raws, k))->rank == r->rank)
            other = ((TraceRawRank *)g_ptr_array_index(raws, k))->path;
        g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                    "%s and %s both hold rank %" G_GINT64_FORMAT, other,
                    r->path, r->rank);
        return FALSE;
      }
      g_hash_table_add(taken, g_memdup2(&r->rank, sizeof r->rank));
    }
    gint64 next = 0;
    for (guint i = 0; i < n; i++) {
      const TraceRawRank *r = g_ptr_array_index(raws, i);
      ro[i].idx = i;
      if (r->rank >= 0) {
        ro[i].rank = r->rank;
        continue;
      }
      while (g_hash_table_contains(taken, &next))
        next++;
      ro[i].rank = next++;
    }
    if (with_rank > 0 && with_rank < n)
      trace_warn(opt, "%u of %u files record no rank; they were numbered "
                 "in file order", n - with_rank, n);
  }
  qsort(ro, n, sizeof *ro, cmp_rank_order);
  *world = n;
  for (guint i = 0; i < n; i++) {
    b->global[i] = ro[i].rank;
    b->rw[i].raw = g_ptr_array_index(raws, ro[i].idx);
    *world = MAX(*world, b->rw[i].raw->world_size);
    *world = MAX(*world, ro[i].rank + 1);
  }
  return TRUE;
}

/* The reference GPU: the first rank's device (a warning when the ranks'
 * devices differ).  A new string, or NULL with error. */
static char *reference_gpu(const Build *b, GError **error)
{
  const TraceImportOptions *opt = b->opt;
  char *ref = trace_ref_gpu(opt, b->rw[0].device, b->rw[0].raw->path,
                            error);
  if (ref == NULL)
    return NULL;
  for (guint i = 1; i < b->n; i++) {
    const char *d = b->rw[i].device, *d0 = b->rw[0].device;
    if (d != NULL && d0 != NULL && strcmp(d, d0) != 0) {
      trace_warn(opt, "%s ran on \"%s\" but %s on \"%s\"; every rank is "
                 "taken as measured on %s", b->rw[i].raw->path, d,
                 b->rw[0].raw->path, d0, ref);
      break;
    }
  }

  return ref;
}

/* Step 7: the workload of every rank (names, groups, ops and shapes), or
 * NULL with error. */
static SimWorkload *emit_workload(Build *b, const SimWorkload *names,
                                  GError **error)
{
  guint n = b->n;
  g_autoptr(SimWorkload) w = sim_workload_new(n);
  for (guint k = 0; k < names->names->len; k++)
    sim_workload_intern(w, sim_workload_name(names, k));
  Shapes sh = {w, g_hash_table_new(g_direct_hash, g_direct_equal),
               g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
               g_hash_table_new_full(work_key_hash, work_key_equal, g_free,
                                     NULL),
               g_hash_table_new(g_direct_hash, g_direct_equal), 0, 0, 0};
  sh.marker_shape = G_MAXUINT32; /* created with the first marker */
  sh.host_shape = G_MAXUINT32;
  g_autofree guint32 *gid = g_new(guint32, MAX(b->gkeys->len, 1));
  for (guint g = 0; g < b->gkeys->len; g++) {
    GArray *m = g_ptr_array_index(b->gkeys, g);
    gid[g] = sim_workload_add_group(w, (const guint32 *)(void *)m->data,
                                    m->len);
  }
  gboolean emitted = TRUE;
  for (guint i = 0; i < n && emitted; i++)
    emitted = emit_rank(b, i, &sh, gid, b->opt->comm_recorded, error);
  g_hash_table_unref(sh.kernel);
  g_hash_table_unref(sh.comm);
  g_hash_table_unref(sh.work);
  g_hash_table_unref(sh.names);
  if (!emitted)
    return NULL;
  return g_steal_pointer(&w);
}

/* Per profiled step of r (in time order), the end of the GPU work launched
 * in it, from the file's first GPU start g0 ("-1" for a step that
 * launched none), comma separated.  The interval between consecutive ends
 * is the steady-state period even when the GPU runs a constant lag behind
 * the host, which the GPU span of the whole file counts once
 * (docs/trace-import.md, "The measured step"). */
static char *step_gpu_ends(const TraceRawRank *r, const GArray *steps,
                           gint64 g0)
{
  g_autofree gint64 *end = g_new(gint64, MAX(steps->len, 1));
  for (guint k = 0; k < steps->len; k++)
    end[k] = G_MININT64;
  for (guint i = 0; i < r->ops->len; i++) {
    const TraceRawOp *o = &g_array_index(r->ops, TraceRawOp, i);
    guint32 lo; /* one past the last step starting by the launch */
    SIM_UPPER_BOUND(lo, 0, steps->len, j,
                    g_array_index(steps, TraceRawRange, j).start_ns,
                    o->launch_ns);
    if (lo > 0 && o->launch_ns < g_array_index(steps, TraceRawRange,
                                                lo - 1).end_ns)
      end[lo - 1] = MAX(end[lo - 1], trace_ns_add(o->ts_ns, o->dur_ns));
  }
  GString *out = g_string_new(NULL);
  for (guint k = 0; k < steps->len; k++)
    g_string_append_printf(out, "%s%" G_GINT64_FORMAT, k ? "," : "",
                           end[k] == G_MININT64 ? -1
                                                : trace_ns_sub(end[k], g0));
  return g_string_free(out, FALSE);
}

/* The provenance of what the import read and kept. */
static void set_provenance(const Build *b, SimWorkload *w, const char *format,
                           gint64 world, const char *label, const char *ref)
{
  const TraceImportOptions *opt = b->opt;
  guint n = b->n;
  GHashTable *pv = w->provenance;
  GString *src = g_string_new(NULL), *gr = g_string_new(NULL);
  for (guint i = 0; i < n; i++) {
    g_string_append_printf(src, i ? ";%s" : "%s", b->rw[i].raw->path);
    g_string_append_printf(gr, i ? ",%" G_GINT64_FORMAT
                                 : "%" G_GINT64_FORMAT, b->global[i]);
  }
  g_hash_table_insert(pv, g_strdup("importer"), g_strdup(format));
  g_hash_table_insert(pv, g_strdup("sources"), g_string_free(src, FALSE));
  g_hash_table_insert(pv, g_strdup("global_ranks"),
                      g_string_free(gr, FALSE));
  g_hash_table_insert(pv, g_strdup("world_size"),
                      g_strdup_printf("%" G_GINT64_FORMAT, world));
  g_hash_table_insert(pv, g_strdup("iteration"), g_strdup(label));
  g_hash_table_insert(pv, g_strdup("ref_gpu"), g_strdup(ref));
  if (b->rw[0].device != NULL)
    g_hash_table_insert(pv, g_strdup("device"), g_strdup(b->rw[0].device));
  g_hash_table_insert(pv, g_strdup("comm_recorded_ops"),
                      g_strdup_printf("%" G_GUINT64_FORMAT, b->solo_ops));
  if (!opt->gpu_only) {
    g_hash_table_insert(pv, g_strdup("host_ops"),
                        g_strdup_printf("%" G_GUINT64_FORMAT, b->host_ops));
    g_hash_table_insert(pv, g_strdup("host_syncs"),
                        g_strdup_printf("%" G_GUINT64_FORMAT, b->host_syncs));
    g_hash_table_insert(pv, g_strdup("host_blocked_launches"),
                        g_strdup_printf("%" G_GUINT64_FORMAT,
                                        b->host_blocked));
    g_hash_table_insert(pv, g_strdup("host_orphan_gpu_ops"),
                        g_strdup_printf("%" G_GUINT64_FORMAT, b->orphans));
  } else {
    g_hash_table_insert(pv, g_strdup("host_ops"), g_strdup("gpu_only"));
  }
  /* What the trace measured, for fidelity checks: the GPU span of the
   * first rank's file (first GPU start to last GPU end, every op) and
   * the CPU durations of its profiled steps. */
  {
    const TraceRawRank *r0 = b->rw[0].raw;
    gint64 g0 = G_MAXINT64, g1 = G_MININT64;
    for (guint k = 0; k < r0->ops->len; k++) {
      const TraceRawOp *o = &g_array_index(r0->ops, TraceRawOp, k);
      gint64 end = trace_ns_add(o->ts_ns, o->dur_ns);
      g0 = MIN(g0, o->ts_ns);
      g1 = MAX(g1, end);
    }
    gint64 span = trace_ns_sub(g1, g0);
    if (g1 > g0 && span < G_MAXINT64)
      g_hash_table_insert(pv, g_strdup("trace_gpu_span_ns"),
                          g_strdup_printf("%" G_GINT64_FORMAT, span));
    g_autoptr(GArray) sr = trace_step_ranges(r0);
    if (sr->len > 0) {
      GString *sd = g_string_new(NULL);
      for (guint k = 0; k < sr->len; k++) {
        const TraceRawRange *x = &g_array_index(sr, TraceRawRange, k);
        gint64 d = trace_ns_sub(x->end_ns, x->start_ns);
        g_string_append_printf(sd, k ? ",%" G_GINT64_FORMAT
                                     : "%" G_GINT64_FORMAT, d);
      }
      g_hash_table_insert(pv, g_strdup("trace_step_ns"),
                          g_string_free(sd, FALSE));
      g_hash_table_insert(pv, g_strdup("trace_step_gpu_end_ns"),
                          step_gpu_ends(r0, sr, g0));
    }
  }
  if (trace_step_mode(opt) == TRACE_STEP_ALL && b->win[0].steps != NULL) {
    GString *st = g_string_new(NULL);
    for (guint k = 0; k < b->win[0].steps->len; k++)
      g_string_append_printf(st, k ? ",%" G_GINT64_FORMAT
                                   : "%" G_GINT64_FORMAT,
                             g_array_index(b->win[0].steps, TraceRawRange,
                                           k).step);
    g_hash_table_insert(pv, g_strdup("steps"), g_string_free(st, FALSE));
  }
}

/* Steps 1-7 on a set-up builder; NULL with error. */
static SimWorkload *build(Build *b, GPtrArray *raws, const SimWorkload *names,
                          const char *format, GError **error)
{
  const TraceImportOptions *opt = b->opt;
  guint n = b->n;
  gint64 world;
  if (!order_ranks(b, raws, &world, error))
    return NULL;
  gboolean complete = (guint64)world == n;

  /* 2-5. Iteration, phases, streams, order, waits. */
  g_autoptr(GString) label = g_string_new(NULL);
  b->win = g_new0(Window, n);
  if (!trace_pick_windows(b, b->win, label, error))
    return NULL;
  for (guint i = 0; i < n; i++)
    if (!trace_analyse_rank(b, i, b->win[i].w0, b->win[i].w1, error) ||
        (!opt->gpu_only && !trace_host_streams(b, i, &b->win[i], error)))
      return NULL;
  trace_host_warnings(b);

  /* 6. Communication. */
  for (guint i = 0; i < n; i++)
    resolve_comm(b, i, complete);
  check_matching(b);
  if (b->solo_ops > 0)
    trace_warn(opt, "%" G_GUINT64_FORMAT " communication ops replay at "
               "their recorded durations (%s)", b->solo_ops,
               complete ? "their peers are unknown or do not pair up"
                        : "the import holds only some ranks of the job");
  g_autofree char *ref = reference_gpu(b, error);
  if (ref == NULL)
    return NULL;

  /* 7. The workload. */
  g_autoptr(SimWorkload) w = emit_workload(b, names, error);
  if (w == NULL)
    return NULL;
  trace_shape_report(b, w->provenance);
  w->ref_gpu = g_strdup(ref);
  set_provenance(b, w, format, world, label->str, ref);
  if (!sim_workload_validate(w, error)) {
    g_prefix_error(error, "imported workload is inconsistent: ");
    return NULL;
  }
  return g_steal_pointer(&w);
}

SimWorkload *trace_raw_build(GPtrArray *raws, const SimWorkload *names,
                             const TraceImportOptions *opt,
                             const char *format, GError **error)
{
  g_return_val_if_fail(raws != NULL && raws->len > 0 && names != NULL, NULL);
  TraceImportOptions dflt = {0};
  if (opt == NULL)
    opt = &dflt;
  guint n = raws->len;
  Build b = {0};
  b.opt = opt;
  b.n = n;
  b.global = g_new(gint64, n);
  b.rw = g_new0(RankWork, n);
  b.gkeys = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
  b.gkey_index = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                       NULL);
  SimWorkload *result = build(&b, raws, names, format, error);
  trace_build_clear(&b);
  return result;
}
