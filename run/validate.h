/* run/validate.h -- a measured profile against the model: the validation
 * run shared by `joulesim validate` (cli/cmd_validate.c) and js.validate
 * (lua/validate.c), its readable report, its HDF5 tables and the fitted
 * catalogue entry.  See docs/validation.md.
 *
 * The work is done by traces/profile.c (loading) and models/fit.c
 * (fitting and held-out prediction); this module converts a Profile into
 * FitOp records and formats what came out.  Nothing here prints: the
 * report is appended to a GString.
 *
 * HDF5 tables written by js_validate_write (--out, out=):
 *   validate_points   one row per measured point: measured, out-of-box and
 *                     fitted time/energy, relative residuals, held out or
 *                     not, fold
 *   validate_summary  one row per op and one "overall": MAPE / max / bias
 *                     (in %) of both models on the held-out points, the
 *                     minimum-energy clocks, savings and regrets
 *   validate_model    the fitted model: one row per op (time coefficients,
 *                     saturation clock, dynamic and DRAM energy) and one
 *                     row "gpu" with the GPU-level power parameters
 * Each table is replaced when it exists (other tables of the file stay).
 */
#ifndef RUN_VALIDATE_H
#define RUN_VALIDATE_H

#include <glib.h>
#include "models/fit.h"
#include "models/gpu.h"
#include "traces/profile.h"

G_BEGIN_DECLS

/* FitOp records of a profile: points copied, op names borrowed from the
 * profile.  Cleared with js_fit_input_clear. */
typedef struct {
  FitOp *ops;
  FitPoint **points;
  guint n;
} JsFitInput;
void js_fit_input_from_profile(const Profile *p, JsFitInput *in);
void js_fit_input_clear(JsFitInput *in);

/* A profile's form as reports and js.profile name it: "perseus" (stage
 * profiles) or "kernel". */
const char *js_profile_format_name(ProfileFormat f);

/* One validation's settings (strings borrowed). */
typedef struct {
  const char *gpu;          /* catalogue name */
  FitMode mode;
  double holdout;
  guint folds;
  guint64 seed;
  double power_limit_w;     /* <= 0: the GPU's default */
  const char *out;          /* HDF5 path or NULL */
  const char *save_gpu;     /* name of the fitted entry or NULL */
  gboolean force;           /* --force: an existing `out` that is not a
                               results file is replaced, not refused */
} JsValidateCfg;

/* Validates p against the catalogue's cfg->gpu.  Returns the report
 * (caller frees it with fit_report_free) with *gpu_out borrowed from cat,
 * or NULL with an error naming the GPU or the profile. */
FitReport *js_validate_run(const GpuCatalogue *cat, const Profile *p,
                           const JsValidateCfg *cfg, const GpuSpec **gpu_out,
                           GError **error);

/* Appends the readable report of r (p validated on g) to o; `points`
 * adds a line per measured point. */
void js_validate_report(const Profile *p, const GpuSpec *g,
                        const JsValidateCfg *cfg, const FitReport *r,
                        gboolean points, GString *o);

/* Writes the three tables to cfg->out: into a copy of the target (or a
 * new file) under a temporary name, renamed into place only when all are
 * written, so an error part-way leaves the target as it was. */
gboolean js_validate_write(const Profile *p, const GpuSpec *g,
                           const JsValidateCfg *cfg, const FitReport *r,
                           GError **error);

/* The catalogue entry `name` fitted on every point (--save-gpu,
 * save_gpu=): a new spec (caller frees it with gpu_spec_free), or NULL
 * when nothing was fitted (fit = none) or it does not validate. */
GpuSpec *js_validate_fitted_spec(const FitReport *r, const Profile *p,
                                 const char *name, GError **error);

G_END_DECLS

#endif
