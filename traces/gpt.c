/* traces/gpt.c -- Megatron-style GPT training-iteration generator.
 *
 * What it produces
 * ----------------
 * One training iteration of a GPT (decoder-only transformer) trained the way
 * Megatron-LM trains it: tensor parallelism (TP, degree t) inside every
 * layer, pipeline parallelism (PP, p stages of l/p consecutive layers),
 * data parallelism (DP, degree d) with bucketed fp32 gradient all-reduces,
 * 1F1B, GPipe or interleaved 1F1B (virtual pipeline stages) microbatch
 * schedules, optional full activation recomputation, tied input/output
 * embeddings, mixed-precision Adam.  The result is a SimWorkload: one op per
 * kernel or communication call of every rank, with matmul FLOPs and DRAM
 * bytes per shape and a reference duration priced on a reference GPU.
 *
 * Ranks and groups
 * ----------------
 * rank = tp_i + t * (cp_i + c * (dp_i + d * pp_i)) (megatron-core's order
 * tp-cp-dp-pp, TP innermost, so a TP group is t consecutive ranks; c =
 * context parallel size, 1 without it).  The DP group is megatron-core's
 * data-parallel group with context parallelism: the c * d ranks of one
 * (tp_i, pp_i), stride t, which reduce the same weights' gradients.  Group
 * ids are allocated in three blocks so that the ranks of one class (a
 * stage and context rank) differ only by a constant offset (see
 * "Templates" below):
 *   TP group  (cp_i, dp_i, pp_i): id = cp_i + c * (dp_i + d * pp_i) (t > 1)
 *   DP group  (tp_i, pp_i):  id = n_tp + tp_i + t * pp_i       (c * d > 1)
 *   tie group (tp_i, cp_i, dp_i): id = n_tp + n_dp + tp_i + t * (cp_i +
 *                                      c * dp_i)                   (p > 1)
 * The tie group {first-stage rank, last-stage rank} all-reduces the gradient
 * of the word embedding, which the last stage holds a copy of for the
 * logits (Megatron's _allreduce_embedding_grads).  Hybrid sharding
 * (zero_group "node", tp = pp = 1, G = gpus_per_node) adds the node
 * groups {nG, ..., nG + G - 1} and, with several nodes, the replica
 * groups {k, G + k, 2G + k, ...} (add_hybrid_groups).
 *
 * Kernels of one layer, one TP rank, one microbatch
 * -------------------------------------------------
 * b = microbatch size, s = sequence length, h = hidden, a = heads, t = TP,
 * ht = h/t, at = a/t, N = b*at*s*s (attention matrix elements per rank),
 * X = b*s*h, E = element bytes (2 for the default bf16 and for fp16, 4
 * for tf32 and fp32: GptConfig.precision, which also picks the math unit
 * of the GEMM and attention kernels marked T below: tensor cores at the
 * 16-bit or the TF32 rate, or CUDA cores for fp32).  FLOPs are counted for matmuls only
 * (Megatron's model-FLOPs convention, so summed FLOPs over time is the
 * TFLOP/s papers report); every other kernel has flops = 0 and is priced by
 * its bytes.  Bytes = inputs read + weights read + outputs written, bf16,
 * dropout masks 1 byte per element, biases ignored in GEMMs, weight
 * gradients accumulated into fp32 main grads (read + write, 8 bytes per
 * parameter, Megatron's gradient_accumulation_fusion).
 *
 *  forward                 class      FLOPs           bytes
 *  fwd.layernorm           norm       0               2E*X + 2E*h
 *  fwd.qkv_gemm            gemm  T    2*X*3ht         E*(X + 3h*ht + 3bs*ht)
 *  fwd.attn_scores         attention T 2*b*s*s*ht     E*(2bs*ht + N)
 *  fwd.softmax             softmax    0               5N (scale+mask+softmax+
 *                                                        dropout, fused)
 *  fwd.attn_context        attention T 2*b*s*s*ht     E*(N + 2bs*ht)
 *  fwd.proj_gemm           gemm  T    2*X*ht          E*(bs*ht + ht*h + X)
 *  tp.all_reduce           comm       -               E*X          (t > 1)
 *  fwd.bias_dropout_add    elementwise 0              3E*X + X
 *  fwd.layernorm           norm
 *  fwd.fc1_gemm            gemm  T    2*X*4ht         E*(X + 4h*ht + 4bs*ht)
 *  fwd.gelu                elementwise 0              2E*4bs*ht
 *  fwd.fc2_gemm            gemm  T    2*X*4ht         E*(4bs*ht + 4ht*h + X)
 *  tp.all_reduce           comm       -               E*X          (t > 1)
 *  fwd.bias_dropout_add    elementwise
 * Matmul FLOPs per layer forward: 24*b*s*h^2/t + 4*b*s^2*h/t.
 *
 *  backward (reverse order; each GEMM's dgrad and wgrad = its forward FLOPs)
 *  bwd.bias_dropout_add    elementwise 0              2E*X + X
 *  bwd.fc2_dgrad           gemm  T    2*X*4ht         E*(X + 4ht*h + 4bs*ht)
 *  bwd.fc2_wgrad           gemm  T    2*X*4ht         E*(4bs*ht + X) + 8*4ht*h
 *  bwd.gelu                elementwise 0              3E*4bs*ht
 *  bwd.fc1_dgrad, bwd.fc1_wgrad       (as fc2, operands swapped)
 *  tp.all_reduce           comm                       E*X          (t > 1)
 *  bwd.layernorm           norm       0               4E*X + 16h (incl. the
 *                                                        residual-grad add)
 *  bwd.bias_dropout_add
 *  bwd.proj_dgrad          gemm  T    2*X*ht          E*(X + ht*h + bs*ht)
 *  bwd.proj_wgrad          gemm  T    2*X*ht          E*(bs*ht + X) + 8*ht*h
 *  bwd.attn_context        attention T 4*b*s*s*ht     E*(3bs*ht + 2N)
 *  bwd.softmax             softmax    0               7N
 *  bwd.attn_scores         attention T 4*b*s*s*ht     E*(N + 4bs*ht)
 *  bwd.qkv_dgrad           gemm  T    2*X*3ht         E*(3bs*ht + 3ht*h + X)
 *  bwd.qkv_wgrad           gemm  T    2*X*3ht         E*(X + 3bs*ht) + 8*3ht*h
 *  tp.all_reduce           comm                       E*X          (t > 1)
 *  bwd.layernorm           norm
 * Backward FLOPs = 2 x forward.  With recompute, each layer's forward
 * kernels (same names and shapes, phase backward) run again right before its
 * backward (Megatron full recompute, one layer per checkpoint).
 *
 *  first stage: fwd.embedding (embedding, 8bs + 2E*X: token ids, gathered
 *  rows of the vocab shard, output), tp.all_reduce (t > 1; vocab-parallel
 *  embedding), fwd.embedding_add (elementwise, position add + dropout,
 *  3E*X + X); backward bwd.embedding (embedding, 5X + 8bs + 12*(V/t + s)*h:
 *  dense embedding gradient of the vocab shard and the positions, then
 *  accumulated into fp32 main grads, 2+2+4+4 bytes per element).
 *
 *  last stage: fwd.layernorm (final), fwd.logits_gemm (gemm, 2*X*V/t,
 *  E*(X + V/t*h + bs*V/t)), vocab-parallel cross entropy: fwd.xent_max
 *  (reduction, E*bs*V/t + 4bs), tp.all_reduce (4bs), fwd.xent_softmax
 *  (softmax, 2E*bs*V/t + 8bs), tp.all_reduce (4bs, predicted logits),
 *  tp.all_reduce (4bs, sum of exp), fwd.xent_loss (elementwise, in-place
 *  normalisation kept for backward, 2E*bs*V/t + 12bs); backward bwd.xent
 *  (elementwise, 2E*bs*V/t + 8bs), bwd.logits_dgrad, bwd.logits_wgrad
 *  (gemm, 2*X*V/t each), tp.all_reduce (E*X), bwd.layernorm.  The 4bs
 *  all-reduces only when t > 1.
 *
 * V is the vocabulary padded Megatron-style to a multiple of 128*t
 * (50257 -> 50304 for t = 1, 51200 for t = 8).
 *
 * Parameters and the optimizer
 * ----------------------------
 * Per TP rank, a layer holds 12h^2/t + 7h/t + 6h parameters (sharded GEMM
 * weights and column-parallel biases; replicated row-parallel biases and
 * LayerNorms); the first stage adds V/t*h + s*h (word and position
 * embeddings; positions = seq_len), the last stage 2h (final LayerNorm) plus
 * V/t*h when p > 1 (the tied copy).  optimizer.adam (class optimizer, phase
 * optimizer) moves 30 bytes per parameter of the rank: fused Adam reads the
 * fp32 grad, master weight and both moments (16) and writes weight and
 * moments (12), plus the bf16 model copy (2); 28 for tf32 and fp32, which
 * keep no 16-bit copy.
 *
 * Streams and dependencies
 * ------------------------
 *   0  compute: kernels and TP/tie collectives, in program order
 *   1  DP gradient all-reduces (d > 1); the ZeRO stages' reduce-scatters,
 *      all-gathers and hybrid sharding's all-reduces across nodes
 *   2  sends of activations to the next stage
 *   3  sends of gradients to the previous stage
 *   4  recvs of activations from the previous stage
 *   5  recvs of gradients from the next stage
 *   6-9  context parallelism's ring: K/V to the next context rank and from
 *        the previous one (6, 7), backward to the previous and from the
 *        next (8, 9); with c = 2 the one neighbour gets 6 and 7 only
 * "Next" and "previous" are taken around the ring of stages: the
 * interleaved schedule sends the last stage's activations to stage 0 and
 * stage 0's gradients to the last stage (stage 0 uses streams 3 and 4, the
 * last stage 2 and 5, for that wrap-around); 1f1b and gpipe never do.  So a
 * rank has one stream per (direction, peer) and stream order alone never
 * creates a rendezvous deadlock.  One exception: with p = 2 and the
 * interleaved schedule the neighbour is both next and previous, and
 * activations and gradients both travel both ways.  The engine pairs the
 * sends and recvs of one (src, dst) first come, first served whatever
 * their streams, so there all sends go on stream 2 and all recvs on stream
 * 4 (3 and 5 stay empty): the n-th send then meets the n-th recv, and both
 * sides list their messages in the same order (the schedule guarantees it;
 * tests/test-gpt.c checks every pairing).
 * A send waits for the last compute op of the pass (forward or backward
 * of one microbatch through one chunk) it ships; a recv waits for the
 * compute op that precedes it in program order (it is "posted" when the
 * rank gets there, and the GPU sits blocked until it lands, as with
 * Megatron's synchronous p2p); the first compute op of the consuming pass
 * waits for the recv.  Activation and gradient messages are E*X bytes (no
 * scatter/gather optimisation).
 *
 * DP gradients are fp32 (4 bytes per parameter) in buckets of dp_bucket_mb
 * MiB (0 = one bucket per chunk).  Bucketing walks gradients in the order
 * the last microbatch's backward produces them (the head's tied embedding
 * copy and final LayerNorm, then per layer fc2, fc1, ln2, proj, qkv, ln1
 * from the last layer down, then the embeddings), never splitting a
 * parameter tensor (a weight with its bias), and closes a bucket when it
 * reaches the cap, as PyTorch DDP and Megatron's DDP do.  Each model chunk
 * is its own DDP module in Megatron, so chunks are bucketed separately, in
 * the order their last backwards run (chunk v-1 first).  With dp_overlap
 * each bucket waits for the op that produced its last gradient (a wgrad
 * GEMM, a LayerNorm or embedding backward) in the last microbatch's
 * backward of its chunk; without, for the last backward op.  Then, on the
 * compute stream: the tie all-reduce (p > 1, first and last stage, 4*V/t*h
 * bytes) and optimizer.adam, each waiting for the last DP all-reduce
 * (Megatron: finish_grad_sync, then the embedding all-reduce, then the
 * step).
 *
 * Schedules
 * ---------
 * P = p_count stages, m microbatches, v = chunks (model chunks per stage).
 * Stage p's chunk c holds the l/(P v) consecutive layers starting at
 * (c*P + p) * l/(P v): it is virtual stage c*P + p of P*v (Megatron's
 * layout).  The embedding is on stage 0's chunk 0 and the head on stage
 * P-1's chunk v-1.  For 1f1b and gpipe, v = 1.
 *  - gpipe: all forwards, then all backwards.
 *  - 1f1b on stage p: w = min(P - p - 1, m) warmup forwards, then F(w+i),
 *    B(i) alternating, then the remaining backwards (Megatron's
 *    forward_backward_pipelining_without_interleaving).
 *  - interleaved on stage p (Megatron's forward_backward_pipelining_with_
 *    interleaving, megatron-core version: no special case for m = P):
 *    n = m*v passes each way; w = min(2(P - p - 1) + (v - 1) P, n) warmup
 *    forwards, then F(w+i), B(i) alternating, then the remaining
 *    backwards.  Forward k runs chunk (k / P) % v and backward k chunk
 *    v-1 - (k / P) % v, both on microbatch (k / (P v)) P + k % P:
 *    microbatches go through the chunks in groups of P.  Requires P >= 2,
 *    v >= 2, l % (P v) == 0 and m % P == 0 (Megatron's own checks).
 * With uniform passes and free messages, every GPU is busy m(t_f + t_b)
 * (t_f, t_b: one stage's whole forward and backward per microbatch) and
 * the iteration lasts (m + P - 1)(t_f + t_b) for 1f1b and (m + (P - 1)/v)
 * (t_f + t_b) interleaved: bubble fractions (P-1)/(m + P - 1) and
 * (P-1)/(v m + P - 1) of the iteration, i.e. (P-1)/m and (P-1)/(v m) of
 * the ideal time (Narayanan et al., SC'21).  tests/test-gpt.c checks both
 * are exact for the generated orders and within 15% in the engine.
 *
 * Op counts per rank of stage p (c = 1 when t > 1, else 0; R = recompute;
 * first/last = 1 on the first/last stage, both when p_count = 1; L = l/p,
 * the stage's layers over all its chunks):
 *   F   = L*(12 + 2c) + first*(2 + c) + last*(5 + 3c)
 *   B   = L*(16 + 2c) + R*L*(12 + 2c) + first + last*(4 + c)
 *   P2P = 4v - 2*first - 2*last  (each chunk pass receives its input and
 *         sends its output, but the embedding and head passes)
 *   ops = m*(F + B + P2P) + n_buckets(p)*(d > 1) + (tie) + 1
 * (gpt_rank_ops computes it, n_buckets included, and the DP ops of the
 * ZeRO stages: gpt_counts.c, dp_ops).
 *
 * The implementation (GptConfig.impl)
 * -----------------------------------
 * The tables above are Megatron-LM's kernels (impl megatron).  impl hf is
 * a Hugging Face model in eager PyTorch, as Merak pipelines it (tp = 1):
 * the same matmuls (so the same FLOPs, Megatron's closed form), but every
 * op Megatron fuses runs as its own kernel (build_hf_protos): the scores
 * are scaled (GPT-2; BLOOM scales inside baddbmm), masked, softmaxed and
 * dropped out in four kernels over the b*a*s^2 matrix; heads are merged
 * and split by copies; bias+dropout+residual is a dropout and an add; the
 * tanh GeLU is its chain of elementwise ops (hf_gelu_*: 8 forward and 10
 * backward kernels for GPT-2's gelu_new, 9 and 18 for BLOOM's), each pass
 * reading and writing the 4bs*h activation; LayerNorm's backward is two
 * kernels; wgrad GEMMs write fresh FP32 gradients (4 bytes/parameter),
 * bias gradients are reductions, and the layer's gradients are added into
 * .grad by one kernel (12 bytes/parameter); the loss copies the shifted
 * logits before log-softmax and NLL; AdamW moves 80 bytes/parameter.
 * Each implementation has efficiency factors (gemm, attention, memory)
 * multiplying the GPU's roofline efficiencies (gpt_priced_spec), fitted
 * by `joulesim fidelity --fit megatron|hf` (impl_default_eff below says
 * on what).
 *
 * Durations
 * ---------
 * Kernel ref_ns = round(gpu_kernel_cost(priced, k, auto clocks, no power
 * cap) * 1e9), at least 1 ns, once per shape, where priced is the
 * reference GPU with the implementation's efficiency factors.  Communication ops have ref_ns = 0
 * (the network model prices them).
 *
 * Templates
 * ---------
 * Ranks of one stage run the same program; only group ids and p2p peers
 * differ, by the constant offsets above.  Each stage is generated once with
 * a SimRankBuilder (rank (0, 0, p), the stage's template), its comm ops
 * marked with the offset their peer shifts by (mark_patches), and the
 * other t*d - 1 ranks share it (sim/workload.h, "Shared programs"): each
 * holds three peer deltas, not a copy.  Generation is then linear in the
 * ops of one rank per stage plus the ranks.  (Until the programs were
 * shared, every rank got a copy, 32 bytes per op: 175B tp8 pp8 m64 took
 * ~0.3 s and 820 MB at dp16 and ~2.3 s and 6.5 GB at dp128, nearly all of
 * it the kernel's first-touch page faults; docs/gpt-generator.md, "Speed
 * and memory", has today's figures.)
 *
 * Folding
 * -------
 * With cfg->fold, the copies are not made: the template of stage p is the
 * representative (w->fold_rep) of all t*d ranks of its stage, which keep
 * their stage and groups but hold no ops.  This is exact because the
 * copies are: rank (tp_i, dp_i, p) runs the template's ops, its TP and DP
 * groups hold ranks of its own class, and its p2p peers (neighbouring
 * stages) and tie partner (the other end stage) are the ranks with its
 * (tp_i, dp_i) -- the images of the template's peers and partner, which
 * are templates themselves.  The engine replays one rank per class;
 * tests/test-gpt.c checks every rank of every layout against its
 * representative.  175B on 8,192 GPUs folds to 8 ranks of ~25,000 ops
 * (6.4 MB) and generates in ~10 ms.
 *
 * Memory estimate
 * ---------------
 * gpt_estimate_bytes() adds the exact op records (gpt_rank_ops per stage,
 * times t*d unless folded), stream offsets, rank records, the fold map,
 * group members and offsets, and a bound on shapes and names (64 shapes +
 * one per DP bucket, 4 kB of names).  Measured on every test layout,
 * folded and not, it is 0.01-3.1% above the bytes the workload holds and
 * within 1.5% of what malloc hands out for it (tests/test-gpt.c,
 * /gpt/estimate, which requires 10%).
 *
 * Megatron-core's recipe (docs/gpt-generator.md has the tables)
 * -------------------------------------------------------------
 * precision fp8 (Transformer Engine): the linear GEMMs read FP8 inputs (1
 * byte) at the FP8 rate and write BF16; a cast-transpose of the proj
 * input forward and of the FC2, proj and QKV output gradients backward
 * (E read, 1 + 1 written per element; the norms and GeLU cast in their
 * own kernels); each chunk pass ends with the amax all-reduces (TP, DP)
 * and the scale update; weights cast once per chunk (microbatch 0).
 * attention flash: one kernel each way, causal FLOPs 2*b*s^2*ht forward,
 * 2.5x that backward, O(s) bytes, priced at FlashAttention-2/3's
 * published efficiency (gpt_flash_eff).  sequence_parallel (t > 1): each
 * TP all-reduce a reduce-scatter, all-gathers before the column-parallel
 * GEMMs (and again backward for their wgrads, and of the row-parallel
 * GEMMs' output gradients), norms and dropouts on s/t tokens, p2p of
 * s/t tokens, one TP all-reduce of the norms' and row-parallel biases'
 * gradients.  zero 1: buckets reduce-scattered, Adam on 1/dp, BF16
 * parameters all-gathered per bucket (at the iteration's start, each
 * layer's first microbatch waiting for its bucket, with dp_overlap;
 * after the step without).
 *
 * Sharded data parallelism (docs/gpt-generator.md)
 * ------------------------------------------------
 * zero 2 (ZeRO-2, pp 1): the buckets reduce-scattered after every
 * microbatch's backward, Adam on 1/S, parameters gathered as zero 1.
 * zero 3 (FSDP, impl hf, pp 1): per microbatch the root unit and each
 * layer all-gathered before the forward, one unit prefetched, each layer
 * again before its backward, a reduce-scatter per unit after it
 * (fsdp_forward, fsdp_backward).  zero_group "node": all of these inside
 * the node, each reduce-scatter followed by an all-reduce of the shard
 * across the nodes.
 * Context parallelism (cfg->cp; gpt_ring.c)
 * ------------------------------------------------------------------
 * Every kernel but attention sees a context rank's s/c tokens; each
 * layer's flash kernel becomes Transformer Engine's ring (ring_forward,
 * ring_backward): c half-block attention steps each way, the K/V blocks
 * (2 b (s/c) kt E bytes) passed around on streams 6-9 while the step
 * before computes.  Context ranks differ in their ring peers and in which
 * half of a block each step covers, so each (stage, context rank) has its
 * own template.  Gradients go to the c * d DP group; zero = 1 shards over
 * it.
 *
 * Known limits
 * ------------
 * - No scatter/gather p2p without sequence parallelism, no FP8 attention;
 *   no gradient clipping / inf-check passes, no grad-buffer zeroing, no
 *   data loading or CPU gaps.
 * - P2P is modelled op by op: Megatron batches a pass's send and the next
 *   recvs into one synchronous call (sends block the sender until the
 *   receiver is there); here a send runs on its own stream and never stalls
 *   the compute stream, and each consumer waits only for its own recv.  The
 *   overlapped-p2p variant of the interleaved schedule and Megatron-core's
 *   microbatch_group_size_per_vp_stage != P are not generated.
 * - Bytes assume every operand crosses DRAM once (no L2 reuse across
 *   kernels).
 * - With attention unfused (the default) the causal mask halves nothing:
 *   attention FLOPs are dense, as in Megatron's FLOP count.
 * - One microbatch size and sequence length for the whole iteration.
 * - Layer indices are 8-bit in SimOp (<= 255 layers), microbatch indices
 *   16-bit (<= 65535 microbatches).
 */
