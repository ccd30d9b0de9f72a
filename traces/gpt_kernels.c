/* traces/gpt_kernels.c -- the kernels the generator emits: shape
 * de-duplication and pricing, the kernel sequences of a layer, the
 * embedding and the head under Megatron-LM and Hugging Face eager
 * PyTorch, the point-to-point prototypes, FlashAttention's efficiency,
 * and the representative layer mix the model fit uses
 * (gpt_layer_kernels).  Llama's sequences under Hugging Face are in
 * traces/gpt_llama_hf.c, context parallelism's ring in traces/gpt_ring.c.
 *
 * The formulas are tabulated in traces/gpt.c's opening comment; the code
 * follows the table line by line.
 */
#include "traces/gpt-private.h"

#include <math.h>
#include <string.h>

/* Shape de-duplication key (memset to 0 so padding hashes the same). */
typedef struct {
  double flops, bytes;
  guint32 name;
  guint8 klass, coll, tensor, pad_;
} ShapeKey;

guint gpt_shape_key_hash(gconstpointer p)
{
  return sim_hash_bytes(p, sizeof(ShapeKey));
}

gboolean gpt_shape_key_equal(gconstpointer a, gconstpointer b)
{
  return memcmp(a, b, sizeof(ShapeKey)) == 0;
}

/* Returns the shape index for (name, class, coll, tensor, flops, bytes),
 * adding and pricing it on first use; sets g->error if the GPU model gives
 * a non-finite or negative time. */
guint32 gpt_get_shape(Gen *g, guint32 name, SimOpClass klass,
                      SimCollType coll, SimMath tensor, double flops,
                      double bytes)
{
  ShapeKey key;
  memset(&key, 0, sizeof key);
  key.flops = flops;
  key.bytes = bytes;
  key.name = name;
  key.klass = (guint8)klass;
  key.coll = (guint8)coll;
  key.tensor = (guint8)tensor;
  gpointer v = g_hash_table_lookup(g->shapes, &key);
  if (v != NULL)
    return GPOINTER_TO_UINT(v) - 1;

  gint64 ns = 0;
  if (klass != SIM_CLASS_COMM) {
    GpuKernel k = {.klass = klass, .flops = flops, .bytes = bytes,
                   .tensor = tensor};
    GpuCost cost;
    memset(&cost, 0, sizeof cost);
    /* Auto clocks, no power cap: the reference duration. */
    gpu_kernel_cost(g->price_on, &k, 0, 0, G_MAXDOUBLE, &cost);
    if (!isfinite(cost.time_s) || cost.time_s < 0 || cost.time_s > 1e6) {
      if (g->error == NULL)
        g_set_error(&g->error, GPT_ERROR, GPT_ERROR_INVALID,
                    "GPU %s gives time %g s for kernel %s (flops %g, bytes "
                    "%g)",
                    g->ref->name, cost.time_s,
                    sim_workload_name(g->w, name), flops, bytes);
    } else {
      ns = MAX((gint64)llround(cost.time_s * 1e9), 1);
    }
  }
  SimShape sh = {.flops = flops, .bytes = bytes, .name = name,
                 .klass = (guint8)klass, .coll = (guint8)coll,
                 .tensor = (guint8)tensor};
  guint32 id = sim_workload_add_shape(g->w, &sh);
  g_array_append_val(g->shape_ns, ns);
  g_hash_table_insert(g->shapes, g_memdup2(&key, sizeof key),
                      GUINT_TO_POINTER(id + 1));
  return id;
}

Proto gpt_make_proto(Gen *g, const char *name, SimOpKind kind,
                     SimOpClass klass, SimCollType coll, SimMath tensor,
                     double flops, double bytes)
{
  Proto p;
  memset(&p, 0, sizeof p);
  p.name = sim_workload_intern(g->w, name);
  p.shape = gpt_get_shape(g, p.name, klass, coll, tensor, flops, bytes);
  p.ref_ns = g_array_index(g->shape_ns, gint64, p.shape);
  p.kind = (guint8)kind;
  p.klass = (guint8)klass;
  p.group = GROUP_NONE;
  p.unit = -1;
  return p;
}

/* Appends a kernel on math unit `math` (attention and GEMMs: tensor
 * cores; the rest: SIM_MATH_VECTOR) to a sequence. */
static void kern_on(Gen *g, Seq *q, const char *name, SimOpClass klass,
                    SimMath math, double flops, double bytes, int unit)
{
  g_assert(q->n < SEQ_MAX);
  /* coll is meaningless for kernels; 0 keeps every shape field in range. */
  Proto p = gpt_make_proto(g, name, SIM_OP_KERNEL, klass, SIM_COLL_ALL_REDUCE,
                           math, flops, bytes);
  p.unit = (gint8)unit;
  q->p[q->n++] = p;
}

/* The 16-bit (or TF32, FP32) math unit of cfg's precision: what attention
 * and the BF16 GEMMs of an FP8 run use. */
SimMath gpt_math16(const GptConfig *cfg)
{
  return cfg->precision == GPT_PRECISION_FP8 ? SIM_MATH_TENSOR
                                             : gpt_math(cfg);
}

/* Appends a kernel to a sequence: GEMMs on the precision's math unit
 * (FP8 under fp8), attention on its 16-bit unit, the rest on CUDA cores. */
void gpt_kern(Gen *g, Seq *q, const char *name, SimOpClass klass, double flops,
              double bytes, int unit)
{
  SimMath math = klass == SIM_CLASS_GEMM        ? gpt_math(g->cfg)
                 : klass == SIM_CLASS_ATTENTION ? gpt_math16(g->cfg)
                                                : SIM_MATH_VECTOR;
  kern_on(g, q, name, klass, math, flops, bytes, unit);
}

/* Appends a TP collective of `bytes` (only when t > 1). */
static void tp_coll(Gen *g, Seq *q, const char *name, SimCollType coll,
                    double bytes)
{
  if (g->cfg->tp == 1)
    return;
  g_assert(q->n < SEQ_MAX);
  Proto p = gpt_make_proto(g, name, SIM_OP_COLLECTIVE, SIM_CLASS_COMM, coll,
                           SIM_MATH_VECTOR, 0, bytes);
  p.group = GROUP_TP;
  /* Under tp_comm_overlap the gather feeds the GEMM after it and the
   * scatter drains the GEMM before it (gpt.c, put_compute). */
  if (g->cfg->tp_comm_overlap && coll == SIM_COLL_ALL_GATHER)
    p.beside = BESIDE_NEXT;
  else if (g->cfg->tp_comm_overlap && coll == SIM_COLL_REDUCE_SCATTER)
    p.beside = BESIDE_PREV;
  q->p[q->n++] = p;
}

/* Appends a TP all-reduce of `bytes` (only when t > 1). */
static void tp_allreduce(Gen *g, Seq *q, double bytes)
{
  tp_coll(g, q, "tp.all_reduce", SIM_COLL_ALL_REDUCE, bytes);
}

/* Where Megatron all-reduces a row-parallel output (or, backward, a
 * column-parallel input gradient): with sequence parallelism a
 * reduce-scatter of the same bytes instead. */
static void tp_reduce(Gen *g, Seq *q, double bytes)
{
  if (gpt_seq_parallel(g->cfg))
    tp_coll(g, q, "tp.reduce_scatter", SIM_COLL_REDUCE_SCATTER, bytes);
  else
    tp_allreduce(g, q, bytes);
}

/* Sequence parallelism only: the all-gather of a sequence-sharded tensor
 * of `bytes` (gathered size) before a GEMM that needs all tokens. */
static void sp_gather(Gen *g, Seq *q, double bytes)
{
  if (gpt_seq_parallel(g->cfg))
    tp_coll(g, q, "tp.all_gather", SIM_COLL_ALL_GATHER, bytes);
}

/* FP8 only: Transformer Engine's cast_transpose of `elems` BF16 elements
 * (read 2 bytes, write the FP8 copy and its FP8 transpose, one byte
 * each), the input of an FP8 GEMM and, transposed, of its wgrad. */
