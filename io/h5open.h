/* io/h5open.h -- the one door through which joulesim opens an HDF5 file it
 * did not create in the same call: results files (read back, appended to,
 * rewritten, probed) and native traces (loaded, probed).
 *
 * libhdf5 trusts the files it opens.  A file from someone else can make it
 * read or write other files (external storage, external links), run a
 * plugin (user-defined filters), or, with one damaged byte, crash or loop
 * inside the library (docs/trace-files.md, "Hostile and damaged files").
 * So before joulesim opens a file that already exists, h5u_open() has a
 * forked child open it read-only and walk all of it:
 *
 *   - every link must be a hard link (no soft, external or user-defined
 *     links), every object a group, a dataset or a named datatype, groups
 *     at most H5U_MAX_DEPTH deep;
 *   - every dataset's layout must be compact, contiguous or chunked (not
 *     virtual), with no external storage, and only HDF5's built-in
 *     filters (deflate, shuffle, Fletcher-32, N-bit, scale-offset);
 *     plugins are never loaded (H5PLset_loading_state(0));
 *   - datatypes are numbers, strings, enums, bit fields and compounds or
 *     arrays of them (no references, opaque or non-string variable-length
 *     types);
 *   - a dataset may not claim storage the file does not hold (contiguous
 *     data past the end of the file, more stored bytes than the file has)
 *     nor declare more than deflate's limit of 1100 times what it stores
 *     plus one chunk and 1 MiB;
 *   - then every dataset and every attribute is read in full, in blocks
 *     of at most H5U_BLOCK_BYTES, converted to native types (so variable-
 *     length strings are fetched from the global heap) -- everything the
 *     process's own reading can touch, which joulesim then does on the
 *     same bytes;
 *   - for a file to be opened for writing, a rehearsal of writing in
 *     memory (HDF5's core driver, nothing written back): one more zeroed
 *     element in every extendible dataset, a new group holding a chunked
 *     dataset with an attribute, a flush -- the metadata only writers
 *     touch (free space, chunk indexes, group heaps).
 *
 * The child runs under a CPU limit proportional to the file's size and
 * what it declares, and a wall-clock alarm.  When it dies of a signal, runs
 * out of time or reports a refusal, the file is refused with an error
 * naming it and what was wrong (or that libhdf5 could not survive reading
 * it); the process itself never gives the file to libhdf5.  HDF5 errors in
 * the child (a truncated or torn file, an unreadable chunk) are not a
 * refusal: the caller's own open and reads meet them again and report them
 * in their own words.  A file that passed is remembered by device, inode,
 * size, modification and change times, so reopening an unchanged file does
 * not walk it again.
 *
 * The child never writes: the file is opened read-only, and the child ends
 * with _exit(), so HDF5's exit handler never flushes what the parent has
 * open.  Fault injection (io/fault.h) is suspended in it.
 */
#ifndef IO_H5OPEN_H
#define IO_H5OPEN_H

#include <glib.h>
#include <hdf5.h>

G_BEGIN_DECLS

/* How deep groups may nest, and the largest block the child reads at once. */
#define H5U_MAX_DEPTH 32
#define H5U_BLOCK_BYTES (4u << 20)

/* Checks that the existing regular file at `path` is safe to give to
 * libhdf5 (see above).  TRUE when it is, or when it is not an HDF5 file at
 * all (the caller's open says so); FALSE with an error in `domain`/`code`
 * whose message starts with `path` and says what was refused.  Never
 * blocks on a FIFO or device: anything but a regular file is refused. */
gboolean h5u_check(const char *path, GQuark domain, gint code,
                   GError **error);

/* h5u_check() then H5Fopen(path, flags, H5P_DEFAULT) (flags
 * H5F_ACC_RDONLY or H5F_ACC_RDWR), and the file must be the one checked
 * (same device and inode).  A file whose datasets declare, in their file
 * types, more than `max_declared` bytes is refused before the child reads
 * them: loaders pass the memory they may use (run/memory.h), since reading
 * all of a file takes about what it declares (G_MAXUINT64: no bound).
 * Returns the file (caller closes) or a negative id: with error set when
 * the check refused the file, and with error unset and HDF5's error stack
 * holding the reason when H5Fopen failed (so the caller words it, e.g.
 * with h5u_error_reason()).  Call under h5u_quiet(). */
hid_t h5u_open(const char *path, unsigned flags, guint64 max_declared,
               GQuark domain, gint code, GError **error);

/* Remembers the file at `path`, as it is now, as one that passed for
 * reading and writing: for a file this process has just written and
 * closed (io/results_table.c), which it would otherwise walk again at its
 * next open because every write changes its times.  What it declares is
 * taken as 0 (a results file, never given to a loader with a memory
 * bound). */
void h5u_trust(const char *path);

G_END_DECLS

#endif
