/* models/dvfs/policy_plan.c -- js.policy.plan{plan} on a pipelined
 * workload: replays a given SM clock per computation (fr:plan(i), or a
 * Perseus sched.json), each snapped to the nearest candidate clock, through
 * perseus_run.  The binding reads `plan` (lua/policy.c) into plan_mhz.
 */
#include "models/dvfs/policy-private.h"

static const char *const keys[] = {"name", "plan", NULL};
static const DvfsArg args[] = {{0}};

static char *label(const DvfsPolicy *p)
{
  return g_strdup_printf("plan(%ux%u)", p->plan_stages, p->plan_microbatches);
}

const DvfsPolicyClass dvfs_class_plan = {
  .name = "plan",
  .keys = keys,
  .args = args,
  .flags = DVFS_CLASS_PIPELINE | DVFS_CLASS_TAKES_PLAN,
  .label = label,
  .check = dvfs_check_standard,
  .run = perseus_run,
};
