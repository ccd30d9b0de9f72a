/* tests/test-h5open.c -- the one door for existing HDF5 files
 * (io/h5open.h): hostile structures are refused before libhdf5 reads or
 * writes anything through them, damage that crashes or hangs libhdf5 is
 * refused without hurting this process, and what a file declares is held
 * to the memory the caller may use.  Each case of ../shared/REDTEAM.md
 * findings 1, 2, 4, 12 (native row) and 19 is here, built with the HDF5 C
 * API, plus seeded random mutants of two small files: the defence must
 * hold for damage nobody listed.
 */
#include "io/h5open.h"
#include "io/h5util.h"
#include "io/results.h"
#include "run/confine.h"
#include "sim/pcg.h"
#include "traces/native.h"
#include "testutil.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIXTURE "tests/bad-input/native-ok.h5"

/* A file that passes for a joulesim results file at the top (the root
 * attribute and /results) and whose /results/t is made by `make_t`. */
typedef void (*MakeTable)(hid_t results, const char *dir);

static char *results_like(const char *dir, const char *name, MakeTable make)
{
  char *path = g_build_filename(dir, name, NULL);
  H5U_QUIET();
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  g_assert_cmpint(f, >=, 0);
  hid_t s = H5Screate(H5S_SCALAR);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, 6);
  hid_t a = H5Acreate2(f, "joulesim_version", t, s, H5P_DEFAULT,
                       H5P_DEFAULT);
  g_assert_cmpint(H5Awrite(a, t, "0.1.0"), >=, 0);
  H5Aclose(a);
  H5Tclose(t);
  H5Sclose(s);
  hid_t g = H5Gcreate2(f, "results", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  g_assert_cmpint(g, >=, 0);
  make(g, dir);
  H5Gclose(g);
  H5Fclose(f);
  return path;
}

/* The victim of a write through the file: stands for a shell rc file. */
static char *victim(const char *dir)
{
  char *v = g_build_filename(dir, "rc", NULL);
  g_assert_true(g_file_set_contents(v, "# my shell rc\n", -1, NULL));
  return v;
}

/* Copies the file `from` to `to`, byte for byte. */
static void copy_file(const char *from, const char *to)
{
  g_autofree char *bytes = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(from, &bytes, &len, NULL));
  g_assert_true(g_file_set_contents(to, bytes, (gssize)len, NULL));
}

/* Creates the 1-D dataset `name` of `n` elements (up to `max`) in loc. */
static void add_dataset(hid_t loc, const char *name, hid_t type, hsize_t n,
                        hsize_t max, hid_t dcpl)
{
  hid_t space = H5Screate_simple(1, &n, &max);
  hid_t d = H5Dcreate2(loc, name, type, space, H5P_DEFAULT, dcpl,
                       H5P_DEFAULT);
  g_assert_cmpint(d, >=, 0);
  H5Dclose(d);
  H5Sclose(space);
}

/* REDTEAM 1: /results/t keeps its raw rows in ../rc (external storage). */
static void make_external_storage(hid_t results, const char *dir)
{
  g_autofree char *v = victim(dir);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  g_assert_cmpint(H5Pset_layout(dcpl, H5D_CONTIGUOUS), >=, 0);
  g_assert_cmpint(H5Pset_external(dcpl, v, 14, H5F_UNLIMITED), >=, 0);
  add_dataset(results, "t", H5T_STD_I64LE, 0, H5S_UNLIMITED, dcpl);
  H5Pclose(dcpl);
}

/* REDTEAM 1, variant: /results/t is an external link to another results
 * file's table. */
static void make_external_link(hid_t results, const char *dir)
{
  g_autofree char *other = g_build_filename(dir, "other.h5", NULL);
  g_assert_cmpint(H5Lcreate_external(other, "/results/t", results, "t",
                                     H5P_DEFAULT, H5P_DEFAULT), >=, 0);
}

static void make_soft_link(hid_t results, const char *dir)
{
  g_assert_cmpint(H5Lcreate_soft("/results/u", results, "t", H5P_DEFAULT,
                                 H5P_DEFAULT), >=, 0);
}

