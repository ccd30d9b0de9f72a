/* run/inputs.h -- the workload that trace files describe, as `joulesim
 * trace import|info|export` and js.trace.import read it.
 *
 * One native trace (HDF5, traces/native.h) is loaded as it is; anything
 * else goes to the profiler importers (traces/import.h: Kineto JSON, Nsight
 * Systems SQLite, Chakra), all files together as the ranks of one job.
 * Nothing here prints: importer warnings are handed back as strings.
 */
#ifndef RUN_INPUTS_H
#define RUN_INPUTS_H

#include <glib.h>
#include "models/gpu.h"
#include "sim/workload.h"
#include "traces/import.h"

G_BEGIN_DECLS

/* Loads paths[0..n) (n >= 1): a native trace, recognised by its HDF5
 * content or an .h5/.hdf5 name, must come alone (an error otherwise), and
 * is refused before anything is allocated when it needs more memory than
 * js_memory_limit(max_memory) (run/memory.h);
 * other files are imported with `cat` (borrowed) mapping device names,
 * `gpu` the GPU to assume for devices not in it (NULL: the importer's
 * default) and how->step, step_number, gpu_only and memory_check (how
 * may be NULL: the defaults; without a memory_check, the importers' growing
 * records are checked against js_memory_limit(max_memory)).  Importer
 * warnings (owned strings) are added to `warnings` when it is not NULL.  Returns a new workload (caller owns it) or NULL
 * with an error naming the file. */
SimWorkload *js_inputs_load(const GpuCatalogue *cat, const char *const *paths,
                            guint n, const char *gpu,
                            const TraceImportOptions *how,
                            guint64 max_memory, GPtrArray *warnings,
                            GError **error);

/* A label for the workload of paths[0..n): the first file's base name,
 * and "+N" for N more files.  Caller frees it. */
char *js_inputs_label(const char *const *paths, guint n);

G_END_DECLS

#endif
