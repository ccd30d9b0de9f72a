/* traces/timeline.h -- simulated timelines as Chrome trace-event JSON.
 *
 * The exporter is an engine observer (sim_engine_set_observer): it turns
 * every SimOpRecord into trace events and streams them to the file as they
 * arrive, so Perfetto (ui.perfetto.dev) or chrome://tracing can show a
 * replay: one process per GPU (pid = GPU), one thread per stream (tid =
 * stream), a complete event per kernel and communication op, blocked time
 * as its own events, and counter tracks for SM clock and board power.  See
 * traces/timeline.c for the event schema and docs/trace-files.md for users.
 */
#ifndef TRACES_TIMELINE_H
#define TRACES_TIMELINE_H

#include <glib.h>
#include "io/results.h"
#include "sim/engine.h"

G_BEGIN_DECLS

typedef struct {
  /* GPUs to export (ascending or not, duplicates allowed); NULL = all. */
  const guint32 *gpus;
  guint n_gpus;
  /* Window of simulated time [t0_ns, t1_ns]: only events that overlap it
   * are written; t1_ns < 0 = until the end. */
  gint64 t0_ns, t1_ns;
  /* Board power of an idle and of a blocked GPU: the baseline of the power
   * counter and the power of blocked events (<= 0: no power counter and no
   * power on blocked events). */
  double idle_power_w;
  double blocked_power_w;
  /* Free text stored as otherData.label (may be NULL). */
  const char *label;
} TraceTimelineOptions;

/* Defaults: all GPUs, the whole run, no power baseline, no label. */
void trace_timeline_options_init(TraceTimelineOptions *opt);

typedef struct TraceTimeline TraceTimeline;

/* Starts a timeline of a replay of w (borrowed; it must outlive the
 * exporter) to be written to `path`.  Events go to a temporary file next to
 * `path`, renamed over it by trace_timeline_close(); nothing appears at
 * `path` before that.  NULL with TRACE_TIMELINE_ERROR_IO when the temporary
 * file cannot be created (message names the path), _INVALID when the
 * options do not fit w (GPU out of range, empty window). */
TraceTimeline *trace_timeline_open(const char *path, const SimWorkload *w,
                                   const TraceTimelineOptions *opt,
                                   GError **error);

/* Starts a timeline of board power and SM clock over time, per GPU, to be
 * stored by trace_timeline_close() as /timelines/<run> of the results file
 * `path` (io/results.h: one row (gpu, time_s, power_w, sm_mhz) per change,
 * GPUs in order, each GPU's rows in time order; sm_mhz NaN before the
 * GPU's first kernel), created with meta (copied) when missing.  The
 * samples are those of the JSON power and clock counters, kept in memory
 * until the close (24 bytes each).  opt's idle power must be given (> 0):
 * TRACE_TIMELINE_ERROR_INVALID otherwise, or when the options do not fit
 * w.  Nothing is written before the close; an existing timeline `run` is
 * replaced only with `replace` (io/results.h, res_timeline_write). */
TraceTimeline *trace_timeline_open_h5(const char *path, const char *run,
                                      gboolean replace, const ResMeta *meta,
                                      const SimWorkload *w,
                                      const TraceTimelineOptions *opt,
                                      GError **error);

/* The observer: pass it with the exporter as data to
 * sim_engine_set_observer() or JsRunOptions.observer.  Write errors are
 * remembered and reported by trace_timeline_close(). */
void trace_timeline_observe(gpointer timeline, const SimOpRecord *rec);

/* Event counts so far (for reports and tests). */
typedef struct {
  guint64 complete;   /* kernel and communication events ("ph":"X") */
  guint64 blocked;    /* blocked-time events ("ph":"X", cat "blocked") */
  guint64 instant;    /* markers ("ph":"i") */
  guint64 counter;    /* counter samples ("ph":"C") */
  guint64 metadata;   /* process/thread names and sort indices ("ph":"M") */
} TraceTimelineCounts;
void trace_timeline_counts(const TraceTimeline *tl, TraceTimelineCounts *out);

/* Finishes the file (pending counter samples, closing brackets), flushes it
 * to disk and renames it over `path` (an HDF5 timeline: writes it with
 * res_timeline_write, whose errors it returns); stores the final event counts in
 * *counts when given.  Frees tl in every case; on failure (a write error
 * now or earlier) the temporary file is removed and nothing is left at
 * `path`. */
gboolean trace_timeline_close(TraceTimeline *tl, TraceTimelineCounts *counts,
                              GError **error);

/* Abandons the export: frees tl and removes the temporary file. */
void trace_timeline_abort(TraceTimeline *tl);

/* TRUE when `path` starts like a timeline this module writes (its header
 * names joulesim as the generator); for refusing to replace other files
 * with a timeline (run/confine.h). */
gboolean trace_timeline_probe(const char *path);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TraceTimeline, trace_timeline_abort)

/* Parses a GPU list "0,3,8-15" (decimal ids and inclusive ranges) for a run
 * of n_gpus GPUs into a new array of guint32 ids, ascending and distinct.
 * Errors (TRACE_TIMELINE_ERROR_INVALID) name the bad item. */
GArray *trace_timeline_parse_gpus(const char *spec, guint n_gpus,
                                  GError **error);

/* Parses a window "T0:T1" of simulated time; each bound a number with an
 * optional unit (ns, us, ms, s; default s), either may be empty ("":T1 from
 * the start, T0: to the end).  *t1_ns is -1 for an open end. */
gboolean trace_timeline_parse_window(const char *spec, gint64 *t0_ns,
                                     gint64 *t1_ns, GError **error);

#define TRACE_TIMELINE_ERROR (trace_timeline_error_quark())
GQuark trace_timeline_error_quark(void);
typedef enum {
  TRACE_TIMELINE_ERROR_IO,
  TRACE_TIMELINE_ERROR_INVALID
} TraceTimelineError;

G_END_DECLS

#endif
