/* traces/pipeline.c -- computation-level pipeline workloads from measured
 * stage profiles.
 *
 * What it produces
 * ----------------
 * dp identical pipelines of S stages; rank = p + dp * s (Megatron order
 * with tp = 1: one rank stands for one TP rank of a stage, whose TP peers
 * behave identically, so a TP8 pipeline's energy is 8x the simulated one).
 * Every rank runs M microbatches in the schedule's order ("1f1b":
 * min(S-s-1, M) warm-up forwards, then forward/backward pairs, then the
 * remaining backwards, as Megatron; "gpipe": all forwards, then all
 * backwards).  Each forward or backward of a microbatch is ONE kernel op
 * named "stage<s>.forward" / "stage<s>.backward" (shape per stage and
 * pass, class other) whose reference duration is the profile's measured
 * time at its highest clock, ref_ns = round(t(f_max) * 1e9).  The
 * workload carries a price table (models/table.h) mapping those shapes to
 * the profile's points, so any machine built for it prices them from the
 * measurement: t(f) and E(f), interpolated between measured clocks,
 * refused outside them.
 *
 * Streams and dependencies (as traces/gpt.c):
 *   0  the computations, in program order
 *   1  the DP all-reduce (dp > 1)
 *   2  sends of activations to the next stage
 *   3  sends of gradients to the previous stage
 *   4  receives from the previous stage      5  receives from the next
 * A send waits for the computation it ships; a receive waits for the
 * computation before it in program order (it is posted when the rank gets
 * there, and the GPU is blocked while it waits); the computation that
 * consumes it waits for the receive.  So F(s,m) -> F(s+1,m) and B(s+1,m)
 * -> B(s,m), and a stage never blocks on its own sends.
 *
 * Transfers.  activation_bytes > 0: each send/recv moves that many bytes
 * and the network model prices it.  0 (default): the transfer is free -- a
 * recorded duration of 1 ns, the smallest the engine replays -- which is
 * the Perseus planner's model (communication off the DAG).
 *
 * Synchronisation.  With dp > 1 every rank ends its iteration with an
 * all-reduce over the ranks of its stage in all pipelines (group s =
 * {s*dp .. s*dp + dp-1}): data-parallel gradient synchronisation, where a
 * straggling pipeline makes the others wait, blocked.  grad_bytes > 0 is
 * its message size (network-priced); 0 (default) makes it a free 1 ns
 * barrier.  The engine's global barrier between iterations does the rest.
 *
 * Memory.  The dp ranks of a stage differ only in their peers (shifted by
 * their pipeline's index), so they share one program
 * (sim_workload_share_alike, sim/workload.h "Shared programs").
 *
 * Known limits
 * ------------
 * - Stage s of the pipeline uses stage s of the profile: stages must not
 *   exceed the profile's.
 * - One computation is one op: a clock holds for a whole computation, and
 *   a clock switch requested for it lands only after the switching latency
 *   (the engine keeps the clocks in force at an op's start), so scenarios
 *   replaying Perseus plans set switch_latency_ms = 0, as the emulation
 *   does.
 * - No optimizer step, no embedding all-reduce.
 */
#include "traces/pipeline.h"
#include "models/table.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK(pipeline-error-quark, pipeline_error)

/* Ops of one workload at most (as traces/gpt.c: 128 GiB of records). */
#define PIPELINE_MAX_OPS ((guint64)1 << 32)

enum {
  STREAM_COMPUTE = 0,
  STREAM_DP = 1,
  STREAM_SEND_NEXT = 2,
  STREAM_SEND_PREV = 3,
  STREAM_RECV_PREV = 4,
  STREAM_RECV_NEXT = 5
};

void pipeline_config_init(PipelineConfig *cfg)
{
  memset(cfg, 0, sizeof *cfg);
  cfg->schedule = PIPELINE_1F1B;
  cfg->dp = 1;
}

