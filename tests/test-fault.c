/* tests/test-fault.c -- the fault-injection countdown (io/fault.h) and the
 * I/O paths it guards.
 *
 * First the switch itself: disarmed it never fires nor counts, armed it
 * fails exactly the N-th counted call of the selected kinds, suspension,
 * the environment variables (table-driven, exact error codes), the log
 * lines, fork inheritance, and the guarded helpers (allocation, fopen,
 * file contents, the rank builder).  Then, for the library's I/O paths
 * (results tables appended to an existing file, native trace save and
 * load, trace import, profile loading), every guarded call is failed in
 * turn: each run must either succeed or fail with an error, leave no HDF5
 * object open, and leave its output valid (the results file keeps its
 * previous rows; the native trace is the old file or the complete new
 * one, and no temporary file stays behind).
 */
#include "io/results.h"
#include "models/gpu.h"
#include "io/fault.h"
#include "traces/gpt.h"
#include "io/h5util.h"
#include "traces/import.h"
#include "traces/native.h"
#include "traces/profile.h"
#include "testutil.h"

#include <errno.h>
#include <hdf5.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
/* HDF5 1.10's own leaks on its read-error paths (docs/fault-injection.md,
 * tests/scenario-faults.sh): LeakSanitizer ignores exactly those
 * allocation stacks, which it sees whole only with the slow unwinder. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
  return "leak:H5C_protect\nleak:H5G_name_replace\nleak:H5O_delete\nleak:H5O_create\n";
}
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
  return "fast_unwind_on_malloc=0:print_suppressions=0";
}
#endif

/* An ordinal no run reaches: armed, counting, never failing. */
#define COUNT_ONLY G_MAXUINT64

static void arm(guint64 n, guint kinds)
{
  GError *error = NULL;
  g_assert_true(fault_configure(n, kinds, FALSE, &error));
  g_assert_no_error(error);
}

/* ---- the switch -------------------------------------------------------------- */

static void test_disarmed(void)
{
  fault_reset();
  g_assert_false(fault_enabled());
  for (int i = 0; i < 1000; i++) {
    g_assert_false(fault_inject(FAULT_READ, "a"));
    g_assert_false(fault_inject(FAULT_HDF5, "b"));
    g_assert_false(fault_inject(FAULT_ALLOC, "c"));
  }
  g_assert_cmpuint(fault_count(), ==, 0);
  g_assert_cmpuint(fault_fired(), ==, 0);
}

static void test_countdown(void)
{
  static const FaultKind seq[8] = { FAULT_READ, FAULT_HDF5, FAULT_ALLOC,
                                    FAULT_WRITE, FAULT_HDF5, FAULT_READ,
                                    FAULT_HDF5, FAULT_ALLOC };
  for (guint n = 1; n <= 9; n++) {
    arm(n, FAULT_ALL);
    guint fired = 0;
    for (guint k = 0; k < 8; k++)
      if (fault_inject(seq[k], "site")) {
        g_assert_cmpuint(k + 1, ==, n); /* only the n-th call */
        fired++;
      }
    g_assert_cmpuint(fired, ==, n <= 8 ? 1 : 0);
    g_assert_cmpuint(fault_count(), ==, 8);
    g_assert_cmpuint(fault_fired(), ==, n <= 8 ? n : 0);
  }
  fault_reset();
}

static void test_kinds(void)
{
  /* Only HDF5 calls count: the second of them fails. */
  arm(2, FAULT_HDF5);
  g_assert_false(fault_inject(FAULT_READ, "r"));
  g_assert_false(fault_inject(FAULT_HDF5, "h1"));
  g_assert_false(fault_inject(FAULT_ALLOC, "a"));
  g_assert_false(fault_inject(FAULT_READ, "r"));
  g_assert_true(fault_inject(FAULT_HDF5, "h2"));
  g_assert_false(fault_inject(FAULT_HDF5, "h3"));
  g_assert_cmpuint(fault_count(), ==, 3);
  /* Two kinds. */
  arm(3, FAULT_READ | FAULT_ALLOC);
  g_assert_false(fault_inject(FAULT_READ, "r"));
  g_assert_false(fault_inject(FAULT_HDF5, "h"));
  g_assert_false(fault_inject(FAULT_ALLOC, "a"));
  g_assert_false(fault_inject(FAULT_WRITE, "w"));
  g_assert_true(fault_inject(FAULT_READ, "r"));
  /* An empty or unknown set is refused and changes nothing. */
  GError *error = NULL;
  g_assert_false(fault_configure(1, 0, FALSE, &error));
  g_assert_error(error, FAULT_ERROR, FAULT_ERROR_CONFIG);
  g_clear_error(&error);
  g_assert_false(fault_configure(1, 1u << 9, FALSE, &error));
  g_assert_error(error, FAULT_ERROR, FAULT_ERROR_CONFIG);
  g_clear_error(&error);
  g_assert_cmpuint(fault_count(), ==, 3);
  fault_reset();
}