#include "traces/gpt.h"
#include "traces/gpt-private.h"
#include "models/schedule.h"

#include <math.h>
#include <string.h>

/* Optimizer bytes per parameter: fused Adam reads the FP32 grad, master
 * weight and both moments (16) and writes weight and moments (12); in
 * mixed precision it also writes the 16-bit model copy (2).  Under impl
 * hf, torch.optim.AdamW's multi-tensor path runs one pass per operation,
 * each reading and writing FP32 tensors: weight decay (8), first moment
 * lerp (12), second moment scale and addcmul (8 + 12), square root, bias
 * correction and epsilon (8 each), the addcdiv update (16): 80. */
static double adam_bytes(const GptConfig *cfg)
{
  if (cfg->impl == GPT_IMPL_HF)
    return 80; /* PyTorch's multi-tensor AdamW, pass by pass (below) */
  return gpt_elem_bytes(cfg) < 4 ? 30 : 28;
}

/* Sequence parallelism leaves the gradients of the parameters every TP
 * rank holds whole -- the LayerNorms and the row-parallel biases -- partial
 * on each rank (each saw s/t tokens): Megatron all-reduces them (FP32)
 * over TP after the DP reduction (_allreduce_layernorm_grads).  Per layer
 * two LayerNorms (2h each) and the proj and fc2 biases (h each); the
 * final LayerNorm on the last stage, BLOOM's embedding LayerNorm on the
 * first; Llama's two RMSNorms (h each) and its final one. */
