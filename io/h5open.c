/* io/h5open.c -- see io/h5open.h.
 *
 * The walk runs twice in the child: first the structure (links, layouts,
 * filters, types, sizes), refusing at the first thing that is not allowed
 * and before any raw data is read; then the reading, which only happens
 * when the whole structure passed.  HDF5 errors during either pass are
 * cleared and the walk goes on with the next object, so the child touches
 * everything the caller's own reads can touch, whatever fails first.
 */
#include "io/h5open.h"
#include "io/fault.h"
#include "io/h5util.h"
#include "io/input.h"

#include <errno.h>
#include <glib-unix.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* deflate cannot expand more than about 1032:1, so a dataset that
 * declares more than this many times what it stores holds fill values it
 * never wrote (or lies about its size). */
#define H5U_MAX_EXPANSION 1100.0
/* ... beyond this many bytes: a small dataset created and never written
 * stores nothing (HDF5 allocates contiguous storage when it is first
 * written), and reading its fill values costs nothing.  The readers judge
 * such datasets in their own terms (the native loader's sparse-dataset
 * rule). */
#define H5U_SPARSE_SLACK (1024.0 * 1024.0)

/* The child's limits: CPU seconds for walking, plus one per this many
 * bytes of the file and of what its datasets declare (reading and
 * decompressing run at hundreds of MB/s; these rates are ten times
 * slower, for sanitizer builds and slow machines); its wall-clock alarm is
 * H5U_WALL_FACTOR times the CPU limit plus H5U_WALL_BASE_S, for loaded
 * machines. */
#define H5U_CPU_BASE_S 2
#define H5U_CPU_FILE_BYTES_PER_S (8u << 20)
#define H5U_CPU_DATA_BYTES_PER_S (32u << 20)
#define H5U_WALL_FACTOR 4
#define H5U_WALL_BASE_S 30

/* Set by the sanitizers' runtime when one is linked (the fuzzing and
 * sanitizer builds), absent otherwise. */
extern void __sanitizer_set_death_callback(void (*callback)(void))
  __attribute__((weak));

/* What the child's exit status means. */
enum { CHILD_OK = 0, CHILD_REFUSED = 3 };

/* ---- the walk (runs in the child) ---------------------------------------- */

typedef struct {
  guint64 file_size;
  guint64 declared;  /* bytes the datasets declare, in their file types */
  gboolean reading;  /* second pass */
  gboolean refused;
  char why[512];
  GArray *groups;    /* haddr_t of the groups entered (hard-link cycles) */
} H5uWalk;