static void fp8_cast(Gen *g, Seq *q, const char *name, double elems)
{
  if (g->cfg->precision == GPT_PRECISION_FP8)
    gpt_kern(g, q, name, SIM_CLASS_ELEMENTWISE, 0,
             (gpt_elem_bytes(g->cfg) + 2) * elems, -1);
}

/* The sizes the Megatron sequences are written in (see the opening
 * comment of traces/gpt.c). */
typedef struct {
  double E;     /* element bytes of activations and weights */
  double A;     /* bytes of a GEMM input element: 1 under fp8, else E */
  double St;    /* share of the tokens norms and dropouts run on: 1/t
                   with sequence parallelism, else 1 */
  double b, s, h, ht, at, N, X, vt, bs;
  double gemm_qkv, gemm_proj, gemm_fc, att;
  gboolean bloom, fp8;
} MgSizes;

/* With context parallelism the fused attention is the ring's steps and
 * messages: a marker where they go (gpt.c expands it per context rank). */
static gboolean ring_marker(Gen *g, Seq *q, guint8 which)
{
  if (g->cfg->cp == 1)
    return FALSE;
  g_assert(q->n < SEQ_MAX);
  Proto p;
  memset(&p, 0, sizeof p);
  p.unit = -1;
  p.ring = which;
  q->p[q->n++] = p;
  return TRUE;
}

/* Attention forward: unfused (QK^T, fused softmax, AV; the b*at*s^2
 * scores in DRAM) or one FlashAttention kernel: causal, so half the two
 * matmuls' FLOPs; reads Q, K, V, writes O and the softmax log-sum-exp
 * (4 bytes per row). */
static void attention_fwd(Gen *g, Seq *q, const MgSizes *z, double alibi)
{
  const double E = z->E, N = z->N, bs = z->bs, ht = z->ht;
  if (ring_marker(g, q, RING_FWD))
    return;
  if (gpt_attention_fused(g->cfg)) {
    g->price_on = &g->flash_fwd;
    gpt_kern(g, q, "fwd.flash_attention", SIM_CLASS_ATTENTION, z->att,
             E * 4 * bs * ht + 4 * z->b * z->at * z->s + alibi, -1);
    g->price_on = &g->priced;
    return;
  }
  gpt_kern(g, q, "fwd.attn_scores", SIM_CLASS_ATTENTION, z->att,
           E * (2 * bs * ht + N) + alibi, -1);
  gpt_kern(g, q, "fwd.softmax", SIM_CLASS_SOFTMAX, 0, 5 * N, -1);
  gpt_kern(g, q, "fwd.attn_context", SIM_CLASS_ATTENTION, z->att,
           E * (N + 2 * bs * ht), -1);
}

/* Attention backward: unfused (four batched GEMMs and the softmax
 * backward) or FlashAttention's backward: it recomputes the scores, so
 * five matmuls where the forward has two (2.5 x the forward's causal
 * FLOPs); reads Q, K, V, O, dO and the log-sum-exp, writes dQ, dK, dV,
 * accumulates dQ in FP32 (written and read once more) and the row sums
 * of dO * O (4 bytes per row). */
static void attention_bwd(Gen *g, Seq *q, const MgSizes *z, double alibi)
{
  const double E = z->E, N = z->N, bs = z->bs, ht = z->ht;
  if (ring_marker(g, q, RING_BWD))
    return;
  if (gpt_attention_fused(g->cfg)) {
    g->price_on = &g->flash_bwd;
    gpt_kern(g, q, "bwd.flash_attention", SIM_CLASS_ATTENTION, 2.5 * z->att,
             E * 8 * bs * ht + 8 * bs * ht + 8 * z->b * z->at * z->s + alibi,
             -1);
    g->price_on = &g->priced;
    return;
  }
  gpt_kern(g, q, "bwd.attn_context", SIM_CLASS_ATTENTION, 2 * z->att,
           E * (3 * bs * ht + 2 * N), -1);
  gpt_kern(g, q, "bwd.softmax", SIM_CLASS_SOFTMAX, 0, 7 * N, -1);
  gpt_kern(g, q, "bwd.attn_scores", SIM_CLASS_ATTENTION, 2 * z->att,
           E * (N + 4 * bs * ht), -1);
}

/* One layer's forward (Megatron; TE's kernels under fp8). */
static void megatron_layer_fwd(Gen *g, const MgSizes *z, double alibi)
{
  const double E = z->E, A = z->A, h = z->h, ht = z->ht, X = z->X;
  const double bs = z->bs, Xn = z->St * X;
  Seq *q = &g->layer_fwd;
  /* Under fp8 the norm writes its output in FP8 with its transpose (TE's
   * fused LayerNorm + cast): 2 bytes per element either way. */
  gpt_kern(g, q, "fwd.layernorm", SIM_CLASS_NORM, 0, 2 * E * Xn + 2 * E * h,
           -1);
  sp_gather(g, q, A * X);
  gpt_kern(g, q, "fwd.qkv_gemm", SIM_CLASS_GEMM, z->gemm_qkv,
           A * (X + 3 * h * ht) + E * 3 * bs * ht, -1);
  attention_fwd(g, q, z, alibi);
  fp8_cast(g, q, "fwd.fp8_cast_transpose", bs * ht);
  gpt_kern(g, q, "fwd.proj_gemm", SIM_CLASS_GEMM, z->gemm_proj,
           A * (bs * ht + ht * h) + E * X, -1);
  tp_reduce(g, q, E * X);
  gpt_kern(g, q, "fwd.bias_dropout_add", SIM_CLASS_ELEMENTWISE, 0,
           3 * E * Xn + Xn, -1);
  gpt_kern(g, q, "fwd.layernorm", SIM_CLASS_NORM, 0, 2 * E * Xn + 2 * E * h,
           -1);
  sp_gather(g, q, A * X);
  gpt_kern(g, q, "fwd.fc1_gemm", SIM_CLASS_GEMM, z->gemm_fc,
           A * (X + 4 * h * ht) + E * 4 * bs * ht, -1);
  /* Under fp8 bias + GeLU also writes the FP8 copy and its transpose. */
  gpt_kern(g, q, "fwd.gelu", SIM_CLASS_ELEMENTWISE, 0,
           (z->fp8 ? E + 2 : 2 * E) * 4 * bs * ht, -1);
  gpt_kern(g, q, "fwd.fc2_gemm", SIM_CLASS_GEMM, z->gemm_fc,
           A * (4 * bs * ht + 4 * ht * h) + E * X, -1);
  tp_reduce(g, q, E * X);
  gpt_kern(g, q, "fwd.bias_dropout_add", SIM_CLASS_ELEMENTWISE, 0,
           3 * E * Xn + Xn, -1);
}

/* One layer's backward, reverse order.  With sequence parallelism the
 * row-parallel GEMMs first gather their output gradient, and the
 * column-parallel ones gather their input again for the wgrad (Megatron
 * keeps only the shard). */
