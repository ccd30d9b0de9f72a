/* traces/native_write.c -- writing a native trace (trace_native_save): the
 * workload's datasets into a temporary file (io/atomic.h) reserved on
 * disk first, the checksum seal in its user block, then the rename.  The
 * format is described in traces/native_format.c; shared programs are written
 * once under /programs (version 3) and their ranks as a program number
 * and peer deltas, so the file is O(programs + ranks) like the workload.
 */
#include "traces/native-private.h"
#include "io/atomic.h"
#include "io/fault.h"
#include "io/h5util.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <hdf5.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#ifndef JOULESIM_VERSION
#define JOULESIM_VERSION "unknown"
#endif

/* ---- writing ---------------------------------------------------------------- */

/* State of one save: the temporary file, creation property lists without
 * modification times, and the record types. */
typedef struct {
  const char *path;   /* the user's target, for messages */
  hid_t file;
  hid_t dcpl, gcpl;
  hid_t op_type, prog_op_type, shape_type, vstr;
  /* Shared programs (version 3): file_index[p] is the number program p of
   * w->programs has in the file (G_MAXUINT32: no rank runs it, not
   * written); order[k] is the program written as number k. */
  guint32 *file_index, *order;
  guint32 n_programs;
} NatWriter;

static gboolean nat_attr_write(NatWriter *wr, hid_t loc, const char *obj,
                               const char *name, hid_t type, const void *buf,
                               GError **error)
{
  g_auto(H5uHid) space = H5Screate(H5S_SCALAR);
  g_auto(H5uHid) a = space < 0 ? H5I_INVALID_HID
                               : H5Acreate2(loc, name, type, space,
                                            H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0 || H5Awrite(a, type, buf) < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, wr->path,
                    "writing attribute '%s' of %s", name, obj);
  return TRUE;
}

static gboolean nat_attr_u32(NatWriter *wr, hid_t loc, const char *obj,
                             const char *name, guint32 v, GError **error)
{
  return nat_attr_write(wr, loc, obj, name, H5T_NATIVE_UINT32, &v, error);
}

/* A 1-D attribute of n uint32 values. */
static gboolean nat_attr_u32s(NatWriter *wr, hid_t loc, const char *obj,
                              const char *name, const guint32 *v, hsize_t n,
                              GError **error)
{
  g_auto(H5uHid) space = H5Screate_simple(1, &n, NULL);
  g_auto(H5uHid) a = space < 0 ? H5I_INVALID_HID
                               : H5Acreate2(loc, name, H5T_NATIVE_UINT32,
                                            space, H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0 || H5Awrite(a, H5T_NATIVE_UINT32, v) < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, wr->path,
                    "writing attribute '%s' of %s", name, obj);
  return TRUE;
}

static gboolean nat_attr_str(NatWriter *wr, hid_t loc, const char *obj,
                             const char *name, const char *s, GError **error)
{
  return nat_attr_write(wr, loc, obj, name, wr->vstr, &s, error);
}

/* Creates the 1-D dataset `name` (shown as `disp`) of n records of `type`
 * and writes buf (may be NULL when n == 0). */
static gboolean nat_dset_write(NatWriter *wr, hid_t loc, const char *name,
                               const char *disp, hid_t type, hsize_t n,
                               const void *buf, GError **error)
{
  hsize_t dims[1] = { n };
  g_auto(H5uHid) space = H5Screate_simple(1, dims, NULL);
  g_auto(H5uHid) d = space < 0 ? H5I_INVALID_HID
                               : H5Dcreate2(loc, name, type, space,
                                            H5P_DEFAULT, wr->dcpl,
                                            H5P_DEFAULT);
  if (d < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, wr->path,
                    "creating dataset %s", disp);
  if (n > 0 && H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, wr->path,
                    "writing dataset %s", disp);
  /* Closing writes what HDF5 kept in its sieve buffer: a failure there
   * must fail the save (g_auto's close would drop it, and the data). */
  if (H5Dclose(h5u_steal(&d)) < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, wr->path,
                    "writing dataset %s", disp);
  return TRUE;
}