static void test_zero_and_log_only(void)
{
  arm(0, FAULT_ALL);
  g_assert_false(fault_enabled());
  g_assert_false(fault_inject(FAULT_READ, "r"));
  g_assert_cmpuint(fault_count(), ==, 0);
  arm(COUNT_ONLY, FAULT_ALL);
  g_assert_true(fault_enabled());
  for (int i = 0; i < 5; i++)
    g_assert_false(fault_inject(FAULT_WRITE, "w"));
  g_assert_cmpuint(fault_count(), ==, 5);
  g_assert_cmpuint(fault_fired(), ==, 0);
  fault_reset();
}

static void test_suspend(void)
{
  arm(1, FAULT_ALL);
  fault_suspend();
  fault_suspend();
  g_assert_false(fault_inject(FAULT_HDF5, "in a close"));
  fault_resume();
  g_assert_false(fault_inject(FAULT_HDF5, "still suspended"));
  fault_resume();
  g_assert_cmpuint(fault_count(), ==, 0);
  g_assert_true(fault_inject(FAULT_HDF5, "after"));
  g_assert_cmpuint(fault_count(), ==, 1);
  fault_reset();
}

/* ---- environment ----------------------------------------------------------- */

typedef struct {
  const char *n, *kind, *log; /* NULL: unset */
  gboolean ok;
  guint64 fail_at;
  guint kinds;
  gboolean enabled;
  const char *in_message; /* error: the variable named */
} EnvCase;

static const EnvCase env_cases[] = {
  { NULL, NULL, NULL, TRUE, 0, FAULT_ALL, FALSE, NULL },
  { "3", NULL, NULL, TRUE, 3, FAULT_ALL, TRUE, NULL },
  { "0", NULL, NULL, TRUE, 0, FAULT_ALL, FALSE, NULL },
  { "", "", "", TRUE, 0, FAULT_ALL, FALSE, NULL },
  { "7", "hdf5", NULL, TRUE, 7, FAULT_HDF5, TRUE, NULL },
  { "2", "read,alloc", "0", TRUE, 2, FAULT_READ | FAULT_ALLOC, TRUE, NULL },
  { "2", " write , hdf5 ", NULL, TRUE, 2, FAULT_WRITE | FAULT_HDF5, TRUE,
    NULL },
  { "5", "all", NULL, TRUE, 5, FAULT_ALL, TRUE, NULL },
  { NULL, NULL, "1", TRUE, 0, FAULT_ALL, TRUE, NULL },
  { "-1", NULL, NULL, FALSE, 0, 0, FALSE, "JOULESIM_FAULT: '-1'" },
  { "abc", NULL, NULL, FALSE, 0, 0, FALSE, "JOULESIM_FAULT: 'abc'" },
  { "3x", NULL, NULL, FALSE, 0, 0, FALSE, "JOULESIM_FAULT: '3x'" },
  { " 3", NULL, NULL, FALSE, 0, 0, FALSE, "JOULESIM_FAULT" },
  { "18446744073709551616", NULL, NULL, FALSE, 0, 0, FALSE,
    "JOULESIM_FAULT" },
  { "1", "disk", NULL, FALSE, 0, 0, FALSE, "JOULESIM_FAULT_KIND: unknown "
                                           "kind 'disk'" },
  { "1", "read,", NULL, FALSE, 0, 0, FALSE, "JOULESIM_FAULT_KIND" },
  { "1", NULL, "yes", FALSE, 0, 0, FALSE, "JOULESIM_FAULT_LOG: 'yes'" },
};

static void set_or_unset(const char *var, const char *value)
{
  if (value != NULL)
    g_setenv(var, value, TRUE);
  else
    g_unsetenv(var);
}

