/* traces/native.c -- loading native trace files (trace_native_load):
 * the checksum record verified before HDF5 opens the file, then the
 * layout, strings, shapes, groups, programs, ranks and provenance, each
 * read whole.  The format and what the reader shares with the writer
 * (traces/native_write.c) are in traces/native_format.c; summaries of any
 * workload are traces/info.c.
 */
#include "traces/native-private.h"
#include "io/fault.h"
#include "io/h5open.h"
#include "io/h5util.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <hdf5.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- reading ---------------------------------------------------------------- */

static const char *nat_class_name(H5T_class_t c)
{
  switch (c) {
  case H5T_INTEGER: return "integer";
  case H5T_FLOAT: return "float";
  case H5T_STRING: return "string";
  case H5T_COMPOUND: return "compound";
  default: return "other";
  }
}

/* Checks that the compound file type has every member of mem_type, each of
 * the same class (integer or float). */
static gboolean nat_check_members(hid_t ftype, hid_t mem_type,
                                  const char *path, const char *disp,
                                  GError **error)
{
  int n = H5Tget_nmembers(mem_type);
  for (int i = 0; i < n; i++) {
    g_autofree char *name = NULL;
    char *raw = H5Tget_member_name(mem_type, (unsigned)i);
    name = g_strdup(raw);
    H5free_memory(raw);
    int fi = H5Tget_member_index(ftype, name);
    if (fi < 0) {
      H5Eclear2(H5E_DEFAULT);
      g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                  "%s: dataset %s lacks the member '%s'", path, disp, name);
      return FALSE;
    }
    H5T_class_t want = H5Tget_member_class(mem_type, (unsigned)i);
    H5T_class_t got = H5Tget_member_class(ftype, (unsigned)fi);
    if (want != got) {
      g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                  "%s: dataset %s: member '%s' is %s, expected %s", path,
                  disp, name, nat_class_name(got), nat_class_name(want));
      return FALSE;
    }
  }
  return TRUE;
}

/* Reads the whole 1-D dataset `name` under loc (shown as `disp` in
 * messages), whose records must be of class `cls` (compound members
 * checked against mem_type), into a new zero-filled buffer of n * elem
 * bytes (*out NULL when n == 0; caller frees).  n is at most max_n. */
static gboolean nat_dset_read(hid_t loc, const char *name, const char *disp,
                              H5T_class_t cls, hid_t mem_type, gsize elem,
                              guint64 max_n, void **out, guint64 *n_out,
                              const char *path, GError **error)
{
  *out = NULL;
  *n_out = 0;
  htri_t exists = H5Lexists(loc, name, H5P_DEFAULT);
  if (exists <= 0) {
    H5Eclear2(H5E_DEFAULT);
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: dataset %s is missing", path, disp);
    return FALSE;
  }
  g_auto(H5uHid) d = H5Oopen(loc, name, H5P_DEFAULT);
  if (d < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                    "cannot open dataset %s", disp);
  if (H5Iget_type(d) != H5I_DATASET) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: %s is not a dataset", path, disp);
    return FALSE;
  }
  g_auto(H5uHid) ftype = H5Dget_type(d);
  g_auto(H5uHid) space = H5Dget_space(d);
  if (ftype < 0 || space < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                    "cannot read the type of dataset %s", disp);
  H5T_class_t got = H5Tget_class(ftype);
  if (got != cls) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: dataset %s has %s records, expected %s", path, disp,
                nat_class_name(got), nat_class_name(cls));
    return FALSE;
  }
  if (cls == H5T_COMPOUND &&
      !nat_check_members(ftype, mem_type, path, disp, error))
    return FALSE;
  if (cls == H5T_STRING && H5Tis_variable_str(ftype) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: dataset %s must hold variable-length strings", path,
                disp);
    return FALSE;
  }
  hsize_t dims[1] = { 0 };
  if (H5Sget_simple_extent_ndims(space) != 1 ||
      H5Sget_simple_extent_dims(space, dims, NULL) < 0) {
    H5Eclear2(H5E_DEFAULT);
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: dataset %s must be one-dimensional", path, disp);
    return FALSE;
  }
  if (dims[0] > max_n) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: dataset %s has %" G_GUINT64_FORMAT " records (at most "
                "%" G_GUINT64_FORMAT ")", path, disp, (guint64)dims[0],
                max_n);
    return FALSE;
  }
  if (dims[0] == 0)
    return TRUE;
  if (dims[0] > G_MAXSIZE / elem) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                "%s: dataset %s is too large to read", path, disp);
    return FALSE;
  }
  /* The extent is a number in the file, the storage what was written: a
   * sparse dataset (a 60-byte file declaring 2^31 ops, read as fill
   * values: found by tests/fuzz/fuzz-native.c) would make the buffer
   * below huge.  Compressed files from other tools may store less than
   * they hold, but never below deflate's limit (about 1:1032). */
  double declared = (double)dims[0] * (double)MAX(H5Tget_size(ftype), 1);
  if (declared > 1100.0 * (double)H5Dget_storage_size(d)) {
    H5Eclear2(H5E_DEFAULT);
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: dataset %s declares %" G_GUINT64_FORMAT " records but "
                "stores only %" G_GUINT64_FORMAT " bytes (sparse or "
                "truncated)", path, disp, (guint64)dims[0],
                (guint64)H5Dget_storage_size(d));
    return FALSE;
  }
  void *buf = fault_inject(FAULT_ALLOC, "native: dataset buffer")
                ? NULL
                : g_try_malloc0((gsize)dims[0] * elem);
  if (buf == NULL) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                "%s: not enough memory to read dataset %s (%" G_GUINT64_FORMAT
                " records)", path, disp, (guint64)dims[0]);
    return FALSE;
  }
  if (H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
    /* A failed vlen read may have allocated some strings: reclaim them. */
    if (cls == H5T_STRING)
      H5Dvlen_reclaim(mem_type, space, H5P_DEFAULT, buf);
    g_free(buf);
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, path,
                    "cannot read dataset %s", disp);
  }
  *out = buf;
  *n_out = dims[0];
  return TRUE;
}

