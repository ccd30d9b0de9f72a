/* models/schedule.c -- pipeline schedules and the computation groups of
 * pipelined workloads (models/schedule.h).
 *
 * Stage orders are written out step by step (schedule_stage_order), so
 * the generator, the profile pipelines and the Perseus DAG run the same
 * program.  The groups read a workload the generator or the profile
 * pipeline built (Megatron rank order, phases and microbatches on ops) and
 * take each stage's program order from its representative rank's kernels.
 */
#include "models/schedule.h"

#include <string.h>

const char *const schedule_names[PIPELINE_SCHEDULE_COUNT + 1] = {
  "1f1b", "gpipe", "interleaved", NULL};

const char *schedule_name(PipelineSchedule s)
{
  return (guint)s < PIPELINE_SCHEDULE_COUNT ? schedule_names[s] : "?";
}

gboolean schedule_from_name(const char *name, PipelineSchedule *out)
{
  for (guint i = 0; i < PIPELINE_SCHEDULE_COUNT; i++)
    if (g_strcmp0(name, schedule_names[i]) == 0) {
      *out = (PipelineSchedule)i;
      return TRUE;
    }
  return FALSE;
}

static void step(ScheduleStep *out, guint *n, guint mb, guint chunk,
                 gboolean backward)
{
  out[*n].microbatch = mb;
  out[*n].chunk = chunk;
  out[*n].backward = backward;
  (*n)++;
}

/* The k-th forward (fwd) or backward step of the interleaved schedule:
 * microbatches go through the chunks in groups of S; a forward step runs
 * chunk (k / S) % v, a backward step the chunks in reverse, both on
 * microbatch (k / (S v)) S + k % S (Megatron's get_model_chunk_id and its
 * microbatch mapping). */
static void interleaved_step(ScheduleStep *out, guint *n, guint S, guint v,
                             guint k, gboolean fwd)
{
  guint c = (k / S) % v;
  step(out, n, (k / (S * v)) * S + k % S, fwd ? c : v - 1 - c, !fwd);
}

gboolean schedule_stage_order(PipelineSchedule schedule, guint S, guint M,
                              guint v, guint s, ScheduleStep *out)
{
  guint n = 0;
  if (s >= S || v == 0)
    return FALSE;
  switch (schedule) {
  case PIPELINE_GPIPE:
    if (v != 1)
      return FALSE;
    for (guint m = 0; m < M; m++)
      step(out, &n, m, 0, FALSE);
    for (guint m = 0; m < M; m++)
      step(out, &n, m, 0, TRUE);
    return TRUE;
  case PIPELINE_1F1B: {
    if (v != 1)
      return FALSE;
    guint warm = MIN(S - s - 1, M);
    for (guint m = 0; m < warm; m++)
      step(out, &n, m, 0, FALSE);
    for (guint i = 0; i < M - warm; i++) {
      step(out, &n, warm + i, 0, FALSE);
      step(out, &n, i, 0, TRUE);
    }
    for (guint m = M - warm; m < M; m++)
      step(out, &n, m, 0, TRUE);
    return TRUE;
  }
  case PIPELINE_INTERLEAVED: {
    if (M % S != 0)
      return FALSE;
    guint total = M * v;
    guint warm = MIN(2 * (S - s - 1) + (v - 1) * S, total);
    for (guint k = 0; k < warm; k++)
      interleaved_step(out, &n, S, v, k, TRUE);
    for (guint i = 0; i < total - warm; i++) {
      interleaved_step(out, &n, S, v, warm + i, TRUE);
      interleaved_step(out, &n, S, v, i, FALSE);
    }
    for (guint k = total - warm; k < total; k++)
      interleaved_step(out, &n, S, v, k, FALSE);
    return TRUE;
  }
  default:
    return FALSE;
  }
}

gboolean pipeline_schedule_order(const char *schedule, guint S, guint M,
                                 guint s, guint32 *out)
{
  PipelineSchedule sch;
  if (!schedule_from_name(schedule, &sch) || sch == PIPELINE_INTERLEAVED)
    return FALSE;
  g_autofree ScheduleStep *st = g_new(ScheduleStep, MAX(2 * M, 1u));
  if (!schedule_stage_order(sch, S, M, 1, s, st))
    return FALSE;
  for (guint k = 0; k < 2 * M; k++)
    out[k] = pipeline_node_id(M, s, st[k].microbatch, st[k].backward);
  return TRUE;
}

/* ---- computation groups ------------------------------------------------ */

