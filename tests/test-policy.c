/* tests/test-policy.c -- the registry of policy classes
 * (models/dvfs/policy.c): each built-in kind has the class of its stable
 * name, and every registered class is found again by its name.  The order
 * of the list against DvfsKind is checked when policy.c compiles; what
 * only a run can see is the name each class file gives its class.  The
 * classes' shapes: a plan or a run, and what a planned one gives the
 * planner.  Their argument tables: dvfs_policy_init agrees with them, and
 * dvfs_check_args refuses what they refuse, in the words the hand-written
 * checks used. */
#include "models/dvfs/policy.h"
#include "models/dvfs/planner-private.h"

#include <math.h>
#include <string.h>

/* The stable names, in DvfsKind order (models/dvfs/policy.h). */
static const char *const kind_names[DVFS_KIND_COUNT] = {
  "max", "fixed", "powercap", "iteration", "pass", "kernel", "custom",
  "perseus", "envpipe", "zeus", "plan"};

static void test_kinds(void)
{
  for (guint k = 0; k < DVFS_KIND_COUNT; k++) {
    const DvfsPolicyClass *kl = dvfs_policy_class((DvfsKind)k);
    g_assert_nonnull(kl);
    g_assert_cmpstr(kl->name, ==, kind_names[k]);
    g_assert_cmpstr(dvfs_kind_name((DvfsKind)k), ==, kind_names[k]);
    g_assert_true(dvfs_policy_class_by_name(kind_names[k]) == kl);
  }
}

static void test_names(void)
{
  guint n = dvfs_policy_n_classes();
  g_assert_cmpuint(n, >=, DVFS_KIND_COUNT);
  for (guint k = 0; k < n; k++) {
    const DvfsPolicyClass *kl = dvfs_policy_class((DvfsKind)k);
    g_assert_nonnull(kl);
    g_assert_true(dvfs_policy_class_by_name(kl->name) == kl);
  }
  g_assert_null(dvfs_policy_class((DvfsKind)n));
  g_assert_cmpstr(dvfs_kind_name((DvfsKind)n), ==, "?");
  /* "auto" is max's alias, and no class answers to an unknown name. */
  g_assert_true(dvfs_policy_class_by_name("auto") ==
                dvfs_policy_class(DVFS_MAX));
  g_assert_null(dvfs_policy_class_by_name("turbo"));
}

/* A class plans or runs, and a planned one gives the planner either a
 * search or a strategy: planner_plan reads one of the two. */
static void test_shapes(void)
{
  for (guint k = 0; k < dvfs_policy_n_classes(); k++) {
    const DvfsPolicyClass *kl = dvfs_policy_class((DvfsKind)k);
    gboolean planned = (kl->flags & DVFS_CLASS_PLANNED) != 0;
    gboolean pipeline = (kl->flags & DVFS_CLASS_PIPELINE) != 0;
    g_assert_true((kl->plan != NULL) != (kl->run != NULL));
    g_assert_true(pipeline == (kl->run != NULL));
    g_assert_true(planned == (kl->planner != NULL));
    if (planned) {
      g_assert_true(kl->plan == planner_plan);
      g_assert_true((kl->planner->search != NULL) !=
                    (kl->planner->strategy != NULL));
    }
  }
}

/* dvfs_policy_init gives every argument its table's default, or, where
 * that default is outside the range and only says "not given" to the
 * doors (powercap's slowdown), a value in the range. */
static void test_defaults(void)
{
  for (guint k = 0; k < dvfs_policy_n_classes(); k++) {
    const DvfsPolicyClass *kl = dvfs_policy_class((DvfsKind)k);
    DvfsPolicy p;
    dvfs_policy_init(&p, (DvfsKind)k);
    for (const DvfsArg *a = kl->args; a->name != NULL; a++) {
      double v = dvfs_arg_get(a, &p);
      gboolean in_range = v >= a->lo && v <= a->hi;
      gboolean def_out = a->def < a->lo || a->def > a->hi;
      g_assert_true(v == a->def ||
                    (a->type == DVFS_ARG_NUM && def_out && in_range));
    }
    GError *error = NULL;
    g_assert_true(dvfs_check_args(kl, &p, &error));
    g_assert_no_error(error);
  }
}

/* Sets argument `name` of kind k's default policy to v and checks it:
 * NULL when accepted, else the error's message (caller frees). */
static char *check_one(DvfsKind k, const char *name, double v)
{
  const DvfsPolicyClass *kl = dvfs_policy_class(k);
  DvfsPolicy p;
  dvfs_policy_init(&p, k);
  const DvfsArg *a = dvfs_class_arg(kl, name);
  g_assert_nonnull(a);
  dvfs_arg_set(a, &p, v);
  GError *error = NULL;
  if (dvfs_check_args(kl, &p, &error)) {
    g_assert_no_error(error);
    return NULL;
  }
  g_assert_error(error, DVFS_ERROR, DVFS_ERROR_INVALID);
  char *msg = g_strdup(error->message);
  g_error_free(error);
  return msg;
}

static void expect(DvfsKind k, const char *name, double v, const char *msg)
{
  g_autofree char *got = check_one(k, name, v);
  g_assert_cmpstr(got, ==, msg);
}

/* The ranges come from the tables; the messages are the ones Zeus's and
 * Perseus's own checks wrote before the tables were their source. */
static void test_ranges(void)
{
  expect(DVFS_ZEUS, "eta", 2,
         "eta = 2 must be in [0, 1] (the weight of energy)");
  expect(DVFS_ZEUS, "eta", NAN,
         "eta = nan must be in [0, 1] (the weight of energy)");
  expect(DVFS_ZEUS, "eta", 0, NULL);
  expect(DVFS_ZEUS, "eta", 1, NULL);
  expect(DVFS_ZEUS, "step_w", 0, "step_w = 0 must be in [0.1, 1000] W");
  expect(DVFS_ZEUS, "step_w", 1000, NULL);
  expect(DVFS_PERSEUS, "resolution", 0.5,
         "resolution = 0.5 must be in [0, 0.1] (relative to the fastest "
         "iteration time)");
  expect(DVFS_PERSEUS, "slowdown", 11,
         "slowdown = 11 must be in [0, 10] (a fraction: 0.01 = 1%)");
  expect(DVFS_PERSEUS, "lag", 2000000,
         "lag = 2000000 must be an integer in [0, 1000000] iterations");
  expect(DVFS_PERSEUS, "kernel", 1, NULL);
  /* A default outside the range stands for "not given". */
  expect(DVFS_KERNEL, "switch_latency_ms", -1, NULL);
  expect(DVFS_KERNEL, "switch_latency_ms", -2,
         "switch_latency_ms = -2 must be in [0, 1e+06] ms (-1: the run's "
         "latency)");
  expect(DVFS_POWERCAP, "watts", 0, NULL);
  expect(DVFS_POWERCAP, "watts", 0.5,
         "watts = 0.5 must be in [1, 100000] W");
  expect(DVFS_KERNEL, "granularity", DVFS_GRANULARITY_OP, NULL);
  expect(DVFS_KERNEL, "granularity", 2,
         "granularity = 2 is none of name, op (an index from 0)");
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/policy/registry/kinds", test_kinds);
  g_test_add_func("/policy/registry/names", test_names);
  g_test_add_func("/policy/registry/shapes", test_shapes);
  g_test_add_func("/policy/args/defaults", test_defaults);
  g_test_add_func("/policy/args/ranges", test_ranges);
  return g_test_run();
}