/* Reads a scalar (one-element) attribute of class cls into buf through
 * mem_type.  A missing attribute is an error unless `present` is given
 * (then *present says whether it was there).  Strings: mem_type must be a
 * variable-length string type; fixed-length attributes are read too (into
 * a new string stored at *(char **)buf, which the caller g_free()s; for
 * variable-length ones *(char **)buf is HDF5-allocated and likewise
 * returned as a g_malloc'd copy). */
static gboolean nat_attr_read(hid_t loc, const char *obj, const char *name,
                              H5T_class_t cls, hid_t mem_type, void *buf,
                              gboolean *present, const char *path,
                              GError **error)
{
  htri_t exists = H5Aexists(loc, name);
  if (exists < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                    "cannot look up attribute '%s' of %s", name, obj);
  if (present != NULL)
    *present = exists > 0;
  if (exists == 0) {
    if (present != NULL)
      return TRUE;
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: attribute '%s' of %s is missing", path, name, obj);
    return FALSE;
  }
  g_auto(H5uHid) a = H5Aopen(loc, name, H5P_DEFAULT);
  g_auto(H5uHid) ftype = a < 0 ? H5I_INVALID_HID : H5Aget_type(a);
  g_auto(H5uHid) space = a < 0 ? H5I_INVALID_HID : H5Aget_space(a);
  if (a < 0 || ftype < 0 || space < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                    "cannot open attribute '%s' of %s", name, obj);
  H5T_class_t got = H5Tget_class(ftype);
  if (got != cls || H5Sget_simple_extent_npoints(space) != 1) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: attribute '%s' of %s must be one %s (got %s)", path,
                name, obj, nat_class_name(cls), nat_class_name(got));
    return FALSE;
  }
  if (cls != H5T_STRING) {
    if (H5Aread(a, mem_type, buf) < 0)
      return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                      "cannot read attribute '%s' of %s", name, obj);
    return TRUE;
  }
  char *s = NULL;
  if (H5Tis_variable_str(ftype) > 0) {
    char *raw = NULL;
    if (H5Aread(a, mem_type, &raw) < 0)
      return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                      "cannot read attribute '%s' of %s", name, obj);
    s = g_strdup(raw != NULL ? raw : "");
    H5free_memory(raw);
  } else {
    size_t len = H5Tget_size(ftype);
    g_auto(H5uHid) fixed = H5Tcopy(H5T_C_S1);
    if (len == 0 || fixed < 0 || H5Tset_size(fixed, len + 1) < 0 ||
        H5Tset_strpad(fixed, H5T_STR_NULLTERM) < 0)
      return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                      "cannot read attribute '%s' of %s", name, obj);
    s = g_malloc0(len + 1);
    if (H5Aread(a, fixed, s) < 0) {
      g_free(s);
      return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                      "cannot read attribute '%s' of %s", name, obj);
    }
  }
  if (!g_utf8_validate(s, -1, NULL)) {
    g_free(s);
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: attribute '%s' of %s is not valid UTF-8", path, name,
                obj);
    return FALSE;
  }
  *(char **)buf = s;
  return TRUE;
}

/* An unsigned 32-bit attribute, read as a signed 64-bit one so that a
 * negative or larger value is refused rather than clipped by HDF5's
 * conversion (an int64 n_ranks = -1 used to read as 0). */
static gboolean nat_attr_u32_read(hid_t loc, const char *obj,
                                  const char *name, guint32 *v,
                                  const char *path, GError **error)
{
  gint64 wide = 0;
  if (!nat_attr_read(loc, obj, name, H5T_INTEGER, H5T_NATIVE_INT64, &wide,
                     NULL, path, error))
    return FALSE;
  if (wide < 0 || wide > G_MAXUINT32) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: attribute '%s' of %s is %" G_GINT64_FORMAT ", outside "
                "0 to %u", path, name, obj, wide, G_MAXUINT32);
    return FALSE;
  }
  *v = (guint32)wide;
  return TRUE;
}

