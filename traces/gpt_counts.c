/* traces/gpt_counts.c -- what a generator configuration implies before
 * anything is generated: the parameter units and their DP buckets, the
 * stages' parameters and layers, the op counts of each kernel sequence and
 * rank, and the memory estimate of the workload.
 *
 * The counts follow the kernel sequences of traces/gpt_kernels.c and
 * traces/gpt_llama_hf.c; traces/gpt_config.c holds the configuration and
 * its checks.
 */
#include "traces/gpt-private.h"

/* ---------------------------------------------------------------------- */
/* Parameter units and DP buckets                                         */

/* Parameters per TP rank of each unit. */
static void unit_params(const GptConfig *cfg, double *out)
{
  double h = cfg->hidden, ht = h / cfg->tp;
  double vt = (double)gpt_padded_vocab(cfg) / cfg->tp;
  out[UNIT_FC2] = 4 * ht * h + h;
  out[UNIT_FC1] = 4 * ht * h + 4 * ht;
  out[UNIT_LN2] = 2 * h;
  out[UNIT_PROJ] = ht * h + h;
  out[UNIT_QKV] = 3 * ht * h + 3 * ht;
  out[UNIT_LN1] = 2 * h;
  out[UNIT_HEAD_EMB] = cfg->pp > 1 ? vt * h : 0;
  out[UNIT_HEAD_LN] = 2 * h;
  out[UNIT_EMB] = vt * h + (cfg->arch == GPT_ARCH_BLOOM
                                ? 2 * h /* the embedding LayerNorm */
                                : (double)cfg->seq_len * h); /* positions */
  if (cfg->arch == GPT_ARCH_LLAMA) {
    /* No biases, RMSNorm weights only, SwiGLU's gate and up in FC1,
     * the untied output layer on the last stage, no positions. */
    double Ft = (double)gpt_ffn_hidden(cfg) / cfg->tp;
    double kvt = ht * gpt_kv_heads(cfg) / cfg->heads;
    out[UNIT_FC2] = Ft * h;
    out[UNIT_FC1] = 2 * Ft * h;
    out[UNIT_LN2] = out[UNIT_LN1] = out[UNIT_HEAD_LN] = h;
    out[UNIT_PROJ] = ht * h;
    out[UNIT_QKV] = (ht + 2 * kvt) * h;
    out[UNIT_HEAD_EMB] = vt * h;
    out[UNIT_EMB] = vt * h;
  }
}

static const Unit layer_units[] = {UNIT_FC2, UNIT_FC1, UNIT_LN2,
                                   UNIT_PROJ, UNIT_QKV, UNIT_LN1};

/* Appends the units of model chunk c of stage p, in backward order, to
 * `out` (of Unit).  The head sits on the last stage's last chunk, the
 * embeddings on the first stage's chunk 0. */
static void chunk_units(const GptConfig *cfg, guint p, guint c, GArray *out)
{
  guint v = gpt_config_chunks(cfg);
  guint lpc = gpt_stage_layers(cfg, p) / v;
  if (p == cfg->pp - 1 && c == v - 1) {
    if (gpt_head_weight(cfg)) {
      Unit u = UNIT_HEAD_EMB;
      g_array_append_val(out, u);
    }
    Unit u = UNIT_HEAD_LN;
    g_array_append_val(out, u);
  }
  for (guint j = 0; j < lpc; j++)
    g_array_append_vals(out, layer_units, G_N_ELEMENTS(layer_units));
  if (p == 0 && c == 0) {
    Unit u = UNIT_EMB;
    g_array_append_val(out, u);
  }
}

/* Splits n gradient tensors of `bytes` each (backward order) into buckets
 * of at least cap bytes (cap <= 0: one bucket); a tensor is never split.
 * Writes the index of each bucket's last tensor to end[] and its size to
 * size[] (both may be NULL) and returns the number of buckets. */
guint gpt_make_buckets(const double *bytes, guint n, double cap,
                       guint *end, double *size)
{
  guint nb = 0;
  double acc = 0;
  for (guint i = 0; i < n; i++) {
    acc += bytes[i];
    if ((cap > 0 && acc >= cap) || i == n - 1) {
      if (end != NULL)
        end[nb] = i;
      if (size != NULL)
        size[nb] = acc;
      nb++;
      acc = 0;
    }
  }
  return nb;
}

double gpt_bucket_cap_bytes(const GptConfig *cfg)
{
  return cfg->dp_bucket_mb * 1048576.0;
}

/* Gradient bytes (fp32) of the units of chunk c of stage p, in backward
 * order.  Each chunk is its own DDP module in Megatron, with its own
 * gradient buffer, so buckets never span two chunks. */
