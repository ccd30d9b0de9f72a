/* tests/test-memory.c -- run/memory.c: --max-memory sizes and the early
 * memory check. */
#include "run/memory.h"
#include "run/session.h"

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

/* A sweep's workers share --max-memory (js_limits_share): each gets an
 * equal part of what this process leaves, its copy of the Lua heap
 * included; too small a part is refused before any fork. */
static void test_share(void)
{
  g_autoptr(JsSession) s = js_session_new(1);
  GError *err = NULL;
  guint64 mb = 1 << 20;
  s->max_memory = js_memory_resident() + 60 * mb;
  s->limits.heap_limit = (gsize)s->max_memory;
  s->limits.heap_bytes = (gsize)(2 * mb);
  g_assert_true(js_limits_share(s, 6, &err));
  g_assert_no_error(err);
  g_assert_cmpuint(s->limits.shared_by, ==, 6);
  /* 60 MB / 6 = 10 MB, less the 3 MiB a worker process owns; resident
   * memory grows a little between the two readings. */
  g_assert_cmpuint(s->limits.worker_heap_limit, <=, 7 * mb);
  g_assert_cmpuint(s->limits.worker_heap_limit, >=, 6 * mb);
  g_assert_cmpuint(6 * s->limits.worker_heap_limit, <=, 60 * mb);
  /* A worker takes its share. */
  js_limits_after_fork(s);
  g_assert_cmpuint(s->limits.heap_limit, ==, s->limits.worker_heap_limit);
  g_assert_cmpuint(s->max_memory, ==, s->limits.worker_max_memory);
  /* 60 workers: 1 MB each cannot hold the 2 MB heap. */
  s->max_memory = js_memory_resident() + 60 * mb;
  g_assert_false(js_limits_share(s, 60, &err));
  g_assert_error(err, JS_MEMORY_ERROR, JS_MEMORY_ERROR_LIMIT);
  g_assert_nonnull(strstr(err->message, "60 workers"));
  g_assert_nonnull(strstr(err->message, "fewer jobs"));
  g_clear_error(&err);
  /* Without --max-memory the heap left is divided. */
  s->max_memory = 0;
  s->limits.heap_limit = (gsize)(62 * mb);
  g_assert_true(js_limits_share(s, 4, &err));
  g_assert_cmpuint(s->limits.worker_heap_limit, ==, 2 * mb + 15 * mb);
  g_assert_cmpuint(s->limits.worker_max_memory, ==, 0);
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
  g_test_add_func("/memory/sweep-share", test_share);
  return g_test_run();
}
