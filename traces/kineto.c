/* traces/kineto.c -- streaming reader of PyTorch profiler (Kineto) traces.
 *
 * Format: Chrome trace-event JSON, one file per rank, optionally gzipped:
 *
 *   { "distributedInfo": {"rank": 0, "world_size": 2, "pg_config": [...]},
 *     "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}, ...],
 *     "traceEvents": [ {"ph": "X", "cat": "kernel", "name": "...",
 *                       "pid": 0, "tid": 7, "ts": 123.456, "dur": 7.5,
 *                       "args": {"device": 0, "stream": 7,
 *                                "correlation": 57541, ...}}, ... ] }
 *
 * (a bare top-level array of events is accepted too).  ts and dur are
 * microseconds, often with fractions; they are converted to integer
 * nanoseconds exactly from their decimal text (no binary rounding).
 *
 * What is kept (everything else is skipped as it streams past):
 *  - GPU activity: complete ("X") events of cat "kernel", "gpu_memcpy",
 *    "gpu_memset" (older profilers: "Kernel", "Memcpy", "Memset") ->
 *    TraceRawOp (device = args.device or pid, stream =
 *    args.stream or tid, correlation = args.correlation).  NCCL kernels
 *    also carry their communication args: "Collective name", "In msg
 *    nelems", "Out msg nelems", "dtype", "Group size", "Process Group
 *    Ranks", "Process Group Name", "Src Rank", "Dst Rank".
 *  - CUDA runtime calls: cat "cuda_runtime"/"cuda_driver"/"Runtime" events
 *    with a correlation id -> their CPU start, duration, thread and call
 *    kind (to place GPU ops in iterations and phases by when they were
 *    launched, and for the host streams, traces/import.c).  A negative
 *    duration is counted (the builder warns) and taken as unknown.
 *  - CPU operators: cat "cpu_op" (older: "Operator") -> TraceRawCpuOp
 *    (time, thread, "External id"); with "Input Dims" and "Input type"
 *    (record_shapes=True) the operators traces/shapes.c knows get their
 *    FLOPs and bytes (TraceRawWork), linked to kernels by the builder.
 *    Damaged shapes are counted (the builder warns), never an error.
 *    Runtime calls keep their "External id" for that link.
 *  - CPU ranges: "ProfilerStep#N" (iterations) and phase markers
 *    (traces/classify.c) among the other complete CPU events.
 *  - Cross-stream waits: cat "cuda_sync" "Stream Wait Event" events
 *    (recorded when the profiler runs with enable_cuda_sync_events) with
 *    args stream, correlation, wait_on_stream and
 *    wait_on_cuda_event_record_corr_id.
 *
 * The parser is yajl's event (SAX) interface fed 256 KiB chunks from read()
 * or zlib's gzread(), so memory is proportional to the kept records, not
 * to the file.  The position in the JSON is a stack of container roles
 * (root, traceEvents, an event, its args, ...); scalars are interpreted by
 * (role, key).  Malformed input of any kind -- truncated or corrupt gzip,
 * truncated or invalid JSON, wrong types for the fields used, a missing
 * traceEvents array, an empty file -- ends the parse with TRACE_ERROR_FORMAT
 * naming the file and the byte offset or event index.
 */
#include "traces/kineto-private.h"
#include "traces/classify.h"
#include "traces/shapes.h"
#include "io/fault.h"
#include "io/input.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <yajl/yajl_parse.h>
#include <zlib.h>

#define CHUNK (256 * 1024)
/* The longest JSON string accepted (a name, a value in "args"): real
 * demangled kernel names are kilobytes.  yajl lexes a string that spans
 * chunks again from its start at every chunk, so time grew with the square
 * of a string's length (a 1.5 MB .json.gz holding one 1.5 GB name ran for
 * minutes); strings are measured as the chunks arrive, before yajl sees
 * them, so the work stays linear. */
#define KIN_MAX_STRING (4u << 20)

/* Where the text is with respect to JSON strings, across chunks. */
typedef struct {
  gboolean in_string, escaped;
  guint64 len; /* bytes of the current string so far */
} StrScan;

/* Advances sc over buf[0..n); FALSE with *at (the offset in buf) when a
 * string grows past KIN_MAX_STRING.  Outside strings only '"' matters;
 * inside, a backslash escapes the next byte.  (Malformed JSON is yajl's to
 * report; this only measures.) */
