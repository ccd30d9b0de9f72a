/* models/dvfs/policy_fixed.c -- js.policy.fixed{sm, mem}: locked clocks
 * everywhere (0 = auto for either), snapped to the GPU's steps.
 */
#include "models/dvfs/policy-private.h"

#include <stddef.h>

static const char *const keys[] = {"name", "sm", "mem", NULL};
static const DvfsArg args[] = {
  {"sm", DVFS_ARG_UINT, offsetof(DvfsPolicy, sm_mhz), 0, 0, 65535, NULL,
   " MHz"},
  {"mem", DVFS_ARG_UINT, offsetof(DvfsPolicy, mem_mhz), 0, 0, 65535, NULL,
   " MHz"},
  {0}};

static char *label(const DvfsPolicy *p)
{
  if (p->mem_mhz == 0)
    return g_strdup_printf("fixed(sm=%u)", p->sm_mhz);
  if (p->sm_mhz == 0)
    return g_strdup_printf("fixed(mem=%u)", p->mem_mhz);
  return g_strdup_printf("fixed(sm=%u,mem=%u)", p->sm_mhz, p->mem_mhz);
}

static gboolean check(const DvfsPolicy *p, const Cluster *c, GError **error)
{
  return dvfs_check_sm(c->gpu, "sm", p->sm_mhz, error) &&
         dvfs_check_mem(c->gpu, "mem", p->mem_mhz, error);
}

static DvfsPlanResult *plan(const DvfsPolicy *p, const DvfsContext *x,
                            GError **error)
{
  (void)error;
  const GpuSpec *g = x->run->gpu;
  SimClocks clk = {
    (guint16)(p->sm_mhz ? gpu_snap_sm(g, p->sm_mhz) : 0),
    (guint16)(p->mem_mhz ? gpu_snap_mem(g, p->mem_mhz) : 0)};
  return dvfs_uniform_result(x->w, clk);
}

const DvfsPolicyClass dvfs_class_fixed = {
  .name = "fixed",
  .keys = keys,
  .args = args,
  .label = label,
  .check = check,
  .plan = plan,
};
