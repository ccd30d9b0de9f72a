/* cli/main.c -- the joulesim command line (DESIGN section 8): dispatch.
 *
 * Arms fault injection from the environment, then hands the arguments
 * after the command's name to its file (cli/commands.h).  Exit status: 0
 * success, 1 a user error (the message names the file, line or field), 2
 * a usage error.
 */
#include "cli/commands.h"
#include "cli/options.h"
#include "io/fault.h"

#include <stdio.h>
#include <string.h>

static const char usage_main[] =
  "usage: joulesim COMMAND [ARGS...]\n"
  "\n"
  "commands:\n"
  "  run [--seed N] [--jobs N] [--sandbox] [--quiet] [--max-memory SIZE]\n"
  "      [--max-seconds S] [--max-instructions N] SCENARIO.lua [ARGS...]\n"
  "                      run a Lua scenario script\n"
  "  gpus [NAME]         list the GPU catalogue, or describe one GPU model\n"
  "  bench [--quick] [--json]\n"
  "                      performance figures against the targets\n"
  "                      (docs/performance.md)\n"
  "  trace gen|import|info|export ...\n"
  "                      generate, import, inspect and export traces\n"
  "  validate PROFILE.csv --gpu NAME [...]\n"
  "                      compare a measured profile with the model\n"  "  fidelity [--data DIR] [--out FILE.h5] [--only NAME] [--short]\n"
  "                      every measured case through the model, with its\n"
  "                      error (docs/fidelity.md)\n"
  "\n"
  "options:\n"
  "  --version           print the version and git revision\n"
  "  --help              this text (also: joulesim COMMAND --help)\n";

int main(int argc, char **argv)
{
  /* JOULESIM_FAULT=N: fail the N-th guarded I/O call (docs/fault-injection.md). */
  GError *ferr = NULL;
  if (!fault_configure_from_env(&ferr)) {
    fprintf(stderr, "joulesim: %s\n", ferr->message);
    g_error_free(ferr);
    return EXIT_USAGE;
  }
  if (argc < 2) {
    fputs(usage_main, stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
    printf("joulesim %s (git %s)\n", JOULESIM_VERSION, JOULESIM_GIT_REV);
    return 0;
  }
  if (cli_is_help(cmd) || strcmp(cmd, "help") == 0) {
    fputs(usage_main, stdout);
    return 0;
  }
  if (strcmp(cmd, "run") == 0)
    return cmd_run(argc - 2, argv + 2);
  if (strcmp(cmd, "gpus") == 0)
    return cmd_gpus(argc - 2, argv + 2);
  if (strcmp(cmd, "bench") == 0)
    return cmd_bench(argv[0], argc - 2, argv + 2);
  if (strcmp(cmd, "trace") == 0)
    return cmd_trace(argc - 2, argv + 2);
  if (strcmp(cmd, "validate") == 0)
    return cmd_validate(argc - 2, argv + 2);
  if (strcmp(cmd, "fidelity") == 0)
    return cmd_fidelity(argc - 2, argv + 2);
  fprintf(stderr, "joulesim: unknown command '%s'\n%s", cmd, usage_main);
  return EXIT_USAGE;
}
