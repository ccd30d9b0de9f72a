/* lua/bind.h -- the Lua 5.4 binding: the `joulesim` module.
 *
 * The C side exposes checked primitives (js.cluster, js.gpt, js.simulate,
 * js.policy.*, js.gpu, js.results, ...); the embedded prelude
 * (lua/prelude.lua) adds the conveniences written in Lua (js.compare,
 * js.summary, js.format_si).
 */
#ifndef LUA_BIND_H
#define LUA_BIND_H

#include <glib.h>
#include "run/session.h"

G_BEGIN_DECLS

/* Runs the scenario script at `path` with script arguments argv[0..argc)
 * (visible to the script as the global table `arg`, arg[0] = path,
 * arg[-1] = the running binary, as /proc/self/exe names it).  The
 * script runs under lua_pcall with a traceback; a syntax or run-time error
 * returns FALSE with an error whose message starts with "path:line:".
 * With s->sandbox (js_session_sandbox) the state is the sandbox's and
 * the joulesim API confines files (lua/sandbox.c, run/confine.h); the
 * limits of s->limits hold either way. */
gboolean js_run_script(JsSession *s, const char *path, int argc,
                       char **argv, GError **error);

/* Same, for a chunk of source text (tests, the fuzz targets). */
gboolean js_run_string(JsSession *s, const char *chunkname, const char *src,
                       GError **error);

#define JS_ERROR (js_error_quark())
GQuark js_error_quark(void);
typedef enum { JS_ERROR_SCRIPT, JS_ERROR_IO } JsError;

G_END_DECLS

#endif