static void test_env(gconstpointer data)
{
  const EnvCase *c = data;
  /* A known state first, to see that a refused environment keeps it. */
  arm(4, FAULT_READ);
  set_or_unset("JOULESIM_FAULT", c->n);
  set_or_unset("JOULESIM_FAULT_KIND", c->kind);
  set_or_unset("JOULESIM_FAULT_LOG", c->log);
  GError *error = NULL;
  gboolean ok = fault_configure_from_env(&error);
  g_unsetenv("JOULESIM_FAULT");
  g_unsetenv("JOULESIM_FAULT_KIND");
  g_unsetenv("JOULESIM_FAULT_LOG");
  if (!c->ok) {
    g_assert_false(ok);
    g_assert_error(error, FAULT_ERROR, FAULT_ERROR_CONFIG);
    g_assert_nonnull(strstr(error->message, c->in_message));
    g_clear_error(&error);
    /* Unchanged: the 4th read still fails. */
    for (int i = 1; i <= 4; i++)
      g_assert_cmpint(fault_inject(FAULT_READ, "r"), ==, i == 4);
    fault_reset();
    return;
  }
  g_assert_no_error(error);
  g_assert_true(ok);
  g_assert_cmpint(fault_enabled(), ==, c->enabled);
  if (c->fail_at > 0) {
    /* The fail_at-th call of the selected kinds fails, and only it; a kind
     * not selected is not counted. */
    guint other = FAULT_ALL & ~c->kinds;
    FaultKind k = c->kinds & FAULT_READ    ? FAULT_READ
                  : c->kinds & FAULT_WRITE ? FAULT_WRITE
                  : c->kinds & FAULT_HDF5  ? FAULT_HDF5
                                           : FAULT_ALLOC;
    for (guint64 i = 1; i <= c->fail_at + 2; i++) {
      if (other != 0)
        g_assert_false(fault_inject((FaultKind)(other & -other), "other"));
      g_assert_cmpint(fault_inject(k, "k"), ==, i == c->fail_at);
    }
  } else if (!c->enabled) {
    g_assert_false(fault_inject(FAULT_READ, "r"));
  }
  fault_reset();
}

/* ---- log lines, fork --------------------------------------------------------- */

static void test_log(void)
{
  if (g_test_subprocess()) {
    GError *error = NULL;
    g_assert_true(fault_configure(2, FAULT_ALL, TRUE, &error));
    fault_inject(FAULT_READ, "kineto: open");
    fault_inject(FAULT_HDF5, "write x.h5");
    fault_inject(FAULT_ALLOC, "workload: op array");
    return;
  }
  g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
  g_test_trap_assert_stderr("*]: 1 read kineto: open\n*");
  g_test_trap_assert_stderr("*]: 2 hdf5 write x.h5 <- injected\n*");
  g_test_trap_assert_stderr("*]: 3 alloc workload: op array\n*");
  g_test_trap_assert_stderr_unmatched("*3 alloc workload: op array <-*");
}

static void test_fork(void)
{
  /* A forked child inherits the count and counts on its own: with N = 3
   * and one call before the fork, the third call fails in both. */
  arm(3, FAULT_ALL);
  g_assert_false(fault_inject(FAULT_READ, "before"));
  pid_t pid = fork();
  g_assert_cmpint(pid, >=, 0);
  if (pid == 0) {
    gboolean a = fault_inject(FAULT_READ, "child 2");
    gboolean b = fault_inject(FAULT_READ, "child 3");
    _exit(!a && b && fault_count() == 3 ? 0 : 1);
  }
  g_assert_false(fault_inject(FAULT_ALLOC, "parent 2"));
  g_assert_true(fault_inject(FAULT_ALLOC, "parent 3"));
  int status = 0;
  g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
  g_assert_true(WIFEXITED(status));
  g_assert_cmpint(WEXITSTATUS(status), ==, 0);
  fault_reset();
}

/* ---- guarded helpers --------------------------------------------------------- */

G_DEFINE_QUARK(test-fault-quark, test_fault)