GArray *gpt_chunk_grad_bytes(const GptConfig *cfg, guint p, guint c)
{
  double params[UNIT_COUNT];
  unit_params(cfg, params);
  g_autoptr(GArray) units = g_array_new(FALSE, FALSE, sizeof(Unit));
  chunk_units(cfg, p, c, units);
  GArray *bytes = g_array_sized_new(FALSE, FALSE, sizeof(double), units->len);
  for (guint i = 0; i < units->len; i++) {
    double b = 4 * params[g_array_index(units, Unit, i)];
    g_array_append_val(bytes, b);
  }
  return bytes;
}

void gpt_fsdp_units(const GptConfig *cfg, double *layer, double *root)
{
  g_autoptr(GArray) bytes = gpt_chunk_grad_bytes(cfg, 0, 0);
  const double *b = (const double *)(void *)bytes->data;
  guint head = gpt_head_weight(cfg) ? 2 : 1;
  *root = b[bytes->len - 1] / 4;
  for (guint i = 0; i < head; i++)
    *root += b[i] / 4;
  *layer = 0;
  for (guint i = head; i < head + G_N_ELEMENTS(layer_units); i++)
    *layer += b[i] / 4;
}

/* Parameters of one rank of stage p (all its chunks). */
double gpt_stage_params(const GptConfig *cfg, guint p)
{
  double sum = 0;
  for (guint c = 0; c < gpt_config_chunks(cfg); c++) {
    g_autoptr(GArray) bytes = gpt_chunk_grad_bytes(cfg, p, c);
    for (guint i = 0; i < bytes->len; i++)
      sum += g_array_index(bytes, double, i) / 4;
  }
  return sum;
}

/* DP buckets of one rank of stage p (each chunk bucketed on its own). */
static guint stage_buckets(const GptConfig *cfg, guint p)
{
  guint n = 0;
  for (guint c = 0; c < gpt_config_chunks(cfg); c++) {
    g_autoptr(GArray) bytes = gpt_chunk_grad_bytes(cfg, p, c);
    n += gpt_make_buckets((const double *)(void *)bytes->data, bytes->len,
                          gpt_bucket_cap_bytes(cfg), NULL, NULL);
  }
  return n;
}

guint gpt_stage_layers(const GptConfig *cfg, guint p)
{
  g_return_val_if_fail(cfg != NULL && p < cfg->pp, 0);
  return cfg->stage_layers != NULL ? cfg->stage_layers[p]
                                   : cfg->layers / cfg->pp;
}

guint gpt_stage_first_layer(const GptConfig *cfg, guint p)
{
  g_return_val_if_fail(cfg != NULL && p < cfg->pp, 0);
  if (cfg->stage_layers == NULL)
    return p * (cfg->layers / cfg->pp);
  guint n = 0;
  for (guint q = 0; q < p; q++)
    n += cfg->stage_layers[q];
  return n;
}

/* The element passes (reads + writes, in tensors of the activation's
 * size) of each kernel of the unfused tanh-GeLU that eager PyTorch runs
 * for a Hugging Face model, forward and backward (autograd of every
 * elementwise op), per arch (see "The implementation").  GPT-2's
 * gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); BLOOM's
 * bloom_gelu_forward / bloom_gelu_back, which recompute the tanh in the
 * backward. */
static const guint8 hf_gelu_fwd_gpt[] = {2, 2, 3, 2, 2, 2, 2, 3};
static const guint8 hf_gelu_bwd_gpt[] = {3, 3, 2, 3, 2, 2, 2, 3, 3, 3};
static const guint8 hf_gelu_fwd_bloom[] = {2, 2, 2, 3, 2, 3, 2, 2, 3};
static const guint8 hf_gelu_bwd_bloom[] = {2, 2, 3, 2, 3, 2, 2, 3, 2, 2,
                                           3, 2, 3, 3, 2, 2, 3, 3};


GeluChain gpt_hf_gelu(const GptConfig *cfg, gboolean backward)
{
  GeluChain c;
  if (cfg->arch == GPT_ARCH_BLOOM) {
    c.passes = backward ? hf_gelu_bwd_bloom : hf_gelu_fwd_bloom;
    c.n = backward ? G_N_ELEMENTS(hf_gelu_bwd_bloom)
                   : G_N_ELEMENTS(hf_gelu_fwd_bloom);
  } else {
    c.passes = backward ? hf_gelu_bwd_gpt : hf_gelu_fwd_gpt;
    c.n = backward ? G_N_ELEMENTS(hf_gelu_bwd_gpt)
                   : G_N_ELEMENTS(hf_gelu_fwd_gpt);
  }
  return c;
}

