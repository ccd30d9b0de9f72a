/* traces/gpt-private.h -- what the generator's files share: traces/gpt.c
 * (emitting ranks and the schedule), traces/gpt_config.c (configuration
 * and validation), traces/gpt_counts.c (parameters, DP buckets, op
 * counts, the memory estimate), traces/gpt_kernels.c (shapes and
 * kernel sequences), traces/gpt_llama_hf.c (Llama's kernel sequences
 * under impl hf) and traces/gpt_ring.c (context parallelism's ring).  Not
 * for use outside traces/gpt*.c.
 */
#ifndef TRACES_GPT_PRIVATE_H
#define TRACES_GPT_PRIVATE_H

#include "traces/gpt.h"

/* Element bytes (2 or 4) and the math unit of GEMMs and attention of
 * cfg's precision. */
double gpt_elem_bytes(const GptConfig *cfg);
SimMath gpt_math(const GptConfig *cfg);
/* Whether cfg runs flash attention; whether sequence parallelism is in
 * force (asked for, and tp > 1); the ops that end every chunk pass under
 * FP8 (the scale update, the amax all-reduces over TP and DP: 0 unless
 * fp8). */
gboolean gpt_attention_fused(const GptConfig *cfg);
gboolean gpt_seq_parallel(const GptConfig *cfg);
/* Ranks that hold the same weights in one stage and reduce their
 * gradients together: dp * cp (megatron-core's data-parallel group with
 * context parallelism, which the distributed optimizer also shards over). */
guint gpt_grad_ranks(const GptConfig *cfg);
guint gpt_fp8_pass_ops(const GptConfig *cfg);

/* A parameter tensor (weight with its bias, a LayerNorm, the embeddings)
 * whose gradient one backward op completes; the DP buckets are built from
 * them in the order the backward produces them. */
typedef enum {
  UNIT_FC2 = 0,
  UNIT_FC1,
  UNIT_LN2,
  UNIT_PROJ,
  UNIT_QKV,
  UNIT_LN1,
  UNIT_HEAD_EMB, /* last stage's output weight: the tied copy of the word
                    embedding (p > 1) or Llama's own */
  UNIT_HEAD_LN,  /* final LayerNorm */
  UNIT_EMB,      /* word (vocab shard) + position embeddings */
  UNIT_COUNT
} Unit;

typedef struct {
  const guint8 *passes;
  guint n;
} GeluChain;

/* The unfused GeLU chain of impl hf for cfg's arch (gpt_counts.c). */
GeluChain gpt_hf_gelu(const GptConfig *cfg, gboolean backward);

/* Whether the output layer shares the word embedding (GPT, BLOOM; the
 * tie all-reduce when pp > 1); whether the last stage holds an output
 * weight of its own (untied, or a tied copy when pp > 1). */
gboolean gpt_tied(const GptConfig *cfg);
gboolean gpt_head_weight(const GptConfig *cfg);

/* Kernels in impl hf's Llama chains: 0 the RMSNorm forward, 1 its
 * backward, 2 the rotary embedding of one tensor (gpt_llama_hf.c). */
guint gpt_hf_llama_chain(int which);

/* The replicas of each shard under zero >= 2: dp / gpt_zero_shards
 * (the nodes, under zero_group "node"); 1 otherwise. */
guint gpt_zero_replicas(const GptConfig *cfg);

/* Parameters of one rank of stage p (all its chunks). */
double gpt_stage_params(const GptConfig *cfg, guint p);
/* FSDP's units of a one-stage layout (zero = 3): the parameters of one
 * transformer layer and of the root unit (the embeddings, the final norm
 * and the output layer), per rank before sharding. */
void gpt_fsdp_units(const GptConfig *cfg, double *layer, double *root);
/* The DP bucket cap in bytes. */
double gpt_bucket_cap_bytes(const GptConfig *cfg);
/* Gradient bytes (fp32) of the units of chunk c of stage p, in backward
 * order (GArray of double; caller owns it). */
GArray *gpt_chunk_grad_bytes(const GptConfig *cfg, guint p, guint c);
/* Splits n gradient tensors of `bytes` each (backward order) into buckets
 * of at most cap bytes: end[i] the last tensor of bucket i, size[i] its
 * bytes; returns the number of buckets. */
guint gpt_make_buckets(const double *bytes, guint n, double cap, guint *end,
                       double *size);