static gboolean scan_strings(StrScan *sc, const unsigned char *buf, size_t n,
                             size_t *at)
{
  for (size_t i = 0; i < n; i++) {
    unsigned char c = buf[i];
    if (!sc->in_string) {
      if (c == '"') {
        sc->in_string = TRUE;
        sc->len = 0;
      }
      continue;
    }
    if (sc->escaped)
      sc->escaped = FALSE;
    else if (c == '\\')
      sc->escaped = TRUE;
    else if (c == '"') {
      sc->in_string = FALSE;
      continue;
    }
    if (++sc->len > KIN_MAX_STRING) {
      *at = i;
      return FALSE;
    }
  }
  return TRUE;
}

/* ---- numbers ------------------------------------------------------------ */

/* Decimal microseconds -> integer nanoseconds, rounded half away from zero.
 * Exact for plain decimals; exponents go through strtod. */
static gboolean us_to_ns(const char *s, size_t len, gint64 *out)
{
  size_t i = 0;
  gboolean neg = FALSE;
  if (i < len && (s[i] == '-' || s[i] == '+'))
    neg = s[i++] == '-';
  guint64 ip = 0;
  size_t d0 = i;
  for (; i < len && g_ascii_isdigit(s[i]); i++) {
    /* ip stays below 9.3e15 us, so ip * 1000 + 999 fits in a guint64;
     * the final check keeps it within gint64. */
    if (ip > (guint64)G_MAXINT64 / 10000)
      return FALSE;
    ip = ip * 10 + (guint64)(s[i] - '0');
  }
  gboolean digits = i > d0;
  guint64 frac = 0;
  int fd = 0, round = 0;
  if (i < len && s[i] == '.') {
    i++;
    for (; i < len && g_ascii_isdigit(s[i]); i++, digits = TRUE) {
      if (fd < 3)
        frac = frac * 10 + (guint64)(s[i] - '0');
      else if (fd == 3)
        round = s[i] >= '5';
      fd++;
    }
  }
  if (!digits)
    return FALSE;
  if (i < len && (s[i] == 'e' || s[i] == 'E')) {
    char buf[64];
    if (len >= sizeof buf)
      return FALSE;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end = NULL;
    double v = g_ascii_strtod(buf, &end);
    if (end != buf + len || !isfinite(v) || fabs(v) * 1e3 > 9.2e18)
      return FALSE;
    *out = (gint64)llround(v * 1e3);
    return TRUE;
  }
  if (i != len)
    return FALSE;
  for (; fd < 3; fd++)
    frac *= 10;
  guint64 v = ip * 1000 + frac + (guint64)round;
  if (v > (guint64)G_MAXINT64)
    return FALSE;
  *out = neg ? -(gint64)v : (gint64)v;
  return TRUE;
}

/* An integer (a float with a zero fraction is accepted). */
gboolean kin_parse_int(const char *s, size_t len, gint64 *out)
{
  /* Fast path: plain decimal integers (nearly every id and size). */
  size_t i = 0;
  gboolean neg = len > 0 && s[0] == '-';
  i = neg ? 1 : 0;
  if (len > i && len - i <= 18) {
    gint64 v = 0;
    for (; i < len && g_ascii_isdigit(s[i]); i++)
      v = v * 10 + (s[i] - '0');
    if (i == len && len > (size_t)neg) {
      *out = neg ? -v : v;
      return TRUE;
    }
  }
  char buf[64];
  if (len == 0 || len >= sizeof buf)
    return FALSE;
  memcpy(buf, s, len);
  buf[len] = '\0';
  char *end = NULL;
  errno = 0;
  gint64 v = g_ascii_strtoll(buf, &end, 10);
  if (end == buf + len && errno == 0) {
    *out = v;
    return TRUE;
  }
  double d = g_ascii_strtod(buf, &end);
  if (end != buf + len || !isfinite(d) || d != floor(d) || fabs(d) > 9e18)
    return FALSE;
  *out = (gint64)d;
  return TRUE;
}

/* ---- keys --------------------------------------------------------------- */

#define IS(lit) (len == sizeof(lit) - 1 && memcmp(s, lit, len) == 0)

