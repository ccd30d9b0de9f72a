/* models/dvfs/policy_zeus.c -- js.policy.zeus{eta, step_w} on a pipelined
 * workload: the Zeus baseline (models/dvfs/zeus.h), run through
 * perseus_run: the power limit minimising eta * energy + (1 - eta) *
 * MAXPOWER * time, tried in step_w steps.
 */
#include "models/dvfs/policy-private.h"

#include <stddef.h>

static const char *const keys[] = {"name", "eta", "step_w", NULL};
static const DvfsArg args[] = {
  {"eta", DVFS_ARG_NUM, offsetof(DvfsPolicy, eta), 0.5, 0, 1, NULL},
  {"step_w", DVFS_ARG_NUM, offsetof(DvfsPolicy, step_w), 5.0, 0.1, 1000,
   NULL},
  {NULL}};

static char *label(const DvfsPolicy *p)
{
  return g_strdup_printf("zeus(eta=%g,step=%gW)", p->eta, p->step_w);
}

static gboolean check_own(const DvfsPolicy *p, GError **error)
{
  if (!(p->eta >= 0.0 && p->eta <= 1.0)) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "eta = %g must be in [0, 1] (the weight of energy)", p->eta);
    return FALSE;
  }
  if (!(p->step_w >= 0.1 && p->step_w <= 1000.0)) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "step_w = %g must be in [0.1, 1000] W", p->step_w);
    return FALSE;
  }
  return TRUE;
}

static gboolean check(const DvfsPolicy *p, const Cluster *c, GError **error)
{
  return dvfs_check_common(p, c, check_own, error);
}

static PerseusRun *run(const DvfsPolicy *p, const DvfsContext *x,
                       GError **error)
{
  return dvfs_pipeline_run(p, PERSEUS_RUN_ZEUS, x, error);
}

const DvfsPolicyClass dvfs_class_zeus = {
  .name = "zeus",
  .keys = keys,
  .args = args,
  .flags = DVFS_CLASS_PIPELINE,
  .label = label,
  .check = check,
  .run = run,
};