/* ---- The generator's state (gpt.c, gpt_kernels.c) ---------------------- */

enum {
  STREAM_COMPUTE = 0,
  STREAM_DP = 1,
  STREAM_SEND_NEXT = 2,
  STREAM_SEND_PREV = 3,
  STREAM_RECV_PREV = 4,
  STREAM_RECV_NEXT = 5,
  /* Context parallelism: K/V blocks to the next context rank and from the
   * previous one (forward), K/V and their gradients to the previous and
   * from the next (backward).  With cp = 2 both neighbours are one rank:
   * every send then goes on 6 and every recv on 7 (as for pp = 2). */
  STREAM_CP_SEND_NEXT = 6,
  STREAM_CP_RECV_PREV = 7,
  STREAM_CP_SEND_PREV = 8,
  STREAM_CP_RECV_NEXT = 9,
  /* tp_comm_overlap: the TP all-gathers and reduce-scatters. */
  STREAM_TP = 10
};

typedef enum { GROUP_NONE = 0, GROUP_TP, GROUP_DP, GROUP_TIE } GroupKind;

#define NO_LAYER 255u
#define NO_MB G_MAXUINT16

/* An op with everything but its position (phase, layer, microbatch,
 * stream, peer, wait) filled in. */
typedef struct {
  gint64 ref_ns;
  guint32 shape;
  guint32 name;
  guint8 kind, klass;
  guint8 group; /* GroupKind of a compute-stream collective */
  gint8 unit;   /* Unit whose gradient this op completes, or -1 */
  guint8 ring;  /* RING_FWD / RING_BWD: not an op but where a layer's
                   context-parallel ring attention runs (gpt.c, put_compute
                   expands it); 0 otherwise */
  guint8 beside; /* tp_comm_overlap: BESIDE_NEXT (an all-gather beside
                    the kernel after it) or BESIDE_PREV (a reduce-scatter
                    beside the kernel before it); 0 otherwise */
} Proto;

enum { BESIDE_NEXT = 1, BESIDE_PREV = 2 };

enum { RING_FWD = 1, RING_BWD = 2 };

/* The ring attention of one context rank (cp > 1; gpt_kernels.c,
 * gpt_build_ring_protos): per step k < cp its attention kernel forward
 * and backward, the forward's corrections of the log-sum-exp (k >= 1) and
 * of the output (every k), the backward's dQ (k >= 1) and dK/dV (every k)
 * accumulations, and the messages: forward the K/V block, backward K/V
 * (first step), K/V with the dK/dV accumulated so far (middle steps), dK/dV
 * (last step). */
typedef struct {
  Proto *fwd, *bwd, *lse_fix, *out_fix, *dq_add, *dkv_add; /* cp each */
  Proto out_cast, kv_send, kv_recv;
  Proto bwd_send[3], bwd_recv[3];
} Ring;

#define SEQ_MAX 64 /* the longest: a BLOOM layer's backward under impl hf */
typedef struct {
  Proto p[SEQ_MAX];
  guint n;
} Seq;

