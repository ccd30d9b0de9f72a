/* io/results_read.c -- reading a results table back, and removing rows
 * (res_table_filter, by rewrite).  See io/results.h.
 */
#include "io/results-private.h"
#include "io/atomic.h"
#include "io/fault.h"
#include "io/h5open.h"
#include "io/h5util.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <hdf5.h>
#include <math.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>


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

/* TRUE when row r of dset cannot be read because it references file space
 * past the end of the file that the superblock records: the mark of a row
 * whose append a kill interrupted inside its flush (see Durability in
 * io/results.c).  Any other failure (an I/O error) is FALSE: a row is
 * never dropped for it. */
gboolean res_row_torn(hid_t dset, hid_t mem_type, hsize_t r)
{
  size_t size = H5Tget_size(mem_type);
  g_autofree guchar *buf = g_malloc0(MAX(size, 1));
  g_auto(H5uHid) fspace = H5Dget_space(dset);
  hsize_t one = 1;
  g_auto(H5uHid) mspace = H5Screate_simple(1, &one, NULL);
  if (size == 0 || fspace < 0 || mspace < 0 ||
      H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &r, NULL, &one, NULL) < 0)
    return FALSE;
  herr_t rc = H5Dread(dset, mem_type, mspace, fspace, H5P_DEFAULT, buf);
  g_autofree char *reason = rc < 0 ? h5u_error_reason() : NULL;
  res_reclaim(mem_type, mspace, buf);
  return rc < 0 && reason != NULL &&
         (strstr(reason, "EOA") != NULL || strstr(reason, "eoa") != NULL);
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
  raw->n = dims[0];
  /* A last row torn by a kill (see Durability in io/results.c) is the row
   * that was being appended: it is not there, the others are.  Checked
   * first, alone: a whole read that fails in it would leak the strings
   * HDF5 had already converted for the rows before it. */
  hsize_t keep = dims[0];
  if (res_row_torn(dset, raw->mem_type, dims[0] - 1))
    keep = dims[0] - 1;
  if (keep == 0) {
    raw->n = 0;
    return TRUE;
  }
  hsize_t start = 0;
  g_auto(H5uHid) mspace = H5Screate_simple(1, &keep, NULL);
  g_auto(H5uHid) fspace = H5Dget_space(dset);
  if (mspace < 0 || fspace < 0 ||
      H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, NULL, &keep, NULL) <
        0)
    return res_fail(error, RES_ERROR_IO, path, label, "reading the rows");
  H5Sclose(raw->space);
  raw->space = h5u_steal(&mspace);
  raw->n = keep;
  if (H5Dread(dset, raw->mem_type, raw->space, fspace, H5P_DEFAULT,
              raw->buf) < 0)
    return res_fail(error, RES_ERROR_IO, path, label, "reading the rows");
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

/* Every row of the open dataset dset as an array of rows (see
 * res_table_read), or NULL with error. */
GPtrArray *res_dset_rows(hid_t dset, const char *path,
                                const char *label, GError **error)
{
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

/* Reads the dataset at dset_path of an open file as rows (see
 * res_table_read). */
GPtrArray *res_read_rows(hid_t file, const char *dset_path,
                         const char *path, const char *label,
                         GError **error)
{
  g_auto(H5uHid) dset = H5Dopen2(file, dset_path, H5P_DEFAULT);
  if (dset < 0) {
    res_fail(error, RES_ERROR_IO, path, label, "opening the dataset");
    return NULL;
  }
  return res_dset_rows(dset, path, label, error);
}

/* Opens `path` read-only for reading back, with errors naming it. */
hid_t res_open_read(const char *path, GError **error)
{
  if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: cannot read results: %s", path,
                g_file_test(path, G_FILE_TEST_IS_DIR) ? "it is a directory"
                : g_file_test(path, G_FILE_TEST_EXISTS) ? "not a regular file"
                                                        : "no such file");
    return H5I_INVALID_HID;
  }
  GError *refused = NULL;
  hid_t file = h5u_open(path, H5F_ACC_RDONLY, G_MAXUINT64, RES_ERROR,
                        RES_ERROR_UNSAFE, &refused);
  if (refused != NULL)
    g_propagate_error(error, refused);
  else if (file < 0)
    res_fail_open(error, errno, path, "cannot open results file");
  return file;
}

/* 1 when `link` (an absolute path, its group may be missing) exists, 0
 * when not, -1 on an HDF5 error. */
htri_t res_link_exists(hid_t file, const char *group,
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
  H5U_QUIET();

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

/* Reads the rows of the open table t through its handle (see
 * io/results.h).  Returns a new array owned by the caller, or NULL with
 * error. */
GPtrArray *res_table_read_rows(ResTable *t, GError **error)
{
  g_return_val_if_fail(t != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  H5U_QUIET();
  if (t->owner != getpid() || t->file < 0) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: table '%s': cannot read it %s", t->path, t->table,
                t->file < 0 ? "after a failed write"
                            : "from a forked process");
    return NULL;
  }
  if (t->dset < 0)
    return g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref);
  return res_dset_rows(t->dset, t->path, t->table, error);
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
  H5U_QUIET();
  if (removed != NULL)
    *removed = 0;

  if (!res_check_table_name(path, table, error))
    return FALSE;
  if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: cannot rewrite results: no such file", path);
    return FALSE;
  }
  GError *refused = NULL;
  g_auto(H5uHid) file = h5u_open(path, H5F_ACC_RDWR, G_MAXUINT64,
                                 RES_ERROR, RES_ERROR_UNSAFE, &refused);
  if (refused != NULL) {
    g_propagate_error(error, refused);
    return FALSE;
  }
  if (file < 0) {
    res_fail_open(error, errno, path, "cannot open results file for writing");
    return FALSE;
  }
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
