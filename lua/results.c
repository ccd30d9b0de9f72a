/* lua/results.c -- appendable HDF5 results tables (DESIGN section 9).
 *
 * File layout:
 *
 *   /                       attributes joulesim_version, scenario,
 *                           scenario_source, created (vlen UTF-8 strings),
 *                           seed (uint64); written once, when the file is
 *                           created
 *   /results/<table>        1-D compound dataset, max dims unlimited,
 *                           chunked 256 rows, deflate level 4; attributes
 *                           "columns" (names), "units" (parallel to
 *                           columns), "bool_columns" (names of the uint8
 *                           columns that hold booleans; a null dataspace
 *                           when there are none)
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
 *
 * Durability: each append extends, writes and H5Fflush()es before it
 * returns, so completed rows are on disk when the call returns (a crash may
 * lose at most the row being written).
 *
 * Errors: HDF5's automatic error printing is switched off while a function
 * of this module runs (and restored afterwards, so other modules keep their
 * own setting); failures become RES_ERROR GErrors naming the path, the
 * table, what was being done, and the innermost HDF5 error message.  Every
 * HDF5 handle is held in a g_auto(ResHid) or in the ResTable, so every exit
 * path closes it.
 */
#include "lua/results.h"

#include <glib/gstdio.h>
#include <hdf5.h>
#include <string.h>

#ifndef JOULESIM_VERSION
#define JOULESIM_VERSION "unknown"
#endif

G_DEFINE_QUARK(res-error-quark, res_error)

/* Rows per chunk, and deflate level, of every results dataset. */
#define RES_CHUNK_ROWS 256
#define RES_DEFLATE_LEVEL 4

/* ---- HDF5 handles and errors ------------------------------------------ */

/* An owned HDF5 identifier, closed by g_auto(ResHid) whatever its kind. */
typedef hid_t ResHid;

static void res_hid_close(hid_t id)
{
  switch (H5Iget_type(id)) {
  case H5I_FILE: H5Fclose(id); break;
  case H5I_GROUP: H5Gclose(id); break;
  case H5I_DATATYPE: H5Tclose(id); break;
  case H5I_DATASPACE: H5Sclose(id); break;
  case H5I_DATASET: H5Dclose(id); break;
  case H5I_ATTR: H5Aclose(id); break;
  case H5I_GENPROP_LST: H5Pclose(id); break;
  default: g_warn_if_reached(); break;
  }
}

G_DEFINE_AUTO_CLEANUP_FREE_FUNC(ResHid, res_hid_close, H5I_INVALID_HID)

/* Hands a g_auto(ResHid) handle over to the caller. */
static inline hid_t res_steal(hid_t *id)
{
  hid_t out = *id;
  *id = H5I_INVALID_HID;
  return out;
}

/* Frees the variable-length strings that H5Dread allocated in buf. */
static void res_reclaim(hid_t mem_type, hid_t space, void *buf)
{
#if H5_VERSION_GE(1, 12, 0)
  H5Treclaim(mem_type, space, H5P_DEFAULT, buf);
#else
  H5Dvlen_reclaim(mem_type, space, H5P_DEFAULT, buf);
#endif
}

/* HDF5's automatic error printing, saved on entry to a public function and
 * restored on exit (g_auto(ResQuiet) q = res_quiet()). */
typedef struct {
  H5E_auto2_t func;
  void *data;
  gboolean saved;
} ResQuiet;

static ResQuiet res_quiet(void)
{
  ResQuiet q = { NULL, NULL, FALSE };
  if (H5Eget_auto2(H5E_DEFAULT, &q.func, &q.data) >= 0)
    q.saved = TRUE;
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  return q;
}

