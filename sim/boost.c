/* sim/boost.c -- the driver's boost controller (SimMachine.boost), as
 * the replay consults it (sim/replay.c).
 *
 * With SimMachine.boost, each GPU's SM clock has a ceiling that models the
 * driver's own boost: a kernel runs at min(requested, ceiling), "auto"
 * asking for the controller's max_mhz, and kernel_cost prices it uncapped.
 * The controller keeps an exponential average of board power (time
 * constant window_ns) fed by the kernels it sees start, in time order:
 * the last kernel's power until it ends, idle power after.  Every
 * period_ns it lowers the ceiling when the average is above the limit and
 * raises it when it is below limit - margin, in proportion to the error
 * (boost_decide), in whole steps of step_mhz.  It reacts
 * late by design: after a phase of light kernels it sits at the top and a
 * GEMM overshoots the limit until the average catches up; then it
 * throttles the light kernels that follow too.  Decisions land at kernel
 * starts (a kernel keeps the clock it started with), the kernels of the
 * compute streams are seen in the order the stream sweep schedules them,
 * and one out of time order (another stream behind) is priced at the
 * current ceiling without feeding the average.  State lives beside the
 * ranks (BoostState), reset per run, carried across iterations.
 */
#include "sim/boost.h"

#include <math.h>

/* Moves the average of b from t_ns to `to`: the last kernel's power until
 * it ended, idle power after. */
static void boost_hold(BoostState *b, const SimBoost *c, double idle_w,
                       gint64 to)
{
  if (to <= b->t_ns)
    return;
  gint64 mid = CLAMP(b->end_ns, b->t_ns, to);
  double tau = (double)c->window_ns;
  if (mid > b->t_ns)
    b->avg_w = b->kernel_w +
               (b->avg_w - b->kernel_w) * exp(-(double)(mid - b->t_ns) / tau);
  if (to > mid)
    b->avg_w = idle_w + (b->avg_w - idle_w) * exp(-(double)(to - mid) / tau);
  b->t_ns = to;
}

/* One decision on the average: a proportional step.  Near the top clocks
 * board power goes roughly as f^3 (f V^2 with V rising with f), so an
 * error e = avg / limit - 1 is undone by moving the clock by f e / 3,
 * rounded up to whole steps (at least one); above the limit it lowers the
 * clock, below limit - margin it raises it. */
static inline void boost_decide(BoostState *b, const SimBoost *c)
{
  double e = b->avg_w / c->limit_w - 1.0;
  if (b->avg_w <= c->limit_w && b->avg_w >= c->limit_w - c->margin_w)
    return;
  double mhz = fabs(e) * b->mhz / 3.0;
  guint n = (guint)MIN(ceil(mhz / c->step_mhz), 65535.0);
  guint d = MAX(n, 1u) * c->step_mhz;
  if (e > 0)
    b->mhz = b->mhz > c->min_mhz + d ? (guint16)(b->mhz - d) : c->min_mhz;
  else
    b->mhz = (guint16)MIN((guint)c->max_mhz, (guint)b->mhz + d);
}

/* The controller of GPU r up to time t (a kernel's start), then clocks c
 * under its ceiling (sim/boost.h).  Past as many decisions as it takes to
 * cross the whole range and settle the average, more decisions repeat the
 * last one, so a long gap costs a bounded loop. */
SimClocks sim_boost_clocks(SimEngine *e, guint r, SimClocks c,
                           gint64 t)
{
  const SimBoost *cfg = &e->m->boost[r];
  BoostState *b = &e->boost[r];
  double idle = e->ranks[r].idle_w;
  if (t > b->t_ns) {
    gint64 budget = (cfg->max_mhz - cfg->min_mhz) / cfg->step_mhz + 2 +
                    20 * cfg->window_ns / cfg->period_ns;
    while (b->tick_ns <= t && budget-- > 0) {
      boost_hold(b, cfg, idle, b->tick_ns);
      boost_decide(b, cfg);
      b->tick_ns += cfg->period_ns;
    }
    if (b->tick_ns <= t) {
      gint64 n = (t - b->tick_ns) / cfg->period_ns + 1;
      boost_hold(b, cfg, idle, b->tick_ns + (n - 1) * cfg->period_ns);
      for (int k = 0; k < (cfg->max_mhz - cfg->min_mhz) / cfg->step_mhz + 1;
           k++)
        boost_decide(b, cfg);
      b->tick_ns += n * cfg->period_ns;
    }
    boost_hold(b, cfg, idle, t);
  }
  return boost_cap(e, r, c);
}


void sim_boost_reset(SimEngine *e)
{
  for (guint r = 0; r < e->w->n_ranks; r++) {
    const SimBoost *c = &e->m->boost[r];
    BoostState *b = &e->boost[r];
    b->avg_w = b->kernel_w = e->ranks[r].idle_w;
    b->t_ns = b->end_ns = 0;
    b->tick_ns = c->period_ns;
    b->mhz = c->max_mhz;
  }
}