static void walk_refuse(H5uWalk *w, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void walk_refuse(H5uWalk *w, const char *fmt, ...)
{
  if (w->refused)
    return;
  w->refused = TRUE;
  va_list ap;
  va_start(ap, fmt);
  g_vsnprintf(w->why, sizeof w->why, fmt, ap);
  va_end(ap);
}

/* An object's path for messages: printable ASCII kept, anything else '?',
 * at most 120 bytes (names come from the file). */
static char *walk_path(const char *parent, const char *name)
{
  GString *s = g_string_new(parent);
  if (s->len == 0 || s->str[s->len - 1] != '/')
    g_string_append_c(s, '/');
  for (const char *p = name; *p != '\0' && s->len < 120; p++)
    g_string_append_c(s, (*p >= 0x20 && *p < 0x7f) ? *p : '?');
  return g_string_free(s, FALSE);
}

/* TRUE for the datatypes joulesim's files and plain HDF5 traces use:
 * numbers, strings (fixed or variable length), enums, bit fields, and
 * compounds and arrays of them, at most 64 KiB an element. */
static gboolean type_ok(hid_t t, int depth)
{
  size_t size = H5Tget_size(t);
  if (size == 0 || size > 65536 || depth > 8)
    return FALSE;
  switch (H5Tget_class(t)) {
  case H5T_INTEGER:
  case H5T_FLOAT:
  case H5T_STRING:
  case H5T_BITFIELD:
  case H5T_ENUM:
    return TRUE;
  case H5T_COMPOUND: {
    int n = H5Tget_nmembers(t);
    if (n < 0 || n > 65536)
      return FALSE;
    for (int i = 0; i < n; i++) {
      g_auto(H5uHid) m = H5Tget_member_type(t, (unsigned)i);
      if (m < 0 || !type_ok(m, depth + 1))
        return FALSE;
    }
    return TRUE;
  }
  case H5T_ARRAY: {
    g_auto(H5uHid) b = H5Tget_super(t);
    return b >= 0 && type_ok(b, depth + 1);
  }
  default: /* references, opaque, variable-length sequences, time */
    return FALSE;
  }
}

/* The filters that libhdf5 carries built in; anything else would be a
 * plugin. */
static gboolean filter_ok(H5Z_filter_t id)
{
  return id == H5Z_FILTER_DEFLATE || id == H5Z_FILTER_SHUFFLE ||
         id == H5Z_FILTER_FLETCHER32 || id == H5Z_FILTER_NBIT ||
         id == H5Z_FILTER_SCALEOFFSET;
}

/* Elements in `space` (0 for a null space); -1 for a space that is not
 * simple, scalar or null. */
static hssize_t space_points(hid_t space)
{
  H5S_class_t c = H5Sget_simple_extent_type(space);
  if (c == H5S_NULL)
    return 0;
  if (c != H5S_SIMPLE && c != H5S_SCALAR)
    return -1;
  return H5Sget_simple_extent_npoints(space);
}

/* The structural checks of one dataset (first pass). */
static void walk_check_dataset(H5uWalk *w, hid_t d, const char *path)
{
  g_auto(H5uHid) dcpl = H5Dget_create_plist(d);
  H5D_layout_t layout = H5D_LAYOUT_ERROR;
  guint64 chunk_bytes = 0;
  g_auto(H5uHid) type = H5Dget_type(d);
  if (type >= 0 && !type_ok(type, 0)) {
    walk_refuse(w, "%s has a datatype joulesim does not read (a reference, "
                "opaque or variable-length sequence type, or elements over "
                "64 KiB)", path);
    return;
  }
  size_t tsize = type >= 0 ? H5Tget_size(type) : 0;
  if (dcpl >= 0) {
    layout = H5Pget_layout(dcpl);
    if (layout == H5D_VIRTUAL) {
      walk_refuse(w, "%s is a virtual dataset (its data lives in other "
                  "files)", path);
      return;
    }
    if (layout != H5D_COMPACT && layout != H5D_CONTIGUOUS &&
        layout != H5D_CHUNKED) {
      walk_refuse(w, "%s has a storage layout joulesim does not read", path);
      return;
    }
    if (H5Pget_external_count(dcpl) != 0) {
      walk_refuse(w, "%s keeps its data in external files (HDF5 external "
                  "storage), which joulesim never reads or writes", path);
      return;
    }
    int nf = H5Pget_nfilters(dcpl);
    for (int i = 0; i < nf; i++) {
      unsigned flags = 0;
      size_t nvals = 0;
      H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &nvals,
                                       NULL, 0, NULL, NULL);
      if (!filter_ok(id)) {
        walk_refuse(w, "%s uses HDF5 filter %d, which is not one of "
                    "libhdf5's built-in filters", path, (int)id);
        return;
      }
    }
    hsize_t cdims[H5S_MAX_RANK];
    int crank = layout == H5D_CHUNKED
                  ? H5Pget_chunk(dcpl, H5S_MAX_RANK, cdims) : 0;
    if (crank > 0) {
      chunk_bytes = tsize;
      for (int i = 0; i < crank && chunk_bytes < G_MAXUINT32; i++)
        chunk_bytes *= cdims[i];
    }
  }
  H5Eclear2(H5E_DEFAULT);
  g_auto(H5uHid) space = H5Dget_space(d);
  if (space < 0 || tsize == 0)
    return; /* an HDF5 error: the caller's own read meets it */
  hssize_t n = space_points(space);
  if (n < 0) {
    H5Eclear2(H5E_DEFAULT);
    return;
  }
  if ((guint64)n > G_MAXUINT64 / 4 / tsize) {
    walk_refuse(w, "%s declares %" G_GINT64_FORMAT " elements of %zu "
                "bytes, more than any file holds", path, (gint64)n, tsize);
    return;
  }
  guint64 declared = (guint64)n * tsize;
  guint64 stored = H5Dget_storage_size(d);
  if (stored > w->file_size) {
    walk_refuse(w, "%s claims %" G_GUINT64_FORMAT " bytes of storage in a "
                "file of %" G_GUINT64_FORMAT, path, stored, w->file_size);
    return;
  }
  if (layout == H5D_CONTIGUOUS) {
    haddr_t off = H5Dget_offset(d);
    H5Eclear2(H5E_DEFAULT);
    if (off != HADDR_UNDEF &&
        (off > w->file_size || declared > w->file_size - off)) {
      walk_refuse(w, "%s keeps its data past the end of the file", path);
      return;
    }
  }
  if ((double)declared > H5U_MAX_EXPANSION * (double)stored +
                           (double)chunk_bytes + H5U_SPARSE_SLACK) {
    walk_refuse(w, "%s declares %" G_GUINT64_FORMAT " bytes but stores %"
                G_GUINT64_FORMAT " (more than deflate can expand: a sparse "
                "or damaged dataset)", path, declared, stored);
    return;
  }
  w->declared = w->declared > G_MAXUINT64 - declared ? G_MAXUINT64
                                                     : w->declared + declared;
}

/* The child's allocator for variable-length data: a string or sequence
 * longer than the whole file is damage (its length is a field of the raw
 * data, which anyone can write), refused before it is allocated. */
static void *walk_vlen_alloc(size_t size, void *info)
{
  H5uWalk *w = info;
  if (size > w->file_size + 4096) {
    walk_refuse(w, "a variable-length string or sequence claims %zu bytes, "
                "more than the file holds", size);
    return NULL;
  }
  return malloc(size);
}

