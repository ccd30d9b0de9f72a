/* traces/native.h -- joulesim's own trace files (HDF5; DESIGN section 9).
 *
 * A native trace is a SimWorkload written as whole HDF5 datasets whose
 * records have the in-memory layout of SimOp and SimShape, so loading is a
 * handful of whole-dataset reads (no parsing) followed by
 * sim_workload_validate().  docs/trace-files.md describes the layout for
 * users who read the files with h5py; traces/native_format.c has the same
 * description next to the code.
 *
 * The summary of a workload (trace_info, trace_stats_*) is traces/info.h.
 */
#ifndef TRACES_NATIVE_H
#define TRACES_NATIVE_H

#include <glib.h>
#include "sim/workload.h"

G_BEGIN_DECLS

/* The format version written by this build; files with a larger version
 * are refused with TRACE_NATIVE_ERROR_VERSION. */
#define TRACE_NATIVE_VERSION 3u
/* Version 2 adds host streams: ops of kind SIM_OP_HOST (5).  A workload
 * without host ops is still written as version 1, which older builds
 * read; a version-1 file holding host ops is refused. */
#define TRACE_NATIVE_VERSION_HOST 2u
/* Version 3 adds shared rank programs (sim/workload.h, "Shared
 * programs"): /programs holds each program once, with its ops' patch
 * bytes, and a rank that runs one stores the program's index and its peer
 * deltas instead of ops.  Only a workload with shared programs is written
 * as version 3 (a workload whose ranks all own their ops keeps the
 * version, and the bytes, it had before); it may hold host ops too. */
#define TRACE_NATIVE_VERSION_SHARED 3u

/* Writes w (borrowed) to `path`.  The file is written to a temporary file
 * next to `path` and renamed over it only when complete, so a failure (or a
 * crash) never leaves a partial file at `path` and never destroys an
 * existing one.  Same workload, same bytes (no timestamps are stored).
 * Shared programs are stored once (version 3) and load shared again, so
 * a generated workload's file and its loaded copy stay O(programs +
 * ranks).
 * Errors (TRACE_NATIVE_ERROR_IO) name the path and what failed. */
gboolean trace_native_save(const SimWorkload *w, const char *path,
                           GError **error);

/* Reads a native trace.  Returns a new, validated workload (caller owns) or
 * NULL with an error naming the file and the dataset or attribute at fault:
 * TRACE_NATIVE_ERROR_IO (missing, unreadable, a directory, not HDF5,
 * truncated),
 * TRACE_NATIVE_ERROR_FORMAT (an HDF5 file that is not a complete,
 * consistent joulesim trace: missing or mistyped dataset, out-of-range
 * index or metadata, failed sim_workload_validate),
 * TRACE_NATIVE_ERROR_VERSION (written by a newer joulesim) or
 * TRACE_NATIVE_ERROR_UNSAFE (refused by io/h5open.h before libhdf5 read
 * it, or needing more memory than allowed).  Every file, sealed or plain HDF5, goes through io/h5open.h: the
 * seal is a CRC against accidents, not a signature. */
SimWorkload *trace_native_load(const char *path, GError **error);

/* trace_native_load(), refusing (TRACE_NATIVE_ERROR_UNSAFE) before anything
 * is allocated a file whose datasets declare more than `max_bytes` (what
 * loading them takes, within about 10%: the records are as large in
 * memory as in the file).  G_MAXUINT64: no bound. */
SimWorkload *trace_native_load_within(const char *path, guint64 max_bytes,
                                      GError **error);

/* TRUE when `path` is an HDF5 file (whatever its content); FALSE when it is
 * not or cannot be read.  For telling native traces from profiler files. */
gboolean trace_native_probe(const char *path);

/* TRUE when `path` is a joulesim trace: an HDF5 file whose root attribute
 * format names this format (any version, intact or not).  For refusing to
 * replace other files with a trace (run/confine.h). */
gboolean trace_native_is_trace(const char *path);

#define TRACE_NATIVE_ERROR (trace_native_error_quark())
GQuark trace_native_error_quark(void);
typedef enum {
  TRACE_NATIVE_ERROR_IO,      /* cannot read or write the file */
  TRACE_NATIVE_ERROR_FORMAT,  /* not a (consistent) joulesim trace */
  TRACE_NATIVE_ERROR_VERSION, /* written by a newer format version */
  TRACE_NATIVE_ERROR_UNSAFE   /* refused by io/h5open.h's check */
} TraceNativeError;

G_END_DECLS

#endif