/* Profile pipelines run one chunk per stage: 1f1b and gpipe. */
const char *pipeline_schedule_name(PipelineSchedule s)
{
  return (guint)s <= PIPELINE_GPIPE ? schedule_name(s) : "?";
}

gboolean pipeline_schedule_from_name(const char *name, PipelineSchedule *out,
                                     GError **error)
{
  PipelineSchedule s;
  if (schedule_from_name(name, &s) && s <= PIPELINE_GPIPE) {
    *out = s;
    return TRUE;
  }
  g_set_error(error, PIPELINE_ERROR, PIPELINE_ERROR_INVALID,
              "pipeline: schedule '%s' must be one of \"1f1b\", \"gpipe\"",
              name != NULL ? name : "(null)");
  return FALSE;
}

static gboolean check_bytes(const char *field, double v, GError **error)
{
  if (isfinite(v) && v >= 0.0 && v < 1e15)
    return TRUE;
  g_set_error(error, PIPELINE_ERROR, PIPELINE_ERROR_INVALID,
              "pipeline: %s = %g must be a finite number of bytes in "
              "[0, 1e15)", field, v);
  return FALSE;
}

/* Adds the price-table entry of profile op `op` and returns its time at
 * the highest measured clock. */
static gboolean add_entry(PriceTable *t, const ProfileOp *op, guint *entry,
                          double *t_max, GError **error)
{
  g_autoptr(GArray) clk = profile_op_clocks(op, 0);
  g_autofree TablePoint *pts = g_new(TablePoint, MAX(clk->len, 1u));
  for (guint k = 0; k < clk->len; k++) {
    pts[k].sm_mhz = g_array_index(clk, guint, k);
    if (!profile_op_at(op, pts[k].sm_mhz, 0, &pts[k].time_s, &pts[k].energy_j,
                       error))
      return FALSE;
  }
  if (!price_table_add(t, op->name, pts, clk->len, entry, error))
    return FALSE;
  guint n;
  const TablePoint *tp = price_table_points(t, *entry, &n);
  *t_max = tp[n - 1].time_s;
  return TRUE;
}

typedef struct {
  const PipelineConfig *cfg;
  SimWorkload *w;
  guint S, M, dp;
  guint32 kshape[2 * 256];   /* per (stage, pass) -- filled for S stages */
  gint64 kref[2 * 256];
  guint32 kname[2 * 256];
  guint32 p2p_shape, ar_shape, send_name, recv_name, ar_name;
  gint64 p2p_ref, ar_ref;
} Gen;

static guint32 put(SimRankBuilder *b, SimOpKind kind, guint stream,
                   guint32 shape, guint32 name, guint32 peer, guint32 wait,
                   gint64 ref_ns, guint mb, SimPhase phase, SimOpClass klass)
{
  SimOp op;
  memset(&op, 0, sizeof op);
  op.ref_ns = ref_ns;
  op.shape = shape;
  op.name = name;
  op.peer = peer;
  op.wait = wait;
  op.microbatch = (guint16)mb;
  op.layer = 255;
  op.kind = (guint8)kind;
  op.klass = (guint8)klass;
  op.phase = (guint8)phase;
  op.stream = (guint8)stream;
  return sim_rank_builder_add(b, &op);
}

/* Emits rank (pipeline p, stage s); FALSE when its op array cannot be
 * allocated. */
