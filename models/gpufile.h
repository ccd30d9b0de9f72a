/* models/gpufile.h -- GPU catalogue entries as key files.
 *
 * A `.gpu` file is a GKeyFile (INI-like) holding one GpuSpec:
 *
 *   [gpu]
 *   name=A100-fitted
 *   description=...
 *   base=A100-SXM4-80GB     # optional: start from this catalogue entry
 *   n_mem_clocks=1          # optional with a base
 *
 *   [values]                # parameter names as `joulesim gpus NAME` lists
 *   p_const_w=42.7          # them (gpu_spec_param): sm_max_mhz, mem_mhz.0,
 *   activity.gemm=1         # eff_compute.gemm, activity.softmax, ...
 *
 *   [sources]               # optional, per parameter: where it came from
 *   p_const_w=fit: joulesim validate gpt3.csv
 *
 * Without a base every parameter must be given; with one, the listed ones
 * replace the base's values (and sources).  The result is validated
 * (gpu_spec_validate).  The command line (cli/session.c) loads every
 * `*.gpu` file of the directories in the environment variable
 * JOULESIM_GPU_PATH into its catalogues with gpu_catalogue_load_path
 * (colon-separated, in order; later files replace earlier entries of the
 * same name); gpu_catalogue_new() itself reads no environment.
 */
#ifndef MODELS_GPUFILE_H
#define MODELS_GPUFILE_H

#include <glib.h>
#include "models/gpu.h"

G_BEGIN_DECLS

/* The environment variable naming the catalogue directories. */
#define GPU_PATH_ENV "JOULESIM_GPU_PATH"
/* The extension of catalogue files in those directories. */
#define GPU_FILE_EXT ".gpu"

/* Writes spec to path (every parameter with its source), atomically
 * (g_file_set_contents).  Errors name the path. */
gboolean gpu_spec_save_keyfile(const GpuSpec *spec, const char *path,
                               GError **error);

/* TRUE when `path` is a key file with the [gpu] and [values] groups of a
 * catalogue entry (run/confine.h: what a saved entry may replace). */
gboolean gpu_file_probe(const char *path);

/* Reads one entry; `base` (may be NULL) resolves a `base=` key.  Errors
 * (GPU_ERROR_INVALID, or the GKeyFile/GFile error) name the path and the
 * key.  Caller owns the result. */
GpuSpec *gpu_spec_load_keyfile(const char *path, const GpuCatalogue *base,
                               GError **error);

/* Defines every `*.gpu` file of dir into c, in name order; a file's base
 * may be an entry of an earlier file.  Loads what it can: on a bad file
 * the others are still defined and the first error is returned (FALSE). */
gboolean gpu_catalogue_load_dir(GpuCatalogue *c, const char *dir,
                                GError **error);

/* gpu_catalogue_load_dir over each directory of a colon-separated list
 * (empty items skipped; a missing directory is an error). */
gboolean gpu_catalogue_load_path(GpuCatalogue *c, const char *path,
                                 GError **error);

G_END_DECLS

#endif