static Key event_key(const unsigned char *us, size_t len)
{
  const char *s = (const char *)us;
  switch (len) {
  case 2:
    if (IS("ph")) return K_PH;
    if (IS("ts")) return K_TS;
    break;
  case 3:
    if (IS("cat")) return K_CAT;
    if (IS("dur")) return K_DUR;
    if (IS("pid")) return K_PID;
    if (IS("tid")) return K_TID;
    break;
  case 4:
    if (IS("name")) return K_NAME;
    if (IS("args")) return K_ARGS;
    break;
  default:
    break;
  }
  return K_OTHER;
}

static Key args_key(const unsigned char *us, size_t len)
{
  const char *s = (const char *)us;
  switch (s[0]) {
  case 'd':
    if (IS("device")) return K_DEVICE;
    if (IS("dtype")) return K_DTYPE;
    break;
  case 's':
    if (IS("stream")) return K_STREAM;
    break;
  case 'c':
    if (IS("correlation")) return K_CORR;
    break;
  case 'C':
    if (IS("Collective name")) return K_COLL_NAME;
    break;
  case 'I':
    if (IS("In msg nelems")) return K_IN_NELEMS;
    if (IS("Input Dims")) return K_IN_DIMS;
    if (IS("Input type")) return K_IN_TYPE;
    break;
  case 'E':
    if (IS("External id")) return K_EXT;
    break;
  case 'O':
    if (IS("Out msg nelems")) return K_OUT_NELEMS;
    break;
  case 'G':
    if (IS("Group size")) return K_GROUP_SIZE;
    break;
  case 'P':
    if (IS("Process Group Ranks")) return K_PG_RANKS;
    if (IS("Process Group Name")) return K_PG_NAME;
    break;
  case 'S':
    if (IS("Src Rank")) return K_SRC_RANK;
    break;
  case 'D':
    if (IS("Dst Rank")) return K_DST_RANK;
    break;
  case 'w':
    if (IS("wait_on_stream")) return K_WAIT_STREAM;
    if (IS("wait_on_cuda_event_record_corr_id")) return K_WAIT_CORR;
    break;
  default:
    break;
  }
  return K_OTHER;
}

static Key other_key(Role role, const unsigned char *us, size_t len)
{
  const char *s = (const char *)us;
  switch (role) {
  case R_ROOT:
    if (IS("traceEvents")) return K_TRACE_EVENTS;
    if (IS("distributedInfo")) return K_DIST;
    if (IS("deviceProperties")) return K_DEVPROPS;
    break;
  case R_DIST:
    if (IS("rank")) return K_RANK;
    if (IS("world_size")) return K_WORLD;
    if (IS("pg_config")) return K_PG_CONFIG;
    break;
  case R_PG:
    if (IS("pg_name")) return K_PGC_NAME;
    if (IS("ranks")) return K_PGC_RANKS;
    break;
  case R_DEVPROP:
    if (IS("id")) return K_ID;
    if (IS("name")) return K_DEV_NAME;
    break;
  default:
    break;
  }
  return K_OTHER;
}

static Cat cat_of(const char *s, size_t len)
{
  switch (len) {
  case 6:
    if (IS("cpu_op")) return C_CPU_OP;
    if (IS("kernel")) return C_KERNEL;
    if (IS("Kernel")) return C_KERNEL; /* PyTorch <= 1.10 spellings */
    if (IS("Memcpy")) return C_MEMCPY;
    if (IS("Memset")) return C_MEMSET;
    break;
  case 7:
    if (IS("Runtime")) return C_RUNTIME;
    break;
  case 8:
    if (IS("Operator")) return C_CPU_OP; /* PyTorch <= 1.10 */
    break;
  case 9:
    if (IS("cuda_sync")) return C_SYNC;
    break;
  case 10:
    if (IS("gpu_memcpy")) return C_MEMCPY;
    if (IS("gpu_memset")) return C_MEMSET;
    break;
  case 11:
    if (IS("cuda_driver")) return C_RUNTIME;
    break;
  case 12:
    if (IS("cuda_runtime")) return C_RUNTIME;
    break;
  case 19:
    if (IS("gpu_user_annotation")) return C_GPU_ANNOT;
    break;
  default:
    break;
  }
  return C_OTHER;
}

#undef IS

/* ---- yajl callbacks ----------------------------------------------------- */

