/* traces/chakra.c -- importer of MLCommons Chakra execution traces.
 *
 * Format: one file per rank, a stream of protobuf messages, each preceded
 * by its length as a base-128 varint; the first is a GlobalMetadata, every
 * other one a Node (schema: traces/chakra.proto).  A node has an id, a
 * name, a type (COMP_NODE, COMM_COLL_NODE, COMM_SEND_NODE, ...), control
 * and data dependencies (node ids), a duration in microseconds and typed
 * attributes: is_cpu_op, tid (for GPU nodes: the CUDA stream), comm_type
 * (CollectiveCommType), comm_size (bytes), comm_src / comm_dst (p2p peers).
 *
 * What becomes an op: GPU nodes -- is_cpu_op false, or, when the attribute
 * is absent, every COMP and COMM node (ASTRA-sim's reading).  CPU nodes and
 * other node types are not replayed, but dependencies are followed
 * *through* them.
 *
 * Algorithm
 *  1. Read all nodes (ids, names interned, deps in one shared array).
 *  2. Topological order (Kahn, ties broken by file order).  Dependencies
 *     on ids absent from the file are ignored (the PyTorch converter drops
 *     some CPU parents), and so are self-dependencies; real converted
 *     traces also hold a few cycles (pytorch_rank0.0.et: a CPU op whose
 *     control dependency is its own kernel), so when no node is ready the
 *     earliest waiting node in file order is released and its unmet
 *     dependencies are dropped.  Both are counted in warnings.  A cycle
 *     of GPU nodes alone is no converter artefact: the file is refused,
 *     naming a node on the cycle.
 *  3. Streams: GPU node -> (its tid attribute, else 0 for compute, 1 for
 *     collectives, one for sends and one for receives per peer -- or one
 *     for all sends and one for all receives when those would pass 64),
 *     dense indices in ascending tid order; ops of a stream in
 *     topological order.
 *  4. Dependencies: every node exports "the latest op on each stream that
 *     must have finished": a GPU node exports itself, a CPU node the
 *     per-stream maximum over its dependencies; so does a send (eager, as
 *     ASTRA-sim replays it: its dependents do not wait for its receive).  A GPU node needs the same
 *     maximum over its dependencies; entries on its own stream are implied
 *     by stream order, and for k other streams it gets k - 1 zero-duration
 *     marker ops before it on its stream (each waiting for one producer)
 *     and waits itself for the last: exact, since SimOp has one wait.
 *  5. Phase: from the node's own name, else from the CPU ops it depends on
 *     (its launching op is among them), walking up their control parents:
 *     the first name that marks a phase (traces/classify.c, e.g.
 *     "ConvolutionBackward0" -> backward).  Forward when the file marks
 *     phases anywhere, else other.  A heuristic: documented, not exact.
 *  6. Communication: collectives go to a group of every imported rank
 *     (Chakra traces name no member lists; one file per rank of the job)
 *     and are priced by the network model, unless only one rank is
 *     imported or opt->comm_recorded: then they replay their recorded
 *     duration (on a one-rank group).  Sends/receives pair with their peer
 *     when it is imported, else replay their recorded duration.  When the
 *     counts do not pair up across files, everything falls back to
 *     recorded durations (warned).
 *  7. Ranks: the number in "NAME.<r>.et" when every file has a distinct
 *     one, else file order.
 *
 * Durations: duration_micros (integer us) -> ref_ns; a GPU node without a
 * duration replays as 0 ns (counted in a warning).  Kernel shapes per
 * (name, class) with no FLOPs/bytes, as for Kineto.
 */
#include "traces/import-private.h"
#include "traces/classify.h"
#include "io/fault.h"
#include "io/input.h"
#include "models/dag.h"
#include "chakra.pb-c.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_MESSAGE (256u << 20)
/* Nodes of one file, at most: 4 Mi nodes of sizeof(CNode) bytes each is
 * some 340 MB before names and dependencies (a real PyTorch execution
 * trace holds 10^4..10^6 per rank).  A node message is never empty (a node
 * has an id and a name), so a file of N bytes also holds fewer than N / 3
 * nodes: each is a length byte and at least one 2-byte field.  Without
 * these bounds, 100 MB of zero bytes would be 10^8 empty messages, each an
 * 80-byte node: 8 GB requested. */
#define MAX_NODES (4u << 20)

typedef struct {
  guint64 id;
  guint32 name;
  guint32 dep_off, n_deps, n_ctrl; /* deps: ctrl first, then data */
  gint64 dur_ns;
  gint64 tid;          /* -1 absent */
  gint64 comm_type, comm_size, comm_src, comm_dst; /* -1 absent */
  guint8 type;
  gint8 is_cpu;        /* -1 absent */
} CNode;

typedef struct {
  char *path;
  gint64 file_rank;    /* from the file name, -1 none */
  GArray *nodes;       /* CNode */
  GArray *deps;        /* guint64 ids */
  char *version;
} CFile;

static void cfile_free(CFile *f)
{
  if (f == NULL)
    return;
  g_free(f->path);
  g_free(f->version);
  if (f->nodes != NULL)
    g_array_unref(f->nodes);
  if (f->deps != NULL)
    g_array_unref(f->deps);
  g_free(f);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CFile, cfile_free)

/* ---- reading ------------------------------------------------------------ */

static gboolean attr_int(const ChakraProtoMsg__AttributeProto *a, gint64 *v)
{
  switch (a->value_case) {
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT32_VAL:
    *v = a->int32_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL:
    *v = a->int64_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT32_VAL:
    *v = a->uint32_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT64_VAL:
    *v = (gint64)a->uint64_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SINT32_VAL:
    *v = a->sint32_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SINT64_VAL:
    *v = a->sint64_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_FIXED32_VAL:
    *v = a->fixed32_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_FIXED64_VAL:
    *v = (gint64)a->fixed64_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SFIXED32_VAL:
    *v = a->sfixed32_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SFIXED64_VAL:
    *v = a->sfixed64_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_BOOL_VAL:
    *v = a->bool_val ? 1 : 0; return TRUE;
  default:
    return FALSE;
  }
}

