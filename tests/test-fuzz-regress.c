/* tests/test-fuzz-regress.c -- replays the fuzzers' findings and seeds.
 *
 * Every file in tests/fuzz/regress/<target>/ (an input that once crashed,
 * leaked or broke a check, kept after its fix) and in tests/fuzz/corpus/
 * <target>/ (the seed corpus) runs through the same entry point as the
 * libFuzzer target tests/fuzz/fuzz-<target>.c -- the target files are
 * included here with FUZZ_NO_MAIN, so the decoding of the input and every
 * check are shared, not copied.  A case passes when the input ends in
 * success or a clean GError (the module's domain, a message naming the
 * file) and every invariant the target checks holds; a violated check
 * aborts with its reason on stderr.  Built with the normal compiler, this
 * test guards the fixes in every `make test`; under `make asan` (or
 * `make fuzz-regress`, the clang/libFuzzer build) the sanitizers also
 * check for the memory errors and leaks the fuzzers found.
 */
#include "tests/testutil.h"

#define FUZZ_NO_MAIN
#include "tests/fuzz/fuzz-kineto.c"
#include "tests/fuzz/fuzz-nsys.c"
#include "tests/fuzz/fuzz-profile.c"
#include "tests/fuzz/fuzz-native.c"
#include "tests/fuzz/fuzz-lua-args.c"
#include "tests/fuzz/fuzz-chakra.c"
#include "tests/fuzz/fuzz-sched.c"
#include "tests/fuzz/fuzz-h5raw.c"

typedef int (*FuzzOne)(const guint8 *data, size_t size);

static const struct {
  const char *name;
  FuzzOne one;
} targets[] = {
  {"kineto", fuzz_kineto_one},   {"nsys", fuzz_nsys_one},
  {"profile", fuzz_profile_one}, {"native", fuzz_native_one},
  {"lua-args", fuzz_lua_args_one}, {"chakra", fuzz_chakra_one},
  {"sched", fuzz_sched_one},
  {"h5raw", fuzz_h5raw_one},
};

typedef struct {
  FuzzOne one;
  char *path;
} Case;

static void run_case(gconstpointer data)
{
  const Case *c = data;
  g_autofree char *bytes = NULL;
  gsize len = 0;
  GError *error = NULL;
  g_file_get_contents(c->path, &bytes, &len, &error);
  g_assert_no_error(error);
  g_test_message("replaying %s (%" G_GSIZE_FORMAT " bytes)", c->path, len);
  g_assert_cmpint(c->one((const guint8 *)bytes, len), ==, 0);
}

static gint cmp_name(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Adds a case per file of dir (sorted, so the order is stable); returns
 * how many. */
static guint add_dir(const char *kind, guint t, const char *dir,
                     GPtrArray *keep)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  if (d == NULL)
    return 0;
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
  const char *n;
  while ((n = g_dir_read_name(d)) != NULL)
    if (n[0] != '.')
      g_ptr_array_add(names, g_strdup(n));
  g_dir_close(d);
  g_ptr_array_sort(names, cmp_name);
  for (guint i = 0; i < names->len; i++) {
    const char *name = g_ptr_array_index(names, i);
    Case *c = g_new0(Case, 1);
    c->one = targets[t].one;
    c->path = g_build_filename(dir, name, NULL);
    g_ptr_array_add(keep, c);
    g_autofree char *test = g_strdup_printf("/fuzz-%s/%s/%s", kind,
                                            targets[t].name, name);
    g_test_add_data_func(test, c, run_case);
  }
  return names->len;
}

/* Every target has a seed corpus (the fuzzers start from it, and the
 * replay above is only as good as it). */
static void test_corpora_present(void)
{
  for (guint t = 0; t < G_N_ELEMENTS(targets); t++) {
    g_autofree char *dir = g_build_filename("tests/fuzz/corpus",
                                            targets[t].name, NULL);
    GDir *d = g_dir_open(dir, 0, NULL);
    g_assert_nonnull(d);
    guint n = 0;
    while (g_dir_read_name(d) != NULL)
      n++;
    g_dir_close(d);
    g_assert_cmpuint(n, >, 0);
  }
}

static void free_case(gpointer p)
{
  Case *c = p;
  g_free(c->path);
  g_free(c);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_autoptr(GPtrArray) keep = g_ptr_array_new_with_free_func(free_case);
  g_test_add_func("/fuzz-regress/corpora-present", test_corpora_present);
  for (guint t = 0; t < G_N_ELEMENTS(targets); t++) {
    g_autofree char *r = g_build_filename("tests/fuzz/regress",
                                          targets[t].name, NULL);
    g_autofree char *c = g_build_filename("tests/fuzz/corpus",
                                          targets[t].name, NULL);
    add_dir("regress", t, r, keep);
    add_dir("corpus", t, c, keep);
  }
  int rc = g_test_run();
  fuzz_remove_dir();
  return rc;
}