/* An optional string attribute: *s NULL when absent (caller frees). */
static gboolean nat_attr_str_read(hid_t loc, const char *obj,
                                  const char *name, hid_t vstr, char **s,
                                  gboolean required, const char *path,
                                  GError **error)
{
  gboolean present = FALSE;
  *s = NULL;
  return nat_attr_read(loc, obj, name, H5T_STRING, vstr, s,
                       required ? NULL : &present, path, error);
}

typedef struct {
  SimWorkload *w;
  hid_t vstr;
  const char *path;
  GError **error;
} ProvCtx;

static herr_t nat_prov_attr(hid_t loc, const char *name,
                            const H5A_info_t *info, void *data)
{
  (void)info;
  ProvCtx *ctx = data;
  char *v = NULL;
  if (!nat_attr_str_read(loc, "/provenance", name, ctx->vstr, &v, TRUE,
                         ctx->path, ctx->error))
    return -1;
  g_hash_table_insert(ctx->w->provenance, g_strdup(name), v);
  return 0;
}

static gboolean nat_read_layout(hid_t file, SimWorkload *w, hid_t vstr,
                                const char *path, GError **error)
{
  const char *obj = "the root group";
  guint32 v = 0;
  if (!nat_attr_u32_read(file, obj, "tp", &v, path, error))
    return FALSE;
  w->tp = v;
  if (!nat_attr_u32_read(file, obj, "pp", &v, path, error))
    return FALSE;
  w->pp = v;
  if (!nat_attr_u32_read(file, obj, "dp", &v, path, error))
    return FALSE;
  w->dp = v;
  if (!nat_attr_u32_read(file, obj, "microbatches", &v, path, error))
    return FALSE;
  w->microbatches = v;
  /* The layout is unknown (all four 0, as imported traces store it) or
   * one the generator could have made: each at least 1, at most
   * NATIVE_MAX_RANKS ranks in all, at most NATIVE_MAX_MICROBATCHES. */
  gboolean none = w->tp == 0 && w->pp == 0 && w->dp == 0 &&
                  w->microbatches == 0;
  guint64 ranks = (guint64)w->tp * w->pp * w->dp;
  if (!none && (w->tp == 0 || w->pp == 0 || w->dp == 0 ||
                w->microbatches == 0 || w->tp > NATIVE_MAX_RANKS ||
                w->pp > NATIVE_MAX_RANKS || w->dp > NATIVE_MAX_RANKS ||
                ranks > NATIVE_MAX_RANKS ||
                w->microbatches > NATIVE_MAX_MICROBATCHES)) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: layout tp = %u, pp = %u, dp = %u, microbatches = %u is "
                "not one a trace can have (all 0 when unknown; otherwise "
                "each at least 1, tp*pp*dp at most %u and microbatches at "
                "most %u)", path, w->tp, w->pp, w->dp, w->microbatches,
                NATIVE_MAX_RANKS, NATIVE_MAX_MICROBATCHES);
    return FALSE;
  }
  double tokens = 0;
  if (!nat_attr_read(file, obj, "tokens_per_iteration", H5T_FLOAT,
                     H5T_NATIVE_DOUBLE, &tokens, NULL, path, error))
    return FALSE;
  if (!(tokens >= 0 && tokens < 1e300)) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: attribute 'tokens_per_iteration' must be a finite "
                "number >= 0", path);
    return FALSE;
  }
  w->tokens_per_iteration = tokens;
  if (!nat_attr_str_read(file, obj, "schedule", vstr, &w->schedule, FALSE,
                         path, error) ||
      !nat_attr_str_read(file, obj, "ref_gpu", vstr, &w->ref_gpu, FALSE,
                         path, error))
    return FALSE;
  return TRUE;
}

static gboolean nat_read_strings(hid_t file, SimWorkload *w, hid_t vstr,
                                 const char *path, GError **error)
{
  void *buf = NULL;
  guint64 n = 0;
  if (!nat_dset_read(file, "strings", "/strings", H5T_STRING, vstr,
                     sizeof(char *), G_MAXUINT32, &buf, &n, path, error))
    return FALSE;
  char **s = buf;
  gboolean ok = TRUE;
  for (guint64 i = 0; i < n && ok; i++) {
    const char *str = s[i] != NULL ? s[i] : "";
    guint32 id = sim_workload_intern(w, str);
    if (id != i) {
      g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                  "%s: /strings: entry %" G_GUINT64_FORMAT
                  " repeats entry %u ('%s')", path, i, id, str);
      ok = FALSE;
    }
  }
  if (n > 0) {
    hsize_t dims[1] = { n };
    g_auto(H5uHid) space = H5Screate_simple(1, dims, NULL);
    H5Dvlen_reclaim(vstr, space, H5P_DEFAULT, buf);
  }
  g_free(buf);
  return ok;
}

