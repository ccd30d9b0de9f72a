/* run/confine.h -- where a sandboxed scenario may read and write files, and
 * which existing files an output may replace.
 *
 * A JsConfine is two lists of canonical directories (absolute, symbolic
 * links and ".." resolved, by realpath): the directories the joulesim API
 * may write into and those it may read from.  js_confine_check() resolves
 * a path the same way -- the file itself when it exists, so that a link
 * pointing out is judged by its target, else its directory plus its last
 * name -- and allows it when the result is one of the directories or lies
 * below one.  Writable directories are readable too.  A symbolic link
 * whose target does not exist is refused: writing through it would create
 * a file wherever it points.
 *
 * The check happens when the API is called, before the file is opened.  A
 * sandboxed script has no way of its own to create links or directories,
 * so the time between check and open is not a window it can use; another
 * process of the same user that moves links around meanwhile is outside
 * what the sandbox promises (docs/lua-api.md, "The sandbox").
 *
 * js_output_check() is the other half: an existing file at an output path
 * is replaced (or, for results files, written into) only when it is a
 * joulesim file of the expected kind, or empty.  The sandbox applies it to
 * every output; the CLI to -o/--chrome/--out unless --force is given.
 *
 * Nothing here uses Lua: the binding (lua/sandbox.c) and the CLI both call
 * it.
 */
#ifndef LUA_CONFINE_H
#define LUA_CONFINE_H

#include <glib.h>

G_BEGIN_DECLS

typedef enum { JS_ACCESS_READ, JS_ACCESS_WRITE } JsAccess;

/* The kinds of file joulesim writes. */
typedef enum {
  JS_FILE_TRACE,     /* a native trace (HDF5, traces/native.h) */
  JS_FILE_RESULTS,   /* a results file (HDF5 with /results, io/results.h) */
  JS_FILE_TIMELINE,  /* a Chrome trace-event timeline (traces/timeline.h) */
  JS_FILE_GPU,       /* a GPU catalogue entry (models/gpufile.h) */
} JsFileKind;

#define JS_CONFINE_ERROR (js_confine_error_quark())
GQuark js_confine_error_quark(void);
typedef enum {
  JS_CONFINE_ERROR_DENIED,   /* outside the allowed directories */
  JS_CONFINE_ERROR_RESOLVE,  /* cannot be resolved (missing directory,
                                dangling link, bad name) */
  JS_CONFINE_ERROR_EXISTS,   /* an existing file that must not be replaced */
} JsConfineError;

typedef struct JsConfine JsConfine;

/* An empty set of rules: nothing may be read or written. */
JsConfine *js_confine_new(void);
void js_confine_free(JsConfine *c);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(JsConfine, js_confine_free)

/* Allows `access` below the directory `dir` (and, for JS_ACCESS_WRITE,
 * reading there too).  `dir` must exist and be a directory; `option` names
 * where it came from in errors ("--allow-write").  FALSE with
 * JS_CONFINE_ERROR_RESOLVE otherwise. */
gboolean js_confine_allow(JsConfine *c, JsAccess access, const char *dir,
                          const char *option, GError **error);

/* TRUE when `path` may be opened for `access`.  Otherwise FALSE with an
 * error naming the path as given and the rule: "sandbox: PATH is outside
 * the directories the sandbox may write (the current directory, DIR, ...);
 * --allow-write DIR allows one", the directories as the user named them.
 * It never names what PATH resolves to, and outside the allowed
 * directories a missing path reads like an existing one (else a script
 * could map the file system outside).  For
 * JS_ACCESS_WRITE, an existing regular file with more than one name (a
 * hard link) is refused too. */
gboolean js_confine_check(const JsConfine *c, const char *path,
                          JsAccess access, GError **error);

/* The canonical form of `path` as js_confine_check() judges it: realpath
 * of the file when it exists, else realpath of its directory plus its last
 * name.  Caller frees.  NULL with JS_CONFINE_ERROR_RESOLVE. */
char *js_confine_resolve(const char *path, GError **error);

/* TRUE when nothing is at `path`, or an empty regular file, or a joulesim
 * file of `kind` (probed by its own module: its HDF5 attributes or its
 * first bytes).  Otherwise FALSE with JS_CONFINE_ERROR_EXISTS naming the
 * path and what was expected; `hint` (may be NULL) is appended, e.g.
 * "--force replaces it". */
gboolean js_output_check(const char *path, JsFileKind kind, const char *hint,
                         GError **error);

/* "a joulesim trace", "a joulesim results file", ... */
const char *js_file_kind_name(JsFileKind kind);

G_END_DECLS

#endif
