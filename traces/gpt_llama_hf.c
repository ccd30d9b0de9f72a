/* traces/gpt_llama_hf.c -- the kernels of Llama under Hugging Face
 * transformers in eager PyTorch (impl hf, arch llama): the layer, the
 * embedding and the head, each op its own kernel.  GPT and BLOOM under
 * impl hf, and every model under Megatron, are in traces/gpt_kernels.c.
 */
#include "traces/gpt-private.h"

/* ---- Llama under Hugging Face transformers (or LitGPT) in eager PyTorch
 * with SDPA attention (tp = 1).  Every op is its own kernel: q, k, v,
 * o, gate, up and down are separate GEMMs; RMSNorm computes in fp32
 * (cast up, square, mean, scale, cast down, times the weight); the rotary
 * embedding is q * cos + rotate_half(q) * sin (neg, cat) on q and on k;
 * repeat_kv copies K and V to all heads when a/kv > 1 (its backward sums
 * them back); torch's scaled_dot_product_attention runs the causal
 * FlashAttention kernel each way.  Chains give each kernel's element
 * passes: E-byte passes (e) and fp32 passes (f). */
typedef struct {
  guint8 e, f;
  SimOpClass klass;
} Pass;

/* LlamaRMSNorm forward (to(fp32), pow, mean, x * rsqrt, to(dtype),
 * weight *; the per-row rsqrt is left out) and its autograd backward. */
static const Pass rms_fwd[] = {
  {1, 1, SIM_CLASS_ELEMENTWISE}, {0, 2, SIM_CLASS_ELEMENTWISE},
  {0, 1, SIM_CLASS_REDUCTION},   {0, 2, SIM_CLASS_ELEMENTWISE},
  {1, 1, SIM_CLASS_ELEMENTWISE}, {2, 0, SIM_CLASS_ELEMENTWISE}};
#define RMS_BWD_WEIGHT 2 /* the reduction that completes the weight grad */
static const Pass rms_bwd[] = {
  {2, 0, SIM_CLASS_ELEMENTWISE}, {3, 0, SIM_CLASS_ELEMENTWISE},
  {1, 0, SIM_CLASS_REDUCTION},   {1, 1, SIM_CLASS_ELEMENTWISE},
  {0, 2, SIM_CLASS_ELEMENTWISE}, {0, 3, SIM_CLASS_ELEMENTWISE},
  {0, 1, SIM_CLASS_REDUCTION},   {0, 1, SIM_CLASS_ELEMENTWISE},
  {0, 3, SIM_CLASS_ELEMENTWISE}, {0, 3, SIM_CLASS_ELEMENTWISE},
  {1, 1, SIM_CLASS_ELEMENTWISE}};
/* apply_rotary_pos_emb on one tensor: * cos, neg, cat, * sin, add; the
 * backward mirrors it (* sin, neg, the slices' scatter, * cos, add). */
static const Pass rope_chain[] = {
  {2, 0, SIM_CLASS_ELEMENTWISE}, {1, 0, SIM_CLASS_ELEMENTWISE},
  {2, 0, SIM_CLASS_ELEMENTWISE}, {2, 0, SIM_CLASS_ELEMENTWISE},
  {3, 0, SIM_CLASS_ELEMENTWISE}};

guint gpt_hf_llama_chain(int which)
{
  return which == 0   ? G_N_ELEMENTS(rms_fwd)
         : which == 1 ? G_N_ELEMENTS(rms_bwd)
                      : G_N_ELEMENTS(rope_chain);
}

static void chain(Gen *g, Seq *q, const char *name, const Pass *c, guint n,
                  double elems, guint unit_at, int unit)
{
  const double E = gpt_elem_bytes(g->cfg);
  for (guint i = 0; i < n; i++) {
    char nm[40];
    g_snprintf(nm, sizeof nm, "%s_%u", name, i + 1);
    gpt_kern(g, q, nm, c[i].klass, 0, (c[i].e * E + c[i].f * 4) * elems,
         i == unit_at ? unit : -1);
  }
}

/* A GEMM of M tokens x K -> N: forward, or backward's dgrad and wgrad
 * (the wgrad writes a fresh FP32 gradient, 4 bytes per weight). */
static void hf_gemm(Gen *g, Seq *q, const char *name, double M, double K,
                    double N, gboolean bwd, int unit)
{
  const double E = gpt_elem_bytes(g->cfg);
  char nm[40];
  if (!bwd) {
    g_snprintf(nm, sizeof nm, "fwd.%s", name);
    gpt_kern(g, q, nm, SIM_CLASS_GEMM, 2 * M * K * N,
         E * (M * K + K * N + M * N), -1);
    return;
  }
  g_snprintf(nm, sizeof nm, "bwd.%s_dgrad", name);
  gpt_kern(g, q, nm, SIM_CLASS_GEMM, 2 * M * K * N, E * (M * N + K * N + M * K),
       -1);
  g_snprintf(nm, sizeof nm, "bwd.%s_wgrad", name);
  gpt_kern(g, q, nm, SIM_CLASS_GEMM, 2 * M * K * N, E * (M * K + M * N) + 4 * K * N,
       unit);
}

