/* io/results_timeline.c -- run timelines (/timelines/<run>): written once,
 * compressed, read back.  See io/results.h and the layout in io/results.c.
 */
#include "io/results-private.h"
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
  /* The compressed chunks reach the file when the dataset is closed (its
   * attribute first, which holds it open): a failure there (the g_auto
   * close would drop it) left a timeline of
   * zeros that the store then linked into place (tests/scenario-faults.sh,
   * export-h5). */
  if (H5Aclose(h5u_steal(&attr)) < 0 || H5Dclose(h5u_steal(&dset)) < 0)
    return res_fail(error, RES_ERROR_IO, path, run, "writing the timeline");
  return TRUE;
}

/* Stores the timeline of `run` in an open file: written complete under
 * "/timelines/.<run>.partial", flushed, and then moved to
 * "/timelines/<run>", so a kill never leaves a partial timeline under the
 * run's name. */
static gboolean res_timeline_store(hid_t file, const char *path,
                                   const char *run,
                                   const ResTimelineGpu *gpus, guint n_gpus,
                                   hsize_t total, gboolean replace,
                                   GError **error)
{
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

/* Writes the timeline of one run (see io/results.h).  A new file is built
 * under a temporary name and linked into place with its timeline complete
 * (res_open_file), so a failure or a kill leaves no file. */
gboolean res_timeline_write(const char *path, const char *run,
                            const ResTimelineGpu *gpus, guint n_gpus,
                            gboolean replace, const ResMeta *meta,
                            GError **error)
{
  g_return_val_if_fail(path != NULL && run != NULL, FALSE);
  g_return_val_if_fail(gpus != NULL || n_gpus == 0, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  H5U_QUIET();

  if (!res_check_run_name(path, run, error))
    return FALSE;
  hsize_t total = 0;
  if (!res_timeline_check(gpus, n_gpus, path, run, &total, error))
    return FALSE;

  ResNewFile *pending = NULL;
  g_auto(H5uHid) file = res_open_file(path, meta, &pending, error);
  if (file < 0)
    return FALSE;
  gboolean ok = res_timeline_store(file, path, run, gpus, n_gpus, total,
                                   replace, error);
  if (ok && pending != NULL)
    ok = res_commit_file(&pending, path, error);
  res_release_file(&pending);
  return ok;
}

/* Reads a timeline back as rows gpu, time_s, power_w, sm_mhz (like
 * res_table_read). */
GPtrArray *res_timeline_read(const char *path, const char *run,
                             GError **error)
{
  g_return_val_if_fail(path != NULL && run != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  H5U_QUIET();
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
