/* cli/sweep_progress.h -- the progress line of js.sweep on the terminal
 * (the sweep engine's progress hook, run/sweep.h). */
#ifndef CLI_SWEEP_PROGRESS_H
#define CLI_SWEEP_PROGRESS_H

#include "run/session.h"

G_BEGIN_DECLS

/* Makes the sweeps of session s print their progress to stderr (when a
 * sweep asks for it: js.sweep's `progress`, by default when stderr is a
 * terminal and the run is not --quiet). */
void cli_sweep_progress_install(JsSession *s);

G_END_DECLS

#endif