static gboolean nat_read_shapes(hid_t file, SimWorkload *w, const char *path,
                                GError **error)
{
  g_auto(H5uHid) type = nat_shape_type();
  void *buf = NULL;
  guint64 n = 0;
  if (type < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, path,
                    "cannot build the shape type");
  if (!nat_dset_read(file, "shapes", "/shapes", H5T_COMPOUND, type,
                     sizeof(SimShape), G_MAXUINT32, &buf, &n, path, error))
    return FALSE;
  const SimShape *sh = buf;
  for (guint64 i = 0; i < n; i++) {
    if (sh[i].klass >= SIM_CLASS_COUNT || sh[i].coll >= SIM_COLL_COUNT ||
        sh[i].name >= w->names->len || !(sh[i].flops >= 0) ||
        !(sh[i].bytes >= 0)) {
      g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                  "%s: /shapes: record %" G_GUINT64_FORMAT " has an "
                  "out-of-range class, collective type, name or a negative "
                  "size", path, i);
      g_free(buf);
      return FALSE;
    }
  }
  if (n > 0)
    g_array_append_vals(w->shapes, buf, (guint)n);
  g_free(buf);
  return TRUE;
}

static gboolean nat_read_groups(hid_t file, SimWorkload *w, const char *path,
                                GError **error)
{
  htri_t exists = H5Lexists(file, "groups", H5P_DEFAULT);
  if (exists <= 0) {
    H5Eclear2(H5E_DEFAULT);
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: group /groups is missing", path);
    return FALSE;
  }
  g_auto(H5uHid) g = H5Gopen2(file, "groups", H5P_DEFAULT);
  if (g < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                    "/groups is not a group");
  void *offb = NULL, *rankb = NULL;
  guint64 n_off = 0, n_ranks = 0;
  if (!nat_dset_read(g, "offsets", "/groups/offsets", H5T_INTEGER,
                     H5T_NATIVE_UINT32, sizeof(guint32), G_MAXUINT32, &offb,
                     &n_off, path, error))
    return FALSE;
  g_autofree guint32 *off = offb;
  if (!nat_dset_read(g, "ranks", "/groups/ranks", H5T_INTEGER,
                     H5T_NATIVE_UINT32, sizeof(guint32), G_MAXUINT32, &rankb,
                     &n_ranks, path, error))
    return FALSE;
  g_autofree guint32 *members = rankb;
  if (n_off < 1 || off[0] != 0 || off[n_off - 1] != n_ranks) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: /groups/offsets must start at 0 and end at the length "
                "of /groups/ranks (%" G_GUINT64_FORMAT ")", path, n_ranks);
    return FALSE;
  }
  for (guint64 k = 0; k + 1 < n_off; k++) {
    /* Checked before the group is read: offsets that rise past the end
     * and come back (0, 9, 3 with 3 members) read out of bounds (found by
     * tests/fuzz/fuzz-native.c). */
    if (off[k + 1] <= off[k] || off[k + 1] > n_ranks) {
      g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                  "%s: /groups/offsets: group %" G_GUINT64_FORMAT
                  " is empty, its offsets decrease or run past "
                  "/groups/ranks", path, k);
      return FALSE;
    }
    sim_workload_add_group(w, members + off[k], off[k + 1] - off[k]);
  }
  return TRUE;
}

/* Reads the datasets "ops" (records of op_type) and "stream_off" of the
 * rank or program group g, shown as disp ("/ranks/3", "/programs/0"):
 * *ops and *off (caller frees) hold *n_ops ops in *n_streams streams, both
 * NULL for the single offset 0 (no ops and no streams). */
static gboolean nat_read_op_arrays(hid_t g, const char *disp, hid_t op_type,
                                   SimOp **ops_out, guint32 *n_ops_out,
                                   guint32 **off_out, guint32 *n_streams,
                                   const char *path, GError **error)
{
  char dops[64], doff[64];
  g_snprintf(dops, sizeof dops, "%s/ops", disp);
  g_snprintf(doff, sizeof doff, "%s/stream_off", disp);
  void *opsb = NULL, *offb = NULL;
  guint64 n_ops = 0, n_off = 0;
  if (!nat_dset_read(g, "ops", dops, H5T_COMPOUND, op_type, sizeof(SimOp),
                     G_MAXUINT32 - 1, &opsb, &n_ops, path, error))
    return FALSE;
  g_autofree SimOp *ops = opsb;
  if (!nat_dset_read(g, "stream_off", doff, H5T_INTEGER, H5T_NATIVE_UINT32,
                     sizeof(guint32), SIM_MAX_STREAMS + 1, &offb, &n_off,
                     path, error))
    return FALSE;
  g_autofree guint32 *off = offb;
  gboolean bad = n_off < 1 || off[0] != 0 || off[n_off - 1] != n_ops ||
                 (n_off == 1 && n_ops > 0);
  for (guint64 s = 0; !bad && s + 1 < n_off; s++)
    bad = off[s + 1] < off[s];
  if (bad) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: %s must hold 1 to %u non-decreasing offsets from 0 to "
                "the number of ops (%" G_GUINT64_FORMAT ")", path, doff,
                SIM_MAX_STREAMS + 1, n_ops);
    return FALSE;
  }
  *n_ops_out = (guint32)n_ops;
  *n_streams = (guint32)(n_off - 1);
  if (n_off == 1) {
    /* No ops and no streams (see nat_write_stream_off). */
    *ops_out = NULL;
    *off_out = NULL;
  } else {
    *ops_out = g_steal_pointer(&ops);
    *off_out = g_steal_pointer(&off);
  }
  return TRUE;
}

