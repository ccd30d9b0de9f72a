/* tests/test-input.c -- opening inputs (io/input.h): a regular file opens
 * once and its proc path names it; a FIFO (without a writer: it must not
 * block), a directory and a character device are refused naming what they
 * are; whole reads are bounded by the size before anything is read, so a
 * sparse file over the cap is refused at once; the open is a fault site;
 * close is idempotent. */
#include "io/fault.h"
#include "io/input.h"
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TEST_INPUT_ERROR (g_quark_from_static_string("test-input-error"))
enum { TEST_INPUT_CODE = 7 };

static void test_regular(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "f.txt", NULL);
  g_assert_true(g_file_set_contents(path, "hello", 5, NULL));
  IoInput in;
  GError *error = NULL;
  g_assert_true(io_input_open(&in, path, "test: open", TEST_INPUT_ERROR,
                              TEST_INPUT_CODE, &error));
  g_assert_no_error(error);
  g_assert_cmpint(in.fd, >=, 0);
  g_assert_cmpint(in.size, ==, 5);
  g_assert_true(g_str_has_prefix(in.proc_path, "/proc/self/fd/"));
  /* O_NONBLOCK is cleared, O_CLOEXEC set. */
  g_assert_cmpint(fcntl(in.fd, F_GETFL) & O_NONBLOCK, ==, 0);
  g_assert_cmpint(fcntl(in.fd, F_GETFD) & FD_CLOEXEC, !=, 0);
  /* The proc path names the open file even after the name is gone. */
  g_assert_cmpint(g_unlink(path), ==, 0);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(in.proc_path, &text, NULL, NULL));
  g_assert_cmpstr(text, ==, "hello");
  gsize len = 0;
  g_autofree char *all = NULL;
  g_assert_true(io_input_read_all(&in, path, 5, "a test", "test: read",
                                  TEST_INPUT_ERROR, TEST_INPUT_CODE, &all,
                                  &len, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(len, ==, 5);
  g_assert_cmpstr(all, ==, "hello");
  io_input_close(&in);
  g_assert_cmpint(in.fd, ==, -1);
  io_input_close(&in); /* twice is fine */
  test_rmdir(dir);
}

/* FIFO, directory, character device: refused at once, naming the kind. */
static void test_not_regular(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *fifo = g_build_filename(dir, "fifo", NULL);
  g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
  const struct {
    const char *path, *kind;
  } cases[] = {
    {fifo, "a FIFO"},
    {dir, "a directory"},
    {"/dev/null", "a character device"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    IoInput in;
    GError *error = NULL;
    g_assert_false(io_input_open(&in, cases[i].path, "test: open",
                                 TEST_INPUT_ERROR, TEST_INPUT_CODE, &error));
    g_assert_error(error, TEST_INPUT_ERROR, TEST_INPUT_CODE);
    g_autofree char *want =
      g_strdup_printf("%s: not a regular file (%s)", cases[i].path,
                      cases[i].kind);
    g_assert_true(g_str_has_prefix(error->message, want));
    g_assert_cmpint(in.fd, ==, -1);
    io_input_close(&in); /* after a failed open: fine */
    g_clear_error(&error);
  }
  /* A missing file: strerror. */
  IoInput in;
  GError *error = NULL;
  g_autofree char *missing = g_build_filename(dir, "missing", NULL);
  g_assert_false(io_input_open(&in, missing, "test: open", TEST_INPUT_ERROR,
                               TEST_INPUT_CODE, &error));
  g_assert_error(error, TEST_INPUT_ERROR, TEST_INPUT_CODE);
  g_assert_nonnull(strstr(error->message, g_strerror(ENOENT)));
  g_clear_error(&error);
  g_unlink(fifo);
  test_rmdir(dir);
}

/* A sparse file over the cap is refused from its size, before a byte is
 * read (1 GiB of holes: reading it would take seconds and a GiB). */
static void test_read_cap(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "sparse", NULL);
  int fd = open(path, O_WRONLY | O_CREAT, 0600);
  g_assert_cmpint(fd, >=, 0);
  g_assert_cmpint(ftruncate(fd, (off_t)1 << 30), ==, 0);
  close(fd);
  IoInput in;
  GError *error = NULL;
  g_assert_true(io_input_open(&in, path, "test: open", TEST_INPUT_ERROR,
                              TEST_INPUT_CODE, &error));
  g_assert_cmpint(in.size, ==, (gint64)1 << 30);
  char *all = NULL;
  g_assert_false(io_input_read_all(&in, path, 64u << 20, "a test",
                                   "test: read", TEST_INPUT_ERROR,
                                   TEST_INPUT_CODE, &all, NULL, &error));
  g_assert_error(error, TEST_INPUT_ERROR, TEST_INPUT_CODE);
  g_assert_nonnull(strstr(error->message, "over the limit of 64 MiB"));
  g_assert_null(all);
  g_clear_error(&error);
  io_input_close(&in);
  test_rmdir(dir);
}

/* The open and the whole read are FAULT_READ sites. */
static void test_fault(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "f.txt", NULL);
  g_assert_true(g_file_set_contents(path, "abc", 3, NULL));
  for (guint64 n = 1; n <= 2; n++) {
    GError *error = NULL;
    g_assert_true(fault_configure(n, FAULT_READ, FALSE, &error));
    IoInput in;
    char *all = NULL;
    gboolean ok = io_input_open(&in, path, "test: open", TEST_INPUT_ERROR,
                                TEST_INPUT_CODE, &error) &&
                  io_input_read_all(&in, path, 100, "a test", "test: read",
                                    TEST_INPUT_ERROR, TEST_INPUT_CODE, &all,
                                    NULL, &error);
    g_assert_false(ok);
    g_assert_error(error, TEST_INPUT_ERROR, TEST_INPUT_CODE);
    g_assert_nonnull(strstr(error->message, g_strerror(EIO)));
    g_assert_cmpuint(fault_fired(), ==, n);
    g_clear_error(&error);
    io_input_close(&in);
    fault_reset();
  }
  test_rmdir(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/input/regular", test_regular);
  g_test_add_func("/input/not-regular", test_not_regular);
  g_test_add_func("/input/read-cap", test_read_cap);
  g_test_add_func("/input/fault", test_fault);
  return g_test_run();
}
