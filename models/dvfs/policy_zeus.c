/* models/dvfs/policy_zeus.c -- js.policy.zeus{eta, step_w} on a pipelined
 * workload: the Zeus baseline (models/dvfs/zeus.h), run through
 * perseus_run: the power limit minimising eta * energy + (1 - eta) *
 * MAXPOWER * time, tried in step_w steps.
 */
#include "models/dvfs/policy-private.h"

#include <stddef.h>

static const char *const keys[] = {"name", "eta", "step_w", NULL};
/* By default energy and time weigh alike and limits are tried 5 W apart. */
static const DvfsArg args[] = {
  {"eta", DVFS_ARG_NUM, offsetof(DvfsPolicy, eta), 0.5, 0, 1, NULL,
   " (the weight of energy)"},
  {"step_w", DVFS_ARG_NUM, offsetof(DvfsPolicy, step_w), 5, 0.1, 1000, NULL,
   " W"},
  {0}};

static char *label(const DvfsPolicy *p)
{
  return g_strdup_printf("zeus(eta=%g,step=%gW)", p->eta, p->step_w);
}

const DvfsPolicyClass dvfs_class_zeus = {
  .name = "zeus",
  .keys = keys,
  .args = args,
  .flags = DVFS_CLASS_PIPELINE,
  .label = label,
  .check = dvfs_check_standard,
  .run = perseus_run,
};
