/* models/dvfs/policy_perseus.c -- js.policy.perseus{slowdown,
 * straggler_aware, lag, resolution, kernel} on a pipelined workload: the
 * cheapest point of the time-energy frontier within the slowdown
 * (models/dvfs/perseus.h), re-planned around stragglers when
 * straggler-aware, with kernel-level clocks inside each computation when
 * kernel = true.
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

const DvfsPolicyClass dvfs_class_perseus = {
  .name = "perseus",
  .keys = keys,
  .args = args,
  .flags = DVFS_CLASS_PIPELINE,
  .label = label,
  .check = dvfs_check_standard,
  .run = perseus_run,
};
