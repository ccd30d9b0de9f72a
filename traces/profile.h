/* traces/profile.h -- measured time/energy profiles (DESIGN section 9).
 *
 * Two CSV forms:
 *  - Perseus/Zeus: `stage,instruction,frequency,time,energy` (MHz, s, J):
 *    one op per (stage, instruction), one point per SM clock.
 *  - per kernel: `kernel,sm_mhz,mem_mhz,time_s,energy_j` with optional
 *    `count` and `class` columns: one op per kernel name, one point per
 *    clock pair.
 * Columns may come in any order; extra columns are errors.  Every malformed
 * row gives an error naming the file, line and column.
 */
#ifndef TRACES_PROFILE_H
#define TRACES_PROFILE_H

#include <glib.h>
#include "sim/workload.h"
#include "models/fit.h"

G_BEGIN_DECLS

typedef enum { PROFILE_PERSEUS = 0, PROFILE_KERNEL } ProfileFormat;

typedef struct {
  guint sm_mhz;
  guint mem_mhz;   /* 0 when the profile does not vary it */
  double time_s;
  double energy_j;
} ProfilePoint;

typedef struct {
  char *name;          /* "stage3.backward" or the kernel name (owned) */
  guint stage;         /* Perseus form; 0 otherwise */
  char *instruction;   /* "forward"/"backward" (Perseus form) or NULL */
  SimOpClass klass;    /* per-kernel form's class column, else OTHER */
  double count;        /* per-kernel form's count column, else 1 */
  GArray *points;      /* ProfilePoint, sorted by (mem_mhz, sm_mhz) */
} ProfileOp;

typedef struct {
  char *path;
  ProfileFormat format;
  GPtrArray *ops;      /* ProfileOp* (owned), in order of first appearance */
  guint n_stages;      /* Perseus form: max stage + 1 */
} Profile;

/* A CSV file as the profile reader reads it (fields quoted or not,
 * blank and '#' lines skipped, text only): the header's names and every
 * record, each with the header's number of fields.  js.csv hands it to
 * scripts, so they read CSV as the library does. */
typedef struct {
  GPtrArray *header;   /* char *, owned */
  guint header_line;   /* 1-based */
  GPtrArray *records;  /* GPtrArray of char * (owned) per record */
  GArray *lines;       /* guint: each record's line, 1-based */
} CsvTable;

/* Reads the CSV file `path` whole (up to 256 MiB).  Errors name the file
 * and line: PROFILE_ERROR_IO, or PROFILE_ERROR_FORMAT for a syntax error,
 * a file without a header line or a record whose width is not the
 * header's.  Caller owns the result. */
CsvTable *profile_csv_read(const char *path, GError **error);
void profile_csv_table_free(CsvTable *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CsvTable, profile_csv_table_free)

/* Loads a profile CSV (format detected from the header).  Rejects: missing
 * or unknown columns, non-numeric or non-finite or non-positive values,
 * duplicate points.  Caller owns the result. */
Profile *profile_load(const char *path, GError **error);
void profile_free(Profile *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Profile, profile_free)

/* Checks that the power every point implies (energy_j / time_s) is
 * plausible on g: at least a third of its idle power, at most 1.5 times
 * its power limit (or limit_w when larger; 0: none).  Times in
 * milliseconds read as seconds imply a thousandth of the power, and a
 * profile taken so fits to nonsense (0.5 W, energy MAPE 98,141% on one
 * such profile), so the first point outside is PROFILE_ERROR_FORMAT
 * naming the file, the op and clock, the power and the range, and the
 * unit that would bring it in range. */
gboolean profile_check_power(const Profile *p, const GpuSpec *g,
                             double limit_w, GError **error);

/* Builds a per-kernel profile (PROFILE_KERNEL, mem_mhz 0 unless sampled)
 * from an NVML/DCGM power sample series and a list of windows:
 *  - samples_path: `nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw
 *    [,clocks.mem,...] --format=csv[,nounits] -lms N` output (header like
 *    `timestamp, clocks.current.sm [MHz], power.draw [W]`, timestamps like
 *    `2024/05/01 12:00:00.123` or plain seconds; other columns ignored);
 *  - windows_path: CSV `kernel,start,end[,count]`, times either in seconds
 *    since the first sample or in the timestamp format (absolute); count =
 *    kernel launches inside the window (time and energy are divided by it).
 * Each window's energy is the trapezoid integral of the sampled power, its
 * time the window length, its clocks the most frequent sampled clocks in
 * it; repeated windows of one kernel at one clock pair are averaged.  A
 * window outside the sampled span or holding no sample is
 * PROFILE_ERROR_RANGE.  Caller owns the result. */
Profile *profile_load_nvml(const char *samples_path, const char *windows_path,
                           GError **error);

/* One rank of a measured training iteration (whole-run validation). */
typedef struct {
  guint rank;
  double time_s;     /* the iteration's wall time on this rank, > 0 */
  double energy_j;   /* the rank's GPU energy over it, > 0 */
} ProfileRank;

/* Loads a measured iteration `rank,time_s,energy_j` (one row per rank,
 * ranks 0..n-1 each once, any order): an array of ProfileRank sorted by
 * rank.  Errors name the file, line and column (missing or duplicate
 * rank, non-numeric, non-positive values).  Caller frees the array. */
GArray *profile_load_run(const char *path, GError **error);

/* The op for (stage, instruction) in a Perseus profile, or NULL. */
const ProfileOp *profile_find_stage(const Profile *p, guint stage,
                                    const char *instruction);
/* The op with this name, or NULL. */
const ProfileOp *profile_find(const Profile *p, const char *name);

/* Time and energy of op at (sm, mem), linearly interpolated between the two
 * nearest measured SM clocks (at the nearest measured memory clock; mem 0 =
 * the op's highest).  A clock outside the measured range is an error
 * (PROFILE_ERROR_RANGE): never extrapolated silently. */
gboolean profile_op_at(const ProfileOp *op, guint sm_mhz, guint mem_mhz,
                       double *time_s, double *energy_j, GError **error);

/* Measured SM clocks of op at memory clock mem (0 = highest), ascending.
 * Caller frees the array. */
GArray *profile_op_clocks(const ProfileOp *op, guint mem_mhz);

/* The kernel mix that stands in for op in the out-of-box model
 * (FitOp.kernels): for a Perseus forward or backward stage, one
 * transformer layer of GPT-3 175B at TP 8, microbatch 1, sequence 2048,
 * BF16 (traces/gpt.h, gpt_layer_kernels), the shapes the shared Perseus
 * profiles were measured with (for other models, Bloom, it is only
 * representative: the GEMM share of a layer is similar, the attention
 * share differs with the head count); 0 kernels for any other op.  out
 * holds PROFILE_OP_KERNELS_MAX entries; returns how many it wrote. */
#define PROFILE_OP_KERNELS_MAX 16
guint profile_op_kernels(const ProfileOp *op, FitKernel *out);

#define PROFILE_ERROR (profile_error_quark())
GQuark profile_error_quark(void);
typedef enum {
  PROFILE_ERROR_IO,
  PROFILE_ERROR_FORMAT,   /* header, row, value */
  PROFILE_ERROR_DUPLICATE,
  PROFILE_ERROR_RANGE
} ProfileError;

G_END_DECLS

#endif
