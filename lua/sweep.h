/* lua/sweep.h -- js.sweep: parallel, resumable parameter sweeps that write
 * one HDF5 results row per point (the Lua function is registered by
 * jsl_register_sweep, lua/luautil.h; lua/sweep.c explains the design).
 *
 * This header gives the CLI the sweep's failure count, and tests the
 * canonical point identity and the worker wire format.
 */
#ifndef LUA_SWEEP_H
#define LUA_SWEEP_H

#include <glib.h>
#include "io/results.h"
#include "run/session.h"

G_BEGIN_DECLS

/* The number of points that failed in the js.sweep calls made with session
 * s since the last call, and forgets it (so call it once, after the script
 * has run).  cli/main.c exits with status 1 when it is not 0. */
guint js_sweep_take_failed(JsSession *s);

/* The canonical identity of a point (the `point_id` column): its values
 * sorted by name, as `name=value` joined by ','.  Integers in decimal,
 * floats in the shortest form that reads back to the same double (with
 * ".0" when it would look like an integer; nan, inf, -inf), booleans
 * true/false, strings in double quotes with \" \\ \n \t \r and \u00XX
 * escapes; a name that is not [A-Za-z_][A-Za-z0-9_.-]* is quoted like a
 * string.  Equal points give equal ids; different points (including 2 and
 * 2.0) different ones.  values (n, any order) are borrowed. */
char *js_sweep_point_id(const ResValue *values, guint n);

/* Messages between the parent and a worker, one per frame: a native
 * uint32 payload length, then the payload (native byte order: both ends
 * are the same binary on the same machine):
 *
 *   u8 kind ('P' point, 'R' row, 'E' error), u32 point index,
 *   u32 text length + text + NUL (point: its point_id; error: the
 *   message; row: empty), u32 value count, then per value:
 *   u8 type ('i' int64, 'f' float64, 'b' bool, 's' string),
 *   u32 name length + name + NUL, then the payload: 8 bytes (int64 or
 *   double), 1 byte (bool 0/1), or u32 length + bytes + NUL (string).
 *
 * Names and strings carry no NUL inside.  Frames longer than
 * JS_SWEEP_MAX_FRAME are refused. */
#define JS_SWEEP_MAX_FRAME (64u << 20)

typedef enum {
  JS_SWEEP_MSG_POINT = 'P',
  JS_SWEEP_MSG_ROW = 'R',
  JS_SWEEP_MSG_ERROR = 'E'
} JsSweepMsgKind;

typedef struct {
  JsSweepMsgKind kind;
  guint32 index;
  const char *text; /* borrowed from the decoded buffer */
  GArray *values;   /* ResValue; names and strings borrowed from the buffer */
} JsSweepMsg;

/* Encodes a message as one frame (length prefix included); values (n) and
 * text (may be NULL: empty) borrowed.  Returns a new array. */
GByteArray *js_sweep_encode(JsSweepMsgKind kind, guint32 index,
                            const char *text, const ResValue *values,
                            guint n);
/* Decodes one payload (without the length prefix) of len bytes into msg,
 * whose text and value strings then point into buf (keep buf alive).
 * Any malformed input is JS_SWEEP_ERROR_PROTOCOL naming the byte offset
 * and what was wrong; msg is then cleared.  Free msg with
 * js_sweep_msg_clear. */
gboolean js_sweep_decode(const guint8 *buf, gsize len, JsSweepMsg *msg,
                         GError **error);
void js_sweep_msg_clear(JsSweepMsg *msg);

#define JS_SWEEP_ERROR (js_sweep_error_quark())
GQuark js_sweep_error_quark(void);
typedef enum {
  JS_SWEEP_ERROR_PROTOCOL, /* a malformed message */
  JS_SWEEP_ERROR_WORKER    /* a worker could not be started or talked to */
} JsSweepError;

G_END_DECLS

#endif
