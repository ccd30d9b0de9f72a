/* io/results.c -- appendable HDF5 results tables and run timelines
 * (DESIGN section 9).
 *
 * File layout:
 *
 *   /                       attributes joulesim_version, scenario,
 *                           scenario_source, created (vlen UTF-8 strings),
 *                           seed (uint64); written once, when the file is
 *                           created
 *   /results/<table>        1-D compound dataset, max dims unlimited,
 *                           chunked 256 rows, no filter (see Durability);
 *                           attributes "columns" (names), "units" (parallel
 *                           to columns), "bool_columns" (names of the uint8
 *                           columns that hold booleans; a null dataspace
 *                           when there are none), and any notes written by
 *                           res_table_set_note (js.sweep: "sweep_keys")
 *   /timelines/<run>        1-D compound dataset (gpu int64, time_s,
 *                           power_w, sm_mhz float64), written once, chunked
 *                           4096 rows, shuffle + deflate 4; attributes
 *                           columns, units, bool_columns as above, n_gpus,
 *                           interpolation = "previous" (a sample's power
 *                           and clock hold until the GPU's next sample)
 *
 * Names starting with '.' are reserved: "/results/.<table>.rewrite" and
 * "/timelines/.<run>.partial" are the temporary datasets of a rewrite
 * (res_table_filter) and of a timeline being written.
 *
 * Column types: int64 (H5T_NATIVE_INT64), float64 (H5T_NATIVE_DOUBLE),
 * bool as uint8 0/1, strings as variable-length UTF-8 C strings.  h5py reads
 * the dataset as a numpy structured array.  A uint8 member always means
 * bool (no other column type maps to it), so a table's schema can be read
 * back from its compound type alone.
 *
 * Invariants of an open ResTable:
 *   - file is open read-write; dset, mem_type and cols are set once the
 *     table has columns (ncols > 0): either read from an existing dataset
 *     at open, or fixed by the first appended row, which creates the
 *     dataset.
 *   - rows == the dataset's current extent.
 *   - mem_type describes row_buf: one row in column order, each member at
 *     cols[i].offset, strings as `const char *` borrowed from the caller for
 *     the duration of one append.
 *   - owner is the process that opened it.  A forked child that inherits
 *     the table (js.sweep's workers) never writes, flushes or closes the
 *     HDF5 file through it: that would race with the parent's writes.
 *
 * Durability (what a kill -9 at any instant leaves behind).  Measured with
 * a writer that opens a fresh file, appends rows of four types 50 at a
 * time, closes, reopens, ..., and is SIGKILLed after a random 0-120 ms,
 * then read with the HDF5 C API (rows must be exactly 0..n-1 with their
 * values) and with h5py; tests/test-results.c /results/kill-loop runs 60
 * such kills on every `make test`.
 *   - A new file appears atomically: it is built under a temporary name in
 *     the same directory (".NAME.XXXXXX": root attributes and /results
 *     written, file closed) and then linked to its name.  A kill leaves no
 *     file, or a complete one (and at worst a stray temporary file).
 *     Creating in place left an empty, unreadable file ("file signature
 *     not found") in 2 of 200 kills.
 *   - Each append extends, writes and H5Fflush()es before it returns, so
 *     every row appended before the kill reads back, and the file opens.
 *     The row being appended is either absent or complete.
 *   - Tables are not compressed.  With deflate, appending a row rewrites
 *     the last chunk at a new size: HDF5 frees the old chunk and may reuse
 *     its space, or rewrites it in place when the compressed size is
 *     unchanged, so a kill between the raw-data and metadata writes of a
 *     flush left a chunk that no longer inflates ("inflate() failed", or
 *     "addr overflow": rows lost) in 10 of 200 kills, and in 16 of 200
 *     with the file-space strategy that never reuses freed space.
 *     Uncompressed chunks never move; a row is written into its place.
 *     The cost is small: 2,000 rows of that writer take 237 KB instead of
 *     218 KB (+9%), as their strings live in HDF5's global heap, which is
 *     never compressed.  Timelines are written once, so they are
 *     compressed.
 *   - Result with both: 0 bad files in 1,000 kills (13 kills came before
 *     the first file existed).
 *   - Not used: SWMR (it needs the 1.10 file format, whose superblock marks
 *     a file open for writing, so that after a kill HDF5 and h5py refuse to
 *     open it until `h5clear -s`: with that format, 100 of 100 kills in the
 *     same test left such a file; and SWMR cannot write variable-length
 *     strings); fsync per row (a flush
 *     reaches the OS page cache, which a killed process cannot lose; only
 *     an OS crash or power loss can; res_table_close fsyncs).
 *   - Locks: HDF5 flock()s a file it opens.  A writable file's descriptor
 *     is close-on-exec, and js.sweep's workers close their copies
 *     (res_release_files_in_child), so that no leftover process keeps a
 *     killed writer's file locked.
 *
 * Errors: HDF5's automatic error printing is switched off while a function
 * of this module runs (and restored afterwards, so other modules keep their
 * own setting); failures become RES_ERROR GErrors naming the path, the
 * table, what was being done, and the innermost HDF5 error message.  Every
 * HDF5 handle is held in a g_auto(H5uHid) or in the ResTable, so every exit
 * path closes it.
 */
#include "io/results.h"
#include "io/atomic.h"
#include "io/fault.h"
#include "io/h5util.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <hdf5.h>
#include <math.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef JOULESIM_VERSION
#define JOULESIM_VERSION "unknown"
#endif

G_DEFINE_QUARK(res-error-quark, res_error)

/* Rows per chunk of every results table. */
#define RES_CHUNK_ROWS 256
/* Rows per chunk, and deflate level, of timelines. */
#define RES_TIMELINE_CHUNK_ROWS 4096
#define RES_TIMELINE_DEFLATE_LEVEL 4

/* ---- HDF5 handles and errors ------------------------------------------ */


/* Frees the variable-length strings that H5Dread allocated in buf. */
static void res_reclaim(hid_t mem_type, hid_t space, void *buf)
{
#if H5_VERSION_GE(1, 12, 0)
  H5Treclaim(mem_type, space, H5P_DEFAULT, buf);
#else
  H5Dvlen_reclaim(mem_type, space, H5P_DEFAULT, buf);
#endif
}

/* Sets *error to code with "PATH: table 'TABLE': WHAT (HDF5: reason)",
 * reading the reason from the current HDF5 error stack (so call it right
 * after the failing HDF5 call, before any other HDF5 call clears the
 * stack).  table may be NULL.  Always returns FALSE. */
G_GNUC_PRINTF(5, 6)
static gboolean res_fail(GError **error, gint code, const char *path,
                         const char *table, const char *fmt, ...)
{
  g_autofree char *reason = h5u_error_reason();

  va_list ap;
  va_start(ap, fmt);
  g_autofree char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);

  g_autoptr(GString) msg = g_string_new(path);
  if (table != NULL)
    g_string_append_printf(msg, ": table '%s'", table);
  g_string_append_printf(msg, ": %s", what);
  if (reason != NULL)
    g_string_append_printf(msg, " (HDF5: %s)", reason);
  g_set_error_literal(error, RES_ERROR, code, msg->str);
  return FALSE;
}

/* ---- columns ------------------------------------------------------------ */

typedef struct {
  char *name;
  ResType type;
  size_t offset; /* of the member in a memory row */
} ResCol;

static const char *res_type_name(ResType type)
{
  switch (type) {
  case RES_INT: return "int64";
  case RES_FLOAT: return "float64";
  case RES_BOOL: return "bool";
  case RES_STRING: return "string";
  }
  return "unknown";
}