/* Reads a varint; 0 = ok, 1 = clean EOF before any byte, -1 = truncated or
 * too long. */
static int read_varint(FILE *f, guint64 *out)
{
  guint64 v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    int c = getc(f);
    if (c == EOF)
      return shift == 0 ? 1 : -1;
    v |= (guint64)(c & 0x7f) << shift;
    if ((c & 0x80) == 0) {
      *out = v;
      return 0;
    }
  }
  return -1;
}

/* Appends node nd (its dependencies into cf->deps, control first). */
static void add_node(CFile *cf, SimWorkload *names,
                     const ChakraProtoMsg__Node *nd)
{
  CNode c = {0};
  c.id = nd->id;
  c.name = sim_workload_intern(names, nd->name != NULL && *nd->name
                                          ? nd->name : "(unnamed node)");
  c.type = (guint8)MIN((guint)nd->type, 255u);
  c.dur_ns = (gint64)MIN(nd->duration_micros, (guint64)G_MAXINT64 / 1000) *
             1000;
  c.tid = c.comm_type = c.comm_size = c.comm_src = c.comm_dst = -1;
  c.is_cpu = -1;
  c.dep_off = cf->deps->len;
  c.n_ctrl = (guint32)nd->n_ctrl_deps;
  c.n_deps = (guint32)(nd->n_ctrl_deps + nd->n_data_deps);
  g_array_append_vals(cf->deps, nd->ctrl_deps, (guint)nd->n_ctrl_deps);
  g_array_append_vals(cf->deps, nd->data_deps, (guint)nd->n_data_deps);
  for (size_t i = 0; i < nd->n_attr; i++) {
    const ChakraProtoMsg__AttributeProto *a = nd->attr[i];
    gint64 v;
    if (a->name == NULL || !attr_int(a, &v))
      continue;
    if (strcmp(a->name, "is_cpu_op") == 0)
      c.is_cpu = v != 0;
    else if (strcmp(a->name, "tid") == 0)
      c.tid = v;
    else if (strcmp(a->name, "comm_type") == 0)
      c.comm_type = v;
    else if (strcmp(a->name, "comm_size") == 0)
      c.comm_size = v;
    else if (strcmp(a->name, "comm_src") == 0)
      c.comm_src = v;
    else if (strcmp(a->name, "comm_dst") == 0)
      c.comm_dst = v;
  }
  g_array_append_val(cf->nodes, c);
}

/* Number in "NAME.<r>.et", or -1. */
static gint64 rank_from_name(const char *path)
{
  g_autofree char *base = g_path_get_basename(path);
  gsize n = strlen(base);
  if (n < 4 || g_ascii_strcasecmp(base + n - 3, ".et") != 0)
    return -1;
  gsize end = n - 3, i = end;
  while (i > 0 && g_ascii_isdigit(base[i - 1]))
    i--;
  if (i == end || i == 0 || base[i - 1] != '.' || end - i > 9)
    return -1;
  return g_ascii_strtoll(base + i, NULL, 10);
}

/* Nodes read before the memory check is asked (at every doubling). */
#define NODES_CHECK_FROM (64u << 10)

static CFile *read_file(const char *path, SimWorkload *names,
                        const TraceImportOptions *opt, GError **error)
{
  /* Opened once (io/input.h): a FIFO or a device is refused. */
  IoInput in;
  if (!io_input_open(&in, path, "chakra: open", TRACE_ERROR, TRACE_ERROR_IO,
                     error))
    return NULL;
  FILE *f = io_input_fdopen(&in, path, TRACE_ERROR, TRACE_ERROR_IO, error);
  if (f == NULL)
    return NULL;
  g_autoptr(CFile) cf = g_new0(CFile, 1);
  cf->path = g_strdup(path);
  cf->file_rank = rank_from_name(path);
  cf->nodes = g_array_new(FALSE, FALSE, sizeof(CNode));
  cf->deps = g_array_new(FALSE, FALSE, sizeof(guint64));
  g_autoptr(GByteArray) buf = g_byte_array_new();
  guint64 offset = 0, index = 0;
  gboolean ok = TRUE;
  /* The file's size bounds every message: a length past the end is
   * truncation, reported before anything is allocated (a 24-byte file
   * announcing 251 MB made every import allocate it: found by
   * tests/fuzz/fuzz-chakra.c). */
  struct stat fst;
  gint64 file_size = fstat(fileno(f), &fst) == 0 && S_ISREG(fst.st_mode)
                         ? (gint64)fst.st_size : -1;
  for (;; index++) {
    guint64 len;
    int rc = read_varint(f, &len);
    if (rc == 1)
      break;
    if (rc < 0 || len > MAX_MESSAGE) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                  "%s: message %" G_GUINT64_FORMAT " at byte %"
                  G_GUINT64_FORMAT ": %s", path, index, offset,
                  rc < 0 ? "truncated length prefix" : "implausible length");
      ok = FALSE;
      break;
    }
    gint64 here = file_size >= 0 ? (gint64)ftello(f) : -1;
    gboolean past_end = here >= 0 && len > (guint64)(file_size - here);
    if (!past_end)
      g_byte_array_set_size(buf, (guint)len);
    if (past_end || (len > 0 && fread(buf->data, 1, len, f) != len)) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                  "%s: message %" G_GUINT64_FORMAT " at byte %"
                  G_GUINT64_FORMAT " is truncated (%" G_GUINT64_FORMAT
                  " bytes announced)", path, index, offset, len);
      ok = FALSE;
      break;
    }
    offset += len + 1;
    if (index == 0) {
      ChakraProtoMsg__GlobalMetadata *gm =
          chakra_proto_msg__global_metadata__unpack(NULL, len, buf->data);
      if (gm == NULL) {
        g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                    "%s: the first message is not a Chakra GlobalMetadata",
                    path);
        ok = FALSE;
        break;
      }
      cf->version = g_strdup(gm->version != NULL ? gm->version : "");
      chakra_proto_msg__global_metadata__free_unpacked(gm, NULL);
      continue;
    }
    if (len == 0 || cf->nodes->len >= MAX_NODES) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                  len == 0 ? "%s: message %" G_GUINT64_FORMAT " (byte %"
                             G_GUINT64_FORMAT ") is an empty Chakra Node "
                             "(no id, no name)"
                           : "%s: message %" G_GUINT64_FORMAT " (byte %"
                             G_GUINT64_FORMAT ") is one node too many (at "
                             "most 4,194,304 per file)", path, index,
                  offset - len - 1);
      ok = FALSE;
      break;
    }
    /* The node array doubles: ask --max-memory before it does (the
     * estimate is the new array; names and dependencies come on top). */
    guint nn = cf->nodes->len;
    if (opt->memory_check != NULL && nn >= NODES_CHECK_FROM &&
        (nn & (nn - 1)) == 0) {
      g_autofree char *what = g_strdup_printf("%s: %u Chakra nodes", path,
                                              2 * nn);
      if (!opt->memory_check(opt->memory_check_data,
                             (guint64)2 * nn * sizeof(CNode), what, error)) {
        ok = FALSE;
        break;
      }
    }
    ChakraProtoMsg__Node *nd = chakra_proto_msg__node__unpack(NULL, len,
                                                              buf->data);
    if (nd == NULL) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                  "%s: message %" G_GUINT64_FORMAT " (byte %" G_GUINT64_FORMAT
                  ") is not a valid Chakra Node", path, index,
                  offset - len - 1);
      ok = FALSE;
      break;
    }
    add_node(cf, names, nd);
    chakra_proto_msg__node__free_unpacked(nd, NULL);
  }
  if (ok && ferror(f)) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_IO, "%s: read error", path);
    ok = FALSE;
  }
  fclose(f);
  if (!ok)
    return NULL;
  if (index == 0) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT, "%s: empty file",
                path);
    return NULL;
  }
  if (cf->nodes->len == 0) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                "%s: no nodes after the GlobalMetadata", path);
    return NULL;
  }
  return g_steal_pointer(&cf);
}