static gboolean invalid(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static gboolean invalid(GError **error, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error_literal(error, SIM_ERROR, SIM_ERROR_INVALID, msg);
  return FALSE;
}

void pipeline_groups_free(PipelineGroups *g)
{
  if (g == NULL)
    return;
  if (g->node != NULL)
    for (guint r = 0; r < g->n_ranks; r++)
      g_free(g->node[r]);
  g_free(g->node);
  if (g->order != NULL)
    for (guint s = 0; s < g->n_stages; s++)
      g_free(g->order[s]);
  g_free(g->order);
  g_free(g->pipeline);
  g_free(g->stage);
  g_free(g->rep_rank);
  g_free(g);
}

PipelineGroups *pipeline_groups_new(const SimWorkload *w, GError **error)
{
  g_return_val_if_fail(w != NULL, NULL);
  guint S = w->pp, M = w->microbatches, dp = w->dp, tp = w->tp;
  if (S == 0 || M == 0 || dp == 0 || tp == 0) {
    invalid(error, "the workload has no pipeline layout (pp = %u, "
            "microbatches = %u, dp = %u, tp = %u): per-computation planning "
            "needs a pipelined workload (js.pipeline or js.gpt)", S, M, dp, tp);
    return NULL;
  }
  if (w->schedule != NULL && g_strcmp0(w->schedule, "1f1b") != 0 &&
      g_strcmp0(w->schedule, "gpipe") != 0) {
    invalid(error, "schedule '%s': per-computation planning knows the "
            "\"1f1b\" and \"gpipe\" schedules (one computation per stage, "
            "microbatch and pass)", w->schedule);
    return NULL;
  }
  if ((guint64)tp * dp * S != w->n_ranks) {
    invalid(error, "the workload has %u ranks but tp * dp * pp = %u * %u * "
            "%u", w->n_ranks, tp, dp, S);
    return NULL;
  }
  if ((guint64)2 * S * M > PIPELINE_MAX_NODES) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_LIMIT,
                "%u stages x %u microbatches is more than %u computations",
                S, M, PIPELINE_MAX_NODES);
    return NULL;
  }
  g_autoptr(PipelineGroups) g = g_new0(PipelineGroups, 1);
  g->n_stages = S;
  g->n_microbatches = M;
  g->n_pipelines = dp;
  g->tp = tp;
  g->n_ranks = w->n_ranks;
  g->node = g_new0(guint32 *, w->n_ranks);
  g->pipeline = g_new0(guint, w->n_ranks);
  g->stage = g_new0(guint, w->n_ranks);
  g->rep_rank = g_new0(guint, S);
  g->order = g_new0(guint32 *, S);
  g_autofree guint8 *seen = g_new0(guint8, 2 * M);

  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    guint s = rk->stage;
    if (s != r / (tp * dp)) {
      invalid(error, "rank %u has stage %u, but Megatron order (rank = tp_i "
              "+ tp * (dp_i + dp * pp_i)) puts it on stage %u", r, s,
              r / (tp * dp));
      return NULL;
    }
    g->stage[r] = s;
    g->pipeline[r] = (r / tp) % dp;
    guint32 *nd = g->node[r] = g_new(guint32, MAX(rk->n_ops, 1));
    if (w->fold_rep != NULL && w->fold_rep[r] != r) {
      /* Folded away: no ops, its representative's computations. */
      guint q = w->fold_rep[r];
      if (q >= w->n_ranks || w->ranks[q].stage != s) {
        invalid(error, "rank %u (stage %u) folds into rank %u, not of its "
                "stage: per-computation planning needs every rank folded "
                "into one of its own stage", r, s, q);
        return NULL;
      }
      nd[0] = PIPELINE_NO_NODE;
      continue;
    }
    memset(seen, 0, 2 * M);
    for (guint32 i = 0; i < rk->n_ops; i++) {
      const SimOp *op = &rk->ops[i];
      nd[i] = PIPELINE_NO_NODE;
      if (op->kind != SIM_OP_KERNEL && op->kind != SIM_OP_COLLECTIVE &&
          op->kind != SIM_OP_RECV)
        continue;
      if (op->phase != SIM_PHASE_FORWARD && op->phase != SIM_PHASE_BACKWARD)
        continue;
      if (op->microbatch == G_MAXUINT16)
        continue;
      if (op->microbatch >= M) {
        invalid(error, "rank %u op %u ('%s'): microbatch %u, but the "
                "workload has %u microbatches", r, i,
                sim_workload_name(w, op->name), op->microbatch, M);
        return NULL;
      }
      gboolean b = op->phase == SIM_PHASE_BACKWARD;
      nd[i] = pipeline_node_id(M, s, op->microbatch, b);
      seen[op->microbatch * 2 + (b ? 1 : 0)] = 1;
    }
    for (guint k = 0; k < 2 * M; k++)
      if (!seen[k]) {
        invalid(error, "rank %u (stage %u) has no op in the %s of microbatch "
                "%u", r, s, k % 2 ? "backward" : "forward", k / 2);
        return NULL;
      }
  }
  /* Program order of each stage, from its representative rank. */
  for (guint s = 0; s < S; s++) {
    guint rep = s * tp * dp;
    if (w->fold_rep != NULL)
      rep = w->fold_rep[rep]; /* the same program, holding the ops */
    g->rep_rank[s] = rep;
    guint32 *ord = g->order[s] = g_new(guint32, 2 * M);
    memset(seen, 0, 2 * M);
    guint n = 0;
    const SimRank *rk = &w->ranks[rep];
    for (guint32 i = 0; i < rk->n_ops; i++) {
      guint32 id = g->node[rep][i];
      if (id == PIPELINE_NO_NODE || rk->ops[i].kind != SIM_OP_KERNEL)
        continue;
      guint32 local = id - pipeline_node_id(M, s, 0, FALSE);
      if (!seen[local]) {
        seen[local] = 1;
        ord[n++] = id;
      }
    }
    if (n != 2 * M) {
      invalid(error, "stage %u: %u of its %u computations have kernels "
              "(a computation made of collectives only cannot be planned)",
              s, n, 2 * M);
      return NULL;
    }
  }
  return g_steal_pointer(&g);
}