static double sp_grad_bytes(const GptConfig *cfg, guint p)
{
  double h = cfg->hidden, n = gpt_stage_layers(cfg, p) * 6 * h;
  if (cfg->arch == GPT_ARCH_LLAMA) /* two RMSNorm weights, no biases */
    n = gpt_stage_layers(cfg, p) * 2 * h;
  if (p == cfg->pp - 1)
    n += cfg->arch == GPT_ARCH_LLAMA ? h : 2 * h;
  if (p == 0 && cfg->arch == GPT_ARCH_BLOOM)
    n += 2 * h;
  return 4 * n;
}

/* Appends one op to the rank being built; returns its handle. */
static guint32 put(Gen *g, const Proto *p, guint stream, SimPhase phase,
                   guint layer, guint mb, guint32 peer, guint32 wait)
{
  SimOp op;
  memset(&op, 0, sizeof op);
  op.ref_ns = p->ref_ns;
  op.shape = p->shape;
  op.name = p->name;
  op.peer = peer;
  op.wait = wait;
  op.microbatch = (guint16)mb;
  op.layer = (guint8)layer;
  op.kind = p->kind;
  op.klass = p->klass;
  op.phase = (guint8)phase;
  op.stream = (guint8)stream;
  return sim_rank_builder_add(g->rb, &op);
}

static guint32 ring_forward(Gen *g, SimPhase phase, guint layer, guint mb);
static guint32 ring_backward(Gen *g, SimPhase phase, guint layer,
                             guint mb);

/* tp_comm_overlap (Transformer Engine's userbuffers, which split the
 * GEMM and its collective into tp chunks and pipeline them): the
 * collective runs on STREAM_TP beside its GEMM, so the pair takes about
 * the longer of the two.  An all-gather starts when its input is there
 * (the last compute op) and the op after the GEMM it feeds waits for it;
 * a reduce-scatter starts with the GEMM it drains (it waits for the op
 * before that GEMM) and the next compute op waits for it. */
