/* traces/sched.h -- Perseus/Merak frequency schedules (N.sched.json).
 *
 * The Perseus artifact (ml-energy/zeus, branch kronos, sosp24_data/) keeps
 * every frequency plan it ran as a JSON list with one object per rank,
 * {"rank": r, "power_states": [MHz, ...]}: one SM clock per instruction of
 * the rank's Merak pipeline schedule, in the order Merak executes them.
 * sched_plan_load() reads one and turns it into a per-computation plan:
 * the clock of every forward and backward pass of every microbatch of
 * every stage (see traces/sched.c for the order).
 */
#ifndef TRACES_SCHED_H
#define TRACES_SCHED_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  guint n_stages;        /* ranks of the file (one pipeline, tp = dp = 1) */
  guint n_microbatches;  /* inferred from each rank's instruction count */
  guint16 *mhz;          /* 2 * n_stages * n_microbatches clocks (owned):
                            stage s, microbatch m, pass b (0 forward,
                            1 backward) at index (s * M + m) * 2 + b */
} SchedPlan;

/* Reads the N.sched.json file at path.  Errors (SCHED_ERROR) name the
 * file and what is wrong: not JSON, not a list of {rank, power_states},
 * ranks missing or repeated, a clock that is not an integer in 1..65535,
 * or an instruction count that no microbatch count gives for Merak's
 * 1F1B schedule on that stage (the message says the count and what
 * would fit).  Caller owns the result (sched_plan_free). */
SchedPlan *sched_plan_load(const char *path, GError **error);
void sched_plan_free(SchedPlan *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SchedPlan, sched_plan_free)

/* Instructions of stage s of S under Merak's 1F1B schedule with M
 * microbatches (what power_states must hold). */
guint64 sched_instructions(guint S, guint M, guint s);

#define SCHED_ERROR (sched_error_quark())
GQuark sched_error_quark(void);
typedef enum {
  SCHED_ERROR_IO,
  SCHED_ERROR_PARSE,   /* not JSON, or not the schedule's layout */
  SCHED_ERROR_SHAPE    /* instruction counts that fit no schedule */
} SchedError;

G_END_DECLS

#endif
