/* traces/import.c -- format detection, dispatch, and the builder that turns
 * raw profiler records (Kineto JSON, Nsight Systems SQLite) into a workload.
 *
 * The builder (trace_raw_build)
 * -----------------------------
 * Input: one TraceRawRank per rank, holding every GPU activity of the file
 * (kernels, memcpys, memsets with GPU start, duration, device, stream,
 * launch correlation id), the CPU launch times by correlation id, the CPU
 * ranges that mark iterations (ProfilerStep#N, NVTX "iteration N") and
 * phases (autograd backward, optimizer step, "## forward ##", ...), and the
 * cross-stream waits the profiler recorded.
 *
 *  1. Ranks: the files' own global ranks (distributedInfo) when present,
 *     else file order; workload rank i is the i-th smallest global rank.
 *  2. Iteration: with iteration ranges, op o belongs to iteration k when its
 *     CPU launch (found through its correlation id; its GPU start when the
 *     launch is missing) lies in [start, end) of the k-th range in time
 *     order.  Ranks are aligned by step number: the reference rank (the
 *     smallest with ranges) picks the number, the others use the range with
 *     the same number.  TRACE_ITERATION_ALL keeps every op.
 *  3. Phase: optimizer if the launch lies in an optimizer range, else
 *     backward if in a backward range (autograd::engine::evaluate_function
 *     and friends, see traces/classify.c), else forward when the file marks
 *     phases at all, else other.  Ranges are matched by time, not thread:
 *     a training step runs its phases one after the other.
 *  4. Streams: one SimOp stream per (device, CUDA stream) with ops, ordered
 *     by (device, stream id); ops in GPU start order within a stream.  One
 *     rank replays on one GPU even when its file shows several devices
 *     (warned).  At most SIM_MAX_STREAMS streams per rank.
 *  5. Cross-stream dependencies: only those the trace records (Kineto's
 *     cuda_sync "Stream Wait Event" records: consumer = first op launched on
 *     the waiting stream after the wait call, producer = last op launched on
 *     the recorded stream before the event record).  A dependency whose
 *     recorded times contradict it (producer ending after the consumer
 *     started) is dropped.  Otherwise streams are ordered only by their own
 *     order.  An op waiting on several streams gets zero-duration marker
 *     ops on its stream, one per extra producer, so that every wait is
 *     exact (SimOp has one wait field).
 *  6. Communication: NCCL kernels become collectives, sends or receives.
 *     A collective whose member list (Process Group Ranks, or the process
 *     group's ranks from distributedInfo) is entirely among the imported
 *     ranks becomes a collective on that group, matched across ranks and
 *     priced by the network model (ref_ns = 0; or its recorded duration
 *     with opt->comm_recorded).  A send/receive whose peer is imported
 *     becomes a p2p op.  Everything else -- members absent from the import,
 *     unknown members, batched SendRecv kernels without peers -- becomes a
 *     collective on a one-rank group with ref_ns = the recorded duration:
 *     the engine cannot match it with ranks it does not have, and the
 *     recorded duration already includes the wait for them.  (Groups
 *     restricted to the present ranks would be matched, but the engine
 *     gives a matched collective the longest member's duration, inflating
 *     every other member's busy time; a one-rank group replays each rank
 *     exactly as recorded.)  When the matched ops of a group (or of a
 *     send/receive pair) do not pair up -- the files cut different windows
 *     -- that group falls back to recorded durations too, with a warning.
 *  7. Costs: kernels keep their recorded duration as ref_ns.  A kernel
 *     whose CPU operator's recorded shapes priced it (see "kernel shapes"
 *     below) has a shape per (name, FLOPs, bytes, class, math unit),
 *     priced on the roofline; the others are per (name, class) with no
 *     FLOPs or bytes, so the GPU model scales them by its relative form
 *     (models/gpu.c, F = B = 0).  Communication shapes are per (name,
 *     type, bytes).
 *
 * Limits: the CPU side is not replayed, so launch-bound gaps between
 * kernels vanish in replay; GPU busy time is preserved exactly.
 */
#include "traces/import.h"
#include "traces/classify.h"
#include "io/fault.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

G_DEFINE_QUARK(trace-error-quark, trace_error)

#define DEFAULT_GPU "A100-SXM4-80GB"

const char *trace_format_name(TraceFormat f)
{
  switch (f) {
  case TRACE_FORMAT_KINETO: return "kineto";
  case TRACE_FORMAT_NSYS: return "nsys";
  case TRACE_FORMAT_CHAKRA: return "chakra";
  case TRACE_FORMAT_NATIVE: return "native";
  default: return "unknown";
  }
}

void trace_warn(const TraceImportOptions *opt, const char *fmt, ...)
{
  if (opt == NULL || opt->warnings == NULL)
    return;
  va_list ap;
  va_start(ap, fmt);
  g_ptr_array_add(opt->warnings, g_strdup_vprintf(fmt, ap));
  va_end(ap);
}

gboolean trace_parse_step_option(const char *text, TraceImportOptions *opt,
                                 GError **error)
{
  g_return_val_if_fail(text != NULL && opt != NULL, FALSE);
  if (strcmp(text, "first") == 0) {
    opt->step = TRACE_STEP_FIRST;
    return TRUE;
  }
  if (strcmp(text, "median") == 0) {
    opt->step = TRACE_STEP_MEDIAN;
    return TRUE;
  }
  if (strcmp(text, "all") == 0) {
    opt->step = TRACE_STEP_ALL;
    return TRUE;
  }
  char *end = NULL;
  errno = 0;
  gint64 v = g_ascii_strtoll(text, &end, 10);
  if (text[0] == '\0' || *end != '\0' || errno != 0 || v < 0 ||
      !g_ascii_isdigit(text[0])) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                "step \"%s\": expected first, median, all or a step number",
                text);
    return FALSE;
  }
  opt->step = TRACE_STEP_NUMBER;
  opt->step_number = v;
  return TRUE;
}

/* ---- format detection --------------------------------------------------- */

static gboolean has_suffix_ci(const char *path, const char *suffix)
{
  gsize n = strlen(path), m = strlen(suffix);
  return n >= m && g_ascii_strcasecmp(path + n - m, suffix) == 0;
}

TraceFormat trace_detect_format(const char *path, GError **error)
{
  g_return_val_if_fail(path != NULL, TRACE_FORMAT_UNKNOWN);
  FILE *f = fault_fopen(path, "rb", "import: detect format");
  if (f == NULL) {
    int e = errno;
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_IO, "%s: %s", path,
                g_strerror(e));
    return TRACE_FORMAT_UNKNOWN;
  }
  unsigned char head[64];
  size_t n = fread(head, 1, sizeof head, f);
  int read_errno = errno; /* e.g. EISDIR: fopen opens a directory */
  gboolean read_err = ferror(f) != 0;
  fclose(f);
  if (read_err) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_IO, "%s: read error (%s)",
                path, g_strerror(read_errno));
    return TRACE_FORMAT_UNKNOWN;
  }
  /* Content first: magic numbers are unambiguous. */
  if (n >= 16 && memcmp(head, "SQLite format 3", 16) == 0)
    return TRACE_FORMAT_NSYS;
  if (n >= 8 && memcmp(head, "\x89HDF\r\n\x1a\n", 8) == 0)
    return TRACE_FORMAT_NATIVE;
  if (n >= 2 && head[0] == 0x1f && head[1] == 0x8b)
    return TRACE_FORMAT_KINETO; /* gzip: the only compressed format */
  /* Then the name. */
  if (has_suffix_ci(path, ".json") || has_suffix_ci(path, ".json.gz"))
    return TRACE_FORMAT_KINETO;
  if (has_suffix_ci(path, ".sqlite") || has_suffix_ci(path, ".sqlite3"))
    return TRACE_FORMAT_NSYS;
  if (has_suffix_ci(path, ".et"))
    return TRACE_FORMAT_CHAKRA;
  if (has_suffix_ci(path, ".h5") || has_suffix_ci(path, ".hdf5"))
    return TRACE_FORMAT_NATIVE;
  /* Then the look of the content. */
  size_t i = 0;
  while (i < n && g_ascii_isspace(head[i]))
    i++;
  if (i < n && (head[i] == '{' || head[i] == '['))
    return TRACE_FORMAT_KINETO;
  if (n == 0) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                "%s: empty file (expected a Kineto .json[.gz], an Nsight "
                "Systems .sqlite or a Chakra .et trace)", path);
    return TRACE_FORMAT_UNKNOWN;
  }
  g_set_error(error, TRACE_ERROR, TRACE_ERROR_UNSUPPORTED,
              "%s: unknown trace format (expected a Kineto .json[.gz], an "
              "Nsight Systems .sqlite or a Chakra .et trace)", path);
  return TRACE_FORMAT_UNKNOWN;
}

/* ---- raw ranks ---------------------------------------------------------- */

static void clear_comm(gpointer p)
{
  TraceRawComm *c = p;
  g_free(c->ranks);
  g_free(c->pg_name);
}

TraceRawRank *trace_raw_rank_new(const char *path)
{
  TraceRawRank *r = g_new0(TraceRawRank, 1);
  r->path = g_strdup(path);
  r->rank = -1;
  r->world_size = -1;
  r->ops = g_array_new(FALSE, FALSE, sizeof(TraceRawOp));
  r->comms = g_array_new(FALSE, FALSE, sizeof(TraceRawComm));
  g_array_set_clear_func(r->comms, clear_comm);
  r->ranges = g_array_new(FALSE, FALSE, sizeof(TraceRawRange));
  r->syncs = g_array_new(FALSE, FALSE, sizeof(TraceRawSync));
  r->launches = g_array_new(FALSE, FALSE, sizeof(TraceRawLaunch));
  r->cpu_ops = g_array_new(FALSE, FALSE, sizeof(TraceRawCpuOp));
  r->works = g_array_new(FALSE, FALSE, sizeof(TraceRawWork));
  r->devices = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
                                     g_free);
  r->pg_ranks = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                      g_free);
  return r;
}

void trace_raw_rank_free(TraceRawRank *r)
{
  if (r == NULL)
    return;
  g_free(r->path);
  g_array_unref(r->ops);
  g_array_unref(r->comms);
  g_array_unref(r->ranges);
  g_array_unref(r->syncs);
  g_array_unref(r->launches);
  g_array_unref(r->cpu_ops);
  g_array_unref(r->works);
  g_free(r->bad_shape_op);
  g_hash_table_unref(r->devices);
  g_hash_table_unref(r->pg_ranks);
  g_free(r);
}

/* ---- reference GPU ------------------------------------------------------ */

char *trace_ref_gpu(const TraceImportOptions *opt, const char *device,
                    const char *path, GError **error)
{
  g_autoptr(GpuCatalogue) own = NULL;
  const GpuCatalogue *cat = opt != NULL ? opt->catalogue : NULL;
  if (cat == NULL)
    cat = own = gpu_catalogue_new();
  const char *fallback = opt != NULL && opt->gpu != NULL ? opt->gpu
                                                         : DEFAULT_GPU;
  if (opt != NULL && opt->gpu != NULL) {
    GError *e = NULL;
    if (gpu_catalogue_lookup(cat, opt->gpu, &e) == NULL) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                  "gpu \"%s\" (the GPU to assume for %s): %s", opt->gpu,
                  path, e->message);
      g_error_free(e);
      return NULL;
    }
  }
  const char *hit = trace_gpu_for_device(cat, device);
  if (hit != NULL)
    return g_strdup(hit);
  if (device != NULL)
    trace_warn(opt, "%s: device \"%s\" is not in the GPU catalogue; "
               "durations are taken as measured on %s", path, device,
               fallback);
  else
    trace_warn(opt, "%s: the trace names no GPU model; durations are "
               "taken as measured on %s", path, fallback);
  return g_strdup(fallback);
}

/* ---- the builder -------------------------------------------------------- */