static void res_quiet_restore(ResQuiet *q)
{
  H5Eclear2(H5E_DEFAULT);
  if (q->saved)
    H5Eset_auto2(H5E_DEFAULT, q->func, q->data);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(ResQuiet, res_quiet_restore)

/* H5Ewalk2 callback: keeps the description of the innermost error (the
 * first one walked upward), which is the most specific, e.g. the errno
 * text of a failed open(). */
static herr_t res_walk_innermost(unsigned n, const H5E_error2_t *err,
                                 void *data)
{
  char **out = data;
  if (n == 0 && err->desc != NULL && err->desc[0] != '\0')
    *out = g_strdup(err->desc);
  return 0;
}

/* Sets *error to code with "PATH: table 'TABLE': WHAT (HDF5: reason)",
 * reading the reason from the current HDF5 error stack (so call it right
 * after the failing HDF5 call, before any other HDF5 call clears the
 * stack).  table may be NULL.  Always returns FALSE. */
G_GNUC_PRINTF(5, 6)
static gboolean res_fail(GError **error, gint code, const char *path,
                         const char *table, const char *fmt, ...)
{
  g_autofree char *reason = NULL;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, res_walk_innermost, &reason);
  H5Eclear2(H5E_DEFAULT);

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
  g_auto(ResHid) t = H5Tcopy(H5T_C_S1);
  if (t < 0 || H5Tset_size(t, H5T_VARIABLE) < 0 ||
      H5Tset_cset(t, H5T_CSET_UTF8) < 0)
    return H5I_INVALID_HID;
  return res_steal(&t);
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

  g_auto(ResHid) vstr = res_vstr_type();
  g_auto(ResHid) type = H5Tcreate(H5T_COMPOUND, *row_size);
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
  return res_steal(&type);
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
  g_auto(ResHid) ftype = H5Dget_type(dset);
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

    g_auto(ResHid) mtype = H5Tget_member_type(ftype, (unsigned)i);
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
  g_auto(ResHid) type = res_vstr_type();
  g_auto(ResHid) space = H5Screate(H5S_SCALAR);
  if (type < 0 || space < 0)
    return res_fail(error, RES_ERROR_IO, path, table,
                    "preparing attribute '%s'", name);
  g_auto(ResHid) attr =
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
  g_auto(ResHid) type = res_vstr_type();
  g_auto(ResHid) space =
    n > 0 ? H5Screate_simple(1, dims, NULL) : H5Screate(H5S_NULL);
  if (type < 0 || space < 0)
    return res_fail(error, RES_ERROR_IO, path, table,
                    "preparing attribute '%s'", name);
  g_auto(ResHid) attr =
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

  g_auto(ResHid) space = H5Screate(H5S_SCALAR);
  if (space < 0)
    return res_fail(error, RES_ERROR_IO, path, NULL,
                    "preparing attribute 'seed'");
  g_auto(ResHid) attr = H5Acreate2(file, "seed", H5T_STD_U64LE, space,
                                   H5P_DEFAULT, H5P_DEFAULT);
  if (attr < 0 || H5Awrite(attr, H5T_NATIVE_UINT64, &meta->seed) < 0)
    return res_fail(error, RES_ERROR_IO, path, NULL,
                    "writing attribute 'seed'");
  return TRUE;
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
};

/* Closes every handle of t, frees t; returns FALSE (setting error when it
 * is still unset) when the final flush or close fails. */
