/* cli/cmd_fidelity.c -- `joulesim fidelity`: runs tools/fidelity.lua, a
 * script beside the binary, with the command's arguments, as `joulesim run
 * tools/fidelity.lua ARGS` would.  The program parses its own options (the
 * same grammar as cli/options.h: --opt VALUE or --opt=VALUE) and prints its
 * report through the session's print hook; its errors, usage errors
 * included, exit with status 1. */
#include "cli/commands.h"
#include "lua/bind.h"

#include <stdio.h>
#include <string.h>

/* The script, found from the running binary, never from the current
 * directory: a binary built in a checkout sits at its root (tools/), one
 * that `make install` put in PREFIX/bin has it in PREFIX/share/joulesim/
 * tools. */
static char *find_script(GError **error)
{
  g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
  if (exe == NULL) {
    g_set_error(error, JS_ERROR, JS_ERROR_IO,
                "the binary's location is unknown (/proc/self/exe); run "
                "`joulesim run PATH/tools/fidelity.lua` instead");
    return NULL;
  }
  g_autofree char *bin = g_path_get_dirname(exe);
  g_autofree char *prefix = g_path_get_dirname(bin);
  char *tried[] = {
      g_build_filename(bin, "tools", "fidelity.lua", NULL),
      g_build_filename(prefix, "share", "joulesim", "tools", "fidelity.lua",
                       NULL),
  };
  char *found = NULL;
  for (guint i = 0; i < G_N_ELEMENTS(tried); i++) {
    if (found == NULL && g_file_test(tried[i], G_FILE_TEST_IS_REGULAR)) {
      found = tried[i];
      tried[i] = NULL;
    }
  }
  if (found == NULL)
    g_set_error(error, JS_ERROR, JS_ERROR_IO,
                "the fidelity script is neither %s (a checkout) nor %s "
                "(installed)", tried[0], tried[1]);
  for (guint i = 0; i < G_N_ELEMENTS(tried); i++)
    g_free(tried[i]);
  return found;
}

int cmd_fidelity(int argc, char **argv)
{
  GError *err = NULL;
  g_autofree char *script = find_script(&err);
  if (script != NULL) {
    g_autoptr(JsSession) s = cli_session_new(1);
    s->quiet = TRUE;
    if (js_run_script(s, script, argc, argv, &err))
      return 0;
    /* The program's own errors (bad data, options) carry no position:
     * their traceback is noise.  A run-time error in the script keeps
     * it. */
    char *tb = strstr(err->message, "\nstack traceback:");
    if (tb != NULL && !g_str_has_prefix(err->message, script))
      *tb = '\0';
  }
  fprintf(stderr, "joulesim fidelity: %s\n", err->message);
  g_error_free(err);
  return EXIT_USER;
}
