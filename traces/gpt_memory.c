/* traces/gpt_memory.c -- GPU memory per rank of a GPT training job.
 *
 * The model (GB = 1e9 bytes; b = microbatch size, s = sequence length,
 * h = hidden, a = heads, t = tp, d = dp, V = padded vocabulary, E = bytes
 * per activation element, 2 for the 16-bit precisions, 4 for tf32/fp32)
 * -------------------------------------------------------------------------
 * Static, per parameter N of the rank (gpt_stage_params: its TP shard of
 * the stage's layers, plus the embeddings on the first stage and the tied
 * copy and final LayerNorm on the last):
 *   16-bit:   weights 2, fp32 main gradients 4, optimizer 12 (fp32 master
 *             copy and the two Adam moments): 18 bytes;
 *   tf32/fp32: weights 4, gradients 4, optimizer 8 (moments): 16 bytes;
 *   fp8 (NeMo's recipe): weights 2 (FP8 and TE's cached transpose),
 *             bf16 gradients 2, optimizer 16 (fp32 master, the moments
 *             and an fp32 copy of the gradient shard): 20 bytes;
 * with zero = 1 the optimizer part is divided by d: 6 + 12/d, 8 + 8/d and
 * 4 + 16/d.  Source: Megatron-LM's distributed-optimizer documentation
 * (docs.nvidia.com/megatron-core/developer-guide/latest/api-guide/
 * dist_optimizer.html, the "bf16 parameters, fp32 gradients", "fp32
 * parameters, fp32 gradients" and "fp16 parameters, fp16 gradients"
 * rows; the generator accumulates fp32 main gradients in every 16-bit
 * precision, so fp16 follows the bf16 row).  NeMo's FP8 recipe, which
 * its published H100 rows ran: bf16_with_fp8_mixed() sets fp8_params
 * (FP8 GEMM weights, the master copy only in the optimizer) and its
 * performance scripts turn grad_reduce_in_fp32 off with fp8.
 * zero 2 divides the gradients by the shards S too, zero 3 the weights
 * too (static_bytes: the ZeRO paper's stages), each plus what it holds
 * unsharded for a while.
 *
 * Activations of one layer and one microbatch, stored for backward
 * (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
 * Transformer Models", section 4 and table 2), by where they live:
 *   replicated over TP: the two LayerNorm inputs (2E sbh), the QKV and
 *     FC1 inputs (2E sbh), two dropout masks (2 sbh): (4E + 2) sbh;
 *   split by TP: Q and K (2E sbh), V (E sbh), the projection input
 *     (E sbh), the GeLU input and the FC2 input (8E sbh): 12E sbh;
 *   attention scores, split by TP: softmax output and dropout output
 *     (2E a s^2 b) and the dropout mask (a s^2 b): (2E + 1) a s^2 b;
 *     with flash attention none of them, only the fp32 row log-sum-exp
 *     (4 a s b).
 *   FP8: Transformer Engine saves the FP8 copy it cast of each linear
 *     layer's input (QKV, FC1, FC2: 1 byte instead of E), and of the
 *     projection's beside the 16-bit output the fused attention keeps
 *     for its own backward (E + 1; unfused attention does not keep it).
 * For E = 2: 34 sbh + 5 a s^2 b, the paper's formula; with TP
 * sbh (10 + 24/t) + 5 a s^2 b / t; with sequence parallelism everything
 * is split: (34 sbh + 5 a s^2 b) / t.  Full recompute stores only each
 * layer's input (E sbh, / t with sequence parallelism: the paper's
 * 2 sbh L), and the layer being recomputed holds its full activations
 * once during its backward, which the peak adds.
 * The first stage adds the token ids (8 sb) and the embedding dropout
 * mask (sbh, / t with sequence parallelism); the stage with the head
 * adds the final LayerNorm and output-GEMM inputs (2E sbh, / t with
 * sequence parallelism) and fp32 logits for the loss (4 sbV / t), per
 * microbatch held: Megatron-LM's megatron/training/
 * theoretical_memory_usage.py, which implements the paper's table.
 *
 * Microbatches in flight (what a stage holds at its peak, per schedule;
 * P stages, stage p, m microbatches, v chunks):
 *   1f1b:  min(P - p, m) -- the warm-up's P - p - 1 forwards and the
 *          first steady forward before the first backward frees one;
 *   gpipe: m -- every forward runs before any backward;
 *   interleaved: min(w + 1, m v) passes of one chunk (l / (P v) layers),
 *          w = min(2 (P - p - 1) + (v - 1) P, m v) warm-up forwards, as
 *          Megatron's forward_backward_pipelining_with_interleaving
 *          (models/schedule.h); for stage 0 that is
 *          L (1 + (P - 1) / (P v)) layers' worth, L = l / P, the
 *          "interleaved schedule memory penalty" of
 *          theoretical_memory_usage.py.  The embedding and head extras
 *          count the passes of their chunk among those first w + 1
 *          forwards.
 *
 * Allowance: 2 GB for the CUDA context, cuBLAS workspaces and the NCCL
 * communicators' buffers (estimate: a PyTorch CUDA context takes
 * 0.5-1 GB, NCCL 4 MiB buffers per channel and peer for each of the TP,
 * DP, PP and embedding groups about 1 GB), plus 10% of the tensors for
 * the caching allocator's fragmentation (estimate; Megatron's own
 * estimate adds 5% to activations for temporaries).
 *
 * Context parallelism (cp > 1): every per-microbatch term above counts
 * a context rank's s/cp tokens (its two chunks of the sequence; the
 * log-sum-exp too, the one s-long tensor flash attention keeps); the
 * optimizer is sharded over dp * cp with zero = 1 (megatron-core's
 * distributed optimizer uses the data-parallel group with context
 * parallelism).  The ring adds, while one layer's attention runs, its
 * double-buffered messages (Transformer Engine's p2p_comm_buffers): two
 * K/V blocks forward, two blocks of K/V with dK/dV backward, so at the
 * backward's peak 4 E b (s/cp) kv d / t x 2 bytes (K and V), once per
 * stage as the recomputed layer is.
 *
 * Limits: no gradient or communication buffers beyond the main gradients
 * (the distributed optimizer's all-gather buffers are views of them), no
 * transient backward temporaries but the recomputed layer, no activation
 * offloading; FP8 is NeMo's recipe alone (not TE's FP8 caches beside bf16
 * weights, 4 bytes a GEMM parameter).
 */
