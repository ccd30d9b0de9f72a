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

typedef struct {
  const GpuCatalogue *catalogue; /* to map device names to catalogue GPUs */
  const char *gpu;       /* GPU to assume when the trace's device is not in
                            the catalogue (NULL: "A100-SXM4-80GB" + warning) */
  GPtrArray *warnings;   /* optional: receives owned warning strings */
} TraceImportOptions;

typedef enum {
  TRACE_FORMAT_UNKNOWN = 0,
  TRACE_FORMAT_KINETO,
  TRACE_FORMAT_NSYS,
  TRACE_FORMAT_CHAKRA,
  TRACE_FORMAT_NATIVE
} TraceFormat;

/* Guesses the format from the name and the first bytes of the file. */
TraceFormat trace_detect_format(const char *path, GError **error);

/* Imports n files of one job (all of one format; one rank per file for
 * Kineto and Chakra) into a new workload.  Ranks come from the files'
 * metadata when present, else from their order.  Errors name the file and,
 * where possible, the byte offset, line or event. */
SimWorkload *trace_import(const char *const *paths, guint n,
                          const TraceImportOptions *opt, GError **error);

#define TRACE_ERROR (trace_error_quark())
GQuark trace_error_quark(void);
typedef enum {
  TRACE_ERROR_IO,        /* cannot read the file */
  TRACE_ERROR_FORMAT,    /* malformed content */
  TRACE_ERROR_UNSUPPORTED
} TraceError;

G_END_DECLS

#endif