static void test_alloc(void)
{
  GError *error = NULL;
  arm(1, FAULT_ALLOC);
  gpointer p = fault_try_alloc(10, 8, "test: records", test_fault_quark(), 7,
                               &error);
  g_assert_null(p);
  g_assert_error(error, test_fault_quark(), 7);
  g_assert_nonnull(strstr(error->message, "test: records"));
  g_assert_nonnull(strstr(error->message, "injected fault"));
  g_clear_error(&error);
  /* Only that call: the next one allocates (zero-filled with try_alloc0). */
  guint64 *z = fault_try_alloc0(16, sizeof(guint64), "test: zeros",
                                test_fault_quark(), 7, &error);
  g_assert_no_error(error);
  g_assert_nonnull(z);
  for (int i = 0; i < 16; i++)
    g_assert_cmpuint(z[i], ==, 0);
  g_free(z);
  fault_reset();
  /* A real failure takes the same path: n * size overflows. */
  p = fault_try_alloc(G_MAXSIZE / 2, 4, "test: huge", test_fault_quark(), 3,
                      &error);
  g_assert_null(p);
  g_assert_error(error, test_fault_quark(), 3);
  g_assert_nonnull(strstr(error->message, "out of memory"));
  g_clear_error(&error);
#ifndef __SANITIZE_ADDRESS__
  /* And an allocation the system refuses (2^62 bytes; not under ASan,
   * whose allocator aborts on sizes like this). */
  p = fault_try_alloc((gsize)1 << 58, 16, "test: refused",
                      test_fault_quark(), 3, &error);
  g_assert_null(p);
  g_assert_error(error, test_fault_quark(), 3);
  g_clear_error(&error);
#endif
}

static void test_files(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "f.txt", NULL);
  GError *error = NULL;
  g_assert_true(g_file_set_contents(path, "hello\n", -1, &error));

  arm(1, FAULT_READ);
  char *text = NULL;
  gsize len = 0;
  g_assert_false(fault_get_contents(path, &text, &len, "test: read",
                                    &error));
  g_assert_error(error, G_FILE_ERROR, G_FILE_ERROR_IO);
  g_assert_nonnull(strstr(error->message, "f.txt"));
  g_assert_nonnull(strstr(error->message, "injected fault"));
  g_assert_null(text);
  g_clear_error(&error);
  g_assert_true(fault_get_contents(path, &text, &len, "test: read", &error));
  g_assert_cmpstr(text, ==, "hello\n");
  g_free(text);

  /* fopen: reading counts as READ, writing as WRITE. */
  arm(2, FAULT_READ);
  FILE *w = fault_fopen(path, "a", "test: append");
  g_assert_nonnull(w); /* WRITE: not counted */
  fclose(w);
  FILE *r1 = fault_fopen(path, "rb", "test: open 1");
  g_assert_nonnull(r1);
  fclose(r1);
  errno = 0;
  g_assert_null(fault_fopen(path, "rb", "test: open 2"));
  g_assert_cmpint(errno, ==, EIO);
  g_assert_cmpuint(fault_count(), ==, 2);
  arm(1, FAULT_WRITE);
  g_assert_null(fault_fopen(path, "r+", "test: update"));
  fault_reset();
  test_rmdir(dir);
}

static SimOp plain_op(guint8 stream, guint32 wait)
{
  SimOp op;
  memset(&op, 0, sizeof op);
  op.kind = SIM_OP_KERNEL;
  op.klass = SIM_CLASS_GEMM;
  op.stream = stream;
  op.ref_ns = 1000;
  op.wait = wait;
  op.microbatch = G_MAXUINT16;
  op.layer = 255;
  return op;
}

static void test_builder(void)
{
  g_autoptr(SimWorkload) w = sim_workload_new(1);
  SimShape sh = { 0 };
  sim_workload_add_shape(w, &sh);
  sim_workload_intern(w, "k");
  g_autoptr(SimRankBuilder) b = sim_rank_builder_new();
  SimOp a = plain_op(1, SIM_NO_WAIT);
  guint32 h = sim_rank_builder_add(b, &a);
  SimOp c = plain_op(0, h);
  sim_rank_builder_add(b, &c);
  sim_rank_builder_add(b, &a);

  GError *error = NULL;
  arm(1, FAULT_ALLOC);
  g_assert_false(sim_rank_builder_try_finish(b, w, 0, &error));
  g_assert_error(error, SIM_ERROR, SIM_ERROR_LIMIT);
  g_assert_nonnull(strstr(error->message, "rank 0"));
  g_assert_nonnull(strstr(error->message, "injected fault"));
  g_clear_error(&error);
  g_assert_cmpuint(w->ranks[0].n_ops, ==, 0); /* nothing installed */
  /* The builder kept its ops: finishing again lays them out. */
  g_assert_true(sim_rank_builder_try_finish(b, w, 0, &error));
  g_assert_no_error(error);
  fault_reset();
  g_assert_cmpuint(w->ranks[0].n_ops, ==, 3);
  g_assert_cmpuint(w->ranks[0].n_streams, ==, 2);
  g_assert_cmpuint(w->ranks[0].ops[0].wait, ==, 1); /* stream 1 first op */
  g_assert_true(sim_workload_validate(w, &error));
  g_assert_no_error(error);
}