#include "traces/gpt_memory.h"
#include "traces/gpt-private.h"

#include <math.h>

#define GB 1e9
#define ALLOWANCE_FIXED_BYTES (2 * GB)
#define ALLOWANCE_FRACTION 0.10

struct GptMemory {
  GptConfig cfg;      /* stage_layers points at layers_copy */
  guint *layers_copy; /* owned, pp entries, or NULL */
  GptMemoryRecipe recipe;
  GptStageMemory *stages; /* pp entries */
};

GptMemoryRecipe gpt_memory_recipe_from_config(const GptConfig *cfg)
{
  /* Sequence parallelism splits nothing on one TP rank (the generator
   * ignores it there too, as Megatron does). */
  gboolean fp8 = cfg->precision == GPT_PRECISION_FP8;
  return (GptMemoryRecipe){
    .flash_attention = gpt_attention_fused(cfg),
    .sequence_parallel = cfg->sequence_parallel && cfg->tp > 1,
    .zero = cfg->zero,
    .grads_16bit = fp8,
    .fp8_gemm_inputs = fp8};
}

/* Tokens of a sequence one rank holds: all of them, or a context rank's
 * s/cp. */
static double rank_seq(const GptConfig *cfg)
{
  return (double)cfg->seq_len / cfg->cp;
}

/* Bytes per activation element: the 16-bit precisions (and anything
 * narrower, whose activations are kept in 16 bits) 2, tf32 and fp32 4. */
static double act_elem_bytes(const GptConfig *cfg)
{
  return MAX(gpt_elem_bytes(cfg), 2.0);
}

/* Bytes per element of a linear layer's input saved for its weight
 * gradient: Transformer Engine under FP8 saves the FP8 copy it cast for
 * the forward GEMM (1 byte), not the 16-bit tensor. */
static double gemm_input_bytes(const GptConfig *cfg, const GptMemoryRecipe *r)
{
  return r->fp8_gemm_inputs ? 1 : act_elem_bytes(cfg);
}