static void walk_vlen_free(void *p, void *info)
{
  free(p);
}

/* Reads `count` rows from `first` of dataset d with memory type mtype
 * into buf; TRUE when HDF5 read them. */
static gboolean walk_read_rows(hid_t d, hid_t mtype, hid_t space, int rank,
                               const hsize_t *dims, gboolean scalar,
                               hsize_t first, hsize_t count, hid_t dxpl,
                               void *buf)
{
  hsize_t start[H5S_MAX_RANK] = { 0 }, cnt[H5S_MAX_RANK];
  memcpy(cnt, dims, sizeof cnt);
  start[0] = first;
  cnt[0] = count;
  g_auto(H5uHid) fspace = H5Scopy(space);
  g_auto(H5uHid) mspace = H5Screate_simple(rank, cnt, NULL);
  gboolean ok =
    fspace >= 0 && mspace >= 0 &&
    (scalar || H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, cnt,
                                   NULL) >= 0) &&
    H5Dread(d, mtype, scalar ? H5S_ALL : mspace, scalar ? H5S_ALL : fspace,
            dxpl, buf) >= 0;
  if (ok)
    H5Dvlen_reclaim(mtype, mspace, dxpl, buf);
  H5Eclear2(H5E_DEFAULT);
  return ok;
}

/* What walk_read_range needs of one dataset. */
typedef struct {
  H5uWalk *w;
  hid_t d, mtype, space;
  int rank;
  const hsize_t *dims;
  gboolean scalar;
  hid_t dxpl;
  void *buf;
  int nmembers;
  hsize_t chunk_rows;
} H5uRows;

/* Reads rows [first, first + count) of a dataset; a range that fails is
 * halved until single rows fail, and a failing compound row is read member
 * by member, so every (row, member) the caller's reads could take alone is
 * converted on its own at a cost that grows with the rows that fail, not
 * with the rows.  A row none of whose members can be read lies in a chunk
 * whose bytes cannot be read (a torn chunk past the end the file records,
 * after a kill), and so do the rest of its chunk's rows: they are skipped,
 * since nothing unread is converted, here or in the caller.  Returns the
 * row after the last one covered. */
static hsize_t walk_read_range(const H5uRows *r, hsize_t first,
                               hsize_t count)
{
  if (r->w->refused ||
      walk_read_rows(r->d, r->mtype, r->space, r->rank, r->dims, r->scalar,
                     first, count, r->dxpl, r->buf))
    return first + count;
  if (count == 1) {
    gboolean any = FALSE;
    for (int m = 0; m < r->nmembers && !r->w->refused; m++) {
      g_auto(H5uHid) mt = H5Tget_member_type(r->mtype, (unsigned)m);
      g_autofree char *name = H5Tget_member_name(r->mtype, (unsigned)m);
      size_t size = mt >= 0 ? H5Tget_size(mt) : 0;
      g_auto(H5uHid) one = size > 0 && name != NULL
                             ? H5Tcreate(H5T_COMPOUND, size)
                             : H5I_INVALID_HID;
      if (one >= 0 && H5Tinsert(one, name, 0, mt) >= 0 &&
          walk_read_rows(r->d, one, r->space, r->rank, r->dims, r->scalar,
                         first, 1, r->dxpl, r->buf))
        any = TRUE;
      H5Eclear2(H5E_DEFAULT);
    }
    if (!any && r->chunk_rows > 1)
      return MIN((first / r->chunk_rows + 1) * r->chunk_rows, r->dims[0]);
    return first + 1;
  }
  hsize_t half = count / 2;
  hsize_t next = walk_read_range(r, first, half);
  if (next >= first + count)
    return next;
  next = MAX(next, first + half);
  return walk_read_range(r, next, first + count - next);
}

/* Reads all of dataset d (second pass), converting to native types, in
 * blocks of rows.  HDF5 stops a read at its first bad element, and the
 * caller's own reads may take one row, or one member of a compound, at a
 * time: so a block that fails is read again row by row, and a compound
 * row that fails member by member, until every (row, member) has been
 * converted on its own. */
