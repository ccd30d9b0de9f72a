/* models/schedule.h -- pipeline schedules and the computations of a
 * pipelined workload.
 *
 * One PipelineSchedule enum with one name table, and the program order of
 * a stage under it (schedule_stage_order), which the GPT generator
 * (traces/gpt.c), profile pipelines (traces/pipeline.c) and the Perseus
 * DAG (models/dvfs/perseus.h) all follow.  Then the computation groups of
 * a pipelined workload (PipelineGroups: which op belongs to which (stage,
 * microbatch, forward/backward) computation), which the pipeline policies
 * plan on and traces/pipeline.c hands out.  See models/schedule.c.
 */
#ifndef MODELS_SCHEDULE_H
#define MODELS_SCHEDULE_H

#include <glib.h>
#include "sim/workload.h"

G_BEGIN_DECLS

/* ---- schedules -------------------------------------------------------- */

typedef enum {
  PIPELINE_1F1B = 0,     /* Megatron's 1F1B (PipeDream-flush) */
  PIPELINE_GPIPE,        /* all forwards, then all backwards */
  PIPELINE_INTERLEAVED,  /* Megatron's interleaved 1F1B (model chunks) */
  PIPELINE_SCHEDULE_COUNT
} PipelineSchedule;

/* "1f1b", "gpipe", "interleaved" ("?" when out of range). */
const char *schedule_name(PipelineSchedule s);
/* The names, indexed by PipelineSchedule, NULL-terminated (a choice list
 * for argument checkers). */
extern const char *const schedule_names[PIPELINE_SCHEDULE_COUNT + 1];
/* The schedule named `name`; FALSE (and *out untouched) when none is. */
gboolean schedule_from_name(const char *name, PipelineSchedule *out);

/* One computation of a stage's program: the forward or backward pass of
 * model chunk `chunk` (0 but under interleaving) on `microbatch`. */
typedef struct {
  guint microbatch;
  guint chunk;
  gboolean backward;
} ScheduleStep;

/* The program order of stage `stage` of `stages` running `microbatches`
 * microbatches of `chunks` model chunks each under `schedule`: writes the
 * 2 x microbatches x chunks steps into out.
 *   1f1b:   min(S-s-1, M) warm-up forwards, then forward/backward pairs,
 *           then the remaining backwards (chunks = 1);
 *   gpipe:  every forward, then every backward (chunks = 1);
 *   interleaved: n = M v steps each way, min(2 (S-s-1) + (v-1) S, n)
 *           warm-up forwards, then pairs, then the remaining backwards;
 *           step k runs microbatch (k / (S v)) S + k % S on chunk
 *           (k / S) % v forwards and v-1 minus that backwards (Megatron's
 *           get_model_chunk_id; M a multiple of S).
 * FALSE, writing nothing, for an unknown schedule, chunks != 1 outside
 * interleaved, or an interleaved layout Megatron refuses. */
gboolean schedule_stage_order(PipelineSchedule schedule, guint stages,
                              guint microbatches, guint chunks, guint stage,
                              ScheduleStep *out);

/* ---- computations of a pipelined workload ------------------------------ */

#define PIPELINE_NO_NODE G_MAXUINT32
#define PIPELINE_MAX_NODES (1u << 22)

/* Node id of computation (stage s, microbatch m, backward b) with M
 * microbatches: (s * M + m) * 2 + b. */
static inline guint32 pipeline_node_id(guint M, guint s, guint m, gboolean b)
{
  return ((guint32)s * M + m) * 2 + (b ? 1u : 0u);
}

/* The program order of a stage under a schedule, as node ids: "1f1b" or
 * "gpipe" (schedule_stage_order with one chunk).  Writes 2M ids into out.
 * FALSE for another schedule. */
gboolean pipeline_schedule_order(const char *schedule, guint S, guint M,
                                 guint s, guint32 *out);

typedef struct {
  guint n_stages, n_microbatches, n_pipelines, tp;
  guint n_ranks;
  guint32 **node;     /* per rank, per op: node id or PIPELINE_NO_NODE */
  guint *pipeline;    /* per rank: dp index */
  guint *stage;       /* per rank */
  guint *rep_rank;    /* per stage: the rank of pipeline 0, tp index 0
                         (folded: the representative it folds into) */
  guint32 **order;    /* per stage: its 2M node ids in program order */
} PipelineGroups;

/* Groups the ops of pipelined workload w (w->pp stages, w->microbatches,
 * w->dp pipelines, w->tp; ranks in Megatron order, SimRank.stage set):
 * kernel, collective and receive ops with a microbatch and phase
 * forward/backward belong to computation (rank's stage, microbatch,
 * phase); sends and ops without a microbatch (DP all-reduces, the
 * optimizer) belong to none.  Every computation of a stage must have ops
 * on every rank of that stage.  A folded workload (fold_rep): only
 * representatives are grouped (a folded-away rank's node array is one
 * PIPELINE_NO_NODE: it has no ops and runs its representative's), and
 * every rank must fold into a rank of its own stage.  Errors are the
 * workload's: SIM_ERROR_INVALID (not a pipelined workload) or
 * SIM_ERROR_LIMIT (too many computations).  Caller owns the result. */
PipelineGroups *pipeline_groups_new(const SimWorkload *w, GError **error);
void pipeline_groups_free(PipelineGroups *g);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PipelineGroups, pipeline_groups_free)

G_END_DECLS

#endif