static void megatron_layer_bwd(Gen *g, const MgSizes *z, double alibi)
{
  const double E = z->E, A = z->A, h = z->h, ht = z->ht, X = z->X;
  const double bs = z->bs, Xn = z->St * X;
  Seq *q = &g->layer_bwd;
  gpt_kern(g, q, "bwd.bias_dropout_add", SIM_CLASS_ELEMENTWISE, 0,
           2 * E * Xn + Xn, -1);
  sp_gather(g, q, E * X);
  fp8_cast(g, q, "bwd.fp8_cast_transpose", X);
  gpt_kern(g, q, "bwd.fc2_dgrad", SIM_CLASS_GEMM, z->gemm_fc,
           A * (X + 4 * ht * h) + E * 4 * bs * ht, -1);
  gpt_kern(g, q, "bwd.fc2_wgrad", SIM_CLASS_GEMM, z->gemm_fc,
           A * (4 * bs * ht + X) + 8 * 4 * ht * h, UNIT_FC2);
  /* Under fp8 dGeLU writes the FP8 gradient and its transpose. */
  gpt_kern(g, q, "bwd.gelu", SIM_CLASS_ELEMENTWISE, 0,
           (z->fp8 ? 2 * E + 2 : 3 * E) * 4 * bs * ht, -1);
  sp_gather(g, q, A * X);
  gpt_kern(g, q, "bwd.fc1_dgrad", SIM_CLASS_GEMM, z->gemm_fc,
           A * (4 * bs * ht + 4 * h * ht) + E * X, -1);
  gpt_kern(g, q, "bwd.fc1_wgrad", SIM_CLASS_GEMM, z->gemm_fc,
           A * (X + 4 * bs * ht) + 8 * 4 * h * ht, UNIT_FC1);
  tp_reduce(g, q, E * X);
  gpt_kern(g, q, "bwd.layernorm", SIM_CLASS_NORM, 0, 4 * E * Xn + 16 * h,
           UNIT_LN2);
  gpt_kern(g, q, "bwd.bias_dropout_add", SIM_CLASS_ELEMENTWISE, 0,
           2 * E * Xn + Xn, -1);
  sp_gather(g, q, E * X);
  fp8_cast(g, q, "bwd.fp8_cast_transpose", X);
  gpt_kern(g, q, "bwd.proj_dgrad", SIM_CLASS_GEMM, z->gemm_proj,
           A * (X + ht * h) + E * bs * ht, -1);
  gpt_kern(g, q, "bwd.proj_wgrad", SIM_CLASS_GEMM, z->gemm_proj,
           A * (bs * ht + X) + 8 * ht * h, UNIT_PROJ);
  attention_bwd(g, q, z, alibi);
  fp8_cast(g, q, "bwd.fp8_cast_transpose", 3 * bs * ht);
  sp_gather(g, q, A * X);
  gpt_kern(g, q, "bwd.qkv_dgrad", SIM_CLASS_GEMM, z->gemm_qkv,
           A * (3 * bs * ht + 3 * ht * h) + E * X, -1);
  gpt_kern(g, q, "bwd.qkv_wgrad", SIM_CLASS_GEMM, z->gemm_qkv,
           A * (X + 3 * bs * ht) + 8 * 3 * ht * h, UNIT_QKV);
  tp_reduce(g, q, E * X);
  gpt_kern(g, q, "bwd.layernorm", SIM_CLASS_NORM, 0, 4 * E * Xn + 16 * h,
           UNIT_LN1);
}

/* Megatron's last stage between its final norm and the norm's backward
 * (GPT and Llama alike): the logits GEMM on the vocab-parallel output
 * layer (BF16 under fp8: megatron-core's output layer is not a TE module),
 * the vocab-parallel cross entropy with its three TP all-reduces, and the
 * backward through it; the wgrad completes `wgrad_unit` (-1: none). */
static void megatron_head(Gen *g, double E, double X, double bs, double vt,
                          double h, int wgrad_unit)
{
  const SimMath m16 = gpt_math16(g->cfg);
  const double logits = 2 * X * vt;
  Seq *q = &g->head_fwd;
  sp_gather(g, q, E * X);
  kern_on(g, q, "fwd.logits_gemm", SIM_CLASS_GEMM, m16, logits,
          E * (X + vt * h + bs * vt), -1);
  gpt_kern(g, q, "fwd.xent_max", SIM_CLASS_REDUCTION, 0, E * bs * vt + 4 * bs,
           -1);
  tp_allreduce(g, q, 4 * bs);
  gpt_kern(g, q, "fwd.xent_softmax", SIM_CLASS_SOFTMAX, 0,
           2 * E * bs * vt + 8 * bs, -1);
  tp_allreduce(g, q, 4 * bs);
  tp_allreduce(g, q, 4 * bs);
  gpt_kern(g, q, "fwd.xent_loss", SIM_CLASS_ELEMENTWISE, 0,
           2 * E * bs * vt + 12 * bs, -1);
  q = &g->head_bwd;
  gpt_kern(g, q, "bwd.xent", SIM_CLASS_ELEMENTWISE, 0, 2 * E * bs * vt + 8 * bs,
           -1);
  kern_on(g, q, "bwd.logits_dgrad", SIM_CLASS_GEMM, m16, logits,
          E * (bs * vt + vt * h + X), -1);
  sp_gather(g, q, E * X);
  kern_on(g, q, "bwd.logits_wgrad", SIM_CLASS_GEMM, m16, logits,
          E * (X + bs * vt) + 8 * vt * h, wgrad_unit);
  tp_reduce(g, q, E * X);
}

/* The first stage's embeddings and the last stage's head (BF16 under
 * fp8: megatron-core's output layer is not a TE module). */
static void megatron_ends(Gen *g, const MgSizes *z)
{
  const double E = z->E, h = z->h, X = z->X, vt = z->vt, bs = z->bs;
  const double s = g->cfg->seq_len, Xn = z->St * X; /* s: positions */
  const gboolean bloom = z->bloom;

  Seq *q = &g->emb_fwd;
  gpt_kern(g, q, "fwd.embedding", SIM_CLASS_EMBEDDING, 0, 8 * bs + 2 * E * X,
           -1);
  tp_reduce(g, q, E * X);
  if (bloom) {
    gpt_kern(g, q, "fwd.embedding_layernorm", SIM_CLASS_NORM, 0,
             2 * E * Xn + 2 * E * h, -1);
  } else {
    gpt_kern(g, q, "fwd.embedding_add", SIM_CLASS_ELEMENTWISE, 0,
             3 * E * Xn + Xn, -1);
  }
  q = &g->emb_bwd;
  if (bloom)
    gpt_kern(g, q, "bwd.embedding_layernorm", SIM_CLASS_NORM, 0,
             4 * E * Xn + 16 * h, -1);
  sp_gather(g, q, E * X);
  gpt_kern(g, q, "bwd.embedding", SIM_CLASS_EMBEDDING, 0,
           5 * X + 8 * bs + 12 * (vt + (bloom ? 0 : s)) * h, UNIT_EMB);

  /* Last stage: final LayerNorm, logits, vocab-parallel cross entropy. */
  q = &g->head_fwd;
  gpt_kern(g, q, "fwd.layernorm", SIM_CLASS_NORM, 0, 2 * E * Xn + 2 * E * h,
           -1);
  megatron_head(g, E, X, bs, vt, h, g->cfg->pp > 1 ? UNIT_HEAD_EMB : -1);
  gpt_kern(g, &g->head_bwd, "bwd.layernorm", SIM_CLASS_NORM, 0,
           4 * E * Xn + 16 * h, UNIT_HEAD_LN);
}

/* ---- Llama under megatron-core ----------------------------------------
 * Per TP rank: Q has ht = h/t columns, K and V kt = ht * kv/a each (GQA),
 * the FFN Ft = F/t (SwiGLU: FC1 the fused gate and up projections, 2 Ft
 * columns; FC2 Ft rows).  No biases, no dropout: the residual adds are
 * plain adds (megatron-core's bias_dropout_add with no bias and p = 0),
 * RMSNorm keeps one weight (h) where LayerNorm keeps two.  Rotary
 * embeddings are one fused kernel on Q and K each way (read and write
 * them, read the fp32 cos/sin table: 4 s d bytes).  The unfused attention
 * repeats K and V to the rank's query heads first (megatron-core's
 * DotProductAttention: repeat_interleave when a/kv > 1; backward sums the
 * copies back); flash attention reads K and V as they are. */
typedef struct {
  double E, A, St, b, s, h, ht, kt, Ft, qc, at, d, N, X, bs;
  double att;
  gboolean fp8, expand; /* expand: unfused with a/kv > 1 */
} LlSizes;

