/* models/fit-private.h -- what models/fit.c shares with models/
 * fit_validate.c: the input check and the memory-clock helpers.
 */
#ifndef MODELS_FIT_PRIVATE_H
#define MODELS_FIT_PRIVATE_H

#include "models/fit.h"

/* The GPU's highest memory clock (MHz). */
static inline double fit_top_mem(const GpuSpec *g)
{
  return g->mem_mhz[g->n_mem_clocks - 1].v;
}

/* A point's memory clock: m, or the highest for m = 0. */
static inline double fit_eff_mem(const GpuSpec *g, guint m)
{
  return m > 0 ? (double)m : fit_top_mem(g);
}

/* FIT_ERROR_INVALID for no ops, an op without points, a bad count, class
 * or mix, or a clock outside the GPU's range. */
gboolean fit_check_input(const GpuSpec *g, const FitOp *ops, guint n_ops,
                         GError **error);

#endif
