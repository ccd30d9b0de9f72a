/* io/results_table.c -- a results table opened for appending: opening
 * (creating the file, recovering an interrupted rewrite), the first row
 * fixing the columns, appending, closing.  See io/results.h and the
 * format and durability notes in io/results.c.
 */
#define _GNU_SOURCE /* fallocate */
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
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef JOULESIM_VERSION
#define JOULESIM_VERSION "unknown"
#endif
#ifndef JOULESIM_GIT_REV
#define JOULESIM_GIT_REV "unknown"
#endif

static gboolean res_table_add_run_column(ResTable *t, GError **error);


/* ---- the table ---------------------------------------------------------- */


/* The file descriptor behind t's file (sec2 driver), or -1. */
static int res_table_fd(const ResTable *t)
{
  void *handle = NULL;
  if (H5Fget_vfd_handle(t->file, H5P_DEFAULT, &handle) < 0 || handle == NULL)
    return -1;
  return *(int *)handle;
}

/* Closes every handle of t, frees t; returns FALSE (setting error when it
 * is still unset) when the final flush or close fails.  A new file not
 * yet in place is linked into place when `commit` (a close: the file
 * holds the table's rows, or just the root attributes when there were
 * none), else dropped (an open that failed). */
static gboolean res_table_destroy(ResTable *t, gboolean commit,
                                  GError **error)
{
  gboolean ok = TRUE;
  if (t->owner != getpid()) {
    /* A forked copy: the handles belong to the parent's file, which only
     * the parent may flush or close.  Free the memory and nothing else. */
    t->file = t->dset = t->mem_type = H5I_INVALID_HID;
    res_release_file(&t->pending); /* memory only, in a forked copy */
  }
  if (t->pending != NULL && commit)
    ok = res_commit_file(&t->pending, t->path, error);
  res_release_file(&t->pending);
  if (t->file >= 0 && H5Fflush(t->file, H5F_SCOPE_LOCAL) < 0 && ok)
    ok = res_fail(error, RES_ERROR_IO, t->path, t->table, "flushing");
  if (t->file >= 0 && ok && !res_fsync(t->file))
    ok = res_fail(error, RES_ERROR_IO, t->path, t->table, "syncing to disk: %s",
                  g_strerror(errno));
  /* The blocks reserved past the end (res_table_reserve) go back: a
   * truncation to the same size frees them (ext4, tmpfs, XFS). */
  struct stat st;
  int fd = t->file >= 0 && t->reserved_to > 0 ? res_table_fd(t) : -1;
  if (fd >= 0 && fstat(fd, &st) == 0)
    (void)!ftruncate(fd, st.st_size);
  if (t->dset >= 0 && H5Dclose(t->dset) < 0 && ok)
    ok = res_fail(error, RES_ERROR_IO, t->path, t->table, "closing");
  if (t->mem_type >= 0)
    H5Tclose(t->mem_type);
  if (t->file >= 0 && res_close_file(t->file) < 0 && ok)
    ok = res_fail(error, RES_ERROR_IO, t->path, t->table, "closing the file");
  else if (t->file >= 0 && ok)
    h5u_trust(t->path); /* our own writes: no need to walk it again */
  g_clear_pointer(&t->by_name, g_hash_table_unref);
  res_cols_free(t->cols, t->ncols);
  g_free(t->row_buf);
  g_free(t->seen);
  g_free(t->broken);
  g_free(t->run_id);
  g_strfreev(t->run_info);
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
gboolean res_check_table_name(const char *path, const char *table,
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
  t->linked = TRUE;
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
  if (!res_table_set_columns(t, error))
    return FALSE;
  /* A last row that still references space past the recorded end of the
   * file once res_open_file took back what a killed writer had written
   * there was torn by the kill (see Durability in io/results.c): its data
   * never reached the file, it was never appended,
   * and the table is cut back to the rows before it, so that the file
   * reads whole again (h5py too) and the next row takes its place. */
  if (t->rows > 0 && res_row_torn(t->dset, t->mem_type, t->rows - 1)) {
    hsize_t extent[1] = { t->rows - 1 };
    if (H5Dset_extent(t->dset, extent) < 0)
      return res_fail(error, RES_ERROR_IO, t->path, t->table,
                      "removing a row torn by a kill");
    t->rows--;
  }
  return TRUE;
}

/* Ensures the top-level group `name` ("results", "timelines") exists in
 * file. */
ResTable *res_table_open(const char *path, const char *table, ResMode mode,
                         const ResMeta *meta, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  g_return_val_if_fail(table != NULL, NULL);
  g_return_val_if_fail(mode == RES_MODE_APPEND || mode == RES_MODE_REPLACE,
                       NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  H5U_QUIET();

  if (!res_check_table_name(path, table, error))
    return NULL;

  ResTable *t = g_new0(ResTable, 1);
  t->path = g_strdup(path);
  t->table = g_strdup(table);
  t->dset_path = g_strconcat("/results/", table, NULL);
  t->dset = H5I_INVALID_HID;
  t->mem_type = H5I_INVALID_HID;
  t->owner = getpid();
  if (meta != NULL && meta->run_id != NULL) {
    t->run_id = g_strdup(meta->run_id);
    t->run_info = g_new0(char *, 5);
    t->run_info[0] = g_strdup_printf("started %s", meta->run_started != NULL
                                                     ? meta->run_started
                                                     : "");
    t->run_info[1] = g_strdup_printf("joulesim %s (git %s)",
                                     meta->version ? meta->version
                                                   : JOULESIM_VERSION,
                                     JOULESIM_GIT_REV);
    t->run_info[2] = g_strdup_printf("scenario %s", meta->scenario_path != NULL
                                                      ? meta->scenario_path
                                                      : "");
    t->run_info[3] = g_strdup_printf("seed %" G_GUINT64_FORMAT, meta->seed);
  }

  t->file = res_open_file(path, meta, &t->pending, error);
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
  } else if (exists > 0 && (!res_table_load(t, error) ||
                             !res_table_add_run_column(t, error))) {
    goto fail;
  }
  /* The file is consistent on disk before any row is written. */
  if (H5Fflush(t->file, H5F_SCOPE_LOCAL) < 0) {
    res_fail(error, RES_ERROR_IO, path, table, "flushing");
    goto fail;
  }
  return t;

fail:
  res_table_destroy(t, FALSE, NULL);
  return NULL;
}

/* Creates an anonymous, empty table dataset of columns cols (laid out in
 * memory by mem_type) with its attributes columns, units and
 * bool_columns; returns it (owned by the caller) or -1 with error. */
static hid_t res_dataset_new(ResTable *t, const ResCol *cols, guint n,
                             hid_t mem_type, GError **error)
{
  g_autoptr(GPtrArray) names_v = g_ptr_array_new();
  g_autoptr(GPtrArray) units_v = g_ptr_array_new();
  g_autoptr(GPtrArray) bools_v = g_ptr_array_new();
  for (guint i = 0; i < n; i++) {
    g_ptr_array_add(names_v, cols[i].name);
    g_ptr_array_add(units_v, (gpointer)res_unit_for(cols[i].name));
    if (cols[i].type == RES_BOOL)
      g_ptr_array_add(bools_v, cols[i].name);
  }
  hsize_t dims[1] = { 0 }, maxdims[1] = { H5S_UNLIMITED };
  hsize_t chunk[1] = { RES_CHUNK_ROWS };
  /* On disk the row is packed (no alignment padding). */
  g_auto(H5uHid) ftype = H5Tcopy(mem_type);
  if (ftype < 0 || H5Tpack(ftype) < 0) {
    res_fail(error, RES_ERROR_IO, t->path, t->table, "creating the file type");
    return H5I_INVALID_HID;
  }
  /* Chunked so that it can grow; no filter, so that a chunk never moves
   * (see Durability). */
  g_auto(H5uHid) dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (dcpl < 0 || H5Pset_chunk(dcpl, 1, chunk) < 0) {
    res_fail(error, RES_ERROR_IO, t->path, t->table, "setting up chunking");
    return H5I_INVALID_HID;
  }
  g_auto(H5uHid) space = H5Screate_simple(1, dims, maxdims);
  if (space < 0) {
    res_fail(error, RES_ERROR_IO, t->path, t->table, "creating the dataspace");
    return H5I_INVALID_HID;
  }
  g_auto(H5uHid) dset = H5Dcreate_anon(t->file, ftype, space, dcpl,
                                       H5P_DEFAULT);
  if (dset < 0) {
    res_fail(error, RES_ERROR_IO, t->path, t->table, "creating the dataset");
    return H5I_INVALID_HID;
  }
  if (!res_attr_strings(dset, "columns",
                        (const char *const *)names_v->pdata, names_v->len,
                        t->path, t->table, error) ||
      !res_attr_strings(dset, "units", (const char *const *)units_v->pdata,
                        units_v->len, t->path, t->table, error) ||
      !res_attr_strings(dset, "bool_columns",
                        (const char *const *)bools_v->pdata, bools_v->len,
                        t->path, t->table, error))
    return H5I_INVALID_HID; /* never linked: it goes with its handle */
  return h5u_steal(&dset);
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
  guint total = n + (t->run_id != NULL);
  if (total > RES_MAX_COLUMNS) {
    g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                "%s: table '%s': a row of %u columns%s; a results table has "
                "at most %d (HDF5 keeps the row type in one header message "
                "of at most 64 KiB)",
                t->path, t->table, total,
                t->run_id != NULL ? " with run_id" : "", RES_MAX_COLUMNS);
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
    else if (t->run_id != NULL && strcmp(name, RES_RUN_COLUMN) == 0)
      problem = "joulesim writes the run's id in column";
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
  if (t->run_id != NULL) { /* the run's column, last */
    t->cols = g_renew(ResCol, t->cols, n + 1);
    t->cols[n] = (ResCol){ g_strdup(RES_RUN_COLUMN), RES_STRING, 0 };
    t->ncols = n + 1;
  }

  gboolean ok = res_table_set_columns(t, error);
  if (ok) {
    t->dset = res_dataset_new(t, t->cols, t->ncols, t->mem_type, error);
    t->linked = FALSE; /* anonymous until its first row is on disk */
    ok = t->dset >= 0;
  }
  if (!ok) {
    /* Back to "no columns". */
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
  if (t->run_id != NULL && strcmp(col->name, RES_RUN_COLUMN) == 0) {
    g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                "%s: table '%s': joulesim writes the run's id in column "
                "'%s'; name yours otherwise", t->path, t->table, col->name);
    return FALSE;
  }
  if (t->seen[idx - 1]) {
    g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                "%s: table '%s': column '%s' given twice", t->path, t->table,
                col->name);
    return FALSE;
  }
  t->seen[idx - 1] = 1;

  /* A float in an int column: stored as a float, and the column is
   * promoted before the row is written (res_table_promote; int64 and
   * float64 take the same place in the row). */
  if (col->type == RES_INT && v->type == RES_FLOAT) {
    t->seen[idx - 1] = 2;
    memcpy(t->row_buf + col->offset, &v->f, sizeof v->f);
    return TRUE;
  }
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

/* After a new table's first row is on disk: gives the dataset its name,
 * and links a new file into place (see Durability in io/results.c: the
 * name and the file appear only with a complete first row).  A failure
 * to link the file closes it (the table then refuses rows); a failure to
 * name the dataset is retried by the next append. */
static gboolean res_table_link(ResTable *t, GError **error)
{
  if (!t->linked) {
    if (H5Olink(t->dset, t->file, t->dset_path, H5P_DEFAULT, H5P_DEFAULT) <
          0 ||
        H5Fflush(t->file, H5F_SCOPE_LOCAL) < 0)
      return res_fail(error, RES_ERROR_IO, t->path, t->table,
                      "naming the new table");
    t->linked = TRUE;
  }
  if (t->pending != NULL &&
      !res_commit_file(&t->pending, t->path, error)) {
    H5Dclose(t->dset);
    res_close_file(t->file);
    t->dset = t->file = H5I_INVALID_HID;
    return FALSE;
  }
  return TRUE;
}

static gboolean res_table_write_row(ResTable *t, GError **error);
static gboolean res_table_promote(ResTable *t, GError **error);
static gboolean res_table_note_run(ResTable *t, GError **error);

/* Slack reserved beyond what one append needs, so that most appends find
 * their space reserved already. */
#define RES_RESERVE_SLACK (1u << 20)

/* Reserves the file space the append of row (n values) can take, before
 * HDF5 writes anything: a full disk then fails the append here, cleanly,
 * with nothing written, the file as readable as before (h5py too) and the
 * table still usable.  Without it, a flush that fails halfway leaves a
 * file whose recorded end is short (h5py: "actual len exceeds EOA") and
 * an HDF5 file object that cannot be flushed or closed again (HDF5 1.10;
 * the process then crashes at exit).
 *
 * How: HDF5 puts new objects (a chunk every RES_CHUNK_ROWS rows, a
 * global-heap collection for the strings, B-tree and header growth) at
 * the end of its address space (EOA); fallocate(FALLOC_FL_KEEP_SIZE)
 * allocates the blocks from there on without changing the file's size,
 * so HDF5 and h5py see the same file, and HDF5's writes there need no new
 * block.  The estimate: a chunk when this row starts one, twice its
 * strings plus 64 KiB (heap collection headers, metadata), and on the
 * first row four times the column names (the attributes).  A file system
 * without fallocate (EOPNOTSUPP) is written unreserved, as before.  The
 * blocks left past the end are given back at close (res_table_destroy).
 * Fault site "results: reserve space" (io/fault.h) fails with ENOSPC. */
static gboolean res_table_reserve(ResTable *t, const ResValue *row, guint n,
                                  GError **error)
{
  haddr_t eoa = 0;
  int fd = res_table_fd(t);
  if (fd < 0 || H5Fget_eoa(t->file, &eoa) < 0)
    return TRUE;
  guint64 need = 64u << 10;
  if (t->rows % RES_CHUNK_ROWS == 0)
    need += (guint64)RES_CHUNK_ROWS * t->row_size;
  for (guint i = 0; i < n; i++) {
    if (row[i].type == RES_STRING && row[i].s != NULL)
      need += 2 * ((guint64)strlen(row[i].s) + 16);
    if (!t->linked && row[i].name != NULL)
      need += 4 * ((guint64)strlen(row[i].name) + 32);
  }
  if ((guint64)eoa + need <= t->reserved_to)
    return TRUE;
  /* From where the last reservation ended, so that the reserved space
   * stays one piece. */
  guint64 from = t->reserved_to > 0 ? MIN(t->reserved_to, (guint64)eoa)
                                    : (guint64)eoa;
  guint64 to = (guint64)eoa + need + RES_RESERVE_SLACK;
  int e = 0;
#ifdef FALLOC_FL_KEEP_SIZE
  gboolean injected = fault_inject(FAULT_WRITE, "results: reserve space");
  if (injected)
    e = ENOSPC;
  else if (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)from,
                     (off_t)(to - from)) != 0)
    e = errno;
  if (!injected && (e == ENOSPC || e == EDQUOT)) { /* without the slack */
    to = (guint64)eoa + need;
    e = fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)(to - from)) == 0
          ? 0
          : errno;
  }