/* Writes n ops as the dataset "ops" of loc (shown as disp), in blocks
 * through a scratch buffer, so that what reaches the file is fixed by the
 * ops' fields alone.  With rk (a rank's own ops, or its program's written
 * as its own), each op's peer is resolved for rk and its patch is 0 (the
 * rank op type has no patch member); without (a shared program, written
 * with the program op type), peers are the program's and patches are
 * kept, reduced below SIM_PATCH_COUNT as sim_op_peer reads them. */
static gboolean nat_write_ops(NatWriter *wr, hid_t loc, const char *disp,
                              const SimOp *ops, guint32 n, const SimRank *rk,
                              hid_t type, GError **error)
{
  hsize_t dims[1] = { n };
  g_auto(H5uHid) space = H5Screate_simple(1, dims, NULL);
  g_auto(H5uHid) d = space < 0 ? H5I_INVALID_HID
                               : H5Dcreate2(loc, "ops", type, space,
                                            H5P_DEFAULT, wr->dcpl,
                                            H5P_DEFAULT);
  if (d < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, wr->path,
                    "creating dataset %s", disp);
  if (n == 0)
    return TRUE;
  guint32 block = MIN(n, NATIVE_WRITE_BLOCK);
  g_autofree SimOp *buf = g_new(SimOp, block);
  hsize_t bdims[1] = { block }, zero[1] = { 0 };
  g_auto(H5uHid) mspace = H5Screate_simple(1, bdims, NULL);
  for (guint32 at = 0; at < n; at += block) {
    guint32 k = MIN(block, n - at);
    memcpy(buf, ops + at, sizeof(SimOp) * k);
    for (guint32 i = 0; i < k; i++) {
      if (rk != NULL) {
        buf[i].peer = sim_op_peer(rk, &buf[i]);
        buf[i].patch = 0;
      } else {
        buf[i].patch &= SIM_PATCH_COUNT - 1;
      }
    }
    hsize_t start[1] = { at }, count[1] = { k };
    if (mspace < 0 ||
        H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count,
                            NULL) < 0 ||
        H5Sselect_hyperslab(mspace, H5S_SELECT_SET, zero, NULL, count,
                            NULL) < 0 ||
        H5Dwrite(d, type, mspace, space, H5P_DEFAULT, buf) < 0)
      return nat_fail(error, TRACE_NATIVE_ERROR_IO, wr->path,
                      "writing dataset %s (ops %u..%u)", disp, at,
                      at + k - 1);
  }
  /* As in nat_dset_write: the close may write buffered data. */
  if (H5Dclose(h5u_steal(&d)) < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, wr->path,
                    "writing dataset %s", disp);
  return TRUE;
}

static gboolean nat_write_layout(NatWriter *wr, const SimWorkload *w,
                                 GError **error)
{
  hid_t root = wr->file;
  const char *obj = "the root group";
  double tokens = w->tokens_per_iteration;
  /* Version 3 when ranks share programs, else 1 unless the workload needs
   * version 2's host ops: each workload gets the oldest version that holds
   * it, so files of workloads without shared programs keep their bytes. */
  guint32 version = 1;
  for (guint r = 0; r < w->n_ranks && version == 1; r++)
    for (guint32 i = 0; i < w->ranks[r].n_ops; i++)
      if (w->ranks[r].ops[i].kind == SIM_OP_HOST) {
        version = TRACE_NATIVE_VERSION_HOST;
        break;
      }
  if (wr->n_programs > 0)
    version = TRACE_NATIVE_VERSION_SHARED;
  if (!nat_attr_str(wr, root, obj, "format", NATIVE_FORMAT, error) ||
      !nat_attr_u32(wr, root, obj, "format_version", version, error) ||
      !nat_attr_u32(wr, root, obj, "n_ranks", w->n_ranks, error) ||
      !nat_attr_u32(wr, root, obj, "tp", w->tp, error) ||
      !nat_attr_u32(wr, root, obj, "pp", w->pp, error) ||
      !nat_attr_u32(wr, root, obj, "dp", w->dp, error) ||
      !nat_attr_u32(wr, root, obj, "microbatches", w->microbatches, error) ||
      !nat_attr_write(wr, root, obj, "tokens_per_iteration",
                      H5T_NATIVE_DOUBLE, &tokens, error) ||
      !nat_attr_str(wr, root, obj, "joulesim_version", JOULESIM_VERSION,
                    error))
    return FALSE;
  if (w->schedule != NULL &&
      !nat_attr_str(wr, root, obj, "schedule", w->schedule, error))
    return FALSE;
  if (w->ref_gpu != NULL &&
      !nat_attr_str(wr, root, obj, "ref_gpu", w->ref_gpu, error))
    return FALSE;
  return TRUE;
}