static void walk_read_dataset(H5uWalk *w, hid_t d)
{
  g_auto(H5uHid) type = H5Dget_type(d);
  g_auto(H5uHid) mtype = type >= 0 ? H5Tget_native_type(type, H5T_DIR_ASCEND)
                                   : H5I_INVALID_HID;
  g_auto(H5uHid) space = H5Dget_space(d);
  g_auto(H5uHid) dxpl = H5Pcreate(H5P_DATASET_XFER);
  if (mtype < 0 || space < 0 || dxpl < 0 ||
      H5Pset_vlen_mem_manager(dxpl, walk_vlen_alloc, w, walk_vlen_free,
                              NULL) < 0)
    return;
  size_t msize = H5Tget_size(mtype);
  hssize_t n = space_points(space);
  if (msize == 0 || n <= 0)
    return;
  /* The conversion buffers, given once: libhdf5 1.10 otherwise allocates
   * and zeroes two of its default size (1 MiB) for every read, however
   * small, and the reads of a failing block are many small ones (under
   * AddressSanitizer, whose large allocations are fresh pages, a torn
   * chunk's 190 reads took the child past its CPU limit). */
  size_t conv = MAX(MAX((size_t)1 << 20, msize), H5Tget_size(type));
  g_autofree void *tconv = g_malloc0(conv);
  g_autofree void *bkg = g_malloc0(conv);
  if (H5Pset_buffer(dxpl, conv, tconv, bkg) < 0)
    return;
  int rank = H5Sget_simple_extent_ndims(space);
  hsize_t dims[H5S_MAX_RANK];
  if (rank < 0 || rank > H5S_MAX_RANK ||
      H5Sget_simple_extent_dims(space, dims, NULL) < 0)
    return;
  if (rank == 0) { /* scalar */
    rank = 1;
    dims[0] = 1;
  }
  guint64 row_points = (guint64)n / dims[0];
  guint64 row_bytes = row_points * msize;
  if (row_bytes > 16 * (guint64)H5U_BLOCK_BYTES)
    return; /* rows this wide are not read here, and joulesim's readers
               refuse such shapes */
  hsize_t block = MAX(1, H5U_BLOCK_BYTES / row_bytes);
  g_autofree void *buf = g_malloc(MIN(block, dims[0]) * row_bytes);
  gboolean scalar = H5Sget_simple_extent_type(space) == H5S_SCALAR;
  int nmembers = H5Tget_class(mtype) == H5T_COMPOUND
                   ? H5Tget_nmembers(mtype) : 0;
  /* Rows per chunk: a row none of whose members can be read lies in a
   * chunk whose bytes cannot be read (a torn last chunk past the end the
   * file records, after a kill), and so do the rest of its chunk's rows:
   * they are skipped, since nothing unread is converted, here or in the
   * caller (one failed read per row and member of a 1,000-row torn chunk
   * took the child past its CPU limit, tests/kill-loop.sh). */
  hsize_t chunk_rows = 1;
  g_auto(H5uHid) dcpl = H5Dget_create_plist(d);
  hsize_t cdims[H5S_MAX_RANK];
  if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED &&
      H5Pget_chunk(dcpl, H5S_MAX_RANK, cdims) > 0 && cdims[0] > 0)
    chunk_rows = cdims[0];
  H5Eclear2(H5E_DEFAULT);
  H5uRows rows = { w, d, mtype, space, rank, dims, scalar, dxpl, buf,
                   nmembers, chunk_rows };
  for (hsize_t first = 0; first < dims[0] && !w->refused;) {
    hsize_t count = MIN(block, dims[0] - first);
    first = walk_read_range(&rows, first, count);
  }
}

/* H5Aiterate2 callback: checks (first pass) or reads (second) one
 * attribute of the object. */
static herr_t walk_attr(hid_t loc, const char *name, const H5A_info_t *info,
                        void *data)
{
  H5uWalk *w = data;
  g_auto(H5uHid) a = H5Aopen(loc, name, H5P_DEFAULT);
  g_auto(H5uHid) type = a >= 0 ? H5Aget_type(a) : H5I_INVALID_HID;
  g_auto(H5uHid) space = a >= 0 ? H5Aget_space(a) : H5I_INVALID_HID;
  if (type < 0 || space < 0) {
    H5Eclear2(H5E_DEFAULT);
    return 0;
  }
  if (!w->reading) {
    if (!type_ok(type, 0)) {
      g_autofree char *p = walk_path("attribute ", name);
      walk_refuse(w, "%s has a datatype joulesim does not read", p);
      return 1;
    }
    return 0;
  }
  g_auto(H5uHid) mtype = H5Tget_native_type(type, H5T_DIR_ASCEND);
  hssize_t n = space_points(space);
  size_t msize = mtype >= 0 ? H5Tget_size(mtype) : 0;
  if (n > 0 && msize > 0 && (guint64)n * msize <= 16 * (guint64)H5U_BLOCK_BYTES) {
    g_autofree void *buf = g_malloc((gsize)n * msize);
    if (H5Aread(a, mtype, buf) >= 0)
      H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, buf);
  }
  H5Eclear2(H5E_DEFAULT);
  return 0;
}

static void walk_object(H5uWalk *w, hid_t o, const char *path, int depth);

typedef struct {
  H5uWalk *w;
  const char *path;
  int depth;
} H5uGroupCtx;

/* H5Literate callback: refuses a link that is not hard, walks the object
 * of one that is. */
