/* models/dvfs/policy-private.h -- what the policy classes
 * (models/dvfs/policy_NAME.c) share: the parameter checks every planned
 * and pipeline kind makes, the result of a uniform plan, and perseus_run,
 * the `run` of every pipeline kind.  Not a public header.
 */
#ifndef MODELS_DVFS_POLICY_PRIVATE_H
#define MODELS_DVFS_POLICY_PRIVATE_H

#include "models/dvfs/policy.h"
#include "models/dvfs/planner.h"
#include "models/dvfs/perseus.h"

#include <stddef.h>

G_BEGIN_DECLS

/* The slowdown budget as a class's argument (default `def`): a fraction
 * of the baseline's time in [0, 10]. */
#define DVFS_ARG_SLOWDOWN(def)                                             \
  {"slowdown", DVFS_ARG_NUM, offsetof(DvfsPolicy, slowdown), (def), 0, 10, \
   NULL, " (a fraction: 0.01 = 1%)"}

/* slowdown in [0, 10] (DVFS_ARG_SLOWDOWN). */
gboolean dvfs_check_slowdown(const DvfsPolicy *p, GError **error);
/* switch_latency_ms and min_segment_ms finite and <= 1e6. */
gboolean dvfs_check_latency(const DvfsPolicy *p, GError **error);
/* The candidate clock restriction (sm_clocks, mem_clocks) within the
 * GPU's ranges. */
gboolean dvfs_check_clock_lists(const DvfsPolicy *p, const GpuSpec *g,
                                GError **error);
/* The checks of every planned and pipeline kind: slowdown, latency, then
 * own(p) when not NULL, then the clock lists.  (dvfs_policy_check then
 * checks the class's arguments by its table.) */
gboolean dvfs_check_common(const DvfsPolicy *p, const Cluster *c,
                             gboolean (*own)(const DvfsPolicy *p,
                                             GError **error),
                             GError **error);
/* dvfs_check_common with no checks of the kind's own: the `check` of the
 * classes whose argument table says the rest. */
gboolean dvfs_check_standard(const DvfsPolicy *p, const Cluster *c,
                             GError **error);

/* A plan result holding the uniform plan `clk` on every rank of w (no
 * power limit, no report). */
DvfsPlanResult *dvfs_uniform_result(const SimWorkload *w, SimClocks clk);

G_END_DECLS

#endif