void gpt_build_llama_hf_protos(Gen *g)
{
  const GptConfig *cfg = g->cfg;
  const double E = gpt_elem_bytes(cfg), h = g->h, bs = g->b * g->s;
  const double X = g->x, vt = g->vt, a = cfg->heads;
  const double kvh = h * gpt_kv_heads(cfg) / a, F = gpt_ffn_hidden(cfg);
  const gboolean repeat = gpt_kv_heads(cfg) < cfg->heads;
  const double att = 2 * g->b * g->s * g->s * h;
  const double layer_params = 2 * h * h + 2 * h * kvh + 3 * h * F + 2 * h;
  const guint nrf = G_N_ELEMENTS(rms_fwd), nrb = G_N_ELEMENTS(rms_bwd);
  const guint nr = G_N_ELEMENTS(rope_chain);

  Seq *q = &g->layer_fwd;
  chain(g, q, "fwd.rmsnorm", rms_fwd, nrf, X, G_MAXUINT, -1);
  hf_gemm(g, q, "q_proj", bs, h, h, FALSE, -1);
  hf_gemm(g, q, "k_proj", bs, h, kvh, FALSE, -1);
  hf_gemm(g, q, "v_proj", bs, h, kvh, FALSE, -1);
  chain(g, q, "fwd.rotary_q", rope_chain, nr, X, G_MAXUINT, -1);
  chain(g, q, "fwd.rotary_k", rope_chain, nr, bs * kvh, G_MAXUINT, -1);
  if (repeat) {
    gpt_kern(g, q, "fwd.repeat_k", SIM_CLASS_ELEMENTWISE, 0, E * (bs * kvh + X),
         -1);
    gpt_kern(g, q, "fwd.repeat_v", SIM_CLASS_ELEMENTWISE, 0, E * (bs * kvh + X),
         -1);
  }
  g->price_on = &g->flash_fwd;
  gpt_kern(g, q, "fwd.sdpa_flash", SIM_CLASS_ATTENTION, att,
       E * 4 * X + 4 * g->b * a * g->s, -1);
  g->price_on = &g->priced;
  gpt_kern(g, q, "fwd.merge_heads", SIM_CLASS_ELEMENTWISE, 0, 2 * E * X, -1);
  hf_gemm(g, q, "o_proj", bs, h, h, FALSE, -1);
  gpt_kern(g, q, "fwd.residual_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X, -1);
  chain(g, q, "fwd.rmsnorm", rms_fwd, nrf, X, G_MAXUINT, -1);
  hf_gemm(g, q, "gate_proj", bs, h, F, FALSE, -1);
  hf_gemm(g, q, "up_proj", bs, h, F, FALSE, -1);
  gpt_kern(g, q, "fwd.silu", SIM_CLASS_ELEMENTWISE, 0, 2 * E * bs * F, -1);
  gpt_kern(g, q, "fwd.silu_mul", SIM_CLASS_ELEMENTWISE, 0, 3 * E * bs * F, -1);
  hf_gemm(g, q, "down_proj", bs, F, h, FALSE, -1);
  gpt_kern(g, q, "fwd.residual_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X, -1);

  q = &g->layer_bwd;
  hf_gemm(g, q, "down_proj", bs, F, h, TRUE, UNIT_FC2);
  gpt_kern(g, q, "bwd.silu_mul", SIM_CLASS_ELEMENTWISE, 0, 3 * E * bs * F, -1);
  gpt_kern(g, q, "bwd.silu_mul", SIM_CLASS_ELEMENTWISE, 0, 3 * E * bs * F, -1);
  gpt_kern(g, q, "bwd.silu", SIM_CLASS_ELEMENTWISE, 0, 3 * E * bs * F, -1);
  hf_gemm(g, q, "up_proj", bs, h, F, TRUE, -1);
  hf_gemm(g, q, "gate_proj", bs, h, F, TRUE, UNIT_FC1);
  gpt_kern(g, q, "bwd.input_grad_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X, -1);
  chain(g, q, "bwd.rmsnorm", rms_bwd, nrb, X, RMS_BWD_WEIGHT, UNIT_LN2);
  gpt_kern(g, q, "bwd.residual_grad_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X,
       -1);
  hf_gemm(g, q, "o_proj", bs, h, h, TRUE, UNIT_PROJ);
  gpt_kern(g, q, "bwd.merge_heads", SIM_CLASS_ELEMENTWISE, 0, 2 * E * X, -1);
  g->price_on = &g->flash_bwd;
  gpt_kern(g, q, "bwd.sdpa_flash", SIM_CLASS_ATTENTION, 2.5 * att,
       E * 8 * X + 8 * X + 8 * g->b * a * g->s, -1);
  g->price_on = &g->priced;
  if (repeat) {
    gpt_kern(g, q, "bwd.repeat_v", SIM_CLASS_REDUCTION, 0, E * (X + bs * kvh),
         -1);
    gpt_kern(g, q, "bwd.repeat_k", SIM_CLASS_REDUCTION, 0, E * (X + bs * kvh),
         -1);
  }
  chain(g, q, "bwd.rotary_k", rope_chain, nr, bs * kvh, G_MAXUINT, -1);
  chain(g, q, "bwd.rotary_q", rope_chain, nr, X, G_MAXUINT, -1);
  hf_gemm(g, q, "v_proj", bs, h, kvh, TRUE, -1);
  hf_gemm(g, q, "k_proj", bs, h, kvh, TRUE, -1);
  hf_gemm(g, q, "q_proj", bs, h, h, TRUE, UNIT_QKV);
  gpt_kern(g, q, "bwd.input_grad_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X, -1);
  gpt_kern(g, q, "bwd.input_grad_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X, -1);
  chain(g, q, "bwd.rmsnorm", rms_bwd, nrb, X, G_MAXUINT, -1);
  gpt_kern(g, q, "bwd.residual_grad_add", SIM_CLASS_ELEMENTWISE, 0, 3 * E * X,
       -1);
  /* As for GPT under hf: the layer's .grad accumulation ends it. */
  gpt_kern(g, q, "bwd.grad_accum", SIM_CLASS_ELEMENTWISE, 0, 12 * layer_params,
       UNIT_LN1);

  /* The embedding: a gather; its backward the dense table gradient and
   * its accumulation into .grad. */
  q = &g->emb_fwd;
  gpt_kern(g, q, "fwd.embedding", SIM_CLASS_EMBEDDING, 0, 8 * bs + 2 * E * X, -1);
  q = &g->emb_bwd;
  gpt_kern(g, q, "bwd.embedding", SIM_CLASS_EMBEDDING, 0,
       E * X + 8 * bs + 4 * vt * h, -1);
  gpt_kern(g, q, "bwd.embedding_grad_accum", SIM_CLASS_ELEMENTWISE, 0,
       12 * vt * h, UNIT_EMB);

  /* The head: final RMSNorm, lm_head, logits.float() (LlamaForCausalLM),
   * the shifted copy, log-softmax and NLL. */
  const double L = bs * vt;
  q = &g->head_fwd;
  chain(g, q, "fwd.rmsnorm", rms_fwd, nrf, X, G_MAXUINT, -1);
  hf_gemm(g, q, "lm_head", bs, h, vt, FALSE, -1);
  gpt_kern(g, q, "fwd.logits_float", SIM_CLASS_ELEMENTWISE, 0, (E + 4) * L, -1);
  gpt_kern(g, q, "fwd.logits_shift", SIM_CLASS_ELEMENTWISE, 0, 8 * L, -1);
  gpt_kern(g, q, "fwd.log_softmax", SIM_CLASS_SOFTMAX, 0, 8 * L, -1);
  gpt_kern(g, q, "fwd.nll_loss", SIM_CLASS_REDUCTION, 0, 4 * bs + 8 * bs, -1);
  q = &g->head_bwd;
  gpt_kern(g, q, "bwd.nll_loss", SIM_CLASS_ELEMENTWISE, 0, 4 * L + 8 * bs, -1);
  gpt_kern(g, q, "bwd.log_softmax", SIM_CLASS_SOFTMAX, 0, 12 * L, -1);
  gpt_kern(g, q, "bwd.logits_shift", SIM_CLASS_ELEMENTWISE, 0, 12 * L, -1);
  gpt_kern(g, q, "bwd.logits_float", SIM_CLASS_ELEMENTWISE, 0, (4 + E) * L, -1);
  hf_gemm(g, q, "lm_head", bs, h, vt, TRUE, -1);
  gpt_kern(g, q, "bwd.lm_head_grad_accum", SIM_CLASS_ELEMENTWISE, 0, 12 * vt * h,
       UNIT_HEAD_EMB);
  chain(g, q, "bwd.rmsnorm", rms_bwd, nrb, X, RMS_BWD_WEIGHT, UNIT_HEAD_LN);
}