/* A scalar of the wrong type for (role, key): message or NULL if fine. */
static int type_error(Kin *k, const char *got)
{
  Role r = top_role(k);
  if (r == R_EVENTS)
    FAIL(k, "traceEvents[%" G_GUINT64_FORMAT "] is %s, not an object",
         k->n_events, got);
  if (r == R_EVENT) {
    const char *want = NULL;
    switch (k->key) {
    case K_TS: want = "\"ts\" must be a number"; break;
    case K_DUR: want = "\"dur\" must be a number"; break;
    case K_NAME: want = "\"name\" must be a string"; break;
    case K_CAT: want = "\"cat\" must be a string"; break;
    case K_PH: want = "\"ph\" must be a string"; break;
    case K_ARGS: want = "\"args\" must be an object"; break;
    default: break;
    }
    if (want != NULL)
      FAIL(k, "traceEvents[%" G_GUINT64_FORMAT "]: %s, not %s",
           k->n_events, want, got);
  }
  if (r == R_ROOT && k->key == K_TRACE_EVENTS)
    FAIL(k, "\"traceEvents\" must be an array, not %s", got);
  if (r == R_DIST && (k->key == K_RANK || k->key == K_WORLD))
    FAIL(k, "distributedInfo.%s must be an integer, not %s",
         k->key == K_RANK ? "rank" : "world_size", got);
  if (k->depth == 0)
    FAIL(k, "the top-level value is %s, not a trace object", got);
  return 1;
}

static int cb_null(void *ctx)
{
  Kin *k = ctx;
  Role r = top_role(k);
  if (r == R_EVENT && k->key == K_ARGS)
    return 1; /* "args": null is harmless */
  if (r >= R_DIMS) {
    kin_shape_scalar(k, r);
    return 1;
  }
  return type_error(k, "null");
}

static int cb_boolean(void *ctx, int v)
{
  (void)v;
  Kin *k = ctx;
  Role r = top_role(k);
  if (r >= R_DIMS) {
    kin_shape_scalar(k, r);
    return 1;
  }
  return type_error(ctx, "a boolean");
}

static int cb_number(void *ctx, const char *s, size_t len)
{
  Kin *k = ctx;
  Role r = top_role(k);
  Event *e = &k->ev;
  gint64 v;
  switch (r) {
  case R_EVENT:
    switch (k->key) {
    case K_TS:
    case K_DUR:
      if (!us_to_ns(s, len, &v))
        FAIL(k, "traceEvents[%" G_GUINT64_FORMAT "]: \"%s\" value %.*s is "
             "out of range", k->n_events, k->key == K_TS ? "ts" : "dur",
             (int)MIN(len, 40), s);
      if (k->key == K_TS) {
        e->ts_ns = v;
        e->has_ts = TRUE;
      } else {
        e->dur_ns = v;
        e->has_dur = TRUE;
      }
      return 1;
    case K_PID:
      e->has_pid = kin_parse_int(s, len, &e->pid);
      return 1;
    case K_TID:
      e->has_tid = kin_parse_int(s, len, &e->tid);
      return 1;
    default:
      return type_error(k, "a number");
    }
  case R_ARGS:
    if (k->key == K_OTHER || !kin_parse_int(s, len, &v))
      return 1;
    switch (k->key) {
    case K_DEVICE: e->device = v; e->has_device = TRUE; break;
    case K_STREAM: e->stream = v; e->has_stream = TRUE; break;
    case K_CORR: e->corr = v; e->has_corr = TRUE; break;
    case K_IN_NELEMS: e->in_nelems = v; break;
    case K_OUT_NELEMS: e->out_nelems = v; break;
    case K_GROUP_SIZE: e->group_size = v; break;
    case K_SRC_RANK: e->src_rank = v; break;
    case K_DST_RANK: e->dst_rank = v; break;
    case K_WAIT_STREAM: e->wait_stream = v; break;
    case K_WAIT_CORR: e->wait_corr = v; break;
    case K_EXT: e->ext = v; e->has_ext = TRUE; break;
    default: break;
    }
    return 1;
  case R_DIM:
  case R_DIM_LIST:
    kin_shape_dim(k, r, s, len);
    return 1;
  case R_DIMS:
  case R_TYPES:
    kin_shape_scalar(k, r);
    return 1;
  case R_ARGS_RANKS:
    if (kin_parse_int(s, len, &v)) {
      g_string_append_printf(e->pg_ranks, "%s%" G_GINT64_FORMAT,
                             e->pg_ranks->len ? "," : "", v);
      e->has_pg_ranks = TRUE;
    }
    return 1;
  case R_DIST:
    if (k->key == K_RANK || k->key == K_WORLD) {
      if (!kin_parse_int(s, len, &v) || v < 0 || v > G_MAXINT32)
        FAIL(k, "distributedInfo.%s: %.*s is not a valid %s",
             k->key == K_RANK ? "rank" : "world_size", (int)MIN(len, 40), s,
             k->key == K_RANK ? "rank" : "size");
      if (k->key == K_RANK)
        k->raw->rank = v;
      else
        k->raw->world_size = v;
    }
    return 1;
  case R_PG_RANKS:
    if (kin_parse_int(s, len, &v))
      g_string_append_printf(k->pgc_ranks, "%s%" G_GINT64_FORMAT,
                             k->pgc_ranks->len ? "," : "", v);
    return 1;
  case R_DEVPROP:
    if (k->key == K_ID && kin_parse_int(s, len, &v)) {
      k->dev_id = v;
      k->has_dev_id = TRUE;
    }
    return 1;
  default:
    return type_error(k, "a number");
  }
}