/* A virtual dataset mapping rows of a dataset in another file. */
static void make_virtual(hid_t results, const char *dir)
{
  g_autofree char *v = victim(dir);
  hsize_t dims = 4;
  hid_t space = H5Screate_simple(1, &dims, NULL);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  g_assert_cmpint(H5Pset_virtual(dcpl, space, v, "/x", space), >=, 0);
  add_dataset(results, "t", H5T_STD_I64LE, dims, dims, dcpl);
  H5Pclose(dcpl);
  H5Sclose(space);
}

/* A dataset with a filter that is not built into libhdf5 (optional, so
 * HDF5 creates it without the plugin). */
static void make_plugin_filter(hid_t results, const char *dir)
{
  hsize_t chunk = 4;
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, &chunk);
  g_assert_cmpint(H5Pset_filter(dcpl, 32000, H5Z_FLAG_OPTIONAL, 0, NULL),
                  >=, 0);
  add_dataset(results, "t", H5T_STD_I64LE, 4, 4, dcpl);
  H5Pclose(dcpl);
}

/* A reference-typed dataset (references point into other objects and
 * files; joulesim never writes them). */
static void make_reference(hid_t results, const char *dir)
{
  add_dataset(results, "t", H5T_STD_REF_OBJ, 1, 1, H5P_DEFAULT);
}

typedef struct {
  const char *name;
  MakeTable make;
  const char *says; /* in the refusal */
} HostileCase;

static const HostileCase hostile[] = {
  { "external-storage", make_external_storage, "external files" },
  { "external-link", make_external_link, "an external link" },
  { "soft-link", make_soft_link, "a soft link" },
  { "virtual", make_virtual, "a virtual dataset" },
  { "plugin-filter", make_plugin_filter, "filter 32000" },
  { "reference", make_reference, "datatype" },
};

/* Every door to a results file refuses the hostile file with
 * RES_ERROR_UNSAFE, names it and what is wrong, and the victim of a write
 * through it is untouched: res_table_open (js.results, js.sweep,
 * validate --out), res_table_read, the sandbox's output check. */