static int cmp_launch(const void *a, const void *b)
{
  const TraceRawLaunch *x = a, *y = b;
  return x->corr < y->corr ? -1 : x->corr > y->corr;
}

static int cmp_range_start(const void *a, const void *b)
{
  const TraceRawRange *x = a, *y = b;
  if (x->start_ns != y->start_ns)
    return x->start_ns < y->start_ns ? -1 : 1;
  return x->end_ns < y->end_ns ? -1 : x->end_ns > y->end_ns;
}

static int cmp_i64(const void *a, const void *b)
{
  gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;
  return x < y ? -1 : x > y;
}

/* Parses a member list "[0, 1, 2]" / "0,1,2" into ascending distinct
 * ranks; NULL when malformed or empty. */
static GArray *parse_members(const char *s)
{
  if (s == NULL)
    return NULL;
  GArray *a = g_array_new(FALSE, FALSE, sizeof(gint64));
  const char *p = s;
  while (*p != '\0') {
    if (g_ascii_isdigit(*p)) {
      gint64 v = 0;
      while (g_ascii_isdigit(*p)) {
        if (v > G_MAXINT32) {
          g_array_unref(a);
          return NULL;
        }
        v = v * 10 + (*p++ - '0');
      }
      g_array_append_val(a, v);
    } else if (*p == '-') {
      g_array_unref(a);
      return NULL;
    } else {
      p++;
    }
  }
  if (a->len == 0) {
    g_array_unref(a);
    return NULL;
  }
  g_array_sort(a, cmp_i64);
  guint k = 1;
  for (guint i = 1; i < a->len; i++)
    if (g_array_index(a, gint64, i) != g_array_index(a, gint64, k - 1))
      g_array_index(a, gint64, k++) = g_array_index(a, gint64, i);
  g_array_set_size(a, k);
  return a;
}

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

static void windows_clear(Window *win, guint n)
{
  if (win == NULL)
    return;
  for (guint i = 0; i < n; i++)
    if (win[i].steps != NULL)
      g_array_unref(win[i].steps);
  g_free(win);
}

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
  guint64 host_ops, host_syncs, orphans, gpu_ops, nowhere, bad_durs,
      host_cycles;
  /* Kernel shapes (summed over ranks): kernel ops and their recorded time,
   * and those of them priced from their operator's shapes. */
  guint64 n_kernels, shaped_kernels;
  gint64 kernel_ns, shaped_ns;
} Build;

static void build_clear(Build *b)
{
  if (b->rw != NULL)
    for (guint i = 0; i < b->n; i++) {
      if (b->rw[i].sel != NULL)
        g_array_unref(b->rw[i].sel);
      if (b->rw[i].deps != NULL)
        g_array_unref(b->rw[i].deps);
      g_free(b->rw[i].stream_off);
    }
  g_free(b->rw);
  g_free(b->global);
  windows_clear(b->win, b->n);
  if (b->gkeys != NULL)
    g_ptr_array_unref(b->gkeys);
  if (b->gkey_index != NULL)
    g_hash_table_unref(b->gkey_index);
}

/* Workload rank of global rank g, or -1 when g was not imported. */
static gint local_rank(const Build *b, gint64 g)
{
  gint lo = 0, hi = (gint)b->n - 1;
  while (lo <= hi) {
    gint mid = (lo + hi) / 2;
    if (b->global[mid] == g)
      return mid;
    if (b->global[mid] < g)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return -1;
}

/* Interns a member list of workload ranks; returns its key index. */
static guint32 gkey_intern(Build *b, GArray *local)
{
  GString *k = g_string_new(NULL);
  for (guint i = 0; i < local->len; i++)
    g_string_append_printf(k, i ? ",%u" : "%u",
                           g_array_index(local, guint32, i));
  gpointer v = g_hash_table_lookup(b->gkey_index, k->str);
  if (v != NULL) {
    g_string_free(k, TRUE);
    g_array_unref(local);
    return GPOINTER_TO_UINT(v) - 1;
  }
  g_ptr_array_add(b->gkeys, local);
  guint32 idx = b->gkeys->len - 1;
  g_hash_table_insert(b->gkey_index, g_string_free(k, FALSE),
                      GUINT_TO_POINTER(idx + 1));
  return idx;
}

/* Launch time of every op: its launch record's CPU time, else GPU start. */
static void resolve_launches(TraceRawRank *raw)
{
  GArray *l = raw->launches;
  g_array_sort(l, cmp_launch);
  const TraceRawLaunch *la = (const TraceRawLaunch *)(void *)l->data;
  for (guint i = 0; i < raw->ops->len; i++) {
    TraceRawOp *op = &g_array_index(raw->ops, TraceRawOp, i);
    op->launch_ns = op->ts_ns;
    if (op->corr < 0 || l->len == 0)
      continue;
    guint lo = 0, hi = l->len;
    while (lo < hi) {
      guint mid = lo + (hi - lo) / 2;
      if (la[mid].corr < op->corr)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo < l->len && la[lo].corr == op->corr)
      op->launch_ns = la[lo].ts_ns;
  }
}

/* ---- kernel shapes (issue 16 item 3) ------------------------------------
 *
 * A kernel's work comes from the CPU operator that launched it: the
 * kernel's correlation id finds its runtime launch; the launch's External
 * id finds the cpu_op with the same External id (how Kineto links them);
 * when no cpu_op carries that id (sampled or post-processed traces renumber
 * one side), the innermost cpu_op on the launch's thread whose time range
 * holds the launch's start is taken instead (PyTorch launches inside the
 * operator that issues the kernel, and the operators on one thread nest).
 * An operator that launches several kernels gives its whole work to the
 * longest of them (first in the file on a tie), its "main" kernel: GEMMs
 * come with split-K reductions or casts and layer norm backward with a
 * small second kernel; those keep class-only pricing.  The work's
 * FLOP/byte ratio, which decides the main kernel's clock sensitivity, is
 * the operator's.  Only kernels take work (memcpy and memset activities
 * are priced by their class: a host copy's bytes cross PCIe, not DRAM). */

/* Position of correlation id corr in the launch table (sorted), or -1. */
static gint64 launch_pos(const TraceRawRank *raw, gint64 corr)
{
  const GArray *l = raw->launches;
  const TraceRawLaunch *la = (const TraceRawLaunch *)(void *)l->data;
  guint lo = 0, hi = l->len;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    if (la[mid].corr < corr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < l->len && la[lo].corr == corr ? (gint64)lo : -1;
}

typedef struct {
  gint64 tid, ts, end;
  guint32 idx;
  gboolean is_op;
} SweepKey;

/* By thread, then time; at one time operators before launches, and the
 * outer (longer) operator first. */
static int cmp_sweep(const void *a, const void *b)
{
  const SweepKey *x = a, *y = b;
  if (x->tid != y->tid)
    return x->tid < y->tid ? -1 : 1;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  if (x->is_op != y->is_op)
    return x->is_op ? -1 : 1;
  if (x->end != y->end)
    return x->end > y->end ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int cmp_ext(const void *a, const void *b)
{
  const gint64 *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] > y[1]) - (x[1] < y[1]);
}

/* The cpu_op of every launch (G_MAXUINT32: none), launches in table order
 * (sorted by correlation id).  Returns a new array. */
static guint32 *launch_ops(const TraceRawRank *raw)
{
  guint nl = raw->launches->len, no = raw->cpu_ops->len;
  const TraceRawLaunch *la = (const TraceRawLaunch *)(void *)
                                 raw->launches->data;
  const TraceRawCpuOp *co = (const TraceRawCpuOp *)(void *)
                                raw->cpu_ops->data;
  guint32 *out = g_new(guint32, MAX(nl, 1));
  for (guint i = 0; i < nl; i++)
    out[i] = G_MAXUINT32;
  /* Containment: one sweep over (thread, time) with the stack of open
   * operators. */
  g_autofree SweepKey *keys = g_new(SweepKey, MAX(nl + no, 1));
  guint n = 0;
  for (guint i = 0; i < no; i++)
    keys[n++] = (SweepKey){co[i].tid, co[i].ts_ns, co[i].end_ns, i, TRUE};
  for (guint i = 0; i < nl; i++)
    keys[n++] = (SweepKey){la[i].tid, la[i].ts_ns, 0, i, FALSE};
  qsort(keys, n, sizeof *keys, cmp_sweep);
  g_autofree guint32 *stack = g_new(guint32, MAX(no, 1));
  guint depth = 0;
  gint64 tid = G_MININT64;
  for (guint i = 0; i < n; i++) {
    const SweepKey *k = &keys[i];
    if (k->tid != tid) {
      depth = 0;
      tid = k->tid;
    }
    while (depth > 0 && co[stack[depth - 1]].end_ns <= k->ts)
      depth--;
    if (k->is_op)
      stack[depth++] = k->idx;
    else if (depth > 0)
      out[k->idx] = stack[depth - 1];
  }
  /* External ids, where they match, win. */
  g_autofree gint64 *ext = g_new(gint64, 2 * MAX(no, 1));
  guint ne = 0;
  for (guint i = 0; i < no; i++)
    if (co[i].ext >= 0) {
      ext[2 * ne] = co[i].ext;
      ext[2 * ne + 1] = i;
      ne++;
    }
  qsort(ext, ne, 2 * sizeof(gint64), cmp_ext);
  for (guint i = 0; i < nl && ne > 0; i++) {
    if (la[i].ext < 0)
      continue;
    guint lo = 0, hi = ne;
    while (lo < hi) {
      guint mid = lo + (hi - lo) / 2;
      if (ext[2 * mid] < la[i].ext)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo < ne && ext[2 * lo] == la[i].ext)
      out[i] = (guint32)ext[2 * lo + 1];
  }
  return out;
}

/* Gives each operator's work to its main kernel (TraceRawOp.work).  Needs
 * the launch table sorted (resolve_launches). */
static void resolve_work(TraceRawRank *raw)
{
  for (guint k = 0; k < raw->ops->len; k++)
    g_array_index(raw->ops, TraceRawOp, k).work = G_MAXUINT32;
  if (raw->works->len == 0 || raw->launches->len == 0)
    return;
  g_autofree guint32 *lop = launch_ops(raw);
  guint no = raw->cpu_ops->len;
  g_autofree guint32 *main_op = g_new(guint32, MAX(no, 1));
  for (guint c = 0; c < no; c++)
    main_op[c] = G_MAXUINT32;
  for (guint k = 0; k < raw->ops->len; k++) {
    const TraceRawOp *op = &g_array_index(raw->ops, TraceRawOp, k);
    if (op->kind != TRACE_RAW_KERNEL || op->comm != G_MAXUINT32 ||
        op->corr < 0)
      continue;
    gint64 l = launch_pos(raw, op->corr);
    if (l < 0 || lop[l] == G_MAXUINT32)
      continue;
    guint32 c = lop[l];
    if (g_array_index(raw->cpu_ops, TraceRawCpuOp, c).work == G_MAXUINT32)
      continue;
    if (main_op[c] == G_MAXUINT32 ||
        op->dur_ns > g_array_index(raw->ops, TraceRawOp, main_op[c]).dur_ns)
      main_op[c] = k;
  }
  for (guint c = 0; c < no; c++)
    if (main_op[c] != G_MAXUINT32)
      g_array_index(raw->ops, TraceRawOp, main_op[c]).work =
          g_array_index(raw->cpu_ops, TraceRawCpuOp, c).work;
}

typedef struct {
  gint64 t;
  guint32 pos;
} TimeKey;

static int cmp_time(const void *a, const void *b)
{
  const TimeKey *x = a, *y = b;
  if (x->t != y->t)
    return x->t < y->t ? -1 : 1;
  return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Iteration ranges of a raw rank, sorted by start (new array). */
static GArray *step_ranges(const TraceRawRank *raw)
{
  GArray *s = g_array_new(FALSE, FALSE, sizeof(TraceRawRange));
  for (guint i = 0; i < raw->ranges->len; i++) {
    const TraceRawRange *r = &g_array_index(raw->ranges, TraceRawRange, i);
    if (r->step >= 0)
      g_array_append_val(s, *r);
  }
  g_array_sort(s, cmp_range_start);
  return s;
}

/* The step mode an options record asks for (resolving TRACE_STEP_AUTO). */
static TraceStep step_mode(const TraceImportOptions *opt)
{
  if (opt->step != TRACE_STEP_AUTO)
    return opt->step;
  if (opt->iteration == TRACE_ITERATION_ALL)
    return TRACE_STEP_ALL;
  return opt->iteration != 0 ? TRACE_STEP_INDEX : TRACE_STEP_MEDIAN;
}

/* Index of the step of median CPU duration among s (sorted by start): the
 * lower median, the earlier step on a tie. */
static guint median_step(const GArray *s)
{
  g_autofree TimeKey *k = g_new(TimeKey, MAX(s->len, 1));
  for (guint i = 0; i < s->len; i++) {
    const TraceRawRange *r = &g_array_index(s, TraceRawRange, i);
    k[i].t = r->end_ns - r->start_ns;
    k[i].pos = i;
  }
  qsort(k, s->len, sizeof *k, cmp_time);
  return k[(s->len - 1) / 2].pos;
}

static GArray *one_range(const TraceRawRange *r)
{
  GArray *a = g_array_new(FALSE, FALSE, sizeof(TraceRawRange));
  g_array_append_vals(a, r, 1);
  return a;
}

/* Picks the windows of every rank (see Window) and the label. */
static gboolean pick_windows(Build *b, Window *win, GString *label,
                             GError **error)
{
  const TraceImportOptions *opt = b->opt;
  guint n = b->n;
  for (guint i = 0; i < n; i++) {
    win[i].w0 = win[i].h0 = 1;
    win[i].w1 = win[i].h1 = 0; /* everything */
    win[i].step_tid = -1;
  }
  g_string_assign(label, "all");
  TraceStep mode = step_mode(opt);
  if (mode == TRACE_STEP_INDEX && opt->iteration < 0) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                "iteration %d: must be >= 0 (or TRACE_ITERATION_ALL)",
                opt->iteration);
    return FALSE;
  }
  if ((guint)mode > TRACE_STEP_INDEX) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                "step mode %d is not one of first, median, all, a number",
                (int)mode);
    return FALSE;
  }
  g_autoptr(GPtrArray) steps = g_ptr_array_new_with_free_func(
      (GDestroyNotify)g_array_unref);
  gint ref = -1;
  for (guint i = 0; i < n; i++) {
    GArray *s = step_ranges(b->rw[i].raw);
    if (ref < 0 && s->len > 0)
      ref = (gint)i;
    g_ptr_array_add(steps, s);
  }
  if (mode == TRACE_STEP_ALL) {
    /* Every GPU event; the host streams from the first step's start to
     * the last step's end, with a marker at each step's start. */
    for (guint i = 0; i < n; i++) {
      GArray *s = g_ptr_array_index(steps, i);
      if (s->len == 0)
        continue;
      win[i].h0 = g_array_index(s, TraceRawRange, 0).start_ns;
      win[i].h1 = g_array_index(s, TraceRawRange, s->len - 1).end_ns;
      for (guint k = 1; k < s->len; k++)
        win[i].h1 = MAX(win[i].h1, g_array_index(s, TraceRawRange, k).end_ns);
      win[i].step_tid = g_array_index(s, TraceRawRange, 0).tid;
      win[i].steps = g_array_ref(s);
    }
    return TRUE;
  }
  if (ref < 0) {
    if (mode == TRACE_STEP_INDEX || mode == TRACE_STEP_NUMBER) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                  "step %s: %s marks no steps (no ProfilerStep#N or NVTX "
                  "iteration ranges); import all events instead",
                  mode == TRACE_STEP_NUMBER ? "number" : "index",
                  b->rw[0].raw->path);
      return FALSE;
    }
    return TRUE;
  }
  GArray *rs = g_ptr_array_index(steps, ref);
  guint idx = 0;
  switch (mode) {
  case TRACE_STEP_FIRST:
    idx = 0;
    break;
  case TRACE_STEP_MEDIAN:
    idx = median_step(rs);
    break;
  case TRACE_STEP_NUMBER:
    for (idx = 0; idx < rs->len; idx++)
      if (g_array_index(rs, TraceRawRange, idx).step == opt->step_number)
        break;
    if (idx == rs->len) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                  "step %" G_GINT64_FORMAT " does not exist: %s marks %u "
                  "steps (%" G_GINT64_FORMAT " to %" G_GINT64_FORMAT ")",
                  opt->step_number, b->rw[ref].raw->path, rs->len,
                  g_array_index(rs, TraceRawRange, 0).step,
                  g_array_index(rs, TraceRawRange, rs->len - 1).step);
      return FALSE;
    }
    break;
  default: /* TRACE_STEP_INDEX */
    if ((guint)opt->iteration >= rs->len) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                  "iteration %d out of range: %s marks %u iterations "
                  "(steps %" G_GINT64_FORMAT " to %" G_GINT64_FORMAT ")",
                  opt->iteration, b->rw[ref].raw->path, rs->len,
                  g_array_index(rs, TraceRawRange, 0).step,
                  g_array_index(rs, TraceRawRange, rs->len - 1).step);
      return FALSE;
    }
    idx = (guint)opt->iteration;
    break;
  }
  gint64 number = g_array_index(rs, TraceRawRange, idx).step;
  g_string_printf(label, "step %" G_GINT64_FORMAT, number);
  for (guint i = 0; i < n; i++) {
    GArray *s = g_ptr_array_index(steps, i);
    const TraceRawRange *hit = NULL;
    for (guint k = 0; k < s->len && hit == NULL; k++)
      if (g_array_index(s, TraceRawRange, k).step == number)
        hit = &g_array_index(s, TraceRawRange, k);
    if (hit == NULL && s->len > idx) {
      hit = &g_array_index(s, TraceRawRange, idx);
      trace_warn(opt, "%s: no step %" G_GINT64_FORMAT "; using its "
                 "step %u in time order (step %" G_GINT64_FORMAT ") instead",
                 b->rw[i].raw->path, number, idx, hit->step);
    }
    if (hit == NULL) {
      if (s->len == 0) {
        trace_warn(opt, "%s marks no iterations; importing all its events",
                   b->rw[i].raw->path);
        continue;
      }
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                  "step %" G_GINT64_FORMAT " (%u-th in time order) is out "
                  "of range for %s (%u steps)", number, idx,
                  b->rw[i].raw->path, s->len);
      return FALSE;
    }
    win[i].w0 = win[i].h0 = hit->start_ns;
    win[i].w1 = win[i].h1 = hit->end_ns;
    win[i].step_tid = hit->tid;
    win[i].steps = one_range(hit);
  }
  return TRUE;
}