/* Unit of a column from its name's suffix ("" when none applies). */
static const char *res_unit_for(const char *name)
{
  static const struct {
    const char *suffix;
    const char *unit;
  } units[] = {
    { "_ns", "ns" },   { "_s", "s" },          { "_j", "J" },
    { "_w", "W" },     { "_mhz", "MHz" },      { "_pct", "%" },
    { "_gbps", "GB/s" }, { "_tflops", "TFLOP/s" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS(units); i++)
    if (g_str_has_suffix(name, units[i].suffix))
      return units[i].unit;
  return "";
}

/* A new variable-length UTF-8 C string type (owned by the caller), or -1. */
static hid_t res_vstr_type(void)
{
  g_auto(H5uHid) t = H5Tcopy(H5T_C_S1);
  if (t < 0 || H5Tset_size(t, H5T_VARIABLE) < 0 ||
      H5Tset_cset(t, H5T_CSET_UTF8) < 0)
    return H5I_INVALID_HID;
  return h5u_steal(&t);
}

/* Lays out a memory row for cols (filling in their offsets) and returns its
 * compound type (owned by the caller), or -1 with error. */
static hid_t res_mem_type(ResCol *cols, guint ncols, size_t *row_size,
                          const char *path, const char *table, GError **error)
{
  size_t off = 0;
  for (guint i = 0; i < ncols; i++) {
    size_t size = cols[i].type == RES_BOOL     ? sizeof(guint8)
                  : cols[i].type == RES_STRING ? sizeof(char *)
                                               : 8;
    off = (off + size - 1) / size * size; /* natural alignment */
    cols[i].offset = off;
    off += size;
  }
  *row_size = MAX((off + 7) / 8 * 8, 8);

  g_auto(H5uHid) vstr = res_vstr_type();
  g_auto(H5uHid) type = H5Tcreate(H5T_COMPOUND, *row_size);
  if (vstr < 0 || type < 0) {
    res_fail(error, RES_ERROR_IO, path, table, "creating the row type");
    return H5I_INVALID_HID;
  }
  for (guint i = 0; i < ncols; i++) {
    hid_t member = cols[i].type == RES_INT     ? H5T_NATIVE_INT64
                   : cols[i].type == RES_FLOAT ? H5T_NATIVE_DOUBLE
                   : cols[i].type == RES_BOOL  ? H5T_NATIVE_UINT8
                                               : vstr;
    if (H5Tinsert(type, cols[i].name, cols[i].offset, member) < 0) {
      res_fail(error, RES_ERROR_IO, path, table,
               "adding column '%s' to the row type", cols[i].name);
      return H5I_INVALID_HID;
    }
  }
  return h5u_steal(&type);
}

static void res_cols_free(ResCol *cols, guint ncols)
{
  for (guint i = 0; cols != NULL && i < ncols; i++)
    g_free(cols[i].name);
  g_free(cols);
}

/* Reads the columns of an existing dataset from its compound type.  On
 * success *cols (owned by the caller, res_cols_free) and *ncols are set;
 * a type this module would not have written is RES_ERROR_SCHEMA. */
static gboolean res_cols_from_dataset(hid_t dset, ResCol **cols_out,
                                      guint *ncols_out, const char *path,
                                      const char *table, GError **error)
{
  g_auto(H5uHid) ftype = H5Dget_type(dset);
  if (ftype < 0)
    return res_fail(error, RES_ERROR_IO, path, table, "reading the row type");
  if (H5Tget_class(ftype) != H5T_COMPOUND)
    return res_fail(error, RES_ERROR_SCHEMA, path, table,
                    "not a results table (not a compound dataset)");
  int n = H5Tget_nmembers(ftype);
  if (n <= 0)
    return res_fail(error, RES_ERROR_SCHEMA, path, table,
                    "not a results table (no columns)");

  ResCol *cols = g_new0(ResCol, n);
  for (int i = 0; i < n; i++) {
    char *name = H5Tget_member_name(ftype, (unsigned)i);
    if (name == NULL) {
      res_fail(error, RES_ERROR_IO, path, table, "reading column %d's name", i);
      res_cols_free(cols, (guint)i);
      return FALSE;
    }
    cols[i].name = g_strdup(name);
    H5free_memory(name);

    g_auto(H5uHid) mtype = H5Tget_member_type(ftype, (unsigned)i);
    H5T_class_t cls = mtype < 0 ? H5T_NO_CLASS : H5Tget_class(mtype);
    size_t size = mtype < 0 ? 0 : H5Tget_size(mtype);
    gboolean ok = TRUE;
    if (cls == H5T_INTEGER && size == 8 && H5Tget_sign(mtype) == H5T_SGN_2)
      cols[i].type = RES_INT;
    else if (cls == H5T_INTEGER && size == 1 &&
             H5Tget_sign(mtype) == H5T_SGN_NONE)
      cols[i].type = RES_BOOL;
    else if (cls == H5T_FLOAT && size == 8)
      cols[i].type = RES_FLOAT;
    else if (cls == H5T_STRING && H5Tis_variable_str(mtype) > 0)
      cols[i].type = RES_STRING;
    else
      ok = FALSE;
    if (!ok) {
      res_fail(error, RES_ERROR_SCHEMA, path, table,
               "column '%s' has a type results tables do not use",
               cols[i].name);
      res_cols_free(cols, (guint)i + 1);
      return FALSE;
    }
  }
  *cols_out = cols;
  *ncols_out = (guint)n;
  return TRUE;
}

/* ---- attributes --------------------------------------------------------- */

/* Writes a scalar vlen UTF-8 string attribute `name` = value on obj. */
static gboolean res_attr_string(hid_t obj, const char *name, const char *value,
                                const char *path, const char *table,
                                GError **error)
{
  g_auto(H5uHid) type = res_vstr_type();
  g_auto(H5uHid) space = H5Screate(H5S_SCALAR);
  if (type < 0 || space < 0)
    return res_fail(error, RES_ERROR_IO, path, table,
                    "preparing attribute '%s'", name);
  g_auto(H5uHid) attr =
    H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  if (attr < 0 || H5Awrite(attr, type, &value) < 0)
    return res_fail(error, RES_ERROR_IO, path, table,
                    "writing attribute '%s'", name);
  return TRUE;
}

/* Writes a 1-D vlen UTF-8 string array attribute (a null dataspace when
 * n == 0, which h5py reads as h5py.Empty). */
static gboolean res_attr_strings(hid_t obj, const char *name,
                                 const char *const *values, gsize n,
                                 const char *path, const char *table,
                                 GError **error)
{
  hsize_t dims[1] = { n };
  g_auto(H5uHid) type = res_vstr_type();
  g_auto(H5uHid) space =
    n > 0 ? H5Screate_simple(1, dims, NULL) : H5Screate(H5S_NULL);
  if (type < 0 || space < 0)
    return res_fail(error, RES_ERROR_IO, path, table,
                    "preparing attribute '%s'", name);
  g_auto(H5uHid) attr =
    H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  if (attr < 0 || (n > 0 && H5Awrite(attr, type, values) < 0))
    return res_fail(error, RES_ERROR_IO, path, table,
                    "writing attribute '%s'", name);
  return TRUE;
}

/* The root attributes of a new file. */
static gboolean res_write_file_attrs(hid_t file, const ResMeta *meta,
                                     const char *path, GError **error)
{
  static const ResMeta none = { NULL, NULL, NULL, 0 };
  if (meta == NULL)
    meta = &none;

  g_autoptr(GDateTime) now = g_date_time_new_now_utc();
  g_autofree char *created = g_date_time_format(now, "%Y-%m-%dT%H:%M:%SZ");
  if (!res_attr_string(file, "joulesim_version",
                       meta->version ? meta->version : JOULESIM_VERSION, path,
                       NULL, error) ||
      !res_attr_string(file, "scenario",
                       meta->scenario_path ? meta->scenario_path : "", path,
                       NULL, error) ||
      !res_attr_string(file, "scenario_source",
                       meta->scenario_source ? meta->scenario_source : "",
                       path, NULL, error) ||
      !res_attr_string(file, "created", created, path, NULL, error))
    return FALSE;

  g_auto(H5uHid) space = H5Screate(H5S_SCALAR);
  if (space < 0)
    return res_fail(error, RES_ERROR_IO, path, NULL,
                    "preparing attribute 'seed'");
  g_auto(H5uHid) attr = H5Acreate2(file, "seed", H5T_STD_U64LE, space,
                                   H5P_DEFAULT, H5P_DEFAULT);
  if (attr < 0 || H5Awrite(attr, H5T_NATIVE_UINT64, &meta->seed) < 0)
    return res_fail(error, RES_ERROR_IO, path, NULL,
                    "writing attribute 'seed'");
  return TRUE;
}

/* fsync()s the file behind an open HDF5 file (sec2 driver); TRUE when it
 * worked or the driver has no file descriptor. */
static gboolean res_fsync(hid_t file)
{
  if (fault_inject_errno(FAULT_WRITE, "results: fsync"))
    return FALSE;
  void *handle = NULL;
  if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || handle == NULL)
    return TRUE;
  return fsync(*(int *)handle) == 0 || errno == EINVAL || errno == EROFS;
}

