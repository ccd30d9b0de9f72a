/* cli/options.h -- the one option scanner every joulesim command uses.
 *
 * A command describes its options in a table (name, id, whether it takes
 * a value) and calls cli_next until it returns CLI_DONE; it prints its
 * own messages, so each command keeps its wording and exit status 2 for a
 * usage error.  The grammar, the same for every command:
 *
 *   --name VALUE, --name=VALUE   an option that takes a value: the value
 *                                is the next argument whatever it is, or
 *                                what follows '=' in the same argument
 *                                (also for short names: -o FILE, -o=FILE);
 *   --name                       a flag; "--name=VALUE" for a flag is an
 *                                unknown option;
 *   anything else starting with '-' (but "-" itself) is an unknown option,
 *   and the rest are positional arguments, returned in order (a command
 *   that stops at its first positional, like `run`, stops reading there).
 * With CLI_LONG_ONLY only arguments starting with "--" can be unknown
 * options: `run -x.lua` runs the script "-x.lua".
 *
 * No allocation: the scanner points into argv.
 */
#ifndef CLI_OPTIONS_H
#define CLI_OPTIONS_H

#include <glib.h>

/* One option of a command. */
typedef struct {
  const char *name;  /* "--seed", "-o"; NULL ends the table */
  int id;            /* what cli_next returns for it (>= 0) */
  gboolean value;    /* takes a value */
} CliOption;

/* cli_next's answers that are not an option id. */
enum {
  CLI_DONE = -1,     /* no argument left */
  CLI_ARG = -2,      /* a positional argument: a->arg */
  CLI_UNKNOWN = -3,  /* an option not in the table: a->arg, as given */
};

/* Flags of cli_args_init. */
enum {
  CLI_LONG_ONLY = 1 << 0, /* single-dash arguments not in the table are
                             positional */
};

typedef struct {
  int argc;
  char **argv;
  const CliOption *opts;
  guint flags;
  int next;           /* index of the next argument to read */
  int index;          /* index of the argument just read */
  const char *arg;    /* the argument just read, as given */
  const char *name;   /* the option matched (its table name) */
  const char *value;  /* its value; NULL when it takes one and argv ended
                         (the command reports the missing value) */
} CliArgs;

/* Scans argv[0..argc) against opts (borrowed for the scan). */
void cli_args_init(CliArgs *a, int argc, char **argv, const CliOption *opts,
                   guint flags);

/* Reads the next argument: an option's id (a->name, a->value set), CLI_ARG,
 * CLI_UNKNOWN or CLI_DONE. */
int cli_next(CliArgs *a);

/* The arguments not read yet: argv + a->next, argc - a->next of them. */
#define CLI_REST_ARGC(a) ((a)->argc - (a)->next)
#define CLI_REST_ARGV(a) ((a)->argv + (a)->next)

/* Whether `arg` asks for help ("--help" or "-h"). */
gboolean cli_is_help(const char *arg);

#endif
