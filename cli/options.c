/* cli/options.c -- see cli/options.h. */
#include "cli/options.h"

#include <string.h>

void cli_args_init(CliArgs *a, int argc, char **argv, const CliOption *opts,
                   guint flags)
{
  memset(a, 0, sizeof *a);
  a->argc = argc;
  a->argv = argv;
  a->opts = opts;
  a->flags = flags;
  a->index = -1;
}

int cli_next(CliArgs *a)
{
  a->name = NULL;
  a->value = NULL;
  if (a->next >= a->argc) {
    a->arg = NULL;
    return CLI_DONE;
  }
  a->index = a->next++;
  const char *arg = a->arg = a->argv[a->index];
  for (const CliOption *o = a->opts; o != NULL && o->name != NULL; o++) {
    gsize n = strlen(o->name);
    if (strncmp(arg, o->name, n) != 0 || (arg[n] != '\0' && arg[n] != '='))
      continue;
    if (!o->value) {
      if (arg[n] == '=')
        break; /* a flag does not take a value */
      a->name = o->name;
      return o->id;
    }
    a->name = o->name;
    if (arg[n] == '=')
      a->value = arg + n + 1;
    else if (a->next < a->argc)
      a->value = a->argv[a->next++];
    return o->id;
  }
  gboolean dash = (a->flags & CLI_LONG_ONLY) ? arg[0] == '-' && arg[1] == '-'
                                             : arg[0] == '-' && arg[1] != '\0';
  return dash ? CLI_UNKNOWN : CLI_ARG;
}

gboolean cli_is_help(const char *arg)
{
  return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}