/* In a fork()ed child: closes the descriptors of every HDF5 file open in
 * the parent (see io/results.h). */
void res_release_files_in_child(void)
{
  g_auto(H5uQuiet) quiet = h5u_quiet();
  ssize_t n = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_FILE);
  if (n <= 0)
    return;
  g_autofree hid_t *ids = g_new0(hid_t, n);
  n = H5Fget_obj_ids(H5F_OBJ_ALL, H5F_OBJ_FILE, (size_t)n, ids);
  /* /dev/null takes each descriptor's place: that drops this process's
   * reference to the file (and its lock), and should a stray HDF5 call
   * still use the descriptor, it writes nowhere rather than into whatever
   * file would reuse the number. */
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  for (ssize_t i = 0; i < n; i++) {
    void *handle = NULL;
    if (H5Fget_vfd_handle(ids[i], H5P_DEFAULT, &handle) < 0 ||
        handle == NULL || *(int *)handle < 0)
      continue;
    int fd = *(int *)handle;
    if (null_fd < 0 || dup2(null_fd, fd) < 0)
      close(fd);
  }
  if (null_fd >= 0)
    close(null_fd);
}

/* H5Fclose without fault injection (io/fault.h): HDF5 1.10 cannot recover
 * from a failed close (io/h5util.c), so callers flush first. */
static herr_t res_close_file(hid_t file)
{
  fault_suspend();
  herr_t rc = H5Fclose(file);
  fault_resume();
  return rc;
}

/* ---- the table ---------------------------------------------------------- */

struct ResTable {
  char *path;
  char *table;
  char *dset_path;    /* "/results/<table>" */
  hid_t file;
  hid_t dset;         /* -1 until the table has columns */
  hid_t mem_type;     /* -1 until the table has columns */
  ResCol *cols;
  guint ncols;
  GHashTable *by_name; /* column name (borrowed from cols) -> index + 1 */
  size_t row_size;
  guchar *row_buf;    /* one memory row */
  guint8 *seen;       /* per column: set by the current append */
  guint64 rows;
  pid_t owner;        /* the process that opened the table */
};

/* Closes every handle of t, frees t; returns FALSE (setting error when it
 * is still unset) when the final flush or close fails. */
static gboolean res_table_destroy(ResTable *t, GError **error)
{
  gboolean ok = TRUE;
  if (t->owner != getpid()) {
    /* A forked copy: the handles belong to the parent's file, which only
     * the parent may flush or close.  Free the memory and nothing else. */
    t->file = t->dset = t->mem_type = H5I_INVALID_HID;
  }
  if (t->file >= 0 && H5Fflush(t->file, H5F_SCOPE_LOCAL) < 0)
    ok = res_fail(error, RES_ERROR_IO, t->path, t->table, "flushing");
  if (t->file >= 0 && ok && !res_fsync(t->file))
    ok = res_fail(error, RES_ERROR_IO, t->path, t->table, "syncing to disk: %s",
                  g_strerror(errno));
  if (t->dset >= 0 && H5Dclose(t->dset) < 0 && ok)
    ok = res_fail(error, RES_ERROR_IO, t->path, t->table, "closing");
  if (t->mem_type >= 0)
    H5Tclose(t->mem_type);
  if (t->file >= 0 && res_close_file(t->file) < 0 && ok)
    ok = res_fail(error, RES_ERROR_IO, t->path, t->table, "closing the file");
  g_clear_pointer(&t->by_name, g_hash_table_unref);
  res_cols_free(t->cols, t->ncols);
  g_free(t->row_buf);
  g_free(t->seen);
  g_free(t->dset_path);
  g_free(t->table);
  g_free(t->path);
  g_free(t);
  return ok;
}

/* Fills in the memory-side state of t from t->cols / t->ncols. */
static gboolean res_table_set_columns(ResTable *t, GError **error)
{
  t->mem_type =
    res_mem_type(t->cols, t->ncols, &t->row_size, t->path, t->table, error);
  if (t->mem_type < 0)
    return FALSE;
  t->row_buf = g_malloc0(t->row_size);
  t->seen = g_malloc0(t->ncols);
  t->by_name = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i < t->ncols; i++)
    g_hash_table_insert(t->by_name, t->cols[i].name, GUINT_TO_POINTER(i + 1));
  return TRUE;
}

/* A table name must be a single HDF5 link name. */
static gboolean res_check_table_name(const char *path, const char *table,
                                     GError **error)
{
  if (table[0] == '\0' || table[0] == '.' || strchr(table, '/') != NULL ||
      !g_utf8_validate(table, -1, NULL)) {
    g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                "%s: invalid name '%s' (need a non-empty UTF-8 name without "
                "'/' that does not start with '.')",
                path, table);
    return FALSE;
  }
  return TRUE;
}

/* Opens the existing dataset of t (APPEND mode) and reads its schema and
 * row count. */
static gboolean res_table_load(ResTable *t, GError **error)
{
  t->dset = H5Dopen2(t->file, t->dset_path, H5P_DEFAULT);
  if (t->dset < 0)
    return res_fail(error, RES_ERROR_IO, t->path, t->table,
                    "opening the dataset");
  g_auto(H5uHid) space = H5Dget_space(t->dset);
  if (space < 0)
    return res_fail(error, RES_ERROR_IO, t->path, t->table,
                    "reading the dataset's extent");
  hsize_t dims[1] = { 0 };
  if (H5Sget_simple_extent_ndims(space) != 1)
    return res_fail(error, RES_ERROR_SCHEMA, t->path, t->table,
                    "not a results table (not one-dimensional)");
  H5Sget_simple_extent_dims(space, dims, NULL);
  t->rows = dims[0];
  if (!res_cols_from_dataset(t->dset, &t->cols, &t->ncols, t->path, t->table,
                             error))
    return FALSE;
  return res_table_set_columns(t, error);
}

/* Ensures the top-level group `name` ("results", "timelines") exists in
 * file. */
static gboolean res_ensure_group(hid_t file, const char *name,
                                 const char *path, GError **error)
{
  htri_t exists = H5Lexists(file, name, H5P_DEFAULT);
  if (exists < 0)
    return res_fail(error, RES_ERROR_IO, path, NULL, "looking up /%s", name);
  if (exists > 0)
    return TRUE;
  g_auto(H5uHid) group =
    H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (group < 0)
    return res_fail(error, RES_ERROR_IO, path, NULL, "creating /%s", name);
  return TRUE;
}

/* The file descriptor behind an open HDF5 file (sec2 driver), or -1. */
static int res_file_fd(hid_t file)
{
  void *handle = NULL;
  if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || handle == NULL)
    return -1;
  return *(int *)handle;
}

/* Marks a writable file's descriptor close-on-exec: a program started by
 * the script (os.execute) must not inherit it, and with it HDF5's lock on
 * the file, which would outlive a killed joulesim. */