/* Bytes per sbh element of the attention output kept for backward: the
 * projection's saved input, plus under FP8 the 16-bit output the fused
 * attention kernel keeps for its own backward (in 16 bits the two are
 * one tensor; unfused attention's backward does not read its output). */
static double attention_out_bytes(const GptConfig *cfg,
                                  const GptMemoryRecipe *r)
{
  double x = gemm_input_bytes(cfg, r);
  if (r->fp8_gemm_inputs && r->flash_attention)
    x += act_elem_bytes(cfg);
  return x;
}

/* The ring attention's receive buffers at the backward's peak: two of K/V
 * with dK/dV (0 without context parallelism). */
static double ring_buffer_bytes(const GptConfig *cfg)
{
  if (cfg->cp == 1)
    return 0;
  double kt = (double)cfg->hidden * gpt_kv_heads(cfg) / cfg->heads / cfg->tp;
  double kv = act_elem_bytes(cfg) * 2 * cfg->microbatch_size *
              rank_seq(cfg) * kt;
  return 2 * 2 * kv;
}

/* Llama's layer, Korthikanti's accounting applied to its tensors (F =
 * ffn_hidden, g = kv_heads / a; no dropout anywhere, so no masks):
 *   replicated over TP: the two RMSNorm inputs and the QKV and FC1
 *     inputs (the norms' outputs): 4E sbh;
 *   split by TP: Q after the rotary embedding (E sbh), K and V
 *     (2E g sbh with flash attention; unfused, the bmm keeps the copies
 *     repeated to all a heads, 2E sbh), the projection input (E sbh),
 *     SwiGLU's gate and up (2E sbF, what its backward reads) and its
 *     output, FC2's input (E sbF): E sbh (2 + 2g) + 3E sbF;
 *   attention scores, split by TP: the softmax output (E a s^2 b), or
 *     with flash attention the fp32 log-sum-exp (4 a s b).
 * With F = 4h, g = 1 and dropout this is the GPT count above. */
static double llama_layer_bytes(const GptConfig *cfg,
                                const GptMemoryRecipe *r)
{
  double b = cfg->microbatch_size, s = rank_seq(cfg), h = cfg->hidden;
  double a = cfg->heads, t = cfg->tp, E = act_elem_bytes(cfg);
  double F = gpt_ffn_hidden(cfg), sbh = s * b * h;
  double g = r->flash_attention ? gpt_kv_heads(cfg) / a : 1;
  double X = gemm_input_bytes(cfg, r), O = attention_out_bytes(cfg, r);
  double replicated = (2 * E + 2 * X) * sbh;
  double split = sbh * (E * (1 + 2 * g) + O) + (2 * E + X) * s * b * F;
  double scores = r->flash_attention ? 4 * a * s * b : E * a * s * s * b;
  if (r->sequence_parallel)
    replicated /= t;
  return replicated + split / t + scores / t;
}

/* Activations one layer stores for one microbatch, without recompute. */
static double layer_full_bytes(const GptConfig *cfg, const GptMemoryRecipe *r)
{
  if (cfg->arch == GPT_ARCH_LLAMA)
    return llama_layer_bytes(cfg, r);
  double b = cfg->microbatch_size, s = rank_seq(cfg), h = cfg->hidden;
  double a = cfg->heads, t = cfg->tp, E = act_elem_bytes(cfg);
  double sbh = s * b * h;
  double X = gemm_input_bytes(cfg, r), O = attention_out_bytes(cfg, r);
  double replicated = (2 * E + 2 * X + 2) * sbh;
  double split = (3 * E + O + 4 * E + 4 * X) * sbh;
  double scores = r->flash_attention ? 4 * a * s * b
                                     : (2 * E + 1) * a * s * s * b;
  if (r->sequence_parallel)
    replicated /= t;
  return replicated + split / t + scores / t;
}

/* Activations one layer keeps between its forward and backward. */
static double layer_stored_bytes(const GptConfig *cfg,
                                 const GptMemoryRecipe *r)
{
  if (!cfg->recompute)
    return layer_full_bytes(cfg, r);
  double sbh = rank_seq(cfg) * cfg->microbatch_size * cfg->hidden;
  return act_elem_bytes(cfg) * sbh / (r->sequence_parallel ? cfg->tp : 1);
}

/* The first stage's extra per microbatch: token ids and the embedding's
 * dropout mask (Llama: the ids alone). */
