/* cli/policy_spec.c -- NAME[:KEY=VALUE,...] into a DvfsPolicy, generic
 * over the policy registry (cli/policy_spec.h).  The registry's argument
 * table gives each key's type, default and range, so a policy added to it
 * is accepted here with no change; the few rules no table can say are
 * those of lua/policy.c's hooks, repeated in spec_rules. */
#include "cli/policy_spec.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <string.h>

G_DEFINE_QUARK(cli-policy-error-quark, cli_policy_error)

G_GNUC_PRINTF(2, 3)
static gboolean spec_fail(GError **error, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error_literal(error, CLI_POLICY_ERROR, 0, msg);
  return FALSE;
}

/* The class's keys, for messages ("name" left out). */
static char *keys_text(const DvfsPolicyClass *kl)
{
  GString *s = g_string_new(NULL);
  for (const char *const *k = kl->keys + 1; *k != NULL; k++)
    g_string_append_printf(s, "%s%s", s->len ? ", " : "", *k);
  return g_string_free(s, s->len == 0);
}

static gboolean parse_double(const char *v, double *out)
{
  char *end = NULL;
  errno = 0;
  *out = g_ascii_strtod(v, &end);
  return errno == 0 && end != v && *end == '\0' && isfinite(*out);
}

/* Sets argument a of p from the text v. */
static gboolean set_arg(const DvfsPolicyClass *kl, const DvfsArg *a,
                        const char *v, DvfsPolicy *p, GError **error)
{
  double x = 0;
  switch (a->type) {
  case DVFS_ARG_NUM:
  case DVFS_ARG_UINT:
    if (!parse_double(v, &x) || x < a->lo || x > a->hi ||
        (a->type == DVFS_ARG_UINT && x != floor(x)))
      return spec_fail(error, "%s: '%s' must be %s in [%g, %g] (got '%s')",
                       kl->name, a->name,
                       a->type == DVFS_ARG_UINT ? "an integer" : "a number",
                       a->lo, a->hi, v);
    dvfs_arg_set(a, p, x);
    return TRUE;
  case DVFS_ARG_BOOL:
    if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
      return spec_fail(error, "%s: '%s' must be true or false (got '%s')",
                       kl->name, a->name, v);
    dvfs_arg_set(a, p, strcmp(v, "true") == 0);
    return TRUE;
  case DVFS_ARG_CHOICE:
    for (int i = 0; a->choices[i] != NULL; i++)
      if (strcmp(v, a->choices[i]) == 0) {
        dvfs_arg_set(a, p, i);
        return TRUE;
      }
    g_autofree char *all = g_strjoinv(", ", (char **)a->choices);
    return spec_fail(error, "%s: '%s' must be one of %s (got '%s')",
                     kl->name, a->name, all, v);
  }
  g_assert_not_reached();
}

/* One KEY=VALUE item. */
static gboolean set_item(const DvfsPolicyClass *kl, const char *item,
                         DvfsPolicy *p, GError **error)
{
  const char *eq = strchr(item, '=');
  g_autofree char *key = eq ? g_strndup(item, (gsize)(eq - item)) : NULL;
  const DvfsArg *a = key != NULL ? dvfs_class_arg(kl, key) : NULL;
  if (a != NULL)
    return set_arg(kl, a, eq + 1, p, error);
  g_autofree char *keys = keys_text(kl);
  if (keys == NULL)
    return spec_fail(error, "%s takes no arguments (got '%s')", kl->name,
                     item);
  return spec_fail(error, "%s: '%s' is not KEY=VALUE with KEY one of %s",
                   kl->name, item, keys);
}

/* fixed:SM[:MEM], the form before the registry's. */
static gboolean fixed_clocks(const char *args, DvfsPolicy *p)
{
  g_auto(GStrv) parts = g_strsplit(args, ":", -1);
  guint n = g_strv_length(parts);
  double sm = 0, mem = 0;
  if (n < 1 || n > 2 || !parse_double(parts[0], &sm) ||
      (n == 2 && !parse_double(parts[1], &mem)))
    return FALSE;
  if (sm < 1 || sm > 65535 || sm != floor(sm) || mem < 0 || mem > 65535 ||
      mem != floor(mem) || (n == 2 && mem < 1))
    return FALSE;
  p->sm_mhz = (guint)sm;
  p->mem_mhz = (guint)mem;
  return TRUE;
}