static gboolean emit_rank(Gen *g, SimRankBuilder *b, guint p, guint s,
                          GError **error)
{
  guint S = g->S, M = g->M, dp = g->dp;
  guint r = p + dp * s;
  guint32 prev = s > 0 ? r - dp : 0, next = s + 1 < S ? r + dp : 0;
  g_autofree ScheduleStep *order = g_new(ScheduleStep, 2 * M);
  if (!schedule_stage_order(g->cfg->schedule, S, M, 1, s, order))
    g_assert_not_reached(); /* pipeline_from_profile checked the schedule */
  guint32 last = SIM_NO_WAIT; /* the previous computation */
  for (guint k = 0; k < 2 * M; k++) {
    gboolean bwd = order[k].backward;
    guint m = order[k].microbatch;
    SimPhase ph = bwd ? SIM_PHASE_BACKWARD : SIM_PHASE_FORWARD;
    guint32 wait = SIM_NO_WAIT;
    if (!bwd && s > 0)
      wait = put(b, SIM_OP_RECV, STREAM_RECV_PREV, g->p2p_shape,
                 g->recv_name, prev, last, g->p2p_ref, m, ph, SIM_CLASS_COMM);
    if (bwd && s + 1 < S)
      wait = put(b, SIM_OP_RECV, STREAM_RECV_NEXT, g->p2p_shape,
                 g->recv_name, next, last, g->p2p_ref, m, ph, SIM_CLASS_COMM);
    guint ki = 2 * s + (bwd ? 1 : 0);
    last = put(b, SIM_OP_KERNEL, STREAM_COMPUTE, g->kshape[ki], g->kname[ki],
               0, wait, g->kref[ki], m, ph, SIM_CLASS_OTHER);
    if (!bwd && s + 1 < S)
      put(b, SIM_OP_SEND, STREAM_SEND_NEXT, g->p2p_shape, g->send_name, next,
          last, g->p2p_ref, m, ph, SIM_CLASS_COMM);
    if (bwd && s > 0)
      put(b, SIM_OP_SEND, STREAM_SEND_PREV, g->p2p_shape, g->send_name, prev,
          last, g->p2p_ref, m, ph, SIM_CLASS_COMM);
  }
  if (dp > 1)
    put(b, SIM_OP_COLLECTIVE, STREAM_DP, g->ar_shape, g->ar_name, s, last,
        g->ar_ref, G_MAXUINT16, SIM_PHASE_BACKWARD, SIM_CLASS_COMM);
  if (!sim_rank_builder_try_finish(b, g->w, r, error))
    return FALSE;
  g->w->ranks[r].stage = s;
  return TRUE;
}

/* Checks p and cfg (the stage count into *stages) before anything is
 * built; FALSE with an error naming the field. */
static gboolean check_config(const Profile *p, const PipelineConfig *cfg,
                             guint *stages, GError **error)
{
  if (p->format != PROFILE_PERSEUS) {
    g_set_error(error, PIPELINE_ERROR, PIPELINE_ERROR_PROFILE,
                "%s: a pipeline needs a stage profile "
                "(stage,instruction,frequency,time,energy), not a per-kernel "
                "one", p->path);
    return FALSE;
  }
  guint S = *stages = cfg->stages != 0 ? cfg->stages : p->n_stages;
  if (S == 0 || S > p->n_stages || S > 256) {
    g_set_error(error, PIPELINE_ERROR, PIPELINE_ERROR_INVALID,
                "pipeline: stages = %u must be in 1..%u (the stages %s "
                "profiles)", S, MIN(p->n_stages, 256u), p->path);
    return FALSE;
  }
  if (cfg->microbatches == 0 || cfg->microbatches > PIPELINE_MAX_MICROBATCHES) {
    g_set_error(error, PIPELINE_ERROR, PIPELINE_ERROR_INVALID,
                "pipeline: microbatches = %u must be in 1..%u",
                cfg->microbatches, PIPELINE_MAX_MICROBATCHES);
    return FALSE;
  }
  if (cfg->dp == 0 || (guint64)cfg->dp * S > PIPELINE_MAX_RANKS) {
    g_set_error(error, PIPELINE_ERROR, PIPELINE_ERROR_INVALID,
                "pipeline: dp = %u must be >= 1 with stages * dp <= %u",
                cfg->dp, PIPELINE_MAX_RANKS);
    return FALSE;
  }
  if ((guint)cfg->schedule > PIPELINE_GPIPE) {
    g_set_error(error, PIPELINE_ERROR, PIPELINE_ERROR_INVALID,
                "pipeline: unknown schedule %d", (int)cfg->schedule);
    return FALSE;
  }
  if (!check_bytes("activation_bytes", cfg->activation_bytes, error) ||
      !check_bytes("grad_bytes", cfg->grad_bytes, error))
    return FALSE;
  /* Ops of the iteration (emit_rank): 2M computations per rank, 4M p2p
   * ops per stage boundary, one all-reduce per rank when dp > 1.
   * Bounded as traces/gpt.c bounds its workloads, so an absurd size is an
   * error, not hours of building 32-byte records. */
  guint64 n_ops = (guint64)cfg->dp *
                  ((guint64)S * 2 * cfg->microbatches +
                   (guint64)(S - 1) * 4 * cfg->microbatches +
                   (cfg->dp > 1 ? S : 0));
  if (n_ops > PIPELINE_MAX_OPS) {
    g_set_error(error, PIPELINE_ERROR, PIPELINE_ERROR_INVALID,
                "pipeline: stages * dp = %u ranks with microbatches = %u "
                "would be %" G_GUINT64_FORMAT " ops: must be <= %"
                G_GUINT64_FORMAT " (fewer pipelines or microbatches)",
                S * cfg->dp, cfg->microbatches, n_ops, PIPELINE_MAX_OPS);
    return FALSE;
  }
  return TRUE;
}