static guint32 put_beside(Gen *g, const Proto *p, SimPhase phase,
                          guint layer, guint mb)
{
  gboolean next = p->beside == BESIDE_NEXT;
  guint32 h = put(g, p, STREAM_TP, phase, layer, mb, g->tp_group,
                  next ? g->last_compute : g->prev_compute);
  g->tp_wait = h;
  g->tp_skip = next ? 1 : 0;
  return h;
}

/* Appends a compute-stream op; the first one after a recv waits for it.  A
 * ring marker becomes the layer's context-parallel attention. */
static guint32 put_compute(Gen *g, const Proto *p, SimPhase phase,
                           guint layer, guint mb)
{
  if (p->ring == RING_FWD)
    return ring_forward(g, phase, layer, mb);
  if (p->ring == RING_BWD)
    return ring_backward(g, phase, layer, mb);
  if (p->beside)
    return put_beside(g, p, phase, layer, mb);
  guint32 peer = 0;
  if (p->group == GROUP_TP)
    peer = g->tp_group;
  else if (p->group == GROUP_DP)
    peer = g->dp_group;
  else if (p->group == GROUP_TIE)
    peer = g->tie_group;
  guint32 wait = g->pending_wait;
  if (g->tp_wait != SIM_NO_WAIT && g->tp_skip-- == 0) {
    /* An op has one wait: one that already waits for a recv or a ZeRO-1
     * parameter gather (the embedding's reduce-scatter before the first
     * layer) keeps that, and the collective, in order on its stream,
     * runs on unwaited (docs/gpt-generator.md, "tp_comm_overlap"). */
    if (wait == SIM_NO_WAIT)
      wait = g->tp_wait;
    g->tp_wait = SIM_NO_WAIT;
  }
  guint32 h = put(g, p, STREAM_COMPUTE, phase, layer, mb, peer, wait);
  g->pending_wait = SIM_NO_WAIT;
  g->prev_compute = g->last_compute;
  g->last_compute = h;
  if (g->record_units && p->unit >= 0)
    g_array_append_val(g->unit_ops, h);
  return h;
}

/* Appends a whole kernel sequence to the compute stream. */
static void put_seq(Gen *g, const Seq *q, SimPhase phase, guint layer,
                    guint mb)
{
  for (guint i = 0; i < q->n; i++)
    put_compute(g, &q->p[i], phase, layer, mb);
}

/* Posts a recv after the last compute op; the next compute op consumes it. */
static void post_recv(Gen *g, const Proto *p, guint stream, SimPhase phase,
                      guint peer, guint mb)
{
  g->pending_wait = put(g, p, stream, phase, NO_LAYER, mb, peer,
                        g->last_compute);
}

/* The forward ring of one layer (gpt_ring.c):
 * at step k the rank sends the K/V block it holds to the next context rank
 * and posts the receive of the next block from the previous one, on their
 * own streams, while it computes with the block: so a step's attention
 * waits for the block received during the step before, the send of a
 * received block waits for its arrival, and a receive waits for the
 * compute op before it (TE double-buffers: the buffer it fills is free
 * once the step before last is done).  Then the corrections. */
static guint32 ring_forward(Gen *g, SimPhase phase, guint layer, guint mb)
{
  const Ring *R = &g->ring;
  guint cp = g->cfg->cp;
  guint32 got = SIM_NO_WAIT;
  for (guint k = 0; k < cp; k++) {
    guint32 recv = SIM_NO_WAIT;
    if (k + 1 < cp) {
      put(g, &R->kv_send, g->cp_send_fwd, phase, layer, mb, g->cp_next,
          k == 0 ? g->last_compute : got);
      recv = put(g, &R->kv_recv, g->cp_recv_fwd, phase, layer, mb,
                 g->cp_prev, g->last_compute);
    }
    if (got != SIM_NO_WAIT)
      g->pending_wait = got;
    put_compute(g, &R->fwd[k], phase, layer, mb);
    if (k > 0)
      put_compute(g, &R->lse_fix[k], phase, layer, mb);
    got = recv;
  }
  for (guint k = 0; k < cp; k++)
    put_compute(g, &R->out_fix[k], phase, layer, mb);
  return put_compute(g, &R->out_cast, phase, layer, mb);
}

/* The backward ring: the blocks go the other way (to the previous context
 * rank), the first step's message is K/V, the middle steps' K/V with the
 * dK/dV summed so far, the last step's dK/dV alone; each step's dK/dV is
 * added into the partial sum that arrived with its own receive, which the
 * next step's send carries on. */
static guint32 ring_backward(Gen *g, SimPhase phase, guint layer, guint mb)
{
  const Ring *R = &g->ring;
  guint cp = g->cfg->cp;
  guint32 last = SIM_NO_WAIT;
  for (guint i = 0; i < cp; i++) {
    guint m = i == 0 ? 0 : i + 1 < cp ? 1 : 2;
    put(g, &R->bwd_send[m], g->cp_send_bwd, phase, layer, mb, g->cp_prev,
        g->last_compute);
    guint32 recv = put(g, &R->bwd_recv[m], g->cp_recv_bwd, phase, layer, mb,
                       g->cp_next, g->last_compute);
    put_compute(g, &R->bwd[i], phase, layer, mb);
    if (i > 0)
      put_compute(g, &R->dq_add[i], phase, layer, mb);
    g->pending_wait = recv;
    last = put_compute(g, &R->dkv_add[i], phase, layer, mb);
  }
  return last;
}

/* Chunk c of stage p is the (c*p_count + p)-th of the p_count*v "virtual
 * stages", which hold consecutive layers (Megatron's layout).  These say
 * whether it is the very first (embedding) or very last (head) one. */
static gboolean chunk_is_first(guint p, guint c)
{
  return p == 0 && c == 0;
}

static gboolean chunk_is_last(const Gen *g, guint p, guint c)
{
  return p == g->cfg->pp - 1 && c == g->v - 1;
}

/* Layers of each chunk of stage p, and the first layer of its chunk c:
 * uniform chunks (Megatron's layout, virtual stage c * P + p), or with
 * stage_layers (one chunk) the stage's own count, consecutive. */
static guint chunk_layers(const Gen *g, guint p)
{
  return g->cfg->stage_layers != NULL ? g->cfg->stage_layers[p] : g->lpc;
}

static guint chunk_first_layer(const Gen *g, guint p, guint c)
{
  if (g->cfg->stage_layers != NULL)
    return gpt_stage_first_layer(g->cfg, p);
  return (c * g->cfg->pp + p) * g->lpc;
}

/* Forward of microbatch mb through chunk c of stage p: [recv activations],
 * [embedding], the chunk's layers, [head] or [send activations].  The
 * activations come from the previous stage in the ring (stage p_count-1's
 * chunk c-1 for stage 0) and go to the next (stage 0's chunk c+1 for the
 * last stage). */
static void fsdp_forward(Gen *g, guint mb);
static void fsdp_backward(Gen *g, guint mb);
static void reduce_buckets(Gen *g, guint p);

static void emit_forward(Gen *g, guint p, guint c, guint mb)
{
  if (g->cfg->zero == 3 && g->cfg->dp > 1) {
    fsdp_forward(g, mb);
    return;
  }
  guint lpc = chunk_layers(g, p);
  guint first_layer = chunk_first_layer(g, p, c);
  /* The first microbatch's pass waits for the parameters the distributed
   * optimizer gathers (see gather_params): -1 = nothing to wait for. */
  const guint32 *ag = mb == 0 && g->param_ag->len > 0
                          ? &g_array_index(g->param_ag, guint32,
                                           c * (lpc + 2))
                          : NULL;
  if (mb == 0 && g->cfg->precision == GPT_PRECISION_FP8)
    put_compute(g, &g->fp8_weight_cast, SIM_PHASE_FORWARD, NO_LAYER, mb);
  if (!chunk_is_first(p, c)) {
    post_recv(g, &g->recv_fwd, g->recv_act, SIM_PHASE_FORWARD, g->prev, mb);
  } else {
    if (ag != NULL)
      g->pending_wait = ag[0];
    put_seq(g, &g->emb_fwd, SIM_PHASE_FORWARD, NO_LAYER, mb);
  }
  for (guint j = 0; j < lpc; j++) {
    guint layer = first_layer + j;
    if (ag == NULL) {
      put_seq(g, &g->layer_fwd, SIM_PHASE_FORWARD, layer, mb);
      continue;
    }
    /* The layer's norm may consume a recv; its next op waits for the
     * bucket holding the layer's weights. */
    put_compute(g, &g->layer_fwd.p[0], SIM_PHASE_FORWARD, layer, mb);
    g->pending_wait = ag[1 + j];
    for (guint i = 1; i < g->layer_fwd.n; i++)
      put_compute(g, &g->layer_fwd.p[i], SIM_PHASE_FORWARD, layer, mb);
  }
  if (chunk_is_last(g, p, c)) {
    if (ag != NULL)
      g->pending_wait = ag[1 + lpc];
    put_seq(g, &g->head_fwd, SIM_PHASE_FORWARD, NO_LAYER, mb);
  }
  put_seq(g, &g->fp8_fwd_end, SIM_PHASE_FORWARD, NO_LAYER, mb);
  if (!chunk_is_last(g, p, c))
    put(g, &g->send_fwd, g->send_act, SIM_PHASE_FORWARD, NO_LAYER, mb,
        g->next, g->last_compute);
}