static void res_set_cloexec(hid_t file)
{
  int fd = res_file_fd(file);
  if (fd >= 0) {
    int flags = fcntl(fd, F_GETFD);
    if (flags >= 0)
      fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

/* Creates a new results file at `path` atomically (see Durability): it is
 * built under a temporary name in the same directory, with the root
 * attributes and the /results group, closed, flushed to the disk, and then
 * linked to `path` (io/atomic.h).
 * link(2) fails rather than replace a file that appeared in the meantime;
 * that is not an error (*created = FALSE: open the other one).  Errors
 * name `path`; no temporary file is left behind on any error. */
static gboolean res_create_file(const char *path, const ResMeta *meta,
                                gboolean *created, GError **error)
{
  *created = FALSE;
  IoAtomic out;
  int e = io_atomic_open(&out, path, "results");
  if (e != 0) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: cannot create results file: %s", path, g_strerror(e));
    io_atomic_abort(&out);
    return FALSE;
  }
  close(out.fd); /* HDF5 writes it by name */
  out.fd = -1;

  gboolean ok = FALSE;
  hid_t file = H5Fcreate(out.tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0)
    res_fail(error, RES_ERROR_IO, path, NULL, "cannot create results file");
  else
    ok = res_write_file_attrs(file, meta, path, error) &&
         res_ensure_group(file, "results", path, error);
  if (ok && H5Fflush(file, H5F_SCOPE_LOCAL) < 0)
    ok = res_fail(error, RES_ERROR_IO, path, NULL,
                  "writing the new results file");
  if (file >= 0 && res_close_file(file) < 0 && ok)
    ok = res_fail(error, RES_ERROR_IO, path, NULL,
                  "writing the new results file");
  if (ok && (e = io_atomic_sync(&out)) != 0) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: cannot create results file: %s", path, g_strerror(e));
    ok = FALSE;
  }
  if (!ok) {
    io_atomic_abort(&out);
    return FALSE;
  }
  e = io_atomic_commit(&out, IO_ATOMIC_CREATE);
  if (e == 0) {
    *created = TRUE;
  } else if (e != EEXIST) { /* EEXIST: another writer was first: use its file */
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: cannot create results file: %s", path, g_strerror(e));
    return FALSE;
  }
  return TRUE;
}

gboolean res_file_probe(const char *path)
{
  g_auto(H5uQuiet) quiet = h5u_quiet();
  if (!g_file_test(path, G_FILE_TEST_IS_REGULAR) || H5Fis_hdf5(path) <= 0)
    return FALSE;
  g_auto(H5uHid) file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  return file >= 0 && H5Aexists(file, "joulesim_version") > 0 &&
         H5Lexists(file, "results", H5P_DEFAULT) > 0;
}

/* Opens `path` read-write, creating it (with its root attributes) when it
 * does not exist.  *created tells whether this call made the file. */
static hid_t res_open_file(const char *path, const ResMeta *meta,
                           gboolean *created, GError **error)
{
  *created = FALSE;
  if (!g_file_test(path, G_FILE_TEST_EXISTS) &&
      !res_create_file(path, meta, created, error))
    return H5I_INVALID_HID;
  {
    if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
      g_set_error(error, RES_ERROR, RES_ERROR_IO,
                  "%s: cannot open results file: not a regular file", path);
      return H5I_INVALID_HID;
    }
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (file < 0)
      res_fail(error, RES_ERROR_IO, path, NULL,
               "cannot open results file for writing");
    else
      res_set_cloexec(file);
    return file;
  }
}

/* The temporary name of table's rewrite ("/results/.<table>.rewrite"). */
static char *res_rewrite_path(const char *table)
{
  return g_strconcat("/results/.", table, ".rewrite", NULL);
}

/* Finishes or undoes a rewrite of `table` that a kill interrupted (see
 * res_table_filter): when the table is missing, the rewrite had been
 * complete and flushed before the old table was unlinked, so it becomes
 * the table; when the table is still there, the partial rewrite is
 * dropped.  The /results group must exist. */
static gboolean res_recover_rewrite(hid_t file, const char *path,
                                    const char *table, GError **error)
{
  g_autofree char *tmp = res_rewrite_path(table);
  g_autofree char *dset_path = g_strconcat("/results/", table, NULL);
  htri_t has_tmp = H5Lexists(file, tmp, H5P_DEFAULT);
  if (has_tmp < 0)
    return res_fail(error, RES_ERROR_IO, path, table, "looking up %s", tmp);
  if (has_tmp == 0)
    return TRUE;
  htri_t has = H5Lexists(file, dset_path, H5P_DEFAULT);
  if (has < 0)
    return res_fail(error, RES_ERROR_IO, path, table, "looking up the table");
  herr_t rc = has > 0 ? H5Ldelete(file, tmp, H5P_DEFAULT)
                      : H5Lmove(file, tmp, file, dset_path, H5P_DEFAULT,
                                H5P_DEFAULT);
  if (rc < 0 || H5Fflush(file, H5F_SCOPE_LOCAL) < 0)
    return res_fail(error, RES_ERROR_IO, path, table,
                    "recovering from an interrupted rewrite");
  return TRUE;
}

/* Opens `table` in the results file at `path` (see io/results.h).
 * Returns a new ResTable owned by the caller (res_table_close), or NULL
 * with error: RES_ERROR_IO when the file cannot be opened or created (a
 * file this call created is removed again), RES_ERROR_SCHEMA when the table
 * name is invalid or an existing dataset of that name is not a results
 * table.  meta is borrowed, and used only when the file is created. */
ResTable *res_table_open(const char *path, const char *table, ResMode mode,
                         const ResMeta *meta, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  g_return_val_if_fail(table != NULL, NULL);
  g_return_val_if_fail(mode == RES_MODE_APPEND || mode == RES_MODE_REPLACE,
                       NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  g_auto(H5uQuiet) quiet = h5u_quiet();

  if (!res_check_table_name(path, table, error))
    return NULL;

  ResTable *t = g_new0(ResTable, 1);
  t->path = g_strdup(path);
  t->table = g_strdup(table);
  t->dset_path = g_strconcat("/results/", table, NULL);
  t->dset = H5I_INVALID_HID;
  t->mem_type = H5I_INVALID_HID;
  t->owner = getpid();

  gboolean created = FALSE;
  t->file = res_open_file(path, meta, &created, error);
  if (t->file < 0)
    goto fail;
  if (!res_ensure_group(t->file, "results", path, error) ||
      !res_recover_rewrite(t->file, path, table, error))
    goto fail;

  htri_t exists = H5Lexists(t->file, t->dset_path, H5P_DEFAULT);
  if (exists < 0) {
    res_fail(error, RES_ERROR_IO, path, table, "looking up the table");
    goto fail;
  }
  if (exists > 0 && mode == RES_MODE_REPLACE) {
    if (H5Ldelete(t->file, t->dset_path, H5P_DEFAULT) < 0) {
      res_fail(error, RES_ERROR_IO, path, table, "deleting the old table");
      goto fail;
    }
  } else if (exists > 0 && !res_table_load(t, error)) {
    goto fail;
  }
  /* The file is consistent on disk before any row is written. */
  if (H5Fflush(t->file, H5F_SCOPE_LOCAL) < 0) {
    res_fail(error, RES_ERROR_IO, path, table, "flushing");
    goto fail;
  }
  return t;

fail:
  res_table_destroy(t, NULL);
  if (created)
    g_unlink(path);
  return NULL;
}

/* Fixes the columns of a new table from its first row and creates the
 * dataset with its attributes.  On failure t is left without columns and
 * without a dataset. */
static gboolean res_table_define(ResTable *t, const ResValue *row, guint n,
                                 GError **error)
{
  if (n == 0) {
    g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                "%s: table '%s': a row needs at least one column", t->path,
                t->table);
    return FALSE;
  }
  ResCol *cols = g_new0(ResCol, n);
  g_autoptr(GHashTable) names = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i < n; i++) {
    const char *name = row[i].name;
    const char *problem = NULL;
    if (name == NULL || name[0] == '\0')
      problem = "a column has no name";
    else if (!g_utf8_validate(name, -1, NULL))
      problem = "a column name is not valid UTF-8";
    else if (!g_hash_table_add(names, (gpointer)name))
      problem = "duplicate column";
    else if ((guint)row[i].type > RES_STRING)
      problem = "unknown value type in column";
    if (problem != NULL) {
      g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                  "%s: table '%s': %s%s%s%s", t->path, t->table, problem,
                  name && name[0] ? " '" : "", name && name[0] ? name : "",
                  name && name[0] ? "'" : "");
      res_cols_free(cols, i);
      return FALSE;
    }
    cols[i].name = g_strdup(name);
    cols[i].type = row[i].type;
  }
  t->cols = cols;
  t->ncols = n;

  g_autoptr(GPtrArray) names_v = g_ptr_array_new();
  g_autoptr(GPtrArray) units_v = g_ptr_array_new();
  g_autoptr(GPtrArray) bools_v = g_ptr_array_new();
  for (guint i = 0; i < n; i++) {
    g_ptr_array_add(names_v, cols[i].name);
    g_ptr_array_add(units_v, (gpointer)res_unit_for(cols[i].name));
    if (cols[i].type == RES_BOOL)
      g_ptr_array_add(bools_v, cols[i].name);
  }

  gboolean ok = FALSE;
  g_auto(H5uHid) ftype = H5I_INVALID_HID;
  g_auto(H5uHid) dcpl = H5I_INVALID_HID;
  g_auto(H5uHid) space = H5I_INVALID_HID;
  hsize_t dims[1] = { 0 }, maxdims[1] = { H5S_UNLIMITED };
  hsize_t chunk[1] = { RES_CHUNK_ROWS };

  if (!res_table_set_columns(t, error))
    goto out;
  /* On disk the row is packed (no alignment padding). */
  ftype = H5Tcopy(t->mem_type);
  if (ftype < 0 || H5Tpack(ftype) < 0) {
    res_fail(error, RES_ERROR_IO, t->path, t->table, "creating the file type");
    goto out;
  }
  /* Chunked so that it can grow; no filter, so that a chunk never moves
   * (see Durability). */
  dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (dcpl < 0 || H5Pset_chunk(dcpl, 1, chunk) < 0) {
    res_fail(error, RES_ERROR_IO, t->path, t->table, "setting up chunking");
    goto out;
  }
  space = H5Screate_simple(1, dims, maxdims);
  if (space < 0) {
    res_fail(error, RES_ERROR_IO, t->path, t->table, "creating the dataspace");
    goto out;
  }
  t->dset = H5Dcreate2(t->file, t->dset_path, ftype, space, H5P_DEFAULT, dcpl,
                       H5P_DEFAULT);
  if (t->dset < 0) {
    res_fail(error, RES_ERROR_IO, t->path, t->table, "creating the dataset");
    goto out;
  }
  if (!res_attr_strings(t->dset, "columns",
                        (const char *const *)names_v->pdata, names_v->len,
                        t->path, t->table, error) ||
      !res_attr_strings(t->dset, "units", (const char *const *)units_v->pdata,
                        units_v->len, t->path, t->table, error) ||
      !res_attr_strings(t->dset, "bool_columns",
                        (const char *const *)bools_v->pdata, bools_v->len,
                        t->path, t->table, error))
    goto out;
  ok = TRUE;