/* Reads a 1-D attribute of exactly n integers into v (as uint32). */
static gboolean nat_attr_u32s_read(hid_t loc, const char *obj,
                                   const char *name, guint32 *v, hsize_t n,
                                   const char *path, GError **error)
{
  htri_t exists = H5Aexists(loc, name);
  if (exists <= 0) {
    H5Eclear2(H5E_DEFAULT);
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: attribute '%s' of %s is missing", path, name, obj);
    return FALSE;
  }
  g_auto(H5uHid) a = H5Aopen(loc, name, H5P_DEFAULT);
  g_auto(H5uHid) ftype = a < 0 ? H5I_INVALID_HID : H5Aget_type(a);
  g_auto(H5uHid) space = a < 0 ? H5I_INVALID_HID : H5Aget_space(a);
  if (a < 0 || ftype < 0 || space < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                    "cannot open attribute '%s' of %s", name, obj);
  if (H5Tget_class(ftype) != H5T_INTEGER ||
      H5Sget_simple_extent_ndims(space) != 1 ||
      H5Sget_simple_extent_npoints(space) != (hssize_t)n) {
    H5Eclear2(H5E_DEFAULT);
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: attribute '%s' of %s must be a list of %u integers",
                path, name, obj, (guint)n);
    return FALSE;
  }
  if (H5Aread(a, H5T_NATIVE_UINT32, v) < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                    "cannot read attribute '%s' of %s", name, obj);
  return TRUE;
}

/* Reads /programs (format version 3): group k holds program k, ops (with
 * their patch bytes) and stream offsets, added to w->programs in order.
 * A file without /programs has none.  There are at most as many programs
 * as ranks (each must be run by one; nat_read_ranks checks that). */
static gboolean nat_read_programs(hid_t file, SimWorkload *w,
                                  const char *path, GError **error)
{
  htri_t exists = H5Lexists(file, "programs", H5P_DEFAULT);
  if (exists <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return TRUE;
  }
  g_auto(H5uHid) progs = H5Gopen2(file, "programs", H5P_DEFAULT);
  H5G_info_t info;
  if (progs < 0 || H5Gget_info(progs, &info) < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                    "/programs is not a group");
  if (info.nlinks > w->n_ranks) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: /programs has %" G_GUINT64_FORMAT " entries, more than "
                "the n_ranks = %u ranks that could run them", path,
                (guint64)info.nlinks, w->n_ranks);
    return FALSE;
  }
  g_auto(H5uHid) op_type = nat_program_op_type();
  if (op_type < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, path,
                    "cannot build the program op type");
  for (guint32 k = 0; k < (guint32)info.nlinks; k++) {
    char name[16], disp[64];
    g_snprintf(name, sizeof name, "%u", k);
    g_snprintf(disp, sizeof disp, "/programs/%u", k);
    if (H5Lexists(progs, name, H5P_DEFAULT) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                  "%s: group %s is missing (/programs must hold programs 0 "
                  "to %u)", path, disp, (guint)info.nlinks - 1);
      return FALSE;
    }
    g_auto(H5uHid) g = H5Gopen2(progs, name, H5P_DEFAULT);
    if (g < 0)
      return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                      "%s is not a group", disp);
    SimOp *ops = NULL;
    guint32 *off = NULL, n_ops = 0, n_streams = 0;
    if (!nat_read_op_arrays(g, disp, op_type, &ops, &n_ops, &off, &n_streams,
                            path, error))
      return FALSE;
    for (guint32 i = 0; i < n_ops; i++)
      if (ops[i].patch >= SIM_PATCH_COUNT) {
        g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                    "%s: %s/ops[%u]: patch %u out of range (0 to %u)", path,
                    disp, i, ops[i].patch, SIM_PATCH_COUNT - 1);
        g_free(ops);
        g_free(off);
        return FALSE;
      }
    sim_workload_add_program(w, ops, n_ops, off, n_streams);
  }
  return TRUE;
}

/* Rank r of a version-3 file that runs a program: the attributes program
 * and peer_delta (SIM_PATCH_COUNT integers, the first 0), and no ops of
 * its own. */
