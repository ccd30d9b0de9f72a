/* models/dvfs/policy.c -- the registry of policy classes, policy values
 * (defaults, labels, parameter checks) and the checks the classes share.
 * Each class lives in models/dvfs/policy_NAME.c; the planned ones use the
 * planner's machinery (models/dvfs/planner-private.h).
 *
 * To add a policy: write models/dvfs/policy_NAME.c defining
 * `const DvfsPolicyClass dvfs_class_NAME` and add X(NAME) to
 * DVFS_POLICY_CLASSES below.  Its kind is its place in the list.
 */
#include "models/dvfs/policy-private.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK(dvfs-error-quark, dvfs_error)

/* The registry, in DvfsKind order (the built-in kinds first). */
#define DVFS_POLICY_CLASSES(X)                                              \
  X(max) X(fixed) X(powercap) X(iteration) X(pass) X(kernel) X(custom)      \
  X(perseus) X(envpipe) X(zeus) X(plan)

#define DECLARE(n) extern const DvfsPolicyClass dvfs_class_##n;
DVFS_POLICY_CLASSES(DECLARE)
#undef DECLARE
#define ENTRY(n) &dvfs_class_##n,
static const DvfsPolicyClass *const classes[] = {DVFS_POLICY_CLASSES(ENTRY)};
#undef ENTRY
G_STATIC_ASSERT(G_N_ELEMENTS(classes) >= DVFS_KIND_COUNT);

/* A kind is its class's place in the list, so each built-in kind must
 * name its own class's place: a class moved in the list, or a kind added
 * to DvfsKind in another place than its class, stops the build here. */
#define PLACE(n) DVFS_PLACE_##n,
enum { DVFS_POLICY_CLASSES(PLACE) };
#undef PLACE
#define SAME_PLACE(n, kind) G_STATIC_ASSERT((int)DVFS_PLACE_##n == (int)kind)
SAME_PLACE(max, DVFS_MAX);
SAME_PLACE(fixed, DVFS_FIXED);
SAME_PLACE(powercap, DVFS_POWERCAP);
SAME_PLACE(iteration, DVFS_ITERATION);
SAME_PLACE(pass, DVFS_PASS);
SAME_PLACE(kernel, DVFS_KERNEL);
SAME_PLACE(custom, DVFS_CUSTOM);
SAME_PLACE(perseus, DVFS_PERSEUS);
SAME_PLACE(envpipe, DVFS_ENVPIPE);
SAME_PLACE(zeus, DVFS_ZEUS);
SAME_PLACE(plan, DVFS_PLAN);
#undef SAME_PLACE

const DvfsPolicyClass *dvfs_policy_class(DvfsKind k)
{
  return (guint)k < G_N_ELEMENTS(classes) ? classes[k] : NULL;
}

const DvfsPolicyClass *dvfs_policy_class_by_name(const char *name)
{
  if (strcmp(name, "auto") == 0)
    return classes[DVFS_MAX];
  for (gsize i = 0; i < G_N_ELEMENTS(classes); i++)
    if (strcmp(classes[i]->name, name) == 0)
      return classes[i];
  return NULL;
}

guint dvfs_policy_n_classes(void)
{
  return G_N_ELEMENTS(classes);
}

const char *dvfs_kind_name(DvfsKind k)
{
  const DvfsPolicyClass *kl = dvfs_policy_class(k);
  return kl != NULL ? kl->name : "?";
}

const char *dvfs_granularity_name(DvfsGranularity g)
{
  return g == DVFS_GRANULARITY_OP ? "op" : "name";
}

void dvfs_arg_set(const DvfsArg *a, DvfsPolicy *p, double v)
{
  char *f = (char *)p + a->offset;
  switch (a->type) {
  case DVFS_ARG_NUM:
    *(double *)(void *)f = v;
    break;
  case DVFS_ARG_UINT:
    *(guint *)(void *)f = (guint)v;
    break;
  case DVFS_ARG_BOOL:
    *(gboolean *)(void *)f = v != 0;
    break;
  case DVFS_ARG_CHOICE:
    *(int *)(void *)f = (int)v;
    break;
  }
}

double dvfs_arg_get(const DvfsArg *a, const DvfsPolicy *p)
{
  const char *f = (const char *)p + a->offset;
  switch (a->type) {
  case DVFS_ARG_NUM:
    return *(const double *)(const void *)f;
  case DVFS_ARG_UINT:
    return *(const guint *)(const void *)f;
  case DVFS_ARG_BOOL:
    return *(const gboolean *)(const void *)f;
  case DVFS_ARG_CHOICE:
    return *(const int *)(const void *)f;
  }
  g_assert_not_reached();
}

