/* tests/test-policy.c -- the registry of policy classes
 * (models/dvfs/policy.c): each built-in kind has the class of its stable
 * name, and every registered class is found again by its name.  The order
 * of the list against DvfsKind is checked when policy.c compiles; what
 * only a run can see is the name each class file gives its class. */
#include "models/dvfs/policy.h"

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

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/policy/registry/kinds", test_kinds);
  g_test_add_func("/policy/registry/names", test_names);
  return g_test_run();
}