/* ---- HDF5 through the fault driver ------------------------------------------ */

/* Open HDF5 objects of every file (a failed run must not leave any). */
static ssize_t h5_open_objects(void)
{
  return H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
}

static void test_hdf5_driver(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "d.h5", NULL);
  GError *error = NULL;
  /* The driver passes through when nothing fails: a round trip. */
  arm(COUNT_ONLY, FAULT_HDF5);
  {
    H5U_QUIET();
    g_auto(H5uHid) f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT,
                                 H5P_DEFAULT);
    g_assert_cmpint(f, >=, 0);
    int v[4] = { 1, 2, 3, 4 };
    hsize_t dims[1] = { 4 };
    g_auto(H5uHid) sp = H5Screate_simple(1, dims, NULL);
    g_auto(H5uHid) d = H5Dcreate2(f, "v", H5T_NATIVE_INT, sp, H5P_DEFAULT,
                                  H5P_DEFAULT, H5P_DEFAULT);
    g_assert_cmpint(H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL,
                             H5P_DEFAULT, v), >=, 0);
    /* The descriptor behind the file is still reachable (fsync). */
    void *handle = NULL;
    g_assert_cmpint(H5Fget_vfd_handle(f, H5P_DEFAULT, &handle), >=, 0);
    g_assert_nonnull(handle);
    g_assert_cmpint(*(int *)handle, >=, 0);
  }
  guint64 calls = fault_count();
  g_assert_cmpuint(calls, >, 3);
  /* Each driver call failed in turn: HDF5 reports it; no object stays
   * open; nothing crashes. */
  for (guint64 n = 1; n <= calls; n++) {
    arm(n, FAULT_HDF5);
    gboolean failed = FALSE;
    g_autofree char *reason = NULL;
    {
      H5U_QUIET();
      g_auto(H5uHid) f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT,
                                   H5P_DEFAULT);
      if (f < 0) {
        failed = TRUE;
        reason = h5u_error_reason();
      } else {
        int v[4] = { 1, 2, 3, 4 };
        hsize_t dims[1] = { 4 };
        g_auto(H5uHid) sp = H5Screate_simple(1, dims, NULL);
        g_auto(H5uHid) d = H5Dcreate2(f, "v", H5T_NATIVE_INT, sp,
                                      H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (d < 0 || H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL,
                              H5P_DEFAULT, v) < 0 ||
            H5Fflush(f, H5F_SCOPE_LOCAL) < 0) {
          failed = TRUE;
          reason = h5u_error_reason();
        }
      }
    }
    g_assert_cmpuint(fault_fired(), ==, n);
    fault_reset();
    if (failed) {
      g_assert_nonnull(reason);
      g_assert_nonnull(strstr(reason, "injected fault"));
    }
    g_assert_cmpint(h5_open_objects(), ==, 0);
  }
  g_assert_no_error(error);
  test_rmdir(dir);
}

/* ---- results tables: an append never loses the previous rows -------------- */

static gboolean results_append_two(const char *path, GError **error)
{
  ResMeta meta = { "test", "test-fault.c", "", 1, NULL, NULL };
  g_autoptr(ResTable) t = res_table_open(path, "runs", RES_MODE_APPEND,
                                         &meta, error);
  if (t == NULL)
    return FALSE;
  for (int i = 0; i < 2; i++) {
    ResValue row[3] = {
      { "i", RES_INT, 100 + i, 0, NULL },
      { "energy_j", RES_FLOAT, 0, 1.5 * i, NULL },
      { "label", RES_STRING, 0, 0, "appended" },
    };
    if (!res_table_append(t, row, 3, error))
      return FALSE;
  }
  const char *keys[1] = { "i" };
  if (!res_table_set_note(t, "sweep_keys", keys, 1, error))
    return FALSE;
  return res_table_close(g_steal_pointer(&t), error);
}