static gboolean nat_read_shared_rank(hid_t g, const char *disp,
                                     SimWorkload *w, guint r,
                                     guint8 *used, const char *path,
                                     GError **error)
{
  guint32 p = 0, delta[SIM_PATCH_COUNT];
  if (!nat_attr_u32_read(g, disp, "program", &p, path, error) ||
      !nat_attr_u32s_read(g, disp, "peer_delta", delta, SIM_PATCH_COUNT,
                          path, error))
    return FALSE;
  if (p >= w->programs->len) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: %s runs program %u, but /programs holds %u", path, disp,
                p, w->programs->len);
    return FALSE;
  }
  if (delta[0] != 0) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: %s: peer_delta[0] is %u (patch 0 shifts nothing: it "
                "must be 0)", path, disp, delta[0]);
    return FALSE;
  }
  static const char *const own[] = { "ops", "stream_off" };
  for (gsize k = 0; k < G_N_ELEMENTS(own); k++)
    if (H5Lexists(g, own[k], H5P_DEFAULT) > 0) {
      g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                  "%s: %s runs program %u and also holds %s/%s (a rank "
                  "has its own ops or a program, not both)", path, disp, p,
                  disp, own[k]);
      return FALSE;
    }
  H5Eclear2(H5E_DEFAULT); /* a failed look-up above counts as absent */
  sim_workload_set_rank_program(w, r, p, delta);
  used[p] = 1;
  return TRUE;
}

static gboolean nat_read_rank(hid_t ranks, SimWorkload *w, guint r,
                              hid_t op_type, guint32 version, guint8 *used,
                              const char *path, GError **error)
{
  char name[16], disp[64];
  g_snprintf(name, sizeof name, "%u", r);
  g_snprintf(disp, sizeof disp, "/ranks/%u", r);
  htri_t exists = H5Lexists(ranks, name, H5P_DEFAULT);
  if (exists <= 0) {
    H5Eclear2(H5E_DEFAULT);
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: group %s is missing", path, disp);
    return FALSE;
  }
  g_auto(H5uHid) g = H5Gopen2(ranks, name, H5P_DEFAULT);
  if (g < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                    "%s is not a group", disp);
  guint32 stage = 0;
  if (!nat_attr_u32_read(g, disp, "stage", &stage, path, error))
    return FALSE;
  /* Version 3: a rank runs a program when it has the attribute. */
  htri_t shared = version >= TRACE_NATIVE_VERSION_SHARED
                    ? H5Aexists(g, "program")
                    : 0;
  if (shared < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                    "cannot look up attribute 'program' of %s", disp);
  if (shared > 0) {
    if (!nat_read_shared_rank(g, disp, w, r, used, path, error))
      return FALSE;
  } else {
    SimOp *ops = NULL;
    guint32 *off = NULL, n_ops = 0, n_streams = 0;
    if (!nat_read_op_arrays(g, disp, op_type, &ops, &n_ops, &off, &n_streams,
                            path, error))
      return FALSE;
    sim_workload_set_rank(w, r, ops, n_ops, off, n_streams);
  }
  w->ranks[r].stage = stage;
  return TRUE;
}

static gboolean nat_read_ranks(hid_t file, SimWorkload *w, guint32 version,
                               const char *path, GError **error)
{
  htri_t exists = H5Lexists(file, "ranks", H5P_DEFAULT);
  if (exists <= 0) {
    H5Eclear2(H5E_DEFAULT);
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: group /ranks is missing", path);
    return FALSE;
  }
  g_auto(H5uHid) ranks = H5Gopen2(file, "ranks", H5P_DEFAULT);
  H5G_info_t info;
  if (ranks < 0 || H5Gget_info(ranks, &info) < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                    "/ranks is not a group");
  if (info.nlinks != w->n_ranks) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: /ranks has %" G_GUINT64_FORMAT " entries but the file "
                "says n_ranks = %u", path, (guint64)info.nlinks, w->n_ranks);
    return FALSE;
  }
  g_auto(H5uHid) op_type = nat_op_type();
  if (op_type < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, path,
                    "cannot build the op type");
  g_autofree guint8 *used = g_new0(guint8, MAX(w->programs->len, 1));
  for (guint r = 0; r < w->n_ranks; r++)
    if (!nat_read_rank(ranks, w, r, op_type, version, used, path, error))
      return FALSE;
  for (guint p = 0; p < w->programs->len; p++)
    if (!used[p]) {
      g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                  "%s: /programs/%u is run by no rank", path, p);
      return FALSE;
    }
  return TRUE;
}

static gboolean nat_read_provenance(hid_t file, SimWorkload *w, hid_t vstr,
                                    const char *path, GError **error)
{
  htri_t exists = H5Lexists(file, "provenance", H5P_DEFAULT);
  if (exists <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return TRUE; /* optional */
  }
  g_auto(H5uHid) g = H5Oopen(file, "provenance", H5P_DEFAULT);
  if (g < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                    "cannot open /provenance");
  ProvCtx ctx = { w, vstr, path, error };
  hsize_t idx = 0;
  if (H5Aiterate2(g, H5_INDEX_NAME, H5_ITER_INC, &idx, nat_prov_attr, &ctx) <
      0) {
    if (error != NULL && *error == NULL)
      return nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path,
                      "cannot read the attributes of /provenance");
    H5Eclear2(H5E_DEFAULT);
    return FALSE;
  }
  return TRUE;
}