static int cb_string(void *ctx, const unsigned char *us, size_t len)
{
  Kin *k = ctx;
  Role r = top_role(k);
  Event *e = &k->ev;
  const char *s = (const char *)us;
  switch (r) {
  case R_EVENT:
    switch (k->key) {
    case K_NAME:
      g_string_append_len(e->name, s, (gssize)len);
      return 1;
    case K_CAT:
      e->cat = cat_of(s, len);
      return 1;
    case K_PH:
      e->ph = len > 0 ? s[0] : '\0';
      return 1;
    case K_PID:
    case K_TID:
      return 1; /* "Spans", "PyTorch Profiler": not a device */
    default:
      return type_error(k, "a string");
    }
  case R_ARGS:
    switch (k->key) {
    case K_COLL_NAME:
      g_string_append_len(e->coll, s, (gssize)len);
      e->has_coll = TRUE;
      break;
    case K_DTYPE:
      g_string_append_len(e->dtype, s, (gssize)len);
      e->has_dtype = TRUE;
      break;
    case K_PG_RANKS:
      g_string_append_len(e->pg_ranks, s, (gssize)len);
      e->has_pg_ranks = TRUE;
      break;
    case K_PG_NAME:
      g_string_append_len(e->pg_name, s, (gssize)len);
      e->has_pg_name = TRUE;
      break;
    default:
      break;
    }
    return 1;
  case R_TYPES:
    if (k->shp.n_types < TRACE_SHAPE_MAX_INPUTS)
      k->types_elem[k->shp.n_types] = kin_type_elem(k, s, len);
    k->shp.n_types++;
    return 1;
  case R_DIMS:
  case R_DIM:
  case R_DIM_LIST:
    kin_shape_scalar(k, r);
    return 1;
  case R_PG:
    if (k->key == K_PGC_NAME) {
      g_string_truncate(k->pgc_name, 0);
      g_string_append_len(k->pgc_name, s, (gssize)len);
    }
    else if (k->key == K_PGC_RANKS)
      g_string_append_len(k->pgc_ranks, s, (gssize)len);
    return 1;
  case R_DEVPROP:
    if (k->key == K_DEV_NAME) {
      g_string_truncate(k->dev_name, 0);
      g_string_append_len(k->dev_name, s, (gssize)len);
    }
    return 1;
  default:
    return type_error(k, "a string");
  }
}

static int cb_map_key(void *ctx, const unsigned char *s, size_t len)
{
  Kin *k = ctx;
  Role r = top_role(k);
  if (r == R_EVENT)
    k->key = event_key(s, len);
  else if (r == R_ARGS)
    k->key = len > 0 ? args_key(s, len) : K_OTHER;
  else
    k->key = other_key(r, s, len);
  return 1;
}

/* Role of a container opened in the current position. */
/* push() inside "Input Dims" and "Input type": the role of a container
 * opened under parent (R_IGNORE when it is damage, which is marked). */