static gboolean nat_write_tables(NatWriter *wr, const SimWorkload *w,
                                 GError **error)
{
  /* Strings: the interned names in id order. */
  if (!nat_dset_write(wr, wr->file, "strings", "/strings", wr->vstr,
                      w->names->len, w->names->pdata, error))
    return FALSE;
  /* Shapes, pad bytes zeroed. */
  guint n_shapes = w->shapes->len;
  g_autofree SimShape *shapes = g_new0(SimShape, MAX(n_shapes, 1));
  if (n_shapes > 0)
    memcpy(shapes, w->shapes->data, sizeof(SimShape) * n_shapes);
  for (guint i = 0; i < n_shapes; i++)
    shapes[i].pad_ = 0;
  if (!nat_dset_write(wr, wr->file, "shapes", "/shapes", wr->shape_type,
                      n_shapes, shapes, error))
    return FALSE;
  /* Groups. */
  g_auto(H5uHid) groups = H5Gcreate2(wr->file, "groups", H5P_DEFAULT,
                                     wr->gcpl, H5P_DEFAULT);
  if (groups < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, wr->path,
                    "creating group /groups");
  if (!nat_dset_write(wr, groups, "offsets", "/groups/offsets",
                      H5T_NATIVE_UINT32, w->group_off->len,
                      w->group_off->data, error) ||
      !nat_dset_write(wr, groups, "ranks", "/groups/ranks", H5T_NATIVE_UINT32,
                      w->group_ranks->len, w->group_ranks->data, error))
    return FALSE;
  return TRUE;
}

/* Numbers the programs the ranks run in the order of their first rank
 * (so the file does not depend on how w->programs came to be ordered). */
static void nat_number_programs(NatWriter *wr, const SimWorkload *w)
{
  guint n = w->programs->len;
  wr->file_index = g_new(guint32, MAX(n, 1));
  wr->order = g_new(guint32, MAX(n, 1));
  wr->n_programs = 0;
  for (guint p = 0; p < n; p++)
    wr->file_index[p] = G_MAXUINT32;
  for (guint r = 0; r < w->n_ranks; r++) {
    guint32 p = w->ranks[r].program;
    if (p != SIM_NO_PROGRAM && wr->file_index[p] == G_MAXUINT32) {
      wr->file_index[p] = wr->n_programs;
      wr->order[wr->n_programs++] = p;
    }
  }
}

/* Writes the offsets of a rank's or program's streams: n_streams + 1
 * entries, or the single offset 0 when it has none (stream_off NULL: a
 * rank never given ops). */
static gboolean nat_write_stream_off(NatWriter *wr, hid_t loc,
                                     const char *disp,
                                     const guint32 *stream_off,
                                     guint32 n_streams, GError **error)
{
  guint32 zero = 0;
  const guint32 *off = stream_off != NULL ? stream_off : &zero;
  guint32 n_off = stream_off != NULL ? n_streams + 1 : 1;
  return nat_dset_write(wr, loc, "stream_off", disp, H5T_NATIVE_UINT32,
                        n_off, off, error);
}

/* /programs/<k>: the shared programs, each once, patch bytes and all
 * (version 3 only). */