static void test_hostile_results(gconstpointer data)
{
  const HostileCase *c = data;
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = results_like(dir, "evil.h5", c->make);
  g_autofree char *rc = g_build_filename(dir, "rc", NULL);
  g_autofree char *rc_before = NULL;
  g_file_get_contents(rc, &rc_before, NULL, NULL);

  GError *error = NULL;
  ResTable *t = res_table_open(path, "t", RES_MODE_APPEND, NULL, &error);
  g_assert_null(t);
  g_assert_error(error, RES_ERROR, RES_ERROR_UNSAFE);
  g_assert_true(g_str_has_prefix(error->message, path));
  g_assert_nonnull(strstr(error->message, c->says));
  g_clear_error(&error);

  g_assert_null(res_table_read(path, "t", &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_UNSAFE);
  g_clear_error(&error);

  g_assert_false(res_file_probe(path));
  g_assert_false(js_output_check(path, JS_FILE_RESULTS, NULL, &error));
  g_assert_error(error, JS_CONFINE_ERROR, JS_CONFINE_ERROR_EXISTS);
  g_assert_nonnull(strstr(error->message, c->says));
  g_clear_error(&error);

  g_autofree char *rc_after = NULL;
  g_file_get_contents(rc, &rc_after, NULL, NULL);
  g_assert_cmpstr(rc_before, ==, rc_after);
  test_rmdir(dir);
}

/* The op record of native traces (traces/native_format.c), for building
 * files. */
static hid_t ops_type(void)
{
  hid_t t = H5Tcreate(H5T_COMPOUND, 32);
  H5Tinsert(t, "ref_ns", 0, H5T_STD_I64LE);
  H5Tinsert(t, "shape", 8, H5T_STD_U32LE);
  H5Tinsert(t, "name", 12, H5T_STD_U32LE);
  H5Tinsert(t, "peer", 16, H5T_STD_U32LE);
  H5Tinsert(t, "wait", 20, H5T_STD_U32LE);
  H5Tinsert(t, "microbatch", 24, H5T_STD_U16LE);
  H5Tinsert(t, "layer", 26, H5T_STD_U8LE);
  H5Tinsert(t, "kind", 27, H5T_STD_U8LE);
  H5Tinsert(t, "class", 28, H5T_STD_U8LE);
  H5Tinsert(t, "phase", 29, H5T_STD_U8LE);
  H5Tinsert(t, "stream", 30, H5T_STD_U8LE);
  return t;
}

/* A copy of the fixture with /ranks/0/ops replaced by `n` records made
 * with dcpl (NULL data: nothing written). */
static char *native_with_ops(const char *dir, const char *name, hsize_t n,
                             hid_t dcpl, gboolean write_zeros)
{
  char *path = g_build_filename(dir, name, NULL);
  copy_file(FIXTURE, path);
  H5U_QUIET();
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  g_assert_cmpint(f, >=, 0);
  g_assert_cmpint(H5Ldelete(f, "/ranks/0/ops", H5P_DEFAULT), >=, 0);
  hid_t space = H5Screate_simple(1, &n, NULL);
  hid_t t = ops_type();
  hid_t d = H5Dcreate2(f, "/ranks/0/ops", t, space, H5P_DEFAULT, dcpl,
                       H5P_DEFAULT);
  g_assert_cmpint(d, >=, 0);
  if (write_zeros) {
    /* In blocks, so the test's own memory stays small. */
    const hsize_t block = 1 << 16;
    g_autofree char *zeros = g_malloc0(block * 32);
    for (hsize_t at = 0; at < n; at += block) {
      hsize_t k = MIN(block, n - at);
      hid_t fs = H5Scopy(space);
      H5Sselect_hyperslab(fs, H5S_SELECT_SET, &at, NULL, &k, NULL);
      hid_t ms = H5Screate_simple(1, &k, NULL);
      g_assert_cmpint(H5Dwrite(d, t, ms, fs, H5P_DEFAULT, zeros), >=, 0);
      H5Sclose(ms);
      H5Sclose(fs);
    }
  }
  H5Dclose(d);
  H5Tclose(t);
  H5Sclose(space);
  H5Fclose(f);
  return path;
}

/* REDTEAM 2: a plain-HDF5 trace whose ops live in a secret file.  The load
 * is refused before any byte of the secret is read: the message holds
 * none of it (the old loader echoed 4 bytes as "shape N"). */
static void test_native_external_read(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *secret = g_build_filename(dir, "shadow", NULL);
  g_assert_true(g_file_set_contents(secret, "root:$6$SECRET$hash:19000:0"
                                    ":99999:7:::\n", -1, NULL));
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_layout(dcpl, H5D_CONTIGUOUS);
  H5Pset_external(dcpl, secret, 0, 32);
  g_autofree char *path = native_with_ops(dir, "t0.h5", 1, dcpl, FALSE);
  H5Pclose(dcpl);
  GError *error = NULL;
  g_assert_null(trace_native_load(path, &error));
  g_assert_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_UNSAFE);
  g_assert_nonnull(strstr(error->message, "/ranks/0/ops keeps its data in "
                                          "external files"));
  g_assert_null(strstr(error->message, "shape"));
  g_assert_false(trace_native_is_trace(path));
  g_clear_error(&error);
  test_rmdir(dir);
}

/* REDTEAM 12 (native row): deflated zero records that declare 64 MB from
 * a file of some 100 KB.  Within a 10 MB budget the load is refused
 * before anything is allocated; with no budget it goes on to the
 * loader's own diagnosis (the zero ops are no valid trace). */
static void test_native_declared_memory(void)
{
  g_autofree char *dir = test_tmpdir();
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  hsize_t chunk = 1 << 16;
  H5Pset_chunk(dcpl, 1, &chunk);
  H5Pset_deflate(dcpl, 9);
  g_autofree char *path =
    native_with_ops(dir, "bomb.h5", 2u << 20, dcpl, TRUE);
  H5Pclose(dcpl);
  struct stat st;
  g_assert_cmpint(g_stat(path, &st), ==, 0);
  g_assert_cmpint(st.st_size, <, 1 << 20);
  GError *error = NULL;
  g_assert_null(trace_native_load_within(path, 10u << 20, &error));
  g_assert_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_UNSAFE);
  g_assert_nonnull(strstr(error->message, "needs about 67.1 MB of memory"));
  g_clear_error(&error);
  g_assert_null(trace_native_load(path, &error));
  g_assert_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT);
  g_clear_error(&error);
  test_rmdir(dir);
}