out:
  if (!ok) {
    /* Back to "no columns": a half-made dataset is unlinked again. */
    if (t->dset >= 0) {
      H5Dclose(t->dset);
      H5Ldelete(t->file, t->dset_path, H5P_DEFAULT);
      t->dset = H5I_INVALID_HID;
    }
    if (t->mem_type >= 0)
      H5Tclose(t->mem_type);
    t->mem_type = H5I_INVALID_HID;
    g_clear_pointer(&t->by_name, g_hash_table_unref);
    g_clear_pointer(&t->row_buf, g_free);
    g_clear_pointer(&t->seen, g_free);
    res_cols_free(t->cols, t->ncols);
    t->cols = NULL;
    t->ncols = 0;
  }
  return ok;
}

/* Checks one value against its column and stores it in t->row_buf. */
static gboolean res_table_put(ResTable *t, const ResValue *v, GError **error)
{
  if (v->name == NULL) {
    g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                "%s: table '%s': a column has no name", t->path, t->table);
    return FALSE;
  }
  guint idx = GPOINTER_TO_UINT(g_hash_table_lookup(t->by_name, v->name));
  if (idx == 0) {
    g_autoptr(GString) known = g_string_new(NULL);
    for (guint i = 0; i < t->ncols; i++)
      g_string_append_printf(known, "%s%s", i ? ", " : "", t->cols[i].name);
    g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                "%s: table '%s': unknown column '%s' (the table has: %s)",
                t->path, t->table, v->name, known->str);
    return FALSE;
  }
  const ResCol *col = &t->cols[idx - 1];
  if (t->seen[idx - 1]) {
    g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                "%s: table '%s': column '%s' given twice", t->path, t->table,
                col->name);
    return FALSE;
  }
  t->seen[idx - 1] = 1;

  gboolean fits =
    v->type == col->type || (col->type == RES_FLOAT && v->type == RES_INT);
  if (!fits) {
    g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                "%s: table '%s': column '%s' expects %s, got %s", t->path,
                t->table, col->name, res_type_name(col->type),
                res_type_name(v->type));
    return FALSE;
  }

  guchar *dst = t->row_buf + col->offset;
  switch (col->type) {
  case RES_INT: {
    gint64 x = v->i;
    memcpy(dst, &x, sizeof x);
    break;
  }
  case RES_FLOAT: {
    double x = v->type == RES_INT ? (double)v->i : v->f;
    memcpy(dst, &x, sizeof x);
    break;
  }
  case RES_BOOL:
    *dst = v->i != 0;
    break;
  case RES_STRING: {
    const char *s = v->s != NULL ? v->s : "";
    if (!g_utf8_validate(s, -1, NULL)) {
      g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                  "%s: table '%s': column '%s': string is not valid UTF-8",
                  t->path, t->table, col->name);
      return FALSE;
    }
    memcpy(dst, &s, sizeof s);
    break;
  }
  }
  return TRUE;
}

/* Appends one row (see io/results.h).  Errors: RES_ERROR_SCHEMA naming the
 * column for a missing, unknown, repeated or mistyped column (the table is
 * unchanged); RES_ERROR_IO when HDF5 fails to extend, write or flush. */
gboolean res_table_append(ResTable *t, const ResValue *row, guint n,
                          GError **error)
{
  g_return_val_if_fail(t != NULL, FALSE);
  g_return_val_if_fail(row != NULL || n == 0, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  g_auto(H5uQuiet) quiet = h5u_quiet();

  if (t->owner != getpid()) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: table '%s': opened by process %ld; a forked process "
                "cannot write it",
                t->path, t->table, (long)t->owner);
    return FALSE;
  }
  if (t->ncols == 0 && !res_table_define(t, row, n, error))
    return FALSE;

  memset(t->seen, 0, t->ncols);
  for (guint i = 0; i < n; i++)
    if (!res_table_put(t, &row[i], error))
      return FALSE;
  for (guint i = 0; i < t->ncols; i++)
    if (!t->seen[i]) {
      g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                  "%s: table '%s': missing column '%s' (expects %s)", t->path,
                  t->table, t->cols[i].name, res_type_name(t->cols[i].type));
      return FALSE;
    }

  hsize_t start[1] = { t->rows }, count[1] = { 1 };
  hsize_t extent[1] = { t->rows + 1 };
  if (H5Dset_extent(t->dset, extent) < 0)
    return res_fail(error, RES_ERROR_IO, t->path, t->table,
                    "extending to %" G_GUINT64_FORMAT " rows", t->rows + 1);
  g_auto(H5uHid) fspace = H5Dget_space(t->dset);
  g_auto(H5uHid) mspace = H5Screate_simple(1, count, NULL);
  if (fspace < 0 || mspace < 0 ||
      H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) <
        0 ||
      H5Dwrite(t->dset, t->mem_type, mspace, fspace, H5P_DEFAULT,
               t->row_buf) < 0) {
    res_fail(error, RES_ERROR_IO, t->path, t->table,
             "writing row %" G_GUINT64_FORMAT, t->rows);
    /* Best effort: shrink back so the table holds only complete rows. */
    extent[0] = t->rows;
    H5Dset_extent(t->dset, extent);
    return FALSE;
  }
  t->rows++;
  if (H5Fflush(t->file, H5F_SCOPE_LOCAL) < 0)
    return res_fail(error, RES_ERROR_IO, t->path, t->table,
                    "flushing row %" G_GUINT64_FORMAT, t->rows - 1);
  return TRUE;
}

/* Rows in the table (those already there when opened in APPEND mode
 * included). */
guint64 res_table_rows(const ResTable *t)
{
  g_return_val_if_fail(t != NULL, 0);
  return t->rows;
}

