/* tests/fuzz/fuzz-native.c -- libFuzzer target: native trace files
 * (traces/native.c) through trace_native_load().
 *
 * The input does not become the HDF5 file's bytes (HDF5's own parser is
 * not ours to fuzz, and the loader's CRC record refuses damaged files
 * before HDF5 sees them).  It becomes the CONTENT of a file with the native
 * layout, written with the HDF5 API: the root attributes (format,
 * format_version, n_ranks, tp, pp, dp, microbatches, tokens_per_iteration,
 * schedule, ref_gpu), /strings, /shapes, /groups/{offsets,ranks}, one
 * /ranks/<r> group per rank (stage, ops, stream_off) and /provenance --
 * every value from the input, so indices, counts, offsets, enums and
 * strings take any value the loader must judge.
 *
 *   byte 0 flags: bit 0 seal the file (512-byte user block with the CRC
 *          record, as trace_native_save writes), bit 1 damage the record
 *          (CRC or length off by one), bit 2 a fuzzed `format` string,
 *          bit 3 a fuzzed format_version, bit 4 a fuzzed n_ranks (else
 *          the number of rank groups written), bit 5 fuzzed group offsets
 *          (else consistent ones), bit 6 fuzzed op.stream fields (else the
 *          stream the op is stored in), bit 7 on success, save the
 *          workload with trace_native_save and load it again (round trip)
 *   then   counts and records, each field read from the input (tests/fuzz/
 *          fuzz.h: short input reads as zeros); a bit of the optional-
 *          attributes byte makes rank 0's ops a sparse dataset: an extent
 *          of 2^k records (k < 33) with nothing written, which HDF5 reads
 *          as fill values -- a small file that declares a huge array;
 *          another (bit 3) makes it format version 3 with shared
 *          programs: /programs/<k> (ops with fuzzed patch bytes) and, per
 *          rank, a byte choosing its own ops or a program index and peer
 *          deltas (peer_delta[0] fuzzed, a short peer_delta, or a program
 *          and own ops both, to reach every refusal)
 *
 * Checks: success with a workload that passes sim_workload_validate, or
 * a TRACE_NATIVE_ERROR naming the file; with bit 7, the saved and
 * reloaded workload equals the loaded one, shared programs and all (the
 * same ranks run programs, with the same deltas, and as many ops are
 * stored).
 */
#include "tests/fuzz/fuzz.h"
#include "traces/info.h"
#include "traces/native.h"
#include "io/h5util.h"

#include <hdf5.h>
#include <stddef.h>
#include <zlib.h>

#define NATIVE_MAX_RANKS_WRITTEN 4
#define NATIVE_MAX_OPS 24

static hid_t nf_vstr(void)
{
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}

static void nf_attr(hid_t loc, const char *name, hid_t type, const void *v)
{
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
  FUZZ_CHECK(a >= 0 && H5Awrite(a, type, v) >= 0, "attribute %s", name);
  H5Aclose(a);
  H5Sclose(sp);
}

static void nf_attr_str(hid_t loc, const char *name, const char *s)
{
  hid_t t = nf_vstr();
  nf_attr(loc, name, t, &s);
  H5Tclose(t);
}

/* A provenance attribute: names come from the input, and HDF5 refuses
 * some (".", names with '/'); those are just not written. */
static void nf_attr_str_try(hid_t loc, const char *name, const char *s)
{
  hid_t t = nf_vstr();
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
  if (a >= 0) {
    H5Awrite(a, t, &s);
    H5Aclose(a);
  }
  H5Sclose(sp);
  H5Tclose(t);
}

static void nf_dset(hid_t loc, const char *name, hid_t type, hsize_t n,
                    const void *buf)
{
  hsize_t dims[1] = {n};
  hid_t sp = H5Screate_simple(1, dims, NULL);
  hid_t d = H5Dcreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT,
                       H5P_DEFAULT);
  FUZZ_CHECK(d >= 0, "dataset %s", name);
  if (n > 0 && buf != NULL)
    FUZZ_CHECK(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0,
               "writing dataset %s", name);
  H5Dclose(d);
  H5Sclose(sp);
}

static hid_t nf_op_type(void)
{
  hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(SimOp));