/* ---- analysis ----------------------------------------------------------- */

static gboolean is_gpu(const CNode *c)
{
  if (c->is_cpu >= 0)
    return c->is_cpu == 0 &&
           (c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE ||
            c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE ||
            c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE ||
            c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE);
  return c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE ||
         c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE ||
         c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE ||
         c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE;
}

static gboolean is_comm(const CNode *c)
{
  return c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE ||
         c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE ||
         c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE;
}

static SimCollType coll_of(gint64 t)
{
  switch (t) {
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_GATHER:
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__GATHER:
    return SIM_COLL_ALL_GATHER;
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__SCATTER:
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__BROADCAST:
    return SIM_COLL_BROADCAST;
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_TO_ALL:
    return SIM_COLL_ALL_TO_ALL;
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__REDUCE_SCATTER:
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__REDUCE_SCATTER_BLOCK:
    return SIM_COLL_REDUCE_SCATTER;
  default: /* ALL_REDUCE, REDUCE, BARRIER */
    return SIM_COLL_ALL_REDUCE;
  }
}

/* Per stream and position: (stream << 32 | pos), kept per node as a sorted
 * small set in `exp` (offsets in exp_off). */
typedef struct {
  guint32 stream, pos;
} Need;

/* Merges `add` (n) into the set held in `acc` (max pos per stream). */
static void need_merge(GArray *acc, const Need *add, guint n)
{
  for (guint i = 0; i < n; i++) {
    gboolean found = FALSE;
    for (guint k = 0; k < acc->len; k++) {
      Need *a = &g_array_index(acc, Need, k);
      if (a->stream == add[i].stream) {
        a->pos = MAX(a->pos, add[i].pos);
        found = TRUE;
        break;
      }
    }
    if (!found)
      g_array_append_val(acc, add[i]);
  }
}

/* The per-file result of the analysis: ops per stream with waits given as
 * (stream, position), to be laid out once the ranks are known. */
typedef struct {
  GArray **ops;        /* per stream: SimOp (wait = position in wstream) */
  GArray **wstream;    /* per stream: guint32 stream of each op's wait */
  GArray **node;       /* per stream: gint32 node index, -1 for markers */
  guint n_streams;
} Laid;

static void laid_clear(Laid *l)
{
  for (guint s = 0; s < l->n_streams; s++) {
    g_array_unref(l->ops[s]);
    g_array_unref(l->wstream[s]);
    g_array_unref(l->node[s]);
  }
  g_free(l->ops);
  g_free(l->wstream);
  g_free(l->node);
  memset(l, 0, sizeof *l);
}

static int cmp_i64p(const void *a, const void *b)
{
  gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;
  return x < y ? -1 : x > y;
}

/* Phase of CPU node i, following control parents (memoised in memo:
 * -2 unknown, -1 none, else SimPhase). */
static gint cpu_phase(const CFile *cf, const SimWorkload *names,
                      GHashTable *index, gint8 *memo, guint32 i)
{
  g_autoptr(GArray) chain = g_array_new(FALSE, FALSE, sizeof(guint32));
  gint ph = -1;
  guint32 cur = i;
  for (guint steps = 0; steps <= cf->nodes->len; steps++) {
    if (memo[cur] != -2) {
      ph = memo[cur];
      break;
    }
    g_array_append_val(chain, cur);
    const CNode *c = &g_array_index(cf->nodes, CNode, cur);
    gint own = trace_phase_of_annotation(sim_workload_name(names, c->name));
    if (own >= 0) {
      ph = own;
      break;
    }
    if (c->n_ctrl == 0) {
      ph = -1;
      break;
    }
    guint64 pid = g_array_index(cf->deps, guint64, c->dep_off);
    gpointer v = g_hash_table_lookup(index, &pid);
    if (v == NULL) {
      ph = -1;
      break;
    }
    cur = GPOINTER_TO_UINT(v) - 1;
  }
  for (guint k = 0; k < chain->len; k++)
    memo[g_array_index(chain, guint32, k)] = (gint8)ph;
  return ph;
}

