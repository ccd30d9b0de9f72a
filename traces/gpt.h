/* traces/gpt.h -- Megatron-style GPT training-iteration generator.
 *
 * See traces/gpt.c for the kernel sequence, FLOP/byte formulas, the
 * calibration of durations and known limits.
 */
#ifndef TRACES_GPT_H
#define TRACES_GPT_H

#include <glib.h>
#include "sim/workload.h"
#include "models/gpu.h"
#include "models/schedule.h"

G_BEGIN_DECLS

/* The architecture: GPT-2/3 (learned positions) or BLOOM (ALiBi biases on
 * the attention scores instead of position embeddings, a LayerNorm after
 * the word embedding), or Llama (RMSNorm, SwiGLU with its own FFN width,
 * rotary position embeddings, grouped-query attention, untied input and
 * output embeddings, no biases, no dropout). */
typedef enum {
  GPT_ARCH_GPT = 0,
  GPT_ARCH_BLOOM,
  GPT_ARCH_LLAMA,
} GptArch;

/* The implementation the job ran: which kernels one layer launches, and
 * how close each kind of kernel gets to the GPU's roofline.  Megatron-LM
 * fuses bias+GeLU, bias+dropout+residual and scale+mask+softmax and
 * accumulates weight gradients inside the GEMM; a Hugging Face model in
 * eager PyTorch (what Merak and DeepSpeed pipeline) runs each of those as
 * its own kernels (docs/gpt-generator.md, "The implementation"). */
typedef enum {
  GPT_IMPL_MEGATRON = 0, /* the default */
  GPT_IMPL_HF,
} GptImpl;

/* Efficiency factors of an implementation, multiplying the GPU
 * catalogue's roofline efficiencies when the generator prices a kernel:
 * gemm and attention scale eff_compute of their class, memory scales
 * eff_memory of every class.  1 = the catalogue's figures; 0 in a
 * GptConfig = the implementation's fitted default (gpt_impl_default_eff). */
typedef struct {
  double gemm, attention, memory;
} GptImplEff;

/* The training precision: the math unit of GEMMs and attention and the
 * element size of activations and weights. */
typedef enum {
  GPT_PRECISION_BF16 = 0, /* tensor cores, 2 bytes (the default) */
  GPT_PRECISION_FP16,     /* tensor cores at the same rate, 2 bytes */
  GPT_PRECISION_TF32,     /* tensor cores at the TF32 rate, 4 bytes */
  GPT_PRECISION_FP32,     /* CUDA cores, 4 bytes */
  GPT_PRECISION_FP8,      /* Transformer Engine's recipe: the linear
                             layers' GEMMs take FP8 inputs (E4M3 forward,
                             E5M2 gradients) at the FP8 tensor rate with
                             BF16 outputs; everything else BF16 (2 bytes).
                             Needs a reference GPU with FP8 tensor cores
                             (GpuSpec.fp8_flop_per_clk_sm > 0). */
} GptPrecision;

/* How attention runs: Megatron's unfused kernels (QK^T, the fused
 * scale+mask+softmax, AV, with the b*a*s^2 scores in DRAM; the default,
 * what the A100 calibration was fitted with) or one fused FlashAttention
 * kernel each way (causal FLOPs, O(s) bytes, the backward recomputing the
 * scores). */
typedef enum {
  GPT_ATTENTION_UNFUSED = 0,
  GPT_ATTENTION_FLASH,
} GptAttention;

/* Over what ZeRO-2 and ZeRO-3 shard: the whole DP group, or the DP ranks
 * of one node, replicated across nodes (PyTorch FSDP's HYBRID_SHARD and
 * _HYBRID_SHARD_ZERO2). */
typedef enum {
  GPT_ZERO_GROUP_ALL = 0,
  GPT_ZERO_GROUP_NODE,
} GptZeroGroup;

