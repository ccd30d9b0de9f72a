/* models/dvfs/policy_perseus.c -- js.policy.perseus{slowdown,
 * straggler_aware, lag, resolution, kernel} on a pipelined workload: the
 * cheapest point of the time-energy frontier within the slowdown
 * (models/dvfs/perseus.h), re-planned around stragglers when
 * straggler-aware, with kernel-level clocks inside each computation when
 * kernel = true.  Also the run every pipeline kind shares
 * (dvfs_pipeline_run: the policy handed to perseus_run).
 */
#include "models/dvfs/policy-private.h"

#include <stddef.h>

static const char *const keys[] = {"name", "slowdown", "straggler_aware",
                                   "lag", "resolution", "kernel", NULL};
static const DvfsArg args[] = {
  DVFS_ARG_SLOWDOWN(0),
  {"straggler_aware", DVFS_ARG_BOOL, offsetof(DvfsPolicy, straggler_aware),
   FALSE, 0, 1, NULL, NULL},
  {"lag", DVFS_ARG_UINT, offsetof(DvfsPolicy, lag), 0, 0, 1000000, NULL,
   " iterations"},
  {"resolution", DVFS_ARG_NUM, offsetof(DvfsPolicy, resolution),
   PERSEUS_RESOLUTION, 0, 0.1, NULL,
   " (relative to the fastest iteration time)"},
  /* kernel = true: kernel-level clocks inside each computation
   * (perseus_kernel_plan). */
  {"kernel", DVFS_ARG_BOOL, offsetof(DvfsPolicy, kernel_within), FALSE, 0, 1,
   NULL, NULL},
  {0}};

PerseusRun *dvfs_pipeline_run(const DvfsPolicy *p, PerseusRunKind kind,
                              const DvfsContext *x, GError **error)
{
  PerseusPolicy pol;
  perseus_policy_init(&pol, kind);
  pol.slowdown = p->slowdown;
  pol.straggler_aware = p->straggler_aware;
  pol.lag = p->lag;
  pol.eta = p->eta;
  pol.step_w = p->step_w;
  pol.frontier.resolution = p->resolution;
  pol.kernel = kind == PERSEUS_RUN_PERSEUS && p->kernel_within;
  /* js.policy.plan{ plan = P } (lua/policy.c). */
  pol.plan_mhz = p->plan_mhz;
  pol.plan_stages = p->plan_stages;
  pol.plan_microbatches = p->plan_microbatches;
  pol.observer = x->observer;
  pol.observer_data = x->observer_data;
  return perseus_run(&pol, x->run, x->w, x->catalogue, x->stragglers,
                     MAX(x->iterations, 1), error);
}

static char *label(const DvfsPolicy *p)
{
  GString *s = g_string_new("perseus(");
  g_string_append_printf(s, "s=%g", p->slowdown);
  if (p->straggler_aware)
    g_string_append(s, ",straggler-aware");
  if (p->lag > 0)
    g_string_append_printf(s, ",lag=%u", p->lag);
  if (p->kernel_within)
    g_string_append(s, ",kernel");
  g_string_append_c(s, ')');
  return g_string_free(s, FALSE);
}

static PerseusRun *run(const DvfsPolicy *p, const DvfsContext *x,
                       GError **error)
{
  return dvfs_pipeline_run(p, PERSEUS_RUN_PERSEUS, x, error);
}

const DvfsPolicyClass dvfs_class_perseus = {
  .name = "perseus",
  .keys = keys,
  .args = args,
  .flags = DVFS_CLASS_PIPELINE,
  .label = label,
  .check = dvfs_check_standard,
  .run = run,
};