#define M(name, field, type) H5Tinsert(t, name, offsetof(SimOp, field), type)
  M("ref_ns", ref_ns, H5T_NATIVE_INT64);
  M("shape", shape, H5T_NATIVE_UINT32);
  M("name", name, H5T_NATIVE_UINT32);
  M("peer", peer, H5T_NATIVE_UINT32);
  M("wait", wait, H5T_NATIVE_UINT32);
  M("microbatch", microbatch, H5T_NATIVE_UINT16);
  M("layer", layer, H5T_NATIVE_UINT8);
  M("kind", kind, H5T_NATIVE_UINT8);
  M("class", klass, H5T_NATIVE_UINT8);
  M("phase", phase, H5T_NATIVE_UINT8);
  M("stream", stream, H5T_NATIVE_UINT8);
#undef M
  return t;
}

static hid_t nf_shape_type(void)
{
  hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(SimShape));
#define M(name, field, type) \
  H5Tinsert(t, name, offsetof(SimShape, field), type)
  M("flops", flops, H5T_NATIVE_DOUBLE);
  M("bytes", bytes, H5T_NATIVE_DOUBLE);
  M("name", name, H5T_NATIVE_UINT32);
  M("klass", klass, H5T_NATIVE_UINT8);
  M("coll", coll, H5T_NATIVE_UINT8);
  M("tensor", tensor, H5T_NATIVE_UINT8);
#undef M
  return t;
}

/* A u32 that is usually a small valid-looking index below `n` (or just
 * past it), sometimes anything. */
static guint32 nf_index(FuzzIn *in, guint32 n)
{
  guint8 t = fuzz_u8(in);
  if (t < 0xf0)
    return t % (n + 1);
  return (guint32)fuzz_int(in);
}

/* What an op's indices may point at (the counts of the file so far). */
typedef struct {
  guint32 n_shapes, n_strings, n_groups, n_written;
  guint8 flags;
} NfCounts;

/* Reads streams and ops from the input and, when g is a group, writes
 * them as its datasets ops (records of type t) and stream_off.  With
 * patch (a program's ops), each op also gets a patch byte, usually below
 * SIM_PATCH_COUNT or just at it. */
static void nf_ops(FuzzIn *in, const NfCounts *c, gboolean patch, hid_t g,
                   hid_t t)
{
  guint32 zero = 0;
  guint32 n_streams = fuzz_u8(in) % 4;
  g_autoptr(GArray) soff = g_array_new(FALSE, FALSE, sizeof(guint32));
  g_array_append_val(soff, zero);
  guint32 counts[4] = {0}, n_ops = 0;
  for (guint32 s = 0; s < n_streams; s++) {
    counts[s] = fuzz_u8(in) % (NATIVE_MAX_OPS / 4 + 1);
    n_ops += counts[s];
    g_array_append_val(soff, n_ops);
  }
  g_autofree SimOp *ops = g_new0(SimOp, MAX(n_ops, 1));
  guint32 i = 0;
  for (guint32 s = 0; s < n_streams; s++) {
    for (guint32 k = 0; k < counts[s]; k++, i++) {
      SimOp *op = &ops[i];
      op->ref_ns = fuzz_int(in);
      op->shape = nf_index(in, c->n_shapes);
      op->name = nf_index(in, c->n_strings);
      op->kind = (guint8)nf_index(in, SIM_OP_KIND_COUNT);
      op->peer = nf_index(in, op->kind == SIM_OP_COLLECTIVE ? c->n_groups
                                                            : c->n_written);
      guint8 w = fuzz_u8(in);
      op->wait = w >= 0xc0 ? SIM_NO_WAIT : (guint32)w % (n_ops + 1);
      op->microbatch = fuzz_u16(in);
      op->layer = fuzz_u8(in);
      op->klass = (guint8)nf_index(in, SIM_CLASS_COUNT);
      op->phase = (guint8)nf_index(in, SIM_PHASE_COUNT);
      op->stream = (c->flags & 64) ? fuzz_u8(in) : (guint8)s;
      if (patch)
        op->patch = (guint8)nf_index(in, SIM_PATCH_COUNT);
    }
  }
  if (g < 0)
    return;
  nf_dset(g, "ops", t, n_ops, ops);
  nf_dset(g, "stream_off", H5T_NATIVE_UINT32, soff->len, soff->data);
}