/* Checks the checksum record of a file about to be opened (see
 * traces/native_format.c).  TRUE when it matches, or when the file is
 * plain HDF5 without a record. */
static gboolean nat_verify(const char *path, GError **error)
{
  int fd = fault_inject_errno(FAULT_READ, "native: open")
             ? -1
             : g_open(path, O_RDONLY, 0);
  if (fd < 0) {
    int e = errno;
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                "%s: cannot read a trace: %s", path, g_strerror(e));
    return FALSE;
  }
  char rec[NATIVE_USERBLOCK + 1];
  memset(rec, 0, sizeof rec);
  ssize_t k = pread(fd, rec, NATIVE_USERBLOCK, 0);
  static const char hdf5_sig[8] = { '\x89', 'H', 'D', 'F', '\r', '\n',
                                    '\x1a', '\n' };
  if (k >= 8 && memcmp(rec, hdf5_sig, 8) == 0) {
    close(fd); /* plain HDF5 from another tool: unverified */
    return TRUE;
  }
  guint crc_want = 0;
  guint64 len_want = 0;
  int used = 0;
  gboolean parsed =
    k == NATIVE_USERBLOCK && g_str_has_prefix(rec, NATIVE_SEAL_MAGIC) &&
    sscanf(rec + strlen(NATIVE_SEAL_MAGIC),
           "crc32 %8x\nlength %" G_GUINT64_FORMAT "\n%n", &crc_want,
           &len_want, &used) == 2 && used > 0;
  if (!parsed) {
    close(fd);
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: not a joulesim trace, or its header is damaged", path);
    return FALSE;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 ||
      (guint64)st.st_size != len_want + NATIVE_USERBLOCK) {
    close(fd);
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                "%s: the trace file is truncated or was extended (%"
                G_GINT64_FORMAT " bytes, written with %" G_GUINT64_FORMAT ")",
                path, (gint64)st.st_size, len_want + NATIVE_USERBLOCK);
    return FALSE;
  }
  guint32 crc = 0;
  guint64 len = 0;
  gboolean ok = nat_crc(fd, NATIVE_USERBLOCK, &crc, &len);
  int e = errno;
  close(fd);
  if (!ok) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                "%s: cannot read a trace: %s", path, g_strerror(e));
    return FALSE;
  }
  if (crc != crc_want || len != len_want) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: the trace file is damaged (CRC-32 %08x, written with "
                "%08x)", path, crc, crc_want);
    return FALSE;
  }
  return TRUE;
}

/* Opens path read-only as a native trace: the file checks and the format
 * attributes.  Returns the file (caller closes) or < 0 with error set. */
static hid_t nat_open(const char *path, hid_t vstr, guint64 max_bytes,
                      guint32 *n_ranks, guint32 *version_out, GError **error)
{
  if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                "%s: cannot read a trace: it is a directory", path);
    return H5I_INVALID_HID;
  }
  if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                "%s: cannot read a trace: no such file", path);
    return H5I_INVALID_HID;
  }
  if (g_access(path, R_OK) != 0) {
    int e = errno;
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                "%s: cannot read a trace: %s", path, g_strerror(e));
    return H5I_INVALID_HID;
  }
  if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
    /* A FIFO or device: HDF5 would block opening it. */
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                "%s: cannot read a trace: not a regular file", path);
    return H5I_INVALID_HID;
  }
  /* H5Fis_hdf5 only looks for the signature (at 0, 512, 1024, ...). */
  htri_t is = H5Fis_hdf5(path);
  if (is <= 0) {
    H5Eclear2(H5E_DEFAULT);
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                "%s: not a joulesim trace (not an HDF5 file)", path);
    return H5I_INVALID_HID;
  }
  if (!nat_verify(path, error))
    return H5I_INVALID_HID;
  GError *refused = NULL;
  g_auto(H5uHid) file = h5u_open(path, H5F_ACC_RDONLY, max_bytes,
                                 TRACE_NATIVE_ERROR,
                                 TRACE_NATIVE_ERROR_UNSAFE, &refused);
  if (refused != NULL) {
    g_propagate_error(error, refused);
    return H5I_INVALID_HID;
  }
  if (file < 0) {
    nat_fail(error, TRACE_NATIVE_ERROR_IO, path,
             "cannot open the HDF5 file (damaged or truncated?)");
    return H5I_INVALID_HID;
  }
  const char *obj = "the root group";
  g_autofree char *format = NULL;
  gboolean present = FALSE;
  if (!nat_attr_read(file, obj, "format", H5T_STRING, vstr, &format,
                     &present, path, error))
    return H5I_INVALID_HID;
  if (!present || strcmp(format, NATIVE_FORMAT) != 0) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: not a joulesim trace (an HDF5 file without the root "
                "attribute format = \"%s\")", path, NATIVE_FORMAT);
    return H5I_INVALID_HID;
  }
  guint32 version = 0;
  if (!nat_attr_u32_read(file, obj, "format_version", &version, path, error))
    return H5I_INVALID_HID;
  if (version == 0 || version > TRACE_NATIVE_VERSION) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_VERSION,
                "%s: trace format version %u is not supported by this "
                "joulesim (it reads versions 1 to %u)", path, version,
                TRACE_NATIVE_VERSION);
    return H5I_INVALID_HID;
  }
  *version_out = version;
  if (!nat_attr_u32_read(file, obj, "n_ranks", n_ranks, path, error))
    return H5I_INVALID_HID;
  if (*n_ranks > NATIVE_MAX_RANKS) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: n_ranks = %u is more than the %u supported", path,
                *n_ranks, NATIVE_MAX_RANKS);
    return H5I_INVALID_HID;
  }
  /* n_ranks sizes the workload the caller allocates next: /ranks must
   * agree first (a file claiming 16 million ranks and holding one made
   * the loader allocate 532 MB: found by tests/fuzz/fuzz-native.c).
   * nat_read_ranks checks the same again. */
  if (H5Lexists(file, "ranks", H5P_DEFAULT) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: group /ranks is missing", path);
    return H5I_INVALID_HID;
  }
  g_auto(H5uHid) ranks = H5Gopen2(file, "ranks", H5P_DEFAULT);
  H5G_info_t info;
  if (ranks < 0 || H5Gget_info(ranks, &info) < 0) {
    nat_fail(error, TRACE_NATIVE_ERROR_FORMAT, path, "/ranks is not a group");
    return H5I_INVALID_HID;
  }
  if (info.nlinks != *n_ranks) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: /ranks has %" G_GUINT64_FORMAT " entries but the file "
                "says n_ranks = %u", path, (guint64)info.nlinks, *n_ranks);
    return H5I_INVALID_HID;
  }
  hid_t out = file;
  file = H5I_INVALID_HID;
  return out;
}

