/* tests/test-memory.c -- run/memory.c: --max-memory sizes and the early
 * memory check. */
#include "run/memory.h"

#include "tests/testutil.h"

typedef struct {
  const char *text;
  guint64 bytes; /* 0: must be refused */
} SizeCase;

static const SizeCase size_cases[] = {
  {"1", 1},
  {"4096", 4096},
  {"512K", 512ull << 10},
  {"4M", 4ull << 20},
  {"4MB", 4ull << 20},
  {"4MiB", 4ull << 20},
  {"16g", 16ull << 30},
  {"1T", 1ull << 40},
  {"0", 0},
  {"", 0},
  {"-1G", 0},
  {"1.5G", 0},
  {"4Q", 0},
  {"G", 0},
  {"4 G", 0},
  {"99999999999999999999", 0},
  {"17179869184G", 0}, /* 2^34 GiB = 2^64 bytes: overflow */
};

static void test_parse(gconstpointer data)
{
  const SizeCase *c = data;
  guint64 v = 12345;
  GError *err = NULL;
  gboolean ok = js_memory_parse(c->text, &v, &err);
  if (c->bytes == 0) {
    g_assert_false(ok);
    g_assert_error(err, JS_MEMORY_ERROR, JS_MEMORY_ERROR_PARSE);
    g_assert_nonnull(strstr(err->message, "--max-memory"));
    g_assert_cmpuint(v, ==, 12345);
    g_error_free(err);
  } else {
    g_assert_no_error(err);
    g_assert_true(ok);
    g_assert_cmpuint(v, ==, c->bytes);
  }
}

static void test_check(void)
{
  GError *err = NULL;
  /* Under an explicit limit: what this process already holds counts. */
  g_assert_true(js_memory_check(G_GUINT64_CONSTANT(1) << 40, 1 << 20, "x",
                                &err));
  g_assert_no_error(err);
  g_assert_false(js_memory_check(1 << 20, G_GUINT64_CONSTANT(5) << 30,
                                 "js.gpt: big", &err));
  g_assert_error(err, JS_MEMORY_ERROR, JS_MEMORY_ERROR_LIMIT);
  g_assert_nonnull(strstr(err->message, "js.gpt: big would need about "
                                        "5.4 GB"));
  g_assert_nonnull(strstr(err->message, "--max-memory"));
  g_clear_error(&err);
  /* Without one: the machine's available memory, which is finite here and
   * certainly less than an exabyte. */
  guint64 avail = js_memory_available();
  g_assert_cmpuint(avail, >, 0);
  g_assert_cmpuint(js_memory_limit(0), >, 0);
  g_assert_false(js_memory_check(0, G_GUINT64_CONSTANT(1) << 60, "huge",
                                 &err));
  g_assert_error(err, JS_MEMORY_ERROR, JS_MEMORY_ERROR_LIMIT);
  g_assert_nonnull(strstr(err->message, "available on this machine"));
  g_clear_error(&err);
}

static void test_format(void)
{
  g_autofree char *a = js_memory_format(6540000000ull);
  g_autofree char *b = js_memory_format(818800000ull);
  g_autofree char *c = js_memory_format(1500);
  g_assert_cmpstr(a, ==, "6.5 GB");
  g_assert_cmpstr(b, ==, "818.8 MB");
  g_assert_cmpstr(c, ==, "2 kB");
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS(size_cases); i++) {
    g_autofree char *path = g_strdup_printf("/memory/parse/%u", i);
    g_test_add_data_func(path, &size_cases[i], test_parse);
  }
  g_test_add_func("/memory/check", test_check);
  g_test_add_func("/memory/format", test_format);
  return g_test_run();
}
