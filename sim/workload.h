/* sim/workload.h -- the engine's input: ranks, their op arrays, shapes, groups.
 *
 * A workload describes ONE training iteration; the engine replays it N times.
 *
 * Layout and invariants
 * ---------------------
 * Every rank owns one contiguous array of SimOp records (32 bytes each).
 * Ops are grouped by stream: the ops of stream s occupy the index range
 * [stream_off[s], stream_off[s+1]) and run in that order on the GPU.  The
 * CPU issue order across streams is not kept: the engine is a dataflow
 * (max-plus) computation, where an op starts when its stream is free, when
 * the op it waits for (SimOp.wait, any stream of the same rank) has finished
 * and, for communication, when all members have arrived.
 *
 * Costs are not stored per op but per *shape*: a shape is the cost key of a
 * family of identical ops (same kernel, same FLOPs and bytes, or the same
 * collective size and type).  Ops carry a reference duration (ref_ns, at the
 * reference GPU's maximum clocks) and the GPU model scales it by the ratio
 * t(clocks)/t(reference) of the op's shape.  A 175B / 1,024-GPU iteration has
 * 25.6 M ops but only 52 shapes, so everything expensive is computed per
 * shape and cached.
 *
 * Communication ops name a group (collectives; matched by the n-th collective
 * of that group on every member) or a peer rank (send/recv; the n-th send
 * from a to b matches the n-th recv on b from a).
 *
 * Shared programs.  In a Megatron layout the ranks of one pipeline stage
 * run the same op sequence and differ only in the groups and peers they
 * name.  So a rank may share another's op array (its *program*) instead of
 * owning a copy: SimRank.program names the shared array (w->programs), and
 * the rank's own peers are the program's shifted by a small per-rank
 * patch, peer_delta[op.patch] (op.patch 0 adds nothing; the generator uses
 * 1 for the DP group and tie ids, 2 for the TP id, 3 for the rank id).
 * Every reader of a peer goes through sim_op_peer(rank, op).  Memory is
 * O(distinct programs + ranks), not O(ops x ranks): 175B on 8,192 GPUs
 * holds 8 programs of ~25 k ops, not 8,192 copies (6.5 GB).  Imported
 * ranks share where they are alike (sim_workload_share_alike, in
 * sim/share.c: patch 1 for group ids, 3 for peer ranks), and native trace
 * files store each program once.  A rank that owns its ops (program
 * SIM_NO_PROGRAM: builders, imported ranks unlike any other) has all
 * deltas 0, so its peers are the ops' own.  Shared ops are read-only: a
 * consumer that edits a rank's ops first gives it its own copy
 * (sim_workload_materialise_rank).
 *
 * Host ops (SIM_OP_HOST, imported traces) are the CPU side of a rank: one
 * stream per CPU thread whose ops last their recorded ref_ns at any clocks
 * and draw no GPU power.  A GPU op waits for its launch by waiting for a
 * host op; a synchronising call is a host op waiting for a GPU op.  The
 * engine counts the time a host op runs as GPU idle time (unless a GPU op
 * of the rank runs then), so a host-bound step shows its idle power.
 *
 * Why this lives in sim/: the op record is the contract between whoever
 * produces work (traces/: generator, importers, native files) and the engine
 * that replays it; the engine must not depend on traces/ (DESIGN section 2),
 * so the record is defined here and traces/ build and serialise it.
 */
#ifndef SIM_WORKLOAD_H
#define SIM_WORKLOAD_H

#include <glib.h>
#include "sim/pcg.h"

G_BEGIN_DECLS

typedef enum {
  SIM_OP_KERNEL = 0,
  SIM_OP_COLLECTIVE,
  SIM_OP_SEND,
  SIM_OP_RECV,
  SIM_OP_MARKER, /* zero-duration annotation (iteration/microbatch boundary) */
  SIM_OP_HOST,   /* CPU time on a host stream: lasts ref_ns whatever the
                    clocks, draws no GPU power (the GPU idles meanwhile) */
  SIM_OP_KIND_COUNT
} SimOpKind;