static Role push_shapes(Kin *k, Role parent, gboolean is_map)
{
  Role role = R_IGNORE;
  switch (parent) {
  case R_DIMS:
    if (is_map) {
      k->shp.malformed = TRUE;
      break;
    }
    role = R_DIM;
    if (k->shp.n < TRACE_SHAPE_MAX_INPUTS) {
      TraceShapeInput *t = &k->shp.in[k->shp.n];
      memset(t, 0, sizeof *t);
      t->numel = 1;
    }
    if (k->shp.n < G_MAXUINT)
      k->shp.n++;
    break;
  case R_DIM: {
    /* A TensorList member (newer profilers) or damage. */
    TraceShapeInput *t = kin_cur_input(k);
    if (is_map || (t != NULL && t->rank > 0)) {
      if (t != NULL)
        t->bad = TRUE;
      break;
    }
    if (t != NULL)
      t->list = TRUE;
    role = R_DIM_LIST;
    k->list_prod = 1;
    break;
  }
  case R_DIM_LIST:
  case R_TYPES: {
    /* Deeper than a TensorList member: damage. */
    TraceShapeInput *t = kin_cur_input(k);
    if (parent == R_DIM_LIST && t != NULL)
      t->bad = TRUE;
    if (parent == R_TYPES)
      k->shp.n_types++;
    break;
  }
  default:
    break;
  }
  return role;
}

static int push(Kin *k, gboolean is_map)
{
  Role parent = top_role(k);
  Role role = R_IGNORE;
  if (k->depth == 0) {
    k->root_seen = TRUE;
    role = is_map ? R_ROOT : R_EVENTS;
    k->events_seen = !is_map;
  } else {
    switch (parent) {
    case R_ROOT:
      if (k->key == K_TRACE_EVENTS) {
        if (!is_map) {
          role = R_EVENTS;
          k->events_seen = TRUE;
        } else {
          return type_error(k, "an object");
        }
      } else if (k->key == K_DIST && is_map) {
        role = R_DIST;
      } else if (k->key == K_DEVPROPS && !is_map) {
        role = R_DEVPROPS;
      }
      break;
    case R_EVENTS:
      if (!is_map)
        return type_error(k, "an array");
      role = R_EVENT;
      kin_event_reset(&k->ev);
      k->shp.n = k->shp.n_types = 0;
      k->shp.malformed = FALSE;
      k->key = K_OTHER;
      break;
    case R_EVENT:
      if (k->key == K_ARGS) {
        if (!is_map)
          return type_error(k, "an array");
        role = R_ARGS;
      } else if (k->key == K_TS || k->key == K_DUR || k->key == K_NAME ||
                 k->key == K_CAT || k->key == K_PH) {
        return type_error(k, is_map ? "an object" : "an array");
      }
      break;
    case R_ARGS:
      if (k->key == K_PG_RANKS && !is_map) {
        role = R_ARGS_RANKS;
        g_string_truncate(k->ev.pg_ranks, 0);
      } else if (k->key == K_IN_DIMS) {
        if (is_map)
          k->shp.malformed = TRUE;
        else
          role = R_DIMS;
        k->shp.n = 0;
      } else if (k->key == K_IN_TYPE && !is_map) {
        role = R_TYPES;
        k->shp.n_types = 0;
      }
      break;
    case R_DIMS:
    case R_DIM:
    case R_DIM_LIST:
    case R_TYPES:
      role = push_shapes(k, parent, is_map);
      break;
    case R_DIST:
      if (k->key == K_PG_CONFIG && !is_map)
        role = R_PGCONF;
      else if (k->key == K_RANK || k->key == K_WORLD)
        return type_error(k, is_map ? "an object" : "an array");
      break;
    case R_PGCONF:
      if (is_map) {
        role = R_PG;
        g_string_truncate(k->pgc_name, 0);
        g_string_truncate(k->pgc_ranks, 0);
      }
      break;
    case R_PG:
      if (k->key == K_PGC_RANKS && !is_map)
        role = R_PG_RANKS;
      break;
    case R_DEVPROPS:
      if (is_map) {
        role = R_DEVPROP;
        k->has_dev_id = FALSE;
        g_string_truncate(k->dev_name, 0);
      }
      break;
    default:
      break;
    }
  }
  if (k->depth < MAX_ROLES)
    k->roles[k->depth] = (guint8)role;
  k->depth++;
  return 1;
}

