/* traces/gpt_kernels.c -- the kernels the generator emits: shape
 * de-duplication and pricing, the kernel sequences of a layer, the
 * embedding and the head under Megatron-LM and Hugging Face eager
 * PyTorch, the point-to-point prototypes, and the representative layer
 * mix the model fit uses (gpt_layer_kernels).
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
    gpu_kernel_cost(&g->priced, &k, 0, 0, G_MAXDOUBLE, &cost);
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

/* Appends a kernel to a sequence. */
static void kern(Gen *g, Seq *q, const char *name, SimOpClass klass,
                 double flops, double bytes, int unit)
{
  g_assert(q->n < SEQ_MAX);
  SimMath math = klass == SIM_CLASS_GEMM || klass == SIM_CLASS_ATTENTION
                    ? gpt_math(g->cfg)
                    : SIM_MATH_VECTOR;
  /* coll is meaningless for kernels; 0 keeps every shape field in range. */
  Proto p = gpt_make_proto(g, name, SIM_OP_KERNEL, klass, SIM_COLL_ALL_REDUCE,
                           math, flops, bytes);
  p.unit = (gint8)unit;
  q->p[q->n++] = p;
}

/* Appends a TP all-reduce of `bytes` (only when t > 1). */
static void tp_allreduce(Gen *g, Seq *q, double bytes)
{
  if (g->cfg->tp == 1)
    return;
  g_assert(q->n < SEQ_MAX);
  Proto p = gpt_make_proto(g, "tp.all_reduce", SIM_OP_COLLECTIVE,
                           SIM_CLASS_COMM, SIM_COLL_ALL_REDUCE,
                           SIM_MATH_VECTOR, 0, bytes);
  p.group = GROUP_TP;
  q->p[q->n++] = p;
}

/* Builds the kernel sequences of Megatron-LM (see the opening comment for
 * the formulas; the code follows the table line by line). */
