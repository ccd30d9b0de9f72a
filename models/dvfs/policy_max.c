/* models/dvfs/policy_max.c -- js.policy.max (alias auto): the GPUs' own
 * clocks everywhere, the baseline every other policy is measured against.
 */
#include "models/dvfs/policy-private.h"

static const char *const keys[] = {"name", NULL};
static const DvfsArg args[] = {{0}};

static DvfsPlanResult *plan(const DvfsPolicy *p, const DvfsContext *x,
                            GError **error)
{
  (void)p;
  (void)error;
  return dvfs_uniform_result(x->w, (SimClocks){0, 0});
}

const DvfsPolicyClass dvfs_class_max = {
  .name = "max",
  .keys = keys,
  .args = args,
  .plan = plan,
};
