/* models/dvfs/policy_envpipe.c -- js.policy.envpipe on a pipelined
 * workload: the EnvPipe baseline (models/dvfs/envpipe.h), run through
 * perseus_run: the pipeline's outer envelope at the highest clock, the
 * inner computations slowed into their slack.
 */
#include "models/dvfs/policy-private.h"

static const char *const keys[] = {"name", NULL};
static const DvfsArg args[] = {{0}};

const DvfsPolicyClass dvfs_class_envpipe = {
  .name = "envpipe",
  .keys = keys,
  .args = args,
  .flags = DVFS_CLASS_PIPELINE,
  .check = dvfs_check_standard,
  .run = perseus_run,
};
