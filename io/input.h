/* io/input.h -- opening an input file: one name, resolved once, a regular
 * file or nothing.
 *
 *     IoInput in;
 *     if (!io_input_open(&in, path, "kineto: open", TRACE_ERROR,
 *                        TRACE_ERROR_IO, error))
 *       return NULL;                       (nothing to close)
 *     ... read in.fd, bounded by in.size ...
 *     ... or hand a library that wants a name in.proc_path ...
 *     io_input_close(&in);
 *
 * Why one helper.  Every reader of a file that a user (or a script, or a
 * shared notebook's data directory) names is a reader of hostile input
 * (docs/bad-input.md):
 *   - A FIFO, a character device or a socket blocks a plain open(2) or
 *     read(2) forever, and /dev/zero never ends.  The file is opened with
 *     O_NONBLOCK, so that even a FIFO without a writer opens at once, then
 *     fstat(2)ed, and anything but a regular file is refused, naming what it
 *     is ("not a regular file (a FIFO)").  O_NONBLOCK is cleared again
 *     afterwards: on a regular file it means nothing, but a reader should not
 *     have to think about it.
 *   - A name is resolved once.  The sandbox checks a name (run/confine.c);
 *     if the reader then opened the name again, or handed it to a library
 *     that interprets it (SQLite decodes "file:" URIs; HDF5 follows its own
 *     rules), what is read could differ from what was checked.  Readers read
 *     from in.fd; a library that needs a name gets in.proc_path,
 *     "/proc/self/fd/N", which names this very open file and nothing else
 *     (Linux's magic link: it reopens the same inode even if the name was
 *     renamed or replaced meanwhile).
 *   - in.size (st_size at open) bounds the reader's work before it
 *     allocates: a reader that reads the file whole checks it against its
 *     cap first (io_input_read_all), and a reader whose records expand checks
 *     its record counts against it.  A sparse 1 GB file has st_size 1 GB and
 *     is refused by size, not read.
 *
 * Fault injection (io/fault.h): the open is one FAULT_READ site, named by
 * the caller ("kineto: open"), and io_input_read_all's read is another; an
 * injected failure is EIO, its message ending in "(injected fault)".
 *
 * Errors are reported in the caller's GError domain and code (as
 * fault_try_alloc does), so that each reader keeps its own error codes:
 *   "PATH: STRERROR"                                    (open, fstat failed)
 *   "PATH: not a regular file (a FIFO); cannot read it" (FIFO, character or
 *        block device, socket, directory, other)
 *
 * Ownership: IoInput is the caller's (usually on its stack).  It owns the
 * fd; io_input_close() closes it and leaves fd -1, and is safe to call
 * twice and after a failed io_input_open().  A reader that wants a FILE *
 * or a gzFile takes the fd (io_input_steal_fd) and closes that itself.
 */
#ifndef JOULESIM_IO_INPUT_H
#define JOULESIM_IO_INPUT_H

#include <glib.h>
#include <stdio.h>

G_BEGIN_DECLS

typedef struct {
  int fd;             /* open O_RDONLY | O_CLOEXEC on the file; -1 when closed */
  gint64 size;        /* st_size at open: bytes in the file */
  char proc_path[32]; /* "/proc/self/fd/N": this open file, for libraries
                         that want a name ("" when closed) */
} IoInput;

/* Opens `path` for reading, once: open(2) with O_RDONLY | O_NONBLOCK |
 * O_CLOEXEC | O_NOCTTY (never blocks, not even on a FIFO), fstat(2), refuses
 * anything that is not a regular file, then clears O_NONBLOCK.  `site` names
 * the FAULT_READ fault-injection site ("kineto: open").  Returns TRUE with
 * `in` filled in, or FALSE with error (domain and code the caller's) and
 * in->fd == -1, nothing open. */
gboolean io_input_open(IoInput *in, const char *path, const char *site,
                       GQuark domain, gint code, GError **error);

/* Reads the whole of an open input into a new buffer (NUL-terminated; the
 * NUL is not counted in *length), refusing first, from in->size, a file of
 * more than `max_bytes` ("PATH: N bytes, over the limit of M MiB for
 * WHAT"), before allocating anything.  A file that grows while it is read
 * is cut at max_bytes + 1 bytes and refused the same way.  `site` names the
 * FAULT_READ site of the read ("profile: read").  Ownership: *contents is
 * the caller's (g_free) on success, NULL on failure.  The fd stays open;
 * reading starts at the fd's current offset. */
gboolean io_input_read_all(IoInput *in, const char *path, gsize max_bytes,
                           const char *what, const char *site, GQuark domain,
                           gint code, char **contents, gsize *length,
                           GError **error);

/* Hands the fd over to the caller (for fdopen, gzdopen): returns it and
 * leaves in->fd -1, so that io_input_close() does not close it. */
int io_input_steal_fd(IoInput *in);

/* A stdio stream ("rb") on the open file, which then owns the descriptor
 * (fclose closes it; `in` is left closed).  NULL with an error in
 * domain/code naming `path` when fdopen fails (then `in` is closed). */
FILE *io_input_fdopen(IoInput *in, const char *path, GQuark domain,
                      gint code, GError **error);

/* Closes the fd if it is open; in->fd becomes -1.  Safe to call twice and
 * after a failed io_input_open(). */
void io_input_close(IoInput *in);

/* A short word for the type of a file that is not a regular one, from its
 * st_mode: "a FIFO", "a directory", "a character device", "a block device",
 * "a socket", "a symbolic link" or "not a plain file". */
const char *io_input_kind(unsigned int st_mode);

G_END_DECLS

#endif
