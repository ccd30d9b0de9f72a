/* run/sweep_wire.c -- the messages between a sweep's parent and its
 * workers (and, in MPI builds, between ranks: run/sweep_mpi.c), and
 * reading and writing them as frames on a socket.
 *
 * One message per frame: a native uint32 payload length, then the payload
 * (native byte order: both ends are the same binary on the same machine):
 *
 *   u8 kind ('P' point, 'R' row, 'E' error), u32 point index,
 *   u32 text length + text + NUL (point: its point_id; error: the
 *   message; row: empty), u32 value count, then per value:
 *   u8 type ('i' int64, 'f' float64, 'b' bool, 's' string),
 *   u32 name length + name + NUL, then the payload: 8 bytes (int64 or
 *   double), 1 byte (bool 0/1), or u32 length + bytes + NUL (string).
 *
 * Names and strings carry no NUL inside.  Frames longer than
 * JS_SWEEP_MAX_FRAME are refused.  The decoder trusts nothing: every
 * length is checked against the bytes left, and any malformed input is a
 * JS_SWEEP_ERROR_PROTOCOL error naming the byte offset (tests/test-sweep.c
 * cuts and corrupts frames).
 */
#include "run/sweep-private.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef MSG_NOSIGNAL /* not Linux: a worker that died may raise SIGPIPE */
#define MSG_NOSIGNAL 0
#endif

static void put_u32(GByteArray *b, guint32 v)
{
  g_byte_array_append(b, (const guint8 *)&v, sizeof v);
}

static void put_str(GByteArray *b, const char *s)
{
  gsize n = strlen(s);
  g_assert(n <= G_MAXUINT32);
  put_u32(b, (guint32)n);
  g_byte_array_append(b, (const guint8 *)s, (guint)n + 1);
}

GByteArray *js_sweep_encode(JsSweepMsgKind kind, guint32 index,
                            const char *text, const ResValue *values,
                            guint n)
{
  g_return_val_if_fail(values != NULL || n == 0, NULL);
  GByteArray *b = g_byte_array_new();
  put_u32(b, 0); /* length, patched below */
  guint8 k = (guint8)kind;
  g_byte_array_append(b, &k, 1);
  put_u32(b, index);
  put_str(b, text != NULL ? text : "");
  put_u32(b, n);
  for (guint i = 0; i < n; i++) {
    const ResValue *v = &values[i];
    guint8 tag = v->type == RES_INT     ? 'i'
                 : v->type == RES_FLOAT ? 'f'
                 : v->type == RES_BOOL  ? 'b'
                                        : 's';
    g_byte_array_append(b, &tag, 1);
    put_str(b, v->name);
    switch (v->type) {
    case RES_INT: g_byte_array_append(b, (const guint8 *)&v->i, 8); break;
    case RES_FLOAT: g_byte_array_append(b, (const guint8 *)&v->f, 8); break;
    case RES_BOOL: {
      guint8 x = v->i != 0;
      g_byte_array_append(b, &x, 1);
      break;
    }
    case RES_STRING: put_str(b, v->s != NULL ? v->s : ""); break;
    }
  }
  guint32 len = b->len - 4;
  memcpy(b->data, &len, sizeof len);
  return b;
}

typedef struct {
  const guint8 *buf;
  gsize len, pos;
  GError **error;
} Reader;

static gboolean rd_fail(Reader *r, const char *what)
{
  g_set_error(r->error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_PROTOCOL,
              "malformed sweep message at byte %" G_GSIZE_FORMAT " of %"
              G_GSIZE_FORMAT ": %s",
              r->pos, r->len, what);
  return FALSE;
}

static gboolean rd_bytes(Reader *r, void *out, gsize n, const char *what)
{
  if (r->len - r->pos < n)
    return rd_fail(r, what);
  memcpy(out, r->buf + r->pos, n);
  r->pos += n;
  return TRUE;
}

/* A length-prefixed, NUL-terminated string without inner NULs, borrowed
 * from the buffer. */
static gboolean rd_str(Reader *r, const char **out, const char *what)
{
  guint32 n = 0;
  if (!rd_bytes(r, &n, 4, what))
    return FALSE;
  if (r->len - r->pos < (gsize)n + 1)
    return rd_fail(r, what);
  const char *s = (const char *)r->buf + r->pos;
  if (s[n] != '\0' || memchr(s, '\0', n) != NULL)
    return rd_fail(r, what);
  *out = s;
  r->pos += (gsize)n + 1;
  return TRUE;
}

void js_sweep_msg_clear(JsSweepMsg *msg)
{
  if (msg->values != NULL)
    g_array_unref(msg->values);
  memset(msg, 0, sizeof *msg);
}