/* Ops of each kernel sequence (TP all-reduces included), as build_protos
 * emits them; gpt_rank_ops counts with these without generating. */
typedef struct {
  guint64 layer_fwd, layer_bwd, emb_fwd, emb_bwd, head_fwd, head_bwd;
} SeqLens;

static void seq_lens(const GptConfig *cfg, SeqLens *n)
{
  guint64 c = cfg->tp > 1, bloom = cfg->arch == GPT_ARCH_BLOOM;
  if (cfg->impl == GPT_IMPL_HF && cfg->arch == GPT_ARCH_LLAMA) {
    /* Separate q, k, v, o, gate, up, down GEMMs; two RMSNorm and two
     * rotary chains; repeat_kv's two copies (R) under GQA. */
    guint64 R = 2 * (gpt_kv_heads(cfg) < cfg->heads);
    guint64 rf = gpt_hf_llama_chain(0), rb = gpt_hf_llama_chain(1);
    guint64 ro = gpt_hf_llama_chain(2);
    n->layer_fwd = 2 * rf + 2 * ro + R + 13;
    n->layer_bwd = 2 * rb + 2 * ro + R + 25;
    n->emb_fwd = 1;
    n->emb_bwd = 2;
    n->head_fwd = rf + 5;
    n->head_bwd = rb + 7;
    return;
  }
  if (cfg->impl == GPT_IMPL_HF) {
    /* Hugging Face (tp = 1): GPT-2 scales the scores in a kernel of its
     * own, BLOOM inside baddbmm. */
    n->layer_fwd = 17 - bloom + gpt_hf_gelu(cfg, FALSE).n;
    n->layer_bwd = 29 - bloom + gpt_hf_gelu(cfg, TRUE).n;
    n->emb_fwd = bloom ? 2 : 4;
    n->emb_bwd = 4;
    n->head_fwd = 5;
    n->head_bwd = 8;
    return;
  }
  /* Flash attention: one kernel each way for three; sequence parallelism:
   * two more collectives forward (all-gather + reduce-scatter for each
   * all-reduce) and four backward (the inputs gathered again for the
   * wgrads, the gradients gathered for the row-parallel GEMMs); FP8: the
   * cast-transpose of the proj input forward, of the fc2, proj and qkv
   * output gradients backward (the norms and GeLU cast in their own
   * kernels). */
  guint64 F = gpt_attention_fused(cfg), S = gpt_seq_parallel(cfg);
  guint64 f8 = cfg->precision == GPT_PRECISION_FP8;
  if (cfg->arch == GPT_ARCH_LLAMA) {
    /* The rotary kernel each way; the unfused attention's K/V repeat
     * (G) under GQA; no embedding add. */
    guint64 G = !F && gpt_kv_heads(cfg) < cfg->heads;
    n->layer_fwd = 13 + G - 2 * F + 2 * c + 2 * S + f8;
    n->layer_bwd = 17 + G - 2 * F + 2 * c + 4 * S + 3 * f8;
    n->emb_fwd = 1 + c;
    n->emb_bwd = 1 + S;
    n->head_fwd = 5 + 3 * c + S;
    n->head_bwd = 4 + c + S;
    return;
  }
  n->layer_fwd = 12 - 2 * F + 2 * c + 2 * S + f8;
  n->layer_bwd = 16 - 2 * F + 2 * c + 4 * S + 3 * f8;
  n->emb_fwd = 2 + c;
  n->emb_bwd = 1 + bloom + S;
  n->head_fwd = 5 + 3 * c + S;
  n->head_bwd = 4 + c + S;
}

gboolean gpt_attention_fused(const GptConfig *cfg)
{
  if (cfg->impl == GPT_IMPL_HF && cfg->arch == GPT_ARCH_LLAMA)
    return TRUE; /* SDPA's FlashAttention kernel */
  return cfg->attention == GPT_ATTENTION_FLASH;
}

gboolean gpt_seq_parallel(const GptConfig *cfg)
{
  return cfg->sequence_parallel && cfg->tp > 1;
}

guint gpt_fp8_pass_ops(const GptConfig *cfg)
{
  if (cfg->precision != GPT_PRECISION_FP8)
    return 0;
  return 1 + (cfg->tp > 1) + (gpt_grad_ranks(cfg) > 1);
}

guint gpt_grad_ranks(const GptConfig *cfg)
{
  return cfg->dp * cfg->cp;
}