/* A copy of the fixture with byte `at` set to `value`. */
static char *mutant(const char *dir, const char *name, const char *from,
                    gsize at, guint8 value)
{
  g_autofree char *bytes = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(from, &bytes, &len, NULL));
  g_assert_cmpuint(at, <, len);
  bytes[at] = (char)value;
  char *path = g_build_filename(dir, name, NULL);
  g_assert_true(g_file_set_contents(path, bytes, (gssize)len, NULL));
  return path;
}

/* REDTEAM 4: one byte of the fixture's global heap changed makes libhdf5
 * copy past its buffer (a crash in H5HG_read) or loop (H5C_protect).  The
 * load is refused with an error naming the file and this process goes
 * on. */
static void test_native_libhdf5_damage(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *seg = mutant(dir, "seg.h5", FIXTURE, 2111, 0x0d);
  g_autofree char *hang = mutant(dir, "hang.h5", FIXTURE, 2105, 0x01);
  GError *error = NULL;
  g_assert_null(trace_native_load(seg, &error));
  g_assert_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_UNSAFE);
  /* A signal in a normal build; AddressSanitizer's report and exit
   * status in a sanitizer build. */
  g_assert_true(strstr(error->message, "libhdf5 crashed reading it") ||
                strstr(error->message, "libhdf5 failed reading it"));
  g_clear_error(&error);
  g_assert_null(trace_native_load(hang, &error));
  g_assert_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_UNSAFE);
  g_assert_nonnull(strstr(error->message, "did not finish"));
  g_clear_error(&error);
  test_rmdir(dir);
}

/* Seeded random mutants (1 to 16 bytes changed) of the fixture trace and
 * of a small results file: every load ends in a workload or an error of
 * the module's domain naming the file, and this process survives them
 * all (the red team's 1,500 mutants crashed 6 times and hung once). */
static void test_random_mutants(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *res = g_build_filename(dir, "ok-results.h5", NULL);
  GError *error = NULL;
  {
    g_autoptr(ResTable) t = res_table_open(res, "runs", RES_MODE_APPEND,
                                           NULL, &error);
    g_assert_no_error(error);
    for (int i = 0; i < 3; i++) {
      ResValue row[2] = {
        { .name = "label", .type = RES_STRING, .s = "a row with a string" },
        { .name = "x", .type = RES_FLOAT, .f = i * 1.5 },
      };
      g_assert_true(res_table_append(t, row, 2, &error));
    }
    g_assert_true(res_table_close(g_steal_pointer(&t), &error));
  }
  SimPcg rng;
  sim_pcg_seed(&rng, 27, 4);
  const char *sources[] = { FIXTURE, res };
  for (int src = 0; src < 2; src++) {
    g_autofree char *bytes = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(sources[src], &bytes, &len, NULL));
    for (int m = 0; m < 150; m++) {
      g_autofree char *copy = g_memdup2(bytes, len);
      guint k = 1 + sim_pcg_bounded(&rng, 16);
      for (guint i = 0; i < k; i++)
        copy[sim_pcg_bounded(&rng, (guint32)len)] =
          (char)sim_pcg_bounded(&rng, 256);
      g_autofree char *path = g_build_filename(dir, "m.h5", NULL);
      g_assert_true(g_file_set_contents(path, copy, (gssize)len, NULL));
      if (src == 0) {
        g_autoptr(SimWorkload) w = trace_native_load(path, &error);
        if (w == NULL) {
          g_assert_true(error->domain == TRACE_NATIVE_ERROR);
          g_assert_nonnull(strstr(error->message, path));
          g_clear_error(&error);
        }
      } else {
        GPtrArray *rows = res_table_read(path, "runs", &error);
        if (rows == NULL) {
          g_assert_true(error->domain == RES_ERROR);
          g_assert_nonnull(strstr(error->message, path));
          g_clear_error(&error);
        } else {
          g_ptr_array_unref(rows);
        }
      }
    }
  }
  test_rmdir(dir);
}