static herr_t walk_link(hid_t g, const char *name, const H5L_info_t *info,
                        void *data)
{
  H5uGroupCtx *ctx = data;
  g_autofree char *path = walk_path(ctx->path, name);
  if (info->type != H5L_TYPE_HARD) {
    walk_refuse(ctx->w, "%s is %s, which joulesim does not follow", path,
                info->type == H5L_TYPE_SOFT       ? "a soft link"
                : info->type == H5L_TYPE_EXTERNAL ? "an external link "
                                                    "(to another file)"
                                                  : "a user-defined link");
    return 1;
  }
  g_auto(H5uHid) o = H5Oopen(g, name, H5P_DEFAULT);
  if (o < 0) {
    H5Eclear2(H5E_DEFAULT);
    return 0;
  }
  walk_object(ctx->w, o, path, ctx->depth + 1);
  return ctx->w->refused ? 1 : 0;
}

static void walk_object(H5uWalk *w, hid_t o, const char *path, int depth)
{
  hsize_t idx = 0;
  if (H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, walk_attr, w) < 0)
    H5Eclear2(H5E_DEFAULT);
  if (w->refused)
    return;
  switch (H5Iget_type(o)) {
  case H5I_GROUP: {
    if (depth > H5U_MAX_DEPTH) {
      walk_refuse(w, "%s: groups nest more than %d deep", path,
                  H5U_MAX_DEPTH);
      return;
    }
    H5O_info_t oi;
    if (H5Oget_info2(o, &oi, H5O_INFO_BASIC) < 0) {
      H5Eclear2(H5E_DEFAULT);
      return;
    }
    for (guint i = 0; i < w->groups->len; i++)
      if (g_array_index(w->groups, haddr_t, i) == oi.addr)
        return; /* entered already (a group linked twice) */
    g_array_append_val(w->groups, oi.addr);
    H5uGroupCtx ctx = { w, path, depth };
    hsize_t at = 0;
    if (H5Literate(o, H5_INDEX_NAME, H5_ITER_NATIVE, &at, walk_link, &ctx) <
        0)
      H5Eclear2(H5E_DEFAULT);
    return;
  }
  case H5I_DATASET:
    if (w->reading)
      walk_read_dataset(w, o);
    else
      walk_check_dataset(w, o, path);
    return;
  case H5I_DATATYPE:
    if (!w->reading && !type_ok(o, 0))
      walk_refuse(w, "%s is a datatype joulesim does not read", path);
    return;
  default:
    H5Eclear2(H5E_DEFAULT);
    return;
  }
}

/* One pass over the whole file from the root group. */
static void walk_file(H5uWalk *w, hid_t file)
{
  g_array_set_size(w->groups, 0);
  g_auto(H5uHid) root = H5Gopen2(file, "/", H5P_DEFAULT);
  if (root < 0) {
    H5Eclear2(H5E_DEFAULT);
    return;
  }
  walk_object(w, root, "/", 0);
}

/* Sets the soft CPU limit to `seconds` (the hard limit stays where it
 * was, or is set to it when lower). */
static void child_cpu_limit(guint64 seconds)
{
  struct rlimit rl;
  if (getrlimit(RLIMIT_CPU, &rl) != 0)
    return;
  rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < seconds
                  ? rl.rlim_max : (rlim_t)seconds;
  setrlimit(RLIMIT_CPU, &rl);
}

/* H5Literate callback of the rehearsal: grows every extendible dataset of
 * the group (and its subgroups) by one zeroed element, as an append
 * does. */
static herr_t rehearse_link(hid_t g, const char *name, const H5L_info_t *info,
                            void *data)
{
  int *depth = data;
  if (info->type != H5L_TYPE_HARD)
    return 0;
  g_auto(H5uHid) o = H5Oopen(g, name, H5P_DEFAULT);
  if (o < 0) {
    H5Eclear2(H5E_DEFAULT);
    return 0;
  }
  if (H5Iget_type(o) == H5I_GROUP && *depth < H5U_MAX_DEPTH) {
    (*depth)++;
    hsize_t at = 0;
    H5Literate(o, H5_INDEX_NAME, H5_ITER_NATIVE, &at, rehearse_link, depth);
    (*depth)--;
  } else if (H5Iget_type(o) == H5I_DATASET) {
    g_auto(H5uHid) space = H5Dget_space(o);
    g_auto(H5uHid) type = H5Dget_type(o);
    g_auto(H5uHid) mtype = type >= 0 ? H5Tget_native_type(type,
                                                          H5T_DIR_ASCEND)
                                     : H5I_INVALID_HID;
    hsize_t dims[H5S_MAX_RANK], max[H5S_MAX_RANK];
    int rank = space >= 0 ? H5Sget_simple_extent_dims(space, dims, max) : -1;
    size_t msize = mtype >= 0 ? H5Tget_size(mtype) : 0;
    if (rank == 1 && max[0] == H5S_UNLIMITED && msize > 0 &&
        msize <= 65536) {
      hsize_t grown = dims[0] + 1, one = 1, at = dims[0];
      g_autofree void *zero = g_malloc0(msize);
      if (H5Dset_extent(o, &grown) >= 0) {
        g_auto(H5uHid) fs = H5Dget_space(o);
        g_auto(H5uHid) ms = H5Screate_simple(1, &one, NULL);
        if (fs >= 0 && ms >= 0 &&
            H5Sselect_hyperslab(fs, H5S_SELECT_SET, &at, NULL, &one,
                                NULL) >= 0)
          H5Dwrite(o, mtype, ms, fs, H5P_DEFAULT, zero);
      }
    }
  }
  H5Eclear2(H5E_DEFAULT);
  return 0;
}