static gboolean res_table_destroy(ResTable *t, GError **error)
{
  gboolean ok = TRUE;
  if (t->file >= 0 && H5Fflush(t->file, H5F_SCOPE_LOCAL) < 0)
    ok = res_fail(error, RES_ERROR_IO, t->path, t->table, "flushing");
  if (t->dset >= 0 && H5Dclose(t->dset) < 0 && ok)
    ok = res_fail(error, RES_ERROR_IO, t->path, t->table, "closing");
  if (t->mem_type >= 0)
    H5Tclose(t->mem_type);
  if (t->file >= 0 && H5Fclose(t->file) < 0 && ok)
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
  if (table[0] == '\0' || strchr(table, '/') != NULL ||
      strcmp(table, ".") == 0 || !g_utf8_validate(table, -1, NULL)) {
    g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                "%s: invalid table name '%s' (need a non-empty UTF-8 name "
                "without '/')",
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
  g_auto(ResHid) space = H5Dget_space(t->dset);
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

/* Ensures the group /results exists in t's file. */
static gboolean res_ensure_group(ResTable *t, GError **error)
{
  htri_t exists = H5Lexists(t->file, "results", H5P_DEFAULT);
  if (exists < 0)
    return res_fail(error, RES_ERROR_IO, t->path, NULL, "looking up /results");
  if (exists > 0)
    return TRUE;
  g_auto(ResHid) group =
    H5Gcreate2(t->file, "results", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (group < 0)
    return res_fail(error, RES_ERROR_IO, t->path, NULL, "creating /results");
  return TRUE;
}

/* Opens `path` read-write, creating it (with its root attributes) when it
 * does not exist.  *created tells whether this call made the file. */
static hid_t res_open_file(const char *path, const ResMeta *meta,
                           gboolean *created, GError **error)
{
  *created = FALSE;
  if (g_file_test(path, G_FILE_TEST_EXISTS)) {
    if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
      g_set_error(error, RES_ERROR, RES_ERROR_IO,
                  "%s: cannot open results file: not a regular file", path);
      return H5I_INVALID_HID;
    }
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (file < 0)
      res_fail(error, RES_ERROR_IO, path, NULL,
               "cannot open results file for writing");
    return file;
  }

  g_auto(ResHid) file =
    H5Fcreate(path, H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) {
    res_fail(error, RES_ERROR_IO, path, NULL, "cannot create results file");
    /* A failed create must not leave a partial file behind. */
    if (g_file_test(path, G_FILE_TEST_IS_REGULAR))
      g_unlink(path);
    return H5I_INVALID_HID;
  }
  *created = TRUE;
  if (!res_write_file_attrs(file, meta, path, error))
    return H5I_INVALID_HID; /* the caller removes the file */
  return res_steal(&file);
}

/* Opens `table` in the results file at `path` (see lua/results.h).
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
  g_auto(ResQuiet) quiet = res_quiet();

  if (!res_check_table_name(path, table, error))
    return NULL;

  ResTable *t = g_new0(ResTable, 1);
  t->path = g_strdup(path);
  t->table = g_strdup(table);
  t->dset_path = g_strconcat("/results/", table, NULL);
  t->dset = H5I_INVALID_HID;
  t->mem_type = H5I_INVALID_HID;

  gboolean created = FALSE;
  t->file = res_open_file(path, meta, &created, error);
  if (t->file < 0)
    goto fail;
  if (!res_ensure_group(t, error))
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
  g_auto(ResHid) ftype = H5I_INVALID_HID;
  g_auto(ResHid) dcpl = H5I_INVALID_HID;
  g_auto(ResHid) space = H5I_INVALID_HID;
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
  dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (dcpl < 0 || H5Pset_chunk(dcpl, 1, chunk) < 0 ||
      H5Pset_deflate(dcpl, RES_DEFLATE_LEVEL) < 0) {
    res_fail(error, RES_ERROR_IO, t->path, t->table,
             "setting up chunking and compression");
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

/* Appends one row (see lua/results.h).  Errors: RES_ERROR_SCHEMA naming the
 * column for a missing, unknown, repeated or mistyped column (the table is
 * unchanged); RES_ERROR_IO when HDF5 fails to extend, write or flush. */
gboolean res_table_append(ResTable *t, const ResValue *row, guint n,
                          GError **error)
{
  g_return_val_if_fail(t != NULL, FALSE);
  g_return_val_if_fail(row != NULL || n == 0, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  g_auto(ResQuiet) quiet = res_quiet();

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
  g_auto(ResHid) fspace = H5Dget_space(t->dset);
  g_auto(ResHid) mspace = H5Screate_simple(1, count, NULL);
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
  g_auto(ResQuiet) quiet = res_quiet();
  return res_table_destroy(t, error);
}

void res_table_free(ResTable *t)
{
  if (t != NULL)
    res_table_close(t, NULL);
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

/* Reads every row of `table` from `path` (see lua/results.h).  Returns a
 * new array (owned by the caller; g_ptr_array_unref frees everything) of
 * rows in file order, each a GPtrArray of ResValue* in column order; NULL
 * with RES_ERROR_IO when the file or table cannot be read, RES_ERROR_SCHEMA
 * when the dataset is not a results table. */
GPtrArray *res_table_read(const char *path, const char *table, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  g_return_val_if_fail(table != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  g_auto(ResQuiet) quiet = res_quiet();

  if (!res_check_table_name(path, table, error))
    return NULL;
  if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: cannot read results: no such file", path);
    return NULL;
  }
  g_auto(ResHid) file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) {
    res_fail(error, RES_ERROR_IO, path, NULL, "cannot open results file");
    return NULL;
  }
  g_autofree char *dset_path = g_strconcat("/results/", table, NULL);
  htri_t has_group = H5Lexists(file, "results", H5P_DEFAULT);
  htri_t has_table =
    has_group > 0 ? H5Lexists(file, dset_path, H5P_DEFAULT) : has_group;
  if (has_table <= 0) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: table '%s': no such table", path, table);
    return NULL;
  }
  g_auto(ResHid) dset = H5Dopen2(file, dset_path, H5P_DEFAULT);
  if (dset < 0) {
    res_fail(error, RES_ERROR_IO, path, table, "opening the dataset");
    return NULL;
  }

  ResCol *cols = NULL;
  guint ncols = 0;
  if (!res_cols_from_dataset(dset, &cols, &ncols, path, table, error))
    return NULL;
  size_t row_size = 0;
  g_auto(ResHid) mem_type =
    res_mem_type(cols, ncols, &row_size, path, table, error);
  g_auto(ResHid) space = H5Dget_space(dset);
  hsize_t dims[1] = { 0 };
  GPtrArray *rows = NULL;
  guchar *buf = NULL;

  if (mem_type < 0)
    goto out;
  if (space < 0 || H5Sget_simple_extent_ndims(space) != 1 ||
      H5Sget_simple_extent_dims(space, dims, NULL) < 0) {
    res_fail(error, RES_ERROR_SCHEMA, path, table,
             "not a results table (not one-dimensional)");
    goto out;
  }
  if (dims[0] > G_MAXSIZE / row_size) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: table '%s': too many rows to read (%" G_GUINT64_FORMAT
                ")",
                path, table, (guint64)dims[0]);
    goto out;
  }
  if (dims[0] > 0) {
    buf = g_malloc0(dims[0] * row_size);
    if (H5Dread(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
      res_fail(error, RES_ERROR_IO, path, table, "reading the rows");
      /* A failed read may have allocated some strings already. */
      res_reclaim(mem_type, space, buf);
      goto out;
    }
  }

  rows = g_ptr_array_new_full((guint)dims[0],
                              (GDestroyNotify)g_ptr_array_unref);
  for (hsize_t r = 0; r < dims[0]; r++) {
    GPtrArray *row = g_ptr_array_new_full(ncols, g_free);
    for (guint c = 0; c < ncols; c++)
      g_ptr_array_add(row,
                      res_value_new(&cols[c], buf + r * row_size + cols[c].offset));
    g_ptr_array_add(rows, row);
  }
  if (buf != NULL)
    res_reclaim(mem_type, space, buf);

out:
  g_free(buf);
  res_cols_free(cols, ncols);
  return rows;
}