static void llama_attention_fwd(Gen *g, Seq *q, const LlSizes *z)
{
  const double E = z->E, bs = z->bs;
  if (ring_marker(g, q, RING_FWD))
    return;
  if (gpt_attention_fused(g->cfg)) {
    g->price_on = &g->flash_fwd;
    gpt_kern(g, q, "fwd.flash_attention", SIM_CLASS_ATTENTION, z->att,
             E * (2 * bs * z->ht + 2 * bs * z->kt) + 4 * z->b * z->at * z->s,
             -1);
    g->price_on = &g->priced;
    return;
  }
  if (z->expand)
    gpt_kern(g, q, "fwd.kv_repeat", SIM_CLASS_ELEMENTWISE, 0,
             E * 2 * bs * (z->kt + z->ht), -1);
  gpt_kern(g, q, "fwd.attn_scores", SIM_CLASS_ATTENTION, z->att,
           E * (2 * bs * z->ht + z->N), -1);
  gpt_kern(g, q, "fwd.softmax", SIM_CLASS_SOFTMAX, 0, 5 * z->N, -1);
  gpt_kern(g, q, "fwd.attn_context", SIM_CLASS_ATTENTION, z->att,
           E * (z->N + 2 * bs * z->ht), -1);
}

static void llama_attention_bwd(Gen *g, Seq *q, const LlSizes *z)
{
  const double E = z->E, bs = z->bs, ht = z->ht, kt = z->kt;
  if (ring_marker(g, q, RING_BWD))
    return;
  if (gpt_attention_fused(g->cfg)) {
    g->price_on = &g->flash_bwd;
    gpt_kern(g, q, "bwd.flash_attention", SIM_CLASS_ATTENTION, 2.5 * z->att,
             E * (4 * bs * ht + 4 * bs * kt) + 8 * bs * ht +
                 8 * z->b * z->at * z->s,
             -1);
    g->price_on = &g->priced;
    return;
  }
  gpt_kern(g, q, "bwd.attn_context", SIM_CLASS_ATTENTION, 2 * z->att,
           E * (3 * bs * ht + 2 * z->N), -1);
  gpt_kern(g, q, "bwd.softmax", SIM_CLASS_SOFTMAX, 0, 7 * z->N, -1);
  gpt_kern(g, q, "bwd.attn_scores", SIM_CLASS_ATTENTION, 2 * z->att,
           E * (z->N + 4 * bs * ht), -1);
  if (z->expand)
    gpt_kern(g, q, "bwd.kv_repeat", SIM_CLASS_REDUCTION, 0,
             E * 2 * bs * (ht + kt), -1);
}