static double embedding_bytes(const GptConfig *cfg, const GptMemoryRecipe *r)
{
  double sb = rank_seq(cfg) * cfg->microbatch_size;
  if (cfg->arch == GPT_ARCH_LLAMA) /* no embedding dropout */
    return 8 * sb;
  return 8 * sb + sb * cfg->hidden / (r->sequence_parallel ? cfg->tp : 1);
}

/* The head's extra per microbatch: final LayerNorm and output-GEMM
 * inputs, fp32 logits. */
static double head_bytes(const GptConfig *cfg, const GptMemoryRecipe *r)
{
  double sb = rank_seq(cfg) * cfg->microbatch_size;
  double ln = 2 * act_elem_bytes(cfg) * sb * cfg->hidden /
              (r->sequence_parallel ? cfg->tp : 1);
  return ln + 4 * sb * gpt_padded_vocab(cfg) / cfg->tp;
}

/* Passes of one chunk that stage p holds at its peak, and among them how
 * many run chunk 0 (*first) and chunk v-1 (*last). */
static double peak_passes(const GptConfig *cfg, guint p, double *first,
                          double *last)
{
  guint P = cfg->pp, m = cfg->microbatches, v = gpt_config_chunks(cfg);
  if (cfg->schedule == PIPELINE_GPIPE) {
    *first = *last = m;
    return m;
  }
  if (cfg->schedule != PIPELINE_INTERLEAVED) {
    guint n = MIN(P - p, m);
    *first = *last = n;
    return n;
  }
  guint64 n = (guint64)m * v;
  guint64 w = MIN(2 * (guint64)(P - p - 1) + (guint64)(v - 1) * P, n);
  guint64 peak = MIN(w + 1, n);
  /* Forward k runs chunk (k / P) % v: whole groups of P, then a rest. */
  guint64 per_round = (guint64)P * v, rounds = peak / per_round;
  guint64 rest = peak % per_round;
  *first = (double)(rounds * P + MIN(rest, P));
  *last = (double)(rounds * P +
                   (rest > (guint64)(v - 1) * P ? rest - (guint64)(v - 1) * P
                                                : 0));
  return (double)peak;
}

/* Weights, gradients and optimizer state by ZeRO stage, over S shards
 * (Rajbhandari et al. 2020, arXiv:1910.02054, section 5 and figure 1:
 * stage 1 divides the optimizer state by S, stage 2 the gradients too,
 * stage 3 the parameters too), plus what sharding holds unsharded for a
 * while: ZeRO-2 the gradient bucket being reduce-scattered (the whole
 * gradient with one bucket), FSDP the gathered root unit and two layers
 * (the one computing and the one prefetched) and one layer's gradient
 * before its reduce-scatter. */
static void static_bytes(const GptConfig *cfg, const GptMemoryRecipe *r,
                         double n, GptStageMemory *out)
{
  gboolean wide = gpt_elem_bytes(cfg) >= 4; /* tf32, fp32: no 16-bit copy */
  gboolean g16 = r->grads_16bit && !wide;
  double w = wide ? 4 : 2, g = g16 ? 2 : 4, S = 1;
  if (r->zero > 0)
    S = cfg->zero_group == GPT_ZERO_GROUP_NODE ? cfg->gpus_per_node
                                               : gpt_grad_ranks(cfg);
  out->weights_bytes = n * w / (r->zero >= 3 ? S : 1);
  out->grads_bytes = n * g / (r->zero >= 2 ? S : 1);
  /* With 16-bit gradients the optimizer keeps an fp32 copy of its
   * gradient shard beside the master weights and moments. */
  out->optimizer_bytes = n * (wide ? 8.0 : g16 ? 16.0 : 12.0) / S;
  if (S == 1)
    return;
  if (r->zero == 2) {
    double cap = gpt_bucket_cap_bytes(cfg);
    out->grads_bytes += cap > 0 ? MIN(cap, g * n) : g * n;
  } else if (r->zero >= 3) {
    double layer, root;
    gpt_fsdp_units(cfg, &layer, &root);
    out->weights_bytes += w * (root + 2 * layer);
    out->grads_bytes += g * layer;
  }
}

