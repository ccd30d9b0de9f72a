/* models/straggler.h -- slow GPUs: explicit and random stragglers, and the
 * machine wrapper that applies them (DESIGN sections 4 and 6).
 *
 * A StragglerSet answers one question: by what factor is GPU g slower in
 * iteration i?  Explicit stragglers name a GPU or a data-parallel pipeline,
 * a slowdown and an iteration range; random ones start on every GPU with a
 * given rate per iteration and last a random number of iterations, drawn
 * from one PCG stream per (seed, SIM_PCG_STRAGGLER, gpu).  See
 * models/straggler.c for the model and its limits.
 *
 * StragglerMachine wraps any SimMachine: kernels of a straggling GPU take
 * `factor` times longer (at unchanged power), and an optional reaction hook
 * runs at every iteration boundary (where a straggler-aware policy may
 * replace the plan).
 */
#ifndef MODELS_STRAGGLER_H
#define MODELS_STRAGGLER_H

#include <glib.h>
#include "sim/engine.h"

G_BEGIN_DECLS

#define STRAGGLER_FOREVER G_MAXUINT
#define STRAGGLER_MAX_SLOWDOWN 100.0

/* An explicit straggler: exactly one of gpu / pipeline is >= 0. */
typedef struct {
  gint gpu;              /* GPU (= rank) index, or -1 */
  gint pipeline;         /* data-parallel pipeline index, or -1 */
  double slowdown;       /* time factor, in [1, STRAGGLER_MAX_SLOWDOWN] */
  guint from_iteration;  /* first slowed iteration (0-based) */
  guint to_iteration;    /* last slowed iteration, inclusive
                            (STRAGGLER_FOREVER: to the end) */
} StragglerSpec;

/* Random stragglers: in every iteration a GPU that is not straggling
 * starts an episode with probability `rate`; the episode's slowdown is
 * uniform in [slow_lo, slow_hi] and it lasts a uniform whole number of
 * iterations in [dur_lo, dur_hi]. */
typedef struct {
  double rate;           /* [0, 1] */
  double slow_lo, slow_hi;
  guint dur_lo, dur_hi;  /* >= 1 */
} StragglerRandom;

typedef struct StragglerSet StragglerSet;

/* A set for n_gpus GPUs laid out as tp x dp x pp in Megatron order (rank =
 * tp_i + tp * (dp_i + dp * pp_i); pipeline of a rank = dp_i), simulated for
 * up to n_iterations iterations (random episodes are drawn that far).
 * Caller owns it. */
StragglerSet *straggler_set_new(guint n_gpus, guint tp, guint dp,
                                guint n_iterations, GError **error);
void straggler_set_free(StragglerSet *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StragglerSet, straggler_set_free)

/* Adds an explicit straggler; errors name the field (gpu/pipeline out of
 * range or both/neither given, slowdown, iteration range). */
gboolean straggler_set_add(StragglerSet *s, const StragglerSpec *spec,
                           GError **error);
/* Adds random stragglers drawn with `seed`; errors name the field. */
gboolean straggler_set_add_random(StragglerSet *s, const StragglerRandom *r,
                                  guint64 seed, GError **error);

/* Time factor of GPU g in iteration iter (1.0 when not straggling; the
 * largest factor when several stragglers overlap). */
double straggler_factor(const StragglerSet *s, guint gpu, guint iter);
/* TRUE when no straggler was added. */
gboolean straggler_set_empty(const StragglerSet *s);
guint straggler_set_n_gpus(const StragglerSet *s);
/* The pipeline (dp index) of GPU g. */
guint straggler_pipeline_of(const StragglerSet *s, guint gpu);

/* Called at the start of iteration `iter`; may replace *plan (taking
 * ownership of the new one and freeing the old), as
 * SimMachine.iteration_begin. */
typedef gboolean (*StragglerHook)(gpointer data, guint iter, SimPlan **plan,
                                  GError **error);

typedef struct StragglerMachine StragglerMachine;
/* Wraps `inner` (borrowed; must outlive the wrapper), applying the
 * factors of `set` (borrowed, may be NULL = none) and calling `hook` (may
 * be NULL) after inner's own iteration_begin.  Caller owns it. */
StragglerMachine *straggler_machine_new(const SimMachine *inner,
                                        const StragglerSet *set,
                                        StragglerHook hook,
                                        gpointer hook_data);
void straggler_machine_free(StragglerMachine *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StragglerMachine, straggler_machine_free)
/* The engine's view (borrowed, lives as long as m). */
const SimMachine *straggler_machine_sim(StragglerMachine *m);

#define STRAGGLER_ERROR (straggler_error_quark())
GQuark straggler_error_quark(void);
typedef enum { STRAGGLER_ERROR_INVALID } StragglerError;

G_END_DECLS

#endif
