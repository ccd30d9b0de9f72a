/* models/dvfs/policy.c -- policy values: defaults, labels, parameter checks,
 * and the uniform plans (max/auto and locked clocks).  The planned policies
 * live in models/dvfs/planner.c. */
#include "models/dvfs/policy.h"

#include <math.h>

G_DEFINE_QUARK(dvfs-error-quark, dvfs_error)

static const char *const kind_names[DVFS_KIND_COUNT] = {
  [DVFS_MAX] = "max",           [DVFS_FIXED] = "fixed",
  [DVFS_POWERCAP] = "powercap", [DVFS_ITERATION] = "iteration",
  [DVFS_PASS] = "pass",         [DVFS_KERNEL] = "kernel",
  [DVFS_CUSTOM] = "custom",     [DVFS_PERSEUS] = "perseus",
  [DVFS_ENVPIPE] = "envpipe",   [DVFS_ZEUS] = "zeus",
  [DVFS_PLAN] = "plan",
};

const char *dvfs_kind_name(DvfsKind k)
{
  return (guint)k < DVFS_KIND_COUNT ? kind_names[k] : "?";
}

const char *dvfs_granularity_name(DvfsGranularity g)
{
  return g == DVFS_GRANULARITY_OP ? "op" : "name";
}

void dvfs_policy_init(DvfsPolicy *p, DvfsKind kind)
{
  g_return_if_fail(p != NULL);
  *p = (DvfsPolicy){0};
  p->kind = kind;
  p->granularity = DVFS_GRANULARITY_NAME;
  p->switch_latency_ms = -1.0;
  p->min_segment_ms = -1.0;
  /* The defaults of perseus_policy_init (models/dvfs/perseus.h). */
  p->eta = 0.5;
  p->step_w = 5.0;
  p->resolution = 1e-4;
}

gboolean dvfs_policy_is_planned(const DvfsPolicy *p)
{
  return p->kind >= DVFS_POWERCAP && p->kind <= DVFS_CUSTOM;
}

gboolean dvfs_policy_is_pipeline(const DvfsPolicy *p)
{
  return p->kind >= DVFS_PERSEUS && p->kind <= DVFS_PLAN;
}

/* "%g" without trailing noise for budgets like 0.01. */
static void append_num(GString *s, const char *key, double v)
{
  g_string_append_printf(s, ",%s=%g", key, v);
}

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
  case DVFS_POWERCAP:
    if (p->watts > 0)
      return g_strdup_printf("powercap(%gW)", p->watts);
    return g_strdup_printf("powercap(s=%g)", p->slowdown);
  case DVFS_ITERATION:
  case DVFS_PASS:
    if (p->kind == DVFS_PASS && p->switch_latency_ms >= 0)
      return g_strdup_printf("pass(s=%g,lat=%gms)", p->slowdown,
                             p->switch_latency_ms);
    return g_strdup_printf("%s(s=%g)", kind_names[p->kind], p->slowdown);
  case DVFS_KERNEL:
  case DVFS_CUSTOM: {
    GString *s = g_string_new(kind_names[p->kind]);
    g_string_append_printf(s, "(%s", dvfs_granularity_name(p->granularity));
    if (p->kind == DVFS_KERNEL)
      append_num(s, "s", p->slowdown);
    if (p->switch_latency_ms >= 0)
      g_string_append_printf(s, ",lat=%gms", p->switch_latency_ms);
    if (p->min_segment_ms >= 0)
      g_string_append_printf(s, ",seg=%gms", p->min_segment_ms);
    g_string_append_c(s, ')');
    return g_string_free(s, FALSE);
  }
  case DVFS_PERSEUS: {
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
  case DVFS_ENVPIPE:
    return g_strdup("envpipe");
  case DVFS_ZEUS:
    return g_strdup_printf("zeus(eta=%g,step=%gW)", p->eta, p->step_w);
  case DVFS_PLAN:
    return g_strdup_printf("plan(%ux%u)", p->plan_stages,
                           p->plan_microbatches);
  default:
    return g_strdup("?");
  }
}

static gboolean check_sm(const GpuSpec *g, const char *what, guint v,
                         GError **error)
{
  if (v == 0 || (v >= g->sm_min_mhz.v && v <= g->sm_max_mhz.v))
    return TRUE;
  g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
              "%s = %u MHz is outside %s's SM clock range %.0f-%.0f MHz",
              what, v, g->name, g->sm_min_mhz.v, g->sm_max_mhz.v);
  return FALSE;
}