static void test_results_append(void)
{
  fault_reset();
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "r.h5", NULL);
  GError *error = NULL;
  /* The previous version: three rows. */
  {
    ResMeta meta = { "test", "test-fault.c", "", 1, NULL, NULL };
    g_autoptr(ResTable) t = res_table_open(path, "runs", RES_MODE_APPEND,
                                           &meta, &error);
    g_assert_no_error(error);
    for (int i = 0; i < 3; i++) {
      ResValue row[3] = {
        { "i", RES_INT, i, 0, NULL },
        { "energy_j", RES_FLOAT, 0, 10.0 * i, NULL },
        { "label", RES_STRING, 0, 0, "old" },
      };
      g_assert_true(res_table_append(t, row, 3, &error));
    }
    g_assert_true(res_table_close(g_steal_pointer(&t), &error));
  }
  g_autofree char *before = NULL;
  gsize before_len = 0;
  g_assert_true(g_file_get_contents(path, &before, &before_len, &error));

  arm(COUNT_ONLY, FAULT_ALL);
  g_assert_true(results_append_two(path, &error));
  g_assert_no_error(error);
  guint64 calls = fault_count();
  fault_reset();
  g_assert_cmpuint(calls, >, 10);

  guint failures = 0;
  for (guint64 n = 1; n <= calls; n++) {
    g_assert_true(g_file_set_contents(path, before, (gssize)before_len,
                                      &error));
    arm(n, FAULT_ALL);
    gboolean ok = results_append_two(path, &error);
    guint64 fired = fault_fired();
    fault_reset();
    g_assert_cmpuint(fired, ==, n);
    if (!ok) {
      failures++;
      g_assert_nonnull(error);
      g_assert_nonnull(strstr(error->message, "r.h5"));
      g_clear_error(&error);
    }
    g_assert_cmpint(h5_open_objects(), ==, 0);
    /* The file opens and holds the old rows, in order, then only
     * complete appended rows. */
    g_autoptr(GPtrArray) rows = res_table_read(path, "runs", &error);
    g_assert_no_error(error);
    g_assert_nonnull(rows);
    g_assert_cmpuint(rows->len, >=, 3);
    g_assert_cmpuint(rows->len, <=, 5);
    if (ok)
      g_assert_cmpuint(rows->len, ==, 5);
    for (guint r = 0; r < rows->len; r++) {
      GPtrArray *row = g_ptr_array_index(rows, r);
      g_assert_cmpuint(row->len, ==, 3);
      const ResValue *i = g_ptr_array_index(row, 0);
      const ResValue *s = g_ptr_array_index(row, 2);
      g_assert_cmpint(i->i, ==, r < 3 ? (gint64)r : 100 + (gint64)r - 3);
      g_assert_cmpstr(s->s, ==, r < 3 ? "old" : "appended");
    }
    /* No temporary file is left next to it. */
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;
    while ((name = g_dir_read_name(d)) != NULL)
      g_assert_cmpstr(name, ==, "r.h5");
  }
  g_assert_cmpuint(failures, >, 0);
  g_unlink(path);
  test_rmdir(dir);
}

/* A new results file: absent or complete after every fault. */
static void test_results_create(void)
{
  fault_reset();
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "new.h5", NULL);
  GError *error = NULL;
  arm(COUNT_ONLY, FAULT_ALL);
  g_assert_true(results_append_two(path, &error));
  guint64 calls = fault_count();
  fault_reset();
  for (guint64 n = 1; n <= calls; n++) {
    g_unlink(path);
    arm(n, FAULT_ALL);
    gboolean ok = results_append_two(path, &error);
    fault_reset();
    g_clear_error(&error);
    g_assert_cmpint(h5_open_objects(), ==, 0);
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
      g_assert_false(ok);
      continue;
    }
    g_autoptr(GPtrArray) rows = res_table_read(path, "runs", &error);
    if (rows == NULL) {
      /* The first append failed and the close put the file, without the
       * table, in place (the file appears with the table's first row, or
       * at the close). */
      g_assert_false(ok);
      g_assert_error(error, RES_ERROR, RES_ERROR_IO);
      g_assert_nonnull(strstr(error->message, "no such table"));
      g_clear_error(&error);
      continue;
    }
    g_assert_cmpuint(rows->len, <=, 2);
    if (ok)
      g_assert_cmpuint(rows->len, ==, 2);
  }
  g_unlink(path);
  test_rmdir(dir);
}

/* ---- native traces: old file or complete new one ----------------------------- */