/* Backward of microbatch mb through chunk c of stage p: [recv gradients],
 * [head], the chunk's layers from the last down (each after its recompute
 * when enabled), [embedding] or [send gradients].  During the last
 * microbatch the ops that complete a parameter gradient are recorded for
 * the DP buckets of the chunk. */
static void emit_backward(Gen *g, guint p, guint c, guint mb)
{
  const GptConfig *cfg = g->cfg;
  if (cfg->zero == 3 && cfg->dp > 1) {
    fsdp_backward(g, mb);
    return;
  }
  guint lpc = chunk_layers(g, p);
  guint first_layer = chunk_first_layer(g, p, c);
  /* ZeRO-2 reduce-scatters every microbatch's gradients: a rank keeps
   * only its shard between them. */
  g->record_units = gpt_grad_ranks(cfg) > 1 &&
                    (mb == cfg->microbatches - 1 || cfg->zero == 2);
  if (g->record_units)
    g_array_append_val(g->unit_chunks, c);
  if (!chunk_is_last(g, p, c))
    post_recv(g, &g->recv_bwd, g->recv_grad, SIM_PHASE_BACKWARD, g->next,
              mb);
  else
    put_seq(g, &g->head_bwd, SIM_PHASE_BACKWARD, NO_LAYER, mb);
  for (guint j = lpc; j-- > 0;) {
    guint layer = first_layer + j;
    if (cfg->recompute)
      put_seq(g, &g->layer_fwd, SIM_PHASE_BACKWARD, layer, mb);
    put_seq(g, &g->layer_bwd, SIM_PHASE_BACKWARD, layer, mb);
  }
  if (chunk_is_first(p, c))
    put_seq(g, &g->emb_bwd, SIM_PHASE_BACKWARD, NO_LAYER, mb);
  put_seq(g, &g->fp8_bwd_end, SIM_PHASE_BACKWARD, NO_LAYER, mb);
  if (!chunk_is_first(p, c))
    put(g, &g->send_bwd, g->send_grad, SIM_PHASE_BACKWARD, NO_LAYER, mb,
        g->prev, g->last_compute);
  g->record_units = FALSE;
  if (cfg->zero == 2 && cfg->dp > 1)
    reduce_buckets(g, p);
}

/* The bucket (gpt_make_buckets' end[]) holding tensor i. */
static guint bucket_of(const guint *end, guint i)
{
  guint k = 0;
  while (end[k] < i)
    k++;
  return k;
}

/* The group sharded state is split over: the DP group, or under hybrid
 * sharding the rank's node (the template's, shard_base). */
static guint32 shard_group(const Gen *g)
{
  return g->cfg->zero_group == GPT_ZERO_GROUP_NODE ? g->shard_base
                                                   : g->dp_group;
}

/* A data-parallel collective of `bytes` on the DP stream over `group`,
 * waiting for `wait`; returns its handle, also kept in g->last_dp. */
static guint32 put_dp(Gen *g, const char *name, SimCollType coll,
                      double bytes, guint32 group, SimPhase phase,
                      guint32 wait)
{
  Proto pr;
  memset(&pr, 0, sizeof pr);
  pr.name = sim_workload_intern(g->w, name);
  pr.shape = gpt_get_shape(g, pr.name, SIM_CLASS_COMM, coll,
                           SIM_MATH_VECTOR, 0, bytes);
  pr.kind = SIM_OP_COLLECTIVE;
  pr.klass = SIM_CLASS_COMM;
  g->last_dp = put(g, &pr, STREAM_DP, phase, NO_LAYER, NO_MB, group, wait);
  return g->last_dp;
}

/* ZeRO-2 and -3 reduce `bytes` of gradients: a reduce-scatter over the
 * shard group, and under hybrid sharding an all-reduce of the rank's
 * shard (1/S of them) across the nodes, as FSDP's HYBRID_SHARD does. */
static void reduce_shard(Gen *g, double bytes, guint32 wait)
{
  put_dp(g, "dp.reduce_scatter", SIM_COLL_REDUCE_SCATTER, bytes,
         shard_group(g), SIM_PHASE_BACKWARD, wait);
  if (gpt_zero_replicas(g->cfg) > 1)
    put_dp(g, "dp.replica_all_reduce", SIM_COLL_ALL_REDUCE,
           bytes / gpt_zero_shards(g->cfg), g->replica_base,
           SIM_PHASE_BACKWARD, SIM_NO_WAIT);
}

/* A unit's parameters all-gathered (E bytes each) for `phase`. */
static guint32 fsdp_gather(Gen *g, double params, SimPhase phase,
                           guint32 wait)
{
  return put_dp(g, "dp.all_gather", SIM_COLL_ALL_GATHER,
                params * gpt_elem_bytes(g->cfg), shard_group(g), phase,
                wait);
}

/* ZeRO-3 as PyTorch FSDP runs it (FULL_SHARD or HYBRID_SHARD, one unit
 * per layer; Zhao et al. 2023, arXiv:2304.11277, sections 3.3 and 4).
 * Forward: the root unit is gathered, then each layer's all-gather is
 * issued when the layer before it starts (the rate limiter lets two run
 * ahead of the compute: the next unit's gather overlaps this unit), and
 * the layer waits for its own.  One stream for all of them: one NCCL
 * communicator runs its collectives in issue order. */
static void fsdp_forward(Gen *g, guint mb)
{
  double layer, root;
  gpt_fsdp_units(g->cfg, &layer, &root);
  guint L = chunk_layers(g, 0);
  guint32 rg = fsdp_gather(g, root, SIM_PHASE_FORWARD, g->last_compute);
  guint32 next = fsdp_gather(g, layer, SIM_PHASE_FORWARD, g->last_compute);
  g->pending_wait = rg;
  put_seq(g, &g->emb_fwd, SIM_PHASE_FORWARD, NO_LAYER, mb);
  for (guint j = 0; j < L; j++) {
    guint32 cur = next;
    if (j + 1 < L)
      next = fsdp_gather(g, layer, SIM_PHASE_FORWARD, g->last_compute);
    g->pending_wait = cur;
    put_seq(g, &g->layer_fwd, SIM_PHASE_FORWARD, j, mb);
  }
  put_seq(g, &g->head_fwd, SIM_PHASE_FORWARD, NO_LAYER, mb);
}

/* Backward: the root keeps its parameters (FSDP does not reshard the
 * root after forward); each layer's parameters are gathered again,
 * prefetched when the layer above starts its backward (BACKWARD_PRE),
 * and its gradients reduce-scattered (fp32) once its backward is done;
 * the root's after the embedding's.  Every microbatch: FSDP reduces
 * the gradients of each backward unless no_sync() holds them unsharded. */
static void fsdp_backward(Gen *g, guint mb)
{
  double layer, root;
  gpt_fsdp_units(g->cfg, &layer, &root);
  guint L = chunk_layers(g, 0);
  guint32 next = fsdp_gather(g, layer, SIM_PHASE_BACKWARD, g->last_compute);
  put_seq(g, &g->head_bwd, SIM_PHASE_BACKWARD, NO_LAYER, mb);
  for (guint j = L; j-- > 0;) {
    guint32 cur = next;
    if (j > 0)
      next = fsdp_gather(g, layer, SIM_PHASE_BACKWARD, g->last_compute);
    g->pending_wait = cur;
    if (g->cfg->recompute)
      put_seq(g, &g->layer_fwd, SIM_PHASE_BACKWARD, j, mb);
    put_seq(g, &g->layer_bwd, SIM_PHASE_BACKWARD, j, mb);
    reduce_shard(g, 4 * layer, g->last_compute);
  }
  put_seq(g, &g->emb_bwd, SIM_PHASE_BACKWARD, NO_LAYER, mb);
  reduce_shard(g, 4 * root, g->last_compute);
}

/* The distributed optimizer's all-gather of chunk c's updated parameters
 * (16-bit, or 4 bytes in tf32 and fp32), one per gradient bucket, on the
 * DP stream in forward order (the last bucket first), the first waiting
 * for `wait`.  When waits is not NULL it receives what the first
 * microbatch's forward of the chunk waits for (lpc + 2 entries): the
 * embedding, each layer (the bucket holding its fc2, gathered last of
 * its units) and the head (SIM_NO_WAIT where the chunk has none). */