typedef enum {
  SIM_CLASS_GEMM = 0,
  SIM_CLASS_ATTENTION,
  SIM_CLASS_ELEMENTWISE,
  SIM_CLASS_NORM,
  SIM_CLASS_SOFTMAX,
  SIM_CLASS_REDUCTION,
  SIM_CLASS_EMBEDDING,
  SIM_CLASS_OPTIMIZER,
  SIM_CLASS_MEMCPY,
  SIM_CLASS_COMM,
  SIM_CLASS_OTHER,
  SIM_CLASS_COUNT
} SimOpClass;

typedef enum {
  SIM_PHASE_FORWARD = 0,
  SIM_PHASE_BACKWARD,
  SIM_PHASE_OPTIMIZER,
  SIM_PHASE_OTHER,
  SIM_PHASE_COUNT
} SimPhase;

typedef enum {
  SIM_COLL_ALL_REDUCE = 0,
  SIM_COLL_ALL_GATHER,
  SIM_COLL_REDUCE_SCATTER,
  SIM_COLL_BROADCAST,
  SIM_COLL_ALL_TO_ALL,
  SIM_COLL_SEND_RECV,
  SIM_COLL_COUNT
} SimCollType;

#define SIM_NO_WAIT G_MAXUINT32
#define SIM_MAX_STREAMS 64

/* One kernel or communication call of one rank.  32 bytes. */
typedef struct {
  gint64 ref_ns;       /* duration at the reference GPU's max clocks; for
                          comm ops, 0 = let the network model decide, > 0 =
                          replay the recorded duration */
  guint32 shape;       /* index into SimWorkload.shapes */
  guint32 name;        /* interned name: index into SimWorkload.names */
  guint32 peer;        /* collective: group id; send/recv: peer rank */
  guint32 wait;        /* index (same rank) of an op on another stream that
                          must finish first, or SIM_NO_WAIT */
  guint16 microbatch;  /* G_MAXUINT16 when not applicable */
  guint8 layer;        /* 255 when not applicable */
  guint8 kind;         /* SimOpKind */
  guint8 klass;        /* SimOpClass */
  guint8 phase;        /* SimPhase */
  guint8 stream;       /* stream index within the rank */
  guint8 patch;        /* which of the rank's peer deltas shifts `peer`
                          (0: none; see "Shared programs") */
} SimOp;

G_STATIC_ASSERT(sizeof(SimOp) == 32);

/* The math unit a shape's FLOPs run on (SimShape.tensor; it was a boolean,
 * so 0 and 1 keep their meaning in older trace files). */
typedef enum {
  SIM_MATH_VECTOR = 0, /* CUDA cores, FP32 */
  SIM_MATH_TENSOR = 1, /* tensor cores at the 16-bit rate (BF16, FP16) */
  SIM_MATH_TF32 = 2,   /* tensor cores at the TF32 rate */
  SIM_MATH_FP8 = 3,    /* tensor cores at the FP8 rate (E4M3/E5M2 inputs) */
  SIM_MATH_COUNT
} SimMath;

/* The cost key of a family of ops. */
typedef struct {
  double flops;        /* floating-point operations per op (0 = unknown) */
  double bytes;        /* kernels: DRAM bytes moved; comm: message bytes */
  guint32 name;        /* interned name of the first op with this shape */
  guint8 klass;        /* SimOpClass */
  guint8 coll;         /* SimCollType (comm shapes) */
  guint8 tensor;       /* SimMath: where the FLOPs run */
  guint8 pad_;
} SimShape;

/* Peer deltas per rank: op.patch < SIM_PATCH_COUNT; delta 0 is always 0. */
#define SIM_PATCH_COUNT 4
#define SIM_NO_PROGRAM G_MAXUINT32

typedef struct {
  const SimOp *ops;    /* n_ops records: the rank's own (program ==
                          SIM_NO_PROGRAM) or its program's, shared */
  guint32 n_ops;
  guint32 n_streams;
  const guint32 *stream_off; /* n_streams + 1 offsets into ops; owned or
                                shared like ops */
  guint32 stage;       /* pipeline stage (0 when not pipelined) */
  guint32 program;     /* index into SimWorkload.programs, or
                          SIM_NO_PROGRAM when ops are the rank's own */
  guint32 peer_delta[SIM_PATCH_COUNT]; /* added (mod 2^32) to op.peer by
                                          op.patch; [0] is 0 */
} SimRank;