/* For a file to be opened for writing: does in memory what a writer does
 * (HDF5's core driver, nothing written back) -- one more row in every
 * extendible dataset, a new group with a dataset and an attribute, a
 * flush -- so that damage only writing reaches (free-space records, chunk
 * indexes, group heaps) kills the child too. */
static void child_rehearse(const char *path)
{
  g_auto(H5uHid) fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 20, 0) < 0)
    return;
  g_auto(H5uHid) file = H5Fopen(path, H5F_ACC_RDWR, fapl);
  if (file < 0)
    return;
  g_auto(H5uHid) root = H5Gopen2(file, "/", H5P_DEFAULT);
  if (root >= 0) {
    int depth = 0;
    hsize_t at = 0;
    H5Literate(root, H5_INDEX_NAME, H5_ITER_NATIVE, &at, rehearse_link,
               &depth);
  }
  H5Eclear2(H5E_DEFAULT);
  g_auto(H5uHid) g = H5Gcreate2(file, ".h5open-rehearsal", H5P_DEFAULT,
                                H5P_DEFAULT, H5P_DEFAULT);
  hsize_t n = 1, max = H5S_UNLIMITED;
  g_auto(H5uHid) space = H5Screate_simple(1, &n, &max);
  g_auto(H5uHid) dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (g >= 0 && space >= 0 && dcpl >= 0 && H5Pset_chunk(dcpl, 1, &n) >= 0) {
    g_auto(H5uHid) d = H5Dcreate2(g, "rows", H5T_NATIVE_INT64, space,
                                  H5P_DEFAULT, dcpl, H5P_DEFAULT);
    gint64 v = 0;
    if (d >= 0) {
      H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v);
      g_auto(H5uHid) s1 = H5Screate(H5S_SCALAR);
      g_auto(H5uHid) a = H5Acreate2(d, "note", H5T_NATIVE_INT64, s1,
                                    H5P_DEFAULT, H5P_DEFAULT);
      if (a >= 0)
        H5Awrite(a, H5T_NATIVE_INT64, &v);
    }
  }
  H5Fflush(file, H5F_SCOPE_GLOBAL);
  H5Eclear2(H5E_DEFAULT);
}

/* write(2) all of buf, or give up. */
static void write_all(int fd, const void *buf, gsize len)
{
  const char *p = buf;
  while (len > 0) {
    ssize_t k = write(fd, p, len);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return;
    p += k;
    len -= (gsize)k;
  }
}

/* The child's refusal: 'R' and the reason on fd `out`, then its exit. */
static G_GNUC_NORETURN void child_refuse(int out, const char *why)
{
  write_all(out, "R", 1);
  write_all(out, why, strlen(why));
  _exit(CHILD_REFUSED);
}

/* The child: walks the file and _exits with CHILD_OK or CHILD_REFUSED.
 * On fd `out` it writes 'R' and the reason when it refuses, or 'D' and
 * the 8 bytes of what the datasets declare once the structure passed (the
 * parent may stop it there: the data would not fit in memory), then
 * reads.  Nothing is written when the file did not open.  Never
 * returns. */
