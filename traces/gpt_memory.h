/* traces/gpt_memory.h -- the GPU memory a GPT training job needs per rank:
 * weights, gradients, optimizer state, stored activations and an
 * allowance for what the framework itself holds.
 *
 * "GPU memory" throughout: the accelerator's HBM a real job would fill,
 * which decides whether a layout can run at all.  Not the simulator's own
 * host memory (run/memory.h, --max-memory).  The model, its sources and
 * its errors against the published rules are in traces/gpt_memory.c and
 * docs/gpt-generator.md, "Memory".
 */
#ifndef TRACES_GPT_MEMORY_H
#define TRACES_GPT_MEMORY_H

#include <glib.h>
#include "traces/gpt.h"

G_BEGIN_DECLS

/* The parts of the training recipe that move memory but not (yet) the
 * kernels js.gpt generates. */
typedef struct {
  gboolean flash_attention;   /* fused attention keeps no s x s matrices */
  gboolean sequence_parallel; /* LayerNorm/dropout activations split by tp */
  guint zero;                 /* 1: Adam state sharded over dp (Megatron's
                                 distributed optimizer); 2: gradients
                                 too; 3: weights too (over
                                 gpt_zero_shards' ranks); 0: replicated */
  gboolean grads_16bit;       /* gradients reduced in bf16, not fp32
                                 (Megatron's grad_reduce_in_fp32 off) */
  gboolean fp8_gemm_inputs;   /* Transformer Engine saves the linear
                                 layers' inputs for backward in FP8 */
} GptMemoryRecipe;

/* The recipe cfg describes (its attention, sequence_parallel, zero and
 * precision fields, traces/gpt.h).  precision fp8 is NeMo's FP8 recipe:
 * FP8 weights with TE's transpose cache (2 bytes a parameter, as bf16),
 * bf16 gradients, the linear layers' inputs saved in FP8. */
GptMemoryRecipe gpt_memory_recipe_from_config(const GptConfig *cfg);

/* One pipeline stage's most loaded rank (every rank of a stage holds the
 * same: TP shards are equal, DP replicas identical).  Bytes. */
typedef struct {
  double params;            /* parameters on the rank */
  double weights_bytes;     /* the model copy the kernels read */
  double grads_bytes;       /* main gradients: fp32, bf16 under fp8 */
  double optimizer_bytes;   /* fp32 master weights and Adam moments
                               (and, with bf16 gradients, an fp32 copy
                               of the gradient shard) */
  double activations_bytes; /* stored for backward at the stage's peak */
  double allowance_bytes;   /* CUDA context, NCCL buffers, fragmentation */
  double total_bytes;       /* the sum */
  double in_flight;         /* microbatches whose activations the stage
                               holds at its peak (interleaved: passes of
                               one model chunk / chunks) */
} GptStageMemory;

/* What one layout needs: a copy of its configuration (stage_layers
 * included) and recipe, and the estimate of each stage. */
typedef struct GptMemory GptMemory;

/* Estimates every stage of cfg (which must pass gpt_config_validate)
 * under recipe r.  Both copied.  Caller owns the result. */
GptMemory *gpt_memory_new(const GptConfig *cfg, const GptMemoryRecipe *r);
void gpt_memory_free(GptMemory *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(GptMemory, gpt_memory_free)

guint gpt_memory_n_stages(const GptMemory *m);
/* Stage i (< n_stages), borrowed. */
const GptStageMemory *gpt_memory_stage(const GptMemory *m, guint i);
/* The stage with the largest total (the first of equals). */
guint gpt_memory_peak_stage(const GptMemory *m);

/* TRUE when every stage fits in capacity_bytes (> 0) of GPU memory.
 * Otherwise FALSE with GPT_ERROR_MEMORY: the GPU (gpu_name, borrowed), the
 * stage that does not fit and its breakdown, and what would make it fit
 * (recompute, zero = 1 -- zero = 3 under impl hf --, twice the tp or
 * pp), each with the total it would need. */
gboolean gpt_memory_check(const GptMemory *m, double capacity_bytes,
                          const char *gpu_name, GError **error);

/* Appends the estimate to out: one line per stage ("stage 0: ...") after
 * a heading, in GB (1e9 bytes). */
void gpt_memory_describe(const GptMemory *m, GString *out);

G_END_DECLS

#endif