const DvfsArg *dvfs_class_arg(const DvfsPolicyClass *kl, const char *name)
{
  for (const DvfsArg *a = kl->args; a->name != NULL; a++)
    if (strcmp(a->name, name) == 0)
      return a;
  return NULL;
}

void dvfs_arg_defaults(const DvfsArg *a, DvfsPolicy *p)
{
  for (; a->name != NULL; a++)
    dvfs_arg_set(a, p, a->def);
}

void dvfs_policy_init(DvfsPolicy *p, DvfsKind kind)
{
  g_return_if_fail(p != NULL);
  *p = (DvfsPolicy){0};
  p->kind = kind;
  p->granularity = DVFS_GRANULARITY_NAME;
  p->switch_latency_ms = -1.0;
  p->min_segment_ms = -1.0;
  /* Every kind carries the pipeline classes' fields (js.pipeline_run
   * reads them all, whichever kind runs): their defaults are the
   * perseus and zeus classes' own, from their tables. */
  dvfs_arg_defaults(classes[DVFS_PERSEUS]->args, p);
  dvfs_arg_defaults(classes[DVFS_ZEUS]->args, p);
}

static guint flags_of(const DvfsPolicy *p)
{
  const DvfsPolicyClass *kl = dvfs_policy_class(p->kind);
  return kl != NULL ? kl->flags : 0;
}

gboolean dvfs_policy_is_planned(const DvfsPolicy *p)
{
  return (flags_of(p) & DVFS_CLASS_PLANNED) != 0;
}

gboolean dvfs_policy_is_pipeline(const DvfsPolicy *p)
{
  return (flags_of(p) & DVFS_CLASS_PIPELINE) != 0;
}

char *dvfs_policy_label(const DvfsPolicy *p, const GpuSpec *g)
{
  const DvfsPolicyClass *kl = dvfs_policy_class(p->kind);
  if (kl == NULL)
    return g_strdup("?");
  if (kl->label == NULL)
    return g_strdup(kl->name);
  /* The label names the clocks that run, not the ones asked for. */
  DvfsPolicy shown = *p;
  if (g != NULL && shown.sm_mhz != 0)
    shown.sm_mhz = gpu_snap_sm(g, shown.sm_mhz);
  if (g != NULL && shown.mem_mhz != 0)
    shown.mem_mhz = gpu_snap_mem(g, shown.mem_mhz);
  return kl->label(&shown);
}

/* ---- checks ---------------------------------------------------------------- */

gboolean dvfs_check_sm(const GpuSpec *g, const char *what, guint v,
                       GError **error)
{
  if (v == 0 || (v >= g->sm_min_mhz.v && v <= g->sm_max_mhz.v))
    return TRUE;
  g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
              "%s = %u MHz is outside %s's SM clock range %.0f-%.0f MHz",
              what, v, g->name, g->sm_min_mhz.v, g->sm_max_mhz.v);
  return FALSE;
}

gboolean dvfs_check_mem(const GpuSpec *g, const char *what, guint v,
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

/* The value of argument a in p against its range; TRUE for a boolean. */
static gboolean check_arg(const DvfsArg *a, const DvfsPolicy *p,
                          GError **error)
{
  double v = dvfs_arg_get(a, p);
  const char *note = a->note != NULL ? a->note : "";
  if (a->type == DVFS_ARG_BOOL)
    return TRUE;
  if (a->type == DVFS_ARG_CHOICE) {
    if (v >= 0 && v < g_strv_length((char **)a->choices))
      return TRUE;
    g_autofree char *names = g_strjoinv(", ", (char **)a->choices);
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "%s = %d is none of %s (an index from 0)%s", a->name, (int)v,
                names, note);
    return FALSE;
  }
  if (v == a->def || (v >= a->lo && v <= a->hi))
    return TRUE;
  if (a->type == DVFS_ARG_UINT)
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "%s = %u must be an integer in [%.0f, %.0f]%s", a->name,
                (guint)v, a->lo, a->hi, note);
  else
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "%s = %g must be in [%g, %g]%s", a->name, v, a->lo, a->hi,
                note);
  return FALSE;
}