static SimWorkload *small_gpt(guint tp, guint pp, guint mb)
{
  GError *error = NULL;
  GptConfig cfg;
  gpt_config_init(&cfg);
  g_assert_true(gpt_config_set_model(&cfg, "gpt3-125m", &error));
  cfg.tp = tp;
  cfg.pp = pp;
  cfg.dp = 1;
  cfg.microbatches = mb;
  cfg.seq_len = 512;
  g_autoptr(GpuCatalogue) cat = gpu_catalogue_new();
  const GpuSpec *gpu = gpu_catalogue_lookup(cat, "A100-SXM4-80GB", &error);
  g_assert_no_error(error);
  SimWorkload *w = gpt_generate(&cfg, gpu, &error);
  g_assert_no_error(error);
  return w;
}

static gboolean same_ops(const SimWorkload *a, const SimWorkload *b)
{
  if (a->n_ranks != b->n_ranks)
    return FALSE;
  for (guint r = 0; r < a->n_ranks; r++) {
    if (a->ranks[r].n_ops != b->ranks[r].n_ops)
      return FALSE;
    for (guint32 i = 0; i < a->ranks[r].n_ops; i++) {
      SimOp x = a->ranks[r].ops[i], y = b->ranks[r].ops[i];
      x.peer = sim_op_peer(&a->ranks[r], &x);
      y.peer = sim_op_peer(&b->ranks[r], &y);
      x.patch = y.patch = 0; /* stored resolved */
      if (memcmp(&x, &y, sizeof x) != 0)
        return FALSE;
    }
  }
  return TRUE;
}

static void test_native_save(void)
{
  fault_reset();
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "t.h5", NULL);
  GError *error = NULL;
  g_autoptr(SimWorkload) old_w = small_gpt(1, 1, 1);
  g_autoptr(SimWorkload) new_w = small_gpt(2, 2, 2);
  g_assert_true(trace_native_save(old_w, path, &error));
  g_autofree char *old_bytes = NULL;
  gsize old_len = 0;
  g_assert_true(g_file_get_contents(path, &old_bytes, &old_len, &error));

  arm(COUNT_ONLY, FAULT_ALL);
  g_assert_true(trace_native_save(new_w, path, &error));
  guint64 calls = fault_count();
  fault_reset();
  g_assert_cmpuint(calls, >, 10);
  g_autofree char *new_bytes = NULL;
  gsize new_len = 0;
  g_assert_true(g_file_get_contents(path, &new_bytes, &new_len, &error));
  {
    /* The undisturbed save (through the counting driver) is right. */
    g_autoptr(SimWorkload) back = trace_native_load(path, &error);
    g_assert_no_error(error);
    g_assert_true(same_ops(back, new_w));
  }

  for (guint64 n = 1; n <= calls; n++) {
    g_assert_true(g_file_set_contents(path, old_bytes, (gssize)old_len,
                                      &error));
    arm(n, FAULT_ALL);
    gboolean ok = trace_native_save(new_w, path, &error);
    fault_reset();
    g_assert_cmpint(h5_open_objects(), ==, 0);
    g_autofree char *bytes = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(path, &bytes, &len, NULL));
    if (ok) {
      g_assert_no_error(error);
      /* Complete, and byte for byte what an undisturbed save writes. */
      g_assert_cmpmem(bytes, len, new_bytes, new_len);
    } else {
      g_assert_nonnull(error);
      g_assert_nonnull(strstr(error->message, "t.h5"));
      g_clear_error(&error);
      g_assert_cmpmem(bytes, len, old_bytes, old_len);
    }
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;
    while ((name = g_dir_read_name(d)) != NULL)
      g_assert_cmpstr(name, ==, "t.h5");
  }
  g_unlink(path);
  test_rmdir(dir);
}

static void test_native_load(void)
{
  fault_reset();
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "t.h5", NULL);
  GError *error = NULL;
  g_autoptr(SimWorkload) w = small_gpt(2, 2, 2);
  g_assert_true(trace_native_save(w, path, &error));
  arm(COUNT_ONLY, FAULT_ALL);
  {
    g_autoptr(SimWorkload) l = trace_native_load(path, &error);
    g_assert_no_error(error);
  }
  guint64 calls = fault_count();
  fault_reset();
  guint failures = 0;
  for (guint64 n = 1; n <= calls; n++) {
    arm(n, FAULT_ALL);
    g_autoptr(SimWorkload) l = trace_native_load(path, &error);
    fault_reset();
    g_assert_cmpint(h5_open_objects(), ==, 0);
    if (l == NULL) {
      failures++;
      g_assert_nonnull(error);
      g_assert_nonnull(strstr(error->message, "t.h5"));
      g_clear_error(&error);
    } else {
      g_assert_no_error(error);
      g_assert_true(same_ops(l, w));
    }
  }
  g_assert_cmpuint(failures, >, 0);
  g_unlink(path);
  test_rmdir(dir);
}