#else
  e = EOPNOTSUPP;
#endif
  if (e == EOPNOTSUPP || e == ENOSYS || e == EINVAL) {
    t->reserved_to = 0; /* cannot reserve here: written unreserved */
    return TRUE;
  }
  if (e != 0) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: table '%s': cannot reserve %.1f MB for row %" G_GUINT64_FORMAT
                ": %s",
                t->path, t->table, (double)need / 1e6, t->rows, g_strerror(e));
    return FALSE;
  }
  t->reserved_to = to;
  return TRUE;
}

/* The signals that end a process by default and that people send to stop
 * one (Ctrl-C, kill, a closed terminal) are held while a row is written
 * and flushed: they then end the process between two appends, never
 * inside a flush, where they could leave the last row recorded only in
 * part (see Durability in io/results.c; SIGKILL cannot be held).  The
 * old mask goes to *old. */
static void res_hold_signals(sigset_t *old)
{
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGQUIT);
  pthread_sigmask(SIG_BLOCK, &set, old);
}

/* Restores the mask res_hold_signals saved: a signal that came meanwhile
 * is delivered now. */
static void res_release_signals(const sigset_t *old)
{
  pthread_sigmask(SIG_SETMASK, old, NULL);
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
  H5U_QUIET();

  if (t->owner != getpid()) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: table '%s': opened by process %ld; a forked process "
                "cannot write it",
                t->path, t->table, (long)t->owner);
    return FALSE;
  }
  if (t->file < 0) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: table '%s': the file could not be created (see the "
                "earlier error)",
                t->path, t->table);
    return FALSE;
  }
  if (t->broken != NULL) {
    g_set_error(error, RES_ERROR, RES_ERROR_IO,
                "%s: table '%s': an earlier write failed (%s); the table "
                "takes no more rows: close it, and open it again to see "
                "which rows are on disk",
                t->path, t->table, t->broken);
    return FALSE;
  }
  if (t->ncols == 0 && !res_table_define(t, row, n, error))
    return FALSE;

  memset(t->seen, 0, t->ncols);
  for (guint i = 0; i < n; i++)
    if (!res_table_put(t, &row[i], error))
      return FALSE;
  if (t->run_id != NULL) {
    guint idx = GPOINTER_TO_UINT(g_hash_table_lookup(t->by_name,
                                                     RES_RUN_COLUMN));
    g_assert(idx > 0); /* added at define or open */
    const char *id = t->run_id;
    memcpy(t->row_buf + t->cols[idx - 1].offset, &id, sizeof id);
    t->seen[idx - 1] = 1;
  }
  for (guint i = 0; i < t->ncols; i++)
    if (!t->seen[i]) {
      g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                  "%s: table '%s': missing column '%s' (expects %s)", t->path,
                  t->table, t->cols[i].name, res_type_name(t->cols[i].type));
      return FALSE;
    }

  if (!res_table_reserve(t, row, n, error))
    return FALSE;
  sigset_t held;
  res_hold_signals(&held);
  gboolean ok = res_table_promote(t, error) && res_table_write_row(t, error) &&
                res_table_note_run(t, error);
  res_release_signals(&held);
  return ok;
}

