/* traces/kineto_events.c -- what the Kineto reader (traces/kineto.c) does
 * with one finished trace event: GPU activities, runtime launches, CPU
 * ranges (iterations and phases), CPU operators with their recorded input
 * shapes (priced by traces/shapes.c), NCCL communication and stream waits,
 * appended to the raw rank.
 */
#include "traces/kineto-private.h"
#include "traces/classify.h"
#include "traces/shapes.h"

#include <math.h>
#include <string.h>

/* ---- events ------------------------------------------------------------- */

void kin_event_reset(Event *e)
{
  GString *name = e->name, *coll = e->coll, *dtype = e->dtype,
          *pgr = e->pg_ranks, *pgn = e->pg_name;
  memset(e, 0, sizeof *e);
  e->name = name;
  e->coll = coll;
  e->dtype = dtype;
  e->pg_ranks = pgr;
  e->pg_name = pgn;
  g_string_truncate(e->name, 0);
  g_string_truncate(e->coll, 0);
  g_string_truncate(e->dtype, 0);
  g_string_truncate(e->pg_ranks, 0);
  g_string_truncate(e->pg_name, 0);
  e->in_nelems = e->out_nelems = e->group_size = -1;
  e->src_rank = e->dst_rank = e->wait_stream = e->wait_corr = -1;
}

static gboolean is_nccl(Kin *k, guint32 name)
{
  if (name >= k->nccl->len) {
    guint old = k->nccl->len;
    g_byte_array_set_size(k->nccl, name + 1);
    memset(k->nccl->data + old, 0, name + 1 - old);
  }
  if (k->nccl->data[name] == 0)
    k->nccl->data[name] = trace_is_nccl_kernel(sim_workload_name(k->names,
                                                                 name))
                              ? 2 : 1;
  return k->nccl->data[name] == 2;
}

/* TraceCall of a runtime call name, cached per name id (value + 1). */
static TraceCall runtime_call(Kin *k, guint32 name)
{
  if (name >= k->calls->len) {
    guint old = k->calls->len;
    g_byte_array_set_size(k->calls, name + 1);
    memset(k->calls->data + old, 0, name + 1 - old);
  }
  if (k->calls->data[name] == 0)
    k->calls->data[name] = (guint8)(trace_runtime_call(sim_workload_name(
                                        k->names, name)) + 1);
  return (TraceCall)(k->calls->data[name] - 1);
}

/* Communication record of an NCCL kernel event. */
static guint32 add_comm(Kin *k, const Event *e)
{
  TraceRawComm c = {0};
  TraceCommKind kind = TRACE_COMM_COLL;
  SimCollType coll = SIM_COLL_ALL_REDUCE;
  if (!(e->has_coll &&
        trace_comm_from_collective_name(e->coll->str, &kind, &coll)))
    trace_comm_from_kernel_name(e->name->str, &kind, &coll);
  c.kind = (guint8)kind;
  c.coll = (guint8)coll;
  guint elem = e->has_dtype ? trace_dtype_bytes(e->dtype->str) : 0;
  if (elem == 0)
    elem = 4; /* float when the dtype is missing or unknown */
  gint64 nel = e->in_nelems;
  if ((kind == TRACE_COMM_COLL && coll == SIM_COLL_ALL_GATHER) ||
      kind == TRACE_COMM_RECV || nel < 0)
    nel = e->out_nelems >= 0 ? e->out_nelems : e->in_nelems;
  c.bytes = nel > 0 ? (double)nel * elem : 0.0;
  c.peer = kind == TRACE_COMM_SEND ? e->dst_rank
           : kind == TRACE_COMM_RECV ? e->src_rank : -1;
  c.group_size = e->group_size;
  c.ranks = e->has_pg_ranks && e->pg_ranks->len > 0
                ? g_strdup(e->pg_ranks->str) : NULL;
  c.pg_name = e->has_pg_name ? g_strdup(e->pg_name->str) : NULL;
  g_array_append_val(k->raw->comms, c);
  return k->raw->comms->len - 1;
}

/* Phase or step marked by a CPU event name.  The answer is cached per name
 * (value: code + 1; code 0 = nothing, 1 = a step, phase + 2 = a phase);
 * step names are unique per step and not cached. */