static G_GNUC_NORETURN void child_main(const char *path, guint64 size,
                                       gboolean writing, pid_t parent,
                                       int out)
{
  /* The parent is the only one waiting for the answer: the child dies
   * with it (a killed sweep leaves no process behind, tests/kill-loop.sh),
   * including when it died before this line. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent)
    _exit(CHILD_OK);
  /* Default actions for the signals the limits and the user send, and
   * nothing blocked: the parent's handlers (the sandbox's hard stop, a
   * sweep's interrupt) are not the child's business. */
  const int sigs[] = { SIGALRM, SIGXCPU, SIGINT, SIGTERM, SIGHUP, SIGPIPE,
                       SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP };
  for (guint i = 0; i < G_N_ELEMENTS(sigs); i++)
    signal(sigs[i], SIG_DFL);
  /* A sanitizer's report (in the fuzzing build) ends the child as its
   * death, without the fuzzer's handler saving the input as the parent's
   * finding; and a death writes no core file. */
  if (__sanitizer_set_death_callback != NULL)
    __sanitizer_set_death_callback(NULL);
  struct rlimit no_core = { 0, 0 };
  setrlimit(RLIMIT_CORE, &no_core);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  /* What libhdf5 or the C library say while dying on a damaged file
   * ("malloc(): unaligned tcache chunk") is not the user's output: the
   * parent reports the death in its own words. */
  int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null_fd >= 0)
    dup2(null_fd, STDERR_FILENO);
  guint64 cpu_s = H5U_CPU_BASE_S + size / H5U_CPU_FILE_BYTES_PER_S;
  child_cpu_limit(cpu_s);
  alarm((unsigned)MIN(cpu_s * H5U_WALL_FACTOR + H5U_WALL_BASE_S, 86400));
  fault_suspend();
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  H5PLset_loading_state(0);

  /* One attempt at each metadata read: HDF5 retries a read whose
   * checksum fails up to 100 times in files that allow concurrent readers
   * (for a reader racing a writer); on a file at rest every attempt reads
   * the same bytes, and a torn row took the child seconds of retries. */
  hid_t fapl = H5Pcopy(H5P_FILE_ACCESS_DEFAULT);
  if (fapl >= 0)
    H5Pset_metadata_read_attempts(fapl, 1);
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl >= 0 ? fapl : H5P_DEFAULT);
  if (file < 0)
    _exit(CHILD_OK); /* not HDF5, or damaged: the caller's open says so */
  H5uWalk w = { .file_size = size, .groups = g_array_new(FALSE, FALSE,
                                                          sizeof(haddr_t)) };
  walk_file(&w, file);
  if (w.refused) {
    child_refuse(out, w.why);
  }
  char msg[1 + sizeof w.declared];
  msg[0] = 'D';
  memcpy(msg + 1, &w.declared, sizeof w.declared);
  write_all(out, msg, sizeof msg);
  /* The structure passed: reading may take as long as the data needs. */
  guint64 read_s = cpu_s + w.declared / H5U_CPU_DATA_BYTES_PER_S;
  child_cpu_limit(read_s);
  alarm((unsigned)MIN(read_s * H5U_WALL_FACTOR + H5U_WALL_BASE_S, 86400));
  w.reading = TRUE;
  walk_file(&w, file);
  if (w.refused) { /* a variable-length length past the file */
    child_refuse(out, w.why);
  }
  if (writing) {
    H5Fclose(file);
    child_rehearse(path);
  }
  _exit(CHILD_OK);
}

/* ---- the parent ---------------------------------------------------------- */

/* A file that passed, as stat saw it. */
typedef struct {
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime, ctime;
  gboolean writing; /* checked for writing too (part of the key) */
  guint64 declared; /* what its datasets declare (not part of the key) */
} H5uSeen;

#define H5U_SEEN_MAX 32
static H5uSeen seen[H5U_SEEN_MAX];
static guint seen_len, seen_next;
G_LOCK_DEFINE_STATIC(seen);

static H5uSeen seen_key(const struct stat *st)
{
  H5uSeen k;
  memset(&k, 0, sizeof k);
  k.dev = st->st_dev;
  k.ino = st->st_ino;
  k.size = st->st_size;
  k.mtime = st->st_mtim;
  k.ctime = st->st_ctim;
  return k;
}

/* TRUE when the file k was seen to pass; sets k->declared. */
static gboolean seen_has(H5uSeen *k)
{
  gboolean found = FALSE;
  G_LOCK(seen);
  for (guint i = 0; i < seen_len && !found; i++)
    if (memcmp(&seen[i], k, offsetof(H5uSeen, writing)) == 0 &&
        (seen[i].writing || !k->writing)) {
      k->declared = seen[i].declared;
      found = TRUE;
    }
  G_UNLOCK(seen);
  return found;
}

static void seen_add(const H5uSeen *k)
{
  G_LOCK(seen);
  seen[seen_next] = *k;
  seen_next = (seen_next + 1) % H5U_SEEN_MAX;
  seen_len = MIN(seen_len + 1, H5U_SEEN_MAX);
  G_UNLOCK(seen);
}

/* The file's identity, through the one door for inputs (io/input.h: a
 * FIFO or device at `path` is refused at once, never waited on). */
static gboolean stat_regular(const char *path, struct stat *st, GQuark domain,
                             gint code, GError **error)
{
  IoInput in;
  if (!io_input_open(&in, path, "hdf5: open", domain, code, error))
    return FALSE;
  int rc = fstat(in.fd, st);
  int e = errno;
  io_input_close(&in);
  if (rc != 0) {
    g_set_error(error, domain, code, "%s: cannot open it: %s", path,
                g_strerror(e));
    return FALSE;
  }
  return TRUE;
}

/* The refusal of a file that declares more than may be allocated. */
static gboolean declared_too_much(const char *path, guint64 declared,
                                  guint64 max_declared, GQuark domain,
                                  gint code, GError **error)
{
  g_set_error(error, domain, code, "%s: reading it needs about %.1f MB of "
              "memory (what its datasets declare), more than the %.1f MB "
              "left (--max-memory, or the memory available)", path,
              (double)declared / 1e6, (double)max_declared / 1e6);
  return FALSE;
}

/* Reads from fd until `want` bytes are in buf (or EOF or an error);
 * returns how many arrived. */
static gsize read_upto(int fd, char *buf, gsize want)
{
  gsize len = 0;
  while (len < want) {
    ssize_t k = read(fd, buf + len, want - len);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      break;
    len += (gsize)k;
  }
  return len;
}