/* What lua/policy.c's hooks check besides the argument table. */
static gboolean spec_rules(const DvfsPolicyClass *kl, DvfsPolicy *p,
                           GError **error)
{
  if (p->kind == DVFS_FIXED && p->sm_mhz == 0 && p->mem_mhz == 0)
    return spec_fail(error, "fixed: give sm and/or mem (MHz): fixed:1200, "
                            "fixed:sm=1200,mem=1593");
  if (p->kind == DVFS_POWERCAP) {
    if ((p->watts > 0) == (p->slowdown >= 0))
      return spec_fail(error, "powercap: give either watts (a power limit) "
                              "or slowdown (search the lowest-energy limit "
                              "within that slowdown)");
    p->slowdown = MAX(p->slowdown, 0.0);
  }
  if (p->straggler_aware && p->kernel_within)
    return spec_fail(error, "%s: kernel=true cannot be combined with "
                            "straggler_aware=true", kl->name);
  return TRUE;
}

gboolean cli_policy_parse(const char *spec, DvfsPolicy *p, SchedPlan **plan,
                          GError **error)
{
  g_return_val_if_fail(spec != NULL && p != NULL && plan != NULL, FALSE);
  const char *colon = strchr(spec, ':');
  g_autofree char *name = colon ? g_strndup(spec, (gsize)(colon - spec))
                                : g_strdup(spec);
  const char *args = colon ? colon + 1 : NULL;
  const DvfsPolicyClass *kl = dvfs_policy_class_by_name(name);
  if (kl == NULL) {
    GString *all = g_string_new(NULL);
    for (guint k = 0; k < dvfs_policy_n_classes(); k++)
      g_string_append_printf(all, "%s, ", dvfs_policy_class((DvfsKind)k)->name);
    g_string_append(all, "auto");
    spec_fail(error, "unknown policy '%s' (one of %s)", name, all->str);
    g_string_free(all, TRUE);
    return FALSE;
  }
  DvfsKind kind = DVFS_MAX;
  for (guint k = 0; k < dvfs_policy_n_classes(); k++)
    if (dvfs_policy_class((DvfsKind)k) == kl)
      kind = (DvfsKind)k;
  dvfs_policy_init(p, kind);
  /* The defaults of the argument table (what an absent Lua key gives). */
  dvfs_arg_defaults(kl->args, p);
  if (kind == DVFS_CUSTOM)
    return spec_fail(error, "custom needs a Lua function: run js.simulate{ "
                            "policy = function(k) ... end, timeline = ... } "
                            "from a script");
  if (kind == DVFS_PLAN) {
    const char *file = args;
    if (file != NULL && g_str_has_prefix(file, "plan="))
      file += strlen("plan=");
    if (file == NULL || *file == '\0')
      return spec_fail(error, "plan: give the Perseus schedule file: "
                              "plan:N.sched.json");
    *plan = sched_plan_load(file, error);
    if (*plan == NULL)
      return FALSE;
    p->plan_mhz = (*plan)->mhz;
    p->plan_stages = (*plan)->n_stages;
    p->plan_microbatches = (*plan)->n_microbatches;
    return TRUE;
  }
  if (args != NULL && kind == DVFS_FIXED && strchr(args, '=') == NULL) {
    if (!fixed_clocks(args, p))
      return spec_fail(error, "fixed: '%s' is not SM or SM:MEM (integer "
                              "MHz, 1..65535)", args);
    return TRUE;
  }
  if (args != NULL) {
    g_auto(GStrv) items = g_strsplit(args, ",", -1);
    for (guint i = 0; items[i] != NULL; i++)
      if (!set_item(kl, items[i], p, error))
        return FALSE;
  }
  return spec_rules(kl, p, error);
}