SimWorkload *pipeline_from_profile(const Profile *p, const PipelineConfig *cfg,
                                   GError **error)
{
  g_return_val_if_fail(p != NULL && cfg != NULL, NULL);
  guint S = 0;
  if (!check_config(p, cfg, &S, error))
    return NULL;

  g_autoptr(SimWorkload) w = sim_workload_new(S * cfg->dp);
  g_autoptr(PriceTable) table = price_table_new();
  Gen g;
  memset(&g, 0, sizeof g);
  g.cfg = cfg;
  g.w = w;
  g.S = S;
  g.M = cfg->microbatches;
  g.dp = cfg->dp;
  static const char *const instr[2] = {"forward", "backward"};
  for (guint s = 0; s < S; s++)
    for (guint b = 0; b < 2; b++) {
      const ProfileOp *op = profile_find_stage(p, s, instr[b]);
      if (op == NULL) {
        g_set_error(error, PIPELINE_ERROR, PIPELINE_ERROR_PROFILE,
                    "%s: no '%s' rows for stage %u (a pipeline needs forward "
                    "and backward of every stage)", p->path, instr[b], s);
        return NULL;
      }
      guint entry;
      double t_max;
      if (!add_entry(table, op, &entry, &t_max, error))
        return NULL;
      g_autofree char *name = g_strdup_printf("stage%u.%s", s, instr[b]);
      SimShape sh;
      memset(&sh, 0, sizeof sh);
      sh.name = sim_workload_intern(w, name);
      sh.klass = SIM_CLASS_OTHER;
      guint ki = 2 * s + b;
      g.kname[ki] = sh.name;
      g.kshape[ki] = sim_workload_add_shape(w, &sh);
      g.kref[ki] = MAX((gint64)llround(t_max * 1e9), (gint64)1);
      if (!price_table_map_shape(table, g.kshape[ki], entry, error))
        return NULL;
    }
  SimShape cs;
  memset(&cs, 0, sizeof cs);
  cs.klass = SIM_CLASS_COMM;
  cs.coll = SIM_COLL_SEND_RECV;
  cs.bytes = cfg->activation_bytes;
  cs.name = g.send_name = sim_workload_intern(w, "pp.send");
  g.recv_name = sim_workload_intern(w, "pp.recv");
  g.p2p_shape = sim_workload_add_shape(w, &cs);
  g.p2p_ref = cfg->activation_bytes > 0 ? 0 : 1;
  cs.coll = SIM_COLL_ALL_REDUCE;
  cs.bytes = cfg->grad_bytes;
  cs.name = g.ar_name = sim_workload_intern(w, "dp.all_reduce");
  g.ar_shape = sim_workload_add_shape(w, &cs);
  g.ar_ref = cfg->grad_bytes > 0 ? 0 : 1;
  if (cfg->dp > 1) {
    g_autofree guint32 *members = g_new(guint32, cfg->dp);
    for (guint s = 0; s < S; s++) {
      for (guint q = 0; q < cfg->dp; q++)
        members[q] = q + cfg->dp * s;
      guint32 gid = sim_workload_add_group(w, members, cfg->dp);
      g_assert(gid == s);
    }
  }
  g_autoptr(SimRankBuilder) b = sim_rank_builder_new();
  for (guint s = 0; s < S; s++)
    for (guint q = 0; q < cfg->dp; q++)
      if (!emit_rank(&g, b, q, s, error))
        return NULL;

  w->tp = 1;
  w->pp = S;
  w->dp = cfg->dp;
  w->microbatches = cfg->microbatches;
  w->schedule = g_strdup(pipeline_schedule_name(cfg->schedule));
  GHashTable *pv = w->provenance;
  g_hash_table_replace(pv, g_strdup("generator"), g_strdup("pipeline"));
  g_hash_table_replace(pv, g_strdup("profile"), g_strdup(p->path));
  g_hash_table_replace(pv, g_strdup("microbatches"),
                       g_strdup_printf("%u", cfg->microbatches));
  g_hash_table_replace(pv, g_strdup("schedule"),
                       g_strdup(pipeline_schedule_name(cfg->schedule)));
  g_hash_table_replace(pv, g_strdup("stages"), g_strdup_printf("%u", S));
  g_hash_table_replace(pv, g_strdup("dp"), g_strdup_printf("%u", cfg->dp));
  g_hash_table_replace(pv, g_strdup("activation_bytes"),
                       g_strdup_printf("%.17g", cfg->activation_bytes));
  g_hash_table_replace(pv, g_strdup("grad_bytes"),
                       g_strdup_printf("%.17g", cfg->grad_bytes));
  price_table_attach(table, w);
  if (!sim_workload_validate(w, error))
    return NULL;
  /* The dp pipelines run alike stages (the same group, peers shifted by
   * the pipeline's index): one program per stage, as generated. */
  sim_workload_share_alike(w);
  return g_steal_pointer(&w);
}

