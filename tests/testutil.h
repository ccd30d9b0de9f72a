/* tests/testutil.h -- small helpers shared by the GTest binaries: data
 * paths, closeness, malloc's count, scratch directories.  Running Lua scripts is
 * tests/testlua.h; reading results tables back, tests/testresults.h;
 * building workloads by hand, tests/testwork.h. */
#ifndef TESTS_TESTUTIL_H
#define TESTS_TESTUTIL_H

#include <glib.h>
#include <glib/gstdio.h>
#include <malloc.h>

/* Path of a file under tests/data (tests run from the repository root). */
#define TEST_DATA(name) ("tests/data/" name)

/* Relative closeness: |a - b| <= tol * max(|a|, |b|, tiny). */
static inline gboolean test_close(double a, double b, double tol)
{
  double m = MAX(MAX(ABS(a), ABS(b)), 1e-300);
  return ABS(a - b) <= tol * m;
}

/* Bytes malloc hands out (in use + mmapped), or 0 when unknown (as under
 * AddressSanitizer, which replaces malloc): what the memory estimates are
 * checked against. */
static inline guint64 test_malloc_in_use(void)
{
  struct mallinfo2 mi = mallinfo2();
  return (guint64)mi.uordblks + (guint64)mi.hblkhd;
}

/* A fresh temporary directory (removed by the caller with test_rmdir). */
static inline char *test_tmpdir(void)
{
  GError *error = NULL;
  char *d = g_dir_make_tmp("joulesim-test-XXXXXX", &error);
  g_assert_no_error(error);
  return d;
}

static inline void test_rmdir(const char *dir)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  const char *n;
  if (d == NULL)
    return;
  while ((n = g_dir_read_name(d)) != NULL) {
    char *p = g_build_filename(dir, n, NULL);
    g_unlink(p);
    g_free(p);
  }
  g_dir_close(d);
  g_rmdir(dir);
}

#endif