/* Flushes and closes; t is freed in every case. */
gboolean res_table_close(ResTable *t, GError **error)
{
  g_return_val_if_fail(t != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  g_auto(H5uQuiet) quiet = h5u_quiet();
  return res_table_destroy(t, error);
}

void res_table_free(ResTable *t)
{
  if (t != NULL)
    res_table_close(t, NULL);
}

/* ---- columns of an open table ------------------------------------------- */

/* Columns of t (0 until its first row). */
guint res_table_n_columns(const ResTable *t)
{
  g_return_val_if_fail(t != NULL, 0);
  return t->ncols;
}

/* Name of column i (borrowed from t, valid while t is open). */
const char *res_table_column_name(const ResTable *t, guint i)
{
  g_return_val_if_fail(t != NULL && i < t->ncols, NULL);
  return t->cols[i].name;
}

ResType res_table_column_type(const ResTable *t, guint i)
{
  g_return_val_if_fail(t != NULL && i < t->ncols, RES_STRING);
  return t->cols[i].type;
}

/* Writes (or rewrites) the string-list attribute `name` on t's dataset and
 * flushes.  The table must have columns; the names this module manages
 * (columns, units, bool_columns) are refused. */
gboolean res_table_set_note(ResTable *t, const char *name,
                            const char *const *values, gsize n,
                            GError **error)
{
  g_return_val_if_fail(t != NULL && name != NULL, FALSE);
  g_return_val_if_fail(values != NULL || n == 0, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  g_return_val_if_fail(strcmp(name, "columns") != 0 &&
                         strcmp(name, "units") != 0 &&
                         strcmp(name, "bool_columns") != 0,
                       FALSE);
  g_auto(H5uQuiet) quiet = h5u_quiet();
  if (t->owner != getpid() || t->dset < 0) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: table '%s': cannot write attribute '%s' %s", t->path,
                t->table, name,
                t->dset < 0 ? "before the first row"
                            : "from a forked process");
    return FALSE;
  }
  htri_t exists = H5Aexists(t->dset, name);
  if (exists < 0 || (exists > 0 && H5Adelete(t->dset, name) < 0))
    return res_fail(error, RES_ERROR_IO, t->path, t->table,
                    "replacing attribute '%s'", name);
  if (!res_attr_strings(t->dset, name, values, n, t->path, t->table, error))
    return FALSE;
  if (H5Fflush(t->file, H5F_SCOPE_LOCAL) < 0)
    return res_fail(error, RES_ERROR_IO, t->path, t->table, "flushing");
  return TRUE;
}

/* ---- reading back ------------------------------------------------------- */

/* One read value in a single allocation (freed with g_free): the ResValue,
 * then its name, then its string. */
static ResValue *res_value_new(const ResCol *col, const guchar *src)
{
  const char *s = NULL;
  if (col->type == RES_STRING) {
    memcpy(&s, src, sizeof s);
    if (s == NULL)
      s = "";
  }
  gsize name_len = strlen(col->name) + 1;
  gsize s_len = s != NULL ? strlen(s) + 1 : 0;
  ResValue *v = g_malloc0(sizeof(ResValue) + name_len + s_len);
  char *name = (char *)(v + 1);
  memcpy(name, col->name, name_len);
  v->name = name;
  v->type = col->type;
  switch (col->type) {
  case RES_INT: memcpy(&v->i, src, sizeof v->i); break;
  case RES_FLOAT: memcpy(&v->f, src, sizeof v->f); break;
  case RES_BOOL: v->i = *src != 0; break;
  case RES_STRING:
    memcpy(name + name_len, s, s_len);
    v->s = name + name_len;
    break;
  }
  return v;
}

/* A whole dataset read into memory rows. */
typedef struct {
  ResCol *cols;
  guint ncols;
  hid_t mem_type;
  hid_t space;
  size_t row_size;
  hsize_t n;
  guchar *buf; /* n rows; strings allocated by HDF5 */
} ResRaw;

static void res_raw_clear(ResRaw *raw)
{
  if (raw->buf != NULL && raw->n > 0)
    res_reclaim(raw->mem_type, raw->space, raw->buf);
  g_clear_pointer(&raw->buf, g_free);
  if (raw->mem_type >= 0)
    H5Tclose(raw->mem_type);
  if (raw->space >= 0)
    H5Sclose(raw->space);
  res_cols_free(raw->cols, raw->ncols);
  memset(raw, 0, sizeof *raw);
  raw->mem_type = raw->space = H5I_INVALID_HID;
}

/* Reads every row of the results-table-shaped dataset dset into raw (to
 * be cleared with res_raw_clear, also on failure).  label names the table
 * in errors. */
static gboolean res_raw_read(hid_t dset, ResRaw *raw, const char *path,
                             const char *label, GError **error)
{
  memset(raw, 0, sizeof *raw);
  raw->mem_type = raw->space = H5I_INVALID_HID;
  if (!res_cols_from_dataset(dset, &raw->cols, &raw->ncols, path, label,
                             error))
    return FALSE;
  raw->mem_type = res_mem_type(raw->cols, raw->ncols, &raw->row_size, path,
                               label, error);
  if (raw->mem_type < 0)
    return FALSE;
  raw->space = H5Dget_space(dset);
  hsize_t dims[1] = { 0 };
  if (raw->space < 0 || H5Sget_simple_extent_ndims(raw->space) != 1 ||
      H5Sget_simple_extent_dims(raw->space, dims, NULL) < 0)
    return res_fail(error, RES_ERROR_SCHEMA, path, label,
                    "not a results table (not one-dimensional)");
  if (dims[0] > G_MAXSIZE / raw->row_size) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: table '%s': too many rows to read (%" G_GUINT64_FORMAT
                ")",
                path, label, (guint64)dims[0]);
    return FALSE;
  }
  if (dims[0] == 0)
    return TRUE;
  raw->buf = g_malloc0(dims[0] * raw->row_size);
  if (H5Dread(dset, raw->mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw->buf) <
      0) {
    res_fail(error, RES_ERROR_IO, path, label, "reading the rows");
    /* A failed read may have allocated some strings already. */
    raw->n = dims[0];
    return FALSE;
  }
  raw->n = dims[0];
  return TRUE;
}

/* Row r of raw as a GPtrArray of ResValue* (owned by the caller). */
static GPtrArray *res_raw_row(const ResRaw *raw, hsize_t r)
{
  GPtrArray *row = g_ptr_array_new_full(raw->ncols, g_free);
  for (guint c = 0; c < raw->ncols; c++)
    g_ptr_array_add(row, res_value_new(&raw->cols[c],
                                       raw->buf + r * raw->row_size +
                                         raw->cols[c].offset));
  return row;
}

/* Reads the dataset at dset_path of an open file as rows (see
 * res_table_read). */
static GPtrArray *res_read_rows(hid_t file, const char *dset_path,
                                const char *path, const char *label,
                                GError **error)
{
  g_auto(H5uHid) dset = H5Dopen2(file, dset_path, H5P_DEFAULT);
  if (dset < 0) {
    res_fail(error, RES_ERROR_IO, path, label, "opening the dataset");
    return NULL;
  }
  ResRaw raw;
  if (!res_raw_read(dset, &raw, path, label, error)) {
    res_raw_clear(&raw);
    return NULL;
  }
  GPtrArray *rows = g_ptr_array_new_full((guint)raw.n,
                                         (GDestroyNotify)g_ptr_array_unref);
  for (hsize_t r = 0; r < raw.n; r++)
    g_ptr_array_add(rows, res_raw_row(&raw, r));
  res_raw_clear(&raw);
  return rows;
}

/* Opens `path` read-only for reading back, with errors naming it. */
static hid_t res_open_read(const char *path, GError **error)
{
  if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: cannot read results: %s", path,
                g_file_test(path, G_FILE_TEST_IS_DIR) ? "it is a directory"
                : g_file_test(path, G_FILE_TEST_EXISTS) ? "not a regular file"
                                                        : "no such file");
    return H5I_INVALID_HID;
  }
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0)
    res_fail(error, RES_ERROR_IO, path, NULL, "cannot open results file");
  return file;
}

