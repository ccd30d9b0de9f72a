/* models/dvfs/policy.c -- the fixed-clock policies (max/auto and locked
 * clocks).  Both are uniform plans: one clock pair for every op. */
#include "models/dvfs/policy.h"

G_DEFINE_QUARK(dvfs-error-quark, dvfs_error)

char *dvfs_policy_label(const DvfsPolicy *p)
{
  switch (p->kind) {
  case DVFS_MAX:
    return g_strdup("max");
  case DVFS_FIXED:
    if (p->mem_mhz == 0)
      return g_strdup_printf("fixed(sm=%u)", p->sm_mhz);
    if (p->sm_mhz == 0)
      return g_strdup_printf("fixed(mem=%u)", p->mem_mhz);
    return g_strdup_printf("fixed(sm=%u,mem=%u)", p->sm_mhz, p->mem_mhz);
  default:
    return g_strdup("?");
  }
}

gboolean dvfs_policy_check(const DvfsPolicy *p, const Cluster *c,
                           GError **error)
{
  const GpuSpec *g = c->gpu;
  if (p->kind != DVFS_FIXED)
    return TRUE;
  if (p->sm_mhz != 0 &&
      (p->sm_mhz < g->sm_min_mhz.v || p->sm_mhz > g->sm_max_mhz.v)) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "sm = %u MHz is outside %s's SM clock range %.0f-%.0f MHz",
                p->sm_mhz, g->name, g->sm_min_mhz.v, g->sm_max_mhz.v);
    return FALSE;
  }
  if (p->mem_mhz != 0) {
    double lo = g->mem_mhz[0].v, hi = g->mem_mhz[g->n_mem_clocks - 1].v;
    if (p->mem_mhz < lo || p->mem_mhz > hi) {
      g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                  "mem = %u MHz is outside %s's memory clocks %.0f-%.0f MHz",
                  p->mem_mhz, g->name, lo, hi);
      return FALSE;
    }
  }
  return TRUE;
}

SimPlan *dvfs_plan(const DvfsPolicy *p, const Cluster *c,
                   const SimWorkload *w, GError **error)
{
  if (!dvfs_policy_check(p, c, error))
    return NULL;
  SimClocks clk = {0, 0};
  if (p->kind == DVFS_FIXED) {
    clk.sm_mhz = (guint16)(p->sm_mhz ? gpu_snap_sm(c->gpu, p->sm_mhz) : 0);
    clk.mem_mhz = (guint16)(p->mem_mhz ? gpu_snap_mem(c->gpu, p->mem_mhz) : 0);
  }
  return sim_plan_new_uniform(w->n_ranks, clk);
}