/* h5u_check(), with the file's identity as it was checked in *st, and
 * refusing a file whose datasets declare more than max_declared bytes. */
static gboolean check_file(const char *path, struct stat *st,
                           gboolean writing, guint64 max_declared,
                           GQuark domain, gint code, GError **error)
{
  g_return_val_if_fail(path != NULL, FALSE);
  if (!stat_regular(path, st, domain, code, error))
    return FALSE;
  H5uSeen key = seen_key(st);
  key.writing = writing;
  if (seen_has(&key))
    return key.declared <= max_declared ||
           declared_too_much(path, key.declared, max_declared, domain, code,
                             error);
  int fds[2];
  GError *perr = NULL;
  if (!g_unix_open_pipe(fds, FD_CLOEXEC, &perr)) {
    g_set_error(error, domain, code, "%s: cannot check the HDF5 file: %s",
                path, perr->message);
    g_error_free(perr);
    return FALSE;
  }
  pid_t self = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(fds[0]);
    close(fds[1]);
    g_set_error(error, domain, code, "%s: cannot check the HDF5 file: "
                "fork: %s", path, g_strerror(e));
    return FALSE;
  }
  if (pid == 0) {
    close(fds[0]);
    child_main(path, (guint64)st->st_size, writing, self, fds[1]);
  }
  close(fds[1]);
  char msg[600];
  gsize len = read_upto(fds[0], msg, 1);
  guint64 declared = 0;
  gboolean too_much = FALSE;
  if (len == 1 && msg[0] == 'D' &&
      read_upto(fds[0], msg + 1, sizeof declared) == sizeof declared) {
    memcpy(&declared, msg + 1, sizeof declared);
    too_much = declared > max_declared;
    if (too_much)
      kill(pid, SIGKILL); /* no need to read what will not be loaded */
    else
      len = read_upto(fds[0], msg, 1); /* EOF, or a refusal while reading */
  }
  if (len == 1 && msg[0] == 'R') {
    len = read_upto(fds[0], msg, sizeof msg - 1);
    msg[len] = '\0';
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (too_much)
    return declared_too_much(path, declared, max_declared, domain, code,
                             error);
  if (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_OK) {
    key.declared = declared; /* 0 when it did not open as HDF5 */
    seen_add(&key);
    return TRUE;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_REFUSED)
    g_set_error(error, domain, code, "%s: refused: %s", path, msg);
  else if (WIFSIGNALED(status) &&
           (WTERMSIG(status) == SIGXCPU || WTERMSIG(status) == SIGALRM ||
            WTERMSIG(status) == SIGKILL))
    g_set_error(error, domain, code, "%s: refused: libhdf5 did not finish "
                "reading it in the time its size allows (%s: a damaged or "
                "hostile HDF5 file)", path,
                WTERMSIG(status) == SIGXCPU   ? "its CPU limit"
                : WTERMSIG(status) == SIGALRM ? "its wall-clock limit"
                                              : "killed");
  else if (WIFSIGNALED(status))
    g_set_error(error, domain, code, "%s: refused: libhdf5 crashed reading "
                "it (signal %d: a damaged or hostile HDF5 file)", path,
                WTERMSIG(status));
  else
    g_set_error(error, domain, code, "%s: refused: libhdf5 failed reading "
                "it (exit status %d: a damaged or hostile HDF5 file)", path,
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return FALSE;
}

gboolean h5u_check(const char *path, GQuark domain, gint code,
                   GError **error)
{
  struct stat st;
  return check_file(path, &st, FALSE, G_MAXUINT64, domain, code, error);
}

hid_t h5u_open(const char *path, unsigned flags, guint64 max_declared,
               GQuark domain, gint code, GError **error)
{
  struct stat st;
  if (!check_file(path, &st, (flags & H5F_ACC_RDWR) != 0, max_declared,
                  domain, code, error))
    return H5I_INVALID_HID;
  H5PLset_loading_state(0); /* never a plugin (see the top of h5open.h) */
  hid_t file = H5Fopen(path, flags, H5P_DEFAULT);
  if (file < 0)
    return file;
  /* The file opened must be the one checked: another name put in its
   * place meanwhile is refused, not read. */
  void *handle = NULL;
  struct stat now;
  if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) >= 0 && handle != NULL &&
      fstat(*(int *)handle, &now) == 0 &&
      (now.st_dev != st.st_dev || now.st_ino != st.st_ino)) {
    h5u_hid_close(file);
    g_set_error(error, domain, code, "%s: refused: the file was replaced "
                "while it was being checked", path);
    return H5I_INVALID_HID;
  }
  H5Eclear2(H5E_DEFAULT);
  return file;
}

void h5u_trust(const char *path)
{
  struct stat st;
  if (path == NULL || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
    return;
  H5uSeen key = seen_key(&st);
  key.writing = TRUE;
  key.declared = 0;
  seen_add(&key);
}
