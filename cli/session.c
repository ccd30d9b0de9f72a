/* cli/session.c -- what every command's session has: the catalogue with
 * the user's entries, and a print hook that puts a script's text on the
 * process's streams (run/session.h: the library itself never prints). */
#include "cli/commands.h"
#include "models/gpufile.h"

#include <stdio.h>

void cli_load_gpu_path(GpuCatalogue *c)
{
  const char *path = g_getenv(GPU_PATH_ENV);
  GError *err = NULL;
  if (path != NULL && !gpu_catalogue_load_path(c, path, &err)) {
    g_warning("%s: %s", GPU_PATH_ENV, err->message);
    g_error_free(err);
  }
}

GpuCatalogue *cli_catalogue_new(void)
{
  GpuCatalogue *c = gpu_catalogue_new();
  cli_load_gpu_path(c);
  return c;
}

/* JsPrintFunc: stdout for the script's output, flushed at the end of a
 * line (Lua's print flushes after each call); stderr for diagnostics. */
static void print_to_streams(JsPrintStream to, const char *text, gsize len,
                             gpointer data)
{
  FILE *f = to == JS_PRINT_OUT ? stdout : stderr;
  fwrite(text, 1, len, f);
  if (len > 0 && text[len - 1] == '\n')
    fflush(f);
}

JsSession *cli_session_new(guint64 seed)
{
  JsSession *s = js_session_new(seed);
  cli_load_gpu_path(s->catalogue);
  s->print = print_to_streams;
  s->print_data = NULL;
  return s;
}

int cli_fail(GError *err)
{
  fprintf(stderr, "joulesim: %s\n", err->message);
  g_error_free(err);
  return EXIT_USER;
}
