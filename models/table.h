/* models/table.h -- table-driven pricing: measured time and energy per
 * clock replace the analytic GPU model for the ops they cover (DESIGN
 * section 5, "Table-driven mode").
 *
 * A PriceTable holds entries (one per measured computation or kernel: a
 * list of (SM clock, time, energy) points) and a map from workload shapes
 * to entries.  Between two measured clocks time and energy are linearly
 * interpolated; a clock outside the measured range is an error
 * (TABLE_ERROR_RANGE), never extrapolated.  See models/table.c for the
 * equations and limits.
 *
 * A workload carries its table in its provenance under
 * PRICE_TABLE_PROVENANCE_KEY, serialised as text (price_table_to_string),
 * so whoever builds a machine for the workload (models/cluster.c) finds it
 * without any side channel, and a saved trace keeps it.
 */
#ifndef MODELS_TABLE_H
#define MODELS_TABLE_H

#include <glib.h>
#include "sim/engine.h"

G_BEGIN_DECLS

#define PRICE_TABLE_PROVENANCE_KEY "price_table"
#define PRICE_TABLE_MAX_ENTRIES 65536u
#define PRICE_TABLE_MAX_POINTS 4096u

/* One measured point: the op's mean duration and energy at an SM clock. */
typedef struct {
  guint sm_mhz;
  double time_s;     /* > 0 */
  double energy_j;   /* > 0 */
} TablePoint;

typedef struct PriceTable PriceTable;

/* An empty table.  Caller owns it. */
PriceTable *price_table_new(void);
void price_table_free(PriceTable *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PriceTable, price_table_free)

/* Adds an entry named `name` (copied) with n points (copied, any order).
 * Refuses (TABLE_ERROR_INVALID) an empty list, a clock of 0, a duplicate
 * clock, or a time/energy that is not finite and > 0.  Identical entries
 * (same points) are shared: the index of the existing one is returned.
 * Sets *entry to the entry index. */
gboolean price_table_add(PriceTable *t, const char *name,
                         const TablePoint *pts, guint n, guint *entry,
                         GError **error);
/* Maps workload shape `shape` to entry `entry` (replacing any mapping). */
gboolean price_table_map_shape(PriceTable *t, guint32 shape, guint entry,
                               GError **error);

guint price_table_n_entries(const PriceTable *t);
/* Entry of `shape`, or -1 when the table does not cover it. */
gint price_table_shape_entry(const PriceTable *t, guint32 shape);
/* Number of shape slots (highest mapped shape + 1). */
guint32 price_table_n_shapes(const PriceTable *t);
const char *price_table_entry_name(const PriceTable *t, guint entry);
/* The measured points of an entry, ascending by clock (borrowed). */
const TablePoint *price_table_points(const PriceTable *t, guint entry,
                                     guint *n);
/* Lowest and highest measured clock of an entry. */
guint price_table_min_mhz(const PriceTable *t, guint entry);
guint price_table_max_mhz(const PriceTable *t, guint entry);

/* Time and energy of `entry` at SM clock sm_mhz (0 = the highest measured
 * clock): measured values at a measured clock, linear interpolation
 * between the two measured clocks around it, TABLE_ERROR_RANGE outside. */
gboolean price_table_at(const PriceTable *t, guint entry, guint sm_mhz,
                        double *time_s, double *energy_j, GError **error);

/* The engine's price of `entry` at requested clock sm_mhz (0 = highest
 * measured) under a power limit (<= 0: none):
 *   time_scale = t(f) / t(f_max),  power_w = E(f) / t(f)
 * When E(f)/t(f) exceeds the limit the op runs at the highest measured
 * clock below f whose power fits (the lowest measured clock when none
 * does); out->sm_mhz is the clock run.  Clocks outside the measured range
 * are TABLE_ERROR_RANGE (out is then filled at the nearest measured clock,
 * so a caller that cannot fail may still use it). */
gboolean price_table_cost(const PriceTable *t, guint entry, guint sm_mhz,
                          double power_limit_w, SimCost *out,
                          GError **error);

/* Checks that every kernel op of w that the table covers requests, under
 * `plan`, a clock inside its entry's measured range (or auto).  The error
 * names the rank, op, entry, clock and range of the first violation. */
gboolean price_table_check_plan(const PriceTable *t, const SimWorkload *w,
                                const SimPlan *plan, GError **error);

/* Text form (exact: %.17g), one line per entry then one per mapped shape:
 *   price_table 1
 *   entry NAME N mhz time energy mhz time energy ...
 *   shape SHAPE ENTRY
 * Caller frees the string. */
char *price_table_to_string(const PriceTable *t);
/* Parses the text form; errors name the line. */
PriceTable *price_table_from_string(const char *s, GError **error);

/* Stores t in w's provenance (replacing any table there). */
void price_table_attach(const PriceTable *t, SimWorkload *w);
/* The table w carries, or NULL with *error unset when it carries none
 * (NULL with *error set when the stored text is malformed or maps a shape
 * the workload does not have).  Caller owns it. */
PriceTable *price_table_from_workload(const SimWorkload *w, GError **error);

#define TABLE_ERROR (table_error_quark())
GQuark table_error_quark(void);
typedef enum {
  TABLE_ERROR_INVALID,  /* bad points, names, shapes or text */
  TABLE_ERROR_RANGE     /* a clock outside the measured range */
} TableError;

G_END_DECLS

#endif