static gboolean nat_write_programs(NatWriter *wr, const SimWorkload *w,
                                   GError **error)
{
  if (wr->n_programs == 0)
    return TRUE;
  g_auto(H5uHid) progs = H5Gcreate2(wr->file, "programs", H5P_DEFAULT,
                                    wr->gcpl, H5P_DEFAULT);
  if (progs < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, wr->path,
                    "creating group /programs");
  for (guint32 k = 0; k < wr->n_programs; k++) {
    const SimProgram *pg = g_ptr_array_index(w->programs, wr->order[k]);
    char name[16], disp[64];
    g_snprintf(name, sizeof name, "%u", k);
    g_snprintf(disp, sizeof disp, "/programs/%u", k);
    g_auto(H5uHid) g = H5Gcreate2(progs, name, H5P_DEFAULT, wr->gcpl,
                                  H5P_DEFAULT);
    if (g < 0)
      return nat_fail(error, TRACE_NATIVE_ERROR_IO, wr->path,
                      "creating group %s", disp);
    g_snprintf(disp, sizeof disp, "/programs/%u/ops", k);
    if (!nat_write_ops(wr, g, disp, pg->ops, pg->n_ops, NULL,
                       wr->prog_op_type, error))
      return FALSE;
    g_snprintf(disp, sizeof disp, "/programs/%u/stream_off", k);
    if (!nat_write_stream_off(wr, g, disp, pg->stream_off, pg->n_streams,
                              error))
      return FALSE;
  }
  return TRUE;
}

static gboolean nat_write_ranks(NatWriter *wr, const SimWorkload *w,
                                GError **error)
{
  g_auto(H5uHid) ranks = H5Gcreate2(wr->file, "ranks", H5P_DEFAULT, wr->gcpl,
                                    H5P_DEFAULT);
  if (ranks < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, wr->path,
                    "creating group /ranks");
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    char name[16], disp[64];
    g_snprintf(name, sizeof name, "%u", r);
    g_snprintf(disp, sizeof disp, "/ranks/%u", r);
    g_auto(H5uHid) g = H5Gcreate2(ranks, name, H5P_DEFAULT, wr->gcpl,
                                  H5P_DEFAULT);
    if (g < 0)
      return nat_fail(error, TRACE_NATIVE_ERROR_IO, wr->path,
                      "creating group %s", disp);
    if (!nat_attr_u32(wr, g, disp, "stage", rk->stage, error))
      return FALSE;
    if (rk->program != SIM_NO_PROGRAM) {
      /* A shared program: its number and the rank's peer deltas. */
      guint32 delta[SIM_PATCH_COUNT];
      memcpy(delta, rk->peer_delta, sizeof delta);
      delta[0] = 0;
      if (!nat_attr_u32(wr, g, disp, "program",
                        wr->file_index[rk->program], error) ||
          !nat_attr_u32s(wr, g, disp, "peer_delta", delta, SIM_PATCH_COUNT,
                         error))
        return FALSE;
      continue;
    }
    g_snprintf(disp, sizeof disp, "/ranks/%u/ops", r);
    if (!nat_write_ops(wr, g, disp, rk->ops, rk->n_ops, rk, wr->op_type,
                       error))
      return FALSE;
    g_snprintf(disp, sizeof disp, "/ranks/%u/stream_off", r);
    if (!nat_write_stream_off(wr, g, disp, rk->stream_off, rk->n_streams,
                              error))
      return FALSE;
  }
  return TRUE;
}

static gboolean nat_write_provenance(NatWriter *wr, const SimWorkload *w,
                                     GError **error)
{
  g_auto(H5uHid) g = H5Gcreate2(wr->file, "provenance", H5P_DEFAULT,
                                wr->gcpl, H5P_DEFAULT);
  if (g < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, wr->path,
                    "creating group /provenance");
  /* Sorted keys: the same provenance always gives the same bytes. */
  g_autoptr(GPtrArray) keys = sim_workload_provenance_keys(w);
  for (guint i = 0; i < keys->len; i++) {
    const char *k = g_ptr_array_index(keys, i);
    const char *v = g_hash_table_lookup(w->provenance, k);
    if (k[0] == '\0' || !g_utf8_validate(k, -1, NULL) ||
        !g_utf8_validate(v ? v : "", -1, NULL)) {
      g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                  "%s: provenance key '%s' (or its value) is empty or not "
                  "valid UTF-8", wr->path, k);
      return FALSE;
    }
    if (!nat_attr_str(wr, g, "/provenance", k, v ? v : "", error))
      return FALSE;
  }
  return TRUE;
}

/* About the size of w's file, with a margin: what trace_native_save()
 * reserves on disk before HDF5 writes anything. */