static void cpu_range(Kin *k, const Event *e)
{
  const char *name = e->name->str;
  gpointer v = g_hash_table_lookup(k->cpu_names, name);
  gint code;
  if (v != NULL) {
    code = GPOINTER_TO_INT(v) - 1;
  } else if (g_str_has_prefix(name, "ProfilerStep#")) {
    code = 1;
  } else {
    gint ph = trace_phase_of_annotation(name);
    code = ph >= 0 ? ph + 2 : 0;
    g_hash_table_insert(k->cpu_names, g_strdup(name),
                        GINT_TO_POINTER(code + 1));
  }
  if (code == 0)
    return;
  TraceRawRange r = {e->ts_ns, trace_ns_add(e->ts_ns, e->dur_ns), -1, -1,
                     e->has_tid ? e->tid : -1};
  if (code == 1) {
    if (!trace_parse_step(name, &r.step))
      return;
  } else {
    r.phase = code - 2;
  }
  g_array_append_val(k->raw->ranges, r);
}

/* Element bytes of an "Input type" string, cached (0: not a tensor). */
guint8 kin_type_elem(Kin *k, const char *s, size_t len)
{
  char buf[64];
  if (len == 0 || len >= sizeof buf)
    return 0;
  memcpy(buf, s, len);
  buf[len] = '\0';
  gpointer v = g_hash_table_lookup(k->types, buf);
  if (v != NULL)
    return (guint8)(GPOINTER_TO_UINT(v) - 1);
  guint e = MIN(trace_dtype_bytes(buf), 255u);
  g_hash_table_insert(k->types, g_strdup(buf), GUINT_TO_POINTER(e + 1));
  return (guint8)e;
}

/* The input of "Input Dims" being filled (NULL past the kept ones). */
TraceShapeInput *kin_cur_input(Kin *k)
{
  guint i = k->shp.n;
  return i > 0 && i <= TRACE_SHAPE_MAX_INPUTS ? &k->shp.in[i - 1] : NULL;
}

/* A scalar inside "Input Dims" or "Input type" that is not what the role
 * wants: the dims are damaged (the operator keeps class-only pricing). */
void kin_shape_scalar(Kin *k, Role r)
{
  TraceShapeInput *t;
  switch (r) {
  case R_DIMS:
    k->shp.malformed = TRUE;
    break;
  case R_DIM:
  case R_DIM_LIST:
    if ((t = kin_cur_input(k)) != NULL)
      t->bad = TRUE;
    break;
  case R_TYPES:
    k->shp.n_types++;
    break;
  default:
    break;
  }
}

/* One dim of the current input (or of its TensorList member). */
void kin_shape_dim(Kin *k, Role r, const char *s, size_t len)
{
  gint64 v;
  TraceShapeInput *t = kin_cur_input(k);
  if (!kin_parse_int(s, len, &v) || v < 0) {
    kin_shape_scalar(k, r);
    return;
  }
  if (t == NULL)
    return;
  if (r == R_DIM_LIST) {
    k->list_prod *= (double)v;
    return;
  }
  if (t->list) {
    t->bad = TRUE; /* numbers mixed with member lists */
    return;
  }
  if (t->rank < TRACE_SHAPE_MAX_RANK)
    t->dims[t->rank] = v;
  if (t->rank < 255)
    t->rank++;
  t->numel *= (double)v;
}

/* A CPU operator: kept with its time, thread, External id and, when its
 * shapes price it (traces/shapes.c), its work. */
static void cpu_op(Kin *k, const Event *e)
{
  TraceRawCpuOp c = {e->ts_ns, trace_ns_add(e->ts_ns, e->dur_ns),
                     e->has_tid ? e->tid : -1, e->has_ext ? e->ext : -1,
                     G_MAXUINT32};
  const char *name = e->name->str;
  gpointer v = g_hash_table_lookup(k->op_names, name);
  if (v == NULL) {
    gint op = trace_shape_operator(name);
    v = GINT_TO_POINTER(op + 2);
    g_hash_table_insert(k->op_names, g_strdup(name), v);
  }
  gint op = GPOINTER_TO_INT(v) - 2;
  /* Dims without "Input type" give no element size: not priced. */
  if (op >= 0 && k->shp.n_types > 0) {
    TraceShapeInputs *in = &k->shp;
    for (guint i = 0; i < MIN(in->n, TRACE_SHAPE_MAX_INPUTS); i++)
      in->in[i].elem = i < MIN(in->n_types, TRACE_SHAPE_MAX_INPUTS)
                           ? k->types_elem[i] : 0;
    TraceOpWork w;
    switch (trace_shape_work(op, in, &w)) {
    case TRACE_SHAPE_OK: {
      TraceRawWork rw = {w.flops, w.bytes, w.klass, w.elem};
      g_array_append_val(k->raw->works, rw);
      c.work = k->raw->works->len - 1;
      break;
    }
    case TRACE_SHAPE_BAD:
      if (k->raw->bad_shapes++ == 0)
        k->raw->bad_shape_op = g_strdup(name);
      break;
    default:
      break;
    }
  }
  g_array_append_val(k->raw->cpu_ops, c);
}