typedef struct {
  char model[32];          /* "gpt3-175b" or "" for explicit sizes */
  guint layers, hidden, heads, vocab;  /* vocab before Megatron padding */
  guint seq_len;
  guint microbatch_size;
  guint microbatches;      /* per iteration, per pipeline (or from
                              global_batch_size: gpt_config_resolve_batch) */
  guint tp, pp, dp;
  PipelineSchedule schedule; /* models/schedule.h */
  guint chunks;            /* model chunks per stage (Megatron's
                              virtual_pipeline_model_parallel_size); 0 = the
                              schedule's default: 1 for 1f1b and gpipe, 2 for
                              interleaved.  Only interleaved takes >= 2. */
  gboolean recompute;      /* full activation recomputation */
  double dp_bucket_mb;     /* gradient all-reduce bucket size (MB), 0 = one */
  gboolean dp_overlap;     /* overlap DP all-reduce with backward */
  gboolean fold;           /* generate a folded workload: one
                              representative rank per pipeline stage
                              carries ops (see gpt_generate) */
  GptPrecision precision;
  GptArch arch;            /* set by gpt_config_set_model; may be changed */
  const guint *stage_layers; /* borrowed, pp entries summing to layers:
                              transformer layers per stage (Merak's and
                              DeepSpeed's custom partitions); NULL: layers/pp
                              each.  Only with one chunk per stage. */
  GptImpl impl;            /* the kernels of a layer (default Megatron) */
  GptImplEff eff;          /* per factor: 0 = the implementation's own
                              (fitted) value; > 0 overrides it (fitting) */
  GptAttention attention;  /* unfused (default) or flash */
  gboolean sequence_parallel; /* Megatron's sequence parallelism: TP
                              all-reduces become all-gathers and
                              reduce-scatters, norms and dropouts run on
                              s/t tokens (no effect when tp = 1, as in
                              Megatron) */
  gboolean tp_comm_overlap; /* Transformer Engine's userbuffer overlap
                              (megatron-core tp_comm_overlap): each
                              sequence-parallel all-gather runs beside the
                              GEMM that consumes it, each reduce-scatter
                              beside the GEMM that produces it; needs
                              sequence_parallel with tp > 1 */
  guint zero;              /* 0: DDP all-reduce; 1: Megatron's distributed
                              optimizer (gradients reduce-scattered, the
                              step on 1/dp of the parameters, parameters
                              all-gathered); 2: ZeRO-2 (gradients reduce-
                              scattered every microbatch and kept 1/dp);
                              3: ZeRO-3 / FSDP (parameters too, gathered
                              per layer forward and backward) */
  guint global_batch_size; /* sequences per iteration; 0 = unset.  When
                              set, microbatches must equal it / (microbatch_
                              size * dp): gpt_config_resolve_batch sets it */
  guint kv_heads;          /* key/value heads (grouped-query attention);
                              0 = heads.  Llama only. */
  guint ffn_hidden;        /* FFN width; 0 = the arch's: 4 * hidden (GPT,
                              BLOOM).  Llama needs it (its presets set
                              it). */
  GptZeroGroup zero_group; /* over what zero >= 2 shards: all of dp, or
                              the ranks of one node (FSDP's HYBRID_SHARD) */
  guint gpus_per_node;     /* the node zero_group "node" shards within
                              (gpt_config_init: 8) */
  guint cp;                /* context parallelism (megatron-core's
                              context_parallel_size): the sequence split
                              over cp ranks, attention as a ring passing
                              K/V blocks (TE's "p2p" comm type); 1 = none.
                              Ranks are tp * cp * pp * dp. */
} GptConfig;

/* Fills cfg with defaults (gpt3-1.3b, seq 2048, tp=pp=dp=1, mbs 1, 8
 * microbatches, 1f1b, chunks 0 (the schedule's default), no recompute,
 * 25 MB buckets, overlap on). */
void gpt_config_init(GptConfig *cfg);

/* Sets layers/hidden/heads/vocab and arch from a model name (gpt3-125m,
 * gpt3-350m, gpt3-760m, gpt3-1.3b, gpt3-xl (= gpt3-1.3b, Merak's name),
 * gpt3-2.7b, gpt3-6.7b, gpt3-13b, gpt3-175b, bloom-3b, bloom-176b).  Error
 * lists the names on failure. */
gboolean gpt_config_set_model(GptConfig *cfg, const char *name,
                              GError **error);
const char *const *gpt_model_names(void); /* NULL-terminated */
/* Appends one line per preset ("name  layers hidden heads vocab arch
 * params") to out: what each name stands for (trace gen --help). */
void gpt_describe_models(GString *out);

/* "gpt", "bloom", "llama" ("?" when out of range). */
const char *gpt_arch_name(GptArch a);
gboolean gpt_arch_from_name(const char *name, GptArch *out, GError **error);

/* Transformer layers on stage p (< pp): stage_layers[p], or layers/pp;
 * and the index of its first layer. */
