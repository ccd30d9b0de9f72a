/* traces/native-private.h -- what the native trace reader (traces/native.c)
 * and writer (traces/native_write.c) share: the format's constants, its
 * HDF5 record types, errors and the checksum (traces/native_format.c).
 * Not part of the API (traces/native.h); the format itself is described
 * in traces/native_format.c.
 */
#ifndef TRACES_NATIVE_PRIVATE_H
#define TRACES_NATIVE_PRIVATE_H

#include "traces/native.h"

#include <hdf5.h>
#include <sys/types.h>


#define NATIVE_FORMAT "joulesim-trace"
#define NATIVE_MAX_RANKS (1u << 24)
/* The most microbatches a layout may have (the op record's 16 bits). */
#define NATIVE_MAX_MICROBATCHES 65535u
/* The user block holding the checksum record, and its first line. */
#define NATIVE_USERBLOCK 512
#define NATIVE_SEAL_MAGIC "joulesim-trace\n"
#define NATIVE_IO_CHUNK (1u << 20)
/* Ops per block when writing (scratch buffer with zeroed pad bytes). */
#define NATIVE_WRITE_BLOCK 65536u

/* Sets *error to "PATH: WHAT (HDF5: reason)", the reason read from the
 * current HDF5 error stack (call right after the failing HDF5 call).
 * Always returns FALSE. */
G_GNUC_PRINTF(4, 5)
gboolean nat_fail(GError **error, gint code, const char *path,
                  const char *fmt, ...);
/* A new variable-length UTF-8 string type (caller closes), or < 0. */
hid_t nat_vstr_type(void);
/* The SimOp record type, used both in memory and on disk. */
hid_t nat_op_type(void);
/* The SimOp record type of a shared program (/programs/<p>/ops, format
 * version 3): nat_op_type() plus the member `patch` (u8), which rank ops
 * do not store (theirs are resolved: patch 0). */
hid_t nat_program_op_type(void);
/* The SimShape record type, used both in memory and on disk. */
hid_t nat_shape_type(void);
/* CRC-32 of fd's bytes from `from` to the end; *len receives their count.
 * FALSE (errno set) on a read error. */
gboolean nat_crc(int fd, off_t from, guint32 *crc, guint64 *len);

#endif