gboolean dvfs_check_args(const DvfsPolicyClass *kl, const DvfsPolicy *p,
                         GError **error)
{
  for (const DvfsArg *a = kl->args; a->name != NULL; a++)
    if (!check_arg(a, p, error))
      return FALSE;
  return TRUE;
}

gboolean dvfs_check_slowdown(const DvfsPolicy *p, GError **error)
{
  /* Every kind's budget, argument or not; a default of 0 exempts no
   * value outside [0, 10]. */
  static const DvfsArg slowdown = DVFS_ARG_SLOWDOWN(0);
  return check_arg(&slowdown, p, error);
}

gboolean dvfs_check_latency(const DvfsPolicy *p, GError **error)
{
  if ((isfinite(p->switch_latency_ms) && p->switch_latency_ms <= 1e6) &&
      (isfinite(p->min_segment_ms) && p->min_segment_ms <= 1e6))
    return TRUE;
  g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
              "switch_latency_ms = %g and min_segment_ms = %g must be "
              "finite and <= 1e6 (< 0: the run's latency)",
              p->switch_latency_ms, p->min_segment_ms);
  return FALSE;
}

gboolean dvfs_check_clock_lists(const DvfsPolicy *p, const GpuSpec *g,
                                GError **error)
{
  for (guint i = 0; i < p->n_sm_clocks; i++) {
    g_autofree char *what = g_strdup_printf("sm_clocks[%u]", i + 1);
    if (p->sm_clocks[i] == 0) {
      g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                  "%s = 0: give clocks in MHz", what);
      return FALSE;
    }
    if (!dvfs_check_sm(g, what, p->sm_clocks[i], error))
      return FALSE;
  }
  for (guint i = 0; i < p->n_mem_clocks; i++) {
    g_autofree char *what = g_strdup_printf("mem_clocks[%u]", i + 1);
    if (p->mem_clocks[i] == 0) {
      g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                  "%s = 0: give clocks in MHz", what);
      return FALSE;
    }
    if (!dvfs_check_mem(g, what, p->mem_clocks[i], error))
      return FALSE;
  }
  return TRUE;
}

gboolean dvfs_check_common(const DvfsPolicy *p, const Cluster *c,
                             gboolean (*own)(const DvfsPolicy *p,
                                             GError **error),
                             GError **error)
{
  return dvfs_check_slowdown(p, error) && dvfs_check_latency(p, error) &&
         (own == NULL || own(p, error)) &&
         dvfs_check_clock_lists(p, c->gpu, error);
}

gboolean dvfs_check_standard(const DvfsPolicy *p, const Cluster *c,
                             GError **error)
{
  return dvfs_check_common(p, c, NULL, error);
}

gboolean dvfs_policy_check(const DvfsPolicy *p, const Cluster *c,
                           GError **error)
{
  const DvfsPolicyClass *kl = dvfs_policy_class(p->kind);
  if (kl == NULL) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "unknown policy kind %d", (int)p->kind);
    return FALSE;
  }
  /* The class's own check first: where a value breaks both, its message
   * (against the GPU, say) says more than the table's range. */
  return (kl->check == NULL || kl->check(p, c, error)) &&
         dvfs_check_args(kl, p, error);
}

/* ---- plans ----------------------------------------------------------------- */

DvfsPlanResult *dvfs_uniform_result(const SimWorkload *w, SimClocks clk)
{
  DvfsPlanResult *r = g_new0(DvfsPlanResult, 1);
  r->plan = sim_plan_new_uniform(w->n_ranks, clk);
  r->power_limit_w = -1;
  return r;
}

DvfsPlanResult *dvfs_policy_plan(const DvfsPolicy *p, const DvfsContext *x,
                                 GError **error)
{
  if (!dvfs_policy_check(p, x->run, error))
    return NULL;
  const DvfsPolicyClass *kl = dvfs_policy_class(p->kind);
  if (kl->plan == NULL) {
    g_set_error(error, DVFS_ERROR, DVFS_ERROR_INVALID,
                "policy '%s' runs its own engine (it has no plan to replay)",
                dvfs_kind_name(p->kind));
    return NULL;
  }
  return kl->plan(p, x, error);
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
  DvfsContext x = {c, w, NULL, NULL, 1, NULL, NULL, 0};
  const DvfsPolicyClass *kl = dvfs_policy_class(p->kind);
  g_autoptr(DvfsPlanResult) r = kl->plan(p, &x, error);
  return r != NULL ? g_steal_pointer(&r->plan) : NULL;
}