/* Step 2: the id -> index + 1 map of cf's nodes; FALSE when an id repeats. */
static gboolean index_nodes(const CFile *cf, GHashTable *index,
                            GError **error)
{
  const CNode *nodes = (const CNode *)(void *)cf->nodes->data;
  for (guint i = 0; i < cf->nodes->len; i++) {
    if (g_hash_table_contains(index, &nodes[i].id)) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                  "%s: node id %" G_GUINT64_FORMAT " appears twice",
                  cf->path, nodes[i].id);
      return FALSE;
    }
    g_hash_table_insert(index, g_memdup2(&nodes[i].id, sizeof(guint64)),
                        GUINT_TO_POINTER(i + 1));
  }
  return TRUE;
}

/* Step 2: resolves every dependency into dep_idx (G_MAXUINT32: absent or
 * a node's own id, counted in *n_missing_deps / *n_dropped) and writes
 * the nodes into order, a topological order taking the lowest file index
 * first (models/dag.h, dag_order_lowest); a cycle releases its earliest
 * node and drops its unmet dependencies (counted in *n_dropped; they are
 * ignored below as well, since their producers come later in the order). */
static void order_nodes(const CFile *cf, GHashTable *index, guint32 *dep_idx,
                        guint32 *order, guint *n_missing_deps,
                        guint *n_dropped)
{
  guint n = cf->nodes->len;
  const CNode *nodes = (const CNode *)(void *)cf->nodes->data;
  const guint64 *deps = (const guint64 *)(void *)cf->deps->data;
  g_autoptr(GArray) edges = g_array_new(FALSE, FALSE, sizeof(guint32));
  for (guint i = 0; i < n; i++) {
    for (guint32 k = 0; k < nodes[i].n_deps; k++) {
      guint32 d = nodes[i].dep_off + k;
      gpointer v = g_hash_table_lookup(index, &deps[d]);
      dep_idx[d] = G_MAXUINT32;
      if (v == NULL) {
        (*n_missing_deps)++;
        continue;
      }
      guint32 j = GPOINTER_TO_UINT(v) - 1;
      if (j == i) {
        (*n_dropped)++; /* a node depending on itself */
        continue;
      }
      /* A node listed twice (ctrl and data) counts twice: harmless. */
      dep_idx[d] = j;
      guint32 e[2] = {j, i};
      g_array_append_vals(edges, e, 2);
    }
  }
  g_autoptr(Dag) g = dag_new(n, (const guint32 *)(void *)edges->data,
                             edges->len / 2, NULL);
  g_assert(g != NULL); /* indices in range, self-dependencies dropped */
  *n_dropped += dag_order_lowest(g, order);
}

/* Step 2: FALSE, with the error naming a node on the cycle, when GPU
 * nodes depend on each other in a cycle.  Cycles through CPU nodes are the
 * converter's artefacts and are broken (order_nodes); a cycle of replayed
 * ops is a graph no replay can honour (an ASTRA-sim workload is a DAG). */
static gboolean refuse_gpu_cycle(const CFile *cf, const SimWorkload *names,
                                 const guint32 *dep_idx, GError **error)
{
  guint n = cf->nodes->len;
  const CNode *nodes = (const CNode *)(void *)cf->nodes->data;
  g_autoptr(GArray) edges = g_array_new(FALSE, FALSE, sizeof(guint32));
  for (guint32 i = 0; i < n; i++)
    for (guint32 k = 0; k < nodes[i].n_deps && is_gpu(&nodes[i]); k++) {
      guint32 j = dep_idx[nodes[i].dep_off + k];
      if (j != G_MAXUINT32 && is_gpu(&nodes[j])) {
        guint32 e[2] = {j, i};
        g_array_append_vals(edges, e, 2);
      }
    }
  g_autoptr(Dag) g = dag_new(n, (const guint32 *)(void *)edges->data,
                             edges->len / 2, NULL);
  if (dag_acyclic(g))
    return TRUE;
  /* Every unordered node has an unordered predecessor: walking back from
   * one as many steps as there are such nodes ends on the cycle. */
  g_autofree gboolean *done = g_new0(gboolean, n);
  for (guint32 k = 0; k < g->n_ordered; k++)
    done[g->topo[k]] = TRUE;
  guint32 u = 0;
  while (done[u])
    u++;
  for (guint32 steps = 0; steps < n - g->n_ordered; steps++)
    for (guint32 k = g->pred_off[u]; k < g->pred_off[u + 1]; k++)
      if (!done[g->pred[k]]) {
        u = g->pred[k];
        break;
      }
  g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
              "%s: node %" G_GUINT64_FORMAT " (%s) depends on itself through "
              "a cycle of GPU nodes; a Chakra graph must be acyclic",
              cf->path, nodes[u].id, sim_workload_name(names, nodes[u].name));
  return FALSE;
}

/* Step 3: the stream of a GPU node without a tid: compute 0, collectives
 * 1, sends 2 + 2 (dst + 1), receives 3 + 2 (src + 1) (per_peer), else
 * sends 2, receives 3.  Sends and receives apart, so that a rank's receive
 * is posted while its own send waits for the peer (a ring's first step
 * sends on every rank, then receives); one stream per peer, so that a
 * send to one peer never waits behind a send to another that the graph
 * does not order before it (the engine matches p2p in order per pair). */
static gint64 default_stream(const CNode *c, gboolean per_peer)
{
  gint64 peer = c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE
                    ? c->comm_dst : c->comm_src;
  gint64 slot = per_peer && peer >= 0 && peer < G_MAXINT32
                    ? 2 * (peer + 1) : 0;
  switch (c->type) {
  case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE: return 1;
  case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE: return 2 + slot;
  case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE: return 3 + slot;
  default: return 0;
  }
}

/* Step 3: the stream of every GPU node (tid_of; -1 for CPU nodes) and the
 * sorted distinct streams (tids); the stream count. */