/* A FIFO is refused at once, never opened for a blocking read. */
static void test_fifo(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *fifo = g_build_filename(dir, "f.h5", NULL);
  g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
  GError *error = NULL;
  g_assert_false(h5u_check(fifo, RES_ERROR, RES_ERROR_UNSAFE, &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_UNSAFE);
  g_assert_nonnull(strstr(error->message, "not a regular file"));
  g_clear_error(&error);
  g_assert_null(trace_native_load(fifo, &error));
  g_assert_nonnull(error);
  g_clear_error(&error);
  test_rmdir(dir);
}

/* Files joulesim wrote pass, and a file that is not HDF5 is left to the
 * caller's own diagnosis. */
static void test_own_files_pass(void)
{
  GError *error = NULL;
  g_assert_true(h5u_check(FIXTURE, RES_ERROR, RES_ERROR_UNSAFE, &error));
  g_assert_no_error(error);
  g_autoptr(SimWorkload) w = trace_native_load(FIXTURE, &error);
  g_assert_no_error(error);
  g_assert_true(h5u_check("tests/bad-input/cases.tsv", RES_ERROR,
                          RES_ERROR_UNSAFE, &error));
  g_assert_no_error(error);
}

/* REDTEAM 19: layout attributes a trace cannot have are refused, with
 * the value, not clipped: an int64 n_ranks of -1, tp = 2^32 - 1,
 * microbatches = 0 beside a known tp. */
static void set_attr(const char *path, const char *name, hid_t type,
                     const void *value)
{
  H5U_QUIET();
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  g_assert_cmpint(f, >=, 0);
  H5Adelete(f, name);
  hid_t s = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, name, type, s, H5P_DEFAULT, H5P_DEFAULT);
  g_assert_cmpint(H5Awrite(a, type, value), >=, 0);
  H5Aclose(a);
  H5Sclose(s);
  H5Fclose(f);
}

static void test_native_metadata(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "m.h5", NULL);
  const struct {
    const char *attr;
    gint64 value;
    const char *says;
  } cases[] = {
    { "n_ranks", -1, "'n_ranks' of the root group is -1" },
    { "tp", G_MAXUINT32, "layout tp = 4294967295" },
    { "microbatches", 0, "microbatches = 0 is not one" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    copy_file(FIXTURE, path);
    set_attr(path, cases[i].attr, H5T_NATIVE_INT64, &cases[i].value);
    GError *error = NULL;
    g_assert_null(trace_native_load(path, &error));
    g_assert_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT);
    if (strstr(error->message, cases[i].says) == NULL)
      g_error("%s: %s", cases[i].attr, error->message);
    g_clear_error(&error);
  }
  test_rmdir(dir);
}

/* A results file a SIGKILL tore inside a flush (tests/kill-loop.sh): a
 * chunk past the end the file records.  The check must pass it at once
 * (its child read every row of the dead chunk alone and ran past its CPU
 * limit, so the resume was refused) and the writer's open recover it. */
static void test_torn_by_kill(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "r.h5", NULL);
  copy_file(TEST_DATA("results/torn-kill-loop.h5"), path);
  GError *error = NULL;
  ResTable *t = res_table_open(path, "sweep", RES_MODE_APPEND, NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(res_table_rows(t), ==, 1653);
  g_assert_true(res_table_close(t, &error));
  test_rmdir(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS(hostile); i++) {
    g_autofree char *name = g_strdup_printf("/h5open/hostile-results/%s",
                                            hostile[i].name);
    g_test_add_data_func(name, &hostile[i], test_hostile_results);
  }
  g_test_add_func("/h5open/native-external-read", test_native_external_read);
  g_test_add_func("/h5open/native-declared-memory",
                  test_native_declared_memory);
  g_test_add_func("/h5open/native-libhdf5-damage", test_native_libhdf5_damage);
  g_test_add_func("/h5open/random-mutants", test_random_mutants);
  g_test_add_func("/h5open/fifo", test_fifo);
  g_test_add_func("/h5open/own-files-pass", test_own_files_pass);
  g_test_add_func("/h5open/native-metadata", test_native_metadata);
  g_test_add_func("/h5open/torn-by-kill", test_torn_by_kill);
  return g_test_run();
}