/* An op array shared by several ranks (see "Shared programs"). */
typedef struct {
  SimOp *ops;
  guint32 *stream_off;
  guint32 n_ops, n_streams;
} SimProgram;

/* The group (collective) or peer rank (send/recv) that op of rank rk
 * names. */
static inline guint32 sim_op_peer(const SimRank *rk, const SimOp *op)
{
  return op->peer + rk->peer_delta[op->patch & (SIM_PATCH_COUNT - 1)];
}

typedef struct {
  guint n_ranks;
  SimRank *ranks;          /* owned, n_ranks */
  GArray *shapes;          /* of SimShape */
  GPtrArray *names;        /* interned strings (owned) */
  GHashTable *name_index;  /* string -> index+1 (borrowed keys) */
  GArray *group_off;       /* guint32; n_groups + 1 offsets into group_ranks */
  GArray *group_ranks;     /* guint32 rank ids, ascending within a group */

  /* Layout (0 when not known, e.g. imported traces). */
  guint tp, pp, dp, microbatches;
  double tokens_per_iteration; /* for tokens/s; 0 when unknown */
  char *schedule;              /* "1f1b", "gpipe", ... or NULL */
  char *ref_gpu;               /* catalogue name the ref_ns were computed for */
  GHashTable *provenance;      /* string -> string, owned */
  /* Folding (docs/architecture.md, "Folded replay").  NULL: every rank is
   * replayed.  Otherwise n_ranks entries, owned: rank r is identical to
   * rank fold_rep[r] (same ops, same clocks, same prices, its peers and
   * groups the images of the representative's), and only representatives
   * (fold_rep[r] == r) carry ops; the others have none and take their
   * representative's results.  A folded workload is only valid on a
   * machine that prices every member of a class like its representative
   * (no variability, no stragglers, one plan per class). */
  guint32 *fold_rep;
  GPtrArray *programs;     /* of SimProgram (owned): the shared op arrays */
} SimWorkload;

/* Creates an empty workload with n_ranks ranks and no ops.  Caller owns it. */
SimWorkload *sim_workload_new(guint n_ranks);
void sim_workload_free(SimWorkload *w);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimWorkload, sim_workload_free)

/* Interns a string; returns its stable index. */
guint32 sim_workload_intern(SimWorkload *w, const char *name);
static inline const char *sim_workload_name(const SimWorkload *w, guint32 id)
{
  return (const char *)g_ptr_array_index(w->names, id);
}

/* Adds a shape and returns its index (no de-duplication). */
guint32 sim_workload_add_shape(SimWorkload *w, const SimShape *shape);

/* Adds a communicator group of n ranks (copied, must be ascending and
 * distinct); returns the group id. */
guint32 sim_workload_add_group(SimWorkload *w, const guint32 *ranks, guint n);
guint sim_workload_n_groups(const SimWorkload *w);
/* Members of group g: returns a borrowed pointer and sets *n. */
const guint32 *sim_workload_group(const SimWorkload *w, guint32 g, guint *n);

/* Sets rank r's ops, handing over ownership of `ops` (n_ops records, grouped
 * by stream) and `stream_off` (n_streams + 1 entries). */
void sim_workload_set_rank(SimWorkload *w, guint r, SimOp *ops, guint32 n_ops,
                           guint32 *stream_off, guint32 n_streams);

/* Makes rank r run rank src's program (shared, not copied; src's own op
 * array becomes a shared program first) with its peers shifted by
 * delta[1..SIM_PATCH_COUNT-1] where an op's patch says (delta[0] is
 * ignored: 0).  Whatever r held is freed.  r != src. */
void sim_workload_share_rank(SimWorkload *w, guint r, guint src,
                             const guint32 delta[SIM_PATCH_COUNT]);