/* 1 when `link` (an absolute path, its group may be missing) exists, 0
 * when not, -1 on an HDF5 error. */
static htri_t res_link_exists(hid_t file, const char *group,
                              const char *link)
{
  htri_t g = H5Lexists(file, group, H5P_DEFAULT);
  return g > 0 ? H5Lexists(file, link, H5P_DEFAULT) : g;
}

/* Reads every row of `table` from `path` (see io/results.h).  Returns a
 * new array (owned by the caller; g_ptr_array_unref frees everything) of
 * rows in file order, each a GPtrArray of ResValue* in column order; NULL
 * with RES_ERROR_IO when the file or table cannot be read, RES_ERROR_SCHEMA
 * when the dataset is not a results table.  A rewrite that a kill
 * interrupted after the old table was unlinked is read in its place. */
GPtrArray *res_table_read(const char *path, const char *table, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  g_return_val_if_fail(table != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  g_auto(H5uQuiet) quiet = h5u_quiet();

  if (!res_check_table_name(path, table, error))
    return NULL;
  g_auto(H5uHid) file = res_open_read(path, error);
  if (file < 0)
    return NULL;
  g_autofree char *dset_path = g_strconcat("/results/", table, NULL);
  g_autofree char *tmp_path = res_rewrite_path(table);
  htri_t has_table = res_link_exists(file, "results", dset_path);
  if (has_table == 0 && res_link_exists(file, "results", tmp_path) > 0)
    return res_read_rows(file, tmp_path, path, table, error);
  if (has_table <= 0) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: table '%s': no such table", path, table);
    return NULL;
  }
  return res_read_rows(file, dset_path, path, table, error);
}

/* ---- removing rows -------------------------------------------------------- */

/* Removes the rows of `table` for which keep(row, data) is FALSE (see
 * io/results.h).  The kept rows are written, in order, to a copy of the
 * table made with H5Ocopy (attributes included) at "/results/.<table>
 * .rewrite", which is flushed before the table is unlinked and the copy
 * moved to its name and flushed again; res_table_open and res_table_read
 * finish or undo a rewrite that a kill interrupted, so the table is always
 * either the old one or the new one. */
gboolean res_table_filter(const char *path, const char *table,
                          ResRowKeep keep, gpointer data, guint64 *removed,
                          GError **error)
{
  g_return_val_if_fail(path != NULL && table != NULL && keep != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  g_auto(H5uQuiet) quiet = h5u_quiet();
  if (removed != NULL)
    *removed = 0;

  if (!res_check_table_name(path, table, error))
    return FALSE;
  if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: cannot rewrite results: no such file", path);
    return FALSE;
  }
  g_auto(H5uHid) file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0)
    return res_fail(error, RES_ERROR_IO, path, NULL,
                    "cannot open results file for writing");
  g_autofree char *dset_path = g_strconcat("/results/", table, NULL);
  g_autofree char *tmp_path = res_rewrite_path(table);
  if (!res_ensure_group(file, "results", path, error) ||
      !res_recover_rewrite(file, path, table, error))
    return FALSE;
  htri_t exists = H5Lexists(file, dset_path, H5P_DEFAULT);
  if (exists < 0)
    return res_fail(error, RES_ERROR_IO, path, table, "looking up the table");
  if (exists == 0) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: table '%s': no such table", path, table);
    return FALSE;
  }

  ResRaw raw;
  gboolean ok = FALSE;
  g_autofree guint8 *keep_row = NULL;
  guchar *kept_buf = NULL;
  hsize_t kept = 0;
  {
    g_auto(H5uHid) dset = H5Dopen2(file, dset_path, H5P_DEFAULT);
    if (dset < 0) {
      memset(&raw, 0, sizeof raw);
      raw.mem_type = raw.space = H5I_INVALID_HID;
      res_fail(error, RES_ERROR_IO, path, table, "opening the dataset");
      goto out;
    }
    if (!res_raw_read(dset, &raw, path, table, error))
      goto out;
  }
  keep_row = g_malloc0(MAX(raw.n, 1));
  for (hsize_t r = 0; r < raw.n; r++) {
    g_autoptr(GPtrArray) row = res_raw_row(&raw, r);
    keep_row[r] = keep(row, data) ? 1 : 0;
    kept += keep_row[r];
  }
  if (removed != NULL)
    *removed = raw.n - kept;
  if (kept == raw.n) {
    ok = TRUE;
    goto out;
  }
  if (kept == 0) {
    /* Nothing left: drop the table, so that its next first row fixes its
     * columns afresh. */
    if (H5Ldelete(file, dset_path, H5P_DEFAULT) < 0 ||
        H5Fflush(file, H5F_SCOPE_LOCAL) < 0)
      res_fail(error, RES_ERROR_IO, path, table, "deleting the table");
    else
      ok = TRUE;
    goto out;
  }

  /* The kept rows, packed (their strings still belong to raw.buf). */
  kept_buf = g_malloc(kept * raw.row_size);
  hsize_t k = 0;
  for (hsize_t r = 0; r < raw.n; r++)
    if (keep_row[r])
      memcpy(kept_buf + (k++) * raw.row_size, raw.buf + r * raw.row_size,
             raw.row_size);
  {
    hsize_t dims[1] = { kept };
    g_auto(H5uHid) tmp = H5I_INVALID_HID;
    g_auto(H5uHid) mspace = H5Screate_simple(1, dims, NULL);
    if (H5Lexists(file, tmp_path, H5P_DEFAULT) > 0)
      H5Ldelete(file, tmp_path, H5P_DEFAULT);
    if (mspace < 0 ||
        H5Ocopy(file, dset_path, file, tmp_path, H5P_DEFAULT, H5P_DEFAULT) <
          0 ||
        (tmp = H5Dopen2(file, tmp_path, H5P_DEFAULT)) < 0 ||
        H5Dset_extent(tmp, dims) < 0 ||
        H5Dwrite(tmp, raw.mem_type, mspace, H5S_ALL, H5P_DEFAULT, kept_buf) <
          0 ||
        H5Fflush(file, H5F_SCOPE_LOCAL) < 0) {
      res_fail(error, RES_ERROR_IO, path, table, "writing the kept rows");
      if (tmp >= 0) {
        H5Dclose(tmp);
        tmp = H5I_INVALID_HID;
      }
      H5Ldelete(file, tmp_path, H5P_DEFAULT);
      goto out;
    }
  }
  if (H5Ldelete(file, dset_path, H5P_DEFAULT) < 0 ||
      H5Lmove(file, tmp_path, file, dset_path, H5P_DEFAULT, H5P_DEFAULT) < 0 ||
      H5Fflush(file, H5F_SCOPE_LOCAL) < 0) {
    res_fail(error, RES_ERROR_IO, path, table, "replacing the table");
    goto out;
  }
  ok = TRUE;

out:
  g_free(kept_buf);
  res_raw_clear(&raw);
  return ok;
}

/* ---- timelines ------------------------------------------------------------ */

/* The timeline name check: like a table name. */
static gboolean res_check_run_name(const char *path, const char *run,
                                   GError **error)
{
  return res_check_table_name(path, run, error);
}

/* Checks the samples of gpus[0..n_gpus); returns the total row count. */
static gboolean res_timeline_check(const ResTimelineGpu *gpus, guint n_gpus,
                                   const char *path, const char *run,
                                   hsize_t *total, GError **error)
{
  g_autoptr(GHashTable) seen = g_hash_table_new(NULL, NULL);
  *total = 0;
  for (guint g = 0; g < n_gpus; g++) {
    const ResTimelineGpu *tg = &gpus[g];
    if (!g_hash_table_add(seen, GUINT_TO_POINTER(tg->gpu + 1))) {
      g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                  "%s: timeline '%s': GPU %u given twice", path, run, tg->gpu);
      return FALSE;
    }
    if (tg->n > 0 && (tg->time_s == NULL || tg->power_w == NULL)) {
      g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                  "%s: timeline '%s': GPU %u has samples but no %s", path,
                  run, tg->gpu, tg->time_s == NULL ? "time_s" : "power_w");
      return FALSE;
    }
    for (gsize i = 0; i < tg->n; i++) {
      if (!isfinite(tg->time_s[i]) || (i > 0 && tg->time_s[i] < tg->time_s[i - 1])) {
        g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                    "%s: timeline '%s': GPU %u sample %" G_GSIZE_FORMAT
                    ": time_s = %g is %s",
                    path, run, tg->gpu, i, tg->time_s[i],
                    isfinite(tg->time_s[i]) ? "before the previous sample"
                                            : "not finite");
        return FALSE;
      }
    }
    *total += tg->n;
  }
  return TRUE;
}