static int pop(Kin *k)
{
  Role r = top_role(k);
  k->depth--;
  switch (r) {
  case R_EVENT:
    return kin_event_end(k);
  case R_DIM_LIST: {
    TraceShapeInput *t = kin_cur_input(k);
    if (t != NULL)
      t->list_numel += k->list_prod;
    return 1;
  }
  case R_PG:
    if (k->pgc_name->len > 0 && k->pgc_ranks->len > 0)
      g_hash_table_insert(k->raw->pg_ranks, g_strdup(k->pgc_name->str),
                          g_strdup(k->pgc_ranks->str));
    return 1;
  case R_DEVPROP:
    if (k->has_dev_id && k->dev_name->len > 0)
      g_hash_table_insert(k->raw->devices,
                          g_memdup2(&k->dev_id, sizeof k->dev_id),
                          g_strdup(k->dev_name->str));
    return 1;
  default:
    return 1;
  }
}

static int cb_start_map(void *ctx)
{
  return push(ctx, TRUE);
}
static int cb_end_map(void *ctx)
{
  return pop(ctx);
}
static int cb_start_array(void *ctx)
{
  return push(ctx, FALSE);
}
static int cb_end_array(void *ctx)
{
  return pop(ctx);
}

static const yajl_callbacks callbacks = {
  cb_null, cb_boolean, NULL, NULL, cb_number, cb_string,
  cb_start_map, cb_map_key, cb_end_map, cb_start_array, cb_end_array};

/* ---- driver ------------------------------------------------------------- */

/* Feeds one chunk; on failure sets *error (naming the byte offset). */
static gboolean feed(Kin *k, yajl_handle h, const unsigned char *buf,
                     size_t n, guint64 base, gboolean last, GError **error)
{
  yajl_status st = last ? yajl_complete_parse(h) : yajl_parse(h, buf, n);
  if (st == yajl_status_ok)
    return TRUE;
  if (st == yajl_status_client_canceled || k->error != NULL) {
    g_propagate_error(error, g_steal_pointer(&k->error));
    return FALSE;
  }
  unsigned char *msg = yajl_get_error(h, 0, buf, n);
  g_autofree char *m = g_strstrip(g_strdup((const char *)msg));
  yajl_free_error(h, msg);
  guint64 at = base + (last ? 0 : yajl_get_bytes_consumed(h));
  if (last && !k->root_seen)
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                "%s: no JSON value (empty file?)", k->path);
  else if (last)
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                "%s: truncated JSON (%s at end of file, byte %"
                G_GUINT64_FORMAT ")", k->path, m, at);
  else
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                "%s: malformed JSON at byte %" G_GUINT64_FORMAT ": %s",
                k->path, at, m);
  return FALSE;
}

static void kin_clear(Kin *k)
{
  g_string_free(k->ev.name, TRUE);
  g_string_free(k->ev.coll, TRUE);
  g_string_free(k->ev.dtype, TRUE);
  g_string_free(k->ev.pg_ranks, TRUE);
  g_string_free(k->ev.pg_name, TRUE);
  g_string_free(k->pgc_name, TRUE);
  g_string_free(k->pgc_ranks, TRUE);
  g_string_free(k->dev_name, TRUE);
  g_byte_array_unref(k->nccl);
  g_byte_array_unref(k->calls);
  g_hash_table_unref(k->cpu_names);
  g_hash_table_unref(k->op_names);
  g_hash_table_unref(k->types);
  g_clear_error(&k->error);
}

/* A parse state for `path` filling raw, names interned in `names`. */
static void kin_init(Kin *kp, const char *path, TraceRawRank *raw,
                     SimWorkload *names)
{
  Kin k = {0};
  k.path = path;
  k.raw = raw;
  k.names = names;
  k.ev.name = g_string_sized_new(256);
  k.ev.coll = g_string_new(NULL);
  k.ev.dtype = g_string_new(NULL);
  k.ev.pg_ranks = g_string_new(NULL);
  k.ev.pg_name = g_string_new(NULL);
  k.pgc_name = g_string_new(NULL);
  k.pgc_ranks = g_string_new(NULL);
  k.dev_name = g_string_new(NULL);
  k.nccl = g_byte_array_new();
  k.calls = g_byte_array_new();
  k.cpu_names = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  k.op_names = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  k.types = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  *kp = k;
}

/* Reads the next chunk (at most CHUNK bytes, *n; 0 at the end) of the
 * gzip stream zf or, without one, of f; total bytes were read before. */
