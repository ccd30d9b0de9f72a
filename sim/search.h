/* sim/search.h -- binary search over sorted keys, the one loop every
 * sorted lookup of the engine and the trace importers shares.
 *
 * SIM_LOWER_BOUND(out, lo, hi, i, key, v) sets the guint32 `out` to the
 * first index i in [lo, hi) whose key is >= v, or to hi when there is
 * none; SIM_UPPER_BOUND does the same for the first key > v, so out - lo
 * is the number of keys <= v.  `key` is an expression of the index
 * variable named i (declared by the macro), so one loop serves a plain
 * array (a[i]), a struct field (a[i].corr), keys reached through an index
 * (start[ks[i]]) and a comparison function (cmp(&a[i], k), v = 0).  The
 * keys must be ascending over [lo, hi); key and v are evaluated once per
 * step and must have no side effects.  Macros, not a function taking a
 * comparator, because the replay's lookups (channel_of, ahead_from,
 * wait targets) sit in its inner loop, where a call per step would
 * show. */
#ifndef SIM_SEARCH_H
#define SIM_SEARCH_H

#include <glib.h>

/* The first index i in [lo, hi) at which `before` is false; `before`
 * must hold on a prefix of the range and fail on the rest. */
#define SIM_PARTITION_POINT_(out, lo, hi, i, before)                        \
  do {                                                                      \
    guint32 sim_lo_ = (lo), sim_hi_ = (hi);                                 \
    while (sim_lo_ < sim_hi_) {                                             \
      guint32 i = sim_lo_ + (sim_hi_ - sim_lo_) / 2;                        \
      if (before)                                                           \
        sim_lo_ = i + 1;                                                    \
      else                                                                  \
        sim_hi_ = i;                                                        \
    }                                                                       \
    (out) = sim_lo_;                                                        \
  } while (0)

#define SIM_LOWER_BOUND(out, lo, hi, i, key, v)                             \
  SIM_PARTITION_POINT_(out, lo, hi, i, (key) < (v))
#define SIM_UPPER_BOUND(out, lo, hi, i, key, v)                             \
  SIM_PARTITION_POINT_(out, lo, hi, i, (key) <= (v))

/* First index in the ascending array a[lo, hi) whose value is >= v. */
static inline guint32 sim_lower_bound_u32(const guint32 *a, guint32 lo,
                                          guint32 hi, guint32 v)
{
  guint32 at;
  SIM_LOWER_BOUND(at, lo, hi, k, a[k], v);
  return at;
}

#endif