/* ---- importers and profiles: an error or the whole result -------------------- */

static void test_import(void)
{
  fault_reset();
  const char *paths[2] = { TEST_DATA("traces/two_rank_rank0.json"),
                           TEST_DATA("traces/two_rank_rank1.json") };
  g_autoptr(GpuCatalogue) cat = gpu_catalogue_new();
  TraceImportOptions opt;
  memset(&opt, 0, sizeof opt);
  opt.catalogue = cat;
  GError *error = NULL;
  arm(COUNT_ONLY, FAULT_ALL);
  g_autoptr(SimWorkload) ref = trace_import(paths, 2, &opt, &error);
  guint64 calls = fault_count();
  fault_reset();
  g_assert_no_error(error);
  g_assert_cmpuint(calls, >=, 6); /* 2 x (detect, open, read) + op arrays */
  for (guint64 n = 1; n <= calls; n++) {
    arm(n, FAULT_ALL);
    g_autoptr(SimWorkload) w = trace_import(paths, 2, &opt, &error);
    fault_reset();
    g_assert_null(w);
    g_assert_nonnull(error);
    g_assert_true(strstr(error->message, "injected fault") != NULL ||
                  strstr(error->message, "Input/output error") != NULL);
    g_clear_error(&error);
  }
}

static void test_profile(void)
{
  fault_reset();
  const char *path = TEST_DATA("profiles/bloom+a40_bf16.csv");
  GError *error = NULL;
  arm(COUNT_ONLY, FAULT_ALL);
  g_autoptr(Profile) ref = profile_load(path, &error);
  guint64 calls = fault_count();
  fault_reset();
  g_assert_no_error(error);
  g_assert_cmpuint(calls, ==, 2); /* open (io/input.h), read */
  for (guint64 n = 1; n <= calls; n++) {
    arm(n, FAULT_ALL);
    g_autoptr(Profile) p = profile_load(path, &error);
    fault_reset();
    g_assert_null(p);
    g_assert_error(error, PROFILE_ERROR, PROFILE_ERROR_IO);
    g_assert_nonnull(strstr(error->message, "bloom+a40_bf16.csv"));
    g_assert_nonnull(strstr(error->message, "injected fault"));
    g_clear_error(&error);
  }
}

int main(int argc, char **argv)
{
  /* The HDF5 failures below make HDF5 lose a few blocks on its own error
   * paths (see __lsan_default_suppressions); its shutdown at exit would
   * then print "infinite loop closing library".  Skip that shutdown. */
  H5dont_atexit();
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/fault/disarmed", test_disarmed);
  g_test_add_func("/fault/countdown", test_countdown);
  g_test_add_func("/fault/kinds", test_kinds);
  g_test_add_func("/fault/zero-and-log-only", test_zero_and_log_only);
  g_test_add_func("/fault/suspend", test_suspend);
  for (gsize i = 0; i < G_N_ELEMENTS(env_cases); i++) {
    g_autofree char *p = g_strdup_printf("/fault/env/%" G_GSIZE_FORMAT, i);
    g_test_add_data_func(p, &env_cases[i], test_env);
  }
  g_test_add_func("/fault/log", test_log);
  g_test_add_func("/fault/fork", test_fork);
  g_test_add_func("/fault/alloc", test_alloc);
  g_test_add_func("/fault/files", test_files);
  g_test_add_func("/fault/builder", test_builder);
  g_test_add_func("/fault/hdf5-driver", test_hdf5_driver);
  g_test_add_func("/fault/results-append", test_results_append);
  g_test_add_func("/fault/results-create", test_results_create);
  g_test_add_func("/fault/native-save", test_native_save);
  g_test_add_func("/fault/native-load", test_native_load);
  g_test_add_func("/fault/import", test_import);
  g_test_add_func("/fault/profile", test_profile);
  return g_test_run();
}