int kin_event_end(Kin *k)
{
  Event *e = &k->ev;
  guint64 idx = k->n_events++;
  if (e->ph != 'X' && e->ph != '\0')
    return 1;
  /* |ts|, |dur| < 2^62 ns (until the year 2116): ts + dur, which ranges
   * and the builder compute, cannot overflow (tests/fuzz/regress/kineto/
   * ts-plus-dur-overflow: ts = dur = 9e15 us overflowed in cpu_range). */
  if ((e->has_ts && (e->ts_ns >= KIN_MAX_NS || e->ts_ns <= -KIN_MAX_NS)) ||
      (e->has_dur && (e->dur_ns >= KIN_MAX_NS || e->dur_ns <= -KIN_MAX_NS)))
    FAIL(k, "traceEvents[%" G_GUINT64_FORMAT "] (\"%.60s\"): \"ts\" or "
         "\"dur\" out of range (beyond 146 years)", idx, e->name->str);
  switch (e->cat) {
  case C_KERNEL:
  case C_MEMCPY:
  case C_MEMSET: {
    if (!e->has_ts || !e->has_dur)
      FAIL(k, "traceEvents[%" G_GUINT64_FORMAT "] (%s \"%.60s\"): missing "
           "\"%s\"", idx, e->cat == C_KERNEL ? "kernel" : "memory op",
           e->name->str, e->has_ts ? "dur" : "ts");
    if (e->dur_ns < 0)
      FAIL(k, "traceEvents[%" G_GUINT64_FORMAT "] (\"%.60s\"): negative "
           "duration", idx, e->name->str);
    TraceRawOp op = {0};
    op.ts_ns = e->ts_ns;
    op.dur_ns = e->dur_ns;
    op.launch_ns = e->ts_ns;
    op.corr = e->has_corr ? e->corr : -1;
    op.device = e->has_device ? e->device : e->has_pid ? e->pid : 0;
    op.stream = e->has_stream ? e->stream : e->has_tid ? e->tid : 0;
    op.kind = e->cat == C_KERNEL ? TRACE_RAW_KERNEL
              : e->cat == C_MEMCPY ? TRACE_RAW_MEMCPY : TRACE_RAW_MEMSET;
    if (e->name->len == 0)
      g_string_assign(e->name, e->cat == C_KERNEL ? "(unnamed kernel)"
                               : e->cat == C_MEMCPY ? "Memcpy" : "Memset");
    op.name = sim_workload_intern(k->names, e->name->str);
    op.comm = G_MAXUINT32;
    op.work = G_MAXUINT32;
    if (e->cat == C_KERNEL && is_nccl(k, op.name))
      op.comm = add_comm(k, e);
    g_array_append_val(k->raw->ops, op);
    return 1;
  }
  case C_RUNTIME:
    if (e->has_corr && e->has_ts) {
      TraceRawLaunch l = {e->corr, e->ts_ns, -1, e->has_tid ? e->tid : -1,
                          e->has_ext ? e->ext : -1, 0, TRACE_CALL_OTHER};
      if (e->has_dur && e->dur_ns >= 0)
        l.dur_ns = e->dur_ns;
      else if (e->has_dur)
        k->raw->bad_host_durs++;
      l.name = sim_workload_intern(k->names, e->name->len > 0
                                                 ? e->name->str
                                                 : "(runtime call)");
      l.call = (guint8)runtime_call(k, l.name);
      g_array_append_val(k->raw->launches, l);
    }
    return 1;
  case C_SYNC:
    if (e->has_stream && e->has_corr && e->wait_stream >= 0 &&
        e->wait_corr >= 0 && strstr(e->name->str, "Wait") != NULL) {
      TraceRawSync s = {e->has_device ? e->device : e->has_pid ? e->pid : 0,
                        e->stream, e->corr, e->wait_stream, e->wait_corr};
      g_array_append_val(k->raw->syncs, s);
    }
    return 1;
  case C_GPU_ANNOT:
    return 1;
  case C_CPU_OP:
    if (e->has_ts && e->has_dur && e->name->len > 0) {
      cpu_range(k, e);
      if (e->dur_ns >= 0)
        cpu_op(k, e);
    }
    return 1;
  default:
    if (e->has_ts && e->has_dur && e->name->len > 0)
      cpu_range(k, e);
    return 1;
  }
}