gboolean js_sweep_decode(const guint8 *buf, gsize len, JsSweepMsg *msg,
                         GError **error)
{
  g_return_val_if_fail(buf != NULL || len == 0, FALSE);
  g_return_val_if_fail(msg != NULL, FALSE);
  memset(msg, 0, sizeof *msg);
  Reader r = { buf, len, 0, error };
  guint8 kind = 0;
  guint32 n = 0;
  if (!rd_bytes(&r, &kind, 1, "no message kind"))
    return FALSE;
  if (kind != JS_SWEEP_MSG_POINT && kind != JS_SWEEP_MSG_ROW &&
      kind != JS_SWEEP_MSG_ERROR && kind != JS_SWEEP_MSG_UNFIT) {
    r.pos--;
    return rd_fail(&r, "unknown message kind");
  }
  msg->kind = (JsSweepMsgKind)kind;
  if (!rd_bytes(&r, &msg->index, 4, "truncated point index") ||
      !rd_str(&r, &msg->text, "bad text") ||
      !rd_bytes(&r, &n, 4, "truncated value count"))
    goto fail;
  /* Each value takes at least 8 bytes (a bool with a one-letter name):
   * bounds the allocation. */
  if (n > (len - r.pos) / 8) {
    rd_fail(&r, "value count larger than the message");
    goto fail;
  }
  msg->values = g_array_sized_new(FALSE, TRUE, sizeof(ResValue), n);
  for (guint32 i = 0; i < n; i++) {
    ResValue v = { 0 };
    guint8 tag = 0;
    if (!rd_bytes(&r, &tag, 1, "truncated value type") ||
        !rd_str(&r, &v.name, "bad value name"))
      goto fail;
    if (v.name[0] == '\0') {
      rd_fail(&r, "empty value name");
      goto fail;
    }
    gboolean ok = TRUE;
    switch (tag) {
    case 'i':
      v.type = RES_INT;
      ok = rd_bytes(&r, &v.i, 8, "truncated integer");
      break;
    case 'f':
      v.type = RES_FLOAT;
      ok = rd_bytes(&r, &v.f, 8, "truncated float");
      break;
    case 'b': {
      guint8 x = 0;
      v.type = RES_BOOL;
      ok = rd_bytes(&r, &x, 1, "truncated boolean");
      if (ok && x > 1)
        ok = rd_fail(&r, "boolean not 0 or 1");
      v.i = x;
      break;
    }
    case 's':
      v.type = RES_STRING;
      ok = rd_str(&r, &v.s, "bad string value");
      break;
    default:
      ok = rd_fail(&r, "unknown value type");
    }
    if (!ok)
      goto fail;
    g_array_append_val(msg->values, v);
  }
  if (r.pos != len) {
    rd_fail(&r, "trailing bytes");
    goto fail;
  }
  return TRUE;

fail:
  js_sweep_msg_clear(msg);
  return FALSE;
}

/* Reads exactly n bytes; 1 done, 0 EOF before the first byte, -1 error
 * (errno set; a partial read is EPIPE). */
static int read_full(int fd, void *buf, gsize n)
{
  gsize got = 0;
  while (got < n) {
    ssize_t k = read(fd, (guint8 *)buf + got, n - got);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0)
      return -1;
    if (k == 0) {
      if (got == 0)
        return 0;
      errno = EPIPE;
      return -1;
    }
    got += (gsize)k;
  }
  return 1;
}

/* Writes all of buf to a socket without SIGPIPE; FALSE with errno set. */
gboolean sweep_send_full(int fd, const guint8 *buf, gsize n)
{
  gsize done = 0;
  while (done < n) {
    ssize_t k = send(fd, buf + done, n - done, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0)
      return FALSE;
    done += (gsize)k;
  }
  return TRUE;
}

/* Reads one frame's payload: a new array, or NULL at EOF (*eof set) or on
 * an error (error set). */
GByteArray *sweep_read_frame(int fd, gboolean *eof, GError **error)
{
  *eof = FALSE;
  guint32 len = 0;
  int rc = read_full(fd, &len, sizeof len);
  if (rc == 0) {
    *eof = TRUE;
    return NULL;
  }
  if (rc < 0) {
    int e = errno;
    g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_WORKER,
                "reading from a sweep process: %s", g_strerror(e));
    return NULL;
  }
  if (len > JS_SWEEP_MAX_FRAME) {
    g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_PROTOCOL,
                "sweep message of %u bytes is larger than the %u allowed",
                len, JS_SWEEP_MAX_FRAME);
    return NULL;
  }
  GByteArray *b = g_byte_array_sized_new(len);
  g_byte_array_set_size(b, len);
  if (len > 0 && read_full(fd, b->data, len) != 1) {
    int e = errno ? errno : EPIPE;
    g_byte_array_unref(b);
    g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_WORKER,
                "reading from a sweep process: %s", g_strerror(e));
    return NULL;
  }
  return b;
}