typedef struct {
  gint64 device, stream;
} StreamKey;

static int cmp_stream_key(const void *a, const void *b)
{
  const StreamKey *x = a, *y = b;
  if (x->device != y->device)
    return x->device < y->device ? -1 : 1;
  return x->stream < y->stream ? -1 : x->stream > y->stream;
}

/* Sorting context for ops of one rank (qsort_r-free: a static-free
 * approach using a key array). */
typedef struct {
  guint32 stream;
  gint64 ts, corr;
  guint32 raw;
} OrderKey;

static int cmp_order(const void *a, const void *b)
{
  const OrderKey *x = a, *y = b;
  if (x->stream != y->stream)
    return x->stream < y->stream ? -1 : 1;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  if (x->corr != y->corr)
    return x->corr < y->corr ? -1 : 1;
  return x->raw < y->raw ? -1 : x->raw > y->raw;
}

typedef struct {
  gint64 corr;
  guint32 pos;
} CorrKey;

static int cmp_corr(const void *a, const void *b)
{
  const CorrKey *x = a, *y = b;
  if (x->corr != y->corr)
    return x->corr < y->corr ? -1 : 1;
  return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Steps 2-5 for workload rank i: selection, phases, streams, order, deps. */
static gboolean analyse_rank(Build *b, guint i, gint64 w0, gint64 w1,
                             GError **error)
{
  RankWork *rw = &b->rw[i];
  TraceRawRank *raw = rw->raw;
  const TraceImportOptions *opt = b->opt;
  resolve_launches(raw);
  resolve_work(raw);

  /* Selection. */
  g_autoptr(GArray) keys = g_array_new(FALSE, FALSE, sizeof(OrderKey));
  g_autoptr(GArray) skeys = g_array_new(FALSE, FALSE, sizeof(StreamKey));
  for (guint k = 0; k < raw->ops->len; k++) {
    const TraceRawOp *op = &g_array_index(raw->ops, TraceRawOp, k);
    if (w0 <= w1 && (op->launch_ns < w0 || op->launch_ns >= w1))
      continue;
    OrderKey ok = {0, op->ts_ns, op->corr, k};
    g_array_append_val(keys, ok);
    StreamKey sk = {op->device, op->stream};
    g_array_append_val(skeys, sk);
  }
  if (keys->len == 0) {
    if (raw->ops->len == 0)
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                  "%s: no GPU activity (kernels, memcpys or memsets)",
                  raw->path);
    else
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                  "%s: the selected iteration holds no GPU activity",
                  raw->path);
    return FALSE;
  }

  /* Streams: distinct (device, stream) in ascending order. */
  g_autoptr(GArray) streams = g_array_copy(skeys);
  g_array_sort(streams, cmp_stream_key);
  guint ns = 0;
  for (guint k = 0; k < streams->len; k++)
    if (ns == 0 || cmp_stream_key(&g_array_index(streams, StreamKey, k),
                                  &g_array_index(streams, StreamKey,
                                                 ns - 1)) != 0)
      g_array_index(streams, StreamKey, ns++) =
          g_array_index(streams, StreamKey, k);
  g_array_set_size(streams, ns);
  if (ns > SIM_MAX_STREAMS) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_UNSUPPORTED,
                "%s: %u (device, stream) pairs carry GPU activity; at most "
                "%d streams per rank are supported", raw->path, ns,
                SIM_MAX_STREAMS);
    return FALSE;
  }
  guint n_devices = 0;
  for (guint k = 0; k < ns; k++)
    if (k == 0 || g_array_index(streams, StreamKey, k).device !=
                      g_array_index(streams, StreamKey, k - 1).device)
      n_devices++;
  if (n_devices > 1)
    trace_warn(opt, "%s: GPU activity on %u devices; the rank replays it "
               "all on one GPU", raw->path, n_devices);
  gint64 dev0 = g_array_index(streams, StreamKey, 0).device;
  rw->device = g_hash_table_lookup(raw->devices, &dev0);
  for (guint k = 0; k < keys->len; k++) {
    const StreamKey *sk = &g_array_index(skeys, StreamKey, k);
    guint lo = 0, hi = ns;
    while (lo < hi) {
      guint mid = (lo + hi) / 2;
      if (cmp_stream_key(&g_array_index(streams, StreamKey, mid), sk) < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
    g_array_index(keys, OrderKey, k).stream = lo;
  }
  g_array_sort(keys, cmp_order);
  guint32 n = keys->len;
  rw->n_streams = ns;
  rw->stream_off = g_new0(guint32, ns + 1);
  rw->sel = g_array_sized_new(FALSE, TRUE, sizeof(Sel), n);
  g_array_set_size(rw->sel, n);
  for (guint32 k = 0; k < n; k++) {
    const OrderKey *ok = &g_array_index(keys, OrderKey, k);
    Sel *s = &g_array_index(rw->sel, Sel, k);
    s->raw = ok->raw;
    s->stream = ok->stream;
    rw->stream_off[ok->stream + 1]++;
  }
  for (guint s = 0; s < ns; s++)
    rw->stream_off[s + 1] += rw->stream_off[s];
  rw->n_gpu = n;
  rw->ns_gpu = ns;

  /* Phases: sweep launches in time order against ranges sorted by start,
   * keeping per phase the furthest end of the ranges begun so far. */
  g_autoptr(GArray) pr = g_array_new(FALSE, FALSE, sizeof(TraceRawRange));
  for (guint k = 0; k < raw->ranges->len; k++) {
    const TraceRawRange *r = &g_array_index(raw->ranges, TraceRawRange, k);
    if (r->phase >= 0 && r->phase < SIM_PHASE_COUNT)
      g_array_append_val(pr, *r);
  }
  g_array_sort(pr, cmp_range_start);
  SimPhase dflt = pr->len > 0 ? SIM_PHASE_FORWARD : SIM_PHASE_OTHER;
  g_autofree TimeKey *tk = g_new(TimeKey, n);
  for (guint32 k = 0; k < n; k++) {
    const Sel *s = &g_array_index(rw->sel, Sel, k);
    tk[k].t = g_array_index(raw->ops, TraceRawOp, s->raw).launch_ns;
    tk[k].pos = k;
  }
  qsort(tk, n, sizeof *tk, cmp_time);
  gint64 reach[SIM_PHASE_COUNT];
  for (guint p = 0; p < SIM_PHASE_COUNT; p++)
    reach[p] = G_MININT64;
  guint ri = 0;
  for (guint32 k = 0; k < n; k++) {
    gint64 t = tk[k].t;
    for (; ri < pr->len &&
           g_array_index(pr, TraceRawRange, ri).start_ns <= t; ri++) {
      const TraceRawRange *r = &g_array_index(pr, TraceRawRange, ri);
      reach[r->phase] = MAX(reach[r->phase], r->end_ns);
    }
    SimPhase ph = dflt;
    if (reach[SIM_PHASE_OPTIMIZER] > t)
      ph = SIM_PHASE_OPTIMIZER;
    else if (reach[SIM_PHASE_BACKWARD] > t)
      ph = SIM_PHASE_BACKWARD;
    else if (reach[SIM_PHASE_FORWARD] > t)
      ph = SIM_PHASE_FORWARD;
    g_array_index(rw->sel, Sel, tk[k].pos).phase = (guint8)ph;
  }

  /* Recorded cross-stream waits. */
  rw->deps = g_array_new(FALSE, FALSE, sizeof(guint32) * 2);
  if (raw->syncs->len == 0)
    return TRUE;
  /* Per stream, its ops by correlation id. */
  g_autofree CorrKey *ck = g_new(CorrKey, n);
  for (guint32 k = 0; k < n; k++) {
    const Sel *s = &g_array_index(rw->sel, Sel, k);
    ck[k].corr = g_array_index(raw->ops, TraceRawOp, s->raw).corr;
    ck[k].pos = k;
  }
  for (guint s = 0; s < ns; s++)
    qsort(ck + rw->stream_off[s], rw->stream_off[s + 1] - rw->stream_off[s],
          sizeof *ck, cmp_corr);
  guint dropped = 0;
  for (guint k = 0; k < raw->syncs->len; k++) {
    const TraceRawSync *sy = &g_array_index(raw->syncs, TraceRawSync, k);
    StreamKey cs = {sy->device, sy->stream}, ps = {sy->device,
                                                   sy->wait_on_stream};
    gint c_stream = -1, p_stream = -1;
    for (guint s = 0; s < ns; s++) {
      if (cmp_stream_key(&g_array_index(streams, StreamKey, s), &cs) == 0)
        c_stream = (gint)s;
      if (cmp_stream_key(&g_array_index(streams, StreamKey, s), &ps) == 0)
        p_stream = (gint)s;
    }
    if (c_stream < 0 || p_stream < 0 || c_stream == p_stream)
      continue;
    /* consumer: smallest corr > sy->corr on c_stream */
    CorrKey *ca = ck + rw->stream_off[c_stream];
    guint cn = rw->stream_off[c_stream + 1] - rw->stream_off[c_stream];
    guint lo = 0, hi = cn;
    while (lo < hi) {
      guint mid = (lo + hi) / 2;
      if (ca[mid].corr <= sy->corr)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo >= cn || ca[lo].corr < 0)
      continue;
    guint32 consumer = ca[lo].pos;
    /* producer: largest corr < record_corr on p_stream */
    CorrKey *pa = ck + rw->stream_off[p_stream];
    guint pn = rw->stream_off[p_stream + 1] - rw->stream_off[p_stream];
    lo = 0;
    hi = pn;
    while (lo < hi) {
      guint mid = (lo + hi) / 2;
      if (pa[mid].corr < sy->record_corr)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo == 0 || pa[lo - 1].corr < 0)
      continue;
    guint32 producer = pa[lo - 1].pos;
    const TraceRawOp *co = &g_array_index(
        raw->ops, TraceRawOp, g_array_index(rw->sel, Sel, consumer).raw);
    const TraceRawOp *po = &g_array_index(
        raw->ops, TraceRawOp, g_array_index(rw->sel, Sel, producer).raw);
    if (po->ts_ns + po->dur_ns > co->ts_ns + 1000) {
      dropped++;
      continue;
    }
    guint32 pair[2] = {consumer, producer};
    g_array_append_vals(rw->deps, pair, 1);
  }
  if (dropped > 0)
    trace_warn(opt, "%s: %u recorded stream waits contradict the recorded "
               "times and were ignored", raw->path, dropped);
  return TRUE;
}

/* ---- host streams --------------------------------------------------------
 *
 * The CPU side of a rank (issue 16).  Each CPU thread with runtime calls in
 * the host window becomes one host stream after the GPU streams; its ops
 * (SIM_OP_HOST) last what the thread spent, so the sum of a stream's host
 * ops up to any call is the time from the window's start to that call's
 * end.  Only two kinds of calls need ops of their own:
 *
 *  - a launch (kernel, copy or memset) whose GPU op was imported: a host op
 *    from the previous op's end to the call's end, which the GPU op waits
 *    for (through its correlation id);
 *  - a synchronising call that did wait: cudaStreamSynchronize,
 *    cudaEventSynchronize, cudaDeviceSynchronize, or a copy that ended
 *    before its call returned (a synchronous cudaMemcpy, a copy to pageable
 *    memory: PyTorch's .item()).  It waited when a GPU op launched before
 *    it (smaller correlation id) ended while it ran; that op is the one it
 *    waited for (cudaEventSynchronize), the last op launched before it on
 *    that op's stream (cudaStreamSynchronize, copies), or the last op
 *    launched before it on every stream (cudaDeviceSynchronize).  It is a
 *    host op for the CPU time before the call (HN_GAP; a synchronous copy
 *    waits for it), then a host op that waits for those GPU ops and lasts
 *    what the call took after the last of them ended.
 *
 * Every other call (cudaEventRecord, cudaStreamWaitEvent, queries, launches
 * of ops outside the import) is folded into the CPU time before the next
 * op, and a last op (HN_TAIL) runs to the window's end.  Replayed at the
 * recorded clocks, each host op then ends when its call ended, and a GPU op
 * starts no earlier than its launch returned; slower kernels delay the
 * host only through the synchronisations.  With TRACE_STEP_ALL a marker
 * named after the step opens each step on the stream of the thread that
 * records the steps.
 *
 * Every dependency goes from a smaller correlation id to a larger one (or
 * from a launch to its own GPU op), so the graph has no cycle when the
 * trace is consistent; emit_rank checks and falls back to GPU order when a
 * damaged trace makes one.
 */

typedef struct {
  gint64 tid, ts, corr;
  guint32 idx;
} CallKey;

static int cmp_call(const void *a, const void *b)
{
  const CallKey *x = a, *y = b;
  if (x->tid != y->tid)
    return x->tid < y->tid ? -1 : 1;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  if (x->corr != y->corr)
    return x->corr < y->corr ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* What the host builder of one rank looks things up in. */
typedef struct {
  RankWork *rw;
  TraceRawRank *raw;
  CorrKey *by_corr;      /* selected GPU ops with a correlation id */
  guint n_corr;
  CorrKey *stream_corr;  /* all selected GPU ops, per stream by corr
                            (stream s: [stream_off[s], stream_off[s+1])) */
  TimeKey *by_end;       /* selected GPU ops with a correlation id, by end */
  guint n_end;
  gint64 *all_corr;      /* every GPU op of the file, sorted */
  guint n_all;
} HostCtx;

static const TraceRawOp *sel_raw(const HostCtx *h, guint32 pos)
{
  const Sel *s = &g_array_index(h->rw->sel, Sel, pos);
  return &g_array_index(h->raw->ops, TraceRawOp, s->raw);
}

static gint64 sel_end(const HostCtx *h, guint32 pos)
{
  const TraceRawOp *o = sel_raw(h, pos);
  return o->ts_ns + o->dur_ns;
}

/* The selected GPU op launched by correlation id corr, or G_MAXUINT32. */
static guint32 gpu_of_corr(const HostCtx *h, gint64 corr)
{
  guint lo = 0, hi = h->n_corr;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    if (h->by_corr[mid].corr < corr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < h->n_corr && h->by_corr[lo].corr == corr ? h->by_corr[lo].pos
                                                        : G_MAXUINT32;
}

static gboolean file_has_corr(const HostCtx *h, gint64 corr)
{
  guint lo = 0, hi = h->n_all;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    if (h->all_corr[mid] < corr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < h->n_all && h->all_corr[lo] == corr;
}

/* The op of GPU stream s launched last before correlation id corr, or
 * G_MAXUINT32. */
static guint32 last_before(const HostCtx *h, guint s, gint64 corr)
{
  const CorrKey *a = h->stream_corr + h->rw->stream_off[s];
  guint n = h->rw->stream_off[s + 1] - h->rw->stream_off[s];
  guint lo = 0, hi = n;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    if (a[mid].corr < corr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo > 0 && a[lo - 1].corr >= 0 ? a[lo - 1].pos : G_MAXUINT32;
}

/* The GPU op a call over [t0, t1] with correlation id corr waited for: the
 * latest-ending op launched before it that ended inside the call, or
 * G_MAXUINT32 when none did (the call did not wait). */
static guint32 released_by(const HostCtx *h, gint64 t0, gint64 t1,
                           gint64 corr)
{
  guint lo = 0, hi = h->n_end;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    if (h->by_end[mid].t <= t1)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (guint k = lo; k-- > 0 && h->by_end[k].t >= t0;) {
    guint32 pos = h->by_end[k].pos;
    if (sel_raw(h, pos)->corr < corr)
      return pos;
  }
  return G_MAXUINT32;
}

/* Appends a host entry on stream `stream`; returns its position. */
static guint32 host_add(RankWork *rw, guint stream, guint8 kind,
                        guint32 name, gint64 dur_ns)
{
  Sel s = {0};
  s.stream = stream;
  s.phase = SIM_PHASE_OTHER;
  s.host = kind;
  s.hname = name;
  s.host_ns = MAX(dur_ns, 0);
  g_array_append_val(rw->sel, s);
  return rw->sel->len - 1;
}

static void add_dep(RankWork *rw, guint32 consumer, guint32 producer)
{
  guint32 pair[2] = {consumer, producer};
  g_array_append_vals(rw->deps, pair, 1);
}

/* The host stream of one thread: calls[0..n) in time order.  Returns FALSE
 * (nothing added) when the thread neither launches an imported op nor
 * synchronises nor records the steps. */
static gboolean host_thread(Build *b, HostCtx *h, guint stream,
                            const CallKey *calls, guint n, const Window *win,
                            gint64 h0, gint64 h1, gboolean step_thread)
{
  RankWork *rw = h->rw;
  TraceRawRank *raw = h->raw;
  guint32 first = rw->sel->len, first_dep = rw->deps->len;
  guint64 n_host = 0, n_sync = 0, n_nowhere = 0;
  gboolean anchored = step_thread;
  const GArray *steps = step_thread ? win->steps : NULL;
  guint k_step = 0;
  gint64 prev = h0;
  for (guint c = 0; c <= n; c++) {
    /* Step markers due before this call (or, after the last, all left). */
    while (steps != NULL && k_step < steps->len &&
           (c == n || g_array_index(steps, TraceRawRange, k_step).start_ns <=
                          calls[c].ts)) {
      gint64 s0 = g_array_index(steps, TraceRawRange, k_step).start_ns;
      if (s0 > prev) {
        host_add(rw, stream, HS_OP, HN_GAP, s0 - prev);
        prev = s0;
      }
      guint32 m = host_add(rw, stream, HS_STEP, 0, 0);
      g_array_index(rw->sel, Sel, m).peer = k_step++;
    }
    if (c == n)
      break;
    const TraceRawLaunch *l = &g_array_index(raw->launches, TraceRawLaunch,
                                             calls[c].idx);
    gint64 end = l->ts_ns + MAX(l->dur_ns, 0);
    TraceCall call = (TraceCall)l->call;
    if (call == TRACE_CALL_LAUNCH || call == TRACE_CALL_MEMCPY ||
        call == TRACE_CALL_MEMSET) {
      guint32 g = gpu_of_corr(h, l->corr);
      if (g == G_MAXUINT32) {
        n_nowhere += !file_has_corr(h, l->corr);
        continue;
      }
      gint64 g_end = sel_end(h, g);
      if (call == TRACE_CALL_MEMCPY && g_end <= end && g_end >= l->ts_ns) {
        /* A synchronous copy: launched at the call's start, waited for. */
        guint32 gap = host_add(rw, stream, HS_OP, HN_GAP, l->ts_ns - prev);
        prev = MAX(prev, l->ts_ns);
        add_dep(rw, g, gap);
        guint32 sy = host_add(rw, stream, HS_OP, l->name,
                              end - MAX(prev, g_end));
        guint gs = g_array_index(rw->sel, Sel, g).stream;
        add_dep(rw, sy, last_before(h, gs, l->corr + 1));
        n_host += 2;
        n_sync++;
      } else {
        guint32 op = host_add(rw, stream, HS_OP, l->name, end - prev);
        add_dep(rw, g, op);
        n_host++;
      }
      prev = MAX(prev, end);
      anchored = TRUE;
    } else if (call == TRACE_CALL_SYNC_STREAM ||
               call == TRACE_CALL_SYNC_EVENT ||
               call == TRACE_CALL_SYNC_DEVICE) {
      guint32 r = released_by(h, l->ts_ns, end, l->corr);
      if (r == G_MAXUINT32)
        continue; /* it did not wait: CPU time */
      guint32 prod[SIM_MAX_STREAMS];
      guint np = 0;
      if (call == TRACE_CALL_SYNC_EVENT) {
        prod[np++] = r;
      } else if (call == TRACE_CALL_SYNC_STREAM) {
        prod[np++] = last_before(h, g_array_index(rw->sel, Sel, r).stream,
                                 l->corr);
      } else {
        for (guint s = 0; s < rw->ns_gpu; s++) {
          guint32 p = last_before(h, s, l->corr);
          if (p != G_MAXUINT32)
            prod[np++] = p;
        }
      }
      gint64 last_end = G_MININT64;
      for (guint k = 0; k < np; k++)
        last_end = MAX(last_end, sel_end(h, prod[k]));
      host_add(rw, stream, HS_OP, HN_GAP, l->ts_ns - prev);
      prev = MAX(prev, l->ts_ns);
      guint32 sy = host_add(rw, stream, HS_OP, l->name,
                            end - MAX(prev, last_end));
      for (guint k = 0; k < np; k++)
        add_dep(rw, sy, prod[k]);
      prev = MAX(prev, end);
      n_host += 2;
      n_sync++;
      anchored = TRUE;
    }
  }
  if (!anchored) {
    g_array_set_size(rw->sel, first);
    g_array_set_size(rw->deps, first_dep);
    b->nowhere += n_nowhere;
    return FALSE;
  }
  if (h1 > prev)
    host_add(rw, stream, HS_OP, HN_TAIL, h1 - prev);
  b->host_syncs += n_sync;
  b->nowhere += n_nowhere;
  return TRUE;
}

/* Adds rank i's host streams (see above) to its selection. */
static gboolean host_streams(Build *b, guint i, const Window *win,
                             GError **error)
{
  (void)error;
  RankWork *rw = &b->rw[i];
  TraceRawRank *raw = rw->raw;
  guint32 n = rw->n_gpu;
  b->bad_durs += raw->bad_host_durs;
  raw->bad_host_durs = 0;
  b->gpu_ops += n;
  HostCtx h = {rw, raw, NULL, 0, NULL, NULL, 0, NULL, 0};
  h.by_corr = g_new(CorrKey, MAX(n, 1));
  h.stream_corr = g_new(CorrKey, MAX(n, 1));
  h.by_end = g_new(TimeKey, MAX(n, 1));
  for (guint32 k = 0; k < n; k++) {
    const TraceRawOp *o = sel_raw(&h, k);
    h.stream_corr[k] = (CorrKey){o->corr, k};
    if (o->corr < 0)
      continue;
    h.by_corr[h.n_corr++] = (CorrKey){o->corr, k};
    h.by_end[h.n_end++] = (TimeKey){o->ts_ns + o->dur_ns, k};
  }
  qsort(h.by_corr, h.n_corr, sizeof *h.by_corr, cmp_corr);
  qsort(h.by_end, h.n_end, sizeof *h.by_end, cmp_time);
  for (guint s = 0; s < rw->ns_gpu; s++)
    qsort(h.stream_corr + rw->stream_off[s],
          rw->stream_off[s + 1] - rw->stream_off[s], sizeof *h.stream_corr,
          cmp_corr);
  h.n_all = raw->ops->len;
  h.all_corr = g_new(gint64, MAX(h.n_all, 1));
  for (guint k = 0; k < h.n_all; k++)
    h.all_corr[k] = g_array_index(raw->ops, TraceRawOp, k).corr;
  qsort(h.all_corr, h.n_all, sizeof *h.all_corr, cmp_i64);

  /* The calls in the window, by thread and time. */
  gboolean all = win->h0 > win->h1;
  g_autoptr(GArray) calls = g_array_new(FALSE, FALSE, sizeof(CallKey));
  gint64 h0 = G_MAXINT64, h1 = G_MININT64;
  for (guint k = 0; k < raw->launches->len; k++) {
    const TraceRawLaunch *l = &g_array_index(raw->launches, TraceRawLaunch,
                                             k);
    if (!all && (l->ts_ns < win->h0 || l->ts_ns >= win->h1))
      continue;
    CallKey ck = {l->tid, l->ts_ns, l->corr, k};
    g_array_append_val(calls, ck);
    h0 = MIN(h0, l->ts_ns);
    h1 = MAX(h1, l->ts_ns + MAX(l->dur_ns, 0));
  }
  if (win->steps != NULL && win->steps->len > 0) {
    h0 = MIN(h0, g_array_index(win->steps, TraceRawRange, 0).start_ns);
    for (guint k = 0; k < win->steps->len; k++)
      h1 = MAX(h1, g_array_index(win->steps, TraceRawRange, k).end_ns);
  }
  if (!all) {
    h0 = win->h0;
    h1 = win->h1;
  }
  g_array_sort(calls, cmp_call);
  const CallKey *ck = (const CallKey *)(void *)calls->data;
  gboolean markers = win->steps != NULL && step_mode(b->opt) == TRACE_STEP_ALL;
  gboolean step_done = !markers;
  guint ns = rw->ns_gpu, skipped = 0;
  for (guint c0 = 0; c0 < calls->len || !step_done;) {
    guint c1 = c0;
    gint64 tid = c0 < calls->len ? ck[c0].tid : win->step_tid;
    while (c1 < calls->len && ck[c1].tid == tid)
      c1++;
    /* The thread that records the steps gets their markers; when it makes
     * no call, a stream of its own after the others. */
    gboolean st = !step_done && (tid == win->step_tid || c0 >= calls->len);
    if (ns >= SIM_MAX_STREAMS) {
      skipped++;
    } else if (host_thread(b, &h, ns, c1 > c0 ? ck + c0 : NULL, c1 - c0, win,
                           h0, h1, st)) {
      ns++;
      step_done |= st;
    }
    if (c0 >= calls->len)
      break;
    c0 = c1;
  }
  if (skipped > 0)
    trace_warn(b->opt, "%s: %u CPU threads left out (at most %d streams per "
               "rank); their launches are not modelled", raw->path, skipped,
               SIM_MAX_STREAMS);
  /* Layout: the new streams' offsets. */
  rw->stream_off = g_renew(guint32, rw->stream_off, ns + 1);
  for (guint s = rw->ns_gpu + 1; s <= ns; s++)
    rw->stream_off[s] = rw->stream_off[s - 1];
  for (guint32 k = n; k < rw->sel->len; k++)
    rw->stream_off[g_array_index(rw->sel, Sel, k).stream + 1]++;
  for (guint s = rw->ns_gpu + 1; s <= ns; s++)
    rw->stream_off[s] = MAX(rw->stream_off[s], rw->stream_off[s - 1]);
  rw->n_streams = ns;
  /* GPU ops that wait for no launch. */
  g_autofree gboolean *launched = g_new0(gboolean, MAX(n, 1));
  const guint32 *dp = (const guint32 *)(void *)rw->deps->data;
  for (guint k = 0; k < rw->deps->len; k++)
    if (dp[2 * k] < n && dp[2 * k + 1] >= n)
      launched[dp[2 * k]] = TRUE;
  for (guint32 k = 0; k < n; k++)
    b->orphans += !launched[k];
  for (guint32 k = n; k < rw->sel->len; k++)
    b->host_ops += g_array_index(rw->sel, Sel, k).host == HS_OP;
  g_free(h.by_corr);
  g_free(h.stream_corr);
  g_free(h.by_end);
  g_free(h.all_corr);
  return TRUE;
}

/* The import's warnings about the host side. */
static void host_warnings(Build *b)
{
  if (b->opt->gpu_only)
    return;
  if (b->orphans > 0)
    trace_warn(b->opt, "%" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " GPU "
               "ops have no runtime launch in the trace; they replay in GPU "
               "order only", b->orphans, b->gpu_ops);
  if (b->nowhere > 0)
    trace_warn(b->opt, "%" G_GUINT64_FORMAT " runtime launches name a "
               "correlation id with no GPU activity in the file; taken as CPU "
               "time", b->nowhere);
  if (b->bad_durs > 0)
    trace_warn(b->opt, "%" G_GUINT64_FORMAT " runtime calls have a negative "
               "duration; taken as 0", b->bad_durs);
}

/* Kernel shapes: the coverage in the provenance and the warnings. */
static void shape_report(const Build *b, GHashTable *pv)
{
  double cover = b->kernel_ns > 0
                     ? (double)b->shaped_ns / (double)b->kernel_ns : 0.0;
  g_hash_table_insert(pv, g_strdup("shape_coverage"),
                      g_strdup_printf("%.4f", cover));
  g_hash_table_insert(pv, g_strdup("shape_kernels"),
                      g_strdup_printf("%" G_GUINT64_FORMAT " of %"
                                      G_GUINT64_FORMAT, b->shaped_kernels,
                                      b->n_kernels));
  guint64 bad = 0, priced = 0;
  const char *first = NULL;
  for (guint i = 0; i < b->n; i++) {
    const TraceRawRank *r = b->rw[i].raw;
    bad += r->bad_shapes;
    priced += r->works->len;
    if (first == NULL && r->bad_shape_op != NULL)
      first = r->bad_shape_op;
  }
  if (bad > 0)
    trace_warn(b->opt, "%" G_GUINT64_FORMAT " CPU operators have unusable "
               "shapes (wrong rank, non-numeric or inconsistent dims; the "
               "first: %s); their kernels keep class-only pricing", bad,
               first);
  /* Only for traces that record shapes (record_shapes=True): the others
   * are priced by class as before, which `trace info` reports. */
  if (priced + bad > 0 && b->n_kernels > 0 &&
      b->shaped_kernels < b->n_kernels)
    trace_warn(b->opt, "kernel shapes: %.1f%% of kernel time (%"
               G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " kernels) has "
               "FLOPs and bytes from its operator's recorded shapes; the "
               "rest is priced by class fractions", 100.0 * cover,
               b->shaped_kernels, b->n_kernels);
}

/* Step 6, first half: how each communication op of rank i replays. */
static void resolve_comm(Build *b, guint i, gboolean complete)
{
  RankWork *rw = &b->rw[i];
  TraceRawRank *raw = rw->raw;
  for (guint32 k = 0; k < rw->sel->len; k++) {
    Sel *s = &g_array_index(rw->sel, Sel, k);
    s->cm = CM_NONE;
    if (s->host != HS_GPU)
      continue;
    const TraceRawOp *op = &g_array_index(raw->ops, TraceRawOp, s->raw);
    if (op->comm == G_MAXUINT32)
      continue;
    const TraceRawComm *c = &g_array_index(raw->comms, TraceRawComm,
                                           op->comm);
    s->cm = CM_SOLO;
    /* Members (global ranks), from the op or its process group. */
    const char *ml = c->ranks;
    if (ml == NULL && c->pg_name != NULL)
      ml = g_hash_table_lookup(raw->pg_ranks, c->pg_name);
    g_autoptr(GArray) members = parse_members(ml);
    if (members == NULL && c->group_size > 0 && complete &&
        (guint64)c->group_size == b->n) {
      members = g_array_new(FALSE, FALSE, sizeof(gint64));
      for (guint r = 0; r < b->n; r++)
        g_array_append_val(members, b->global[r]);
    }
    if (c->kind == TRACE_COMM_COLL) {
      if (members == NULL)
        continue;
      GArray *local = g_array_new(FALSE, FALSE, sizeof(guint32));
      gboolean all = TRUE, self = FALSE;
      for (guint m = 0; m < members->len && all; m++) {
        gint l = local_rank(b, g_array_index(members, gint64, m));
        if (l < 0)
          all = FALSE;
        else {
          guint32 lu = (guint32)l;
          g_array_append_val(local, lu);
          self |= lu == i;
        }
      }
      if (!all || !self || local->len < 2) {
        g_array_unref(local);
        continue;
      }
      s->cm = CM_COLL;
      s->gkey = gkey_intern(b, local);
    } else if (c->kind == TRACE_COMM_SEND || c->kind == TRACE_COMM_RECV) {
      if (c->peer < 0)
        continue;
      gint64 peer = c->peer;
      /* Src/Dst Rank are process-group ranks: map through the members. */
      if (members != NULL) {
        if ((guint64)peer >= members->len)
          continue;
        peer = g_array_index(members, gint64, peer);
      }
      gint l = local_rank(b, peer);
      if (l < 0 || (guint)l == i)
        continue;
      s->cm = c->kind == TRACE_COMM_SEND ? CM_SEND : CM_RECV;
      s->peer = (guint32)l;
    }
  }
}

/* Step 6, second half: matched ops of a group (or p2p pair) that do not
 * pair up across ranks fall back to recorded durations. */
static void check_matching(Build *b)
{
  guint ng = b->gkeys->len;
  guint n = b->n;
  g_autofree gint64 *cnt = g_new0(gint64, (gsize)MAX(ng, 1) * n);
  g_autofree gint64 *p2p = g_new0(gint64, (gsize)n * n);
  for (guint i = 0; i < n; i++) {
    GArray *sel = b->rw[i].sel;
    for (guint32 k = 0; k < sel->len; k++) {
      const Sel *s = &g_array_index(sel, Sel, k);
      if (s->cm == CM_COLL)
        cnt[(gsize)s->gkey * n + i]++;
      else if (s->cm == CM_SEND)
        p2p[(gsize)i * n + s->peer]++;
      else if (s->cm == CM_RECV)
        p2p[(gsize)s->peer * n + i]--;
    }
  }
  g_autofree gboolean *bad_g = g_new0(gboolean, MAX(ng, 1));
  for (guint g = 0; g < ng; g++) {
    GArray *m = g_ptr_array_index(b->gkeys, g);
    for (guint k = 1; k < m->len; k++)
      if (cnt[(gsize)g * n + g_array_index(m, guint32, k)] !=
          cnt[(gsize)g * n + g_array_index(m, guint32, 0)])
        bad_g[g] = TRUE;
    if (bad_g[g])
      trace_warn(b->opt, "collectives of the group of %u ranks starting at "
                 "rank %u do not pair up across the files; they replay "
                 "at their recorded durations", m->len,
                 g_array_index(m, guint32, 0));
  }
  gboolean any_bad_p2p = FALSE;
  for (gsize k = 0; k < (gsize)n * n; k++)
    any_bad_p2p |= p2p[k] != 0;
  if (any_bad_p2p)
    trace_warn(b->opt, "some sends and receives do not pair up across the "
               "files; they replay at their recorded durations");
  for (guint i = 0; i < n; i++) {
    GArray *sel = b->rw[i].sel;
    for (guint32 k = 0; k < sel->len; k++) {
      Sel *s = &g_array_index(sel, Sel, k);
      if ((s->cm == CM_COLL && bad_g[s->gkey]) ||
          (s->cm == CM_SEND && p2p[(gsize)i * n + s->peer] != 0) ||
          (s->cm == CM_RECV && p2p[(gsize)s->peer * n + i] != 0))
        s->cm = CM_SOLO;
      if (s->cm == CM_SOLO)
        b->solo_ops++;
    }
  }
}

/* Shape caches of the workload being built. */
typedef struct {
  SimWorkload *w;
  GHashTable *kernel;   /* name id -> shape + 1 */
  GHashTable *comm;     /* "name|coll|bytes" -> shape + 1 */
  GHashTable *work;     /* WorkKey -> shape + 1 */
  GHashTable *names;    /* name id -> 1 + (class << 1 | name says TF32) */
  guint32 marker_shape, marker_name;
  guint32 host_shape;   /* G_MAXUINT32 until the first host op */
} Shapes;

static guint32 kernel_shape(Shapes *sh, guint32 name, TraceRawKind kind,
                            SimOpClass *klass)
{
  gpointer v = g_hash_table_lookup(sh->kernel, GUINT_TO_POINTER(name + 1));
  if (v != NULL) {
    guint32 id = GPOINTER_TO_UINT(v) - 1;
    *klass = (SimOpClass)g_array_index(sh->w->shapes, SimShape, id).klass;
    return id;
  }
  SimShape s = {0};
  s.name = name;
  s.klass = kind == TRACE_RAW_KERNEL
                ? (guint8)trace_classify_kernel(sim_workload_name(sh->w,
                                                                  name))
                : SIM_CLASS_MEMCPY;
  /* An NCCL kernel replayed as a kernel would never be (comm ops take the
   * comm path), but keep the class sane for kernels named "nccl" that the
   * caller decided are not communication. */
  if (s.klass == SIM_CLASS_COMM)
    s.klass = SIM_CLASS_OTHER;
  s.tensor = s.klass == SIM_CLASS_GEMM || s.klass == SIM_CLASS_ATTENTION;
  guint32 id = sim_workload_add_shape(sh->w, &s);
  g_hash_table_insert(sh->kernel, GUINT_TO_POINTER(name + 1),
                      GUINT_TO_POINTER(id + 1));
  *klass = (SimOpClass)s.klass;
  return id;
}

/* The math unit of a kernel doing `w`: 16-bit (and 8-bit) GEMMs and
 * attention on the tensor cores; FP32 ones on the tensor cores at the TF32
 * rate when the kernel name says so (cuBLAS "ampere_tf32_s1688gemm_tf32",
 * "sm80_xmma_gemm_f32f32_tf32f32"), else on the CUDA cores ("ampere_sgemm",
 * the default since PyTorch 1.12 turned TF32 matmuls off); everything
 * else on the CUDA cores. */
/* A kernel name's class and whether it says TF32, cached per name. */
static SimOpClass name_info(Shapes *sh, guint32 name, gboolean *tf32)
{
  gpointer v = g_hash_table_lookup(sh->names, GUINT_TO_POINTER(name + 1));
  if (v == NULL) {
    const char *nm = sim_workload_name(sh->w, name);
    g_autofree char *low = g_ascii_strdown(nm, -1);
    guint code = (guint)trace_classify_kernel(nm) << 1 |
                 (strstr(low, "tf32") != NULL);
    v = GUINT_TO_POINTER(code + 1);
    g_hash_table_insert(sh->names, GUINT_TO_POINTER(name + 1), v);
  }
  guint code = GPOINTER_TO_UINT(v) - 1;
  *tf32 = code & 1;
  return (SimOpClass)(code >> 1);
}

static guint8 work_math(const TraceRawWork *w, SimOpClass klass,
                        gboolean tf32)
{
  if (klass != SIM_CLASS_GEMM && klass != SIM_CLASS_ATTENTION)
    return SIM_MATH_VECTOR;
  if (w->elem > 0 && w->elem <= 2)
    return SIM_MATH_TENSOR;
  return w->elem == 4 && tf32 ? SIM_MATH_TF32 : SIM_MATH_VECTOR;
}

/* Key of a priced kernel shape (all bytes set: hashed as memory). */
typedef struct {
  double flops, bytes;
  guint32 name;
  guint8 klass, math, pad_[2];
} WorkKey;

static guint work_key_hash(gconstpointer p)
{
  return sim_hash_bytes(p, sizeof(WorkKey));
}

static gboolean work_key_equal(gconstpointer a, gconstpointer b)
{
  return memcmp(a, b, sizeof(WorkKey)) == 0;
}

/* The shape of a kernel priced from its operator's work: the class its
 * name gives (the operator's when the name says nothing), the work's
 * FLOPs and bytes. */
static guint32 work_shape(Shapes *sh, guint32 name, const TraceRawWork *w,
                          SimOpClass *klass)
{
  gboolean tf32;
  SimOpClass c = name_info(sh, name, &tf32);
  if (c == SIM_CLASS_OTHER || c == SIM_CLASS_COMM)
    c = (SimOpClass)w->klass;
  WorkKey key;
  memset(&key, 0, sizeof key);
  key.flops = w->flops;
  key.bytes = w->bytes;
  key.name = name;
  key.klass = (guint8)c;
  key.math = work_math(w, c, tf32);
  guint8 math = key.math;
  *klass = c;
  gpointer v = g_hash_table_lookup(sh->work, &key);
  if (v != NULL)
    return GPOINTER_TO_UINT(v) - 1;
  SimShape s = {0};
  s.name = name;
  s.klass = (guint8)c;
  s.flops = w->flops;
  s.bytes = w->bytes;
  s.tensor = math;
  guint32 id = sim_workload_add_shape(sh->w, &s);
  g_hash_table_insert(sh->work, g_memdup2(&key, sizeof key),
                      GUINT_TO_POINTER(id + 1));
  return id;
}

static guint32 comm_shape(Shapes *sh, guint32 name, SimCollType coll,
                          double bytes)
{
  char key[96];
  g_snprintf(key, sizeof key, "%u|%d|%.17g", name, (int)coll, bytes);
  gpointer v = g_hash_table_lookup(sh->comm, key);
  if (v != NULL)
    return GPOINTER_TO_UINT(v) - 1;
  SimShape s = {0};
  s.name = name;
  s.klass = SIM_CLASS_COMM;
  s.coll = (guint8)coll;
  s.bytes = bytes;
  guint32 id = sim_workload_add_shape(sh->w, &s);
  g_hash_table_insert(sh->comm, g_strdup(key), GUINT_TO_POINTER(id + 1));
  return id;
}

static int cmp_u32(const void *a, const void *b)
{
  guint32 x = *(const guint32 *)a, y = *(const guint32 *)b;
  return x < y ? -1 : x > y;
}

/* Would the engine finish ops[0..n) (streams by off[0..ns])?  Every
 * stream runs in order and an op also needs its wait target done: a
 * replay without times. */
static gboolean rank_acyclic(const SimOp *ops, guint32 n, const guint32 *off,
                             guint ns)
{
  guint32 cur[SIM_MAX_STREAMS];
  for (guint s = 0; s < ns; s++)
    cur[s] = off[s];
  guint32 done = 0;
  gboolean progress = TRUE;
  while (progress) {
    progress = FALSE;
    for (guint s = 0; s < ns; s++)
      while (cur[s] < off[s + 1]) {
        guint32 j = ops[cur[s]].wait;
        if (j != SIM_NO_WAIT && cur[ops[j].stream] <= j)
          break;
        cur[s]++;
        done++;
        progress = TRUE;
      }
  }
  return done == n;
}

/* Drops rank rw's host streams: its selection and dependencies go back to
 * the GPU ops alone. */
static void strip_host(RankWork *rw)
{
  guint32 n = rw->n_gpu;
  g_array_set_size(rw->sel, n);
  rw->n_streams = rw->ns_gpu;
  guint32 *d = (guint32 *)(void *)rw->deps->data;
  guint k = 0;
  for (guint j = 0; j < rw->deps->len; j++)
    if (d[2 * j] < n && d[2 * j + 1] < n) {
      d[2 * k] = d[2 * j];
      d[2 * k + 1] = d[2 * j + 1];
      k++;
    }
  g_array_set_size(rw->deps, k);
}

/* Fills host entry s of rank i as op (its stream and wait are the
 * caller's). */
static void emit_host(Build *b, guint i, Shapes *sh, const Sel *s, SimOp *op)
{
  SimWorkload *w = sh->w;
  if (sh->host_shape == G_MAXUINT32) {
    SimShape hs = {0};
    hs.name = sim_workload_intern(w, "host");
    hs.klass = SIM_CLASS_OTHER;
    sh->host_shape = sim_workload_add_shape(w, &hs);
  }
  op->shape = sh->host_shape;
  op->klass = SIM_CLASS_OTHER;
  op->phase = SIM_PHASE_OTHER;
  op->microbatch = G_MAXUINT16;
  op->layer = 255;
  op->ref_ns = s->host_ns;
  if (s->host == HS_STEP) {
    const TraceRawRange *r = &g_array_index(b->win[i].steps, TraceRawRange,
                                            s->peer);
    g_autofree char *nm = g_strdup_printf("ProfilerStep#%" G_GINT64_FORMAT,
                                          r->step);
    op->kind = SIM_OP_MARKER;
    op->name = sim_workload_intern(w, nm);
    return;
  }
  op->kind = SIM_OP_HOST;
  op->name = s->hname == HN_GAP    ? sim_workload_intern(w, "host: cpu time")
             : s->hname == HN_TAIL ? sim_workload_intern(w,
                                                         "host: to step end")
                                   : s->hname;
}

/* a + b for non-negative durations, saturating (a trace may hold 2^62 ns
 * kernels). */
static gint64 sat_add(gint64 a, gint64 b)
{
  return b > G_MAXINT64 - a ? G_MAXINT64 : a + b;
}

/* Step 7: writes workload rank i (ops, markers, waits, shapes).  gid maps
 * member-list keys to workload groups; the rank's one-rank group for
 * communication replayed at recorded durations is added on first use. */
static gboolean emit_rank(Build *b, guint i, Shapes *sh, const guint32 *gid,
                          gboolean comm_recorded, GError **error)
{
  RankWork *rw = &b->rw[i];
  TraceRawRank *raw = rw->raw;
  SimWorkload *w = sh->w;
  guint32 n = rw->sel->len;
  /* Producers per consumer: (consumer, producer) sorted, then reduced to
   * the latest producer per producer stream. */
  GArray *deps = rw->deps;
  g_array_sort(deps, cmp_u32); /* by consumer (first word), stable enough */
  g_autofree guint32 *dep_start = g_new0(guint32, n + 1);
  for (guint k = 0; k < deps->len; k++)
    dep_start[((guint32 *)(void *)deps->data)[2 * k] + 1]++;
  for (guint32 k = 0; k < n; k++)
    dep_start[k + 1] += dep_start[k];
  /* For each consumer, keep max producer position per stream. */
  g_autofree guint32 *latest = g_new(guint32, SIM_MAX_STREAMS);
  /* First pass: count markers to size the output. */
  g_autoptr(GArray) prod = g_array_new(FALSE, FALSE, sizeof(guint32));
  g_autofree guint32 *prod_off = g_new0(guint32, n + 1);
  for (guint s = 0; s < SIM_MAX_STREAMS; s++)
    latest[s] = G_MAXUINT32;
  for (guint32 c = 0; c < n; c++) {
    if (dep_start[c] == dep_start[c + 1]) {
      prod_off[c + 1] = prod->len;
      continue;
    }
    for (guint32 k = dep_start[c]; k < dep_start[c + 1]; k++) {
      guint32 p = ((guint32 *)(void *)deps->data)[2 * k + 1];
      guint ps = g_array_index(rw->sel, Sel, p).stream;
      if (latest[ps] == G_MAXUINT32 || p > latest[ps])
        latest[ps] = p;
    }
    for (guint s = 0; s < SIM_MAX_STREAMS; s++)
      if (latest[s] != G_MAXUINT32) {
        g_array_append_val(prod, latest[s]);
        latest[s] = G_MAXUINT32;
      }
    prod_off[c + 1] = prod->len;
  }
  /* Output positions: each op preceded by (producers - 1) markers. */
  g_autofree guint32 *pos = g_new(guint32, n);
  guint32 total = 0;
  g_autofree guint32 *off = g_new0(guint32, rw->n_streams + 1);
  for (guint32 c = 0; c < n; c++) {
    guint32 np = prod_off[c + 1] - prod_off[c];
    total += np > 1 ? np - 1 : 0;
    pos[c] = total++;
    off[g_array_index(rw->sel, Sel, c).stream + 1] = total;
  }
  for (guint s = 0; s < rw->n_streams; s++)
    off[s + 1] = MAX(off[s + 1], off[s]);
  SimOp *ops = fault_try_alloc0(total, sizeof(SimOp), "import: op array",
                                TRACE_ERROR, TRACE_ERROR_IO, error);
  if (ops == NULL) {
    g_prefix_error(error, "%s: ", raw->path);
    return FALSE;
  }
  guint32 solo = G_MAXUINT32;
  guint64 n_kernels = 0, shaped_kernels = 0;
  gint64 kernel_ns = 0, shaped_ns = 0;
  for (guint32 c = 0; c < n; c++) {
    const Sel *s = &g_array_index(rw->sel, Sel, c);
    const TraceRawOp *ro = s->host == HS_GPU
                               ? &g_array_index(raw->ops, TraceRawOp, s->raw)
                               : NULL;
    guint32 np = prod_off[c + 1] - prod_off[c];
    const guint32 *pp = np > 0 ? &g_array_index(prod, guint32, prod_off[c])
                               : NULL;
    guint32 at = pos[c] - (np > 1 ? np - 1 : 0);
    if (np > 1 && sh->marker_shape == G_MAXUINT32) {
      SimShape ms = {0};
      ms.name = sh->marker_name = sim_workload_intern(w, "stream wait");
      ms.klass = SIM_CLASS_OTHER;
      sh->marker_shape = sim_workload_add_shape(w, &ms);
    }
    for (guint32 m = 0; m + 1 < np; m++) {
      SimOp *mk = &ops[at++];
      mk->kind = SIM_OP_MARKER;
      mk->klass = SIM_CLASS_OTHER;
      mk->phase = s->phase;
      mk->stream = (guint8)s->stream;
      mk->shape = sh->marker_shape;
      mk->name = sh->marker_name;
      mk->wait = pos[pp[m]];
      mk->microbatch = G_MAXUINT16;
      mk->layer = 255;
    }
    SimOp *op = &ops[pos[c]];
    if (s->host != HS_GPU) {
      emit_host(b, i, sh, s, op);
      op->stream = (guint8)s->stream;
      op->wait = np > 0 ? pos[pp[np - 1]] : SIM_NO_WAIT;
      continue;
    }
    op->ref_ns = ro->dur_ns;
    op->name = ro->name;
    op->phase = s->phase;
    op->stream = (guint8)s->stream;
    op->wait = np > 0 ? pos[pp[np - 1]] : SIM_NO_WAIT;
    op->microbatch = G_MAXUINT16;
    op->layer = 255;
    if (s->cm == CM_NONE) {
      SimOpClass k;
      op->kind = SIM_OP_KERNEL;
      if (ro->work != G_MAXUINT32 && ro->kind == TRACE_RAW_KERNEL) {
        op->shape = work_shape(sh, ro->name,
                               &g_array_index(raw->works, TraceRawWork,
                                              ro->work), &k);
        shaped_kernels++;
        shaped_ns = sat_add(shaped_ns, ro->dur_ns);
      } else {
        op->shape = kernel_shape(sh, ro->name, (TraceRawKind)ro->kind, &k);
      }
      n_kernels++;
      kernel_ns = sat_add(kernel_ns, ro->dur_ns);
      op->klass = (guint8)k;
      continue;
    }
    const TraceRawComm *cm = &g_array_index(raw->comms, TraceRawComm,
                                            ro->comm);
    SimCollType coll = cm->kind == TRACE_COMM_COLL ? (SimCollType)cm->coll
                                                   : SIM_COLL_SEND_RECV;
    op->klass = SIM_CLASS_COMM;
    op->shape = comm_shape(sh, ro->name, coll, cm->bytes);
    switch (s->cm) {
    case CM_COLL:
      op->kind = SIM_OP_COLLECTIVE;
      op->peer = gid[s->gkey];
      op->ref_ns = comm_recorded ? ro->dur_ns : 0;
      break;
    case CM_SEND:
    case CM_RECV:
      op->kind = s->cm == CM_SEND ? SIM_OP_SEND : SIM_OP_RECV;
      op->peer = s->peer;
      op->ref_ns = comm_recorded ? ro->dur_ns : 0;
      break;
    default:
      if (solo == G_MAXUINT32)
        solo = sim_workload_add_group(w, &i, 1);
      op->kind = SIM_OP_COLLECTIVE;
      op->peer = solo;
      op->ref_ns = ro->dur_ns;
      break;
    }
  }
  if (rw->n_streams > rw->ns_gpu &&
      !rank_acyclic(ops, total, off, rw->n_streams)) {
    /* A damaged trace made the host dependencies circular: GPU order. */
    g_free(ops);
    b->host_cycles++;
    trace_warn(b->opt, "%s: the runtime calls' dependencies form a cycle "
               "(inconsistent times or correlation ids); the rank replays in "
               "GPU order only", raw->path);
    strip_host(rw);
    return emit_rank(b, i, sh, gid, comm_recorded, error);
  }
  sim_workload_set_rank(w, i, ops, total, g_steal_pointer(&off),
                        rw->n_streams);
  b->n_kernels += n_kernels;
  b->shaped_kernels += shaped_kernels;
  b->kernel_ns = sat_add(b->kernel_ns, kernel_ns);
  b->shaped_ns = sat_add(b->shaped_ns, shaped_ns);
  return TRUE;
}

typedef struct {
  gint64 rank;
  guint idx;
} RankOrder;

static int cmp_rank_order(const void *a, const void *b)
{
  const RankOrder *x = a, *y = b;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

SimWorkload *trace_raw_build(GPtrArray *raws, const SimWorkload *names,
                             const TraceImportOptions *opt,
                             const char *format, GError **error)
{
  g_return_val_if_fail(raws != NULL && raws->len > 0 && names != NULL, NULL);
  TraceImportOptions dflt = {0};
  if (opt == NULL)
    opt = &dflt;
  guint n = raws->len;
  Build b = {0};
  b.opt = opt;
  b.n = n;
  b.global = g_new(gint64, n);
  b.rw = g_new0(RankWork, n);
  b.gkeys = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
  b.gkey_index = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                       NULL);
  SimWorkload *result = NULL;

  /* 1. Ranks. */
  g_autofree RankOrder *ro = g_new(RankOrder, n);
  guint with_rank = 0;
  for (guint i = 0; i < n; i++) {
    const TraceRawRank *r = g_ptr_array_index(raws, i);
    with_rank += r->rank >= 0;
  }
  {
    /* Files without a rank take the smallest ranks not taken. */
    g_autoptr(GHashTable) taken = g_hash_table_new_full(g_int64_hash,
                                                        g_int64_equal, g_free,
                                                        NULL);
    for (guint i = 0; i < n; i++) {
      const TraceRawRank *r = g_ptr_array_index(raws, i);
      if (r->rank < 0)
        continue;
      if (g_hash_table_contains(taken, &r->rank)) {
        const char *other = NULL;
        for (guint k = 0; k < i; k++)
          if (((TraceRawRank *)g_ptr_array_index(raws, k))->rank == r->rank)
            other = ((TraceRawRank *)g_ptr_array_index(raws, k))->path;
        g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                    "%s and %s both hold rank %" G_GINT64_FORMAT, other,
                    r->path, r->rank);
        goto out;
      }
      g_hash_table_add(taken, g_memdup2(&r->rank, sizeof r->rank));
    }
    gint64 next = 0;
    for (guint i = 0; i < n; i++) {
      const TraceRawRank *r = g_ptr_array_index(raws, i);
      ro[i].idx = i;
      if (r->rank >= 0) {
        ro[i].rank = r->rank;
        continue;
      }
      while (g_hash_table_contains(taken, &next))
        next++;
      ro[i].rank = next++;
    }
    if (with_rank > 0 && with_rank < n)
      trace_warn(opt, "%u of %u files record no rank; they were numbered "
                 "in file order", n - with_rank, n);
  }
  qsort(ro, n, sizeof *ro, cmp_rank_order);
  gint64 world = n;
  for (guint i = 0; i < n; i++) {
    b.global[i] = ro[i].rank;
    b.rw[i].raw = g_ptr_array_index(raws, ro[i].idx);
    world = MAX(world, b.rw[i].raw->world_size);
    world = MAX(world, ro[i].rank + 1);
  }
  gboolean complete = (guint64)world == n;

  /* 2-5. Iteration, phases, streams, order, waits. */
  {
    g_autoptr(GString) label = g_string_new(NULL);
    b.win = g_new0(Window, n);
    if (!pick_windows(&b, b.win, label, error))
      goto out;
    for (guint i = 0; i < n; i++)
      if (!analyse_rank(&b, i, b.win[i].w0, b.win[i].w1, error) ||
          (!opt->gpu_only && !host_streams(&b, i, &b.win[i], error)))
        goto out;
    host_warnings(&b);

    /* 6. Communication. */
    for (guint i = 0; i < n; i++)
      resolve_comm(&b, i, complete);
    check_matching(&b);
    if (b.solo_ops > 0)
      trace_warn(opt, "%" G_GUINT64_FORMAT " communication ops replay at "
                 "their recorded durations (%s)", b.solo_ops,
                 complete ? "their peers are unknown or do not pair up"
                          : "the import holds only some ranks of the job");

    /* Reference GPU: the first rank's device. */
    g_autofree char *ref = trace_ref_gpu(opt, b.rw[0].device,
                                         b.rw[0].raw->path, error);
    if (ref == NULL)
      goto out;
    for (guint i = 1; i < n; i++) {
      const char *d = b.rw[i].device, *d0 = b.rw[0].device;
      if (d != NULL && d0 != NULL && strcmp(d, d0) != 0) {
        trace_warn(opt, "%s ran on \"%s\" but %s on \"%s\"; every rank is "
                   "taken as measured on %s", b.rw[i].raw->path, d,
                   b.rw[0].raw->path, d0, ref);
        break;
      }
    }

    /* 7. The workload. */
    g_autoptr(SimWorkload) w = sim_workload_new(n);
    for (guint k = 0; k < names->names->len; k++)
      sim_workload_intern(w, sim_workload_name(names, k));
    Shapes sh = {w, g_hash_table_new(g_direct_hash, g_direct_equal),
                 g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
                 g_hash_table_new_full(work_key_hash, work_key_equal, g_free,
                                       NULL),
                 g_hash_table_new(g_direct_hash, g_direct_equal), 0, 0, 0};
    sh.marker_shape = G_MAXUINT32; /* created with the first marker */
    sh.host_shape = G_MAXUINT32;
    g_autofree guint32 *gid = g_new(guint32, MAX(b.gkeys->len, 1));
    for (guint g = 0; g < b.gkeys->len; g++) {
      GArray *m = g_ptr_array_index(b.gkeys, g);
      gid[g] = sim_workload_add_group(w, (const guint32 *)(void *)m->data,
                                      m->len);
    }
    gboolean emitted = TRUE;
    for (guint i = 0; i < n && emitted; i++)
      emitted = emit_rank(&b, i, &sh, gid, opt->comm_recorded, error);
    g_hash_table_unref(sh.kernel);
    g_hash_table_unref(sh.comm);
    g_hash_table_unref(sh.work);
    g_hash_table_unref(sh.names);
    if (!emitted)
      goto out;
    shape_report(&b, w->provenance);
    w->ref_gpu = g_strdup(ref);

    GHashTable *pv = w->provenance;
    GString *src = g_string_new(NULL), *gr = g_string_new(NULL);
    for (guint i = 0; i < n; i++) {
      g_string_append_printf(src, i ? ";%s" : "%s", b.rw[i].raw->path);
      g_string_append_printf(gr, i ? ",%" G_GINT64_FORMAT
                                   : "%" G_GINT64_FORMAT, b.global[i]);
    }
    g_hash_table_insert(pv, g_strdup("importer"), g_strdup(format));
    g_hash_table_insert(pv, g_strdup("sources"), g_string_free(src, FALSE));
    g_hash_table_insert(pv, g_strdup("global_ranks"),
                        g_string_free(gr, FALSE));
    g_hash_table_insert(pv, g_strdup("world_size"),
                        g_strdup_printf("%" G_GINT64_FORMAT, world));
    g_hash_table_insert(pv, g_strdup("iteration"), g_strdup(label->str));
    g_hash_table_insert(pv, g_strdup("ref_gpu"), g_strdup(ref));
    if (b.rw[0].device != NULL)
      g_hash_table_insert(pv, g_strdup("device"), g_strdup(b.rw[0].device));
    g_hash_table_insert(pv, g_strdup("comm_recorded_ops"),
                        g_strdup_printf("%" G_GUINT64_FORMAT, b.solo_ops));
    if (!opt->gpu_only) {
      g_hash_table_insert(pv, g_strdup("host_ops"),
                          g_strdup_printf("%" G_GUINT64_FORMAT, b.host_ops));
      g_hash_table_insert(pv, g_strdup("host_syncs"),
                          g_strdup_printf("%" G_GUINT64_FORMAT, b.host_syncs));
      g_hash_table_insert(pv, g_strdup("host_orphan_gpu_ops"),
                          g_strdup_printf("%" G_GUINT64_FORMAT, b.orphans));
    } else {
      g_hash_table_insert(pv, g_strdup("host_ops"), g_strdup("gpu_only"));
    }
    /* What the trace measured, for fidelity checks: the GPU span of the
     * first rank's file (first GPU start to last GPU end, every op) and
     * the CPU durations of its profiled steps. */
    {
      const TraceRawRank *r0 = b.rw[0].raw;
      gint64 g0 = G_MAXINT64, g1 = G_MININT64;
      for (guint k = 0; k < r0->ops->len; k++) {
        const TraceRawOp *o = &g_array_index(r0->ops, TraceRawOp, k);
        g0 = MIN(g0, o->ts_ns);
        g1 = MAX(g1, o->ts_ns + o->dur_ns);
      }
      if (g1 > g0)
        g_hash_table_insert(pv, g_strdup("trace_gpu_span_ns"),
                            g_strdup_printf("%" G_GINT64_FORMAT, g1 - g0));
      g_autoptr(GArray) sr = step_ranges(r0);
      if (sr->len > 0) {
        GString *sd = g_string_new(NULL);
        for (guint k = 0; k < sr->len; k++) {
          const TraceRawRange *x = &g_array_index(sr, TraceRawRange, k);
          g_string_append_printf(sd, k ? ",%" G_GINT64_FORMAT
                                       : "%" G_GINT64_FORMAT,
                                 x->end_ns - x->start_ns);
        }
        g_hash_table_insert(pv, g_strdup("trace_step_ns"),
                            g_string_free(sd, FALSE));
      }
    }
    if (step_mode(opt) == TRACE_STEP_ALL && b.win[0].steps != NULL) {
      GString *st = g_string_new(NULL);
      for (guint k = 0; k < b.win[0].steps->len; k++)
        g_string_append_printf(st, k ? ",%" G_GINT64_FORMAT
                                     : "%" G_GINT64_FORMAT,
                               g_array_index(b.win[0].steps, TraceRawRange,
                                             k).step);
      g_hash_table_insert(pv, g_strdup("steps"), g_string_free(st, FALSE));
    }
    if (!sim_workload_validate(w, error)) {
      g_prefix_error(error, "imported workload is inconsistent: ");
      goto out;
    }
    result = g_steal_pointer(&w);
  }
out:
  build_clear(&b);
  return result;
}

/* ---- dispatch ----------------------------------------------------------- */

SimWorkload *trace_import(const char *const *paths, guint n,
                          const TraceImportOptions *opt, GError **error)
{
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  TraceImportOptions dflt = {0};
  if (opt == NULL)
    opt = &dflt;
  if (n == 0 || paths == NULL) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                "no trace files given");
    return NULL;
  }
  TraceFormat fmt = TRACE_FORMAT_UNKNOWN;
  for (guint i = 0; i < n; i++) {
    TraceFormat f = trace_detect_format(paths[i], error);
    if (f == TRACE_FORMAT_UNKNOWN)
      return NULL;
    if (i > 0 && f != fmt) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_UNSUPPORTED,
                  "%s is a %s trace but %s is a %s trace; import one format "
                  "at a time", paths[0], trace_format_name(fmt), paths[i],
                  trace_format_name(f));
      return NULL;
    }
    fmt = f;
  }
  switch (fmt) {
  case TRACE_FORMAT_KINETO:
  case TRACE_FORMAT_NSYS: {
    g_autoptr(SimWorkload) names = sim_workload_new(0);
    g_autoptr(GPtrArray) raws = g_ptr_array_new_with_free_func(
        (GDestroyNotify)trace_raw_rank_free);
    for (guint i = 0; i < n; i++) {
      if (fmt == TRACE_FORMAT_KINETO) {
        TraceRawRank *r = trace_kineto_read(paths[i], names, error);
        if (r == NULL)
          return NULL;
        g_ptr_array_add(raws, r);
      } else if (!trace_nsys_read(paths[i], names, raws, error)) {
        return NULL;
      }
    }
    return trace_raw_build(raws, names, opt, trace_format_name(fmt), error);
  }
  case TRACE_FORMAT_CHAKRA:
    return trace_chakra_import(paths, n, opt, error);
  case TRACE_FORMAT_NATIVE:
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_UNSUPPORTED,
                "%s is a native joulesim trace: load it, do not import it",
                paths[0]);
    return NULL;
  default:
    g_assert_not_reached();
  }
  return NULL;
}
