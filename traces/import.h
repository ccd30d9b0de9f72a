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
  /* Added by the importers (zero-initialised callers get the defaults): */
  gint iteration;        /* which iteration to import when the trace marks
                            them (Kineto ProfilerStep#N, NVTX ranges):
                            k > 0 the k-th in time order,
                            TRACE_ITERATION_ALL every GPU event; 0 lets
                            `step` decide (default: the median step) */
  gboolean comm_recorded; /* replay every communication op at its recorded
                             duration, even when all members are present
                             (default: the network model prices matched
                             collectives; see docs/trace-import.md) */
  /* Added by issue 16: */
  TraceStep step;        /* which step (TRACE_STEP_AUTO: `iteration` when it
                            is not 0, else the median step) */
  gint64 step_number;    /* TRACE_STEP_NUMBER: the ProfilerStep number */
  gboolean gpu_only;     /* leave the CPU out: no host streams, GPU ops in
                            stream order only (the replay before issue 16) */
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
/* (opt may be NULL for the defaults; the caller owns the workload.  Rules:
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

/* ---- Internal: shared by the importers in traces/ (not a binding API) ----
 *
 * Kineto and Nsight Systems files are first read into TraceRawRank records
 * (one per rank: its GPU activities with their times, the iteration and
 * phase ranges and the cross-stream waits the file records); then
 * trace_raw_build() turns them into a workload the same way for both
 * formats.  Names are interned in a shared pool workload (`names`) so the
 * raw records stay small.
 */
typedef enum {
  TRACE_RAW_KERNEL = 0,
  TRACE_RAW_MEMCPY,
  TRACE_RAW_MEMSET
} TraceRawKind;

/* Communication described by an NCCL kernel. */
typedef struct {
  guint8 kind;         /* TraceCommKind (traces/classify.h) */
  guint8 coll;         /* SimCollType */
  double bytes;        /* message bytes (0 = unknown) */
  gint64 peer;         /* send/recv peer (global rank), -1 unknown */
  gint64 group_size;   /* -1 unknown */
  char *ranks;         /* member list as recorded ("[0, 1, 2]"), owned,
                          NULL when unknown */
  char *pg_name;       /* process-group name, owned, NULL when unknown */
} TraceRawComm;

typedef struct {
  gint64 ts_ns;        /* GPU start */
  gint64 dur_ns;       /* GPU duration (>= 0) */
  gint64 launch_ns;    /* CPU launch time (set by the builder from
                          `launches`; the GPU start when unknown) */
  gint64 corr;         /* correlation id of the launch, -1 unknown */
  gint64 device, stream;
  guint32 name;        /* in the name pool */
  guint32 comm;        /* index into TraceRawRank.comms or G_MAXUINT32 */
  guint32 work;        /* index into TraceRawRank.works (the work of the
                          CPU operator that launched it, when this is the
                          operator's main kernel) or G_MAXUINT32; set by
                          the builder */
  guint8 kind;         /* TraceRawKind */
} TraceRawOp;

/* A CPU-side range: an iteration (step >= 0: its number) or a phase. */
typedef struct {
  gint64 start_ns, end_ns;
  gint64 step;         /* ProfilerStep number, -1 when not an iteration */
  gint32 phase;        /* SimPhase, or -1 for iteration ranges */
  gint64 tid;          /* CPU thread (-1 unknown) */
} TraceRawRange;

/* "Stream `stream` waits for an event recorded on `wait_on_stream`": the
 * consumer is the first op launched on `stream` after correlation `corr`,
 * the producer the last op launched on `wait_on_stream` before the event
 * record's correlation `record_corr`. */
typedef struct {
  gint64 device, stream, corr, wait_on_stream, record_corr;
} TraceRawSync;

/* A CUDA runtime call: its correlation id, CPU start, duration (-1
 * unknown, e.g. a negative recorded one), thread and TraceCall. */
typedef struct {
  gint64 corr, ts_ns;
  gint64 dur_ns;
  gint64 tid;
  gint64 ext;          /* External id (its CPU operator's), -1 unknown */
  guint32 name;        /* in the name pool */
  guint8 call;         /* TraceCall (traces/classify.h) */
} TraceRawLaunch;