static void build_megatron_protos(Gen *g)
{
  const double E = gpt_elem_bytes(g->cfg);
  const double b = g->b, s = g->s, h = g->h, ht = g->ht;
  const gboolean bloom = g->cfg->arch == GPT_ARCH_BLOOM;
  /* BLOOM adds its ALiBi biases (one per head and key position, broadcast
   * over queries) to the scores inside the QK^T GEMM (baddbmm). */
  const double alibi = bloom ? E * b * (g->cfg->heads / g->cfg->tp) * s : 0;
  const double N = g->n_att, X = g->x, vt = g->vt, bs = b * s;
  const double gemm_qkv = 2 * X * 3 * ht, gemm_proj = 2 * X * ht;
  const double gemm_fc = 2 * X * 4 * ht, att = 2 * b * s * s * ht;
  const double logits = 2 * X * vt;

  /* Layer forward. */
  Seq *q = &g->layer_fwd;
  kern(g, q, "fwd.layernorm", SIM_CLASS_NORM, 0, 2 * E * X + 2 * E * h, -1);
  kern(g, q, "fwd.qkv_gemm", SIM_CLASS_GEMM, gemm_qkv,
       E * (X + 3 * h * ht + 3 * bs * ht), -1);
  kern(g, q, "fwd.attn_scores", SIM_CLASS_ATTENTION, att,
       E * (2 * bs * ht + N) + alibi, -1);
  kern(g, q, "fwd.softmax", SIM_CLASS_SOFTMAX, 0, 5 * N, -1);
  kern(g, q, "fwd.attn_context", SIM_CLASS_ATTENTION, att,
       E * (N + 2 * bs * ht), -1);
  kern(g, q, "fwd.proj_gemm", SIM_CLASS_GEMM, gemm_proj,
       E * (bs * ht + ht * h + X), -1);
  tp_allreduce(g, q, E * X);
  kern(g, q, "fwd.bias_dropout_add", SIM_CLASS_ELEMENTWISE, 0,
       3 * E * X + X, -1);
  kern(g, q, "fwd.layernorm", SIM_CLASS_NORM, 0, 2 * E * X + 2 * E * h, -1);
  kern(g, q, "fwd.fc1_gemm", SIM_CLASS_GEMM, gemm_fc,
       E * (X + 4 * h * ht + 4 * bs * ht), -1);
  kern(g, q, "fwd.gelu", SIM_CLASS_ELEMENTWISE, 0, 2 * E * 4 * bs * ht, -1);
  kern(g, q, "fwd.fc2_gemm", SIM_CLASS_GEMM, gemm_fc,
       E * (4 * bs * ht + 4 * ht * h + X), -1);
  tp_allreduce(g, q, E * X);
  kern(g, q, "fwd.bias_dropout_add", SIM_CLASS_ELEMENTWISE, 0,
       3 * E * X + X, -1);

  /* Layer backward, reverse order. */
  q = &g->layer_bwd;
  kern(g, q, "bwd.bias_dropout_add", SIM_CLASS_ELEMENTWISE, 0, 2 * E * X + X,
       -1);
  kern(g, q, "bwd.fc2_dgrad", SIM_CLASS_GEMM, gemm_fc,
       E * (X + 4 * ht * h + 4 * bs * ht), -1);
  kern(g, q, "bwd.fc2_wgrad", SIM_CLASS_GEMM, gemm_fc,
       E * (4 * bs * ht + X) + 8 * 4 * ht * h, UNIT_FC2);
  kern(g, q, "bwd.gelu", SIM_CLASS_ELEMENTWISE, 0, 3 * E * 4 * bs * ht, -1);
  kern(g, q, "bwd.fc1_dgrad", SIM_CLASS_GEMM, gemm_fc,
       E * (4 * bs * ht + 4 * h * ht + X), -1);
  kern(g, q, "bwd.fc1_wgrad", SIM_CLASS_GEMM, gemm_fc,
       E * (X + 4 * bs * ht) + 8 * 4 * h * ht, UNIT_FC1);
  tp_allreduce(g, q, E * X);
  kern(g, q, "bwd.layernorm", SIM_CLASS_NORM, 0, 4 * E * X + 16 * h,
       UNIT_LN2);
  kern(g, q, "bwd.bias_dropout_add", SIM_CLASS_ELEMENTWISE, 0, 2 * E * X + X,
       -1);
  kern(g, q, "bwd.proj_dgrad", SIM_CLASS_GEMM, gemm_proj,
       E * (X + ht * h + bs * ht), -1);
  kern(g, q, "bwd.proj_wgrad", SIM_CLASS_GEMM, gemm_proj,
       E * (bs * ht + X) + 8 * ht * h, UNIT_PROJ);
  kern(g, q, "bwd.attn_context", SIM_CLASS_ATTENTION, 2 * att,
       E * (3 * bs * ht + 2 * N), -1);
  kern(g, q, "bwd.softmax", SIM_CLASS_SOFTMAX, 0, 7 * N, -1);
  kern(g, q, "bwd.attn_scores", SIM_CLASS_ATTENTION, 2 * att,
       E * (N + 4 * bs * ht), -1);
  kern(g, q, "bwd.qkv_dgrad", SIM_CLASS_GEMM, gemm_qkv,
       E * (3 * bs * ht + 3 * ht * h + X), -1);
  kern(g, q, "bwd.qkv_wgrad", SIM_CLASS_GEMM, gemm_qkv,
       E * (X + 3 * bs * ht) + 8 * 3 * ht * h, UNIT_QKV);
  tp_allreduce(g, q, E * X);
  kern(g, q, "bwd.layernorm", SIM_CLASS_NORM, 0, 4 * E * X + 16 * h,
       UNIT_LN1);

  /* First stage: embeddings. */
  q = &g->emb_fwd;
  kern(g, q, "fwd.embedding", SIM_CLASS_EMBEDDING, 0, 8 * bs + 2 * E * X, -1);
  tp_allreduce(g, q, E * X);
  if (bloom) {
    kern(g, q, "fwd.embedding_layernorm", SIM_CLASS_NORM, 0,
         2 * E * X + 2 * E * h, -1);
  } else {
    kern(g, q, "fwd.embedding_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X + X,
         -1);
  }
  q = &g->emb_bwd;
  if (bloom)
    kern(g, q, "bwd.embedding_layernorm", SIM_CLASS_NORM, 0,
         4 * E * X + 16 * h, -1);
  kern(g, q, "bwd.embedding", SIM_CLASS_EMBEDDING, 0,
       5 * X + 8 * bs + 12 * (vt + (bloom ? 0 : s)) * h, UNIT_EMB);

  /* Last stage: final LayerNorm, logits, vocab-parallel cross entropy. */
  q = &g->head_fwd;
  kern(g, q, "fwd.layernorm", SIM_CLASS_NORM, 0, 2 * E * X + 2 * E * h, -1);
  kern(g, q, "fwd.logits_gemm", SIM_CLASS_GEMM, logits,
       E * (X + vt * h + bs * vt), -1);
  kern(g, q, "fwd.xent_max", SIM_CLASS_REDUCTION, 0, E * bs * vt + 4 * bs,
       -1);
  tp_allreduce(g, q, 4 * bs);
  kern(g, q, "fwd.xent_softmax", SIM_CLASS_SOFTMAX, 0,
       2 * E * bs * vt + 8 * bs, -1);
  tp_allreduce(g, q, 4 * bs);
  tp_allreduce(g, q, 4 * bs);
  kern(g, q, "fwd.xent_loss", SIM_CLASS_ELEMENTWISE, 0,
       2 * E * bs * vt + 12 * bs, -1);
  q = &g->head_bwd;
  kern(g, q, "bwd.xent", SIM_CLASS_ELEMENTWISE, 0, 2 * E * bs * vt + 8 * bs,
       -1);
  kern(g, q, "bwd.logits_dgrad", SIM_CLASS_GEMM, logits,
       E * (bs * vt + vt * h + X), -1);
  kern(g, q, "bwd.logits_wgrad", SIM_CLASS_GEMM, logits,
       E * (X + bs * vt) + 8 * vt * h, g->cfg->pp > 1 ? UNIT_HEAD_EMB : -1);
  tp_allreduce(g, q, E * X);
  kern(g, q, "bwd.layernorm", SIM_CLASS_NORM, 0, 4 * E * X + 16 * h,
       UNIT_HEAD_LN);
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
    kern(g, q, name, SIM_CLASS_ELEMENTWISE, 0, c.passes[i] * E * elems, -1);
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
  kern(g, q, "fwd.layernorm", SIM_CLASS_NORM, 0, 2 * E * X + 2 * E * h, -1);
  kern(g, q, "fwd.qkv_gemm", SIM_CLASS_GEMM, gemm_qkv,
       E * (X + 3 * h * h + 3 * bs * h), -1);
  kern(g, q, "fwd.attn_scores", SIM_CLASS_ATTENTION, att,
       E * (2 * bs * h + N) + alibi, -1);
  if (!bloom)
    kern(g, q, "fwd.attn_scale", SIM_CLASS_ELEMENTWISE, 0, 2 * E * N, -1);
  kern(g, q, "fwd.attn_mask", SIM_CLASS_ELEMENTWISE, 0, 2 * E * N + mask, -1);
  kern(g, q, "fwd.softmax", SIM_CLASS_SOFTMAX, 0, 2 * E * N, -1);
  kern(g, q, "fwd.attn_dropout", SIM_CLASS_ELEMENTWISE, 0, 2 * E * N + N,
       -1);
  kern(g, q, "fwd.attn_context", SIM_CLASS_ATTENTION, att,
       E * (N + 2 * bs * h), -1);
  kern(g, q, "fwd.merge_heads", SIM_CLASS_ELEMENTWISE, 0, 2 * E * X, -1);
  kern(g, q, "fwd.proj_gemm", SIM_CLASS_GEMM, gemm_proj,
       E * (X + h * h + X), -1);
  kern(g, q, "fwd.resid_dropout", SIM_CLASS_ELEMENTWISE, 0, 2 * E * X + X,
       -1);
  kern(g, q, "fwd.residual_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X, -1);
  kern(g, q, "fwd.layernorm", SIM_CLASS_NORM, 0, 2 * E * X + 2 * E * h, -1);
  kern(g, q, "fwd.fc1_gemm", SIM_CLASS_GEMM, gemm_fc,
       E * (X + 4 * h * h + 4 * bs * h), -1);
  hf_gelu_kernels(g, q, "fwd", FALSE, 4 * bs * h);
  kern(g, q, "fwd.fc2_gemm", SIM_CLASS_GEMM, gemm_fc,
       E * (4 * bs * h + 4 * h * h + X), -1);
  kern(g, q, "fwd.mlp_dropout", SIM_CLASS_ELEMENTWISE, 0, 2 * E * X + X, -1);
  kern(g, q, "fwd.residual_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X, -1);
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
  kern(g, q, "bwd.mlp_dropout", SIM_CLASS_ELEMENTWISE, 0, 2 * E * X + X, -1);
  kern(g, q, "bwd.fc2_dgrad", SIM_CLASS_GEMM, gemm_fc,
       E * (X + 4 * h * h + 4 * bs * h), -1);
  kern(g, q, "bwd.fc2_wgrad", SIM_CLASS_GEMM, gemm_fc,
       E * (4 * bs * h + X) + 4 * 4 * h * h, UNIT_FC2);
  kern(g, q, "bwd.fc2_bias_grad", SIM_CLASS_REDUCTION, 0, E * X + 4 * h, -1);
  hf_gelu_kernels(g, q, "bwd", TRUE, 4 * bs * h);
  kern(g, q, "bwd.fc1_dgrad", SIM_CLASS_GEMM, gemm_fc,
       E * (4 * bs * h + 4 * h * h + X), -1);
  kern(g, q, "bwd.fc1_wgrad", SIM_CLASS_GEMM, gemm_fc,
       E * (X + 4 * bs * h) + 4 * 4 * h * h, UNIT_FC1);
  kern(g, q, "bwd.fc1_bias_grad", SIM_CLASS_REDUCTION, 0,
       E * 4 * bs * h + 16 * h, -1);
  kern(g, q, "bwd.layernorm", SIM_CLASS_NORM, 0, 3 * E * X + 8 * h, -1);
  kern(g, q, "bwd.layernorm_params", SIM_CLASS_REDUCTION, 0,
       2 * E * X + 8 * h, UNIT_LN2);
  kern(g, q, "bwd.residual_grad_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X,
       -1);
  kern(g, q, "bwd.resid_dropout", SIM_CLASS_ELEMENTWISE, 0, 2 * E * X + X,
       -1);
  kern(g, q, "bwd.proj_dgrad", SIM_CLASS_GEMM, gemm_proj,
       E * (X + h * h + X), -1);
  kern(g, q, "bwd.proj_wgrad", SIM_CLASS_GEMM, gemm_proj,
       E * (X + X) + 4 * h * h, UNIT_PROJ);
  kern(g, q, "bwd.proj_bias_grad", SIM_CLASS_REDUCTION, 0, E * X + 4 * h,
       -1);
  kern(g, q, "bwd.merge_heads", SIM_CLASS_ELEMENTWISE, 0, 2 * E * X, -1);
  kern(g, q, "bwd.attn_context", SIM_CLASS_ATTENTION, 2 * att,
       E * (3 * bs * h + 2 * N), -1);
  kern(g, q, "bwd.attn_dropout", SIM_CLASS_ELEMENTWISE, 0, 2 * E * N + N,
       -1);
  kern(g, q, "bwd.softmax", SIM_CLASS_SOFTMAX, 0, 3 * E * N, -1);
  kern(g, q, "bwd.attn_mask", SIM_CLASS_ELEMENTWISE, 0, 2 * E * N + mask, -1);
  if (!bloom)
    kern(g, q, "bwd.attn_scale", SIM_CLASS_ELEMENTWISE, 0, 2 * E * N, -1);
  kern(g, q, "bwd.attn_scores", SIM_CLASS_ATTENTION, 2 * att,
       E * (N + 4 * bs * h), -1);
  kern(g, q, "bwd.split_heads", SIM_CLASS_ELEMENTWISE, 0, 2 * E * 3 * X, -1);
  kern(g, q, "bwd.qkv_dgrad", SIM_CLASS_GEMM, gemm_qkv,
       E * (3 * bs * h + 3 * h * h + X), -1);
  kern(g, q, "bwd.qkv_wgrad", SIM_CLASS_GEMM, gemm_qkv,
       E * (X + 3 * bs * h) + 4 * 3 * h * h, UNIT_QKV);
  kern(g, q, "bwd.qkv_bias_grad", SIM_CLASS_REDUCTION, 0,
       E * 3 * bs * h + 12 * h, -1);
  kern(g, q, "bwd.layernorm", SIM_CLASS_NORM, 0, 3 * E * X + 8 * h, -1);
  kern(g, q, "bwd.layernorm_params", SIM_CLASS_REDUCTION, 0,
       2 * E * X + 8 * h, -1);
  kern(g, q, "bwd.residual_grad_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X,
       -1);
  /* The last op of the layer's backward: its last unit (ln1) is complete
   * here, when every .grad of the layer is. */
  kern(g, q, "bwd.grad_accum", SIM_CLASS_ELEMENTWISE, 0, 12 * layer_params,
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
  kern(g, q, "fwd.embedding", SIM_CLASS_EMBEDDING, 0, 8 * bs + 2 * E * X, -1);
  if (bloom) {
    kern(g, q, "fwd.embedding_layernorm", SIM_CLASS_NORM, 0,
         2 * E * X + 2 * E * h, -1);
  } else {
    kern(g, q, "fwd.position_embedding", SIM_CLASS_EMBEDDING, 0,
         8 * bs + 2 * E * X, -1);
    kern(g, q, "fwd.embedding_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X, -1);
    kern(g, q, "fwd.embedding_dropout", SIM_CLASS_ELEMENTWISE, 0,
         2 * E * X + X, -1);
  }
  /* Backward: the dense gradient of the table (zero-filled, then rows
   * scattered in: 4 bytes per element written) and its accumulation into
   * .grad (12 bytes per element). */
  q = &g->emb_bwd;
  if (bloom) {
    kern(g, q, "bwd.embedding_layernorm", SIM_CLASS_NORM, 0,
         3 * E * X + 8 * h, -1);
    kern(g, q, "bwd.embedding_layernorm_params", SIM_CLASS_REDUCTION, 0,
         2 * E * X + 8 * h, -1);
  } else {
    kern(g, q, "bwd.embedding_dropout", SIM_CLASS_ELEMENTWISE, 0,
         2 * E * X + X, -1);
    kern(g, q, "bwd.position_embedding", SIM_CLASS_EMBEDDING, 0,
         E * X + 8 * bs + 16 * s * h, -1);
  }
  kern(g, q, "bwd.embedding", SIM_CLASS_EMBEDDING, 0,
       E * X + 8 * bs + 4 * vt * h, -1);
  kern(g, q, "bwd.embedding_grad_accum", SIM_CLASS_ELEMENTWISE, 0,
       12 * vt * h, UNIT_EMB);

  /* Last stage: final LayerNorm, the full logits, the shifted copy the
   * loss takes, log-softmax and NLL (CrossEntropyLoss). */
  q = &g->head_fwd;
  kern(g, q, "fwd.layernorm", SIM_CLASS_NORM, 0, 2 * E * X + 2 * E * h, -1);
  kern(g, q, "fwd.logits_gemm", SIM_CLASS_GEMM, logits,
       E * (X + vt * h + bs * vt), -1);
  kern(g, q, "fwd.logits_shift", SIM_CLASS_ELEMENTWISE, 0, 2 * E * bs * vt,
       -1);
  kern(g, q, "fwd.log_softmax", SIM_CLASS_SOFTMAX, 0, 2 * E * bs * vt, -1);
  kern(g, q, "fwd.nll_loss", SIM_CLASS_REDUCTION, 0, E * bs + 8 * bs, -1);
  q = &g->head_bwd;
  kern(g, q, "bwd.nll_loss", SIM_CLASS_ELEMENTWISE, 0, E * bs * vt + 8 * bs,
       -1);
  kern(g, q, "bwd.log_softmax", SIM_CLASS_SOFTMAX, 0, 3 * E * bs * vt, -1);
  kern(g, q, "bwd.logits_shift", SIM_CLASS_ELEMENTWISE, 0, 3 * E * bs * vt,
       -1);
  kern(g, q, "bwd.logits_dgrad", SIM_CLASS_GEMM, logits,
       E * (bs * vt + vt * h + X), -1);
  kern(g, q, "bwd.logits_wgrad", SIM_CLASS_GEMM, logits,
       E * (X + bs * vt) + 4 * vt * h, -1);
  kern(g, q, "bwd.logits_grad_accum", SIM_CLASS_ELEMENTWISE, 0, 12 * vt * h,
       g->cfg->pp > 1 ? UNIT_HEAD_EMB : -1);
  kern(g, q, "bwd.layernorm", SIM_CLASS_NORM, 0, 3 * E * X + 8 * h, -1);
  kern(g, q, "bwd.layernorm_params", SIM_CLASS_REDUCTION, 0,
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
  const double X = g->x, vt = g->vt, h = g->h;
  if (g->cfg->impl == GPT_IMPL_HF)
    build_hf_protos(g);
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
  /* GEMMs (M x K) x (K x N): 2MKN FLOPs, inputs and output once. */
  const double gemm[4][2] = {{H, 3 * hp}, {hp, H}, {H, 4 * hp}, {4 * hp, H}};
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
  ADD(SIM_CLASS_ATTENTION, att_fl, att_by, math, bwd ? 4 : 2);
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
