/* traces/import-private.h -- what the importers in traces/ share (not a
 * binding API): the raw records the Kineto and Nsight Systems readers fill
 * and the builder consumes, the readers, and the builder's own state, which
 * traces/import_select.c, import_host.c and import_build.c share.
 */
#ifndef TRACES_IMPORT_PRIVATE_H
#define TRACES_IMPORT_PRIVATE_H

#include "traces/import.h"

G_BEGIN_DECLS

/* ---- Raw ranks -----------------------------------------------------------
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


/* ---- The builder's state (traces/import_*.c) ---------------------------- */

/* What the import keeps of rank i's time: the GPU ops launched in
 * [w0, w1) (w0 > w1: every op), and the host streams' window [h0, h1)
 * (h0 > h1: from the first runtime call to the last one's end).  `steps`
 * (owned, may be NULL): the step ranges that get markers (every step with
 * TRACE_STEP_ALL, else the one chosen); step_tid their thread. */
typedef struct {
  gint64 w0, w1, h0, h1;
  GArray *steps;
  gint64 step_tid;
} Window;

/* How a communication op is replayed. */
enum { CM_NONE = 0, CM_COLL, CM_SEND, CM_RECV, CM_SOLO };

/* One selected op of one rank, between analysis and emission. */
typedef struct {
  guint32 raw;        /* index in the raw rank's ops (GPU ops) */
  guint32 stream;     /* dense stream index */
  guint8 phase;
  guint8 cm;          /* CM_* */
  guint8 host;        /* HS_GPU, or a host stream's HS_OP / HS_STEP */
  guint32 gkey;       /* CM_COLL: index into Build.gkeys */
  guint32 peer;       /* CM_SEND/RECV: peer's workload rank; HS_STEP: the
                         index of the step in Window.steps */
  guint32 hname;      /* host ops: name in the pool, or HN_* */
  gint64 host_ns;     /* host ops: duration */
} Sel;

/* Sel.host */
enum { HS_GPU = 0, HS_OP, HS_STEP };
/* Names of host ops that are no runtime call (Sel.hname) */
#define HN_GAP (G_MAXUINT32 - 1)   /* CPU time before a synchronising call */
#define HN_TAIL (G_MAXUINT32 - 2)  /* CPU time to the end of the window */

typedef struct {
  TraceRawRank *raw;
  GArray *sel;        /* Sel, grouped by stream, in order */
  guint32 *stream_off;
  guint n_streams;
  GArray *deps;       /* guint32 pairs (consumer pos, producer pos) */
  const char *device; /* borrowed from raw->devices */
  guint32 n_gpu;      /* sel[0, n_gpu): GPU ops; after them, host entries */
  guint ns_gpu;       /* streams [0, ns_gpu) are GPU streams */
} RankWork;

typedef struct {
  const TraceImportOptions *opt;
  guint n;
  gint64 *global;        /* global rank of workload rank i */
  RankWork *rw;          /* n */
  GPtrArray *gkeys;      /* member lists (GArray of guint32 local ranks) */
  GHashTable *gkey_index;/* "0,1" -> index + 1 */
  guint64 solo_ops;      /* comm ops replayed at recorded durations */
  Window *win;           /* n: what each rank keeps */
  /* Host streams (summed over ranks, for the warnings and provenance): */
  guint64 host_ops, host_syncs, host_blocked, orphans, gpu_ops, nowhere,
      bad_durs, host_cycles;
  /* Kernel shapes (summed over ranks): kernel ops and their recorded time,
   * and those of them priced from their operator's shapes. */
  guint64 n_kernels, shaped_kernels;
  gint64 kernel_ns, shaped_ns;
} Build;

typedef struct {
  gint64 t;
  guint32 pos;
} TimeKey;

typedef struct {
  gint64 corr;
  guint32 pos;
} CorrKey;

/* qsort comparators: gint64, TimeKey by time, CorrKey by correlation. */
int trace_cmp_i64(const void *a, const void *b);

/* Parses a member list "[0, 1, 2]" / "0,1,2" into ascending distinct
 * ranks; NULL when malformed or empty. */
GArray *trace_parse_members(const char *s);

/* Frees what b holds (not b). */
void trace_build_clear(Build *b);

/* Workload rank of global rank g, or -1 when g was not imported. */
gint trace_local_rank(const Build *b, gint64 g);

/* Interns a member list of workload ranks; returns its key index. */
guint32 trace_gkey_intern(Build *b, GArray *local);

int trace_cmp_time(const void *a, const void *b);

/* Iteration ranges of a raw rank, sorted by start (new array). */
GArray *trace_step_ranges(const TraceRawRank *raw);

/* The step mode an options record asks for (resolving TRACE_STEP_AUTO). */
TraceStep trace_step_mode(const TraceImportOptions *opt);

/* Picks the windows of every rank (see Window) and the label. */
gboolean trace_pick_windows(Build *b, Window *win, GString *label,
                            GError **error);

int trace_cmp_corr(const void *a, const void *b);

/* Steps 2-5 for workload rank i: selection, phases, streams, order, deps. */
gboolean trace_analyse_rank(Build *b, guint i, gint64 w0, gint64 w1,
                            GError **error);

/* Adds rank i's host streams (traces/import_host.c) to its selection. */
gboolean trace_host_streams(Build *b, guint i, const Window *win,
                            GError **error);

/* The import's warnings about the host side. */
void trace_host_warnings(Build *b);

/* Kernel shapes: the coverage in the provenance and the warnings. */
void trace_shape_report(const Build *b, GHashTable *pv);

/* ---- Time arithmetic ------------------------------------------------------
 *
 * Times and durations in a trace are whatever the file says: a crafted or
 * corrupt file holds INT64_MIN starts and 2^63-1 ns durations, and signed
 * overflow is undefined behaviour (three such findings of the fuzzers:
 * tests/fuzz/regress/nsys/import_host-204-overflow, the last).  Every sum or
 * difference of trace times or durations in the importers goes through these
 * two, which saturate at G_MININT64 / G_MAXINT64 instead: a saturated value
 * is absurd but defined, and the builder's range checks then refuse or clamp
 * it like any other absurd time. */
static inline gint64 trace_ns_add(gint64 a, gint64 b)
{
  gint64 r;
  if (__builtin_add_overflow(a, b, &r))
    return b > 0 ? G_MAXINT64 : G_MININT64;
  return r;
}

static inline gint64 trace_ns_sub(gint64 a, gint64 b)
{
  gint64 r;
  if (__builtin_sub_overflow(a, b, &r))
    return b < 0 ? G_MAXINT64 : G_MININT64;
  return r;
}

G_END_DECLS

#endif