/* Writes the file described by the input to path. */
static void nf_write(FuzzIn *in, guint8 flags, const char *path)
{
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  if (flags & 1)
    H5Pset_userblock(fcpl, 512);
  hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
  H5Pclose(fcpl);
  FUZZ_CHECK(file >= 0, "H5Fcreate %s", path);

  /* Root attributes. */
  guint32 n_written = fuzz_u8(in) % (NATIVE_MAX_RANKS_WRITTEN + 1);
  g_autofree char *format = (flags & 4) ? fuzz_str(in, 32)
                                        : g_strdup("joulesim-trace");
  nf_attr_str(file, "format", format);
  guint32 version = (flags & 8) ? (guint32)fuzz_int(in) : 1;
  nf_attr(file, "format_version", H5T_NATIVE_UINT32, &version);
  guint32 n_ranks = (flags & 16) ? (guint32)fuzz_int(in) : n_written;
  nf_attr(file, "n_ranks", H5T_NATIVE_UINT32, &n_ranks);
  static const char *const layout[] = {"tp", "pp", "dp", "microbatches"};
  for (guint i = 0; i < G_N_ELEMENTS(layout); i++) {
    guint32 v = (guint32)fuzz_int(in);
    nf_attr(file, layout[i], H5T_NATIVE_UINT32, &v);
  }
  double tokens = fuzz_double(in);
  nf_attr(file, "tokens_per_iteration", H5T_NATIVE_DOUBLE, &tokens);
  nf_attr_str(file, "joulesim_version", "fuzz");
  guint8 opt_attrs = fuzz_u8(in);
  if (opt_attrs & 1) {
    g_autofree char *s = fuzz_str(in, 32);
    nf_attr_str(file, "schedule", s);
  }
  if (opt_attrs & 2) {
    g_autofree char *s = fuzz_str(in, 32);
    nf_attr_str(file, "ref_gpu", s);
  }

  /* Strings. */
  guint32 n_strings = fuzz_u8(in) % 8;
  g_autoptr(GPtrArray) strings = g_ptr_array_new_with_free_func(g_free);
  for (guint32 i = 0; i < n_strings; i++)
    g_ptr_array_add(strings, fuzz_str(in, 40));
  hid_t vstr = nf_vstr();
  nf_dset(file, "strings", vstr, n_strings, strings->pdata);
  H5Tclose(vstr);

  /* Shapes. */
  guint32 n_shapes = fuzz_u8(in) % 6;
  g_autofree SimShape *shapes = g_new0(SimShape, MAX(n_shapes, 1));
  for (guint32 i = 0; i < n_shapes; i++) {
    shapes[i].flops = fuzz_double(in);
    shapes[i].bytes = fuzz_double(in);
    shapes[i].name = nf_index(in, n_strings);
    shapes[i].klass = (guint8)nf_index(in, SIM_CLASS_COUNT);
    shapes[i].coll = (guint8)nf_index(in, SIM_COLL_COUNT);
    shapes[i].tensor = fuzz_u8(in);
  }
  hid_t st = nf_shape_type();
  nf_dset(file, "shapes", st, n_shapes, shapes);
  H5Tclose(st);

  /* Groups: sizes then members; offsets consistent unless flag 32. */
  hid_t groups = H5Gcreate2(file, "groups", H5P_DEFAULT, H5P_DEFAULT,
                            H5P_DEFAULT);
  guint32 n_groups = fuzz_u8(in) % 4;
  g_autoptr(GArray) off = g_array_new(FALSE, FALSE, sizeof(guint32));
  g_autoptr(GArray) members = g_array_new(FALSE, FALSE, sizeof(guint32));
  guint32 zero = 0;
  g_array_append_val(off, zero);
  for (guint32 g = 0; g < n_groups; g++) {
    guint32 size = fuzz_u8(in) % 5;
    for (guint32 k = 0; k < size; k++) {
      guint32 m = nf_index(in, n_written);
      g_array_append_val(members, m);
    }
    guint32 end = members->len;
    g_array_append_val(off, end);
  }
  if (flags & 32) {
    guint32 n_off = fuzz_u8(in) % 6;
    g_array_set_size(off, n_off);
    for (guint32 k = 0; k < n_off; k++)
      g_array_index(off, guint32, k) = nf_index(in, members->len);
  }
  nf_dset(groups, "offsets", H5T_NATIVE_UINT32, off->len, off->data);
  nf_dset(groups, "ranks", H5T_NATIVE_UINT32, members->len, members->data);
  H5Gclose(groups);

  /* Shared programs (opt_attrs bit 3: format version 3, unless the
   * version is fuzzed): /programs/<k>, ops with patch bytes. */
  guint32 n_programs = 0;
  NfCounts nc = {n_shapes, n_strings, n_groups, n_written, flags};
  if (opt_attrs & 8) {
    if (!(flags & 8)) {
      guint32 v3 = 3;
      hid_t a = H5Aopen(file, "format_version", H5P_DEFAULT);
      FUZZ_CHECK(a >= 0 && H5Awrite(a, H5T_NATIVE_UINT32, &v3) >= 0,
                 "attribute format_version");
      H5Aclose(a);
    }
    n_programs = fuzz_u8(in) % 3;
    hid_t progs = H5Gcreate2(file, "programs", H5P_DEFAULT, H5P_DEFAULT,
                             H5P_DEFAULT);
    hid_t pt = nf_op_type();
    H5Tinsert(pt, "patch", offsetof(SimOp, patch), H5T_NATIVE_UINT8);
    for (guint32 k = 0; k < n_programs; k++) {
      char name[16];
      g_snprintf(name, sizeof name, "%u", k);
      hid_t g = H5Gcreate2(progs, name, H5P_DEFAULT, H5P_DEFAULT,
                           H5P_DEFAULT);
      nf_ops(in, &nc, TRUE, g, pt);
      H5Gclose(g);
    }
    H5Tclose(pt);
    H5Gclose(progs);
  }

  /* Ranks. */
  hid_t ranks = H5Gcreate2(file, "ranks", H5P_DEFAULT, H5P_DEFAULT,
                           H5P_DEFAULT);
  hid_t ot = nf_op_type();
  for (guint32 r = 0; r < n_written; r++) {
    char name[16];
    g_snprintf(name, sizeof name, "%u", r);
    hid_t g = H5Gcreate2(ranks, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    guint32 stage = (guint32)fuzz_int(in);
    nf_attr(g, "stage", H5T_NATIVE_UINT32, &stage);
    /* Version 3: bit 0 of `how` runs a program (bit 2: a fuzzed
     * peer_delta[0], bit 3: a peer_delta of 3 entries, bit 1: own ops
     * too). */
    guint8 how = (opt_attrs & 8) ? fuzz_u8(in) : 0;
    if (how & 1) {
      guint32 prog = nf_index(in, n_programs);
      nf_attr(g, "program", H5T_NATIVE_UINT32, &prog);
      guint32 delta[SIM_PATCH_COUNT];
      delta[0] = (how & 4) ? (guint32)fuzz_int(in) : 0;
      for (guint k = 1; k < SIM_PATCH_COUNT; k++)
        delta[k] = nf_index(in, MAX(n_written, n_groups));
      hsize_t nd = (how & 8) ? SIM_PATCH_COUNT - 1 : SIM_PATCH_COUNT;
      hid_t sp = H5Screate_simple(1, &nd, NULL);
      hid_t a = H5Acreate2(g, "peer_delta", H5T_NATIVE_UINT32, sp,
                           H5P_DEFAULT, H5P_DEFAULT);
      FUZZ_CHECK(a >= 0 && H5Awrite(a, H5T_NATIVE_UINT32, delta) >= 0,
                 "attribute peer_delta");
      H5Aclose(a);
      H5Sclose(sp);
      if (!(how & 2)) {
        H5Gclose(g);
        continue;
      }
    }
    if (r == 0 && (opt_attrs & 4)) {
      /* A sparse dataset: its extent says 2^k records, none written
       * (HDF5 reads fill values): a small file declaring a huge one.
       * (The ops of the input are read first, as they always were.) */
      nf_ops(in, &nc, FALSE, H5I_INVALID_HID, ot);
      hsize_t big = (hsize_t)1 << (fuzz_u8(in) % 33);
      nf_dset(g, "ops", ot, big, NULL);
      guint32 so[2] = {0, (guint32)MIN(big, G_MAXUINT32)};
      nf_dset(g, "stream_off", H5T_NATIVE_UINT32, 2, so);
    } else {
      nf_ops(in, &nc, FALSE, g, ot);
    }
    H5Gclose(g);
  }
  H5Tclose(ot);
  H5Gclose(ranks);

  /* Provenance (optional). */
  guint8 n_prov = fuzz_u8(in) % 4;
  if (n_prov > 0) {
    hid_t g = H5Gcreate2(file, "provenance", H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    for (guint8 k = 0; k < n_prov; k++) {
      g_autofree char *key = fuzz_str(in, 16);
      g_autofree char *val = fuzz_str(in, 40);
      if (key[0] == '\0' || H5Aexists(g, key) > 0)
        continue;
      nf_attr_str_try(g, key, val);
    }
    H5Gclose(g);
  }
  FUZZ_CHECK(H5Fclose(file) >= 0, "H5Fclose");

  if (flags & 1) {
    /* The CRC record of trace_native_save (traces/native_write.c). */
    g_autofree char *bytes = NULL;
    gsize len = 0;
    FUZZ_CHECK(g_file_get_contents(path, &bytes, &len, NULL), "read back");
    FUZZ_CHECK(len >= 512, "no user block");
    guint32 crc = (guint32)crc32(0L, (const Bytef *)bytes + 512,
                                 (uInt)(len - 512));
    guint64 body = len - 512;
    if (flags & 2) {
      if (fuzz_u8(in) & 1)
        crc ^= 1;
      else
        body++;
    }
    char rec[512];
    memset(rec, 0, sizeof rec);
    g_snprintf(rec, sizeof rec, "joulesim-trace\ncrc32 %08x\nlength %"
               G_GUINT64_FORMAT "\n", crc, body);
    memcpy(bytes, rec, sizeof rec);
    fuzz_write(path, bytes, len);
  }
}

/* Same content (names, shapes, groups, ranks, layout, provenance). */
static void nf_check_equal(const SimWorkload *a, const SimWorkload *b)
{
  FUZZ_CHECK(a->n_ranks == b->n_ranks, "round trip: n_ranks");
  FUZZ_CHECK(a->tp == b->tp && a->pp == b->pp && a->dp == b->dp &&
                 a->microbatches == b->microbatches,
             "round trip: layout");
  FUZZ_CHECK(a->tokens_per_iteration == b->tokens_per_iteration,
             "round trip: tokens");
  FUZZ_CHECK(g_strcmp0(a->schedule, b->schedule) == 0 &&
                 g_strcmp0(a->ref_gpu, b->ref_gpu) == 0,
             "round trip: schedule or ref_gpu");
  FUZZ_CHECK(a->names->len == b->names->len, "round trip: names");
  for (guint i = 0; i < a->names->len; i++)
    FUZZ_CHECK(strcmp(sim_workload_name(a, i), sim_workload_name(b, i)) == 0,
               "round trip: name %u", i);
  FUZZ_CHECK(a->shapes->len == b->shapes->len, "round trip: shapes");
  for (guint i = 0; i < a->shapes->len; i++) {
    const SimShape *x = &g_array_index(a->shapes, SimShape, i);
    const SimShape *y = &g_array_index(b->shapes, SimShape, i);
    FUZZ_CHECK(memcmp(&x->flops, &y->flops, sizeof x->flops) == 0 &&
                   memcmp(&x->bytes, &y->bytes, sizeof x->bytes) == 0 &&
                   x->name == y->name && x->klass == y->klass &&
                   x->coll == y->coll && x->tensor == y->tensor,
               "round trip: shape %u", i);
  }
  FUZZ_CHECK(sim_workload_n_groups(a) == sim_workload_n_groups(b),
             "round trip: groups");
  for (guint g = 0; g < sim_workload_n_groups(a); g++) {
    guint na, nb;
    const guint32 *ma = sim_workload_group(a, g, &na);
    const guint32 *mb = sim_workload_group(b, g, &nb);
    FUZZ_CHECK(na == nb && memcmp(ma, mb, na * sizeof *ma) == 0,
               "round trip: group %u", g);
  }
  for (guint r = 0; r < a->n_ranks; r++) {
    const SimRank *x = &a->ranks[r], *y = &b->ranks[r];
    FUZZ_CHECK(x->n_ops == y->n_ops && x->n_streams == y->n_streams &&
                   x->stage == y->stage,
               "round trip: rank %u", r);
    for (guint32 i = 0; i < x->n_ops; i++) {
      SimOp p = x->ops[i], q = y->ops[i];
      p.peer = sim_op_peer(x, &p);
      q.peer = sim_op_peer(y, &q);
      p.patch = q.patch = 0;
      FUZZ_CHECK(memcmp(&p, &q, sizeof p) == 0, "round trip: rank %u op %u",
                 r, i);
    }
    for (guint s = 0; x->n_streams > 0 && s <= x->n_streams; s++)
      FUZZ_CHECK(x->stream_off[s] == y->stream_off[s],
                 "round trip: rank %u stream_off %u", r, s);
    FUZZ_CHECK((x->program == SIM_NO_PROGRAM) ==
                   (y->program == SIM_NO_PROGRAM) &&
                   (x->program == SIM_NO_PROGRAM ||
                    memcmp(x->peer_delta, y->peer_delta,
                           sizeof x->peer_delta) == 0),
               "round trip: rank %u program or peer deltas", r);
  }
  /* The ranks that share a program in a share one in b. */
  g_autofree guint32 *map = g_new(guint32, MAX(a->programs->len, 1));
  for (guint p = 0; p < a->programs->len; p++)
    map[p] = SIM_NO_PROGRAM;
  for (guint r = 0; r < a->n_ranks; r++) {
    guint32 pa = a->ranks[r].program, pb = b->ranks[r].program;
    if (pa == SIM_NO_PROGRAM)
      continue;
    if (map[pa] == SIM_NO_PROGRAM)
      map[pa] = pb;
    FUZZ_CHECK(map[pa] == pb, "round trip: rank %u runs another program",
               r);
  }
  FUZZ_CHECK(sim_workload_n_programs(a) == sim_workload_n_programs(b) &&
                 sim_workload_n_stored_ops(a) == sim_workload_n_stored_ops(b),
             "round trip: programs or stored ops");
  FUZZ_CHECK(g_hash_table_size(a->provenance) ==
                 g_hash_table_size(b->provenance),
             "round trip: provenance");
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, a->provenance);
  while (g_hash_table_iter_next(&it, &k, &v))
    FUZZ_CHECK(g_strcmp0(v, g_hash_table_lookup(b->provenance, k)) == 0,
               "round trip: provenance '%s'", (const char *)k);
}

static int fuzz_native_one(const guint8 *data, size_t size)
{
  FuzzIn in = {data, size};
  guint8 flags = fuzz_u8(&in);
  g_autofree char *path = fuzz_path("trace.h5");
  H5uQuiet quiet = h5u_quiet(); /* the writer's failures are expected */
  nf_write(&in, flags, path);
  h5u_quiet_restore(&quiet);
  GError *err = NULL;
  g_autoptr(SimWorkload) w = trace_native_load(path, &err);
  fuzz_check_outcome("trace_native_load", w != NULL, err, TRACE_NATIVE_ERROR,
                     path);
  if (w != NULL) {
    fuzz_check_workload(w);
    if (flags & 128) {
      g_autofree char *copy = fuzz_path("copy.h5");
      GError *serr = NULL;
      gboolean saved = trace_native_save(w, copy, &serr);
      /* Provenance that is not valid UTF-8 cannot be saved: a clean
       * error naming the file. */
      fuzz_check_outcome("trace_native_save", saved, serr,
                         TRACE_NATIVE_ERROR, copy);
      if (saved) {
        g_autoptr(SimWorkload) w2 = trace_native_load(copy, &serr);
        FUZZ_CHECK(w2 != NULL, "reloading a saved trace: %s", serr->message);
        nf_check_equal(w, w2);
      }
      g_clear_error(&serr);
    }
  }
  g_clear_error(&err);
  fuzz_clean_dir();
  return 0;
}

FUZZ_TARGET(fuzz_native_one)
