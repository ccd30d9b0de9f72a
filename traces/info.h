/* traces/info.h -- what a workload holds, counted (trace_stats_compute)
 * and summarised for people (trace_info: the text of `joulesim trace info`
 * and js.trace.info): ops per class and kind, streams, GPU busy time per
 * rank, collectives per group type, FLOPs and bytes, host streams.  For
 * any valid workload: loaded from a native trace, imported or generated.
 */
#ifndef TRACES_INFO_H
#define TRACES_INFO_H

#include <glib.h>
#include "sim/workload.h"

G_BEGIN_DECLS

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
  /* Host streams (imported traces): */
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
 * provenance.  w is borrowed and must be valid as for
 * trace_stats_compute(); out is the caller's, appended to, never reset. */
void trace_info(const SimWorkload *w, GString *out);

G_END_DECLS

#endif