static void estimate_stage(const GptConfig *cfg, const GptMemoryRecipe *r,
                           guint p, GptStageMemory *out)
{
  double n = gpt_stage_params(cfg, p);
  *out = (GptStageMemory){.params = n};
  static_bytes(cfg, r, n, out);

  guint v = gpt_config_chunks(cfg);
  double first, last;
  double passes = peak_passes(cfg, p, &first, &last);
  double chunk_layers = (double)gpt_stage_layers(cfg, p) / v;
  double act = passes * chunk_layers * layer_stored_bytes(cfg, r);
  if (p == 0)
    act += first * embedding_bytes(cfg, r);
  if (p == cfg->pp - 1)
    act += last * head_bytes(cfg, r);
  if (cfg->recompute)
    act += layer_full_bytes(cfg, r); /* the layer being recomputed */
  act += ring_buffer_bytes(cfg);
  out->activations_bytes = act;
  out->in_flight = passes / v;

  double tensors = out->weights_bytes + out->grads_bytes +
                   out->optimizer_bytes + act;
  out->allowance_bytes = ALLOWANCE_FIXED_BYTES + ALLOWANCE_FRACTION * tensors;
  out->total_bytes = tensors + out->allowance_bytes;
}

GptMemory *gpt_memory_new(const GptConfig *cfg, const GptMemoryRecipe *r)
{
  g_return_val_if_fail(cfg != NULL && r != NULL && cfg->pp >= 1, NULL);
  GptMemory *m = g_new0(GptMemory, 1);
  m->cfg = *cfg;
  if (cfg->stage_layers != NULL) {
    m->layers_copy = g_memdup2(cfg->stage_layers, sizeof(guint) * cfg->pp);
    m->cfg.stage_layers = m->layers_copy;
  }
  m->recipe = *r;
  m->stages = g_new0(GptStageMemory, cfg->pp);
  for (guint p = 0; p < cfg->pp; p++)
    estimate_stage(&m->cfg, r, p, &m->stages[p]);
  return m;
}

void gpt_memory_free(GptMemory *m)
{
  if (m == NULL)
    return;
  g_free(m->layers_copy);
  g_free(m->stages);
  g_free(m);
}

guint gpt_memory_n_stages(const GptMemory *m)
{
  g_return_val_if_fail(m != NULL, 0);
  return m->cfg.pp;
}

const GptStageMemory *gpt_memory_stage(const GptMemory *m, guint i)
{
  g_return_val_if_fail(m != NULL && i < m->cfg.pp, NULL);
  return &m->stages[i];
}

guint gpt_memory_peak_stage(const GptMemory *m)
{
  g_return_val_if_fail(m != NULL, 0);
  guint best = 0;
  for (guint p = 1; p < m->cfg.pp; p++)
    if (m->stages[p].total_bytes > m->stages[best].total_bytes)
      best = p;
  return best;
}

/* The largest stage total of cfg under r, or -1 when cfg is not a valid
 * layout (a remedy that does not apply). */
static double peak_of(const GptConfig *cfg, const GptMemoryRecipe *r)
{
  if (!gpt_config_validate(cfg, NULL))
    return -1;
  g_autoptr(GptMemory) m = gpt_memory_new(cfg, r);
  return m->stages[gpt_memory_peak_stage(m)].total_bytes;
}

/* Appends "NAME: X GB (fits)" to out when the remedy applies. */
static void add_remedy(GString *out, const char *name, double bytes,
                       double capacity)
{
  if (bytes < 0)
    return;
  g_string_append_printf(out, "%s%s: %.1f GB%s", out->len > 0 ? "; " : "",
                         name, bytes / GB, bytes <= capacity ? " (fits)" : "");
}

