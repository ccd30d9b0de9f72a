/* models/dvfs/knapsack.h -- multiple-choice knapsack: pick one item per
 * unit minimising total cost subject to total weight <= budget (see
 * models/dvfs/knapsack.c for the algorithm and its accuracy).
 */
#ifndef MODELS_DVFS_KNAPSACK_H
#define MODELS_DVFS_KNAPSACK_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  double w;       /* weight (added time), >= 0 */
  double c;       /* cost (energy), any sign */
  guint32 tag;    /* the caller's id of this option */
} DvfsItem;

typedef struct DvfsKnapsack DvfsKnapsack;

DvfsKnapsack *dvfs_knapsack_new(void);
void dvfs_knapsack_free(DvfsKnapsack *k);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(DvfsKnapsack, dvfs_knapsack_free)

/* Adds a unit with n >= 1 items (copied).  Dominated items (another has
 * weight <= and cost <=) are dropped; among equal items the lowest tag
 * stays.  Returns the unit's index. */
guint dvfs_knapsack_add(DvfsKnapsack *k, const DvfsItem *items, guint n);
guint dvfs_knapsack_n_units(const DvfsKnapsack *k);
/* The unit's undominated items, by increasing weight (borrowed). */
const DvfsItem *dvfs_knapsack_items(const DvfsKnapsack *k, guint unit,
                                    guint *n);

/* Solves min sum c s.t. sum w <= budget.  Writes the chosen item's tag of
 * every unit to tags (n_units entries) and the totals to *cost and
 * *weight (either may be NULL).  Returns FALSE when even the lightest items
 * exceed the budget (then the lightest are chosen).  Caches the convex
 * hulls, so solving again with another budget is cheap. */
gboolean dvfs_knapsack_solve(DvfsKnapsack *k, double budget,
                             guint32 *tags, double *cost, double *weight);

/* Same, greedy and fill only (no DP): for many small instances where the
 * LP gap of one unit is negligible. */
gboolean dvfs_knapsack_solve_greedy(DvfsKnapsack *k, double budget,
                                    guint32 *tags, double *cost,
                                    double *weight);

G_END_DECLS

#endif