/* Writes t->row_buf as the next row, flushes it and (the first row) links
 * the table and its file into place. */
static gboolean res_table_write_row(ResTable *t, GError **error)
{
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
  if (H5Fflush(t->file, H5F_SCOPE_LOCAL) < 0) {
    res_fail(error, RES_ERROR_IO, t->path, t->table,
             "flushing row %" G_GUINT64_FORMAT, t->rows);
    /* HDF5 1.10 cannot flush this file again ("slist already enabled?"),
     * and whether the row reached the disk is unknown: it is not counted,
     * and no row follows it (a retry would duplicate it when it did).
     * The next open of the file (res_open_file) recovers it or cuts it. */
    t->broken = g_strdup((*error)->message);
    extent[0] = t->rows;
    H5Dset_extent(t->dset, extent);
    return FALSE;
  }
  t->rows++;
  return res_table_link(t, error);
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
  H5U_QUIET();
  return res_table_destroy(t, TRUE, error);
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
  H5U_QUIET();
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

/* ---- changing the columns ------------------------------------------------- */

/* Copies one attribute of the old table (loc) to the new (data), except
 * the ones res_dataset_new writes.  Read and written in its own file
 * type, which for the variable-length strings of every attribute this
 * module writes is a valid memory type too. */
static herr_t copy_note(hid_t loc, const char *name, const H5A_info_t *info,
                        void *data)
{
  (void)info;
  if (strcmp(name, "columns") == 0 || strcmp(name, "units") == 0 ||
      strcmp(name, "bool_columns") == 0)
    return 0;
  g_auto(H5uHid) a = H5Aopen(loc, name, H5P_DEFAULT);
  g_auto(H5uHid) type = a >= 0 ? H5Aget_type(a) : H5I_INVALID_HID;
  g_auto(H5uHid) space = a >= 0 ? H5Aget_space(a) : H5I_INVALID_HID;
  if (type < 0 || space < 0)
    return -1;
  hssize_t n = H5Sget_simple_extent_npoints(space);
  size_t size = H5Tget_size(type);
  if (n < 0 || size == 0)
    return -1;
  g_autofree guchar *buf = g_malloc0(MAX((gsize)n * size, 1));
  g_auto(H5uHid) b = H5Acreate2(*(hid_t *)data, name, type, space,
                                H5P_DEFAULT, H5P_DEFAULT);
  if (b < 0)
    return -1;
  if (n == 0)
    return 0;
  if (H5Aread(a, type, buf) < 0)
    return -1;
  herr_t rc = H5Awrite(b, type, buf);
  res_reclaim(type, space, buf);
  return rc < 0 ? -1 : 0;
}

/* Stores value v (of row r's column, or NULL when the row has no such
 * column: 0, NaN, false, "") at dst as a column of type `type`. */
static void put_converted(guchar *dst, ResType type, const ResValue *v)
{
  switch (type) {
  case RES_INT: {
    gint64 x = v != NULL ? v->i : 0;
    memcpy(dst, &x, sizeof x);
    break;
  }
  case RES_FLOAT: {
    double x = v == NULL ? NAN : v->type == RES_INT ? (double)v->i : v->f;
    memcpy(dst, &x, sizeof x);
    break;
  }
  case RES_BOOL:
    *dst = v != NULL && v->i != 0;
    break;
  case RES_STRING: {
    const char *x = v != NULL ? v->s : "";
    memcpy(dst, &x, sizeof x);
    break;
  }
  }
}

/* Rewrites t's table with columns cols[0..n) (taken over): every row
 * kept, in order, a column of the old table converted to the new one's
 * type (only int -> float), a new column given its default.  The notes
 * (res_table_set_note, run attributes) are copied.  Crash-safe like
 * res_table_filter: the new table is written and flushed under the
 * rewrite's temporary name, then the old one unlinked and the new one
 * moved to its name, and res_recover_rewrite finishes or undoes a rewrite
 * that a kill interrupted.  t then describes the new table; t->row_buf is
 * kept when the row keeps its size (a promotion). */
static gboolean res_table_reshape(ResTable *t, ResCol *cols, guint n,
                                  GError **error)
{
  size_t row_size = 0;
  g_auto(H5uHid) mem_type = res_mem_type(cols, n, &row_size, t->path,
                                         t->table, error);
  g_autoptr(GPtrArray) rows =
    mem_type >= 0 ? res_dset_rows(t->dset, t->path, t->table, error) : NULL;
  if (rows == NULL) {
    res_cols_free(cols, n);
    return FALSE;
  }
  g_autofree guchar *buf = g_malloc0(MAX(rows->len, 1) * row_size);
  for (guint r = 0; r < rows->len; r++) {
    GPtrArray *row = g_ptr_array_index(rows, r);
    for (guint c = 0; c < n; c++) {
      const ResValue *v = NULL;
      for (guint k = 0; k < row->len && v == NULL; k++)
        if (strcmp(((ResValue *)g_ptr_array_index(row, k))->name,
                   cols[c].name) == 0)
          v = g_ptr_array_index(row, k);
      put_converted(buf + r * row_size + cols[c].offset, cols[c].type, v);
    }
  }
  g_autofree char *tmp = res_rewrite_path(t->table);
  g_auto(H5uHid) dset = res_dataset_new(t, cols, n, mem_type, error);
  hsize_t extent[1] = { rows->len };
  hid_t old = t->dset;
  if (dset < 0 ||
      H5Aiterate2(old, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, copy_note,
                  &dset) < 0 ||
      H5Dset_extent(dset, extent) < 0 ||
      (rows->len > 0 && H5Dwrite(dset, mem_type, H5S_ALL, H5S_ALL,
                                 H5P_DEFAULT, buf) < 0) ||
      (H5Lexists(t->file, tmp, H5P_DEFAULT) > 0 &&
       H5Ldelete(t->file, tmp, H5P_DEFAULT) < 0) ||
      H5Olink(dset, t->file, tmp, H5P_DEFAULT, H5P_DEFAULT) < 0 ||
      H5Fflush(t->file, H5F_SCOPE_LOCAL) < 0) {
    if (error == NULL || *error == NULL)
      res_fail(error, RES_ERROR_IO, t->path, t->table,
               "rewriting the table with new columns");
    if (dset >= 0)
      H5Ldelete(t->file, tmp, H5P_DEFAULT);
    res_cols_free(cols, n);
    return FALSE;
  }
  if ((t->linked && H5Ldelete(t->file, t->dset_path, H5P_DEFAULT) < 0) ||
      H5Lmove(t->file, tmp, t->file, t->dset_path, H5P_DEFAULT,
              H5P_DEFAULT) < 0 ||
      H5Fflush(t->file, H5F_SCOPE_LOCAL) < 0) {
    res_cols_free(cols, n);
    return res_fail(error, RES_ERROR_IO, t->path, t->table,
                    "replacing the table by its rewrite");
  }
  /* t now describes the new table. */
  g_autofree guchar *keep =
    row_size == t->row_size ? g_steal_pointer(&t->row_buf) : NULL;
  g_autofree guint8 *seen = row_size == t->row_size && t->ncols == n
                              ? g_steal_pointer(&t->seen)
                              : NULL;
  H5Dclose(old);
  t->dset = h5u_steal(&dset);
  t->linked = TRUE;
  t->rows = rows->len;
  H5Tclose(t->mem_type);
  t->mem_type = H5I_INVALID_HID;
  g_clear_pointer(&t->by_name, g_hash_table_unref);
  g_clear_pointer(&t->row_buf, g_free);
  g_clear_pointer(&t->seen, g_free);
  res_cols_free(t->cols, t->ncols);
  t->cols = cols;
  t->ncols = n;
  if (!res_table_set_columns(t, error))
    return FALSE;
  if (keep != NULL)
    memcpy(t->row_buf, keep, row_size);
  if (seen != NULL)
    memcpy(t->seen, seen, n);
  return TRUE;
}

/* Promotes to float the int columns the row being appended gave a float
 * (res_table_put marked them 2 in t->seen), rewriting the table. */
static gboolean res_table_promote(ResTable *t, GError **error)
{
  guint promoted = 0;
  for (guint i = 0; i < t->ncols; i++)
    promoted += t->seen[i] == 2;
  if (promoted == 0)
    return TRUE;
  ResCol *cols = g_new0(ResCol, t->ncols);
  for (guint i = 0; i < t->ncols; i++) {
    cols[i].name = g_strdup(t->cols[i].name);
    cols[i].type = t->seen[i] == 2 ? RES_FLOAT : t->cols[i].type;
  }
  if (!res_table_reshape(t, cols, t->ncols, error)) {
    g_prefix_error(error, "promoting %u int column%s to float: ", promoted,
                   promoted == 1 ? "" : "s");
    return FALSE;
  }
  return TRUE;
}

/* A table opened with a run id (ResMeta) that was written without one
 * gets the column, empty in its old rows. */
static gboolean res_table_add_run_column(ResTable *t, GError **error)
{
  if (t->run_id == NULL || t->ncols == 0)
    return TRUE;
  guint idx = GPOINTER_TO_UINT(g_hash_table_lookup(t->by_name,
                                                   RES_RUN_COLUMN));
  if (idx > 0 && t->cols[idx - 1].type == RES_STRING)
    return TRUE;
  if (idx > 0) {
    g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                "%s: table '%s': column '%s' is a %s column; joulesim writes "
                "the run's id there as a string (use another table)",
                t->path, t->table, RES_RUN_COLUMN,
                res_type_name(t->cols[idx - 1].type));
    return FALSE;
  }
  if (t->ncols + 1 > RES_MAX_COLUMNS) {
    g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                "%s: table '%s': no room for column '%s' (at most %d)",
                t->path, t->table, RES_RUN_COLUMN, RES_MAX_COLUMNS);
    return FALSE;
  }
  ResCol *cols = g_new0(ResCol, t->ncols + 1);
  for (guint i = 0; i < t->ncols; i++) {
    cols[i].name = g_strdup(t->cols[i].name);
    cols[i].type = t->cols[i].type;
  }
  cols[t->ncols] = (ResCol){ g_strdup(RES_RUN_COLUMN), RES_STRING, 0 };
  sigset_t held;
  res_hold_signals(&held);
  gboolean ok = res_table_reshape(t, cols, t->ncols + 1, error);
  res_release_signals(&held);
  if (!ok)
    g_prefix_error(error, "adding column '%s': ", RES_RUN_COLUMN);
  return ok;
}

/* After the run's first row: the attribute "run:<run_id>" (see ResMeta),
 * flushed. */
static gboolean res_table_note_run(ResTable *t, GError **error)
{
  if (t->run_id == NULL || t->run_noted)
    return TRUE;
  g_autofree char *name = g_strconcat("run:", t->run_id, NULL);
  htri_t exists = H5Aexists(t->dset, name);
  if (exists < 0 ||
      (exists == 0 &&
       !res_attr_strings(t->dset, name, (const char *const *)t->run_info,
                         g_strv_length(t->run_info), t->path, t->table,
                         error)) ||
      H5Fflush(t->file, H5F_SCOPE_LOCAL) < 0) {
    if (error == NULL || *error == NULL)
      res_fail(error, RES_ERROR_IO, t->path, t->table,
               "writing attribute '%s'", name);
    return FALSE;
  }
  t->run_noted = TRUE;
  return TRUE;
}
