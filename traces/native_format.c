/* traces/native_format.c -- native trace files (HDF5): the format, and
 * what its reader (traces/native.c) and writer (traces/native_write.c)
 * share through traces/native-private.h: errors, the HDF5 record types
 * and the checksum.  Summaries of any workload are traces/info.c.
 *
 * File layout (format_version 1; 2 when the workload has host ops
 * (SIM_OP_HOST, kind 5); 3 when ranks share programs; docs/trace-files.md
 * has the h5py view)
 * -----------------------------------------------------------------------
 *
 *   /                      attributes: format = "joulesim-trace" (string),
 *                          format_version (uint32), n_ranks (uint32), tp,
 *                          pp, dp, microbatches (uint32, 0 = unknown),
 *                          tokens_per_iteration (float64, 0 = unknown),
 *                          schedule, ref_gpu (strings, absent = unknown),
 *                          joulesim_version (string)
 *   /strings               1-D variable-length UTF-8 strings; entry i is
 *                          name id i (SimOp.name, SimShape.name)
 *   /shapes                1-D compound {flops f64, bytes f64, name u32,
 *                          klass u8, coll u8, tensor u8}: SimShape
 *   /groups/offsets        1-D uint32, n_groups + 1 entries (first 0)
 *   /groups/ranks          1-D uint32: members of group g are
 *                          ranks[offsets[g] .. offsets[g+1]), ascending
 *   /ranks/<r>             one group per rank, r in decimal (0 .. n_ranks-1),
 *                          attribute stage (uint32)
 *   /ranks/<r>/ops         1-D compound {ref_ns i64, shape u32, name u32,
 *                          peer u32, wait u32, microbatch u16, layer u8,
 *                          kind u8, class u8, phase u8, stream u8}: SimOp,
 *                          grouped by stream
 *   /ranks/<r>/stream_off  1-D uint32, n_streams + 1 offsets into ops
 *   /provenance            group; one string attribute per provenance key
 *
 * Version 3 adds shared programs (sim/workload.h, "Shared programs"):
 *
 *   /programs/<k>          one group per program, k in decimal (0 .. n-1,
 *                          numbered in the order of the first rank that
 *                          runs each), every one run by some rank
 *   /programs/<k>/ops      the ops compound plus patch u8 (< 4): which of
 *                          the running rank's peer deltas shifts peer
 *   /programs/<k>/stream_off  as a rank's
 *   /ranks/<r>             of a rank that runs a program: attributes
 *                          program (uint32, k) and peer_delta (4 uint32,
 *                          the first 0), and no ops or stream_off: its
 *                          op i is program op i with peer + peer_delta[
 *                          patch] (mod 2^32).  Ranks that own their ops
 *                          store them resolved, as in version 1.
 *
 * The writer picks the oldest version that holds the workload (3 only
 * with shared programs, else 2 only with host ops), so a workload whose
 * ranks own their ops gives the bytes it gave before version 3; the
 * loader reads all three, and looks for programs only in version 3.  A
 * file of 1,024 ranks of 175B on 8 programs is 6.7 MB instead of 820 MB,
 * and loads O(programs + ranks) in memory, as generated.
 *
 * Why it loads fast: the compound types on disk have exactly the in-memory
 * layout of SimOp (32 bytes) and SimShape (24 bytes), member for member, so
 * HDF5's conversion path is a no-op and every dataset is read whole,
 * straight into the arrays the engine replays.  Datasets are contiguous and
 * uncompressed for the same reason.  The cost of a load is then the disk
 * read plus sim_workload_validate().  Files written by other tools (h5py)
 * with the members in another order or other integer widths still load,
 * through HDF5's conversion (slower, same result).
 *
 * Integrity: the file starts with a 512-byte HDF5 user block (which HDF5
 * and h5py skip) holding a text record
 *
 *   joulesim-trace\ncrc32 XXXXXXXX\nlength N\n   (NUL-padded to 512 bytes)
 *
 * with the zlib CRC-32 and the length of everything after the user block.
 * The loader checks both before HDF5 sees the file (one sequential pass, at
 * several GB/s): a truncated or damaged file is refused with a clear error
 * instead of loading wrong numbers, or crashing HDF5, which does not
 * survive every corrupted variable-length string heap.  HDF5 files without
 * the record (written by other tools, superblock at offset 0) are loaded
 * unverified; a file whose first bytes are neither is refused.
 *
 * Durability: trace_native_save() writes a temporary file in the target's
 * directory (".NAME.tmp-XXXXXX"), its space reserved first (see
 * nat_write_file for why), seals it (checksum record), fsyncs it and
 * renames it over the target, so the target is either the old file or the
 * complete new one.
 * Reproducibility: object modification times are not stored, what is
 * written of an op is its fields alone (rank ops resolved, patch 0;
 * program ops with their patch bytes), and programs are numbered by their
 * first rank, so the same workload always gives the same bytes.
 *
 * Errors: HDF5's automatic error printing is switched off while a function
 * of this module runs (and restored afterwards); failures become
 * TRACE_NATIVE_ERROR GErrors naming the file, the dataset or attribute and,
 * when HDF5 gave one, its innermost reason.  Every HDF5 handle lives in a
 * g_auto(H5uHid), so every exit path closes it.  Limits: n_ranks <= 2^24,
 * ops per rank or program < 2^32 (SimOp indices are 32-bit), at most
 * n_ranks programs.
 */
