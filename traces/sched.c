/* traces/sched.c -- Perseus/Merak frequency schedules (N.sched.json).
 *
 * The file
 * --------
 *   [{"rank": 0, "power_states": [1410, 1410, ...]}, {"rank": 1, ...}, ...]
 * One object per rank of a Merak job (Perseus's PowerStateSchedule), and
 * per rank one SM clock in MHz per pipe instruction: Merak's engine
 * (merak/Merak/runtime/pipe_engine.py, _exec_schedule) walks the rank's
 * schedule instruction by instruction, sets the clock the list gives and
 * runs the instruction.  Only one pipeline is read: rank r is stage r
 * (dp = tp = 1, as every decoder run of the artifact's perseus/ folder).
 *
 * The order: Merak's 1F1B (MergeP2PTrainSchedule, its default)
 * -----------------------------------------------------------------
 * Stage s of S with M microbatches runs 2 (M + S - 1) steps.  Step t is a
 * forward step when t and s have the same parity, else a backward step;
 * its microbatch is
 *   forward:  floor(t / 2) - floor(s / 2)               (t even)
 *             floor((t - 1) / 2) - floor(s / 2)         (t odd)
 *   backward: floor(t / 2) - S + floor((s + 1) / 2)     (t even)
 *             floor((t - 1) / 2) - S + 1 + floor(s / 2) (t odd)
 * and only microbatches in 0..M-1 exist.  Each step issues, in order:
 *  - one communication instruction on a forward step when there is a
 *    previous stage and either this step's or the previous step's
 *    microbatch exists (receive activations, send gradients, or both
 *    merged); on a backward step likewise towards the next stage;
 *  - LoadMicroBatch on the first and the last stage before a forward;
 *  - ForwardPass or BackwardPass when its microbatch exists;
 *  - on the last step, ReduceTiedGrads, ReduceGrads and OptimizerStep.
 * Forwards and backwards each come in microbatch order, so the k-th
 * ForwardPass is microbatch k's forward.  The clocks of the computation
 * instructions make the plan; the others (communication, loads, the
 * optimizer) are not computations in joulesim's pipeline model and are
 * dropped.  Checked on the artifact: stage 0 of a 4-stage, 32-microbatch
 * job holds 134 clocks, as the walk below counts.
 *
 * Recomputation is part of Merak's BackwardPass (activation
 * checkpointing), as it is part of a backward computation here.
 */
#include "traces/sched.h"
#include "io/input.h"

#include <string.h>
#include <yajl/yajl_tree.h>

G_DEFINE_QUARK(sched-error-quark, sched_error)

#define SCHED_MAX_BYTES (64u << 20)
/* The deepest nesting of arrays and objects accepted: the schedule needs 3
 * ([{"power_states": [...]}]).  yajl's tree is freed recursively, so a
 * 600 KB file of 300,000 '[' would overflow the stack. */
#define SCHED_MAX_DEPTH 64

typedef enum { INS_OTHER, INS_FORWARD, INS_BACKWARD } Ins;

/* Calls emit(ins, microbatch, data) for every instruction of stage s of S
 * with M microbatches, in Merak's order (see above); returns how many. */
static guint64 walk(guint S, guint M, guint s,
                    void (*emit)(Ins, gint64, gpointer), gpointer data)
{
  gint64 prev = -1, nS = S, ns = s, nM = M;
  guint64 n = 0;
  gint64 steps = 2 * (nM + nS - 1);
#define VALID(mb) ((mb) >= 0 && (mb) < nM)
#define EMIT(i, mb)                                                         \
  do {                                                                      \
    if (emit != NULL)                                                       \
      emit((i), (mb), data);                                                \
    n++;                                                                    \
  } while (0)
  for (gint64 t = 0; t < steps; t++) {
    gboolean fwd = (t % 2) == (ns % 2);
    gint64 base = t % 2 == 0 ? t / 2 : (t - 1) / 2;
    gint64 mb = fwd ? base - ns / 2
                    : (t % 2 == 0 ? base - nS + (ns + 1) / 2
                                  : base - nS + 1 + ns / 2);
    gboolean peer = fwd ? ns > 0 : ns + 1 < nS;
    if (peer && (VALID(mb) || VALID(prev)))
      EMIT(INS_OTHER, -1);
    if ((ns == 0 || ns == nS - 1) && fwd && VALID(mb))
      EMIT(INS_OTHER, -1);
    if (VALID(mb))
      EMIT(fwd ? INS_FORWARD : INS_BACKWARD, mb);
    if (t == steps - 1) {
      EMIT(INS_OTHER, -1);
      EMIT(INS_OTHER, -1);
      EMIT(INS_OTHER, -1);
    }
    prev = mb;
  }
#undef VALID
#undef EMIT
  return n;
}

