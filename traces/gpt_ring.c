/* traces/gpt_ring.c -- context parallelism: the prototypes of the ring
 * attention one context rank runs (gpt.c expands the ring markers of
 * traces/gpt_kernels.c's sequences into them).
 */
#include "traces/gpt-private.h"

/* ---- Context parallelism: the ring ------------------------------------
 * Transformer Engine's AttnFuncWithCPAndKVP2P, as megatron-core runs it
 * (cp_comm_type "p2p"; Liu et al., Ring Attention, arXiv:2310.01889).  The
 * sequence is cut into 2 cp chunks of c = s/(2cp) tokens; context rank r
 * holds chunks r and 2cp-1-r, so its sc = s/cp tokens of Q, K and V.
 * Forward step k uses the K/V block of rank r-k (mod cp), passed around the
 * ring while the previous step computes:
 *   k = 0        the diagonal: Q (sc) against its own K/V (sc), causal;
 *   1 <= k <= r  an earlier rank's block: all of Q against the block's
 *                first chunk (sc x sc/2, no mask);
 *   k > r        a later rank's block: Q's second chunk against all of it
 *                (sc/2 x sc).
 * Each is half of an sc x sc block, 2 b sc^2 ht matmul FLOPs (QK^T and AV
 * over the half), so a rank does 2 b s^2 ht / cp and the cp ranks together
 * what one rank does without context parallelism.  Each step writes its
 * partial output (E per element) and log-sum-exp (4 bytes per row);
 * steps k >= 1 fold their log-sum-exp into the running one
 * (flash_attn_fwd_softmax_lse_correction: read both, write one), and after
 * the loop each step's output is rescaled into an FP32 accumulator
 * (flash_attn_fwd_out_correction; the first initialises it) that is cast
 * back to E bytes.  The backward runs the steps in reverse (step i uses
 * forward step cp-1-i's block, the diagonal last) at 2.5 x the forward's
 * FLOPs as FlashAttention's backward does, adds each step's dQ into the
 * rank's (not after the first) and its dK/dV into the partial sums that
 * travel with the blocks (a copy at the first step).  The kernels are
 * priced as the flash kernel is (gpt_flash_eff). */

/* Tokens of Q and of K/V forward step k of context rank r works on. */
static void ring_tokens(guint k, guint r, double sc, double *q, double *kv)
{
  *q = k > r ? sc / 2 : sc;
  *kv = k >= 1 && k <= r ? sc / 2 : sc;
}

static Proto ring_msg(Gen *g, const char *name, SimOpKind kind, double bytes)
{
  return gpt_make_proto(g, name, kind, SIM_CLASS_COMM, SIM_COLL_SEND_RECV,
                        SIM_MATH_VECTOR, 0, bytes);
}

static Proto ring_kern(Gen *g, const char *name, SimOpClass klass,
                       double flops, double bytes)
{
  return gpt_make_proto(g, name, SIM_OP_KERNEL, klass, SIM_COLL_ALL_REDUCE,
                        klass == SIM_CLASS_ATTENTION ? gpt_math16(g->cfg)
                                                     : SIM_MATH_VECTOR,
                        flops, bytes);
}

void gpt_build_ring_protos(Gen *g, guint cp_i)
{
  const GptConfig *cfg = g->cfg;
  const guint cp = cfg->cp;
  if (cp == 1)
    return;
  const double E = gpt_elem_bytes(cfg), b = g->b, sc = g->s, ht = g->ht;
  const double at = (double)cfg->heads / cfg->tp;
  const double kt = ht * gpt_kv_heads(cfg) / cfg->heads;
  const double att = 2 * b * sc * sc * ht; /* half an sc x sc block */
  /* One rank's K and V: 2 b sc kt elements. */
  const double kv_bytes = E * 2 * b * sc * kt;
  Ring *R = &g->ring;
  for (guint k = 0; k < cp; k++) {
    double qt, kvt;
    ring_tokens(k, cp_i, sc, &qt, &kvt);
    const char *fname = k == 0 ? "fwd.cp_attention_diag" : "fwd.cp_attention";
    const char *bname = k == 0 ? "bwd.cp_attention_diag" : "bwd.cp_attention";
    g->price_on = &g->flash_fwd;
    R->fwd[k] = ring_kern(g, fname, SIM_CLASS_ATTENTION, att,
                          E * (2 * b * qt * ht + 2 * b * kvt * kt) +
                              4 * b * at * qt);
    g->price_on = &g->flash_bwd;
    /* Backward step i = cp-1-k repeats forward step k: Q, O, dO read and
     * dQ written (E), K, V read and dK, dV written, the FP32 dQ
     * accumulator, the log-sum-exp and the row sums of dO * O. */
    guint i = cp - 1 - k;
    R->bwd[i] = ring_kern(g, bname, SIM_CLASS_ATTENTION, 2.5 * att,
                          E * (4 * b * qt * ht + 4 * b * kvt * kt) +
                              8 * b * qt * ht + 8 * b * at * qt);
    g->price_on = &g->priced;
    if (k > 0)
      R->lse_fix[k] = ring_kern(g, "fwd.cp_lse_correction",
                                SIM_CLASS_ELEMENTWISE, 0, 12 * b * at * qt);
    R->out_fix[k] = ring_kern(g, k == 0 ? "fwd.cp_out_init"
                                        : "fwd.cp_out_correction",
                              SIM_CLASS_ELEMENTWISE, 0,
                              (E + (k == 0 ? 4 : 8)) * b * qt * ht +
                                  8 * b * at * qt);
    if (i > 0)
      R->dq_add[i] = ring_kern(g, "bwd.cp_dq_add", SIM_CLASS_ELEMENTWISE, 0,
                               3 * E * b * qt * ht);
    R->dkv_add[i] = ring_kern(g, i == 0 ? "bwd.cp_dkv_copy"
                                        : "bwd.cp_dkv_add",
                              SIM_CLASS_ELEMENTWISE, 0,
                              (i == 0 ? 2 : 3) * E * b * kvt * 2 * kt);
  }
  R->out_cast = ring_kern(g, "fwd.cp_out_cast", SIM_CLASS_ELEMENTWISE, 0,
                          (4 + E) * b * sc * ht);
  R->kv_send = ring_msg(g, "cp.send_kv", SIM_OP_SEND, kv_bytes);
  R->kv_recv = ring_msg(g, "cp.recv_kv", SIM_OP_RECV, kv_bytes);
  R->bwd_send[0] = ring_msg(g, "cp.send_kv", SIM_OP_SEND, kv_bytes);
  R->bwd_recv[0] = ring_msg(g, "cp.recv_kv", SIM_OP_RECV, kv_bytes);
  R->bwd_send[1] = ring_msg(g, "cp.send_kv_dkv", SIM_OP_SEND, 2 * kv_bytes);
  R->bwd_recv[1] = ring_msg(g, "cp.recv_kv_dkv", SIM_OP_RECV, 2 * kv_bytes);
  R->bwd_send[2] = ring_msg(g, "cp.send_dkv", SIM_OP_SEND, kv_bytes);
  R->bwd_recv[2] = ring_msg(g, "cp.recv_dkv", SIM_OP_RECV, kv_bytes);
}