guint gpt_stage_layers(const GptConfig *cfg, guint p);
guint gpt_stage_first_layer(const GptConfig *cfg, guint p);

/* Checks every field (positive sizes, heads % tp == 0, layers % pp == 0
 * unless stage_layers (then: pp entries, each >= 1, summing to layers),
 * hidden % heads == 0, ...; for interleaved also pp >= 2, chunks >= 2,
 * layers % (pp * chunks) == 0 and microbatches % pp == 0) with an error
 * naming the field. */
gboolean gpt_config_validate(const GptConfig *cfg, GError **error);

/* Sets cfg->microbatches from cfg->global_batch_size (when not 0) as
 * Megatron does: global_batch_size / (microbatch_size * dp).  FALSE with
 * an error naming the three numbers when it does not divide (or a size is
 * 0); cfg is then unchanged. */
gboolean gpt_config_resolve_batch(GptConfig *cfg, GError **error);

/* Megatron's FLOPs per iteration (model FLOPs, no recompute), B = global
 * batch: GPT and BLOOM 72 * B * s * l * h^2 * (1 + s/(6h) + V/(12 l h));
 * Llama 6 * B * s * (l * (2h^2 + 2h*kv*h/a + 3h*F + 2sh) + V*h), the
 * same count (3 x the forward's 2 FLOPs per weight and token, plus the
 * attention matmuls) over GQA's smaller K/V projections, SwiGLU's three
 * matrices and the untied head. */
double gpt_megatron_flops(const GptConfig *cfg);

/* Generates one iteration for tp*cp*pp*dp ranks (rank = tp_i + tp*(cp_i +
 * cp*(dp_i + dp*pp_i)), Megatron-core's order tp-cp-dp-pp).  Kernel ref_ns
 * are roofline times on `ref` at its maximum clocks, without the power
 * cap.  Caller owns the result.
 *
 * With cfg->fold, the workload is folded (sim/workload.h, fold_rep): every
 * rank (tp_i, cp_i, dp_i, p) is identical to rank (0, cp_i, 0, p), its
 * representative, which alone carries ops -- exactly the ops it has in the
 * unfolded workload.  All ranks, groups, shapes and stages exist as
 * unfolded; w->fold_rep[r] = rank (0, cp_i, 0, stage(r)).  Every peer and
 * every tie-group partner of a representative is a representative; its TP
 * group holds members of its own class only, its DP group (data and
 * context parallel) the classes of its stage's representatives, each with
 * its representative. */
SimWorkload *gpt_generate(const GptConfig *cfg, const GpuSpec *ref,
                          GError **error);

/* ---- Added with traces/gpt.c ------------------------------------------ */

/* "megatron", "hf" ("?" when out of range). */
const char *gpt_impl_name(GptImpl i);
gboolean gpt_impl_from_name(const char *name, GptImpl *out, GError **error);
/* The fitted efficiency factors of implementation i (traces/gpt.c says
 * where each was fitted). */
GptImplEff gpt_impl_default_eff(GptImpl i);
/* The factors cfg generates with: its overrides, else the defaults. */
GptImplEff gpt_config_eff(const GptConfig *cfg);
/* What kernels are priced on: *out = a shallow copy of ref (borrowing
 * its strings) whose eff_compute (gemm, attention) and eff_memory (every
 * class) are multiplied by gpt_config_eff(cfg), each held at <= 1.  A
 * kernel's ref_ns is its time on *out at auto clocks, no power cap. */
void gpt_priced_spec(const GptConfig *cfg, const GpuSpec *ref, GpuSpec *out);

/* "bf16", "fp16", "tf32", "fp32", "fp8" ("?" when out of range). */
const char *gpt_precision_name(GptPrecision p);
gboolean gpt_precision_from_name(const char *name, GptPrecision *out,
                                 GError **error);

/* "unfused", "flash" ("?" when out of range). */
const char *gpt_attention_name(GptAttention a);
gboolean gpt_attention_from_name(const char *name, GptAttention *out,
                                 GError **error);

/* The FlashAttention efficiencies (fraction of the dense 16-bit tensor
 * peak) attention = "flash" is priced with on GPU `name`, forward and
 * backward, and their source (static; traces/gpt_kernels.c cites each). */
void gpt_flash_eff(const char *name, double *fwd, double *bwd,
                   const char **source);