guint64 sched_instructions(guint S, guint M, guint s)
{
  g_return_val_if_fail(S > 0 && M > 0 && s < S, 0);
  return walk(S, M, s, NULL, NULL);
}

/* The microbatch count whose schedule gives stage s of S exactly n
 * instructions, or 0.  The count grows by a constant per microbatch once
 * M > S, so beyond that it is solved and checked; below, searched. */
static guint microbatches_for(guint S, guint s, guint64 n)
{
  guint m0 = S + 1;
  for (guint m = 1; m <= m0; m++)
    if (sched_instructions(S, m, s) == n)
      return m;
  guint64 c0 = sched_instructions(S, m0, s);
  guint64 d = sched_instructions(S, m0 + 1, s) - c0;
  if (n <= c0 || d == 0 || (n - c0) % d != 0)
    return 0;
  guint64 m = m0 + (n - c0) / d;
  if (m > G_MAXUINT16 || sched_instructions(S, (guint)m, s) != n)
    return 0;
  return (guint)m;
}

typedef struct {
  const yajl_val *clocks; /* the rank's power_states */
  guint16 *out;           /* its stage's 2M clocks, (m * 2 + b) */
  guint64 i;              /* the instruction being emitted */
} Fill;

static void fill_one(Ins ins, gint64 mb, gpointer data)
{
  Fill *f = data;
  if (ins != INS_OTHER)
    f->out[mb * 2 + (ins == INS_BACKWARD)] =
        (guint16)YAJL_GET_INTEGER(f->clocks[f->i]);
  f->i++;
}

void sched_plan_free(SchedPlan *p)
{
  if (p == NULL)
    return;
  g_free(p->mhz);
  g_free(p);
}

static SchedPlan *parse_fail(GError **error, const char *path,
                             const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static SchedPlan *parse_fail(GError **error, const char *path,
                             const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, SCHED_ERROR, SCHED_ERROR_PARSE, "%s: %s", path, msg);
  return NULL;
}

/* The power_states of rank object o (index k of the list), checked: an
 * array of integers in 1..65535.  *rank gets its rank. */
static const yajl_val *rank_clocks(yajl_val o, guint k, const char *path,
                                   gint64 *rank, gsize *n, GError **error)
{
  static const char *rank_key[] = {"rank", NULL};
  static const char *ps_key[] = {"power_states", NULL};
  if (!YAJL_IS_OBJECT(o)) {
    parse_fail(error, path, "entry %u is not an object {\"rank\": r, "
               "\"power_states\": [...]}", k);
    return NULL;
  }
  yajl_val r = yajl_tree_get(o, rank_key, yajl_t_number);
  yajl_val ps = yajl_tree_get(o, ps_key, yajl_t_array);
  if (r == NULL || !YAJL_IS_INTEGER(r) || YAJL_GET_INTEGER(r) < 0 ||
      YAJL_GET_INTEGER(r) > 65535) {
    parse_fail(error, path, "entry %u has no integer \"rank\" in 0..65535",
               k);
    return NULL;
  }
  *rank = YAJL_GET_INTEGER(r);
  if (ps == NULL) {
    parse_fail(error, path, "rank %" G_GINT64_FORMAT " has no "
               "\"power_states\" list", *rank);
    return NULL;
  }
  *n = YAJL_GET_ARRAY(ps)->len;
  /* (yajl gives an empty array no values: NULL, which the caller takes
   * for failure; it must come with an error: found by fuzz-sched.) */
  if (*n == 0) {
    parse_fail(error, path, "rank %" G_GINT64_FORMAT " has an empty "
               "\"power_states\" list", *rank);
    return NULL;
  }
  const yajl_val *v = YAJL_GET_ARRAY(ps)->values;
  for (gsize i = 0; i < *n; i++)
    if (!YAJL_IS_INTEGER(v[i]) || YAJL_GET_INTEGER(v[i]) < 1 ||
        YAJL_GET_INTEGER(v[i]) > 65535) {
      parse_fail(error, path, "rank %" G_GINT64_FORMAT ", power_states[%"
                 G_GSIZE_FORMAT "]: not a clock in MHz (an integer in "
                 "1..65535)", *rank, i);
      return NULL;
    }
  return v;
}