/* Adds a shared program to w->programs, handing over `ops` (n_ops
 * records, grouped by stream, their patch bytes < SIM_PATCH_COUNT) and
 * `stream_off` (n_streams + 1 entries; both NULL for a program without
 * streams), and returns its index.  No rank runs it until
 * sim_workload_set_rank_program() says so.  For producers that store
 * programs themselves (the native trace loader); producers that build one
 * rank first and share it use sim_workload_share_rank(). */
guint32 sim_workload_add_program(SimWorkload *w, SimOp *ops, guint32 n_ops,
                                 guint32 *stream_off, guint32 n_streams);
/* Makes rank r run program p (an index into w->programs) with its peers
 * shifted by delta[1..SIM_PATCH_COUNT-1] (absolute: unlike
 * sim_workload_share_rank, not added to another rank's; delta[0] must be
 * 0).  Whatever r held is freed; its stage is kept. */
void sim_workload_set_rank_program(SimWorkload *w, guint r, guint32 p,
                                   const guint32 delta[SIM_PATCH_COUNT]);
/* Gives rank r its own copy of its ops with its peers resolved (every
 * patch 0), so that its ops may be edited; a no-op for a rank that owns
 * its ops.  The copy is the one allocation that may fail (io/fault.h,
 * site "workload: op array"): FALSE with SIM_ERROR_LIMIT, r unchanged. */
gboolean sim_workload_materialise_rank(SimWorkload *w, guint r,
                                       GError **error);
/* Every rank materialised (tests, and consumers that edit ops). */
gboolean sim_workload_materialise(SimWorkload *w, GError **error);
/* Rank r's ops as a writable array: materialises r first (aborts if that
 * allocation fails, as g_new does). */
SimOp *sim_workload_rank_ops_mut(SimWorkload *w, guint r);
/* Makes ranks that own alike ops share them (the algorithm: sim/share.c):
 * rank r runs an earlier rank t's ops as a program when the two hold the
 * same streams and op records, field by field, but for the peers, and
 * r's peers are t's shifted by one constant for all collectives (patch 1
 * in the program) and one for all sends and receives (patch 3).  Exact:
 * every rank's resolved ops (sim_op_peer) are what they were.  Ranks
 * without ops, ranks that already run a program and folded workloads are
 * left alone.  Returns the number of ranks that now run another rank's
 * ops (0: w unchanged).  For producers whose ranks are built one by one
 * (the importers). */
guint sim_workload_share_alike(SimWorkload *w);
/* Distinct op arrays held: ranks that own theirs plus shared programs. */
guint sim_workload_n_programs(const SimWorkload *w);
/* Ops stored (each shared program once): what the workload's memory is
 * proportional to, against sim_workload_n_ops (the ops replayed). */
guint64 sim_workload_n_stored_ops(const SimWorkload *w);

/* Total ops over all ranks. */
guint64 sim_workload_n_ops(const SimWorkload *w);
/* The keys of w->provenance in strcmp order: a new array (caller frees)
 * of borrowed strings. */
GPtrArray *sim_workload_provenance_keys(const SimWorkload *w);

/* FNV-1a over n bytes: the hash of the fixed-size, zero-padded keys that
 * GHashTables compare with memcmp (the generator's and the importer's
 * shape keys). */
static inline guint sim_hash_bytes(const void *p, gsize n)
{
  const guint8 *b = p;
  guint32 h = 2166136261u;
  for (gsize i = 0; i < n; i++)
    h = (h ^ b[i]) * 16777619u;
  return h;
}

/* A strong 64-bit mix for hash keys: splitmix64 (sim/pcg.h) of x. */
static inline guint64 sim_mix64(guint64 x)
{
  return sim_splitmix64_fin(x + SIM_SPLITMIX64_GAMMA);
}

/* A rank's program: its streams and every op field but the peer (which
 * names other ranks).  With timing_only, also leaves out what cannot change
 * timing: the stage and the microbatch and layer annotations.  Equal
 * programs hash equal; sim_rank_same_program() is the exact comparison. */