/* Ops the context-parallel ring adds to a layer's forward and backward in
 * place of its one flash kernel (cp > 1): forward cp attention steps,
 * cp - 1 K/V sends and receives, cp - 1 log-sum-exp corrections, cp
 * output corrections and the output's cast; backward cp steps, cp sends
 * and receives, cp - 1 dQ and cp dK/dV accumulations
 * (gpt_build_ring_protos). */
static guint64 ring_fwd_extra(const GptConfig *cfg)
{
  return cfg->cp > 1 ? 5 * (guint64)cfg->cp - 3 : 0;
}

static guint64 ring_bwd_extra(const GptConfig *cfg)
{
  return cfg->cp > 1 ? 5 * (guint64)cfg->cp - 2 : 0;
}

/* The data-parallel collectives of a rank of stage p: one all-reduce
 * per bucket (zero 0); a reduce-scatter and an all-gather per bucket
 * (zero 1); ZeRO-2's reduce-scatters every microbatch and one
 * all-gather; FSDP's per microbatch all-gathers of the root unit
 * (embedding, final norm, head) and every layer forward, of every layer
 * again backward, and a reduce-scatter per unit.  Under hybrid sharding
 * every reduce-scatter is followed by an all-reduce of the shard across
 * the nodes. */
static guint64 dp_ops(const GptConfig *cfg, guint p)
{
  if (gpt_grad_ranks(cfg) == 1)
    return 0;
  guint64 nb = stage_buckets(cfg, p), m = cfg->microbatches;
  guint64 ar = gpt_zero_replicas(cfg) > 1, L = gpt_stage_layers(cfg, p);
  switch (cfg->zero) {
  case 0:
    return nb;
  case 1:
    return 2 * nb;
  case 2:
    return m * nb * (1 + ar) + nb;
  default:
    return m * ((L + 1) + L + (L + 1) * (1 + ar));
  }
}

/* Distinct shapes of those collectives, at most: one per bucket and
 * kind, or FSDP's six (a layer's and the root's all-gather,
 * reduce-scatter and cross-node all-reduce). */
static guint64 dp_shapes(const GptConfig *cfg, guint p)
{
  if (gpt_grad_ranks(cfg) == 1)
    return 0;
  guint64 kinds[] = {1, 2, 3, 0};
  if (cfg->zero >= 3)
    return 6;
  return stage_buckets(cfg, p) * kinds[cfg->zero];
}

guint64 gpt_rank_ops(const GptConfig *cfg, guint stage)
{
  g_return_val_if_fail(cfg != NULL && cfg->pp > 0 && stage < cfg->pp, 0);
  guint64 R = cfg->recompute != FALSE;
  guint64 first = stage == 0, last = stage == cfg->pp - 1;
  guint64 L = gpt_stage_layers(cfg, stage), v = gpt_config_chunks(cfg);
  SeqLens sl;
  seq_lens(cfg, &sl);
  sl.layer_fwd += ring_fwd_extra(cfg);
  sl.layer_bwd += ring_bwd_extra(cfg);
  guint64 f = L * sl.layer_fwd + first * sl.emb_fwd + last * sl.head_fwd;
  guint64 b = L * sl.layer_bwd + R * L * sl.layer_fwd + first * sl.emb_bwd +
              last * sl.head_bwd;
  /* Every chunk pass receives its input and sends its output but the
   * first stage's chunk 0 (embedding) and the last stage's last chunk
   * (loss): 2 fewer p2p ops each way per microbatch. */
  guint64 p2p = 4 * v - 2 * first - 2 * last;
  /* FP8: every chunk pass ends with its amax reductions and scale
   * update, and each chunk casts its weights once (first microbatch). */
  guint64 f8 = gpt_fp8_pass_ops(cfg);
  guint64 n = cfg->microbatches * (f + b + p2p + 2 * v * f8) + 1;
  if (f8 > 0)
    n += v;
  if (cfg->pp > 1 && gpt_tied(cfg) && (first || last))
    n++;
  n += dp_ops(cfg, stage);
  if (gpt_seq_parallel(cfg))
    n++; /* the sequence-parallel LayerNorm/bias gradients' TP all-reduce */
  return n;
}

guint64 gpt_n_ops(const GptConfig *cfg)
{
  g_return_val_if_fail(cfg != NULL, 0);
  guint64 n = 0;
  for (guint p = 0; p < cfg->pp; p++)
    n += gpt_rank_ops(cfg, p) * cfg->tp * cfg->cp * cfg->dp;
  return n;
}