/* The plan of the parsed file root (borrowed). */
static SchedPlan *plan_of(yajl_val root, const char *path, GError **error)
{
  if (!YAJL_IS_ARRAY(root) || YAJL_GET_ARRAY(root)->len == 0 ||
      YAJL_GET_ARRAY(root)->len > 4096) {
    return parse_fail(error, path, "not a schedule: expected a list of "
                      "1..4096 ranks, each {\"rank\": r, \"power_states\": "
                      "[MHz, ...]}");
  }
  guint S = (guint)YAJL_GET_ARRAY(root)->len;
  g_autofree const yajl_val **clocks = g_new0(const yajl_val *, S);
  g_autofree gsize *counts = g_new0(gsize, S);
  for (guint k = 0; k < S; k++) {
    gint64 rank = 0;
    gsize n = 0;
    const yajl_val *v = rank_clocks(YAJL_GET_ARRAY(root)->values[k], k,
                                    path, &rank, &n, error);
    if (v == NULL)
      return NULL;
    if (rank >= S || clocks[rank] != NULL)
      return parse_fail(error, path, "rank %" G_GINT64_FORMAT " %s: the file "
                 "has %u ranks, which must be 0..%u once each (one "
                 "pipeline, rank = stage)", rank,
                 rank >= S ? "is out of range" : "appears twice", S, S - 1);
    clocks[rank] = v;
    counts[rank] = n;
  }
  guint M = 0;
  for (guint s = 0; s < S; s++) {
    guint m = microbatches_for(S, s, counts[s]);
    if (m == 0) {
      g_set_error(error, SCHED_ERROR, SCHED_ERROR_SHAPE,
                  "%s: rank %u holds %" G_GSIZE_FORMAT " clocks, which no "
                  "microbatch count gives stage %u of %u in Merak's 1F1B "
                  "schedule (%" G_GUINT64_FORMAT " for 1 microbatch, %"
                  G_GUINT64_FORMAT " for 2, ...)", path, s, counts[s], s, S,
                  sched_instructions(S, 1, s), sched_instructions(S, 2, s));
      return NULL;
    }
    if (M != 0 && m != M) {
      g_set_error(error, SCHED_ERROR, SCHED_ERROR_SHAPE,
                  "%s: rank 0 holds the schedule of %u microbatches, rank %u "
                  "of %u (%" G_GSIZE_FORMAT " clocks)", path, M, s, m,
                  counts[s]);
      return NULL;
    }
    M = m;
  }
  SchedPlan *out = g_new0(SchedPlan, 1);
  out->n_stages = S;
  out->n_microbatches = M;
  out->mhz = g_new0(guint16, (gsize)2 * S * M);
  for (guint s = 0; s < S; s++) {
    Fill f = {clocks[s], out->mhz + (gsize)2 * s * M, 0};
    walk(S, M, s, fill_one, &f);
    g_assert(f.i == counts[s]);
  }
  return out;
}

/* The deepest nesting of arrays and objects in JSON text (brackets outside
 * strings; a string's backslash escapes its next byte), stopping early once
 * it passes `limit`.  Linear, no allocation: run before yajl builds (and
 * later frees, recursively) a tree. */
static guint json_depth(const char *text, gsize len, guint limit)
{
  guint depth = 0, max = 0;
  gboolean in_string = FALSE;
  for (gsize i = 0; i < len && max <= limit; i++) {
    char c = text[i];
    if (in_string) {
      if (c == '\\')
        i++;
      else if (c == '"')
        in_string = FALSE;
    } else if (c == '"') {
      in_string = TRUE;
    } else if (c == '[' || c == '{') {
      max = MAX(max, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      depth--;
    }
  }
  return max;
}

SchedPlan *sched_plan_load(const char *path, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  g_autofree char *text = NULL;
  gsize len = 0;
  /* Opened once, a regular file only (a FIFO would block), its size checked
   * before it is read (a sparse 1 GB file would be read whole). */
  IoInput in;
  if (!io_input_open(&in, path, "sched: open", SCHED_ERROR, SCHED_ERROR_IO,
                     error))
    return NULL;
  gboolean read = io_input_read_all(&in, path, SCHED_MAX_BYTES,
                                    "a schedule", "sched: read", SCHED_ERROR,
                                    SCHED_ERROR_IO, &text, &len, error);
  io_input_close(&in);
  if (!read)
    return NULL;
  if (strlen(text) != len)
    return parse_fail(error, path, "not a schedule (a NUL byte inside)");
  if (json_depth(text, len, SCHED_MAX_DEPTH) > SCHED_MAX_DEPTH)
    return parse_fail(error, path, "not a schedule (arrays and objects "
                      "nested deeper than %d levels)", SCHED_MAX_DEPTH);
  char errbuf[256] = "";
  yajl_val root = yajl_tree_parse(text, errbuf, sizeof errbuf);
  if (root == NULL) {
    g_strchomp(errbuf);
    for (char *c = errbuf; *c != '\0'; c++)
      if (*c == '\n')
        *c = ' ';
    return parse_fail(error, path, "not JSON: %s", errbuf);
  }
  SchedPlan *out = plan_of(root, path, error);
  yajl_tree_free(root);
  return out;
}