guint64 sim_rank_hash(const SimRank *rk, gboolean timing_only);
gboolean sim_rank_same_program(const SimRank *a, const SimRank *b,
                               gboolean timing_only);

/* Checks every invariant the engine relies on: shape, name, group and peer
 * indices in range, waits pointing to another stream's earlier-or-any op of
 * the same rank, stream offsets consistent, every collective's group
 * containing the rank, send/recv counts matching per (src, dst) pair and
 * collective counts matching per group.  Returns FALSE with a message naming
 * the rank and op on the first violation. */
gboolean sim_workload_validate(const SimWorkload *w, GError **error);

/* sim_workload_validate() in steps, for a consumer that makes its own pass
 * over each rank's ops (the engine) and wants it right after the check,
 * while the ops are in cache: new (group and fold_rep checks), rank() for
 * every rank r in 0..n_ranks-1, finish() (collective counts per group,
 * send/receive pairs).  Each returns FALSE/NULL with the error that
 * sim_workload_validate() would give. */
typedef struct SimValidator SimValidator;
SimValidator *sim_validator_new(const SimWorkload *w, GError **error);
gboolean sim_validator_rank(SimValidator *v, guint r, GError **error);
gboolean sim_validator_finish(SimValidator *v, GError **error);
void sim_validator_free(SimValidator *v);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimValidator, sim_validator_free)

/* Folds w in place: finds ranks whose replays are identical (same ops
 * field by field but the peers, partners of the same classes at the same
 * op indices: a partition refinement, verified exactly), keeps one
 * representative per class, sets fold_rep and frees the other ranks' ops
 * (they become empty: n_ops 0, ops and stream_off NULL).  Leaves w
 * unchanged and returns TRUE when no two ranks are identical.  Conservative:
 * a rank that issues one group's collectives, or one peer's sends or
 * receives, from several streams stays alone.  The network pricing of a
 * member's groups and peers is assumed equal to its representative's
 * (true for regular layouts on full nodes; not checkable here).  Fails
 * (SIM_ERROR_INVALID) when w is invalid or already folded.  The algorithm:
 * sim/fold.c. */
gboolean sim_workload_fold(SimWorkload *w, GError **error);

/* Helper for producers: builds one rank's ops stream by stream.  Append ops
 * to any stream in any order; sim_rank_builder_finish() lays them out
 * grouped by stream and rewrites `wait` fields, which producers give as the
 * value returned by sim_rank_builder_add() (a builder-local handle). */
typedef struct SimRankBuilder SimRankBuilder;
SimRankBuilder *sim_rank_builder_new(void);
void sim_rank_builder_free(SimRankBuilder *b);
/* Appends op (copied) and returns its handle for later `wait` references. */
guint32 sim_rank_builder_add(SimRankBuilder *b, const SimOp *op);
/* Installs the ops as rank r of w and resets the builder for reuse. */
void sim_rank_builder_finish(SimRankBuilder *b, SimWorkload *w, guint r);
/* Like sim_rank_builder_finish() but the op array is allocated with
 * fault_try_alloc (io/fault.h: FAULT_ALLOC, site "workload: op array"):
 * FALSE with SIM_ERROR_LIMIT naming rank r when it cannot be; the builder
 * and the workload are then unchanged. */
gboolean sim_rank_builder_try_finish(SimRankBuilder *b, SimWorkload *w,
                                     guint r, GError **error);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimRankBuilder, sim_rank_builder_free)

const char *sim_class_name(SimOpClass c);
const char *sim_phase_name(SimPhase p);
const char *sim_kind_name(SimOpKind k);
const char *sim_coll_name(SimCollType t);
/* Reverse lookups; return -1 when unknown. */
int sim_class_from_name(const char *s);
int sim_coll_from_name(const char *s);

#define SIM_ERROR (sim_error_quark())
GQuark sim_error_quark(void);
typedef enum {
  SIM_ERROR_INVALID,   /* inconsistent workload or parameters */
  SIM_ERROR_DEADLOCK,  /* replay cannot make progress */
  SIM_ERROR_LIMIT      /* a size limit was exceeded */
} SimError;

G_END_DECLS

#endif