static guint64 nat_estimate(const SimWorkload *w)
{
  guint64 n = sim_workload_n_stored_ops(w) * sizeof(SimOp) +
              (guint64)w->shapes->len * sizeof(SimShape) +
              (guint64)w->group_ranks->len * 8 +
              (guint64)w->group_off->len * 8 +
              (guint64)w->n_ranks * 4096 + (1u << 20);
  for (guint i = 0; i < w->names->len; i++)
    n += strlen(sim_workload_name(w, i)) + 64;
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, w->provenance);
  while (g_hash_table_iter_next(&it, &k, &v))
    n += strlen(k) + strlen(v ? v : "") + 512;
  return n + n / 8;
}

/* Writes w into the temporary file tmp (created, with its space reserved).
 *
 * Why reserve space first: with HDF5 1.10's file drivers, a write error
 * (disk full, file size limit) makes H5Fclose fail and leaves the file
 * half-closed inside the library, which then crashes at process exit
 * (H5F__close_cb).  trace_native_save() therefore reserves the file's size
 * with posix_fallocate() (a clean error when the disk or the size limit
 * cannot take it), so HDF5's writes land in allocated blocks; HDF5 trims
 * the file to its real end when it closes it.  (Building the file in memory
 * with the core driver avoids the problem too, but costs the file's size
 * in fresh memory, three times slower on this project's machines.) */
static gboolean nat_write_file(const SimWorkload *w, const char *tmp,
                               const char *path, GError **error)
{
  NatWriter wr = { path, H5I_INVALID_HID, H5I_INVALID_HID, H5I_INVALID_HID,
                   H5I_INVALID_HID, H5I_INVALID_HID, H5I_INVALID_HID,
                   H5I_INVALID_HID, NULL, NULL, 0 };
  nat_number_programs(&wr, w);
  g_autofree guint32 *file_index = wr.file_index;
  g_autofree guint32 *order = wr.order;
  /* A copy of the default list: HDF5's own driver, or the fault driver
   * when fault injection is armed (io/h5util.c). */
  g_auto(H5uHid) fapl = H5Pcopy(H5P_FILE_ACCESS_DEFAULT);
  g_auto(H5uHid) fcpl = H5Pcreate(H5P_FILE_CREATE);
  g_auto(H5uHid) dcpl = H5Pcreate(H5P_DATASET_CREATE);
  g_auto(H5uHid) gcpl = H5Pcreate(H5P_GROUP_CREATE);
  g_auto(H5uHid) op_type = nat_op_type();
  g_auto(H5uHid) prog_op_type = nat_program_op_type();
  g_auto(H5uHid) shape_type = nat_shape_type();
  g_auto(H5uHid) vstr = nat_vstr_type();
  /* v1.8 object format or later: compact/dense link storage, so groups of
   * thousands of ranks stay fast; h5py reads it. */
  if (fapl < 0 || fcpl < 0 || dcpl < 0 || gcpl < 0 || op_type < 0 ||
      prog_op_type < 0 || shape_type < 0 || vstr < 0 ||
      H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST) < 0 ||
      H5Pset_userblock(fcpl, NATIVE_USERBLOCK) < 0 ||
      H5Pset_obj_track_times(fcpl, FALSE) < 0 ||
      H5Pset_obj_track_times(dcpl, FALSE) < 0 ||
      H5Pset_obj_track_times(gcpl, FALSE) < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, path,
                    "setting up HDF5 property lists and types");
  g_auto(H5uHid) file = H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, fapl);
  if (file < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, path,
                    "cannot create the temporary file %s", tmp);
  wr.file = file;
  wr.dcpl = dcpl;
  wr.gcpl = gcpl;
  wr.op_type = op_type;
  wr.prog_op_type = prog_op_type;
  wr.shape_type = shape_type;
  wr.vstr = vstr;
  if (!nat_write_layout(&wr, w, error) || !nat_write_tables(&wr, w, error) ||
      !nat_write_programs(&wr, w, error) ||
      !nat_write_ranks(&wr, w, error) ||
      !nat_write_provenance(&wr, w, error))
    return FALSE;
  /* Flush first: a write error surfaces here, while HDF5 can still
   * report it; the close (never failed by fault injection: HDF5 1.10
   * cannot recover from a failed close) then has nothing left to write. */
  if (H5Fflush(file, H5F_SCOPE_LOCAL) < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, path,
                    "writing the temporary file %s", tmp);
  hid_t f = file;
  file = H5I_INVALID_HID;
  fault_suspend();
  herr_t closed = H5Fclose(f);
  fault_resume();
  if (closed < 0)
    return nat_fail(error, TRACE_NATIVE_ERROR_IO, path,
                    "closing the temporary file %s", tmp);
  return TRUE;
}

