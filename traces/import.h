/* traces/import.h -- importing real profiler traces into workloads.
 *
 * Formats: PyTorch profiler (Kineto) Chrome-trace JSON (.json or .json.gz,
 * one file per rank), Nsight Systems SQLite exports (.sqlite), and MLCommons
 * Chakra execution traces (.et, one per rank).  See traces/kineto.c,
 * traces/nsys.c and traces/chakra.c for what is kept and how.
 */
#ifndef TRACES_IMPORT_H
#define TRACES_IMPORT_H

#include <glib.h>
#include "sim/workload.h"
#include "models/gpu.h"

G_BEGIN_DECLS

/* Which profiled step an import keeps (docs/trace-import.md,
 * "Iterations"). */
typedef enum {
  TRACE_STEP_AUTO = 0,   /* `iteration` when it is not 0, else MEDIAN */
  TRACE_STEP_FIRST,      /* the first step in time order */
  TRACE_STEP_MEDIAN,     /* the step of median CPU duration (the lower
                            median for an even count): the steady state */
  TRACE_STEP_ALL,        /* every step, one workload, step markers */
  TRACE_STEP_NUMBER,     /* the step numbered step_number */
  TRACE_STEP_INDEX       /* the `iteration`-th step in time order */
} TraceStep;

typedef struct {
  const GpuCatalogue *catalogue; /* to map device names to catalogue GPUs */
  const char *gpu;       /* GPU to assume when the trace's device is not in
                            the catalogue (NULL: "A100-SXM4-80GB" + warning) */
  GPtrArray *warnings;   /* optional: receives owned warning strings */
  /* What to import (zero-initialised callers get the defaults): */
  gint iteration;        /* which iteration to import when the trace marks
                            them (Kineto ProfilerStep#N, NVTX ranges):
                            k > 0 the k-th in time order,
                            TRACE_ITERATION_ALL every GPU event; 0 lets
                            `step` decide (default: the median step) */
  gboolean comm_recorded; /* replay every communication op at its recorded
                             duration, even when all members are present
                             (default: the network model prices matched
                             collectives; see docs/trace-import.md) */
  /* Which step, and whether with the CPU side (host streams): */
  TraceStep step;        /* which step (TRACE_STEP_AUTO: `iteration` when it
                            is not 0, else the median step) */
  gint64 step_number;    /* TRACE_STEP_NUMBER: the ProfilerStep number */
  gboolean gpu_only;     /* leave the CPU out: no host streams, GPU ops in
                            stream order only, no launch or sync waits on
                            the host */
  /* Asked before a reader's records grow past what the file's size alone
   * bounds (NULL: no check): TRUE when need_bytes more may be allocated,
   * else FALSE with an error naming `what`.  js_inputs_load (run/inputs.h)
   * sets it to --max-memory's check. */
  gboolean (*memory_check)(gpointer data, guint64 need_bytes,
                           const char *what, GError **error);
  gpointer memory_check_data;
} TraceImportOptions;

#define TRACE_ITERATION_ALL (-1)

typedef enum {
  TRACE_FORMAT_UNKNOWN = 0,
  TRACE_FORMAT_KINETO,
  TRACE_FORMAT_NSYS,
  TRACE_FORMAT_CHAKRA,
  TRACE_FORMAT_NATIVE
} TraceFormat;

/* Guesses the format from the name and the first bytes of the file. */
TraceFormat trace_detect_format(const char *path, GError **error);
/* (Content first: gzip -> Kineto, SQLite -> Nsight Systems, HDF5 -> native;
 * then the name: .json[.gz], .sqlite, .et, .h5; then a leading '{' or '['.
 * TRACE_FORMAT_UNKNOWN comes with an error: IO, FORMAT for an empty file,
 * UNSUPPORTED otherwise.) */

/* Imports n files of one job (all of one format; one rank per file for
 * Kineto and Chakra) into a new workload.  Ranks come from the files'
 * metadata when present, else from their order.  Errors name the file and,
 * where possible, the byte offset, line or event. */
SimWorkload *trace_import(const char *const *paths, guint n,
                          const TraceImportOptions *opt, GError **error);
/* (opt may be NULL for the defaults; the caller owns the workload.  Ranks
 * whose ops are alike share one program (sim_workload_share_alike), so a
 * caller that edits ops materialises the rank first.  Rules:
 * docs/trace-import.md.) */

#define TRACE_ERROR (trace_error_quark())
GQuark trace_error_quark(void);
typedef enum {
  TRACE_ERROR_IO,        /* cannot read the file */
  TRACE_ERROR_FORMAT,    /* malformed content */
  TRACE_ERROR_UNSUPPORTED,
  TRACE_ERROR_INVALID    /* invalid option (unknown GPU, iteration out of
                            range, duplicate ranks) */
} TraceError;

/* Parses a step choice as `trace import --step` and js.trace.import{
 * step = } take it: "first", "median", "all" or a step number (>= 0).
 * Sets opt->step (and opt->step_number); FALSE with TRACE_ERROR_INVALID
 * naming the value otherwise. */
gboolean trace_parse_step_option(const char *text, TraceImportOptions *opt,
                                 GError **error);

/* "kineto", "nsys", "chakra", "native" or "unknown" (static string). */
const char *trace_format_name(TraceFormat f);

/* Writes a synthetic single-rank Kineto trace of about target_bytes of
 * JSON (CPU ops, runtime launches, flows and kernels with real-looking
 * names and args, one kernel per five events) for throughput benchmarks;
 * *n_gpu_events receives the kernel count.  Deterministic. */
gboolean trace_kineto_write_synthetic(const char *path, guint64 target_bytes,
                                      guint64 *n_gpu_events, GError **error);

G_END_DECLS

#endif
