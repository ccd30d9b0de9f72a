/* traces/gpt-private.h -- what the generator's files share: traces/gpt.c
 * (emitting ranks and the schedule), traces/gpt_config.c (configuration,
 * parameters, DP buckets, counts) and traces/gpt_kernels.c (shapes and
 * kernel sequences).  Not for use outside traces/gpt*.c.
 */
#ifndef TRACES_GPT_PRIVATE_H
#define TRACES_GPT_PRIVATE_H

#include "traces/gpt.h"

/* Element bytes (2 or 4) and the math unit of GEMMs and attention of
 * cfg's precision. */
double gpt_elem_bytes(const GptConfig *cfg);
SimMath gpt_math(const GptConfig *cfg);

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
  UNIT_HEAD_EMB, /* last stage's tied copy of the word embedding (p > 1) */
  UNIT_HEAD_LN,  /* final LayerNorm */
  UNIT_EMB,      /* word (vocab shard) + position embeddings */
  UNIT_COUNT
} Unit;

typedef struct {
  const guint8 *passes;
  guint n;
} GeluChain;

/* The unfused GeLU chain of impl hf for cfg's arch (gpt_config.c). */
GeluChain gpt_hf_gelu(const GptConfig *cfg, gboolean backward);

/* Parameters of one rank of stage p (all its chunks). */
double gpt_stage_params(const GptConfig *cfg, guint p);
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
  STREAM_RECV_NEXT = 5
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
} Proto;

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

  /* Group-id blocks (see "Ranks and groups"). */
  guint32 dp_base, tie_base;

  /* State of the rank being generated. */
  SimRankBuilder *rb;
  guint32 tp_group, dp_group, tie_group;
  guint32 prev, next;   /* template ranks of the ring neighbours */
  /* Streams of the four p2p kinds on this rank (see "Streams"). */
  guint send_act, send_grad, recv_act, recv_grad;
  guint32 last_compute; /* handle of the last compute-stream op */
  guint32 pending_wait; /* recv the next compute op must wait for */
  gboolean record_units;
  GArray *unit_ops;     /* guint32 handles, backward order */
  GArray *unit_chunks;  /* guint chunks whose units unit_ops holds, in
                           the order they were recorded */
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
/* Every op prototype of the iteration: the implementation's kernel
 * sequences, then the point-to-point and tie prototypes. */
void gpt_build_protos(Gen *g);

#endif