static gboolean check_mem(const GpuSpec *g, const char *what, guint v,
                          GError **error)
{
  double lo = g->mem_mhz[0].v, hi = g->mem_mhz[g->n_mem_clocks - 1].v;
  if (v == 0 || (v >= lo && v <= hi))
    return TRUE;
  g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
              "%s = %u MHz is outside %s's memory clocks %.0f-%.0f MHz", what,
              v, g->name, lo, hi);
  return FALSE;
}

gboolean dvfs_policy_check(const DvfsPolicy *p, const Cluster *c,
                           GError **error)
{
  const GpuSpec *g = c->gpu;
  if ((guint)p->kind >= DVFS_KIND_COUNT) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "unknown policy kind %d", (int)p->kind);
    return FALSE;
  }
  if (p->kind == DVFS_FIXED)
    return check_sm(g, "sm", p->sm_mhz, error) &&
           check_mem(g, "mem", p->mem_mhz, error);
  if (p->kind == DVFS_MAX)
    return TRUE;
  if (!(p->slowdown >= 0.0 && p->slowdown <= 10.0)) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "slowdown = %g must be in [0, 10] (a fraction: 0.01 = 1%%)",
                p->slowdown);
    return FALSE;
  }
  if (p->kind == DVFS_POWERCAP && p->watts != 0.0 &&
      !(p->watts >= g->power_min_w.v && p->watts <= g->power_max_w.v)) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "watts = %g is outside %s's power limit range %g-%g W",
                p->watts, g->name, g->power_min_w.v, g->power_max_w.v);
    return FALSE;
  }
  if (!(isfinite(p->switch_latency_ms) && p->switch_latency_ms <= 1e6) ||
      !(isfinite(p->min_segment_ms) && p->min_segment_ms <= 1e6)) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "switch_latency_ms = %g and min_segment_ms = %g must be "
                "finite and <= 1e6 (< 0: the run's latency)",
                p->switch_latency_ms, p->min_segment_ms);
    return FALSE;
  }
  if (p->kind == DVFS_ZEUS && !(p->eta >= 0.0 && p->eta <= 1.0)) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "eta = %g must be in [0, 1] (the weight of energy)", p->eta);
    return FALSE;
  }
  if (p->kind == DVFS_ZEUS && !(p->step_w >= 0.1 && p->step_w <= 1000.0)) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "step_w = %g must be in [0.1, 1000] W", p->step_w);
    return FALSE;
  }
  if (p->kind == DVFS_PERSEUS &&
      !(p->resolution >= 0.0 && p->resolution <= 0.1)) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "resolution = %g must be in [0, 0.1] (relative to the "
                "fastest iteration time)", p->resolution);
    return FALSE;
  }
  if (p->kind == DVFS_CUSTOM && p->choose == NULL) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "a custom policy needs a chooser function");
    return FALSE;
  }
  for (guint i = 0; i < p->n_sm_clocks; i++) {
    g_autofree char *what = g_strdup_printf("sm_clocks[%u]", i + 1);
    if (p->sm_clocks[i] == 0) {
      g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                  "%s = 0: give clocks in MHz", what);
      return FALSE;
    }
    if (!check_sm(g, what, p->sm_clocks[i], error))
      return FALSE;
  }
  for (guint i = 0; i < p->n_mem_clocks; i++) {
    g_autofree char *what = g_strdup_printf("mem_clocks[%u]", i + 1);
    if (p->mem_clocks[i] == 0) {
      g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                  "%s = 0: give clocks in MHz", what);
      return FALSE;
    }
    if (!check_mem(g, what, p->mem_clocks[i], error))
      return FALSE;
  }
  return TRUE;
}

SimPlan *dvfs_plan(const DvfsPolicy *p, const Cluster *c,
                   const SimWorkload *w, GError **error)
{
  if (!dvfs_policy_check(p, c, error))
    return NULL;
  if (dvfs_policy_is_planned(p)) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "policy '%s' needs the planner (dvfs_planner_run)",
                dvfs_kind_name(p->kind));
    return NULL;
  }
  if (dvfs_policy_is_pipeline(p)) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "policy '%s' is a pipeline policy (perseus_run)",
                dvfs_kind_name(p->kind));
    return NULL;
  }
  SimClocks clk = {0, 0};
  if (p->kind == DVFS_FIXED) {
    clk.sm_mhz = (guint16)(p->sm_mhz ? gpu_snap_sm(c->gpu, p->sm_mhz) : 0);
    clk.mem_mhz = (guint16)(p->mem_mhz ? gpu_snap_mem(c->gpu, p->mem_mhz) : 0);
  }
  return sim_plan_new_uniform(w->n_ranks, clk);
}
