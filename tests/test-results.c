/* tests/test-results.c -- HDF5 results tables: round trips, APPEND and
 * REPLACE, schema errors, unwritable paths, attributes, a crash that keeps
 * completed rows, SIGKILLs at random points of a writer (the file always
 * opens, in C and in h5py, with every completed row), forked children that
 * must not write, removing rows crash-safely, timelines (also from a real
 * engine run), and reading the file with h5py. */
#include "io/fault.h"
#include "io/results.h"
#include "io/results-private.h" /* RES_MAX_COLUMNS */
#include "run/session.h"
#include "models/net.h"
#include "traces/gpt.h"

#include <hdf5.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/testresults.h"
#include "tests/testutil.h"

/* ---- helpers ------------------------------------------------------------ */

#define I(n, v) { .name = (n), .type = RES_INT, .i = (v) }
#define F(n, v) { .name = (n), .type = RES_FLOAT, .f = (v) }
#define B(n, v) { .name = (n), .type = RES_BOOL, .i = (v) }
#define S(n, v) { .name = (n), .type = RES_STRING, .s = (v) }

/* Open HDF5 identifiers.  Every test compares the counts at its end with
 * those at its start, so a handle left open on any path (success or error)
 * fails the test.  (AddressSanitizer cannot see these leaks: HDF5 frees its
 * ids at exit.)  File objects (files, groups, datasets, attributes) are
 * counted by H5Fget_obj_count.  HDF5 1.10 has no public counter for
 * dataspaces, datatypes and property lists, so those are counted by asking
 * H5Iis_valid about every id the library has handed out: an id is the type
 * number above bit 56 and a serial number below it (H5Ipkg.h), and a fresh
 * probe id gives the highest serial so far.  H5Iis_valid is FALSE for
 * library-internal ids such as H5T_NATIVE_INT.  counting_works() checks
 * that this encoding still holds. */
typedef struct {
  gint64 n[4];
} HidCounts;

#define HID_ID_BITS 56

static gint64 count_valid_ids(H5I_type_t type, hid_t probe)
{
  hid_t top = probe & (((hid_t)1 << HID_ID_BITS) - 1);
  gint64 n = 0;
  for (hid_t serial = 0; serial <= top; serial++) {
    hid_t id = ((hid_t)type << HID_ID_BITS) | serial;
    if (id != probe && H5Iis_valid(id) > 0)
      n++;
  }
  return n;
}

static HidCounts hid_counts(void)
{
  HidCounts c;
  hid_t probe = H5Screate(H5S_SCALAR);
  c.n[0] = count_valid_ids(H5I_DATASPACE, probe);
  H5Sclose(probe);
  probe = H5Tcopy(H5T_NATIVE_INT);
  c.n[1] = count_valid_ids(H5I_DATATYPE, probe);
  H5Tclose(probe);
  probe = H5Pcreate(H5P_DATASET_XFER);
  c.n[2] = count_valid_ids(H5I_GENPROP_LST, probe);
  H5Pclose(probe);
  c.n[3] = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  return c;
}

static void assert_no_leaked_hids(const HidCounts *before)
{
  HidCounts after = hid_counts();
  for (guint i = 0; i < G_N_ELEMENTS(after.n); i++)
    g_assert_cmpint(after.n[i], ==, before->n[i]);
  g_assert_cmpint(after.n[3], ==, 0);
}

/* The id counting above sees an id left open, and its closing. */
static void test_hid_counting(void)
{
  HidCounts before = hid_counts();
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t type = H5Tcopy(H5T_NATIVE_DOUBLE);
  hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
  HidCounts during = hid_counts();
  g_assert_cmpint(during.n[0], ==, before.n[0] + 1);
  g_assert_cmpint(during.n[1], ==, before.n[1] + 1);
  g_assert_cmpint(during.n[2], ==, before.n[2] + 1);
  H5Sclose(space);
  H5Tclose(type);
  H5Pclose(plist);
  assert_no_leaked_hids(&before);
}

/* A scratch directory per test, with the results file path in it. */
typedef struct {
  char *dir;
  char *path;
  HidCounts hids;
} Fixture;

static void fixture_setup(Fixture *fx, gconstpointer data)
{
  fx->dir = test_tmpdir();
  fx->path = g_build_filename(fx->dir, "results.h5", NULL);
  fx->hids = hid_counts();
}

static void fixture_teardown(Fixture *fx, gconstpointer data)
{
  assert_no_leaked_hids(&fx->hids);
  test_rmdir(fx->dir);
  g_free(fx->path);
  g_free(fx->dir);
}

static ResTable *open_ok(const char *path, const char *table, ResMode mode)
{
  g_autoptr(GError) error = NULL;
  ResMeta meta = { "9.9.9", "scenarios/test.lua", "-- source\n", 42u, NULL, NULL };
  ResTable *t = res_table_open(path, table, mode, &meta, &error);
  g_assert_no_error(error);
  g_assert_nonnull(t);
  return t;
}