/* For a folded workload, the groups are computed on an unfolded view: a
 * shallow copy of w whose every rank borrows its representative's op
 * array (ranks of one class run the same ops; only their peers differ,
 * and pipeline_groups_new reads kinds, phases, microbatches and stages,
 * never peers).  The result is then exactly the unfolded workload's. */
PipelineGroups *pipeline_computations(const SimWorkload *w, GError **error)
{
  g_return_val_if_fail(w != NULL, NULL);
  if (w->fold_rep == NULL)
    return pipeline_groups_new(w, error);
  g_autofree SimRank *ranks = g_new(SimRank, MAX(w->n_ranks, 1));
  for (guint r = 0; r < w->n_ranks; r++) {
    guint32 q = w->fold_rep[r];
    if (q >= w->n_ranks || w->fold_rep[q] != q) {
      g_set_error(error, PIPELINE_ERROR, PIPELINE_ERROR_INVALID,
                  "folded workload: rank %u has representative %u, which "
                  "is not a representative of %u ranks", r, q, w->n_ranks);
      return NULL;
    }
    ranks[r] = w->ranks[q];
    ranks[r].stage = w->ranks[r].stage;
  }
  SimWorkload view = *w;
  view.ranks = ranks;
  view.fold_rep = NULL;
  return pipeline_groups_new(&view, error);
}