static guint distinct_streams(const CFile *cf, GArray *tids, gint64 *tid_of,
                              gboolean per_peer)
{
  guint n = cf->nodes->len;
  const CNode *nodes = (const CNode *)(void *)cf->nodes->data;
  g_array_set_size(tids, 0);
  for (guint i = 0; i < n; i++) {
    tid_of[i] = -1;
    if (!is_gpu(&nodes[i]))
      continue;
    tid_of[i] = nodes[i].tid >= 0 ? nodes[i].tid
                                  : default_stream(&nodes[i], per_peer);
    g_array_append_val(tids, tid_of[i]);
  }
  g_array_sort(tids, cmp_i64p);
  guint ns = 0;
  for (guint k = 0; k < tids->len; k++)
    if (ns == 0 || g_array_index(tids, gint64, k) !=
                       g_array_index(tids, gint64, ns - 1))
      g_array_index(tids, gint64, ns++) = g_array_index(tids, gint64, k);
  return ns;
}

/* Step 3: the streams (distinct_streams), one per p2p peer while they fit
 * in SIM_MAX_STREAMS, else one for all sends and one for all receives;
 * the stream count, 0 with an error. */
static guint gpu_streams(const CFile *cf, GArray *tids, gint64 *tid_of,
                         GError **error)
{
  guint ns = distinct_streams(cf, tids, tid_of, TRUE);
  if (ns > SIM_MAX_STREAMS)
    ns = distinct_streams(cf, tids, tid_of, FALSE);
  if (ns == 0) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                "%s: no GPU nodes (every node is a CPU op)", cf->path);
    return 0;
  }
  if (ns > SIM_MAX_STREAMS) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_UNSUPPORTED,
                "%s: %u GPU streams; at most %d per rank are supported",
                cf->path, ns, SIM_MAX_STREAMS);
    return 0;
  }
  g_array_set_size(tids, ns);
  return ns;
}

/* What step 4 reads and writes per file. */
typedef struct {
  const CFile *cf;
  SimWorkload *names;
  GHashTable *index;
  const guint32 *dep_idx;
  const GArray *tids;      /* distinct streams, sorted */
  const gint64 *tid_of;
  gint8 *memo;             /* cpu_phase's */
  gint8 *phase;            /* per node: its phase, -1 unknown */
  gboolean phases_known;
  guint32 marker_name;
  Laid *out;
  guint *n_no_dur;
} Lay;

/* Step 4 for GPU node i on stream s, needing `acc` (the latest op of
 * every stream its dependencies reach): its phase, a marker for every
 * other-stream need but the last (which the op waits on itself), then the
 * op. */
static void lay_gpu_op(Lay *l, guint32 i, guint s, const GArray *acc)
{
  const CNode *c = &g_array_index(l->cf->nodes, CNode, i);
  const CNode *nodes = (const CNode *)(void *)l->cf->nodes->data;
  Laid *out = l->out;
  gint ph = trace_phase_of_annotation(sim_workload_name(l->names, c->name));
  for (guint32 k = 0; k < c->n_deps && ph < 0; k++) {
    guint32 j = l->dep_idx[c->dep_off + k];
    if (j != G_MAXUINT32 && !is_gpu(&nodes[j]))
      ph = cpu_phase(l->cf, l->names, l->index, l->memo, j);
  }
  l->phases_known |= ph >= 0;
  l->phase[i] = (gint8)ph;
  /* Waits on other streams. */
  g_autoptr(GArray) other = g_array_new(FALSE, FALSE, sizeof(Need));
  for (guint k = 0; k < acc->len; k++)
    if (g_array_index(acc, Need, k).stream != s)
      g_array_append_val(other, g_array_index(acc, Need, k));
  for (guint k = 0; k + 1 < other->len; k++) {
    Need nd = g_array_index(other, Need, k);
    SimOp mk = {0};
    mk.kind = SIM_OP_MARKER;
    mk.klass = SIM_CLASS_OTHER;
    mk.stream = (guint8)s;
    mk.name = l->marker_name;
    mk.wait = nd.pos;
    mk.microbatch = G_MAXUINT16;
    mk.layer = 255;
    g_array_append_val(out->ops[s], mk);
    g_array_append_val(out->wstream[s], nd.stream);
    gint32 none = -1;
    g_array_append_val(out->node[s], none);
  }
  SimOp op = {0};
  op.stream = (guint8)s;
  op.name = c->name;
  op.ref_ns = c->dur_ns;
  op.microbatch = G_MAXUINT16;
  op.layer = 255;
  op.wait = SIM_NO_WAIT;
  guint32 ws = G_MAXUINT32;
  if (other->len > 0) {
    Need last = g_array_index(other, Need, other->len - 1);
    op.wait = last.pos;
    ws = last.stream;
  }
  if (c->dur_ns == 0)
    (*l->n_no_dur)++;
  g_array_append_val(out->ops[s], op);
  g_array_append_val(out->wstream[s], ws);
  gint32 ni = (gint32)i;
  g_array_append_val(out->node[s], ni);
}

/* The dense stream index of GPU node i. */
static guint stream_index(const Lay *l, guint32 i)
{
  guint s = 0;
  while (g_array_index(l->tids, gint64, s) != l->tid_of[i])
    s++;
  return s;
}

/* Step 4: every node in topological order.  A node exports the ops its
 * dependents must wait for ("needs"): a GPU op itself, a CPU op what its
 * own dependencies export, merged. */