static void append_ok(ResTable *t, const ResValue *row, guint n)
{
  g_autoptr(GError) error = NULL;
  gboolean ok = res_table_append(t, row, n, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
}

static void close_ok(ResTable *t)
{
  g_autoptr(GError) error = NULL;
  gboolean ok = res_table_close(t, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
}

/* Bit-exact double comparison (NaN and -0.0 included). */
static void assert_same_double(double got, double want)
{
  g_assert_cmpmem(&got, sizeof got, &want, sizeof want);
}

static gboolean dir_is_empty(const char *dir)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  g_assert_nonnull(d);
  return g_dir_read_name(d) == NULL;
}

/* ---- round trip --------------------------------------------------------- */

static const char snowman[] = "policy \xe2\x98\x83 k\xc3\xa9rnel";

/* Rows with all four types; close; reopen in APPEND; more rows (columns in
 * another order, an int into the float column); every value reads back
 * exactly. */
static void test_roundtrip(Fixture *fx, gconstpointer data)
{
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  g_assert_cmpuint(res_table_rows(t), ==, 0);
  const ResValue r0[] = {
    I("run", 0), F("energy_j", 0.1), B("ok", 1), S("policy", "kernel"),
  };
  const ResValue r1[] = {
    I("run", G_MININT64), F("energy_j", -0.0), B("ok", 0), S("policy", ""),
  };
  const ResValue r2[] = {
    I("run", G_MAXINT64), F("energy_j", NAN), B("ok", 7), S("policy", snowman),
  };
  append_ok(t, r0, G_N_ELEMENTS(r0));
  append_ok(t, r1, G_N_ELEMENTS(r1));
  append_ok(t, r2, G_N_ELEMENTS(r2));
  g_assert_cmpuint(res_table_rows(t), ==, 3);
  close_ok(t);

  t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  g_assert_cmpuint(res_table_rows(t), ==, 3);
  const ResValue r3[] = {
    S("policy", "pass"), B("ok", 1), F("energy_j", 1e300), I("run", 3),
  };
  const ResValue r4[] = {
    I("energy_j", 123456789), S("policy", NULL), I("run", -4), B("ok", 0),
  };
  append_ok(t, r3, G_N_ELEMENTS(r3));
  append_ok(t, r4, G_N_ELEMENTS(r4));
  g_assert_cmpuint(res_table_rows(t), ==, 5);
  close_ok(t);

  g_autoptr(GPtrArray) rows = test_read_rows(fx->path, "runs");
  g_assert_cmpuint(rows->len, ==, 5);
  static const char *const order[] = { "run", "energy_j", "ok", "policy" };
  static const gint64 runs[] = { 0, G_MININT64, G_MAXINT64, 3, -4 };
  const double energy[] = { 0.1, -0.0, NAN, 1e300, 123456789.0 };
  static const gint64 oks[] = { 1, 0, 1, 1, 0 };
  static const char *const policy[] = { "kernel", "", snowman, "pass", "" };
  for (guint r = 0; r < rows->len; r++) {
    GPtrArray *row = g_ptr_array_index(rows, r);
    g_assert_cmpuint(row->len, ==, 4);
    /* Column order is the first row's. */
    for (guint c = 0; c < row->len; c++)
      g_assert_cmpstr(((ResValue *)g_ptr_array_index(row, c))->name, ==,
                      order[c]);
    g_assert_cmpint(test_cell(row, "run")->type, ==, RES_INT);
    g_assert_cmpint(test_cell(row, "run")->i, ==, runs[r]);
    g_assert_cmpint(test_cell(row, "energy_j")->type, ==, RES_FLOAT);
    assert_same_double(test_cell(row, "energy_j")->f, energy[r]);
    g_assert_cmpint(test_cell(row, "ok")->type, ==, RES_BOOL);
    g_assert_cmpint(test_cell(row, "ok")->i, ==, oks[r]);
    g_assert_cmpint(test_cell(row, "policy")->type, ==, RES_STRING);
    g_assert_cmpstr(test_cell(row, "policy")->s, ==, policy[r]);
  }
}

/* A table opened but never written has no rows and no dataset; reading a
 * missing table or file is RES_ERROR_IO. */
static void test_read_missing(Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_assert_null(res_table_read(fx->path, "runs", &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_IO);
  g_clear_error(&error);

  ResTable *t = open_ok(fx->path, "empty", RES_MODE_APPEND);
  close_ok(t);
  g_assert_null(res_table_read(fx->path, "empty", &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_IO);
  g_assert_nonnull(strstr(error->message, "empty"));
  g_clear_error(&error);

  t = open_ok(fx->path, "one", RES_MODE_APPEND);
  const ResValue r[] = { I("x", 1) };
  append_ok(t, r, 1);
  close_ok(t);
  g_assert_null(res_table_read(fx->path, "other", &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_IO);
}

/* REPLACE empties only its own table, and the new table may have other
 * columns. */
static void test_replace(Fixture *fx, gconstpointer data)
{
  const ResValue a[] = { I("step", 1), F("power_w", 250.5) };
  const ResValue b[] = { S("gpu", "A100"), I("count", 8) };
  ResTable *t = open_ok(fx->path, "a", RES_MODE_APPEND);
  append_ok(t, a, 2);
  append_ok(t, a, 2);
  close_ok(t);
  t = open_ok(fx->path, "b", RES_MODE_APPEND);
  append_ok(t, b, 2);
  close_ok(t);

  t = open_ok(fx->path, "a", RES_MODE_REPLACE);
  g_assert_cmpuint(res_table_rows(t), ==, 0);
  const ResValue a2[] = { B("done", 1) };
  append_ok(t, a2, 1);
  g_assert_cmpuint(res_table_rows(t), ==, 1);
  close_ok(t);

  g_autoptr(GPtrArray) ra = test_read_rows(fx->path, "a");
  g_assert_cmpuint(ra->len, ==, 1);
  GPtrArray *row = g_ptr_array_index(ra, 0);
  g_assert_cmpuint(row->len, ==, 1);
  g_assert_cmpint(test_cell(row, "done")->i, ==, 1);

  g_autoptr(GPtrArray) rb = test_read_rows(fx->path, "b");
  g_assert_cmpuint(rb->len, ==, 1);
  g_assert_cmpstr(test_cell(g_ptr_array_index(rb, 0), "gpu")->s, ==, "A100");

  /* REPLACE of a table that does not exist yet is a plain create. */
  t = open_ok(fx->path, "c", RES_MODE_REPLACE);
  append_ok(t, b, 2);
  close_ok(t);
  g_autoptr(GPtrArray) rc = test_read_rows(fx->path, "c");
  g_assert_cmpuint(rc->len, ==, 1);
}

/* Two tables of one file open at the same time, appends interleaved. */
static void test_two_tables(Fixture *fx, gconstpointer data)
{
  ResTable *t1 = open_ok(fx->path, "runs", RES_MODE_APPEND);
  ResTable *t2 = open_ok(fx->path, "gpus", RES_MODE_APPEND);
  for (gint64 i = 0; i < 300; i++) { /* more than one chunk */
    const ResValue r1[] = { I("run", i), F("time_s", i * 0.5) };
    const ResValue r2[] = { I("gpu", i), S("name", i % 2 ? "H100" : "A100"),
                            F("energy_j", i * 1.25) };
    append_ok(t1, r1, 2);
    if (i % 3 == 0)
      append_ok(t2, r2, 3);
  }
  g_assert_cmpuint(res_table_rows(t1), ==, 300);
  g_assert_cmpuint(res_table_rows(t2), ==, 100);
  close_ok(t1);
  close_ok(t2);

  g_autoptr(GPtrArray) r1 = test_read_rows(fx->path, "runs");
  g_autoptr(GPtrArray) r2 = test_read_rows(fx->path, "gpus");
  g_assert_cmpuint(r1->len, ==, 300);
  g_assert_cmpuint(r2->len, ==, 100);
  for (guint i = 0; i < r1->len; i++) {
    GPtrArray *row = g_ptr_array_index(r1, i);
    g_assert_cmpint(test_cell(row, "run")->i, ==, i);
    assert_same_double(test_cell(row, "time_s")->f, i * 0.5);
  }
  for (guint i = 0; i < r2->len; i++) {
    GPtrArray *row = g_ptr_array_index(r2, i);
    g_assert_cmpint(test_cell(row, "gpu")->i, ==, 3 * i);
    g_assert_cmpstr(test_cell(row, "name")->s, ==, (3 * i) % 2 ? "H100" : "A100");
    assert_same_double(test_cell(row, "energy_j")->f, 3 * i * 1.25);
  }
}

/* ---- schema errors ------------------------------------------------------ */

typedef struct {
  const char *name;
  ResValue row[4];
  guint n;
  const char *must_mention[3]; /* substrings of the message */
  gboolean after_reopen;       /* check against a schema read from file */
} SchemaCase;

/* The table's schema: id int64, energy_j float64, ok bool, gpu string. */
static const ResValue schema_first[] = {
  I("id", 1), F("energy_j", 2.5), B("ok", 1), S("gpu", "A100"),
};

static const SchemaCase schema_cases[] = {
  { "missing-column",
    { I("id", 1), F("energy_j", 2.5), S("gpu", "x") }, 3,
    { "missing column", "'ok'", "bool" }, FALSE },
  { "extra-column",
    { I("id", 1), F("energy_j", 2.5), B("ok", 1), S("gpux", "x") }, 4,
    { "unknown column", "'gpux'", NULL }, FALSE },
  { "string-into-int",
    { S("id", "seven"), F("energy_j", 2.5), B("ok", 1), S("gpu", "x") }, 4,
    { "'id'", "expects int64", "got string" }, FALSE },
  { "float-into-int-missing-column", /* no promotion for a bad row */
    { F("id", 1.5), F("energy_j", 2.5), B("ok", 1) }, 3,
    { "missing column", "'gpu'", NULL }, FALSE },
  { "bool-into-int",
    { B("id", 1), F("energy_j", 2.5), B("ok", 1), S("gpu", "x") }, 4,
    { "'id'", "expects int64", "got bool" }, FALSE },
  { "int-into-bool",
    { I("id", 1), F("energy_j", 2.5), I("ok", 1), S("gpu", "x") }, 4,
    { "'ok'", "expects bool", "got int64" }, FALSE },
  { "string-into-float",
    { I("id", 1), S("energy_j", "2.5"), B("ok", 1), S("gpu", "x") }, 4,
    { "'energy_j'", "expects float64", "got string" }, FALSE },
  { "duplicate-column",
    { I("id", 1), F("energy_j", 2.5), B("ok", 1), I("id", 2) }, 4,
    { "'id'", "twice", NULL }, FALSE },
  { "invalid-utf8",
    { I("id", 1), F("energy_j", 2.5), B("ok", 1), S("gpu", "\xff\xfe") }, 4,
    { "'gpu'", "UTF-8", NULL }, FALSE },
  { "reopened-missing-column",
    { I("id", 1), F("energy_j", 2.5), B("ok", 1) }, 3,
    { "missing column", "'gpu'", "string" }, TRUE },
  { "reopened-string-into-int",
    { S("id", "1"), F("energy_j", 2.5), B("ok", 1), S("gpu", "x") }, 4,
    { "'id'", "expects int64", "got string" }, TRUE },
};

/* A bad row is RES_ERROR_SCHEMA naming the column and types, leaves the
 * table as it was, and a good row still goes in afterwards. */
static void test_schema_error(Fixture *fx, gconstpointer data)
{
  const SchemaCase *c = data;
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  append_ok(t, schema_first, G_N_ELEMENTS(schema_first));
  if (c->after_reopen) {
    close_ok(t);
    t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  }

  g_autoptr(GError) error = NULL;
  g_assert_false(res_table_append(t, c->row, c->n, &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_SCHEMA);
  g_test_message("%s", error->message);
  for (guint i = 0; i < G_N_ELEMENTS(c->must_mention); i++)
    if (c->must_mention[i] != NULL)
      g_assert_nonnull(strstr(error->message, c->must_mention[i]));
  g_assert_nonnull(strstr(error->message, fx->path));
  g_assert_nonnull(strstr(error->message, "runs"));
  g_assert_cmpuint(res_table_rows(t), ==, 1);

  append_ok(t, schema_first, G_N_ELEMENTS(schema_first));
  close_ok(t);
  g_autoptr(GPtrArray) rows = test_read_rows(fx->path, "runs");
  g_assert_cmpuint(rows->len, ==, 2);
}

/* First rows that cannot define a table, and invalid table names. */
static void test_bad_definitions(Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  g_assert_false(res_table_append(t, NULL, 0, &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_SCHEMA);
  g_clear_error(&error);
  const ResValue dup[] = { I("a", 1), F("a", 2.0) };
  g_assert_false(res_table_append(t, dup, 2, &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_SCHEMA);
  g_assert_nonnull(strstr(error->message, "'a'"));
  g_clear_error(&error);
  const ResValue noname[] = { I("", 1) };
  g_assert_false(res_table_append(t, noname, 1, &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_SCHEMA);
  g_clear_error(&error);
  /* Still undefined: a good first row now fixes the columns. */
  const ResValue good[] = { F("a", 2.0) };
  append_ok(t, good, 1);
  close_ok(t);

  static const char *const bad_names[] = { "", "a/b", "/abs", "." };
  for (guint i = 0; i < G_N_ELEMENTS(bad_names); i++) {
    g_assert_null(res_table_open(fx->path, bad_names[i], RES_MODE_APPEND,
                                 NULL, &error));
    g_assert_error(error, RES_ERROR, RES_ERROR_SCHEMA);
    g_clear_error(&error);
  }
}

/* ---- unwritable paths --------------------------------------------------- */

/* A path in a directory that does not exist: RES_ERROR_IO naming the path,
 * and nothing is created. */
static void test_unwritable_nodir(Fixture *fx, gconstpointer data)
{
  g_autofree char *missing = g_build_filename(fx->dir, "no-such-dir", NULL);
  g_autofree char *path = g_build_filename(missing, "r.h5", NULL);
  g_autoptr(GError) error = NULL;
  g_assert_null(res_table_open(path, "runs", RES_MODE_APPEND, NULL, &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_IO);
  g_test_message("%s", error->message);
  g_assert_nonnull(strstr(error->message, path));
  g_assert_false(g_file_test(missing, G_FILE_TEST_EXISTS));
  g_assert_true(dir_is_empty(fx->dir));
}

/* A directory as the path: RES_ERROR_IO, the directory is left alone. */
static void test_unwritable_isdir(Fixture *fx, gconstpointer data)
{
  g_autofree char *sub = g_build_filename(fx->dir, "sub", NULL);
  g_assert_cmpint(g_mkdir(sub, 0755), ==, 0);
  g_autoptr(GError) error = NULL;
  g_assert_null(res_table_open(sub, "runs", RES_MODE_REPLACE, NULL, &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_IO);
  g_assert_nonnull(strstr(error->message, sub));
  g_assert_true(g_file_test(sub, G_FILE_TEST_IS_DIR));
  g_assert_true(dir_is_empty(sub));
  g_assert_cmpint(g_rmdir(sub), ==, 0);
  g_assert_true(dir_is_empty(fx->dir));

  g_clear_error(&error);
  g_assert_null(res_table_read(fx->dir, "runs", &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_IO);
}

/* An existing file that is not HDF5: RES_ERROR_IO, the file is untouched. */
static void test_not_hdf5(Fixture *fx, gconstpointer data)
{
  static const char text[] = "stage,instruction,frequency,time,energy\n";
  g_assert_true(g_file_set_contents(fx->path, text, -1, NULL));
  g_autoptr(GError) error = NULL;
  g_assert_null(res_table_open(fx->path, "runs", RES_MODE_APPEND, NULL,
                               &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_IO);
  g_test_message("%s", error->message);
  g_autofree char *after = NULL;
  g_assert_true(g_file_get_contents(fx->path, &after, NULL, NULL));
  g_assert_cmpstr(after, ==, text);
  g_clear_error(&error);
  g_assert_null(res_table_read(fx->path, "runs", &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_IO);
  g_unlink(fx->path);
}

/* A dataset that is not a results table (not compound) is
 * RES_ERROR_SCHEMA, for APPEND and for read. */
static void test_foreign_dataset(Fixture *fx, gconstpointer data)
{
  hid_t file = H5Fcreate(fx->path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t group =
    H5Gcreate2(file, "results", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t dims[1] = { 3 };
  hid_t space = H5Screate_simple(1, dims, NULL);
  hid_t dset = H5Dcreate2(group, "runs", H5T_NATIVE_INT, space, H5P_DEFAULT,
                          H5P_DEFAULT, H5P_DEFAULT);
  g_assert_cmpint(file, >=, 0);
  g_assert_cmpint(dset, >=, 0);
  H5Dclose(dset);
  H5Sclose(space);
  H5Gclose(group);
  H5Fclose(file);

  g_autoptr(GError) error = NULL;
  g_assert_null(res_table_open(fx->path, "runs", RES_MODE_APPEND, NULL,
                               &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_SCHEMA);
  g_clear_error(&error);
  g_assert_null(res_table_read(fx->path, "runs", &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_SCHEMA);
  /* The existing file is not removed on error. */
  g_assert_true(g_file_test(fx->path, G_FILE_TEST_IS_REGULAR));
  /* REPLACE takes the name over. */
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_REPLACE);
  const ResValue r[] = { I("x", 5) };
  append_ok(t, r, 1);
  close_ok(t);
  g_autoptr(GPtrArray) rows = test_read_rows(fx->path, "runs");
  g_assert_cmpuint(rows->len, ==, 1);
}

/* ---- attributes and layout ---------------------------------------------- */

static char *read_string_attr(hid_t obj, const char *name)
{
  hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
  g_assert_cmpint(attr, >=, 0);
  hid_t ftype = H5Aget_type(attr);
  g_assert_cmpint(H5Tget_class(ftype), ==, H5T_STRING);
  g_assert_cmpint(H5Tis_variable_str(ftype), >, 0);
  g_assert_cmpint(H5Tget_cset(ftype), ==, H5T_CSET_UTF8);
  char *value = NULL;
  g_assert_cmpint(H5Aread(attr, ftype, &value), >=, 0);
  char *copy = g_strdup(value);
  H5free_memory(value);
  H5Tclose(ftype);
  H5Aclose(attr);
  return copy;
}

/* A 1-D string array attribute as a NULL-terminated strv (an empty one for
 * a null dataspace). */
static GStrv read_strings_attr(hid_t obj, const char *name)
{
  hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
  g_assert_cmpint(attr, >=, 0);
  hid_t ftype = H5Aget_type(attr);
  hid_t space = H5Aget_space(attr);
  g_autoptr(GStrvBuilder) b = g_strv_builder_new();
  if (H5Sget_simple_extent_type(space) != H5S_NULL) {
    hssize_t n = H5Sget_simple_extent_npoints(space);
    g_autofree char **v = g_new0(char *, n);
    g_assert_cmpint(H5Aread(attr, ftype, v), >=, 0);
    for (hssize_t i = 0; i < n; i++) {
      g_strv_builder_add(b, v[i]);
      H5free_memory(v[i]);
    }
  }
  H5Sclose(space);
  H5Tclose(ftype);
  H5Aclose(attr);
  return g_strv_builder_end(b);
}

static void test_attributes(Fixture *fx, gconstpointer data)
{
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  const ResValue r[] = {
    I("time_ns", 1), F("time_s", 1e-9), F("energy_j", 3.0), F("power_w", 400),
    I("clock_mhz", 1410), F("util_pct", 55), F("bw_gbps", 900),
    F("perf_tflops", 312), S("policy", "x"), B("ok", 1), B("capped", 0),
  };
  append_ok(t, r, G_N_ELEMENTS(r));
  close_ok(t);

  hid_t file = H5Fopen(fx->path, H5F_ACC_RDONLY, H5P_DEFAULT);
  g_assert_cmpint(file, >=, 0);
  g_autofree char *version = read_string_attr(file, "joulesim_version");
  g_autofree char *scenario = read_string_attr(file, "scenario");
  g_autofree char *source = read_string_attr(file, "scenario_source");
  g_autofree char *created = read_string_attr(file, "created");
  g_assert_cmpstr(version, ==, "9.9.9");
  g_assert_cmpstr(scenario, ==, "scenarios/test.lua");
  g_assert_cmpstr(source, ==, "-- source\n");
  g_assert_true(g_regex_match_simple(
    "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$", created, 0, 0));
  g_autoptr(GDateTime) when = g_date_time_new_from_iso8601(created, NULL);
  g_assert_nonnull(when);

  hid_t attr = H5Aopen(file, "seed", H5P_DEFAULT);
  hid_t stype = H5Aget_type(attr);
  g_assert_cmpint(H5Tget_class(stype), ==, H5T_INTEGER);
  g_assert_cmpint(H5Tget_sign(stype), ==, H5T_SGN_NONE);
  g_assert_cmpuint(H5Tget_size(stype), ==, 8);
  guint64 seed = 0;
  g_assert_cmpint(H5Aread(attr, H5T_NATIVE_UINT64, &seed), >=, 0);
  g_assert_cmpuint(seed, ==, 42u);
  H5Tclose(stype);
  H5Aclose(attr);

  hid_t dset = H5Dopen2(file, "/results/runs", H5P_DEFAULT);
  g_assert_cmpint(dset, >=, 0);
  g_auto(GStrv) columns = read_strings_attr(dset, "columns");
  g_auto(GStrv) units = read_strings_attr(dset, "units");
  g_auto(GStrv) bools = read_strings_attr(dset, "bool_columns");
  static const char *const want_cols[] = {
    "time_ns",  "time_s",  "energy_j",    "power_w", "clock_mhz", "util_pct",
    "bw_gbps", "perf_tflops", "policy", "ok",      "capped",    NULL,
  };
  static const char *const want_units[] = {
    "ns", "s", "J", "W", "MHz", "%", "GB/s", "TFLOP/s", "", "", "", NULL,
  };
  static const char *const want_bools[] = { "ok", "capped", NULL };
  g_assert_cmpstrv(columns, want_cols);
  g_assert_cmpstrv(units, want_units);
  g_assert_cmpstrv(bools, want_bools);

  /* Layout: compound, 1-D, unlimited, chunked 256 rows, no filter (a
   * compressed chunk moves when a row is appended, which a kill can
   * corrupt: io/results.c, Durability). */
  hid_t ftype = H5Dget_type(dset);
  g_assert_cmpint(H5Tget_class(ftype), ==, H5T_COMPOUND);
  g_assert_cmpint(H5Tget_nmembers(ftype), ==, G_N_ELEMENTS(r));
  hid_t okt = H5Tget_member_type(ftype, 9);
  g_assert_cmpuint(H5Tget_size(okt), ==, 1);
  H5Tclose(okt);
  H5Tclose(ftype);
  hid_t space = H5Dget_space(dset);
  hsize_t dims[1], maxdims[1];
  g_assert_cmpint(H5Sget_simple_extent_dims(space, dims, maxdims), ==, 1);
  g_assert_cmpuint(dims[0], ==, 1);
  g_assert_true(maxdims[0] == H5S_UNLIMITED);
  H5Sclose(space);
  hid_t dcpl = H5Dget_create_plist(dset);
  g_assert_cmpint(H5Pget_layout(dcpl), ==, H5D_CHUNKED);
  hsize_t chunk[1] = { 0 };
  g_assert_cmpint(H5Pget_chunk(dcpl, 1, chunk), ==, 1);
  g_assert_cmpuint(chunk[0], ==, 256);
  g_assert_cmpint(H5Pget_nfilters(dcpl), ==, 0);
  H5Pclose(dcpl);
  H5Dclose(dset);
  H5Fclose(file);

  /* A table without booleans has an empty bool_columns. */
  t = open_ok(fx->path, "nobool", RES_MODE_APPEND);
  const ResValue r2[] = { I("x", 1) };
  append_ok(t, r2, 1);
  close_ok(t);
  file = H5Fopen(fx->path, H5F_ACC_RDONLY, H5P_DEFAULT);
  dset = H5Dopen2(file, "/results/nobool", H5P_DEFAULT);
  g_auto(GStrv) nobools = read_strings_attr(dset, "bool_columns");
  g_assert_cmpuint(g_strv_length(nobools), ==, 0);
  H5Dclose(dset);
  H5Fclose(file);
}

/* File attributes come from the first open; meta may be NULL. */
static void test_attributes_default(Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  ResTable *t = res_table_open(fx->path, "runs", RES_MODE_APPEND, NULL, &error);
  g_assert_no_error(error);
  close_ok(t);
  hid_t file = H5Fopen(fx->path, H5F_ACC_RDONLY, H5P_DEFAULT);
  g_autofree char *scenario = read_string_attr(file, "scenario");
  g_autofree char *version = read_string_attr(file, "joulesim_version");
  g_assert_cmpstr(scenario, ==, "");
  g_assert_cmpstr(version, !=, "");
  guint64 seed = 1;
  hid_t attr = H5Aopen(file, "seed", H5P_DEFAULT);
  H5Aread(attr, H5T_NATIVE_UINT64, &seed);
  g_assert_cmpuint(seed, ==, 0);
  H5Aclose(attr);
  H5Fclose(file);
}

/* ---- durability --------------------------------------------------------- */

/* The child writes three rows and dies without closing anything (_exit
 * skips HDF5's own atexit close); the parent finds all three rows.  (No
 * fixture: the child must not make a scratch directory it cannot remove.) */
static void test_crash_keeps_rows(void)
{
  if (g_test_subprocess()) {
    const char *path = g_getenv("JOULESIM_TEST_RESULTS");
    g_assert_nonnull(path);
    ResTable *t = open_ok(path, "runs", RES_MODE_APPEND);
    for (gint64 i = 0; i < 3; i++) {
      const ResValue r[] = { I("i", i), S("s", "row") };
      append_ok(t, r, 2);
    }
    _exit(0);
  }
  Fixture fx;
  fixture_setup(&fx, NULL);
  g_setenv("JOULESIM_TEST_RESULTS", fx.path, TRUE);
  g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
  g_unsetenv("JOULESIM_TEST_RESULTS");

  g_autoptr(GPtrArray) rows = test_read_rows(fx.path, "runs");
  g_assert_cmpuint(rows->len, ==, 3);
  for (guint i = 0; i < 3; i++)
    g_assert_cmpint(test_cell(g_ptr_array_index(rows, i), "i")->i, ==, i);
  ResTable *t = open_ok(fx.path, "runs", RES_MODE_APPEND);
  g_assert_cmpuint(res_table_rows(t), ==, 3);
  close_ok(t);
  fixture_teardown(&fx, NULL);
}

/* Rows are visible to a reader while the writer is still open. */
static void test_read_while_open(Fixture *fx, gconstpointer data)
{
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  const ResValue r[] = { I("i", 1) };
  append_ok(t, r, 1);
  append_ok(t, r, 1);
  g_autoptr(GPtrArray) rows = test_read_rows(fx->path, "runs");
  g_assert_cmpuint(rows->len, ==, 2);
  close_ok(t);
}

/* ---- wide rows (REDTEAM finding 13) -------------------------------------- */

/* RES_MAX_COLUMNS columns are a table (named short enough to fit HDF5's
 * 64 KiB header message); one more is refused up front, before any HDF5
 * work, with a message naming the limit, and the table stays usable. */
static void test_too_many_columns(Fixture *fx, gconstpointer data)
{
  guint n = RES_MAX_COLUMNS + 1;
  g_autofree ResValue *row = g_new0(ResValue, n);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
  for (guint i = 0; i < n; i++) {
    g_ptr_array_add(names, g_strdup_printf("%x", i));
    row[i] = (ResValue){ .name = g_ptr_array_index(names, i), .type = RES_INT,
                         .i = i };
  }
  ResTable *t = open_ok(fx->path, "wide", RES_MODE_APPEND);
  GError *error = NULL;
  g_assert_false(res_table_append(t, row, n, &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_SCHEMA);
  g_assert_nonnull(strstr(error->message, "at most 1024"));
  g_clear_error(&error);
  append_ok(t, row, RES_MAX_COLUMNS);
  g_assert_cmpuint(res_table_n_columns(t), ==, RES_MAX_COLUMNS);
  close_ok(t);
  g_autoptr(GPtrArray) rows = test_read_rows(fx->path, "wide");
  g_assert_cmpuint(rows->len, ==, 1);
}

/* ---- a second writer (REDTEAM finding 20) -------------------------------- */

/* While another process has the file open for writing, opening it (to
 * write or to read) says so, not just "Resource temporarily unavailable". */
static void test_second_writer(Fixture *fx, gconstpointer data)
{
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  const ResValue r[] = { I("i", 1) };
  append_ok(t, r, 1);
  close_ok(t);
  int up[2], down[2];
  g_assert_cmpint(pipe(up), ==, 0);
  g_assert_cmpint(pipe(down), ==, 0);
  pid_t pid = fork();
  g_assert_cmpint(pid, >=, 0);
  if (pid == 0) {
    ResTable *ct = res_table_open(fx->path, "runs", RES_MODE_APPEND, NULL, NULL);
    char c = ct != NULL ? 'y' : 'n';
    (void)!write(up[1], &c, 1);
    (void)!read(down[0], &c, 1); /* until the parent is done */
    _exit(0);
  }
  char c = 0;
  g_assert_cmpint(read(up[0], &c, 1), ==, 1);
  g_assert_cmpint(c, ==, 'y');
  GError *error = NULL;
  g_assert_null(res_table_open(fx->path, "runs", RES_MODE_APPEND, NULL, &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_IO);
  g_assert_nonnull(strstr(error->message, "another process has it open for writing"));
  g_clear_error(&error);
  g_assert_null(res_table_read(fx->path, "runs", &error));
  g_assert_nonnull(strstr(error->message, "another process has it open for writing"));
  g_clear_error(&error);
  (void)!write(down[1], "x", 1);
  int status = 0;
  waitpid(pid, &status, 0);
  close(up[0]); close(up[1]); close(down[0]); close(down[1]);
}

/* ---- a full disk (REDTEAM finding 10) ------------------------------------ */

/* A full disk, injected as the failure (ENOSPC) of the space an append
 * reserves before HDF5 writes: the append fails cleanly, rows() does not
 * count it, the file reads whole at once, a retry writes the row once,
 * and the table closes. */
static void test_disk_full(Fixture *fx, gconstpointer data)
{
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  g_autofree char *pad = g_strnfill(300, 'z');
  GError *error = NULL;
  gint64 i = 0;
  for (; i < 10; i++) {
    const ResValue r[] = { I("i", i), S("s", pad) };
    append_ok(t, r, 2);
  }
  /* The next reservation fails: when the rows outgrow the space reserved
   * so far. */
  g_assert_true(fault_configure(1, FAULT_WRITE, FALSE, &error));
  gboolean failed = FALSE;
  for (; i < 20000; i++) {
    const ResValue r[] = { I("i", i), S("s", pad) };
    if (!res_table_append(t, r, 2, &error)) {
      failed = TRUE;
      break;
    }
  }
  fault_reset();
  g_assert_true(failed);
  g_assert_error(error, RES_ERROR, RES_ERROR_IO);
  g_assert_nonnull(strstr(error->message, "cannot reserve"));
  g_assert_nonnull(strstr(error->message, "No space left on device"));
  g_clear_error(&error);
  g_assert_cmpuint(res_table_rows(t), ==, (guint64)i);
  {
    g_autoptr(GPtrArray) rows = res_table_read_rows(t, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(rows->len, ==, (guint)i);
  }
  const ResValue r[] = { I("i", i), S("s", pad) };
  append_ok(t, r, 2);
  g_assert_cmpuint(res_table_rows(t), ==, (guint64)i + 1);
  close_ok(t);
  g_autoptr(GPtrArray) rows = test_read_rows(fx->path, "runs");
  g_assert_cmpuint(rows->len, ==, (guint)i + 1);
  for (guint k = 0; k < rows->len; k++)
    g_assert_cmpint(test_cell(g_ptr_array_index(rows, k), "i")->i, ==, k);
}

/* A flush that fails (an injected HDF5 driver fault, here at every
 * flush in turn until one append fails): the row is not counted, the
 * table takes no more rows (HDF5 1.10 cannot flush that file again, and a
 * retry would duplicate the row if it reached the disk), it closes
 * without a crash, and the file reopens with each row once. */
static void test_failed_flush(Fixture *fx, gconstpointer data)
{
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  const ResValue r0[] = { I("i", 0), S("s", "row") };
  append_ok(t, r0, 2);
  GError *error = NULL;
  gint64 i = 1;
  gboolean failed = FALSE;
  for (guint64 n = 1; n < 200 && !failed; n++, i++) {
    g_assert_true(fault_configure(n, FAULT_HDF5, FALSE, &error));
    const ResValue r[] = { I("i", i), S("s", "row") };
    failed = !res_table_append(t, r, 2, &error);
    fault_reset();
    if (failed)
      break;
  }
  g_assert_true(failed);
  g_assert_error(error, RES_ERROR, RES_ERROR_IO);
  g_clear_error(&error);
  g_assert_cmpuint(res_table_rows(t), ==, (guint64)i);
  const ResValue r[] = { I("i", i), S("s", "retry") };
  g_assert_false(res_table_append(t, r, 2, &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_IO);
  g_assert_nonnull(strstr(error->message, "an earlier write failed"));
  g_clear_error(&error);
  g_assert_cmpuint(res_table_rows(t), ==, (guint64)i);
  res_table_close(t, NULL);
  t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  guint64 n = res_table_rows(t);
  g_assert_true(n == (guint64)i || n == (guint64)i + 1);
  close_ok(t);
  g_autoptr(GPtrArray) rows = test_read_rows(fx->path, "runs");
  g_assert_cmpuint(rows->len, ==, n);
  for (guint k = 0; k < rows->len; k++)
    g_assert_cmpint(test_cell(g_ptr_array_index(rows, k), "i")->i, ==, k);
}

/* ---- h5py --------------------------------------------------------------- */

#define PYTHON "/usr/bin/python3"

static gboolean python_has_h5py(void)
{
  const char *argv[] = { PYTHON, "-c", "import h5py", NULL };
  int status = 0;
  if (!g_file_test(PYTHON, G_FILE_TEST_IS_EXECUTABLE))
    return FALSE;
  if (!g_spawn_sync(NULL, (char **)argv, NULL,
                    G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL,
                    NULL, NULL, NULL, NULL, &status, NULL))
    return FALSE;
  return g_spawn_check_wait_status(status, NULL);
}

/* h5py reads the table as a structured array, strings as str (or bytes,
 * by h5py version), booleans as 0/1, and the attributes as str. */
static const char h5py_script[] =
  "import sys, h5py\n"
  "def s(x):\n"
  "    return x.decode('utf-8') if isinstance(x, bytes) else str(x)\n"
  "f = h5py.File(sys.argv[1], 'r')\n"
  "d = f['results/runs']\n"
  "assert d.shape == (3,), d.shape\n"
  "assert list(d.dtype.names) == ['run', 'energy_j', 'ok', 'policy']\n"
  "assert [int(x) for x in d['run']] == [0, 1, 2]\n"
  "assert [float(x) for x in d['energy_j']] == [0.5, 1.5, 2.5]\n"
  "assert [int(x) for x in d['ok']] == [1, 0, 1]\n"
  "assert [s(x) for x in d['policy']] == ['kernel', 'pass', "
  "'\\u2603']\n"
  "assert [s(x) for x in d.attrs['units']] == ['', 'J', '', '']\n"
  "assert [s(x) for x in d.attrs['bool_columns']] == ['ok']\n"
  "assert s(f.attrs['scenario']) == 'scenarios/test.lua'\n"
  "assert int(f.attrs['seed']) == 42\n"
  "print('h5py-ok')\n";

static void test_h5py(Fixture *fx, gconstpointer data)
{
  if (!python_has_h5py()) {
    g_test_skip(PYTHON " has no h5py");
    return;
  }
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  const ResValue r0[] = { I("run", 0), F("energy_j", 0.5), B("ok", 1),
                          S("policy", "kernel") };
  const ResValue r1[] = { I("run", 1), F("energy_j", 1.5), B("ok", 0),
                          S("policy", "pass") };
  const ResValue r2[] = { I("run", 2), F("energy_j", 2.5), B("ok", 1),
                          S("policy", "\xe2\x98\x83") };
  append_ok(t, r0, 4);
  append_ok(t, r1, 4);
  append_ok(t, r2, 4);
  close_ok(t);

  const char *argv[] = { PYTHON, "-c", h5py_script, fx->path, NULL };
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  int status = 0;
  g_autoptr(GError) error = NULL;
  g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL,
                             NULL, &out, &err, &status, &error));
  g_assert_no_error(error);
  if (!g_spawn_check_wait_status(status, NULL))
    g_error("h5py check failed:\n%s%s", out, err);
  g_assert_cmpstr(out, ==, "h5py-ok\n");
}

/* ---- files: mode, no temporaries ----------------------------------------- */

/* A new file gets the umask's permissions (not mkstemp's 0600) and no
 * temporary file is left next to it. */
static void test_new_file(Fixture *fx, gconstpointer data)
{
  mode_t old = umask(022);
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  umask(old);
  const ResValue r[] = { I("x", 1) };
  append_ok(t, r, 1);
  close_ok(t);
  struct stat st;
  g_assert_cmpint(stat(fx->path, &st), ==, 0);
  g_assert_cmpint(st.st_mode & 0777, ==, 0644);
  g_autoptr(GDir) d = g_dir_open(fx->dir, 0, NULL);
  const char *n;
  guint files = 0;
  while ((n = g_dir_read_name(d)) != NULL) {
    g_assert_cmpstr(n, ==, "results.h5");
    files++;
  }
  g_assert_cmpuint(files, ==, 1);
}

/* A new file appears with its first table's first row, not before (see
 * Durability in io/results.c), and two tables opened on it before that
 * share it; a file opened and closed without a row still appears. */
static void test_new_file_first_row(Fixture *fx, gconstpointer data)
{
  ResTable *a = open_ok(fx->path, "runs", RES_MODE_APPEND);
  ResTable *b = open_ok(fx->path, "gpus", RES_MODE_APPEND);
  g_assert_false(g_file_test(fx->path, G_FILE_TEST_EXISTS));
  const ResValue r[] = { I("x", 7) };
  append_ok(b, r, 1);
  g_assert_true(g_file_test(fx->path, G_FILE_TEST_EXISTS));
  g_autoptr(GPtrArray) rows = test_read_rows(fx->path, "gpus");
  g_assert_cmpuint(rows->len, ==, 1);
  g_assert_cmpint(test_cell(g_ptr_array_index(rows, 0), "x")->i, ==, 7);
  append_ok(a, r, 1);
  close_ok(a);
  close_ok(b);
  g_autoptr(GPtrArray) ra = test_read_rows(fx->path, "runs");
  g_assert_cmpuint(ra->len, ==, 1);

  g_autofree char *empty = g_build_filename(fx->dir, "empty.h5", NULL);
  ResTable *e = open_ok(empty, "runs", RES_MODE_APPEND);
  g_assert_false(g_file_test(empty, G_FILE_TEST_EXISTS));
  close_ok(e);
  g_assert_true(res_file_probe(empty));
  g_unlink(empty);
}

/* ---- kill -9 ------------------------------------------------------------- */

/* The extent of dataset `dset` in the file at `path`, read with the
 * HDF5 C API directly (not through the results reader). */
static guint64 dataset_extent(const char *path, const char *dset)
{
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  g_assert_cmpint(f, >=, 0);
  hid_t d = H5Dopen2(f, dset, H5P_DEFAULT);
  g_assert_cmpint(d, >=, 0);
  hid_t sp = H5Dget_space(d);
  hsize_t dims[1] = { 0 };
  g_assert_cmpint(H5Sget_simple_extent_dims(sp, dims, NULL), ==, 1);
  H5Sclose(sp);
  H5Dclose(d);
  H5Fclose(f);
  return dims[0];
}

/* The writer of the kill test: opens `path`, appends 20 rows (int i
 * counting from 0 over the whole file, a float, a string), closes, and
 * again, until killed. */
static G_GNUC_NORETURN void kill_writer(const char *path)
{
  gint64 i = 0;
  for (;;) {
    GError *error = NULL;
    ResTable *t = res_table_open(path, "runs", RES_MODE_APPEND, NULL, &error);
    if (t == NULL)
      _exit(3);
    i = (gint64)res_table_rows(t);
    for (int k = 0; k < 20; k++, i++) {
      char text[64];
      g_snprintf(text, sizeof text, "row %" G_GINT64_FORMAT " of the kill test",
                 i);
      const ResValue r[] = { I("i", i), F("energy_j", i * 0.25), S("s", text),
                             B("ok", i % 2) };
      if (!res_table_append(t, r, G_N_ELEMENTS(r), &error))
        _exit(4);
    }
    if (!res_table_close(t, &error))
      _exit(5);
  }
}

/* The rows of a kill-test file are exactly 0..n-1 with their values. */
static void check_kill_rows(const GPtrArray *rows)
{
  for (guint r = 0; r < rows->len; r++) {
    GPtrArray *row = g_ptr_array_index(rows, r);
    char text[64];
    g_snprintf(text, sizeof text, "row %u of the kill test", r);
    g_assert_cmpint(test_cell(row, "i")->i, ==, r);
    assert_same_double(test_cell(row, "energy_j")->f, r * 0.25);
    g_assert_cmpstr(test_cell(row, "s")->s, ==, text);
    g_assert_cmpint(test_cell(row, "ok")->i, ==, r % 2);
  }
}

/* SIGKILLs a writer at 60 points: half spread over its first 60 ms from
 * its start (file creation included), half over the 60 ms after its file
 * appeared (appends, closes and reopens; so that a slow first fsync on a
 * loaded machine does not leave the test without files).  Checks each
 * file as the kill left it and after the next writer's open: its rows are
 * exactly 0..n-1 with their values (no lost, torn or zero-filled row).
 * Then h5py reads every file and finds the same row counts.  (io/results.c, Durability, gives the figures of
 * a longer run of the same test.) */
static void test_kill_loop(Fixture *fx, gconstpointer data)
{
  const guint runs = 60;
  g_autoptr(GString) expect = g_string_new(NULL);
  guint files = 0, rows_total = 0, torn = 0, unrecovered = 0;
  for (guint k = 0; k < runs; k++) {
    g_autofree char *name = g_strdup_printf("kill-%02u.h5", k);
    g_autofree char *path = g_build_filename(fx->dir, name, NULL);
    pid_t pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0)
      kill_writer(path);
    if (k % 2 == 0) {
      /* Anywhere in its first 60 ms: creating the file included. */
      g_usleep(k * 1000);
    } else {
      /* After its file appeared (however long the first row and its
       * fsync take on a loaded machine), during its appends, closes and
       * reopens. */
      for (guint w = 0; w < 20000 && !g_file_test(path, G_FILE_TEST_EXISTS);
           w++)
        g_usleep(500);
      g_usleep(k * 1000);
    }
    kill(pid, SIGKILL);
    int status = 0;
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
      g_error("writer %u ended with status %d before the kill", k, status);
    if (!g_file_test(path, G_FILE_TEST_EXISTS))
      continue; /* killed before the file was complete: no file at all */
    files++;
    /* Read as the kill left it.  A kill inside the flush of an append
     * that grew the file can leave data past the end the superblock
     * records (see Durability in io/results.c): reading may then fail
     * with HDF5's "... EOA" (or, for the last row alone, return the rows
     * before it); anything else is a bug. */
    GError *error = NULL;
    GPtrArray *rows = res_table_read(path, "runs", &error);
    guint before = G_MAXUINT;
    if (rows == NULL) {
      if (strstr(error->message, "EOA") != NULL) {
        torn++;
      } else if (!g_error_matches(error, RES_ERROR, RES_ERROR_IO) ||
                 strstr(error->message, "no such table") == NULL) {
        g_error("kill %u: %s", k, error->message);
      }
      g_clear_error(&error); /* the read after recovery reuses it */
    } else {
      check_kill_rows(rows);
      before = rows->len;
      torn += dataset_extent(path, "/results/runs") != rows->len;
      g_ptr_array_unref(rows);
    }
    /* The next writer's open recovers it: every row then reads, exactly,
     * none that read before is lost, and only the row being appended at
     * the kill may be gone. */
    ResTable *t = open_ok(path, "runs", RES_MODE_APPEND);
    close_ok(t);
    rows = res_table_read(path, "runs", &error);
    if (rows == NULL && strstr(error->message, "EOA") != NULL) {
      /* Known bug (io/results.c, Durability): a heap collection whose
       * growth was recorded past what reached the file; taking back the
       * file's size does not cover it.  ~1 run in 40. */
      g_test_message("kill %u, after recovery: %s", k, error->message);
      g_clear_error(&error);
      unrecovered++;
      continue;
    }
    g_assert_no_error(error);
    check_kill_rows(rows);
    if (before != G_MAXUINT)
      g_assert_cmpuint(rows->len, >=, before);
    g_assert_cmpuint(dataset_extent(path, "/results/runs"), ==, rows->len);
    rows_total += rows->len;
    g_string_append_printf(expect, "%s %u\n", path, rows->len);
    g_ptr_array_unref(rows);
  }
  g_test_message("%u kills, %u files, %u rows, %u read past the recorded "
                 "end of file before recovery", runs, files, rows_total, torn);
  if (unrecovered > 0)
    g_test_incomplete("known bug: a file a kill left past the recorded end "
                      "of file that the next writer's open did not recover "
                      "(io/results.c, Durability)");

  g_assert_cmpuint(files, >=, runs / 2); /* every odd run has its file */
  g_assert_cmpuint(rows_total, >, 0);

  if (!python_has_h5py()) {
    g_test_message("h5py part skipped: " PYTHON " has no h5py");
    return;
  }
  static const char script[] =
    "import sys, h5py\n"
    "for line in sys.stdin:\n"
    "    path, n = line.split()\n"
    "    with h5py.File(path, 'r') as f:\n"
    "        got = f['results/runs'].shape[0] if 'runs' in f['results'] "
    "else 0\n"
    "        assert got == int(n), (path, got, n)\n"
    "        if got:\n"
    "            assert list(f['results/runs']['i']) == list(range(got))\n"
    "print('ok')\n";
  g_autofree char *list = g_build_filename(fx->dir, "expect.txt", NULL);
  g_assert_true(g_file_set_contents(list, expect->str, -1, NULL));
  g_autofree char *cmd = g_strdup_printf("%s -c \"$0\" < '%s'", PYTHON, list);
  const char *argv[] = { "/bin/sh", "-c", cmd, script, NULL };
  g_autofree char *out = NULL, *err = NULL;
  int st = 0;
  g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL,
                             NULL, &out, &err, &st, NULL));
  if (!g_spawn_check_wait_status(st, NULL))
    g_error("h5py after the kills: %s%s", out, err);
  g_assert_cmpstr(out, ==, "ok\n");
  for (guint k = 0; k < runs; k++) {
    g_autofree char *name = g_strdup_printf("kill-%02u.h5", k);
    g_autofree char *path = g_build_filename(fx->dir, name, NULL);
    g_unlink(path);
  }
}

/* tests/data/results/torn-last-row.h5 is a file the kill test left: its
 * writer was killed inside the flush of row 140, whose string went to a
 * new global-heap collection, after the collection and the row were
 * written and before the superblock recorded the file's new end, so HDF5
 * cannot read row 140 (h5py cannot read the table).  The reader returns
 * rows 0..139; the writer's next open takes back what was written past
 * the recorded end (as `h5clear --increment=0` would) and row 140 reads
 * again, whole, and appending goes on from row 141. */
static void test_torn_last_row(Fixture *fx, gconstpointer data)
{
  g_autofree char *src = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(TEST_DATA("results/torn-last-row.h5"),
                                    &src, &len, NULL));
  g_assert_true(g_file_set_contents(fx->path, src, (gssize)len, NULL));
  g_assert_cmpuint(dataset_extent(fx->path, "/results/runs"), ==, 141);
  g_autoptr(GPtrArray) rows = test_read_rows(fx->path, "runs");
  g_assert_cmpuint(rows->len, ==, 140);
  check_kill_rows(rows);
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  g_assert_cmpuint(res_table_rows(t), ==, 141);
  const ResValue r[] = { I("i", 141), F("energy_j", 141 * 0.25),
                         S("s", "row 141 of the kill test"), B("ok", 1) };
  append_ok(t, r, G_N_ELEMENTS(r));
  close_ok(t);
  g_autoptr(GPtrArray) again = test_read_rows(fx->path, "runs");
  g_assert_cmpuint(again->len, ==, 142);
  check_kill_rows(again);
}

/* ---- fork ---------------------------------------------------------------- */

/* A child that inherits an open table cannot write through it, and freeing
 * it there does not touch the parent's file. */
static void test_forked_child(Fixture *fx, gconstpointer data)
{
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  const ResValue r[] = { I("i", 0), S("who", "parent") };
  append_ok(t, r, 2);
  pid_t pid = fork();
  g_assert_cmpint(pid, >=, 0);
  if (pid == 0) {
    GError *error = NULL;
    const ResValue c[] = { I("i", 99), S("who", "child") };
    int rc = res_table_append(t, c, 2, &error) ? 1 : 0;
    if (rc == 0 && !g_error_matches(error, RES_ERROR, RES_ERROR_IO))
      rc = 2;
    if (rc == 0 && strstr(error->message, "forked") == NULL)
      rc = 3;
    g_clear_error(&error);
    if (rc == 0 && res_table_set_note(t, "x", NULL, 0, &error))
      rc = 4;
    g_clear_error(&error);
    res_table_free(t); /* frees memory only */
    res_release_files_in_child();
    _exit(rc);
  }
  int status = 0;
  g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
  g_assert_true(WIFEXITED(status));
  g_assert_cmpint(WEXITSTATUS(status), ==, 0);
  const ResValue r2[] = { I("i", 1), S("who", "parent") };
  append_ok(t, r2, 2);
  close_ok(t);
  g_autoptr(GPtrArray) rows = test_read_rows(fx->path, "runs");
  g_assert_cmpuint(rows->len, ==, 2);
  for (guint i = 0; i < 2; i++)
    g_assert_cmpstr(test_cell(g_ptr_array_index(rows, i), "who")->s, ==, "parent");
}

/* ---- columns and notes ---------------------------------------------------- */

static void test_columns_and_notes(Fixture *fx, gconstpointer data)
{
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  g_assert_cmpuint(res_table_n_columns(t), ==, 0);
  g_autoptr(GError) error = NULL;
  g_assert_false(res_table_set_note(t, "keys", NULL, 0, &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_IO);
  g_clear_error(&error);
  const ResValue r[] = { S("policy", "max"), I("tp", 2), F("time_s", 1.0),
                         B("ok", 1) };
  append_ok(t, r, 4);
  g_assert_cmpuint(res_table_n_columns(t), ==, 4);
  static const ResType types[] = { RES_STRING, RES_INT, RES_FLOAT, RES_BOOL };
  for (guint i = 0; i < 4; i++) {
    g_assert_cmpstr(res_table_column_name(t, i), ==, r[i].name);
    g_assert_cmpint(res_table_column_type(t, i), ==, types[i]);
  }
  static const char *const keys[] = { "policy", "tp" };
  g_assert_true(res_table_set_note(t, "sweep_keys", keys, 2, &error));
  g_assert_no_error(error);
  static const char *const keys2[] = { "tp" };
  g_assert_true(res_table_set_note(t, "sweep_keys", keys2, 1, &error));
  close_ok(t);

  /* Reopened: the columns come from the file. */
  t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  g_assert_cmpuint(res_table_n_columns(t), ==, 4);
  g_assert_cmpstr(res_table_column_name(t, 2), ==, "time_s");
  close_ok(t);
  hid_t file = H5Fopen(fx->path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t dset = H5Dopen2(file, "/results/runs", H5P_DEFAULT);
  g_auto(GStrv) got = read_strings_attr(dset, "sweep_keys");
  g_assert_cmpstrv(got, keys2);
  H5Dclose(dset);
  H5Fclose(file);
}

/* ---- removing rows --------------------------------------------------------- */

static gboolean keep_even(GPtrArray *row, gpointer data)
{
  guint *calls = data;
  (*calls)++;
  return test_cell(row, "i")->i % 2 == 0;
}

static gboolean keep_none(GPtrArray *row, gpointer data)
{
  return FALSE;
}

static gboolean keep_all(GPtrArray *row, gpointer data)
{
  return TRUE;
}

/* Filtering keeps the kept rows in order (strings included), keeps the
 * attributes, and the table stays appendable; filtering everything out
 * deletes the table so that new columns can follow. */
static void test_filter(Fixture *fx, gconstpointer data)
{
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  for (gint64 i = 0; i < 300; i++) {
    char s[32];
    g_snprintf(s, sizeof s, "row-%" G_GINT64_FORMAT, i);
    const ResValue r[] = { I("i", i), S("s", s), F("time_s", i * 0.5) };
    append_ok(t, r, 3);
  }
  close_ok(t);
  g_autoptr(GError) error = NULL;
  guint calls = 0;
  guint64 removed = 0;
  g_assert_true(res_table_filter(fx->path, "runs", keep_even, &calls,
                                 &removed, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(calls, ==, 300);
  g_assert_cmpuint(removed, ==, 150);
  g_assert_true(res_table_filter(fx->path, "runs", keep_all, NULL, &removed,
                                 &error));
  g_assert_cmpuint(removed, ==, 0);
  {
    g_autoptr(GPtrArray) rows = test_read_rows(fx->path, "runs");
    g_assert_cmpuint(rows->len, ==, 150);
    for (guint r = 0; r < rows->len; r++) {
      GPtrArray *row = g_ptr_array_index(rows, r);
      char s[32];
      g_snprintf(s, sizeof s, "row-%u", 2 * r);
      g_assert_cmpint(test_cell(row, "i")->i, ==, 2 * r);
      g_assert_cmpstr(test_cell(row, "s")->s, ==, s);
    }
  }
  hid_t file = H5Fopen(fx->path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t dset = H5Dopen2(file, "/results/runs", H5P_DEFAULT);
  g_auto(GStrv) units = read_strings_attr(dset, "units");
  static const char *const want_units[] = { "", "", "s", NULL };
  g_assert_cmpstrv(units, want_units);
  g_assert_cmpint(H5Lexists(file, "/results/.runs.rewrite", H5P_DEFAULT), ==,
                  0);
  H5Dclose(dset);
  H5Fclose(file);

  t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  g_assert_cmpuint(res_table_rows(t), ==, 150);
  const ResValue r[] = { I("i", 1000), S("s", "new"), F("time_s", 1.0) };
  append_ok(t, r, 3);
  close_ok(t);

  g_assert_true(res_table_filter(fx->path, "runs", keep_none, NULL, &removed,
                                 &error));
  g_assert_cmpuint(removed, ==, 151);
  g_assert_null(res_table_read(fx->path, "runs", &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_IO);
  g_clear_error(&error);
  t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  const ResValue other[] = { S("other", "columns") };
  append_ok(t, other, 1);
  close_ok(t);

  g_assert_false(res_table_filter(fx->path, "nope", keep_all, NULL, NULL,
                                  &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_IO);
}

/* The two states a kill can leave a rewrite in are finished or undone by
 * the next open, and read correctly before that. */
static void test_rewrite_recovery(Fixture *fx, gconstpointer data)
{
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  for (gint64 i = 0; i < 5; i++) {
    const ResValue r[] = { I("i", i) };
    append_ok(t, r, 1);
  }
  close_ok(t);

  /* Killed before the swap: a partial copy next to the intact table. */
  hid_t file = H5Fopen(fx->path, H5F_ACC_RDWR, H5P_DEFAULT);
  g_assert_cmpint(H5Ocopy(file, "/results/runs", file,
                          "/results/.runs.rewrite", H5P_DEFAULT, H5P_DEFAULT),
                  >=, 0);
  hid_t tmp = H5Dopen2(file, "/results/.runs.rewrite", H5P_DEFAULT);
  hsize_t two[1] = { 2 };
  g_assert_cmpint(H5Dset_extent(tmp, two), >=, 0);
  H5Dclose(tmp);
  H5Fclose(file);
  {
    g_autoptr(GPtrArray) rows = test_read_rows(fx->path, "runs");
    g_assert_cmpuint(rows->len, ==, 5);
  }
  t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  g_assert_cmpuint(res_table_rows(t), ==, 5);
  close_ok(t);
  file = H5Fopen(fx->path, H5F_ACC_RDONLY, H5P_DEFAULT);
  g_assert_cmpint(H5Lexists(file, "/results/.runs.rewrite", H5P_DEFAULT), ==,
                  0);
  H5Fclose(file);

  /* Killed between unlinking the old table and moving the new one. */
  file = H5Fopen(fx->path, H5F_ACC_RDWR, H5P_DEFAULT);
  g_assert_cmpint(H5Ocopy(file, "/results/runs", file,
                          "/results/.runs.rewrite", H5P_DEFAULT, H5P_DEFAULT),
                  >=, 0);
  tmp = H5Dopen2(file, "/results/.runs.rewrite", H5P_DEFAULT);
  hsize_t three[1] = { 3 };
  g_assert_cmpint(H5Dset_extent(tmp, three), >=, 0);
  H5Dclose(tmp);
  g_assert_cmpint(H5Ldelete(file, "/results/runs", H5P_DEFAULT), >=, 0);
  H5Fclose(file);
  {
    g_autoptr(GPtrArray) rows = test_read_rows(fx->path, "runs");
    g_assert_cmpuint(rows->len, ==, 3);
  }
  t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  g_assert_cmpuint(res_table_rows(t), ==, 3);
  close_ok(t);
  g_autoptr(GPtrArray) rows = test_read_rows(fx->path, "runs");
  g_assert_cmpuint(rows->len, ==, 3);
  for (guint r = 0; r < 3; r++)
    g_assert_cmpint(test_cell(g_ptr_array_index(rows, r), "i")->i, ==, r);
}

/* ---- timelines ------------------------------------------------------------- */

static const double tl_t0[] = { 0.0, 0.5, 0.5, 2.0 };
static const double tl_p0[] = { 80.0, 350.5, 300.0, 90.0 };
static const double tl_f0[] = { 1410, 1410, 1200, 1410 };
static const double tl_t1[] = { 0.0, 1.0 };
static const double tl_p1[] = { 85.0, 400.0 };

static void test_timeline_roundtrip(Fixture *fx, gconstpointer data)
{
  const ResTimelineGpu gpus[] = {
    { 3, 4, tl_t0, tl_p0, tl_f0 },
    { 0, 2, tl_t1, tl_p1, NULL },
    { 7, 0, NULL, NULL, NULL },
  };
  ResMeta meta = { "9.9.9", "scenarios/t.lua", "-- t\n", 5u, NULL, NULL };
  g_autoptr(GError) error = NULL;
  g_assert_true(res_timeline_write(fx->path, "run-1", gpus, 3, FALSE, &meta,
                                   &error));
  g_assert_no_error(error);
  /* A results table in the same file is independent. */
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  const ResValue r[] = { I("x", 1) };
  append_ok(t, r, 1);
  /* ... and a timeline may be written while it is open. */
  g_assert_true(res_timeline_write(fx->path, "run-2", gpus + 1, 1, FALSE,
                                   NULL, &error));
  g_assert_no_error(error);
  close_ok(t);

  g_autoptr(GPtrArray) rows = res_timeline_read(fx->path, "run-1", &error);
  g_assert_no_error(error);
  g_assert_cmpuint(rows->len, ==, 6);
  static const gint64 want_gpu[] = { 3, 3, 3, 3, 0, 0 };
  const double want_t[] = { 0.0, 0.5, 0.5, 2.0, 0.0, 1.0 };
  const double want_p[] = { 80.0, 350.5, 300.0, 90.0, 85.0, 400.0 };
  for (guint i = 0; i < rows->len; i++) {
    GPtrArray *row = g_ptr_array_index(rows, i);
    g_assert_cmpint(test_cell(row, "gpu")->i, ==, want_gpu[i]);
    assert_same_double(test_cell(row, "time_s")->f, want_t[i]);
    assert_same_double(test_cell(row, "power_w")->f, want_p[i]);
    if (i < 4)
      assert_same_double(test_cell(row, "sm_mhz")->f, tl_f0[i]);
    else
      g_assert_true(isnan(test_cell(row, "sm_mhz")->f));
  }

  /* Layout: compressed, with units; the file's attributes from meta. */
  hid_t file = H5Fopen(fx->path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t dset = H5Dopen2(file, "/timelines/run-1", H5P_DEFAULT);
  g_auto(GStrv) units = read_strings_attr(dset, "units");
  static const char *const want_units[] = { "", "s", "W", "MHz", NULL };
  g_assert_cmpstrv(units, want_units);
  g_autofree char *interp = read_string_attr(dset, "interpolation");
  g_assert_cmpstr(interp, ==, "previous");
  hid_t dcpl = H5Dget_create_plist(dset);
  unsigned flags = 0, level = 0;
  size_t nelmts = 1;
  g_assert_cmpint(H5Pget_filter_by_id2(dcpl, H5Z_FILTER_DEFLATE, &flags,
                                       &nelmts, &level, 0, NULL, NULL),
                  >=, 0);
  g_assert_cmpuint(level, ==, 4);
  H5Pclose(dcpl);
  H5Dclose(dset);
  g_autofree char *scenario = read_string_attr(file, "scenario");
  g_assert_cmpstr(scenario, ==, "scenarios/t.lua");
  g_assert_cmpint(H5Lexists(file, "/timelines/.run-1.partial", H5P_DEFAULT),
                  ==, 0);
  H5Fclose(file);

  /* Existing name: refused unless replace. */
  g_assert_false(res_timeline_write(fx->path, "run-1", gpus + 1, 1, FALSE,
                                    NULL, &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_EXISTS);
  g_assert_nonnull(strstr(error->message, "run-1"));
  g_clear_error(&error);
  g_assert_true(res_timeline_write(fx->path, "run-1", gpus + 1, 1, TRUE, NULL,
                                   &error));
  g_autoptr(GPtrArray) again = res_timeline_read(fx->path, "run-1", &error);
  g_assert_cmpuint(again->len, ==, 2);

  g_assert_null(res_timeline_read(fx->path, "nope", &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_IO);
}

typedef struct {
  const char *name;
  const char *run;
  guint case_id;
  gint code;
  const char *must;
} TimelineBad;

static const TimelineBad timeline_bad[] = {
  { "gpu-twice", "r", 0, RES_ERROR_SCHEMA, "GPU 3 given twice" },
  { "time-backwards", "r", 1, RES_ERROR_SCHEMA, "before the previous" },
  { "time-nan", "r", 2, RES_ERROR_SCHEMA, "not finite" },
  { "no-power", "r", 3, RES_ERROR_SCHEMA, "no power_w" },
  { "bad-name", "a/b", 4, RES_ERROR_SCHEMA, "invalid name" },
  { "reserved-name", ".hidden", 4, RES_ERROR_SCHEMA, "invalid name" },
};

/* Bad input is refused naming the GPU and sample, and writes nothing. */
static void test_timeline_bad(Fixture *fx, gconstpointer data)
{
  const TimelineBad *c = data;
  static const double back[] = { 0.0, 2.0, 1.0 };
  static const double nan_t[] = { 0.0, NAN };
  static const double p3[] = { 1, 2, 3 };
  ResTimelineGpu gpus[2] = { { 3, 2, tl_t1, tl_p1, NULL },
                             { 3, 2, tl_t1, tl_p1, NULL } };
  guint n = 2;
  switch (c->case_id) {
  case 1: gpus[1] = (ResTimelineGpu){ 4, 3, back, p3, NULL }; break;
  case 2: gpus[1] = (ResTimelineGpu){ 4, 2, nan_t, p3, NULL }; break;
  case 3: gpus[1] = (ResTimelineGpu){ 4, 2, tl_t1, NULL, NULL }; break;
  case 4: n = 1; break;
  }
  g_autoptr(GError) error = NULL;
  g_assert_false(res_timeline_write(fx->path, c->run, gpus, n, FALSE, NULL,
                                    &error));
  g_assert_error(error, RES_ERROR, c->code);
  g_test_message("%s", error->message);
  g_assert_nonnull(strstr(error->message, c->must));
  g_assert_false(g_file_test(fx->path, G_FILE_TEST_EXISTS));
}

typedef struct {
  GArray **t, **p, **f; /* per GPU */
  guint n_gpus;
  double idle_w;
} TimelineRec;

/* Engine observer: a sample at each op's start (its power and clock) and,
 * when the GPU has nothing after it, idle power at its end. */
static void timeline_observe(gpointer data, const SimOpRecord *rec)
{
  TimelineRec *tr = data;
  g_assert_cmpuint(rec->gpu, <, tr->n_gpus);
  double t0 = rec->start_ns * 1e-9, t1 = rec->end_ns * 1e-9;
  double f = rec->clocks.sm_mhz;
  g_array_append_val(tr->t[rec->gpu], t0);
  g_array_append_val(tr->p[rec->gpu], rec->power_w);
  g_array_append_val(tr->f[rec->gpu], f);
  g_array_append_val(tr->t[rec->gpu], t1);
  g_array_append_val(tr->p[rec->gpu], tr->idle_w);
  g_array_append_val(tr->f[rec->gpu], f);
}

typedef struct {
  double t, p, f;
} Sample;

static gint compare_samples(gconstpointer a, gconstpointer b, gpointer data)
{
  const Sample *x = a, *y = b;
  return x->t < y->t ? -1 : x->t > y->t;
}

/* Simulates GPT-3 125M (TP2 PP2, 4 microbatches, one iteration) on 4 A100s
 * with the observer above, the way js.simulate{timeline} will, and writes
 * the timeline as `run` in `path`.  Returns the samples written; *end_s
 * gets the run's simulated time. */
static guint64 write_engine_timeline(const char *path, const char *run,
                                     double *end_s)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsSession) s = js_session_new(3);
  GptConfig cfg;
  gpt_config_init(&cfg);
  g_assert_true(gpt_config_set_model(&cfg, "gpt3-125m", &error));
  cfg.tp = 2;
  cfg.pp = 2;
  cfg.microbatches = 4;
  cfg.seq_len = 512;
  const GpuSpec *gpu = gpu_catalogue_lookup(s->catalogue, "A100-SXM4-80GB",
                                            &error);
  g_assert_no_error(error);
  g_autoptr(SimWorkload) w = gpt_generate(&cfg, gpu, &error);
  g_assert_no_error(error);
  g_autoptr(NetSpec) net = net_preset("dgx-a100", &error);
  g_autoptr(Cluster) c = cluster_new(gpu, net, 4, 8, &error);
  g_assert_no_error(error);

  TimelineRec tr = { NULL, NULL, NULL, 4, gpu->idle_power_w.v };
  tr.t = g_new0(GArray *, 4);
  tr.p = g_new0(GArray *, 4);
  tr.f = g_new0(GArray *, 4);
  for (guint g = 0; g < 4; g++) {
    tr.t[g] = g_array_new(FALSE, FALSE, sizeof(double));
    tr.p[g] = g_array_new(FALSE, FALSE, sizeof(double));
    tr.f[g] = g_array_new(FALSE, FALSE, sizeof(double));
  }
  JsRunOptions opt = { 0 };
  opt.iterations = 1;
  opt.seed = 3;
  opt.switch_latency_ms = -1;
  opt.observer = timeline_observe;
  opt.observer_data = &tr;
  DvfsPolicy pol = { 0 }; /* DVFS_MAX: the GPUs' own clocks */
  g_autoptr(SimResult) r = js_simulate(s, c, w, &pol, &opt, &error);
  g_assert_no_error(error);
  g_assert_nonnull(r);
  *end_s = r->time_ns * 1e-9;

  /* Time order per GPU (its streams overlap). */
  ResTimelineGpu gpus[4];
  double *mem[4][3];
  guint64 samples = 0;
  for (guint g = 0; g < 4; g++) {
    guint n = tr.t[g]->len;
    g_autofree Sample *buf = g_new(Sample, MAX(n, 1));
    for (guint i = 0; i < n; i++)
      buf[i] = (Sample){ g_array_index(tr.t[g], double, i),
                         g_array_index(tr.p[g], double, i),
                         g_array_index(tr.f[g], double, i) };
    g_qsort_with_data(buf, (gint)n, sizeof(Sample), compare_samples, NULL);
    for (guint k = 0; k < 3; k++)
      mem[g][k] = g_new(double, MAX(n, 1));
    for (guint i = 0; i < n; i++) {
      mem[g][0][i] = buf[i].t;
      mem[g][1][i] = buf[i].p;
      mem[g][2][i] = buf[i].f;
    }
    gpus[g] = (ResTimelineGpu){ g, n, mem[g][0], mem[g][1], mem[g][2] };
    samples += n;
    g_array_unref(tr.t[g]);
    g_array_unref(tr.p[g]);
    g_array_unref(tr.f[g]);
  }
  g_free(tr.t);
  g_free(tr.p);
  g_free(tr.f);
  g_assert_true(res_timeline_write(path, run, gpus, 4, FALSE, NULL, &error));
  g_assert_no_error(error);
  for (guint g = 0; g < 4; g++)
    for (guint k = 0; k < 3; k++)
      g_free(mem[g][k]);
  return samples;
}

/* A timeline from a real replay reads back whole: GPUs in order, time
 * non-decreasing within each and inside the run, power in the GPU's
 * range. */
static void test_timeline_from_engine(Fixture *fx, gconstpointer data)
{
  double end_s = 0;
  guint64 samples = write_engine_timeline(fx->path, "gpt3-125m-tp2-pp2",
                                          &end_s);
  g_assert_cmpuint(samples, >, 1000);
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) rows =
    res_timeline_read(fx->path, "gpt3-125m-tp2-pp2", &error);
  g_assert_no_error(error);
  g_assert_cmpuint(rows->len, ==, samples);
  gint64 prev_gpu = -1;
  double prev_t = 0;
  for (guint k = 0; k < rows->len; k++) {
    GPtrArray *row = g_ptr_array_index(rows, k);
    gint64 g = test_cell(row, "gpu")->i;
    double t = test_cell(row, "time_s")->f, p = test_cell(row, "power_w")->f;
    g_assert_cmpint(g, >=, prev_gpu);
    if (g == prev_gpu)
      g_assert_cmpfloat(t, >=, prev_t);
    g_assert_cmpfloat(t, >=, 0);
    g_assert_cmpfloat(t, <=, end_s + 1e-9);
    g_assert_cmpfloat(p, >=, 0);
    g_assert_cmpfloat(p, <=, 1000);
    prev_gpu = g;
    prev_t = t;
  }
  g_assert_cmpint(prev_gpu, ==, 3);
}

/* h5py reads a timeline as a structured array. */
static void test_timeline_h5py(Fixture *fx, gconstpointer data)
{
  if (!python_has_h5py()) {
    g_test_skip(PYTHON " has no h5py");
    return;
  }
  const ResTimelineGpu gpus[] = { { 3, 4, tl_t0, tl_p0, tl_f0 } };
  g_autoptr(GError) error = NULL;
  g_assert_true(res_timeline_write(fx->path, "r", gpus, 1, FALSE, NULL,
                                   &error));
  static const char script[] =
    "import sys, h5py\n"
    "with h5py.File(sys.argv[1], 'r') as f:\n"
    "    d = f['timelines/r']\n"
    "    assert list(d.dtype.names) == ['gpu', 'time_s', 'power_w', "
    "'sm_mhz']\n"
    "    assert list(d['power_w']) == [80.0, 350.5, 300.0, 90.0]\n"
    "    assert int(d.attrs['n_gpus']) == 1\n"
    "print('ok')\n";
  const char *argv[] = { PYTHON, "-c", script, fx->path, NULL };
  g_autofree char *out = NULL, *err = NULL;
  int st = 0;
  g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL,
                             NULL, &out, &err, &st, NULL));
  if (!g_spawn_check_wait_status(st, NULL))
    g_error("h5py: %s%s", out, err);
  g_assert_cmpstr(out, ==, "ok\n");
}

/* ---- scenarios/plot.py ------------------------------------------------------ */

static gboolean python_has(const char *modules)
{
  g_autofree char *code = g_strdup_printf("import %s", modules);
  const char *argv[] = { PYTHON, "-c", code, NULL };
  int status = 0;
  if (!g_file_test(PYTHON, G_FILE_TEST_IS_EXECUTABLE))
    return FALSE;
  if (!g_spawn_sync(NULL, (char **)argv, NULL,
                    G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL,
                    NULL, NULL, NULL, NULL, &status, NULL))
    return FALSE;
  return g_spawn_check_wait_status(status, NULL);
}

/* plot.py finds every kind of figure it knows in one file: saving vs
 * slowdown and energy by class (a policy table), a frontier, measured vs
 * predicted, and power over time (a timeline from a real replay); each is
 * a PNG.  The tables hold made-up numbers shaped like the real ones.  Set
 * JOULESIM_TEST_FIGURES=DIR to keep the figures for a look. */
static void test_plot(Fixture *fx, gconstpointer data)
{
  if (!python_has("h5py, matplotlib")) {
    g_test_skip(PYTHON " lacks h5py or matplotlib (make plot-deps)");
    return;
  }
  ResTable *t = open_ok(fx->path, "policies", RES_MODE_APPEND);
  static const char *const pols[] = { "max", "fixed-1200", "fixed-1005" };
  static const char *const configs[] = { "gpt3-1.3b tp2", "gpt3-13b tp8" };
  for (guint c = 0; c < 2; c++)
    for (guint k = 0; k < 3; k++) {
      double scale = 1.0 + c, slow = 1.0 + 0.04 * k * k, save = 1.0 - 0.07 * k;
      const ResValue r[] = {
        S("config", configs[c]), S("policy", pols[k]), I("tp", 2 + 6 * c),
        F("iteration_time_s", 2.0 * scale * slow),
        F("energy_per_iteration_j", 5000.0 * scale * save),
        F("gemm_j", 3500.0 * scale * save), F("attention_j", 600.0 * scale),
        F("comm_j", 500.0 * scale), F("blocked_j", 300.0 * scale),
        F("idle_j", 100.0 * scale),
      };
      append_ok(t, r, G_N_ELEMENTS(r));
    }
  close_ok(t);
  t = open_ok(fx->path, "perseus_frontier", RES_MODE_APPEND);
  for (guint i = 0; i < 12; i++) {
    double x = 10.0 + i;
    const ResValue r[] = { S("label", "gpt3-2.7b pp4"), F("time_s", x),
                           F("energy_j", 9000.0 + 40000.0 / (x - 8.0)) };
    append_ok(t, r, 3);
  }
  close_ok(t);
  t = open_ok(fx->path, "validation", RES_MODE_APPEND);
  for (guint st = 0; st < 2; st++)
    for (guint f = 0; f < 8; f++) {
      double mhz = 900 + 75 * f, k = st ? 2.0 : 1.0;
      const ResValue r[] = {
        S("stage", st ? "backward" : "forward"), F("freq_mhz", mhz),
        F("measured_time_s", k * 1410.0 / mhz * 0.1),
        F("predicted_time_s", k * (1410.0 / mhz * 0.098 + 0.002)),
        F("measured_energy_j", k * (30 + 0.00002 * mhz * mhz)),
        F("predicted_energy_j", k * (31 + 0.000019 * mhz * mhz)),
      };
      append_ok(t, r, G_N_ELEMENTS(r));
    }
  close_ok(t);
  double end_s = 0;
  write_engine_timeline(fx->path, "gpt3-125m-tp2-pp2", &end_s);

  const char *keep = g_getenv("JOULESIM_TEST_FIGURES");
  g_autofree char *figs =
    keep != NULL ? g_strdup(keep) : g_build_filename(fx->dir, "figures", NULL);
  const char *argv[] = { PYTHON, "scenarios/plot.py", fx->path, "-o", figs,
                         NULL };
  g_autofree char *out = NULL, *err = NULL;
  int st = 0;
  g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL,
                             NULL, &out, &err, &st, NULL));
  if (!g_spawn_check_wait_status(st, NULL))
    g_error("plot.py failed: %s%s", out, err);
  static const char *const want[] = {
    "saving_policies.png", "by_class_policies.png",
    "frontier_perseus_frontier.png", "validation_validation.png",
    "power_gpt3-125m-tp2-pp2.png",
  };
  g_auto(GStrv) lines = g_strsplit(g_strstrip(out), "\n", -1);
  g_assert_cmpuint(g_strv_length(lines), ==, G_N_ELEMENTS(want));
  for (guint i = 0; i < G_N_ELEMENTS(want); i++) {
    g_autofree char *path = g_build_filename(figs, want[i], NULL);
    g_assert_true(g_strv_contains((const char *const *)lines, path));
    g_autofree char *png = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(path, &png, &len, NULL));
    g_assert_cmpuint(len, >, 10000);
    g_assert_cmpmem(png, 8, "\x89PNG\r\n\x1a\n", 8);
    if (keep == NULL)
      g_unlink(path);
  }
  if (keep == NULL)
    g_rmdir(figs);
}

/* ---- promotion and run ids (issue 28) ------------------------------------ */

/* Column `name` of row r of rows. */
static const ResValue *cell(GPtrArray *rows, guint r, const char *name)
{
  GPtrArray *row = g_ptr_array_index(rows, r);
  for (guint i = 0; i < row->len; i++) {
    const ResValue *v = g_ptr_array_index(row, i);
    if (strcmp(v->name, name) == 0)
      return v;
  }
  return NULL;
}

/* A first row { budget = 0 } typed the column int64 and { budget = 0.01 }
 * was an error that ended the run.  Now the column becomes float64, the
 * rows before keep their values (0 -> 0.0, 7 -> 7.0), the row goes in, a
 * later int goes in as a float, a note survives, and reopening reads a
 * float column.  A second float column is promoted the same way. */
static void test_promote(Fixture *fx, gconstpointer data)
{
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  append_ok(t, (ResValue[]){ I("budget", 0), I("n", 1), S("p", "a") }, 3);
  append_ok(t, (ResValue[]){ I("budget", 7), I("n", 2), S("p", "b") }, 3);
  const char *keys[] = { "budget" };
  g_autoptr(GError) error = NULL;
  g_assert_true(res_table_set_note(t, "sweep_keys", keys, 1, &error));
  g_assert_no_error(error);
  g_assert_cmpint(res_table_column_type(t, 0), ==, RES_INT);
  append_ok(t, (ResValue[]){ F("budget", 0.01), I("n", 3), S("p", "c") }, 3);
  g_assert_cmpint(res_table_column_type(t, 0), ==, RES_FLOAT);
  g_assert_cmpint(res_table_column_type(t, 1), ==, RES_INT);
  g_assert_cmpuint(res_table_rows(t), ==, 3);
  append_ok(t, (ResValue[]){ I("budget", 2), I("n", 4), S("p", "d") }, 3);
  close_ok(t);

  t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  g_assert_cmpint(res_table_column_type(t, 0), ==, RES_FLOAT);
  append_ok(t, (ResValue[]){ F("budget", 3.5), F("n", 0.5), S("p", "e") }, 3);
  g_assert_cmpint(res_table_column_type(t, 1), ==, RES_FLOAT);
  close_ok(t);

  g_autoptr(GPtrArray) rows = res_table_read(fx->path, "runs", &error);
  g_assert_no_error(error);
  g_assert_cmpuint(rows->len, ==, 5);
  const double budget[] = { 0, 7, 0.01, 2, 3.5 };
  const double n[] = { 1, 2, 3, 4, 0.5 };
  const char *p[] = { "a", "b", "c", "d", "e" };
  for (guint r = 0; r < 5; r++) {
    g_assert_cmpint(cell(rows, r, "budget")->type, ==, RES_FLOAT);
    assert_same_double(cell(rows, r, "budget")->f, budget[r]);
    assert_same_double(cell(rows, r, "n")->f, n[r]);
    g_assert_cmpstr(cell(rows, r, "p")->s, ==, p[r]);
  }
  /* The note went with the rewrite. */
  hid_t f = H5Fopen(fx->path, H5F_ACC_RDONLY, H5P_DEFAULT);
  g_assert_cmpint(f, >=, 0);
  g_assert_cmpint(H5Aexists_by_name(f, "/results/runs", "sweep_keys",
                                    H5P_DEFAULT), >, 0);
  g_assert_cmpint(H5Lexists(f, "/results/.runs.rewrite", H5P_DEFAULT), ==, 0);
  H5Fclose(f);
}

static ResTable *open_run(const char *path, const char *run_id)
{
  g_autoptr(GError) error = NULL;
  ResMeta meta = { "9.9.9", "s.lua", "", 3u, run_id, "2026-12-06T15:00:00Z" };
  ResTable *t = res_table_open(path, "runs", RES_MODE_APPEND, &meta, &error);
  g_assert_no_error(error);
  return t;
}

/* Reruns appended rows nothing told apart.  A table written without run
 * ids gets the column (empty in its old rows) when a run with an id
 * opens it; each run's rows carry its id and the table an attribute
 * run:<id> saying when, which joulesim and which scenario; a row may not
 * set the column itself. */
static void test_run_ids(Fixture *fx, gconstpointer data)
{
  ResTable *t = open_ok(fx->path, "runs", RES_MODE_APPEND);
  append_ok(t, (ResValue[]){ I("x", 1) }, 1);
  close_ok(t);
  for (guint run = 0; run < 2; run++) {
    t = open_run(fx->path, run == 0 ? "RUN-A" : "RUN-B");
    append_ok(t, (ResValue[]){ I("x", 2 + run) }, 1);
    append_ok(t, (ResValue[]){ I("x", 4 + run) }, 1);
    g_autoptr(GError) error = NULL;
    g_assert_false(res_table_append(
      t, (ResValue[]){ I("x", 9), S(RES_RUN_COLUMN, "mine") }, 2, &error));
    g_assert_error(error, RES_ERROR, RES_ERROR_SCHEMA);
    g_assert_nonnull(strstr(error->message, "run's id"));
    close_ok(t);
  }
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) rows = res_table_read(fx->path, "runs", &error);
  g_assert_no_error(error);
  g_assert_cmpuint(rows->len, ==, 5);
  const char *ids[] = { "", "RUN-A", "RUN-A", "RUN-B", "RUN-B" };
  const gint64 xs[] = { 1, 2, 4, 3, 5 };
  for (guint r = 0; r < 5; r++) {
    g_assert_cmpstr(cell(rows, r, RES_RUN_COLUMN)->s, ==, ids[r]);
    g_assert_cmpint(cell(rows, r, "x")->i, ==, xs[r]);
  }
  hid_t f = H5Fopen(fx->path, H5F_ACC_RDONLY, H5P_DEFAULT);
  g_assert_cmpint(H5Aexists_by_name(f, "/results/runs", "run:RUN-A",
                                    H5P_DEFAULT), >, 0);
  g_assert_cmpint(H5Aexists_by_name(f, "/results/runs", "run:RUN-B",
                                    H5P_DEFAULT), >, 0);
  H5Fclose(f);

  /* A new table with a run id has the column from its first row. */
  g_autofree char *other = g_build_filename(fx->dir, "new.h5", NULL);
  t = open_run(other, "RUN-C");
  append_ok(t, (ResValue[]){ F("y", 1.5) }, 1);
  g_assert_cmpuint(res_table_n_columns(t), ==, 2);
  g_assert_cmpstr(res_table_column_name(t, 1), ==, RES_RUN_COLUMN);
  close_ok(t);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  H5open(); /* so the id counts of the first test start from a set-up library */

#define ADD(name, fn) \
  g_test_add("/results/" name, Fixture, NULL, fixture_setup, fn, \
             fixture_teardown)
  ADD("roundtrip", test_roundtrip);
  ADD("read-missing", test_read_missing);
  ADD("replace", test_replace);
  ADD("two-tables", test_two_tables);
  ADD("bad-definitions", test_bad_definitions);
  ADD("unwritable-nodir", test_unwritable_nodir);
  ADD("unwritable-isdir", test_unwritable_isdir);
  ADD("not-hdf5", test_not_hdf5);
  ADD("foreign-dataset", test_foreign_dataset);
  ADD("attributes", test_attributes);
  ADD("attributes-default", test_attributes_default);
  ADD("read-while-open", test_read_while_open);
  ADD("h5py", test_h5py);
  ADD("new-file", test_new_file);
  ADD("new-file-first-row", test_new_file_first_row);
  ADD("kill-loop", test_kill_loop);
  ADD("disk-full", test_disk_full);
  ADD("too-many-columns", test_too_many_columns);
  ADD("second-writer", test_second_writer);
  ADD("failed-flush", test_failed_flush);
  ADD("torn-last-row", test_torn_last_row);
  ADD("forked-child", test_forked_child);
  ADD("columns-and-notes", test_columns_and_notes);
  ADD("filter", test_filter);
  ADD("rewrite-recovery", test_rewrite_recovery);
  ADD("timeline/roundtrip", test_timeline_roundtrip);
  ADD("timeline/from-engine", test_timeline_from_engine);
  ADD("timeline/h5py", test_timeline_h5py);
  ADD("plot", test_plot);
  ADD("promote", test_promote);
  ADD("run-ids", test_run_ids);
#undef ADD
  for (guint i = 0; i < G_N_ELEMENTS(timeline_bad); i++) {
    g_autofree char *name =
      g_strdup_printf("/results/timeline/bad/%s", timeline_bad[i].name);
    g_test_add(name, Fixture, &timeline_bad[i], fixture_setup,
               test_timeline_bad, fixture_teardown);
  }
  g_test_add_func("/results/hid-counting", test_hid_counting);
  g_test_add_func("/results/crash-keeps-rows", test_crash_keeps_rows);
  for (guint i = 0; i < G_N_ELEMENTS(schema_cases); i++) {
    g_autofree char *name =
      g_strdup_printf("/results/schema/%s", schema_cases[i].name);
    g_test_add(name, Fixture, &schema_cases[i], fixture_setup,
               test_schema_error, fixture_teardown);
  }
  return g_test_run();
}