/* "all", "node" ("?" when out of range). */
const char *gpt_zero_group_name(GptZeroGroup z);
gboolean gpt_zero_group_from_name(const char *name, GptZeroGroup *out,
                                  GError **error);
/* The ranks cfg's sharded state is split over: dp, or gpus_per_node
 * under zero_group "node" (tp is 1 there); 1 when zero is 0. */
guint gpt_zero_shards(const GptConfig *cfg);

/* Parses a schedule name (schedule_from_name); FALSE with GPT_ERROR_INVALID
 * naming the allowed values when unknown. */
gboolean gpt_schedule_from_name(const char *name, PipelineSchedule *out,
                                GError **error);

/* The number of model chunks per stage cfg describes: cfg->chunks, or the
 * schedule's default when it is 0 (1 for 1f1b and gpipe, 2 for
 * interleaved). */
guint gpt_config_chunks(const GptConfig *cfg);

/* The vocabulary padded Megatron-style to a multiple of 128 * tp. */
guint gpt_padded_vocab(const GptConfig *cfg);

/* Parameters of the whole model (padded vocabulary): GPT l*(12h^2 + 13h)
 * + V*h + s*h + 2h (tied embeddings, positions = seq_len); BLOOM
 * l*(12h^2 + 13h) + V*h + 4h (no positions, an embedding LayerNorm);
 * Llama l*(2h^2 + 2h*kv*h/a + 3h*F + 2h) + 2V*h + h (untied, no biases,
 * RMSNorm weights only). */
double gpt_n_params(const GptConfig *cfg);
/* Key/value heads and FFN width cfg runs with (0 fields: heads, 4h). */
guint gpt_kv_heads(const GptConfig *cfg);
guint gpt_ffn_hidden(const GptConfig *cfg);

/* Ops per rank of pipeline stage `stage` (< pp) and over all ranks, as
 * gpt_generate() would produce them (formula in traces/gpt.c).  cfg must
 * pass the divisibility checks of gpt_config_validate(). */
guint64 gpt_rank_ops(const GptConfig *cfg, guint stage);
guint64 gpt_n_ops(const GptConfig *cfg);
/* Ops gpt_generate() stores: gpt_n_ops(), or with cfg->fold the ops of one
 * rank per stage. */
guint64 gpt_stored_ops(const GptConfig *cfg);

/* Bytes the workload of cfg holds once generated (op records, stream
 * offsets, rank records, fold map, groups, shapes; op counts exact, the
 * small tables bounded), for memory checks before generating: within a few
 * percent of the allocation (tests/test-gpt.c checks 10%).  Transient
 * generator state is at most one stage's template on top.  cfg must pass
 * gpt_config_validate(). */
guint64 gpt_estimate_bytes(const GptConfig *cfg);

/* One kernel family of a layer and its launches per microbatch. */
typedef struct {
  GpuKernel kernel;
  double count;
} GptLayerKernel;
#define GPT_LAYER_KERNELS_MAX 16

/* The representative kernel mix of one transformer layer on one TP rank
 * for one microbatch, forward or backward (other phases: 0 kernels), with
 * cfg's sizes (hidden, heads, tp, seq_len, microbatch_size, precision):
 * the QKV, projection, FC1 and FC2 GEMMs (backward: dgrad and a wgrad
 * accumulating into FP32 main grads, 8 bytes per weight), the two batched
 * attention GEMMs (backward twice), softmax, attention dropout, two layer
 * norms, two bias-dropout-adds and bias-GeLU, each with its DRAM traffic
 * and (vector kernels too) nominal FLOPs.  Coarser than the sequences
 * gpt_generate emits (no TP all-reduces, no ALiBi, Megatron's fusions
 * only): what the model fit prices a measured pipeline stage with
 * (models/fit.h, FitOp.kernels); for a Llama the four GEMMs take its
 * shapes (GQA's QKV, SwiGLU's gate+up and down), the vector kernels stay
 * GPT's.  Writes at most GPT_LAYER_KERNELS_MAX
 * entries to out; returns how many. */
guint gpt_layer_kernels(const GptConfig *cfg, SimPhase phase,
                        GptLayerKernel *out);

#define GPT_ERROR (gpt_error_quark())
GQuark gpt_error_quark(void);
typedef enum {
  GPT_ERROR_INVALID,
  GPT_ERROR_UNKNOWN_MODEL,
  GPT_ERROR_MEMORY /* a layout that does not fit (traces/gpt_memory.h) */
} GptError;

G_END_DECLS

#endif