/* The remedies one at a time, then all that apply together. */
static void remedies(const GptMemory *m, double capacity, GString *out)
{
  GptConfig all = m->cfg;
  GptMemoryRecipe all_r = m->recipe;
  if (!m->cfg.recompute) {
    GptConfig c = m->cfg;
    c.recompute = all.recompute = TRUE;
    add_remedy(out, "recompute = true", peak_of(&c, &m->recipe), capacity);
  }
  char zero[64] = "";
  if (m->recipe.zero == 0 && gpt_grad_ranks(&m->cfg) > 1) {
    /* The sharding the implementation has: Megatron's distributed
     * optimizer, or FSDP for an eager model (one stage only). */
    GptConfig c = m->cfg;
    GptMemoryRecipe r = m->recipe;
    c.zero = r.zero = m->cfg.impl == GPT_IMPL_HF ? 3 : 1;
    double bytes = peak_of(&c, &r);
    if (bytes >= 0) {
      all.zero = all_r.zero = c.zero;
      g_snprintf(zero, sizeof zero, "zero = %u", c.zero);
    }
    add_remedy(out, zero, bytes, capacity);
  }
  /* Twice the tp (or pp) on the same GPUs takes half the dp when dp is
   * even, else twice the GPUs. */
  GptConfig c = m->cfg;
  c.tp *= 2;
  if (c.dp % 2 == 0)
    c.dp /= 2;
  char name[64];
  g_snprintf(name, sizeof name, "tp = %u, dp = %u", c.tp, c.dp);
  double tp2 = peak_of(&c, &m->recipe);
  add_remedy(out, name, tp2, capacity);
  c = m->cfg;
  if (c.stage_layers == NULL) {
    c.pp *= 2;
    if (c.dp % 2 == 0)
      c.dp /= 2;
    g_snprintf(name, sizeof name, "pp = %u, dp = %u", c.pp, c.dp);
    add_remedy(out, name, peak_of(&c, &m->recipe), capacity);
  }
  /* Twice the context ranks split the activations (where the layout
   * allows context parallelism: flash attention, megatron, not BLOOM). */
  c = m->cfg;
  c.cp *= 2;
  g_snprintf(name, sizeof name, "context_parallel = %u", c.cp);
  add_remedy(out, name, peak_of(&c, &m->recipe), capacity);
  if (!m->cfg.recompute && zero[0] != '\0') {
    g_snprintf(name, sizeof name, "recompute and %s together", zero);
    add_remedy(out, name, peak_of(&all, &all_r), capacity);
  }
}

gboolean gpt_memory_check(const GptMemory *m, double capacity_bytes,
                          const char *gpu_name, GError **error)
{
  g_return_val_if_fail(m != NULL && capacity_bytes > 0, FALSE);
  guint p = gpt_memory_peak_stage(m);
  const GptStageMemory *s = &m->stages[p];
  if (s->total_bytes <= capacity_bytes)
    return TRUE;
  g_autoptr(GString) fix = g_string_new(NULL);
  remedies(m, capacity_bytes, fix);
  g_set_error(error, GPT_ERROR, GPT_ERROR_MEMORY,
              "the layout does not fit in GPU memory: stage %u of tp%u pp%u "
              "dp%u needs %.1f GB per GPU, the %s has %.1f GB (%.3g "
              "parameters: weights %.1f GB, gradients %.1f GB, optimizer "
              "%.1f GB; activations %.1f GB for %.3g microbatch(es) in "
              "flight; allowance %.1f GB).  Would need: %s.  "
              "check_memory = false runs it anyway",
              p, m->cfg.tp, m->cfg.pp, m->cfg.dp, s->total_bytes / GB,
              gpu_name, capacity_bytes / GB, s->params,
              s->weights_bytes / GB, s->grads_bytes / GB,
              s->optimizer_bytes / GB, s->activations_bytes / GB,
              s->in_flight, s->allowance_bytes / GB,
              fix->len > 0 ? fix->str : "no single change listed applies");
  return FALSE;
}

void gpt_memory_describe(const GptMemory *m, GString *out)
{
  g_return_if_fail(m != NULL && out != NULL);
  g_string_append_printf(
      out, "GPU memory per rank (GB; recompute %s, %s attention, sequence "
           "parallel %s, zero %u):\n",
      m->cfg.recompute ? "on" : "off",
      m->recipe.flash_attention ? "flash" : "unfused",
      m->recipe.sequence_parallel ? "on" : "off", m->recipe.zero);
  for (guint p = 0; p < m->cfg.pp; p++) {
    const GptStageMemory *s = &m->stages[p];
    g_string_append_printf(
        out, "  stage %u: %.1f total = weights %.1f + gradients %.1f + "
             "optimizer %.1f + activations %.1f (%.3g in flight) + "
             "allowance %.1f; %.4g parameters\n",
        p, s->total_bytes / GB, s->weights_bytes / GB, s->grads_bytes / GB,
        s->optimizer_bytes / GB, s->activations_bytes / GB, s->in_flight,
        s->allowance_bytes / GB, s->params);
  }
}