/* A CPU operator (Kineto cpu_op): its time on its thread, its External id
 * and, when its recorded shapes priced it (traces/shapes.c), its work. */
typedef struct {
  gint64 ts_ns, end_ns;
  gint64 tid;          /* -1 unknown */
  gint64 ext;          /* External id, -1 unknown */
  guint32 work;        /* index into TraceRawRank.works, G_MAXUINT32: no
                          priced shapes */
} TraceRawCpuOp;

/* The work of a CPU operator (FLOPs, DRAM bytes, implied class and element
 * size; traces/shapes.h TraceOpWork). */
typedef struct {
  double flops, bytes;
  guint8 klass;        /* SimOpClass */
  guint8 elem;         /* bytes per element of the main input */
} TraceRawWork;

typedef struct {
  char *path;            /* owned */
  gint64 rank;           /* global rank from the file, -1 unknown */
  gint64 world_size;     /* -1 unknown */
  GArray *ops;           /* TraceRawOp */
  GArray *comms;         /* TraceRawComm (strings freed with the array) */
  GArray *ranges;        /* TraceRawRange: iterations and phases */
  GArray *syncs;         /* TraceRawSync */
  GArray *launches;      /* TraceRawLaunch: runtime calls */
  guint64 bad_host_durs; /* runtime calls with a negative duration */
  GArray *cpu_ops;       /* TraceRawCpuOp, in file order */
  GArray *works;         /* TraceRawWork */
  guint64 bad_shapes;    /* operators whose shapes were unusable */
  char *bad_shape_op;    /* the first of them (name, owned) or NULL */
  GHashTable *devices;   /* device id (gint64*) -> device name (owned) */
  GHashTable *pg_ranks;  /* process-group name -> canonical member list */
} TraceRawRank;

TraceRawRank *trace_raw_rank_new(const char *path);
void trace_raw_rank_free(TraceRawRank *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TraceRawRank, trace_raw_rank_free)

/* Builds the workload from the raw ranks in `raws` (borrowed; their launch
 * tables are sorted and their ops' launch_ns filled in place) whose names
 * live in `names` (borrowed).  `format` names the importer in the
 * provenance.  Returns a new workload or NULL with an error naming the
 * file.  The algorithm is described at the top of traces/import.c. */
SimWorkload *trace_raw_build(GPtrArray *raws, const SimWorkload *names,
                             const TraceImportOptions *opt,
                             const char *format, GError **error);

/* The per-format readers.  trace_kineto_read() parses one Kineto file into
 * a new raw rank (names interned in `names`); trace_nsys_read() appends one
 * raw rank per GPU device of an Nsight Systems SQLite export to `out`;
 * trace_chakra_import() builds the workload from n Chakra files. */
TraceRawRank *trace_kineto_read(const char *path, SimWorkload *names,
                                GError **error);
gboolean trace_nsys_read(const char *path, SimWorkload *names, GPtrArray *out,
                         GError **error);
SimWorkload *trace_chakra_import(const char *const *paths, guint n,
                                 const TraceImportOptions *opt,
                                 GError **error);

/* Writes a synthetic single-rank Kineto trace of about target_bytes of
 * JSON (CPU ops, runtime launches, flows and kernels with real-looking
 * names and args, one kernel per five events) for throughput benchmarks;
 * *n_gpu_events receives the kernel count.  Deterministic. */
gboolean trace_kineto_write_synthetic(const char *path, guint64 target_bytes,
                                      guint64 *n_gpu_events, GError **error);

/* The workload's reference GPU for a profiler device name (NULL: none
 * recorded): the matching catalogue name, else opt->gpu, else
 * "A100-SXM4-80GB", with a warning naming `path` in the last two cases.
 * Fails (TRACE_ERROR_INVALID) when opt->gpu is not in the catalogue.
 * Returns a new string. */
char *trace_ref_gpu(const TraceImportOptions *opt, const char *device,
                    const char *path, GError **error);

/* Adds a printf-style warning to opt->warnings (when non-NULL). */
void trace_warn(const TraceImportOptions *opt, const char *fmt, ...)
    G_GNUC_PRINTF(2, 3);

G_END_DECLS

#endif