static void gather_chunk(Gen *g, guint p, guint c, guint32 wait,
                         guint32 *waits)
{
  const GptConfig *cfg = g->cfg;
  g_autoptr(GArray) bytes = gpt_chunk_grad_bytes(cfg, p, c);
  guint n = bytes->len;
  g_autofree guint *end = g_new(guint, n);
  g_autofree double *size = g_new(double, n);
  g_autofree guint32 *handle = g_new(guint32, n);
  guint nb = gpt_make_buckets((const double *)(void *)bytes->data, n,
                              gpt_bucket_cap_bytes(cfg), end, size);
  guint32 name = sim_workload_intern(g->w, "dp.all_gather");
  for (guint k = nb; k-- > 0;) {
    Proto pr;
    memset(&pr, 0, sizeof pr);
    pr.name = name;
    pr.shape = gpt_get_shape(g, name, SIM_CLASS_COMM, SIM_COLL_ALL_GATHER,
                             SIM_MATH_VECTOR, 0,
                             size[k] / 4 * gpt_elem_bytes(cfg));
    pr.kind = SIM_OP_COLLECTIVE;
    pr.klass = SIM_CLASS_COMM;
    handle[k] = put(g, &pr, STREAM_DP, SIM_PHASE_FORWARD, NO_LAYER, NO_MB,
                    shard_group(g), k == nb - 1 ? wait : SIM_NO_WAIT);
  }
  if (waits == NULL)
    return;
  guint lpc = chunk_layers(g, p);
  guint head = chunk_is_last(g, p, c) ? (gpt_head_weight(cfg) ? 2 : 1) : 0;
  waits[0] = chunk_is_first(p, c) ? handle[bucket_of(end, n - 1)]
                                  : SIM_NO_WAIT;
  for (guint j = 0; j < lpc; j++)
    waits[1 + j] = handle[bucket_of(end, head + 6 * (lpc - 1 - j))];
  waits[1 + lpc] = head > 0 ? handle[bucket_of(end, 0)] : SIM_NO_WAIT;
}

/* Megatron's overlap_param_gather: the all-gathers of the last step's
 * parameters run at the start of the iteration, overlapping the forward,
 * whose first microbatch waits layer by layer for its bucket (the steady
 * state of a run: the previous iteration's gather, issued when the step
 * ends). */
static void gather_params(Gen *g, guint p)
{
  const GptConfig *cfg = g->cfg;
  g_array_set_size(g->param_ag, 0);
  if ((cfg->zero != 1 && cfg->zero != 2) || gpt_grad_ranks(cfg) == 1 ||
      !cfg->dp_overlap)
    return;
  guint stride = chunk_layers(g, p) + 2;
  g_array_set_size(g->param_ag, g->v * stride);
  for (guint c = 0; c < g->v; c++)
    gather_chunk(g, p, c, SIM_NO_WAIT,
                 &g_array_index(g->param_ag, guint32, c * stride));
}

/* The DP buckets of the chunks whose backward recorded their units (the
 * builder lays streams out itself, so emitting stream 1 after stream 0's
 * ops changes nothing but the handles): all-reduced (zero 0), or
 * reduce-scattered (zero >= 1: the distributed optimizer's and ZeRO-2's
 * buckets are DDP's).  Chunk by chunk, in the order their last backwards
 * ran (v-1 down to 0 under interleaving), each chunk's gradients in
 * their own buckets.  Consumes the recorded units. */
static void reduce_buckets(Gen *g, guint p)
{
  const GptConfig *cfg = g->cfg;
  gboolean zero = cfg->zero >= 1;
  const char *name = zero ? "dp.reduce_scatter" : "dp.all_reduce";
  SimCollType coll = zero ? SIM_COLL_REDUCE_SCATTER : SIM_COLL_ALL_REDUCE;
  guint off = 0;
  for (guint k = 0; k < g->unit_chunks->len; k++) {
    guint c = g_array_index(g->unit_chunks, guint, k);
    g_autoptr(GArray) bytes = gpt_chunk_grad_bytes(cfg, p, c);
    g_assert(off + bytes->len <= g->unit_ops->len);
    g_autofree guint *end = g_new(guint, bytes->len);
    g_autofree double *size = g_new(double, bytes->len);
    guint nb = gpt_make_buckets((const double *)(void *)bytes->data,
                                bytes->len, gpt_bucket_cap_bytes(cfg), end,
                                size);
    for (guint i = 0; i < nb; i++) {
      guint32 wait = cfg->dp_overlap
                         ? g_array_index(g->unit_ops, guint32, off + end[i])
                         : g->last_compute;
      put_dp(g, name, coll, size[i], shard_group(g), SIM_PHASE_BACKWARD,
             wait);
      if (cfg->zero == 2 && gpt_zero_replicas(cfg) > 1)
        put_dp(g, "dp.replica_all_reduce", SIM_COLL_ALL_REDUCE,
               size[i] / gpt_zero_shards(cfg), g->replica_base,
               SIM_PHASE_BACKWARD, SIM_NO_WAIT);
    }
    off += bytes->len;
  }
  g_assert(off == g->unit_ops->len);
  g_array_set_size(g->unit_ops, 0);
  g_array_set_size(g->unit_chunks, 0);
}

/* The DP buckets of zero 0 and 1 (after the last microbatch's backward
 * has been emitted, so the unit handles are known), the tie all-reduce
 * and the optimizer step. */
static void emit_tail(Gen *g, guint p)
{
  const GptConfig *cfg = g->cfg;
  if (gpt_grad_ranks(cfg) > 1 && cfg->zero < 2) {
    g_assert(g->unit_chunks->len == g->v);
    reduce_buckets(g, p);
  }
  guint32 last_dp = g->last_dp;
  if (gpt_seq_parallel(cfg)) {
    Proto sp = gpt_make_proto(g, "tp.sequence_parallel_grads",
                              SIM_OP_COLLECTIVE, SIM_CLASS_COMM,
                              SIM_COLL_ALL_REDUCE, SIM_MATH_VECTOR, 0,
                              sp_grad_bytes(cfg, p));
    sp.group = GROUP_TP;
    g->pending_wait = last_dp;
    put_compute(g, &sp, SIM_PHASE_BACKWARD, NO_LAYER, NO_MB);
  }
  if (cfg->pp > 1 && gpt_tied(cfg) && (p == 0 || p == cfg->pp - 1)) {
    g->pending_wait = last_dp;
    put_compute(g, &g->tie, SIM_PHASE_BACKWARD, NO_LAYER, NO_MB);
  }
  /* The distributed optimizer and ZeRO step on this rank's shard of the
   * state. */
  double params = gpt_stage_params(cfg, p) / gpt_zero_shards(cfg);
  Proto adam = gpt_make_proto(g, "optimizer.adam", SIM_OP_KERNEL,
                              SIM_CLASS_OPTIMIZER, SIM_COLL_ALL_REDUCE,
                              SIM_MATH_VECTOR, 0, adam_bytes(cfg) * params);
  g->pending_wait = last_dp;
  guint32 step = put_compute(g, &adam, SIM_PHASE_OPTIMIZER, NO_LAYER, NO_MB);
  /* Without overlap the updated parameters are gathered right after the
   * step (with it, gather_params put them before this iteration's
   * forwards). */
  if ((cfg->zero == 1 || cfg->zero == 2) && gpt_grad_ranks(cfg) > 1 &&
      !cfg->dp_overlap)
    for (guint c = 0; c < g->v; c++)
      gather_chunk(g, p, c, step, NULL);
}

/* Megatron-core's rank order "tp-cp-ep-dp-pp" (RankGenerator in
 * parallel_state.py; no expert parallelism here): TP innermost, then CP,
 * DP, PP. */
static guint32 rank_of(const GptConfig *cfg, guint tp_i, guint cp_i,
                       guint dp_i, guint pp_i)
{
  return tp_i + cfg->tp * (cp_i + cfg->cp * (dp_i + cfg->dp * pp_i));
}

/* The streams and neighbours of context rank c's ring. */
static void ring_peers(Gen *g, guint c, guint p)
{
  const GptConfig *cfg = g->cfg;
  g->cp_i = c;
  g->cp_next = rank_of(cfg, 0, (c + 1) % cfg->cp, 0, p);
  g->cp_prev = rank_of(cfg, 0, (c + cfg->cp - 1) % cfg->cp, 0, p);
  g->cp_send_fwd = STREAM_CP_SEND_NEXT;
  g->cp_recv_fwd = STREAM_CP_RECV_PREV;
  /* Two context ranks: one neighbour both ways (see the stream enum). */
  g->cp_send_bwd = cfg->cp == 2 ? STREAM_CP_SEND_NEXT : STREAM_CP_SEND_PREV;
  g->cp_recv_bwd = cfg->cp == 2 ? STREAM_CP_RECV_PREV : STREAM_CP_RECV_NEXT;
  gpt_build_ring_protos(g, c);
}