/* Writes the checksum record into the user block of the closed file tmp
 * and flushes the file to the disk. */
static gboolean nat_seal(const char *tmp, const char *path, GError **error)
{
  int fd = fault_inject_errno(FAULT_WRITE, "native: open to seal")
             ? -1
             : g_open(tmp, O_RDWR, 0);
  guint32 crc = 0;
  guint64 len = 0;
  char rec[NATIVE_USERBLOCK];
  gboolean ok = fd >= 0 && nat_crc(fd, NATIVE_USERBLOCK, &crc, &len);
  if (ok) {
    memset(rec, 0, sizeof rec);
    g_snprintf(rec, sizeof rec, NATIVE_SEAL_MAGIC "crc32 %08x\nlength %"
               G_GUINT64_FORMAT "\n", crc, len);
    ok = !fault_inject_errno(FAULT_WRITE, "native: seal write") &&
         pwrite(fd, rec, sizeof rec, 0) == (ssize_t)sizeof rec &&
         !fault_inject_errno(FAULT_WRITE, "native: fsync") && fsync(fd) == 0;
  }
  int e = errno;
  if (fd >= 0 && close(fd) != 0 && ok) {
    e = errno;
    ok = FALSE;
  }
  if (!ok)
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                "%s: cannot seal the temporary file %s: %s", path, tmp,
                g_strerror(e));
  return ok;
}

gboolean trace_native_save(const SimWorkload *w, const char *path,
                           GError **error)
{
  g_return_val_if_fail(w != NULL && path != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  H5U_QUIET();

  if (path[0] == '\0') {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                "cannot write a trace: the file name is empty");
    return FALSE;
  }
  if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                "%s: cannot write a trace: it is a directory", path);
    return FALSE;
  }
  if (w->n_ranks > NATIVE_MAX_RANKS) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                "%s: cannot write a trace of %u ranks (at most %u)", path,
                w->n_ranks, NATIVE_MAX_RANKS);
    return FALSE;
  }
  if (w->fold_rep != NULL) {
    /* Format version 1 has no fold map: the file would hold ranks without
     * ops and load as a different (invalid) workload. */
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                "%s: cannot write a folded workload (only one "
                "representative rank per class carries ops, and native "
                "trace files hold every rank's ops): generate it without "
                "fold", path);
    return FALSE;
  }
  IoAtomic out;
  int e = io_atomic_open(&out, path, "native");
  if (e != 0) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                "%s: cannot write a trace: cannot create a file in %s: %s",
                path, out.dir, g_strerror(e));
    io_atomic_abort(&out);
    return FALSE;
  }
  /* Reserve the space (see nat_write_file). */
  guint64 need = nat_estimate(w);
  int rc = fault_inject(FAULT_WRITE, "native: reserve space")
             ? EIO
             : posix_fallocate(out.fd, 0, (off_t)need);
  close(out.fd); /* HDF5 writes it by name */
  out.fd = -1;
  if (rc != 0) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                "%s: cannot write a trace: cannot reserve %.1f MB in %s: %s",
                path, (double)need / 1e6, out.dir, g_strerror(rc));
    io_atomic_abort(&out);
    return FALSE;
  }
  /* nat_seal flushes the file to the disk. */
  if (!nat_write_file(w, out.tmp, path, error) ||
      !nat_seal(out.tmp, path, error)) {
    io_atomic_abort(&out);
    return FALSE;
  }
  e = io_atomic_commit(&out, IO_ATOMIC_REPLACE);
  if (e != 0) {
    g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_IO,
                "%s: cannot replace it with the new trace: %s", path,
                g_strerror(e));
    return FALSE;
  }
  return TRUE;
}
