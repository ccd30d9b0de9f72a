/* traces/pipeline.h -- computation-level pipeline workloads from measured
 * stage profiles (DESIGN section 7, js.pipeline).
 *
 * One kernel op per forward or backward computation of every stage and
 * microbatch, priced from the profile through a price table the workload
 * carries (models/table.h); point-to-point transfers between stages; dp
 * data-parallel pipelines that synchronise at the end of every iteration.
 * See traces/pipeline.c for the layout, the streams and the limits.
 */
#ifndef TRACES_PIPELINE_H
#define TRACES_PIPELINE_H

#include <glib.h>
#include "sim/workload.h"
#include "traces/profile.h"
#include "models/schedule.h"

G_BEGIN_DECLS

#define PIPELINE_MAX_MICROBATCHES 65535u
#define PIPELINE_MAX_RANKS (1u << 20)

typedef struct {
  guint microbatches;        /* per pipeline and iteration, >= 1 */
  PipelineSchedule schedule;
  guint stages;              /* 0 = every stage of the profile */
  guint dp;                  /* data-parallel pipelines, >= 1 */
  double activation_bytes;   /* per transfer; 0 = free (1 ns) */
  double grad_bytes;         /* per-stage DP all-reduce; 0 = free (1 ns) */
} PipelineConfig;

/* Defaults: 1f1b, every stage, 1 pipeline, free transfers; microbatches
 * must still be set (0 is refused). */
void pipeline_config_init(PipelineConfig *cfg);

/* The schedules of profile pipelines (PipelineSchedule, models/schedule.h):
 * "1f1b" / "gpipe"; FALSE with PIPELINE_ERROR_INVALID naming the allowed
 * values for any other name. */
gboolean pipeline_schedule_from_name(const char *name, PipelineSchedule *out,
                                     GError **error);
const char *pipeline_schedule_name(PipelineSchedule s);

/* Builds the workload of cfg from Perseus-form profile p (borrowed): stage
 * s uses the profile's (s, "forward") and (s, "backward") ops.  Errors name
 * the field or the missing stage/instruction.  Caller owns the result. */
SimWorkload *pipeline_from_profile(const Profile *p, const PipelineConfig *cfg,
                                   GError **error);

/* The computations of a pipelined workload (a computation-level one from
 * pipeline_from_profile, or a kernel-level one from gpt_generate): every
 * kernel op mapped to its (stage, microbatch, forward/backward).  Same as
 * pipeline_groups_new (models/schedule.h), where it lives so that
 * policies may use it.  A folded workload (w->fold_rep) gives the groups
 * of its unfolded twin: rank r's entries index the ops of its
 * representative, which r runs as its own.  Caller owns the result. */
PipelineGroups *pipeline_computations(const SimWorkload *w, GError **error);

#define PIPELINE_ERROR (pipeline_error_quark())
GQuark pipeline_error_quark(void);
typedef enum {
  PIPELINE_ERROR_INVALID,   /* bad configuration */
  PIPELINE_ERROR_PROFILE    /* the profile lacks what the pipeline needs */
} PipelineError;

G_END_DECLS

#endif