static void lay_ops(Lay *l, const guint32 *order)
{
  guint n = l->cf->nodes->len;
  const CNode *nodes = (const CNode *)(void *)l->cf->nodes->data;
  g_autoptr(GArray) exp = g_array_new(FALSE, FALSE, sizeof(Need));
  g_autofree guint32 *exp_off = g_new0(guint32, n);
  g_autofree guint32 *exp_len = g_new0(guint32, n);
  g_autoptr(GArray) acc = g_array_new(FALSE, FALSE, sizeof(Need));
  for (guint oi = 0; oi < n; oi++) {
    guint32 i = order[oi];
    const CNode *c = &nodes[i];
    g_array_set_size(acc, 0);
    for (guint32 k = 0; k < c->n_deps; k++) {
      guint32 j = l->dep_idx[c->dep_off + k];
      if (j == G_MAXUINT32 || exp_len[j] == 0)
        continue;
      need_merge(acc, &g_array_index(exp, Need, exp_off[j]), exp_len[j]);
    }
    /* A CPU node passes its needs on; so does a send, which is eager in
     * Chakra (ASTRA-sim completes it without the receive posted) but a
     * rendezvous in the engine: waiting on it would deadlock a ring. */
    gboolean send = is_gpu(c) &&
                    c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE;
    if (!is_gpu(c) || send) {
      if (send)
        lay_gpu_op(l, i, stream_index(l, i), acc);
      exp_off[i] = exp->len;
      exp_len[i] = acc->len;
      g_array_append_vals(exp, acc->data, acc->len);
      continue;
    }
    guint s = stream_index(l, i);
    lay_gpu_op(l, i, s, acc);
    Need me = {s, l->out->ops[s]->len - 1};
    exp_off[i] = exp->len;
    exp_len[i] = 1;
    g_array_append_val(exp, me);
  }
}

/* Step 5: phases (the default depends on whether any op found one). */
static void lay_phases(Laid *out, const gint8 *phase, gboolean phases_known)
{
  for (guint s = 0; s < out->n_streams; s++)
    for (guint k = 0; k < out->ops[s]->len; k++) {
      SimOp *op = &g_array_index(out->ops[s], SimOp, k);
      gint32 ni = g_array_index(out->node[s], gint32, k);
      gint ph = ni >= 0 ? phase[ni] : -1;
      if (ni < 0 && k + 1 < out->ops[s]->len) {
        /* a marker takes its op's phase: the next real op */
        guint q = k + 1;
        while (q < out->ops[s]->len &&
               g_array_index(out->node[s], gint32, q) < 0)
          q++;
        if (q < out->ops[s]->len)
          ph = phase[g_array_index(out->node[s], gint32, q)];
      }
      op->phase = (guint8)(ph >= 0 ? ph
                           : phases_known ? SIM_PHASE_FORWARD
                                          : SIM_PHASE_OTHER);
    }
}

/* Steps 2-5 for one file: order, streams, waits, phases. */
static gboolean analyse(const CFile *cf, SimWorkload *names,
                        const TraceImportOptions *opt, Laid *out,
                        guint *n_missing_deps, guint *n_dropped,
                        guint *n_no_dur, GError **error)
{
  guint n = cf->nodes->len;
  g_autoptr(GHashTable) index = g_hash_table_new_full(g_int64_hash,
                                                      g_int64_equal, g_free,
                                                      NULL);
  if (!index_nodes(cf, index, error))
    return FALSE;
  g_autofree guint32 *dep_idx = g_new(guint32, MAX(cf->deps->len, 1));
  g_autofree guint32 *order = g_new(guint32, n);
  order_nodes(cf, index, dep_idx, order, n_missing_deps, n_dropped);
  if (!refuse_gpu_cycle(cf, names, dep_idx, error))
    return FALSE;

  g_autoptr(GArray) tids = g_array_new(FALSE, FALSE, sizeof(gint64));
  g_autofree gint64 *tid_of = g_new(gint64, n);
  guint ns = gpu_streams(cf, tids, tid_of, error);
  if (ns == 0)
    return FALSE;

  g_autofree gint8 *memo = g_new(gint8, n);
  memset(memo, -2, n);
  out->n_streams = ns;
  out->ops = g_new(GArray *, ns);
  out->wstream = g_new(GArray *, ns);
  out->node = g_new(GArray *, ns);
  for (guint s = 0; s < ns; s++) {
    out->ops[s] = g_array_new(FALSE, TRUE, sizeof(SimOp));
    out->wstream[s] = g_array_new(FALSE, FALSE, sizeof(guint32));
    out->node[s] = g_array_new(FALSE, FALSE, sizeof(gint32));
  }
  g_autofree gint8 *phase = g_new(gint8, n);
  Lay l = {cf, names, index, dep_idx, tids, tid_of, memo, phase, FALSE,
           sim_workload_intern(names, "chakra dependency"), out, n_no_dur};
  lay_ops(&l, order);
  lay_phases(out, phase, l.phases_known);
  (void)opt;
  return TRUE;
}

/* ---- import ------------------------------------------------------------- */

typedef struct {
  gint64 rank;
  guint idx;
} ROrder;