static gboolean read_chunk(const char *path, gzFile zf, FILE *f,
                           unsigned char *buf, guint64 total, size_t *n,
                           GError **error)
{
  if (fault_inject(FAULT_READ, "kineto: read")) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_IO,
                "%s: read error after %" G_GUINT64_FORMAT " bytes: %s "
                "(injected fault)", path, total, g_strerror(EIO));
    return FALSE;
  }
  if (zf != NULL) {
    int got = gzread(zf, buf, CHUNK);
    int zerr = Z_OK;
    const char *zmsg = gzerror(zf, &zerr);
    if (got < 0 || (zerr != Z_OK && zerr != Z_STREAM_END)) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                  "%s: corrupt or truncated gzip data after %"
                  G_GUINT64_FORMAT " decompressed bytes (%s)", path,
                  total + (got > 0 ? (guint64)got : 0),
                  zerr == Z_BUF_ERROR ? "unexpected end of file" : zmsg);
      return FALSE;
    }
    *n = (size_t)got;
  } else {
    *n = fread(buf, 1, CHUNK, f);
    if (*n < CHUNK && ferror(f)) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_IO, "%s: read error",
                  path);
      return FALSE;
    }
  }
  return TRUE;
}

TraceRawRank *trace_kineto_read(const char *path, SimWorkload *names,
                                GError **error)
{
  g_return_val_if_fail(path != NULL && names != NULL, NULL);
  /* Opened once (io/input.h: a FIFO or a device is refused, never waited
   * on), then read through that descriptor only. */
  IoInput in;
  if (!io_input_open(&in, path, "kineto: open", TRACE_ERROR, TRACE_ERROR_IO,
                     error))
    return NULL;
  /* gzip or plain: look at the magic bytes. */
  unsigned char magic[2] = {0, 0};
  gboolean gz = pread(in.fd, magic, 2, 0) == 2 && magic[0] == 0x1f &&
                magic[1] == 0x8b;
  gzFile zf = NULL;
  FILE *f = NULL;
  if (gz) {
    zf = fault_inject(FAULT_READ, "kineto: gzopen") ? NULL
                                                    : gzdopen(in.fd, "rb");
    if (zf == NULL) {
      io_input_close(&in);
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_IO, "%s: cannot open",
                  path);
      return NULL;
    }
    io_input_steal_fd(&in); /* gzclose_r closes it */
    gzbuffer(zf, CHUNK);
  } else {
    f = io_input_fdopen(&in, path, TRACE_ERROR, TRACE_ERROR_IO, error);
    if (f == NULL)
      return NULL;
  }

  g_autoptr(TraceRawRank) raw = trace_raw_rank_new(path);
  Kin k;
  kin_init(&k, path, raw, names);
  yajl_handle h = yajl_alloc(&callbacks, NULL, &k);
  g_autofree unsigned char *buf = g_malloc(CHUNK);
  guint64 total = 0;
  gboolean ok = TRUE;
  StrScan sc = {FALSE, FALSE, 0};
  for (;;) {
    size_t n = 0, at = 0;
    if (!read_chunk(path, zf, f, buf, total, &n, error)) {
      ok = FALSE;
      break;
    }
    if (n == 0)
      break;
    if (!scan_strings(&sc, buf, n, &at)) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                  "%s: a JSON string longer than %u MiB at byte %"
                  G_GUINT64_FORMAT " (no trace field needs one)", path,
                  KIN_MAX_STRING >> 20, total + at);
      ok = FALSE;
      break;
    }
    if (!feed(&k, h, buf, n, total, FALSE, error)) {
      ok = FALSE;
      break;
    }
    total += n;
  }
  if (ok && total == 0) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT, "%s: empty %sfile",
                path, gz ? "compressed " : "");
    ok = FALSE;
  }
  if (ok)
    ok = feed(&k, h, buf, 0, total, TRUE, error);
  if (ok && !k.events_seen) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                "%s: no \"traceEvents\" array (not a Kineto/Chrome trace)",
                path);
    ok = FALSE;
  }
  if (gz) {
    int rc = gzclose_r(zf);
    if (ok && rc != Z_OK) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                  "%s: truncated gzip data", path);
      ok = FALSE;
    }
  } else {
    fclose(f);
  }
  yajl_free(h);
  kin_clear(&k);
  if (!ok)
    return NULL;
  return g_steal_pointer(&raw);
}
