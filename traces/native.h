/* traces/native.h -- joulesim's own trace files (HDF5; DESIGN section 9).
 *
 * A native trace is a SimWorkload written as whole HDF5 datasets whose
 * records have the in-memory layout of SimOp and SimShape, so loading is a
 * handful of whole-dataset reads (no parsing) followed by
 * sim_workload_validate().  docs/trace-files.md describes the layout for
 * users who read the files with h5py; traces/native.c has the same
 * description next to the code.
 *
 * Also here: trace_info(), the summary printed by `joulesim trace info` and
 * returned by js.trace.info (ops per class and kind, streams, GPU busy time
 * per rank, collectives per group type, bytes).
 */
#ifndef TRACES_NATIVE_H
#define TRACES_NATIVE_H

#include <glib.h>
#include "sim/workload.h"

G_BEGIN_DECLS

/* The format version written by this build; files with a larger version
 * are refused with TRACE_NATIVE_ERROR_VERSION. */
#define TRACE_NATIVE_VERSION 2u
/* Version 2 (issue 16) adds host streams: ops of kind SIM_OP_HOST (5).  A
 * workload without host ops is still written as version 1, which older
 * builds read; a version-1 file holding host ops is refused. */
#define TRACE_NATIVE_VERSION_HOST 2u

/* Writes w (borrowed) to `path`.  The file is written to a temporary file
 * next to `path` and renamed over it only when complete, so a failure (or a
 * crash) never leaves a partial file at `path` and never destroys an
 * existing one.  Same workload, same bytes (no timestamps are stored).
 * Errors (TRACE_NATIVE_ERROR_IO) name the path and what failed. */
gboolean trace_native_save(const SimWorkload *w, const char *path,
                           GError **error);

/* Reads a native trace.  Returns a new, validated workload (caller owns) or
 * NULL with an error naming the file and the dataset or attribute at fault:
 * TRACE_NATIVE_ERROR_IO (missing, unreadable, a directory, not HDF5,
 * truncated), TRACE_NATIVE_ERROR_FORMAT (an HDF5 file that is not a
 * complete, consistent joulesim trace: missing or mistyped dataset,
 * out-of-range index, failed sim_workload_validate) or
 * TRACE_NATIVE_ERROR_VERSION (written by a newer joulesim). */
SimWorkload *trace_native_load(const char *path, GError **error);

/* TRUE when `path` is an HDF5 file (whatever its content); FALSE when it is
 * not or cannot be read.  For telling native traces from profiler files. */
gboolean trace_native_probe(const char *path);

/* TRUE when `path` is a joulesim trace: an HDF5 file whose root attribute
 * format names this format (any version, intact or not).  For refusing to
 * replace other files with a trace (run/confine.h). */
gboolean trace_native_is_trace(const char *path);

/* Collectives of one kind of communicator group (see trace_stats). */
typedef struct {
  char label[32];       /* "tp", "dp", "pp", "embedding", "world", or
                           "N ranks" when the layout does not say */
  guint n_groups;       /* groups of this kind that carry collectives */
  guint64 calls;        /* collective calls (one per group per call) */
  guint64 ops;          /* collective ops over all ranks (calls x size) */
  double bytes;         /* sum over ops of the per-rank message bytes */
} TraceGroupStats;

/* Counts over a workload (trace_stats_compute). */
typedef struct {
  guint n_ranks;
  guint64 n_ops;
  guint n_shapes, n_names, n_groups;
  guint64 by_class[SIM_CLASS_COUNT];
  guint64 by_kind[SIM_OP_KIND_COUNT];
  guint streams_min, streams_max;  /* streams per rank */
  guint64 streams_total;
  gint64 *busy_ns;      /* per rank: sum of ref_ns of its kernels (owned) */
  gint64 *busy_phase_ns; /* per rank r and phase k, [r * SIM_PHASE_COUNT +
                           k]: the same sum by the kernels' phase (owned;
                           a recomputed forward is phase backward) */
  gint64 busy_min_ns, busy_max_ns;
  double busy_mean_ns;
  guint busy_min_rank, busy_max_rank;
  double kernel_flops;  /* sum over kernels of their shape's FLOPs */
  double kernel_ns;     /* sum of kernel ref_ns (all ranks) */
  double shaped_ns;     /* of which kernels whose shape has FLOPs or bytes
                           (priced on the roofline, not by class) */
  double kernel_bytes;  /* sum over kernels of their shape's DRAM bytes */
  double comm_bytes;    /* sum over comm ops of their message bytes */
  guint64 coll_by_type[SIM_COLL_COUNT];   /* collective ops per type */
  double coll_bytes_by_type[SIM_COLL_COUNT];
  guint64 p2p_sends;    /* send ops (each matched by one recv) */
  double p2p_bytes;     /* bytes of the send ops */
  GArray *groups;       /* of TraceGroupStats, in order of first group id
                           (owned) */
  /* Host streams (imported traces, issue 16): */
  guint64 host_ops;     /* SIM_OP_HOST ops (not in by_class) */
  guint64 host_streams; /* streams holding host ops, all ranks */
  gint64 step_ns;       /* the iteration replayed at its recorded durations
                           (every op its ref_ns, communication priced 0
                           when not recorded); 0 without host ops */
  double host_bound;    /* share of step_ns the GPUs idle waiting for the
                           host (mean over ranks); 0 without host ops */
} TraceStats;

/* Fills *st from w (borrowed; it must pass sim_workload_validate(), as
 * every loaded, imported or generated workload does).  Free with
 * trace_stats_clear(). */
void trace_stats_compute(const SimWorkload *w, TraceStats *st);
void trace_stats_clear(TraceStats *st);

/* The kind of communicator group g of w, as in TraceGroupStats.label. */
void trace_group_label(const SimWorkload *w, guint32 g, char *out,
                       gsize out_len);

/* Appends a readable summary of w to out: ranks and layout, ops per class
 * and per kind, streams, GPU busy time per rank (every rank up to 16 ranks,
 * else min/mean/max), collectives per group type, FLOPs and bytes,
 * provenance. */
void trace_info(const SimWorkload *w, GString *out);

#define TRACE_NATIVE_ERROR (trace_native_error_quark())
GQuark trace_native_error_quark(void);
typedef enum {
  TRACE_NATIVE_ERROR_IO,      /* cannot read or write the file */
  TRACE_NATIVE_ERROR_FORMAT,  /* not a (consistent) joulesim trace */
  TRACE_NATIVE_ERROR_VERSION  /* written by a newer format version */
} TraceNativeError;

G_END_DECLS

#endif