static int cmp_rorder(const void *a, const void *b)
{
  const ROrder *x = a, *y = b;
  if (x->rank != y->rank)
    return x->rank < y->rank ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Step 6: whether the files' collectives (same count on every rank) and
 * sends and receives (each send met by a receive) pair up; returns the
 * collective count. */
static guint comm_counts(GPtrArray *files, const ROrder *ro, const Laid *laid,
                         guint n, gboolean *coll_ok_out, gboolean *p2p_ok_out)
{
  guint n_coll_total = 0;
  g_autofree gint64 *coll_cnt = g_new0(gint64, n);
  g_autofree gint64 *p2p = g_new0(gint64, (gsize)n * n);
  for (guint r = 0; r < n; r++) {
    CFile *cf = g_ptr_array_index(files, ro[r].idx);
    for (guint s = 0; s < laid[r].n_streams; s++)
      for (guint k = 0; k < laid[r].ops[s]->len; k++) {
        gint32 ni = g_array_index(laid[r].node[s], gint32, k);
        if (ni < 0)
          continue;
        const CNode *c = &g_array_index(cf->nodes, CNode, ni);
        if (c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE) {
          coll_cnt[r]++;
          n_coll_total++;
        } else if (c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE ||
                   c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE) {
          gboolean send = c->type ==
                          CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE;
          gint64 peer = send ? c->comm_dst : c->comm_src;
          for (guint q = 0; q < n; q++)
            if (ro[q].rank == peer && q != r) {
              if (send)
                p2p[(gsize)r * n + q]++;
              else
                p2p[(gsize)q * n + r]--;
            }
        }
      }
  }
  gboolean coll_ok = TRUE;
  for (guint r = 1; r < n; r++)
    coll_ok &= coll_cnt[r] == coll_cnt[0];
  gboolean p2p_ok = TRUE;
  for (gsize k = 0; k < (gsize)n * n; k++)
    p2p_ok &= p2p[k] == 0;
  *coll_ok_out = coll_ok;
  *p2p_ok_out = p2p_ok;
  return n_coll_total;
}

/* The shape of kernel node c, one per kernel name (kshape: name + 1 ->
 * shape + 1). */
static guint32 kernel_shape(SimWorkload *w, GHashTable *kshape,
                            const CNode *c)
{
  gpointer v = g_hash_table_lookup(kshape, GUINT_TO_POINTER(c->name + 1));
  if (v == NULL) {
    SimShape sh = {0};
    sh.name = c->name;
    sh.klass = (guint8)trace_classify_kernel(sim_workload_name(w, c->name));
    if (sh.klass == SIM_CLASS_COMM)
      sh.klass = SIM_CLASS_OTHER;
    sh.tensor = sh.klass == SIM_CLASS_GEMM || sh.klass == SIM_CLASS_ATTENTION;
    v = GUINT_TO_POINTER(sim_workload_add_shape(w, &sh) + 1);
    g_hash_table_insert(kshape, GUINT_TO_POINTER(c->name + 1), v);
  }
  return GPOINTER_TO_UINT(v) - 1;
}

/* The shape of communication node c (coll: a collective, else a send or
 * receive), one per (name, collective, bytes) (cshape: key -> shape + 1). */
static guint32 comm_shape(SimWorkload *w, GHashTable *cshape, const CNode *c,
                          gboolean coll)
{
  SimCollType ct = coll ? coll_of(c->comm_type) : SIM_COLL_SEND_RECV;
  double bytes = c->comm_size > 0 ? (double)c->comm_size : 0.0;
  char key[96];
  g_snprintf(key, sizeof key, "%u|%d|%.17g", c->name, (int)ct, bytes);
  gpointer v = g_hash_table_lookup(cshape, key);
  if (v == NULL) {
    SimShape sh = {0};
    sh.name = c->name;
    sh.klass = SIM_CLASS_COMM;
    sh.coll = (guint8)ct;
    sh.bytes = bytes;
    v = GUINT_TO_POINTER(sim_workload_add_shape(w, &sh) + 1);
    g_hash_table_insert(cshape, g_strdup(key), v);
  }
  return GPOINTER_TO_UINT(v) - 1;
}

/* Step 7: the workload's reference GPU and provenance. */
static gboolean set_provenance(SimWorkload *w, GPtrArray *files,
                               const ROrder *ro, guint n,
                               const TraceImportOptions *opt,
                               guint64 solo_ops, GError **error)
{
  g_autofree char *ref = trace_ref_gpu(
      opt, NULL, ((CFile *)g_ptr_array_index(files, ro[0].idx))->path,
      error);
  if (ref == NULL)
    return FALSE;
  w->ref_gpu = g_strdup(ref);
  GHashTable *pv = w->provenance;
  GString *src = g_string_new(NULL), *gr = g_string_new(NULL);
  for (guint r = 0; r < n; r++) {
    CFile *cf = g_ptr_array_index(files, ro[r].idx);
    g_string_append_printf(src, r ? ";%s" : "%s", cf->path);
    g_string_append_printf(gr, r ? ",%" G_GINT64_FORMAT
                                 : "%" G_GINT64_FORMAT, ro[r].rank);
  }
  CFile *f0 = g_ptr_array_index(files, ro[0].idx);
  g_hash_table_insert(pv, g_strdup("importer"), g_strdup("chakra"));
  g_hash_table_insert(pv, g_strdup("sources"), g_string_free(src, FALSE));
  g_hash_table_insert(pv, g_strdup("global_ranks"),
                      g_string_free(gr, FALSE));
  g_hash_table_insert(pv, g_strdup("chakra_version"),
                      g_strdup(f0->version));
  g_hash_table_insert(pv, g_strdup("iteration"), g_strdup("all"));
  g_hash_table_insert(pv, g_strdup("ref_gpu"), g_strdup(ref));
  g_hash_table_insert(pv, g_strdup("comm_recorded_ops"),
                      g_strdup_printf("%" G_GUINT64_FORMAT, solo_ops));
  return TRUE;
}

/* Steps 6-7: communication, shapes, the workload.  Files in rank order
 * ro; laid[r] is rank r's analysis. */
static SimWorkload *assemble(GPtrArray *files, const ROrder *ro, Laid *laid,
                             guint n, const SimWorkload *names,
                             const TraceImportOptions *opt, GError **error)
{
  gboolean solo_all = n == 1 || opt->comm_recorded;
  gboolean coll_ok = TRUE, p2p_ok = TRUE;
  guint n_coll_total = comm_counts(files, ro, laid, n, &coll_ok, &p2p_ok);
  if (!solo_all && (!coll_ok || !p2p_ok))
    trace_warn(opt, "the files' %s do not pair up; they replay at their "
               "recorded durations",
               !coll_ok ? "collectives" : "sends and receives");

  g_autoptr(SimWorkload) w = sim_workload_new(n);
  for (guint k = 0; k < names->names->len; k++)
    sim_workload_intern(w, sim_workload_name(names, k));
  guint32 world = G_MAXUINT32;
  if (!solo_all && coll_ok && n_coll_total > 0) {
    g_autofree guint32 *all = g_new(guint32, n);
    for (guint r = 0; r < n; r++)
      all[r] = r;
    world = sim_workload_add_group(w, all, n);
  }
  SimShape ms = {0};
  ms.name = sim_workload_intern(w, "chakra dependency");
  ms.klass = SIM_CLASS_OTHER;
  guint32 marker_shape = sim_workload_add_shape(w, &ms);
  g_autoptr(GHashTable) kshape = g_hash_table_new(g_direct_hash,
                                                  g_direct_equal);
  g_autoptr(GHashTable) cshape = g_hash_table_new_full(g_str_hash,
                                                       g_str_equal, g_free,
                                                       NULL);
  guint64 solo_ops = 0;
  for (guint r = 0; r < n; r++) {
    CFile *cf = g_ptr_array_index(files, ro[r].idx);
    Laid *l = &laid[r];
    guint32 *off = g_new0(guint32, l->n_streams + 1);
    for (guint s = 0; s < l->n_streams; s++)
      off[s + 1] = off[s] + l->ops[s]->len;
    SimOp *ops = fault_try_alloc(off[l->n_streams], sizeof(SimOp),
                                 "chakra: op array", TRACE_ERROR,
                                 TRACE_ERROR_IO, error);
    if (ops == NULL) {
      g_free(off);
      g_prefix_error(error, "%s: ", cf->path);
      return NULL;
    }
    guint32 solo = G_MAXUINT32;
    for (guint s = 0; s < l->n_streams; s++)
      for (guint k = 0; k < l->ops[s]->len; k++) {
        SimOp op = g_array_index(l->ops[s], SimOp, k);
        guint32 ws = g_array_index(l->wstream[s], guint32, k);
        if (op.wait != SIM_NO_WAIT)
          op.wait = off[ws] + op.wait;
        gint32 ni = g_array_index(l->node[s], gint32, k);
        if (ni < 0) {
          op.shape = marker_shape;
          ops[off[s] + k] = op;
          continue;
        }
        const CNode *c = &g_array_index(cf->nodes, CNode, ni);
        if (!is_comm(c)) {
          op.shape = kernel_shape(w, kshape, c);
          op.kind = SIM_OP_KERNEL;
          op.klass = g_array_index(w->shapes, SimShape, op.shape).klass;
          ops[off[s] + k] = op;
          continue;
        }
        gboolean coll = c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE;
        op.shape = comm_shape(w, cshape, c, coll);
        op.klass = SIM_CLASS_COMM;
        gboolean matched = FALSE;
        if (coll && world != G_MAXUINT32) {
          op.kind = SIM_OP_COLLECTIVE;
          op.peer = world;
          matched = TRUE;
        } else if (!coll && !solo_all && p2p_ok) {
          gboolean send = c->type ==
                          CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE;
          gint64 peer = send ? c->comm_dst : c->comm_src;
          for (guint q = 0; q < n && !matched; q++)
            if (ro[q].rank == peer && q != r) {
              op.kind = send ? SIM_OP_SEND : SIM_OP_RECV;
              op.peer = q;
              matched = TRUE;
            }
        }
        if (matched) {
          op.ref_ns = 0;
        } else {
          if (solo == G_MAXUINT32)
            solo = sim_workload_add_group(w, &r, 1);
          op.kind = SIM_OP_COLLECTIVE;
          op.peer = solo;
          solo_ops++;
        }
        ops[off[s] + k] = op;
      }
    sim_workload_set_rank(w, r, ops, off[l->n_streams], off, l->n_streams);
  }
  if (solo_ops > 0)
    trace_warn(opt, "%" G_GUINT64_FORMAT " communication ops replay at their "
               "recorded durations (%s)", solo_ops,
               n == 1 ? "one rank imported" : "unmatched or comm_recorded");
  if (!set_provenance(w, files, ro, n, opt, solo_ops, error))
    return NULL;
  if (!sim_workload_validate(w, error)) {
    g_prefix_error(error, "imported Chakra workload is inconsistent: ");
    return NULL;
  }
  return g_steal_pointer(&w);
}

SimWorkload *trace_chakra_import(const char *const *paths, guint n,
                                 const TraceImportOptions *opt,
                                 GError **error)
{
  TraceImportOptions dflt = {0};
  if (opt == NULL)
    opt = &dflt;
  g_autoptr(SimWorkload) names = sim_workload_new(0);
  g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(
      (GDestroyNotify)cfile_free);
  for (guint i = 0; i < n; i++) {
    CFile *cf = read_file(paths[i], names, opt, error);
    if (cf == NULL)
      return NULL;
    g_ptr_array_add(files, cf);
  }
  /* Ranks: file-name numbers when all present and distinct. */
  g_autofree ROrder *ro = g_new(ROrder, n);
  gboolean named = TRUE;
  for (guint i = 0; i < n; i++) {
    ro[i].idx = i;
    ro[i].rank = ((CFile *)g_ptr_array_index(files, i))->file_rank;
    named &= ro[i].rank >= 0;
  }
  if (named) {
    qsort(ro, n, sizeof *ro, cmp_rorder);
    for (guint i = 1; i < n; i++)
      if (ro[i].rank == ro[i - 1].rank)
        named = FALSE;
  }
  if (!named)
    for (guint i = 0; i < n; i++) {
      ro[i].idx = i;
      ro[i].rank = i;
    }

  /* Analysis per file (rank order). */
  g_autofree Laid *laid = g_new0(Laid, n);
  gboolean ok = TRUE;
  guint missing = 0, dropped = 0, no_dur = 0;
  for (guint r = 0; r < n && ok; r++) {
    CFile *cf = g_ptr_array_index(files, ro[r].idx);
    ok = analyse(cf, names, opt, &laid[r], &missing, &dropped, &no_dur,
                 error);
  }
  SimWorkload *result = NULL;
  if (!ok)
    goto out;
  if (missing > 0)
    trace_warn(opt, "%u dependencies name nodes absent from the files; "
               "they were ignored", missing);
  if (dropped > 0)
    trace_warn(opt, "%u dependencies form cycles (or point to the node "
               "itself); they were dropped", dropped);
  if (no_dur > 0)
    trace_warn(opt, "%u GPU nodes record no duration; they replay as 0 ns",
               no_dur);

  result = assemble(files, ro, laid, n, names, opt, error);
out:
  for (guint r = 0; r < n; r++)
    if (laid[r].ops != NULL)
      laid_clear(&laid[r]);
  return result;
}