SimWorkload *trace_native_load(const char *path, GError **error)
{
  return trace_native_load_within(path, G_MAXUINT64, error);
}

SimWorkload *trace_native_load_within(const char *path, guint64 max_bytes,
                                      GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  H5U_QUIET();

  g_auto(H5uHid) vstr = nat_vstr_type();
  if (vstr < 0) {
    nat_fail(error, TRACE_NATIVE_ERROR_IO, path, "cannot build string type");
    return NULL;
  }
  guint32 n_ranks = 0, version = 0;
  g_auto(H5uHid) file = nat_open(path, vstr, max_bytes, &n_ranks, &version,
                                 error);
  if (file < 0)
    return NULL;
  g_autoptr(SimWorkload) w = sim_workload_new(n_ranks);
  if (!nat_read_layout(file, w, vstr, path, error) ||
      !nat_read_strings(file, w, vstr, path, error) ||
      !nat_read_shapes(file, w, path, error) ||
      !nat_read_groups(file, w, path, error) ||
      (version >= TRACE_NATIVE_VERSION_SHARED &&
       !nat_read_programs(file, w, path, error)) ||
      !nat_read_ranks(file, w, version, path, error) ||
      !nat_read_provenance(file, w, vstr, path, error))
    return NULL;
  GError *inner = NULL;
  if (!sim_workload_validate(w, &inner)) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: inconsistent trace: %s", path, inner->message);
    g_error_free(inner);
    return NULL;
  }
  if (version < TRACE_NATIVE_VERSION_HOST)
    for (guint r = 0; r < w->n_ranks; r++)
      for (guint32 i = 0; i < w->ranks[r].n_ops; i++)
        if (w->ranks[r].ops[i].kind == SIM_OP_HOST) {
          g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                      "%s: /ranks/%u/ops[%u] is a host op (kind %d), which "
                      "format version %u does not have (host streams are "
                      "version %u)", path, r, i, SIM_OP_HOST, version,
                      TRACE_NATIVE_VERSION_HOST);
          return NULL;
        }
  return g_steal_pointer(&w);
}

gboolean trace_native_probe(const char *path)
{
  g_return_val_if_fail(path != NULL, FALSE);
  H5U_QUIET();
  if (!g_file_test(path, G_FILE_TEST_IS_REGULAR))
    return FALSE;
  return H5Fis_hdf5(path) > 0;
}

gboolean trace_native_is_trace(const char *path)
{
  g_return_val_if_fail(path != NULL, FALSE);
  if (!trace_native_probe(path))
    return FALSE;
  H5U_QUIET();
  g_auto(H5uHid) file = h5u_open(path, H5F_ACC_RDONLY, G_MAXUINT64,
                                 TRACE_NATIVE_ERROR,
                                 TRACE_NATIVE_ERROR_UNSAFE, NULL);
  if (file < 0)
    return FALSE;
  g_auto(H5uHid) vstr = nat_vstr_type();
  g_autofree char *format = NULL;
  gboolean present = FALSE;
  if (!nat_attr_read(file, "the root group", "format", H5T_STRING, vstr,
                     &format, &present, path, NULL))
    return FALSE;
  return present && strcmp(format, NATIVE_FORMAT) == 0;
}