guint64 gpt_stored_ops(const GptConfig *cfg)
{
  g_return_val_if_fail(cfg != NULL, 0);
  if (!cfg->fold)
    return gpt_n_ops(cfg);
  guint64 n = 0;
  for (guint p = 0; p < cfg->pp; p++)
    n += gpt_rank_ops(cfg, p) * cfg->cp; /* one per context rank */
  return n;
}

/* Streams of a rank of stage p: the highest stream index emit_stage()
 * uses, plus one (see "Streams and dependencies"). */
static guint stage_streams(const GptConfig *cfg, guint p)
{
  if (cfg->tp_comm_overlap)
    return STREAM_TP + 1;
  guint top = gpt_grad_ranks(cfg) > 1 ? 1 : 0;
  if (cfg->cp > 1)
    return cfg->cp == 2 ? STREAM_CP_RECV_PREV + 1 : STREAM_CP_RECV_NEXT + 1;
  if (cfg->pp > 1) {
    if (cfg->schedule == PIPELINE_INTERLEAVED)
      top = cfg->pp == 2 ? 4 : 5; /* two stages: sends on 2, recvs on 4 */
    else if (p + 1 < cfg->pp)
      top = 5; /* sends activations on 2, receives gradients on 5 */
    else
      top = 4; /* the last stage: gradients out on 3, activations in on 4 */
  }
  return top + 1;
}

/* Shapes of the iteration: the kernel and communication prototypes of
 * gpt_build_protos() (at most; equal ones are merged) plus one per distinct
 * DP bucket size, bounded by the number of buckets (twice under zero = 1:
 * the reduce-scatter and the all-gather; dp_shapes), and fp8's per-stage amax and
 * scale prototypes (their bytes follow the stage's layers). */
static guint64 max_shapes(const GptConfig *cfg)
{
  /* Llama under impl hf names each kernel of its chains: up to ~110. */
  guint64 n = cfg->impl == GPT_IMPL_HF && cfg->arch == GPT_ARCH_LLAMA ? 128
                                                                      : 64;
  for (guint p = 0; p < cfg->pp; p++)
    n += dp_shapes(cfg, p);
  if (cfg->precision == GPT_PRECISION_FP8)
    n += 6 * (guint64)cfg->pp;
  /* The ring's step, correction and accumulation kernels of each context
   * rank (their token counts differ by rank) and its six messages. */
  if (cfg->cp > 1)
    n += 6 * (guint64)cfg->cp * cfg->cp + 6;
  return n;
}

guint64 gpt_estimate_bytes(const GptConfig *cfg)
{
  g_return_val_if_fail(cfg != NULL && cfg->pp > 0, 0);
  guint64 n_ranks = (guint64)cfg->tp * cfg->cp * cfg->pp * cfg->dp;
  guint64 bytes = 0;
  /* Op records and stream offsets of the templates (one per stage and
   * context rank), which the other ranks of their class share (a program
   * record each when shared). */
  gboolean shared = !cfg->fold && (guint64)cfg->tp * cfg->dp > 1;
  for (guint p = 0; p < cfg->pp; p++)
    bytes += cfg->cp * (gpt_rank_ops(cfg, p) * sizeof(SimOp) +
                        (stage_streams(cfg, p) + 1) * sizeof(guint32) +
                        (shared ? sizeof(SimProgram) + sizeof(gpointer)
                                : 0));
  /* Rank records and the fold map. */
  bytes += n_ranks * sizeof(SimRank);
  if (cfg->fold)
    bytes += n_ranks * sizeof(guint32);
  /* Groups: members and offsets (TP, DP and tie blocks). */
  guint64 groups = 0, members = 0;
  guint64 cd = (guint64)cfg->cp * cfg->dp;
  if (cfg->tp > 1) {
    groups += cd * cfg->pp;
    members += n_ranks;
  }
  if (cd > 1) {
    groups += (guint64)cfg->tp * cfg->pp;
    members += n_ranks;
  }
  if (cfg->pp > 1) {
    groups += (guint64)cfg->tp * cd;
    members += 2 * (guint64)cfg->tp * cd;
  }
  if (cfg->zero_group == GPT_ZERO_GROUP_NODE) {
    /* Hybrid sharding's node groups and cross-node replica groups. */
    guint64 S = gpt_zero_shards(cfg), R = gpt_zero_replicas(cfg);
    groups += R + (R > 1 ? S : 0);
    members += n_ranks + (R > 1 ? n_ranks : 0);
  }
  bytes += (members + groups + 1) * sizeof(guint32);
  /* Shapes, interned names and provenance (a few kB). */
  bytes += max_shapes(cfg) * sizeof(SimShape) + 4096;
  return bytes;
}