typedef struct {
  const GptConfig *cfg;
  const GpuSpec *ref;
  GpuSpec priced;      /* ref with the implementation's efficiencies: what
                          kernels are priced on (a shallow copy) */
  GpuSpec flash_fwd, flash_bwd; /* priced with FlashAttention's published
                          efficiency in the attention class */
  const GpuSpec *price_on; /* the spec gpt_get_shape prices on: priced,
                          or a flash spec while a flash kernel is added */
  SimWorkload *w;
  GHashTable *shapes;  /* ShapeKey (owned) -> shape index + 1 */
  GArray *shape_ns;    /* gint64 ref_ns per shape */
  GError *error;       /* first failure while pricing shapes */

  /* Sizes as doubles (see the opening comment). */
  double b, s, h, t, ht, n_att, x, vt;
  guint v;   /* model chunks per stage */
  guint lpc; /* layers per chunk: l / (p * v) */

  Seq emb_fwd, layer_fwd, head_fwd, head_bwd, layer_bwd, emb_bwd;
  Proto send_fwd, recv_fwd, send_bwd, recv_bwd, tie;
  /* FP8, per stage (their bytes follow the chunk's layers): the amax
   * all-reduces over TP and DP and the scale update ending a forward and a
   * backward chunk pass, and the weights' cast once per chunk. */
  Seq fp8_fwd_end, fp8_bwd_end;
  Proto fp8_weight_cast;

  Ring ring;           /* of the context rank being generated (cp > 1) */

  /* Group-id blocks (see "Ranks and groups"). */
  guint32 dp_base, tie_base;

  /* State of the rank being generated. */
  SimRankBuilder *rb;
  guint32 tp_group, dp_group, tie_group;
  guint32 prev, next;   /* template ranks of the ring neighbours */
  guint cp_i;           /* the template's context rank */
  guint32 cp_prev, cp_next; /* its neighbours in the context ring */
  guint cp_send_fwd, cp_recv_fwd, cp_send_bwd, cp_recv_bwd; /* streams */
  /* Streams of the four p2p kinds on this rank (see "Streams"). */
  guint send_act, send_grad, recv_act, recv_grad;
  guint32 last_compute; /* handle of the last compute-stream op */
  guint32 pending_wait; /* recv the next compute op must wait for */
  guint32 prev_compute; /* the compute-stream op before last_compute */
  guint32 tp_wait;      /* tp_comm_overlap: the collective a compute op
                           waits for, tp_skip compute ops from now */
  guint tp_skip;
  gboolean record_units;
  GArray *unit_ops;     /* guint32 handles, backward order */
  GArray *unit_chunks;  /* guint chunks whose units unit_ops holds, in
                           the order they were recorded */
  GArray *param_ag;     /* guint32: what the first forward of each chunk
                           waits for under zero = 1 or 2 with overlap
                           (lpc + 2 per chunk, gather_params); empty
                           otherwise */
  guint32 last_dp;      /* the last DP-stream op emitted (zero >= 2: the
                           step waits for it), or SIM_NO_WAIT */
  /* Hybrid sharding's group-id blocks (zero_group "node"): the node
   * groups (shard_base + node) and the replica groups across nodes
   * (replica_base + the rank's index in its node). */
  guint32 shard_base, replica_base;
} Gen;

/* ShapeKey hashing for Gen.shapes (gpt_kernels.c). */
guint gpt_shape_key_hash(gconstpointer p);
gboolean gpt_shape_key_equal(gconstpointer a, gconstpointer b);
/* The shape index for (name, class, coll, tensor, flops, bytes), added and
 * priced on first use; sets g->error if the GPU model gives a non-finite
 * or negative time. */
guint32 gpt_get_shape(Gen *g, guint32 name, SimOpClass klass,
                      SimCollType coll, SimMath tensor, double flops,
                      double bytes);
/* A prototype of `name` with its shape and reference time. */
Proto gpt_make_proto(Gen *g, const char *name, SimOpKind kind,
                     SimOpClass klass, SimCollType coll, SimMath tensor,
                     double flops, double bytes);
/* The 16-bit (or TF32, FP32) math unit of cfg's precision: what attention
 * and the BF16 GEMMs of an FP8 run use. */
SimMath gpt_math16(const GptConfig *cfg);
/* Appends a kernel to a sequence: GEMMs on the precision's math unit
 * (FP8 under fp8), attention on its 16-bit unit, the rest on CUDA cores;
 * unit the parameter unit whose gradient it completes, or -1. */
void gpt_kern(Gen *g, Seq *q, const char *name, SimOpClass klass, double flops,
              double bytes, int unit);
/* Every op prototype of the iteration: the implementation's kernel
 * sequences, then the point-to-point and tie prototypes. */
void gpt_build_protos(Gen *g);
/* The kernel sequences of Llama under impl hf (gpt_llama_hf.c). */
void gpt_build_llama_hf_protos(Gen *g);
/* The FP8 prototypes of a stage whose chunks hold `layers` layers
 * (g->fp8_*; nothing unless precision fp8). */
void gpt_build_fp8_protos(Gen *g, guint layers);
/* What the flash kernels are priced on: g->priced with the attention
 * class's compute efficiency set to FlashAttention's on g->ref (forward
 * and backward; traces/gpt_kernels.c cites each figure). */
void gpt_flash_specs(Gen *g);
/* The ring attention prototypes of context rank cp_i (g->ring, whose
 * arrays gpt_generate allocates; nothing when cp = 1; gpt_ring.c). */
void gpt_build_ring_protos(Gen *g, guint cp_i);


#endif