static void llama_layer_fwd(Gen *g, const LlSizes *z)
{
  const double E = z->E, A = z->A, h = z->h, X = z->X, bs = z->bs;
  const double Xn = z->St * X, Ft = z->Ft, qc = z->qc;
  Seq *q = &g->layer_fwd;
  gpt_kern(g, q, "fwd.rmsnorm", SIM_CLASS_NORM, 0, 2 * E * Xn + E * h, -1);
  sp_gather(g, q, A * X);
  gpt_kern(g, q, "fwd.qkv_gemm", SIM_CLASS_GEMM, 2 * X * qc,
           A * (X + qc * h) + E * bs * qc, -1);
  gpt_kern(g, q, "fwd.rotary", SIM_CLASS_ELEMENTWISE, 0,
           2 * E * bs * (z->ht + z->kt) + 4 * z->s * z->d, -1);
  llama_attention_fwd(g, q, z);
  fp8_cast(g, q, "fwd.fp8_cast_transpose", bs * z->ht);
  gpt_kern(g, q, "fwd.proj_gemm", SIM_CLASS_GEMM, 2 * X * z->ht,
           A * (bs * z->ht + z->ht * h) + E * X, -1);
  tp_reduce(g, q, E * X);
  gpt_kern(g, q, "fwd.residual_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * Xn, -1);
  gpt_kern(g, q, "fwd.rmsnorm", SIM_CLASS_NORM, 0, 2 * E * Xn + E * h, -1);
  sp_gather(g, q, A * X);
  gpt_kern(g, q, "fwd.fc1_gemm", SIM_CLASS_GEMM, 2 * X * 2 * Ft,
           A * (X + 2 * Ft * h) + E * 2 * bs * Ft, -1);
  /* silu(gate) * up: reads both halves, writes one (under fp8 the FP8
   * copy and its transpose too). */
  gpt_kern(g, q, "fwd.swiglu", SIM_CLASS_ELEMENTWISE, 0,
           (z->fp8 ? 2 * E + 2 : 3 * E) * bs * Ft, -1);
  gpt_kern(g, q, "fwd.fc2_gemm", SIM_CLASS_GEMM, 2 * X * Ft,
           A * (bs * Ft + Ft * h) + E * X, -1);
  tp_reduce(g, q, E * X);
  gpt_kern(g, q, "fwd.residual_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * Xn, -1);
}

static void llama_layer_bwd(Gen *g, const LlSizes *z)
{
  const double E = z->E, A = z->A, h = z->h, X = z->X, bs = z->bs;
  const double Xn = z->St * X, Ft = z->Ft, qc = z->qc, ht = z->ht;
  Seq *q = &g->layer_bwd;
  /* The residual gradient: the branch's input gradient added to the
   * stream's. */
  gpt_kern(g, q, "bwd.residual_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * Xn, -1);
  sp_gather(g, q, E * X);
  fp8_cast(g, q, "bwd.fp8_cast_transpose", X);
  gpt_kern(g, q, "bwd.fc2_dgrad", SIM_CLASS_GEMM, 2 * X * Ft,
           A * (X + Ft * h) + E * bs * Ft, -1);
  gpt_kern(g, q, "bwd.fc2_wgrad", SIM_CLASS_GEMM, 2 * X * Ft,
           A * (bs * Ft + X) + 8 * Ft * h, UNIT_FC2);
  /* Reads the saved gate and up and the output gradient, writes both
   * halves' gradients (under fp8 in FP8 with the transpose). */
  gpt_kern(g, q, "bwd.swiglu", SIM_CLASS_ELEMENTWISE, 0,
           (z->fp8 ? 3 * E + 4 : 5 * E) * bs * Ft, -1);
  sp_gather(g, q, A * X);
  gpt_kern(g, q, "bwd.fc1_dgrad", SIM_CLASS_GEMM, 2 * X * 2 * Ft,
           A * (2 * bs * Ft + 2 * Ft * h) + E * X, -1);
  gpt_kern(g, q, "bwd.fc1_wgrad", SIM_CLASS_GEMM, 2 * X * 2 * Ft,
           A * (X + 2 * bs * Ft) + 8 * 2 * Ft * h, UNIT_FC1);
  tp_reduce(g, q, E * X);
  gpt_kern(g, q, "bwd.rmsnorm", SIM_CLASS_NORM, 0, 4 * E * Xn + 8 * h,
           UNIT_LN2);
  gpt_kern(g, q, "bwd.residual_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * Xn, -1);
  sp_gather(g, q, E * X);
  fp8_cast(g, q, "bwd.fp8_cast_transpose", X);
  gpt_kern(g, q, "bwd.proj_dgrad", SIM_CLASS_GEMM, 2 * X * ht,
           A * (X + ht * h) + E * bs * ht, -1);
  gpt_kern(g, q, "bwd.proj_wgrad", SIM_CLASS_GEMM, 2 * X * ht,
           A * (bs * ht + X) + 8 * ht * h, UNIT_PROJ);
  llama_attention_bwd(g, q, z);
  gpt_kern(g, q, "bwd.rotary", SIM_CLASS_ELEMENTWISE, 0,
           2 * E * bs * (ht + z->kt) + 4 * z->s * z->d, -1);
  fp8_cast(g, q, "bwd.fp8_cast_transpose", bs * qc);
  sp_gather(g, q, A * X);
  gpt_kern(g, q, "bwd.qkv_dgrad", SIM_CLASS_GEMM, 2 * X * qc,
           A * (bs * qc + qc * h) + E * X, -1);
  gpt_kern(g, q, "bwd.qkv_wgrad", SIM_CLASS_GEMM, 2 * X * qc,
           A * (X + bs * qc) + 8 * qc * h, UNIT_QKV);
  tp_reduce(g, q, E * X);
  gpt_kern(g, q, "bwd.rmsnorm", SIM_CLASS_NORM, 0, 4 * E * Xn + 8 * h,
           UNIT_LN1);
}

/* Llama's ends: the word embedding alone (rotary positions live in the
 * layers), and a head with RMSNorm and its own output weight, whose
 * wgrad always completes UNIT_HEAD_EMB. */
static void llama_ends(Gen *g, const LlSizes *z)
{
  const double E = z->E, h = z->h, X = z->X, bs = z->bs, vt = g->vt;
  const double Xn = z->St * X;

  Seq *q = &g->emb_fwd;
  gpt_kern(g, q, "fwd.embedding", SIM_CLASS_EMBEDDING, 0, 8 * bs + 2 * E * X,
           -1);
  tp_reduce(g, q, E * X);
  q = &g->emb_bwd;
  sp_gather(g, q, E * X);
  gpt_kern(g, q, "bwd.embedding", SIM_CLASS_EMBEDDING, 0,
           5 * X + 8 * bs + 12 * vt * h, UNIT_EMB);

  q = &g->head_fwd;
  gpt_kern(g, q, "fwd.rmsnorm", SIM_CLASS_NORM, 0, 2 * E * Xn + E * h, -1);
  megatron_head(g, E, X, bs, vt, h, UNIT_HEAD_EMB);
  gpt_kern(g, &g->head_bwd, "bwd.rmsnorm", SIM_CLASS_NORM, 0,
           4 * E * Xn + 8 * h, UNIT_HEAD_LN);
}

static void build_llama_megatron_protos(Gen *g)
{
  const GptConfig *cfg = g->cfg;
  const double E = gpt_elem_bytes(cfg), a = cfg->heads;
  const double at = a / cfg->tp, kv = gpt_kv_heads(cfg);
  const gboolean fp8 = cfg->precision == GPT_PRECISION_FP8;
  LlSizes z = {
    .E = E, .A = fp8 ? 1 : E, .St = gpt_seq_parallel(cfg) ? 1 / g->t : 1,
    .b = g->b, .s = g->s, .h = g->h, .ht = g->ht, .kt = g->ht * kv / a,
    .Ft = (double)gpt_ffn_hidden(cfg) / cfg->tp, .at = at, .d = g->h / a,
    .N = g->n_att, .X = g->x, .bs = g->b * g->s,
    .att = 2 * g->b * g->s * g->s * g->ht, .fp8 = fp8,
    .expand = !gpt_attention_fused(cfg) && kv < a};
  z.qc = z.ht + 2 * z.kt;
  llama_layer_fwd(g, &z);
  llama_layer_bwd(g, &z);
  llama_ends(g, &z);
}

/* Builds the kernel sequences of Megatron-LM (see the opening comment for
 * the formulas; the code follows the table line by line). */
static void build_megatron_protos(Gen *g)
{
  const GptConfig *cfg = g->cfg;
  const double E = gpt_elem_bytes(cfg);
  const double b = g->b, s = g->s, h = g->h, ht = g->ht, X = g->x;
  const gboolean bloom = cfg->arch == GPT_ARCH_BLOOM;
  const gboolean fp8 = cfg->precision == GPT_PRECISION_FP8;
  /* BLOOM adds its ALiBi biases (one per head and key position, broadcast
   * over queries) to the scores inside the QK^T GEMM (baddbmm). */
  const double at = cfg->heads / cfg->tp;
  const double alibi = bloom ? E * b * at * s : 0;
  const MgSizes z = {
    .E = E, .A = fp8 ? 1 : E, .St = gpt_seq_parallel(cfg) ? 1 / g->t : 1,
    .b = b, .s = s, .h = h, .ht = ht, .at = at, .N = g->n_att, .X = X,
    .vt = g->vt, .bs = b * s, .gemm_qkv = 2 * X * 3 * ht,
    .gemm_proj = 2 * X * ht, .gemm_fc = 2 * X * 4 * ht,
    .att = 2 * b * s * s * ht, .bloom = bloom, .fp8 = fp8};
  megatron_layer_fwd(g, &z, alibi);
  megatron_layer_bwd(g, &z, alibi);
  megatron_ends(g, &z);
}

/* Appends the kernels of an unfused GeLU over `elems` elements: one per
 * entry of the chain, each moving passes x E bytes per element. */
static void hf_gelu_kernels(Gen *g, Seq *q, const char *prefix,
                            gboolean backward, double elems)
{
  const double E = gpt_elem_bytes(g->cfg);
  GeluChain c = gpt_hf_gelu(g->cfg, backward);
  for (guint i = 0; i < c.n; i++) {
    char name[32];
    g_snprintf(name, sizeof name, "%s.gelu_%u", prefix, i + 1);
    gpt_kern(g, q, name, SIM_CLASS_ELEMENTWISE, 0, c.passes[i] * E * elems, -1);
  }
}

/* The sizes impl hf's kernels are written in (see build_hf_protos). */
typedef struct {
  double E, b, s, h, alibi, N, X, vt, bs;
  double gemm_qkv, gemm_proj, gemm_fc, att, logits;
  double mask;         /* the causal mask: one byte per (q, k) */
  double layer_params;
  gboolean bloom;
} HfSizes;

/* The forward kernels of one layer. */
static void hf_layer_forward(Gen *g, const HfSizes *z)
{
  const double E = z->E;
  const double h = z->h;
  const double alibi = z->alibi;
  const double N = z->N;
  const double X = z->X;
  const double bs = z->bs;
  const double gemm_qkv = z->gemm_qkv;
  const double gemm_proj = z->gemm_proj;
  const double gemm_fc = z->gemm_fc;
  const double att = z->att;
  const double mask = z->mask;
  const gboolean bloom = z->bloom;

  /* Layer forward. */
  Seq *q = &g->layer_fwd;
  gpt_kern(g, q, "fwd.layernorm", SIM_CLASS_NORM, 0, 2 * E * X + 2 * E * h, -1);
  gpt_kern(g, q, "fwd.qkv_gemm", SIM_CLASS_GEMM, gemm_qkv,
           E * (X + 3 * h * h + 3 * bs * h), -1);
  gpt_kern(g, q, "fwd.attn_scores", SIM_CLASS_ATTENTION, att,
           E * (2 * bs * h + N) + alibi, -1);
  if (!bloom)
    gpt_kern(g, q, "fwd.attn_scale", SIM_CLASS_ELEMENTWISE, 0, 2 * E * N, -1);
  gpt_kern(g, q, "fwd.attn_mask", SIM_CLASS_ELEMENTWISE, 0, 2 * E * N + mask,
           -1);
  gpt_kern(g, q, "fwd.softmax", SIM_CLASS_SOFTMAX, 0, 2 * E * N, -1);
  gpt_kern(g, q, "fwd.attn_dropout", SIM_CLASS_ELEMENTWISE, 0, 2 * E * N + N,
           -1);
  gpt_kern(g, q, "fwd.attn_context", SIM_CLASS_ATTENTION, att,
           E * (N + 2 * bs * h), -1);
  gpt_kern(g, q, "fwd.merge_heads", SIM_CLASS_ELEMENTWISE, 0, 2 * E * X, -1);
  gpt_kern(g, q, "fwd.proj_gemm", SIM_CLASS_GEMM, gemm_proj,
           E * (X + h * h + X), -1);
  gpt_kern(g, q, "fwd.resid_dropout", SIM_CLASS_ELEMENTWISE, 0, 2 * E * X + X,
           -1);
  gpt_kern(g, q, "fwd.residual_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X, -1);
  gpt_kern(g, q, "fwd.layernorm", SIM_CLASS_NORM, 0, 2 * E * X + 2 * E * h, -1);
  gpt_kern(g, q, "fwd.fc1_gemm", SIM_CLASS_GEMM, gemm_fc,
           E * (X + 4 * h * h + 4 * bs * h), -1);
  hf_gelu_kernels(g, q, "fwd", FALSE, 4 * bs * h);
  gpt_kern(g, q, "fwd.fc2_gemm", SIM_CLASS_GEMM, gemm_fc,
           E * (4 * bs * h + 4 * h * h + X), -1);
  gpt_kern(g, q, "fwd.mlp_dropout", SIM_CLASS_ELEMENTWISE, 0, 2 * E * X + X,
           -1);
  gpt_kern(g, q, "fwd.residual_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X, -1);
}

/* The backward kernels of one layer. */
static void hf_layer_backward(Gen *g, const HfSizes *z)
{
  const double E = z->E;
  const double h = z->h;
  const double N = z->N;
  const double X = z->X;
  const double bs = z->bs;
  const double gemm_qkv = z->gemm_qkv;
  const double gemm_proj = z->gemm_proj;
  const double gemm_fc = z->gemm_fc;
  const double att = z->att;
  const double mask = z->mask;
  const double layer_params = z->layer_params;
  const gboolean bloom = z->bloom;

  /* Layer backward: autograd runs every forward op's backward in reverse;
   * a wgrad GEMM writes a fresh FP32 gradient (4 bytes per parameter),
   * each bias gradient is a reduction of its own, and the layer's
   * parameter gradients are accumulated into .grad afterwards (read both,
   * write one: 12 bytes per parameter). */
  Seq *q = &g->layer_bwd;
  gpt_kern(g, q, "bwd.mlp_dropout", SIM_CLASS_ELEMENTWISE, 0, 2 * E * X + X,
           -1);
  gpt_kern(g, q, "bwd.fc2_dgrad", SIM_CLASS_GEMM, gemm_fc,
           E * (X + 4 * h * h + 4 * bs * h), -1);
  gpt_kern(g, q, "bwd.fc2_wgrad", SIM_CLASS_GEMM, gemm_fc,
           E * (4 * bs * h + X) + 4 * 4 * h * h, UNIT_FC2);
  gpt_kern(g, q, "bwd.fc2_bias_grad", SIM_CLASS_REDUCTION, 0, E * X + 4 * h,
           -1);
  hf_gelu_kernels(g, q, "bwd", TRUE, 4 * bs * h);
  gpt_kern(g, q, "bwd.fc1_dgrad", SIM_CLASS_GEMM, gemm_fc,
           E * (4 * bs * h + 4 * h * h + X), -1);
  gpt_kern(g, q, "bwd.fc1_wgrad", SIM_CLASS_GEMM, gemm_fc,
           E * (X + 4 * bs * h) + 4 * 4 * h * h, UNIT_FC1);
  gpt_kern(g, q, "bwd.fc1_bias_grad", SIM_CLASS_REDUCTION, 0,
           E * 4 * bs * h + 16 * h, -1);
  gpt_kern(g, q, "bwd.layernorm", SIM_CLASS_NORM, 0, 3 * E * X + 8 * h, -1);
  gpt_kern(g, q, "bwd.layernorm_params", SIM_CLASS_REDUCTION, 0,
           2 * E * X + 8 * h, UNIT_LN2);
  gpt_kern(g, q, "bwd.residual_grad_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X,
           -1);
  gpt_kern(g, q, "bwd.resid_dropout", SIM_CLASS_ELEMENTWISE, 0, 2 * E * X + X,
           -1);
  gpt_kern(g, q, "bwd.proj_dgrad", SIM_CLASS_GEMM, gemm_proj,
           E * (X + h * h + X), -1);
  gpt_kern(g, q, "bwd.proj_wgrad", SIM_CLASS_GEMM, gemm_proj,
           E * (X + X) + 4 * h * h, UNIT_PROJ);
  gpt_kern(g, q, "bwd.proj_bias_grad", SIM_CLASS_REDUCTION, 0, E * X + 4 * h,
           -1);
  gpt_kern(g, q, "bwd.merge_heads", SIM_CLASS_ELEMENTWISE, 0, 2 * E * X, -1);
  gpt_kern(g, q, "bwd.attn_context", SIM_CLASS_ATTENTION, 2 * att,
           E * (3 * bs * h + 2 * N), -1);
  gpt_kern(g, q, "bwd.attn_dropout", SIM_CLASS_ELEMENTWISE, 0, 2 * E * N + N,
           -1);
  gpt_kern(g, q, "bwd.softmax", SIM_CLASS_SOFTMAX, 0, 3 * E * N, -1);
  gpt_kern(g, q, "bwd.attn_mask", SIM_CLASS_ELEMENTWISE, 0, 2 * E * N + mask,
           -1);
  if (!bloom)
    gpt_kern(g, q, "bwd.attn_scale", SIM_CLASS_ELEMENTWISE, 0, 2 * E * N, -1);
  gpt_kern(g, q, "bwd.attn_scores", SIM_CLASS_ATTENTION, 2 * att,
           E * (N + 4 * bs * h), -1);
  gpt_kern(g, q, "bwd.split_heads", SIM_CLASS_ELEMENTWISE, 0, 2 * E * 3 * X,
           -1);
  gpt_kern(g, q, "bwd.qkv_dgrad", SIM_CLASS_GEMM, gemm_qkv,
           E * (3 * bs * h + 3 * h * h + X), -1);
  gpt_kern(g, q, "bwd.qkv_wgrad", SIM_CLASS_GEMM, gemm_qkv,
           E * (X + 3 * bs * h) + 4 * 3 * h * h, UNIT_QKV);
  gpt_kern(g, q, "bwd.qkv_bias_grad", SIM_CLASS_REDUCTION, 0,
           E * 3 * bs * h + 12 * h, -1);
  gpt_kern(g, q, "bwd.layernorm", SIM_CLASS_NORM, 0, 3 * E * X + 8 * h, -1);
  gpt_kern(g, q, "bwd.layernorm_params", SIM_CLASS_REDUCTION, 0,
           2 * E * X + 8 * h, -1);
  gpt_kern(g, q, "bwd.residual_grad_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X,
           -1);
  /* The last op of the layer's backward: its last unit (ln1) is complete
   * here, when every .grad of the layer is. */
  gpt_kern(g, q, "bwd.grad_accum", SIM_CLASS_ELEMENTWISE, 0, 12 * layer_params,
           UNIT_LN1);
}

/* The first stage's embedding and the last stage's head, forward and
 * backward. */
static void hf_ends(Gen *g, const HfSizes *z)
{
  const double E = z->E;
  const double s = z->s;
  const double h = z->h;
  const double X = z->X;
  const double vt = z->vt;
  const double bs = z->bs;
  const double logits = z->logits;
  const gboolean bloom = z->bloom;

  /* First stage: GPT-2 gathers word and position rows, adds them and
   * applies dropout; BLOOM gathers word rows and normalises them. */
  Seq *q = &g->emb_fwd;
  gpt_kern(g, q, "fwd.embedding", SIM_CLASS_EMBEDDING, 0, 8 * bs + 2 * E * X,
           -1);
  if (bloom) {
    gpt_kern(g, q, "fwd.embedding_layernorm", SIM_CLASS_NORM, 0,
             2 * E * X + 2 * E * h, -1);
  } else {
    gpt_kern(g, q, "fwd.position_embedding", SIM_CLASS_EMBEDDING, 0,
             8 * bs + 2 * E * X, -1);
    gpt_kern(g, q, "fwd.embedding_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X,
             -1);
    gpt_kern(g, q, "fwd.embedding_dropout", SIM_CLASS_ELEMENTWISE, 0,
             2 * E * X + X, -1);
  }
  /* Backward: the dense gradient of the table (zero-filled, then rows
   * scattered in: 4 bytes per element written) and its accumulation into
   * .grad (12 bytes per element). */
  q = &g->emb_bwd;
  if (bloom) {
    gpt_kern(g, q, "bwd.embedding_layernorm", SIM_CLASS_NORM, 0,
             3 * E * X + 8 * h, -1);
    gpt_kern(g, q, "bwd.embedding_layernorm_params", SIM_CLASS_REDUCTION, 0,
             2 * E * X + 8 * h, -1);
  } else {
    gpt_kern(g, q, "bwd.embedding_dropout", SIM_CLASS_ELEMENTWISE, 0,
             2 * E * X + X, -1);
    gpt_kern(g, q, "bwd.position_embedding", SIM_CLASS_EMBEDDING, 0,
             E * X + 8 * bs + 16 * s * h, -1);
  }
  gpt_kern(g, q, "bwd.embedding", SIM_CLASS_EMBEDDING, 0,
           E * X + 8 * bs + 4 * vt * h, -1);
  gpt_kern(g, q, "bwd.embedding_grad_accum", SIM_CLASS_ELEMENTWISE, 0,
           12 * vt * h, UNIT_EMB);

  /* Last stage: final LayerNorm, the full logits, the shifted copy the
   * loss takes, log-softmax and NLL (CrossEntropyLoss). */
  q = &g->head_fwd;
  gpt_kern(g, q, "fwd.layernorm", SIM_CLASS_NORM, 0, 2 * E * X + 2 * E * h, -1);
  gpt_kern(g, q, "fwd.logits_gemm", SIM_CLASS_GEMM, logits,
           E * (X + vt * h + bs * vt), -1);
  gpt_kern(g, q, "fwd.logits_shift", SIM_CLASS_ELEMENTWISE, 0, 2 * E * bs * vt,
           -1);
  gpt_kern(g, q, "fwd.log_softmax", SIM_CLASS_SOFTMAX, 0, 2 * E * bs * vt, -1);
  gpt_kern(g, q, "fwd.nll_loss", SIM_CLASS_REDUCTION, 0, E * bs + 8 * bs, -1);
  q = &g->head_bwd;
  gpt_kern(g, q, "bwd.nll_loss", SIM_CLASS_ELEMENTWISE, 0, E * bs * vt + 8 * bs,
           -1);
  gpt_kern(g, q, "bwd.log_softmax", SIM_CLASS_SOFTMAX, 0, 3 * E * bs * vt, -1);
  gpt_kern(g, q, "bwd.logits_shift", SIM_CLASS_ELEMENTWISE, 0, 3 * E * bs * vt,
           -1);
  gpt_kern(g, q, "bwd.logits_dgrad", SIM_CLASS_GEMM, logits,
           E * (bs * vt + vt * h + X), -1);
  gpt_kern(g, q, "bwd.logits_wgrad", SIM_CLASS_GEMM, logits,
           E * (X + bs * vt) + 4 * vt * h, -1);
  gpt_kern(g, q, "bwd.logits_grad_accum", SIM_CLASS_ELEMENTWISE, 0, 12 * vt * h,
           g->cfg->pp > 1 ? UNIT_HEAD_EMB : -1);
  gpt_kern(g, q, "bwd.layernorm", SIM_CLASS_NORM, 0, 3 * E * X + 8 * h, -1);
  gpt_kern(g, q, "bwd.layernorm_params", SIM_CLASS_REDUCTION, 0,
           2 * E * X + 8 * h, UNIT_HEAD_LN);
}

/* Builds the kernel sequences of a Hugging Face model in eager PyTorch
 * (tp = 1; see "The implementation" in the opening comment). */
static void build_hf_protos(Gen *g)
{
  const double E = gpt_elem_bytes(g->cfg);
  const double b = g->b, s = g->s, h = g->h;
  const gboolean bloom = g->cfg->arch == GPT_ARCH_BLOOM;
  const double alibi = bloom ? E * b * g->cfg->heads * s : 0;
  const double N = g->n_att, X = g->x, vt = g->vt, bs = b * s;
  const double gemm_qkv = 2 * X * 3 * h, gemm_proj = 2 * X * h;
  const double gemm_fc = 2 * X * 4 * h, att = 2 * b * s * s * h;
  const double logits = 2 * X * vt;
  const double mask = s * s; /* the causal mask: one byte per (q, k) */
  const double layer_params = 12 * h * h + 13 * h;

  const HfSizes z = {E, b, s, h, alibi, N, X, vt, bs, gemm_qkv, gemm_proj,
                     gemm_fc, att, logits, mask, layer_params, bloom};
  hf_layer_forward(g, &z);
  hf_layer_backward(g, &z);
  hf_ends(g, &z);
}

/* Builds every op prototype of the iteration: the implementation's kernel
 * sequences, then the point-to-point and tie prototypes. */
void gpt_build_protos(Gen *g)
{
  const double E = gpt_elem_bytes(g->cfg);
  const double vt = g->vt, h = g->h;
  /* With sequence parallelism a stage ships its s/t-token shard
   * (Megatron's p2p tensor shape is (s/t, b, h) then). */
  const double X = gpt_seq_parallel(g->cfg) ? g->x / g->t : g->x;
  if (g->cfg->impl == GPT_IMPL_HF && g->cfg->arch == GPT_ARCH_LLAMA)
    gpt_build_llama_hf_protos(g);
  else if (g->cfg->impl == GPT_IMPL_HF)
    build_hf_protos(g);
  else if (g->cfg->arch == GPT_ARCH_LLAMA)
    build_llama_megatron_protos(g);
  else
    build_megatron_protos(g);

  /* Point to point and the embedding tie. */
  g->send_fwd = gpt_make_proto(g, "pp.send_fwd", SIM_OP_SEND, SIM_CLASS_COMM,
                               SIM_COLL_SEND_RECV, SIM_MATH_VECTOR, 0, E * X);
  g->recv_fwd = gpt_make_proto(g, "pp.recv_fwd", SIM_OP_RECV, SIM_CLASS_COMM,
                               SIM_COLL_SEND_RECV, SIM_MATH_VECTOR, 0, E * X);
  g->send_bwd = gpt_make_proto(g, "pp.send_bwd", SIM_OP_SEND, SIM_CLASS_COMM,
                               SIM_COLL_SEND_RECV, SIM_MATH_VECTOR, 0, E * X);
  g->recv_bwd = gpt_make_proto(g, "pp.recv_bwd", SIM_OP_RECV, SIM_CLASS_COMM,
                               SIM_COLL_SEND_RECV, SIM_MATH_VECTOR, 0, E * X);
  g->tie = gpt_make_proto(g, "pp.embedding_all_reduce", SIM_OP_COLLECTIVE,
                          SIM_CLASS_COMM, SIM_COLL_ALL_REDUCE,
                          SIM_MATH_VECTOR, 0, 4 * vt * h);
  g->tie.group = GROUP_TIE;
}

/* Transformer Engine's delayed scaling (Megatron's default recipe: amax
 * history 1, most recent) keeps an amax, a scale and its inverse (4 bytes
 * each) per FP8 tensor: a GEMM's input and weight forward, its output
 * gradient backward.  Each forward and backward chunk pass ends with the
 * amaxes all-reduced over the amax group (megatron-core: tensor and data
 * parallel) and one fused update of the scales (read and write the 12
 * bytes); the weights are cast to FP8 with their transposes once per
 * chunk per iteration (is_first_microbatch: read BF16, write both FP8
 * copies). */
#define FP8_STATE_BYTES 12.0
#define FP8_GEMMS_PER_LAYER 4.0

void gpt_build_fp8_protos(Gen *g, guint layers)
{
  g->fp8_fwd_end.n = 0;
  g->fp8_bwd_end.n = 0;
  if (g->cfg->precision != GPT_PRECISION_FP8)
    return;
  const double E = gpt_elem_bytes(g->cfg), l = layers;
  const double fwd_tensors = 2 * FP8_GEMMS_PER_LAYER * l;
  const double bwd_tensors = FP8_GEMMS_PER_LAYER * l;
  const struct {
    Seq *q;
    double tensors;
    const char *scale;
  } ends[] = {{&g->fp8_fwd_end, fwd_tensors, "fwd.fp8_scale_update"},
              {&g->fp8_bwd_end, bwd_tensors, "bwd.fp8_scale_update"}};
  for (guint i = 0; i < G_N_ELEMENTS(ends); i++) {
    Seq *q = ends[i].q;
    double amax = 4 * ends[i].tensors;
    tp_coll(g, q, "fp8.amax_all_reduce", SIM_COLL_ALL_REDUCE, amax);
    if (gpt_grad_ranks(g->cfg) > 1) {
      Proto p = gpt_make_proto(g, "fp8.amax_all_reduce", SIM_OP_COLLECTIVE,
                               SIM_CLASS_COMM, SIM_COLL_ALL_REDUCE,
                               SIM_MATH_VECTOR, 0, amax);
      p.group = GROUP_DP;
      q->p[q->n++] = p;
    }
    gpt_kern(g, q, ends[i].scale, SIM_CLASS_ELEMENTWISE, 0,
             2 * FP8_STATE_BYTES * ends[i].tensors, -1);
  }
  /* A layer's weights per TP rank: 12 h ht for GPT and BLOOM. */
  double weights = l * 12 * g->h * g->ht;
  if (g->cfg->arch == GPT_ARCH_LLAMA) {
    double kt = g->ht * gpt_kv_heads(g->cfg) / g->cfg->heads;
    double Ft = (double)gpt_ffn_hidden(g->cfg) / g->cfg->tp;
    weights = l * g->h * (2 * g->ht + 2 * kt + 3 * Ft);
  }
  g->fp8_weight_cast = gpt_make_proto(g, "fwd.fp8_weight_cast", SIM_OP_KERNEL,
                                      SIM_CLASS_ELEMENTWISE,
                                      SIM_COLL_ALL_REDUCE, SIM_MATH_VECTOR, 0,
                                      (E + 2) * weights);
}

/* FlashAttention's efficiency (achieved / dense 16-bit tensor peak), by
 * GPU family, forward and backward, causal, head dimension 128, s = 2048.
 *  Hopper (H100, H200): FlashAttention-3 (Shah et al., NeurIPS 2024,
 *    arXiv:2407.08608): BF16 forward up to 740 TFLOP/s, 75% of the H100
 *    SXM5 peak, on long non-causal sequences; backward 1.5-1.75x
 *    FlashAttention-2's.  What Transformer Engine runs on Hopper (cuDNN's
 *    fused attention) is of that class.  Causal s = 2048 is below the
 *    maxima: 0.60 forward, 0.45 backward (estimate).
 *  Ampere and the rest: FlashAttention-2 (Dao, ICLR 2024,
 *    arXiv:2307.08691): forward 50-73% of the A100 peak, backward up to
 *    63%; 0.60 and 0.50 at causal s = 2048 (estimate).  FlashAttention-2
 *    on an H100 reaches only 35% (FlashAttention-3's abstract), which is
 *    why Hopper gets its own row. */
static const struct {
  const char *prefix;
  double fwd, bwd;
  const char *source;
} flash_effs[] = {
  {"H100", 0.60, 0.45, "estimate: FlashAttention-3 (arXiv:2407.08608), "
                       "up to 75% of the H100 peak forward, causal s 2048 "
                       "below it"},
  {"H200", 0.60, 0.45, "estimate: FlashAttention-3 (arXiv:2407.08608), "
                       "as H100 (same GH100 die)"},
  {NULL, 0.60, 0.50, "estimate: FlashAttention-2 (arXiv:2307.08691), "
                     "50-73% of the A100 peak forward, up to 63% backward"},
};

void gpt_flash_eff(const char *name, double *fwd, double *bwd,
                   const char **source)
{
  guint i = 0;
  while (flash_effs[i].prefix != NULL &&
         (name == NULL || !g_str_has_prefix(name, flash_effs[i].prefix)))
    i++;
  *fwd = flash_effs[i].fwd;
  *bwd = flash_effs[i].bwd;
  if (source != NULL)
    *source = flash_effs[i].source;
}

void gpt_flash_specs(Gen *g)
{
  double fwd, bwd;
  gpt_flash_eff(g->ref->name, &fwd, &bwd, NULL);
  /* The implementation's attention factor scales it as it scales the
   * catalogue's figure (1 for megatron); not impl hf's, fitted on the
   * eager batched-GEMM attention: its SDPA (Llama) runs FlashAttention
   * at the published figure. */
  double f = g->cfg->impl == GPT_IMPL_HF ? 1
                                         : gpt_config_eff(g->cfg).attention;
  g->flash_fwd = g->priced;
  g->flash_bwd = g->priced;
  g->flash_fwd.eff_compute[SIM_CLASS_ATTENTION].v = MIN(1.0, fwd * f);
  g->flash_bwd.eff_compute[SIM_CLASS_ATTENTION].v = MIN(1.0, bwd * f);
}

/* ---------------------------------------------------------------------- */
/* The representative layer mix                                           */

guint gpt_layer_kernels(const GptConfig *cfg, SimPhase phase,
                        GptLayerKernel *out)
{
  g_return_val_if_fail(cfg != NULL && out != NULL, 0);
  if (phase != SIM_PHASE_FORWARD && phase != SIM_PHASE_BACKWARD)
    return 0;
  const double b = cfg->microbatch_size, s = cfg->seq_len;
  const double H = cfg->hidden, tp = cfg->tp, heads = cfg->heads;
  const double T = b * s, d = H / heads, B = gpt_elem_bytes(cfg);
  const double hp = H / tp, nh = heads / tp;
  const guint math = gpt_math(cfg);
  const gboolean bwd = phase == SIM_PHASE_BACKWARD;
  guint n = 0;
#define ADD(cls, fl, by, tens, cnt)                                        \
  do {                                                                     \
    out[n].kernel.klass = (cls);                                           \
    out[n].kernel.flops = (fl);                                            \
    out[n].kernel.bytes = (by);                                            \
    out[n].kernel.tensor = (tens);                                         \
    out[n].count = (cnt);                                                  \
    n++;                                                                   \
  } while (0)
  /* GEMMs (M x K) x (K x N): 2MKN FLOPs, inputs and output once.  Llama:
   * GQA's narrower K and V, SwiGLU's gate+up and down at its own width. */
  double gemm[4][2] = {{H, 3 * hp}, {hp, H}, {H, 4 * hp}, {4 * hp, H}};
  if (cfg->arch == GPT_ARCH_LLAMA) {
    double Fp = gpt_ffn_hidden(cfg) / tp;
    gemm[0][1] = hp * (1 + 2.0 * gpt_kv_heads(cfg) / heads);
    gemm[2][1] = 2 * Fp;
    gemm[3][0] = Fp;
  }
  for (int i = 0; i < 4; i++) {
    double K = gemm[i][0], N = gemm[i][1];
    double fl = 2 * T * K * N;
    double by = B * (T * K + K * N + T * N);
    ADD(SIM_CLASS_GEMM, fl, by, math, 1);
    if (bwd) /* wgrad: FP32 main_grad read and written (8 B / weight) */
      ADD(SIM_CLASS_GEMM, fl, by + 8 * K * N, math, 1);
  }
  /* Attention: QK^T and AV batched over the rank's heads. */
  double probs = b * nh * s * s;
  double att_fl = 2 * probs * d;
  double att_by = B * (probs + 2 * T * hp);
  ADD(SIM_CLASS_ATTENTION, att_fl, att_by, gpt_math16(cfg), bwd ? 4 : 2);
  /* Vector kernels: DRAM traffic (read + write) per launch. */
  double rw = bwd ? 3 : 2; /* backward reads the saved input too */
  ADD(SIM_CLASS_SOFTMAX, 5 * probs, rw * B * probs, SIM_MATH_VECTOR, 1);
  ADD(SIM_CLASS_ELEMENTWISE, probs, rw * B * probs + probs, SIM_MATH_VECTOR,
      1);
  ADD(SIM_CLASS_NORM, 8 * T * H, (rw * B + (bwd ? 4 : 0)) * T * H,
      SIM_MATH_VECTOR, 2);
  ADD(SIM_CLASS_ELEMENTWISE, 3 * T * H, (rw + 1) * B * T * H + T * H,
      SIM_MATH_VECTOR, 2);
  ADD(SIM_CLASS_ELEMENTWISE, 10 * T * 4 * hp, rw * B * T * 4 * hp,
      SIM_MATH_VECTOR, 1);
#undef ADD
  g_assert(n <= GPT_LAYER_KERNELS_MAX);
  return n;
}
