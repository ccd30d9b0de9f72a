/* cli/commands.h -- the joulesim commands (one file each) and what they
 * share: exit statuses, and the CLI's sessions and catalogues.
 *
 * Each command takes the arguments after its name (cli/options.h parses
 * them), prints its own messages and returns the exit status: 0 success,
 * EXIT_USER for a user error (the message names the file, line, field or
 * option), EXIT_USAGE for a usage error (unknown option, missing or
 * malformed value).  Only cli/ prints.
 */
#ifndef CLI_COMMANDS_H
#define CLI_COMMANDS_H

#include "models/gpu.h"
#include "run/session.h"

#define EXIT_USER 1
#define EXIT_USAGE 2

int cmd_run(int argc, char **argv);                    /* cli/cmd_run.c */
int cmd_gpus(int argc, char **argv);                   /* cli/cmd_gpus.c */
int cmd_fidelity(int argc, char **argv);               /* cli/cmd_fidelity.c */
int cmd_trace(int argc, char **argv);                  /* cli/cmd_trace.c */
int cmd_validate(int argc, char **argv);               /* cli/cmd_validate.c */
int cmd_bench(const char *self, int argc, char **argv); /* cli/cmd_bench.c */

/* cli/session.c: adds the entries of $JOULESIM_GPU_PATH to c; a bad
 * directory or file is reported as a GLib warning on stderr
 * ("JOULESIM_GPU_PATH: ...") and skipped, as every command treats it. */
void cli_load_gpu_path(GpuCatalogue *c);
/* cli/session.c: the built-in catalogue plus $JOULESIM_GPU_PATH's entries
 * (cli_load_gpu_path).  Caller frees it. */
GpuCatalogue *cli_catalogue_new(void);
/* cli/session.c: js_session_new(seed) with that catalogue, and its print
 * hook writing a script's output to stdout (flushed at each newline, as
 * Lua's print does) and its diagnostics to stderr. */
JsSession *cli_session_new(guint64 seed);

/* cli/session.c: "joulesim: MESSAGE" on stderr; frees err; EXIT_USER. */
int cli_fail(GError *err);

#endif