/* Generates rank (0, c, 0, p), the template of stage p's context rank c. */
static void emit_stage(Gen *g, guint p, guint c)
{
  const GptConfig *cfg = g->cfg;
  guint m = cfg->microbatches;
  g->tp_group = c + cfg->cp * cfg->dp * p;
  g->dp_group = g->dp_base + cfg->tp * p;
  g->tie_group = g->tie_base + cfg->tp * c;
  ring_peers(g, c, p);
  /* Ring neighbours: only the interleaved schedule uses the wrap-around
   * (stage 0 <-> stage p_count-1); the others never message them. */
  g->prev = rank_of(cfg, 0, c, 0, (p + cfg->pp - 1) % cfg->pp);
  g->next = rank_of(cfg, 0, c, 0, (p + 1) % cfg->pp);
  g->send_act = STREAM_SEND_NEXT;
  g->send_grad = STREAM_SEND_PREV;
  g->recv_act = STREAM_RECV_PREV;
  g->recv_grad = STREAM_RECV_NEXT;
  if (g->prev == g->next && g->v > 1) {
    /* Two stages, interleaved: the one neighbour is both previous and
     * next, and activations and gradients travel both ways between them.
     * The engine pairs sends and recvs per (src, dst) first come, first
     * served, whatever their stream, so all sends to the neighbour share
     * one stream and all recvs from it another: then the n-th send meets
     * the n-th recv, and both sides list the messages in the same order
     * (the schedule guarantees it; tests/test-gpt.c checks it). */
    g->send_grad = STREAM_SEND_NEXT;
    g->recv_grad = STREAM_RECV_PREV;
  }
  g->last_compute = SIM_NO_WAIT;
  g->pending_wait = SIM_NO_WAIT;
  g->prev_compute = SIM_NO_WAIT;
  g->tp_wait = SIM_NO_WAIT;
  g->tp_skip = 0;
  g->record_units = FALSE;
  g_array_set_size(g->unit_ops, 0);
  g_array_set_size(g->unit_chunks, 0);
  g->last_dp = SIM_NO_WAIT;
  gpt_build_fp8_protos(g, chunk_layers(g, p));
  gather_params(g, p);

  /* The stage's program (models/schedule.h). */
  guint n = 2 * m * g->v;
  g_autofree ScheduleStep *order = g_new(ScheduleStep, n);
  if (!schedule_stage_order(cfg->schedule, cfg->pp, m,
                            g->v, p, order))
    g_assert_not_reached(); /* gpt_config_validate refused the layout */
  for (guint k = 0; k < n; k++) {
    if (order[k].backward)
      emit_backward(g, p, order[k].chunk, order[k].microbatch);
    else
      emit_forward(g, p, order[k].chunk, order[k].microbatch);
  }
  emit_tail(g, p);
}

/* Marks where the ranks of a class differ from its template (0, c, 0, p):
 * each comm op's patch field names the rank offset its peer shifts by
 * (see "Ranks and groups"): 1 = cp*dp_i (TP-group collectives), 2 = tp_i
 * (DP-group collectives), 3 = r - r0 = tp_i + t*cp*dp_i (tie-group
 * collectives, whose ids count (tp_i, cp_i, dp_i) in rank order, and p2p
 * peers, the context ring's included).  The other ranks of the class
 * then share the template's ops (sim_workload_share_rank) with those
 * three offsets as their deltas. */
enum { PATCH_DP = 1, PATCH_TP = 2, PATCH_RANK = 3 };
/* Hybrid sharding runs under impl hf and zero >= 2, so with tp = pp = 1:
 * no TP, full-DP, tie or p2p ops.  Its node-group collectives take patch
 * 1 (delta: the rank's node) and its replica-group ones patch 2 (delta:
 * the rank's index in its node). */
enum { PATCH_NODE = PATCH_DP, PATCH_REPLICA = PATCH_TP };

static void mark_patches(const Gen *g, SimOp *ops, guint32 n)
{
  for (guint32 i = 0; i < n; i++) {
    SimOp *op = &ops[i];
    if (op->kind == SIM_OP_COLLECTIVE && op->peer >= g->shard_base &&
        g->cfg->zero_group == GPT_ZERO_GROUP_NODE)
      op->patch = op->peer < g->replica_base ? PATCH_NODE : PATCH_REPLICA;
    else if (op->kind == SIM_OP_COLLECTIVE)
      op->patch = op->peer < g->dp_base    ? PATCH_DP
                  : op->peer < g->tie_base ? PATCH_TP
                                           : PATCH_RANK;
    else if (op->kind == SIM_OP_SEND || op->kind == SIM_OP_RECV)
      op->patch = PATCH_RANK;
  }
}

/* Rank r = (tp_i, c, dp_i, p) runs the template r0 of its class, its
 * group ids and peers shifted as mark_patches says. */
static void share_rank(Gen *g, guint r0, guint tp_i, guint c, guint dp_i,
                       guint p)
{
  guint r = rank_of(g->cfg, tp_i, c, dp_i, p);
  guint32 delta[SIM_PATCH_COUNT] = { 0 };
  delta[PATCH_DP] = g->cfg->cp * dp_i;
  delta[PATCH_TP] = tp_i;
  delta[PATCH_RANK] = r - r0;
  if (g->cfg->zero_group == GPT_ZERO_GROUP_NODE) {
    g_assert(g->cfg->tp == 1 && g->cfg->pp == 1);
    delta[PATCH_NODE] = dp_i / gpt_zero_shards(g->cfg);
    delta[PATCH_REPLICA] = dp_i % gpt_zero_shards(g->cfg);
  }
  sim_workload_share_rank(g->w, r, r0, delta);
  g->w->ranks[r].stage = p;
}

/* Hybrid sharding's blocks (tp = pp = 1, so rank = dp_i): node n's group
 * {nS, ..., nS + S - 1} at shard_base + n, and the group of the ranks
 * at index k of every node at replica_base + k (when there are several
 * nodes).  m has room for dp members. */
static void add_hybrid_groups(Gen *g, guint32 *m)
{
  const GptConfig *cfg = g->cfg;
  g->shard_base = g->replica_base = sim_workload_n_groups(g->w);
  if (cfg->zero_group != GPT_ZERO_GROUP_NODE)
    return;
  guint S = gpt_zero_shards(cfg), R = gpt_zero_replicas(cfg);
  for (guint n = 0; n < R; n++) {
    for (guint k = 0; k < S; k++)
      m[k] = n * S + k;
    sim_workload_add_group(g->w, m, S);
  }
  g->replica_base = sim_workload_n_groups(g->w);
  for (guint k = 0; k < S && R > 1; k++) {
    for (guint n = 0; n < R; n++)
      m[n] = n * S + k;
    sim_workload_add_group(g->w, m, R);
  }
}

/* Adds the TP, DP and tie groups in the id blocks of "Ranks and groups"
 * and records where the DP and tie blocks start.  The DP group is
 * megatron-core's data-parallel group with context parallelism: the
 * context ranks hold the same weights, so their gradients (and the
 * distributed optimizer's shards) are reduced over dp * cp ranks. */
static void add_groups(Gen *g)
{
  const GptConfig *cfg = g->cfg;
  SimWorkload *w = g->w;
  guint cp = cfg->cp, cd = cp * cfg->dp;
  g_autofree guint32 *m = g_new(guint32, MAX(MAX(cfg->tp, cd), 2));
  if (cfg->tp > 1) {
    for (guint p = 0; p < cfg->pp; p++)
      for (guint d = 0; d < cfg->dp; d++)
        for (guint c = 0; c < cp; c++) {
          for (guint t = 0; t < cfg->tp; t++)
            m[t] = rank_of(cfg, t, c, d, p);
          guint32 id = sim_workload_add_group(w, m, cfg->tp);
          g_assert(id == c + cp * (d + cfg->dp * p));
        }
  }
  g->dp_base = sim_workload_n_groups(w);
  if (cd > 1) {
    for (guint p = 0; p < cfg->pp; p++)
      for (guint t = 0; t < cfg->tp; t++) {
        for (guint d = 0; d < cfg->dp; d++)
          for (guint c = 0; c < cp; c++)
            m[c + cp * d] = rank_of(cfg, t, c, d, p);
        guint32 id = sim_workload_add_group(w, m, cd);
        g_assert(id == g->dp_base + t + cfg->tp * p);
      }
  }
  g->tie_base = sim_workload_n_groups(w);
  if (cfg->pp > 1) {
    for (guint d = 0; d < cfg->dp; d++)
      for (guint c = 0; c < cp; c++)
        for (guint t = 0; t < cfg->tp; t++) {
          m[0] = rank_of(cfg, t, c, d, 0);
          m[1] = rank_of(cfg, t, c, d, cfg->pp - 1);
          guint32 id = sim_workload_add_group(w, m, 2);
          g_assert(id == g->tie_base + t + cfg->tp * (c + cp * d));
        }
  }
  add_hybrid_groups(g, m);
}

