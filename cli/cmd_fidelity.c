/* cli/cmd_fidelity.c -- `joulesim fidelity`: lua/fidelity.lua, embedded,
 * run with the command's arguments.  The program parses its own options
 * (the same grammar as cli/options.h: --opt VALUE or --opt=VALUE) and
 * prints its report through the session's print hook; its errors,
 * usage errors included, exit with status 1. */
#include "cli/commands.h"
#include "lua/bind.h"

#include <stdio.h>
#include <string.h>

int cmd_fidelity(int argc, char **argv)
{
  g_autoptr(JsSession) s = cli_session_new(1);
  s->quiet = TRUE;
  GError *err = NULL;
  if (js_run_resource(s, "fidelity.lua", argc, argv, &err))
    return 0;
  /* The program's own errors (bad data, options) carry no Lua position:
   * their traceback is noise. */
  char *tb = strstr(err->message, "\nstack traceback:");
  if (tb != NULL && !g_str_has_prefix(err->message, "[joulesim "))
    *tb = '\0';
  fprintf(stderr, "joulesim fidelity: %s\n", err->message);
  g_error_free(err);
  return EXIT_USER;
}