#include "traces/native-private.h"
#include "io/fault.h"
#include "io/h5util.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
#include <zlib.h>

G_DEFINE_QUARK(trace-native-error-quark, trace_native_error)

/* ---- HDF5 handles, quiet mode and errors -------------------------------- */

/* Sets *error to "PATH: WHAT (HDF5: reason)", the reason read from the
 * current HDF5 error stack (call right after the failing HDF5 call).
 * Always returns FALSE. */
G_GNUC_PRINTF(4, 5)
gboolean nat_fail(GError **error, gint code, const char *path,
                  const char *fmt, ...)
{
  g_autofree char *reason = h5u_error_reason();
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  if (reason != NULL)
    g_set_error(error, TRACE_NATIVE_ERROR, code, "%s: %s (HDF5: %s)", path,
                what, reason);
  else
    g_set_error(error, TRACE_NATIVE_ERROR, code, "%s: %s", path, what);
  return FALSE;
}

/* ---- record types ---------------------------------------------------------- */

/* A new variable-length UTF-8 string type (caller closes), or < 0. */
hid_t nat_vstr_type(void)
{
  hid_t t = H5Tcopy(H5T_C_S1);
  if (t < 0)
    return t;
  if (H5Tset_size(t, H5T_VARIABLE) < 0 ||
      H5Tset_cset(t, H5T_CSET_UTF8) < 0) {
    H5Tclose(t);
    return H5I_INVALID_HID;
  }
  return t;
}

/* The SimOp record type, used both in memory and on disk. */
hid_t nat_op_type(void)
{
  hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(SimOp));
  if (t < 0)
    return t;
  herr_t rc = 0;
#define M(name, field, type) \
  rc |= H5Tinsert(t, name, offsetof(SimOp, field), type)
  M("ref_ns", ref_ns, H5T_NATIVE_INT64);
  M("shape", shape, H5T_NATIVE_UINT32);
  M("name", name, H5T_NATIVE_UINT32);
  M("peer", peer, H5T_NATIVE_UINT32);
  M("wait", wait, H5T_NATIVE_UINT32);
  M("microbatch", microbatch, H5T_NATIVE_UINT16);
  M("layer", layer, H5T_NATIVE_UINT8);
  M("kind", kind, H5T_NATIVE_UINT8);
  M("class", klass, H5T_NATIVE_UINT8);
  M("phase", phase, H5T_NATIVE_UINT8);
  M("stream", stream, H5T_NATIVE_UINT8);
#undef M
  if (rc < 0) {
    H5Tclose(t);
    return H5I_INVALID_HID;
  }
  return t;
}

/* The SimOp record type of a shared program: the op type plus `patch`. */
hid_t nat_program_op_type(void)
{
  hid_t t = nat_op_type();
  if (t < 0)
    return t;
  if (H5Tinsert(t, "patch", offsetof(SimOp, patch), H5T_NATIVE_UINT8) < 0) {
    H5Tclose(t);
    return H5I_INVALID_HID;
  }
  return t;
}

/* The SimShape record type, used both in memory and on disk. */
hid_t nat_shape_type(void)
{
  hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(SimShape));
  if (t < 0)
    return t;
  herr_t rc = 0;
#define M(name, field, type) \
  rc |= H5Tinsert(t, name, offsetof(SimShape, field), type)
  M("flops", flops, H5T_NATIVE_DOUBLE);
  M("bytes", bytes, H5T_NATIVE_DOUBLE);
  M("name", name, H5T_NATIVE_UINT32);
  M("klass", klass, H5T_NATIVE_UINT8);
  M("coll", coll, H5T_NATIVE_UINT8);
  M("tensor", tensor, H5T_NATIVE_UINT8);
#undef M
  if (rc < 0) {
    H5Tclose(t);
    return H5I_INVALID_HID;
  }
  return t;
}


/* CRC-32 of fd's bytes from `from` to the end; *len receives their count.
 * FALSE (errno set) on a read error. */
gboolean nat_crc(int fd, off_t from, guint32 *crc, guint64 *len)
{
  g_autofree guchar *buf = g_malloc(NATIVE_IO_CHUNK);
  uLong c = crc32_z(0L, Z_NULL, 0);
  guint64 n = 0;
  if (fault_inject_errno(FAULT_READ, "native: checksum read") ||
      lseek(fd, from, SEEK_SET) != from)
    return FALSE;
  for (;;) {
    ssize_t k = read(fd, buf, NATIVE_IO_CHUNK);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0)
      return FALSE;
    if (k == 0)
      break;
    c = crc32_z(c, buf, (z_size_t)k);
    n += (guint64)k;
  }
  *crc = (guint32)c;
  *len = n;
  return TRUE;
}