/* Generates the template of stage p's context rank c, rank (0, c, 0, p),
 * and gives its program to the other ranks of its class (tp_i, c, dp_i,
 * p), or makes it their representative when folding. */
static void emit_class(Gen *g, guint p, guint c)
{
  const GptConfig *cfg = g->cfg;
  SimWorkload *w = g->w;
  guint r0 = rank_of(cfg, 0, c, 0, p);
  emit_stage(g, p, c);
  if (g->error != NULL || !sim_rank_builder_try_finish(g->rb, w, r0,
                                                       &g->error))
    return;
  w->ranks[r0].stage = p;
  if (cfg->fold) {
    /* Folded: the template stands for its whole class (see "Folding"). */
    for (guint d = 0; d < cfg->dp; d++)
      for (guint t = 0; t < cfg->tp; t++) {
        guint r = rank_of(cfg, t, c, d, p);
        w->fold_rep[r] = r0;
        w->ranks[r].stage = p;
      }
    return;
  }
  mark_patches(g, sim_workload_rank_ops_mut(w, r0), w->ranks[r0].n_ops);
  for (guint d = 0; d < cfg->dp; d++)
    for (guint t = 0; t < cfg->tp; t++)
      if (t != 0 || d != 0)
        share_rank(g, r0, t, c, d, p);
}

/* Records every generator parameter as a string in w->provenance. */
static void set_provenance(SimWorkload *w, const GptConfig *cfg)
{
  GHashTable *pv = w->provenance;
#define PV(k, ...) \
  g_hash_table_insert(pv, g_strdup(k), g_strdup_printf(__VA_ARGS__))
  PV("generator", "gpt");
  PV("model", "%s", cfg->model[0] != '\0' ? cfg->model : "custom");
  PV("layers", "%u", cfg->layers);
  PV("hidden", "%u", cfg->hidden);
  PV("heads", "%u", cfg->heads);
  PV("vocab", "%u", cfg->vocab);
  PV("vocab_padded", "%u", gpt_padded_vocab(cfg));
  PV("seq_len", "%u", cfg->seq_len);
  PV("microbatch_size", "%u", cfg->microbatch_size);
  PV("microbatches", "%u", cfg->microbatches);
  PV("tp", "%u", cfg->tp);
  PV("pp", "%u", cfg->pp);
  PV("dp", "%u", cfg->dp);
  PV("schedule", "%s", schedule_name(cfg->schedule));
  PV("chunks", "%u", gpt_config_chunks(cfg));
  PV("recompute", "%s", cfg->recompute ? "true" : "false");
  PV("dp_bucket_mb", "%g", cfg->dp_bucket_mb);
  PV("dp_overlap", "%s", cfg->dp_overlap ? "true" : "false");
  PV("impl", "%s", gpt_impl_name(cfg->impl));
  GptImplEff eff = gpt_config_eff(cfg);
  PV("efficiency", "gemm %.17g, attention %.17g, memory %.17g", eff.gemm,
     eff.attention, eff.memory);
  /* Only when set, so unfolded workloads keep their provenance (and their
   * native files their bytes). */
  if (cfg->fold)
    PV("fold", "true");
  if (cfg->precision == GPT_PRECISION_FP8)
    PV("precision", "fp8");
  if (cfg->attention != GPT_ATTENTION_UNFUSED)
    PV("attention", "%s", gpt_attention_name(cfg->attention));
  if (cfg->sequence_parallel)
    PV("sequence_parallel", "true");
  if (cfg->tp_comm_overlap)
    PV("tp_comm_overlap", "true");
  if (cfg->zero != 0)
    PV("zero", "%u", cfg->zero);
  if (cfg->zero_group != GPT_ZERO_GROUP_ALL) {
    PV("zero_group", "%s", gpt_zero_group_name(cfg->zero_group));
    PV("gpus_per_node", "%u", cfg->gpus_per_node);
  }
  if (cfg->global_batch_size != 0)
    PV("global_batch_size", "%u", cfg->global_batch_size);
  if (cfg->cp > 1)
    PV("context_parallel", "%u", cfg->cp);
#undef PV
}

SimWorkload *gpt_generate(const GptConfig *cfg, const GpuSpec *ref,
                          GError **error)
{
  g_return_val_if_fail(cfg != NULL && ref != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  /* Validate a copy with a terminated model name. */
  GptConfig c = *cfg;
  c.model[sizeof c.model - 1] = '\0';
  if (!gpt_config_validate(&c, error))
    return NULL;
  if (c.precision == GPT_PRECISION_FP8 && !(ref->fp8_flop_per_clk_sm.v > 0)) {
    g_set_error(error, GPT_ERROR, GPT_ERROR_INVALID,
                "precision = \"fp8\" needs FP8 tensor cores: %s has none "
                "(fp8_flop_per_clk_sm = 0; H100, H200 and L40S have them)",
                ref->name != NULL ? ref->name : "the GPU");
    return NULL;
  }

  guint n_ranks = c.tp * c.cp * c.pp * c.dp;
  g_autoptr(SimWorkload) w = sim_workload_new(n_ranks);
  w->tp = c.tp;
  w->pp = c.pp;
  w->dp = c.dp;
  w->microbatches = c.microbatches;
  w->tokens_per_iteration =
      (double)c.microbatch_size * c.seq_len * c.microbatches * c.dp;
  w->schedule = g_strdup(schedule_name(c.schedule));
  w->ref_gpu = g_strdup(ref->name);
  set_provenance(w, &c);
  g_hash_table_insert(w->provenance, g_strdup("ref_gpu"),
                      g_strdup(ref->name != NULL ? ref->name : ""));

  Gen g;
  memset(&g, 0, sizeof g);
  g.cfg = &c;
  g.ref = ref;
  gpt_priced_spec(&c, ref, &g.priced);
  g.w = w;
  g.shapes = g_hash_table_new_full(gpt_shape_key_hash, gpt_shape_key_equal,
                                   g_free, NULL);
  g.shape_ns = g_array_new(FALSE, FALSE, sizeof(gint64));
  g.unit_ops = g_array_new(FALSE, FALSE, sizeof(guint32));
  g.unit_chunks = g_array_new(FALSE, FALSE, sizeof(guint));
  g.param_ag = g_array_new(FALSE, FALSE, sizeof(guint32));
  g.price_on = &g.priced;
  if (gpt_attention_fused(&c))
    gpt_flash_specs(&g);
  g.rb = sim_rank_builder_new();
  g.b = c.microbatch_size;
  g.s = c.seq_len / c.cp; /* a context rank's tokens */
  g.h = c.hidden;
  g.t = c.tp;
  g.ht = g.h / g.t;
  g.n_att = g.b * (double)(c.heads / c.tp) * g.s * g.s;
  g.x = g.b * g.s * g.h;
  g.vt = (double)gpt_padded_vocab(&c) / c.tp;
  g.v = gpt_config_chunks(&c);
  g.lpc = c.layers / (c.pp * g.v);

  add_groups(&g);
  gpt_build_protos(&g);
  Proto *ring = g_new(Proto, 6 * c.cp);
  g.ring.fwd = ring;
  g.ring.bwd = ring + c.cp;
  g.ring.lse_fix = ring + 2 * c.cp;
  g.ring.out_fix = ring + 3 * c.cp;
  g.ring.dq_add = ring + 4 * c.cp;
  g.ring.dkv_add = ring + 5 * c.cp;
  if (c.fold)
    w->fold_rep = g_new(guint32, n_ranks);
  for (guint p = 0; p < c.pp && g.error == NULL; p++)
    for (guint cp_i = 0; cp_i < c.cp && g.error == NULL; cp_i++)
      emit_class(&g, p, cp_i);

  g_free(ring);
  sim_rank_builder_free(g.rb);
  g_array_unref(g.unit_ops);
  g_array_unref(g.unit_chunks);
  g_array_unref(g.param_ag);
  g_array_unref(g.shape_ns);
  g_hash_table_unref(g.shapes);
  if (g.error != NULL) {
    g_propagate_error(error, g.error);
    return NULL;
  }
  return g_steal_pointer(&w);
}