/* Writes the timeline dataset at dset_path (a new name) in file. */
static gboolean res_timeline_put(hid_t file, const char *dset_path,
                                 const ResTimelineGpu *gpus, guint n_gpus,
                                 hsize_t total, const char *path,
                                 const char *run, GError **error)
{
  ResCol cols[] = {
    { (char *)"gpu", RES_INT, 0 },
    { (char *)"time_s", RES_FLOAT, 0 },
    { (char *)"power_w", RES_FLOAT, 0 },
    { (char *)"sm_mhz", RES_FLOAT, 0 },
  };
  size_t row_size = 0;
  g_auto(H5uHid) mem_type =
    res_mem_type(cols, G_N_ELEMENTS(cols), &row_size, path, run, error);
  if (mem_type < 0)
    return FALSE;
  g_auto(H5uHid) ftype = H5Tcopy(mem_type);
  g_auto(H5uHid) dcpl = H5Pcreate(H5P_DATASET_CREATE);
  hsize_t dims[1] = { total }, maxdims[1] = { H5S_UNLIMITED };
  hsize_t chunk[1] = { RES_TIMELINE_CHUNK_ROWS };
  g_auto(H5uHid) space = H5Screate_simple(1, dims, maxdims);
  if (ftype < 0 || H5Tpack(ftype) < 0 || dcpl < 0 ||
      H5Pset_chunk(dcpl, 1, chunk) < 0 || H5Pset_shuffle(dcpl) < 0 ||
      H5Pset_deflate(dcpl, RES_TIMELINE_DEFLATE_LEVEL) < 0 || space < 0)
    return res_fail(error, RES_ERROR_IO, path, run,
                    "setting up the timeline dataset");
  g_auto(H5uHid) dset = H5Dcreate2(file, dset_path, ftype, space, H5P_DEFAULT,
                                   dcpl, H5P_DEFAULT);
  if (dset < 0)
    return res_fail(error, RES_ERROR_IO, path, run,
                    "creating the timeline dataset");

  /* Rows in GPU order, each GPU's samples in time order; written once
   * (every chunk is filtered exactly once). */
  g_autofree guchar *buf = g_malloc0(MAX(total, 1) * row_size);
  hsize_t r = 0;
  for (guint g = 0; g < n_gpus; g++) {
    const ResTimelineGpu *tg = &gpus[g];
    for (gsize i = 0; i < tg->n; i++, r++) {
      guchar *row = buf + r * row_size;
      gint64 gpu = tg->gpu;
      double sm = tg->sm_mhz != NULL ? tg->sm_mhz[i] : NAN;
      memcpy(row + cols[0].offset, &gpu, sizeof gpu);
      memcpy(row + cols[1].offset, &tg->time_s[i], sizeof(double));
      memcpy(row + cols[2].offset, &tg->power_w[i], sizeof(double));
      memcpy(row + cols[3].offset, &sm, sizeof sm);
    }
  }
  if (total > 0 &&
      H5Dwrite(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
    return res_fail(error, RES_ERROR_IO, path, run, "writing the timeline");

  static const char *const names[] = { "gpu", "time_s", "power_w", "sm_mhz" };
  static const char *const units[] = { "", "s", "W", "MHz" };
  if (!res_attr_strings(dset, "columns", names, 4, path, run, error) ||
      !res_attr_strings(dset, "units", units, 4, path, run, error) ||
      !res_attr_strings(dset, "bool_columns", NULL, 0, path, run, error) ||
      !res_attr_string(dset, "interpolation", "previous", path, run, error))
    return FALSE;
  g_auto(H5uHid) aspace = H5Screate(H5S_SCALAR);
  g_auto(H5uHid) attr = aspace < 0 ? H5I_INVALID_HID
                                   : H5Acreate2(dset, "n_gpus", H5T_STD_I64LE,
                                                aspace, H5P_DEFAULT,
                                                H5P_DEFAULT);
  gint64 ng = n_gpus;
  if (attr < 0 || H5Awrite(attr, H5T_NATIVE_INT64, &ng) < 0)
    return res_fail(error, RES_ERROR_IO, path, run,
                    "writing attribute 'n_gpus'");
  return TRUE;
}

/* Writes the timeline of one run (see io/results.h).  The dataset is
 * written complete under "/timelines/.<run>.partial", flushed, and then
 * moved to "/timelines/<run>", so a kill never leaves a partial timeline
 * under the run's name. */
gboolean res_timeline_write(const char *path, const char *run,
                            const ResTimelineGpu *gpus, guint n_gpus,
                            gboolean replace, const ResMeta *meta,
                            GError **error)
{
  g_return_val_if_fail(path != NULL && run != NULL, FALSE);
  g_return_val_if_fail(gpus != NULL || n_gpus == 0, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  g_auto(H5uQuiet) quiet = h5u_quiet();

  if (!res_check_run_name(path, run, error))
    return FALSE;
  hsize_t total = 0;
  if (!res_timeline_check(gpus, n_gpus, path, run, &total, error))
    return FALSE;

  gboolean created = FALSE;
  g_auto(H5uHid) file = res_open_file(path, meta, &created, error);
  if (file < 0)
    return FALSE;
  g_autofree char *dset_path = g_strconcat("/timelines/", run, NULL);
  g_autofree char *tmp_path =
    g_strconcat("/timelines/.", run, ".partial", NULL);
  if (!res_ensure_group(file, "timelines", path, error))
    return FALSE;
  htri_t exists = H5Lexists(file, dset_path, H5P_DEFAULT);
  htri_t has_tmp = H5Lexists(file, tmp_path, H5P_DEFAULT);
  if (exists < 0 || has_tmp < 0)
    return res_fail(error, RES_ERROR_IO, path, run, "looking up the timeline");
  if (exists > 0 && !replace) {
    g_set_error(error, RES_ERROR, RES_ERROR_EXISTS,
                "%s: timeline '%s' exists (write it with replace, or use "
                "another run name)",
                path, run);
    return FALSE;
  }
  if (has_tmp > 0 && H5Ldelete(file, tmp_path, H5P_DEFAULT) < 0)
    return res_fail(error, RES_ERROR_IO, path, run,
                    "removing an interrupted timeline");
  if (!res_timeline_put(file, tmp_path, gpus, n_gpus, total, path, run,
                        error)) {
    H5Ldelete(file, tmp_path, H5P_DEFAULT);
    return FALSE;
  }
  if (H5Fflush(file, H5F_SCOPE_LOCAL) < 0 ||
      (exists > 0 && H5Ldelete(file, dset_path, H5P_DEFAULT) < 0) ||
      H5Lmove(file, tmp_path, file, dset_path, H5P_DEFAULT, H5P_DEFAULT) <
        0 ||
      H5Fflush(file, H5F_SCOPE_LOCAL) < 0)
    return res_fail(error, RES_ERROR_IO, path, run, "storing the timeline");
  return TRUE;
}

/* Reads a timeline back as rows gpu, time_s, power_w, sm_mhz (like
 * res_table_read). */
GPtrArray *res_timeline_read(const char *path, const char *run,
                             GError **error)
{
  g_return_val_if_fail(path != NULL && run != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  g_auto(H5uQuiet) quiet = h5u_quiet();
  if (!res_check_run_name(path, run, error))
    return NULL;
  g_auto(H5uHid) file = res_open_read(path, error);
  if (file < 0)
    return NULL;
  g_autofree char *dset_path = g_strconcat("/timelines/", run, NULL);
  if (res_link_exists(file, "timelines", dset_path) <= 0) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: timeline '%s': no such timeline", path, run);
    return NULL;
  }
  return res_read_rows(file, dset_path, path, run, error);
}
