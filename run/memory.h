/* run/memory.h -- fail early, with an estimate, instead of being OOM-killed
 * (DESIGN section 10).
 *
 * Whatever is about to build something big (a generated or loaded
 * workload, the engine's replay state) estimates its bytes first and asks
 * js_memory_check() whether they fit under the limit: --max-memory when
 * given (less what this process already holds), else the memory available now (the smaller of /proc/meminfo's
 * MemAvailable and the cgroup's memory.max minus memory.current).  The
 * estimates are upper bounds within about 10% of the real allocations;
 * docs/architecture.md ("Memory limits") gives their formulas.
 */
#ifndef LUA_MEMORY_H
#define LUA_MEMORY_H

#include <glib.h>

G_BEGIN_DECLS

#define JS_MEMORY_ERROR (js_memory_error_quark())
GQuark js_memory_error_quark(void);
typedef enum {
  JS_MEMORY_ERROR_LIMIT, /* the estimate exceeds the limit */
  JS_MEMORY_ERROR_PARSE, /* a bad --max-memory value */
} JsMemoryError;

/* Parses "123", "512K", "4M", "16G", "1T" (powers of 1024; an optional
 * trailing "B" or "iB") into bytes.  Rejects 0, negatives, fractions of a
 * byte and overflow. */
gboolean js_memory_parse(const char *text, guint64 *bytes, GError **error);

/* Bytes available to this process now; G_MAXUINT64 when unknown. */
guint64 js_memory_available(void);

/* This process's resident bytes now (0 when unknown). */
guint64 js_memory_resident(void);

/* Bytes that may still be allocated: `max_memory` less this process's
 * resident memory when max_memory is non-zero, else
 * js_memory_available(). */
guint64 js_memory_limit(guint64 max_memory);

/* Fails with JS_MEMORY_ERROR_LIMIT when `need` bytes exceed the limit in
 * force.  `what` names the thing ("js.gpt: GPT-3 175B, 8,192 GPUs"); the
 * message gives the estimate, the limit and where the limit came from. */
gboolean js_memory_check(guint64 max_memory, guint64 need, const char *what,
                         GError **error);

/* "1.5 GB" style (decimal units, as the messages print them). */
char *js_memory_format(guint64 bytes);

G_END_DECLS

#endif
