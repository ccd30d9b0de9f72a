/* cli/cmd_gpus.c -- `joulesim gpus [NAME]`: the GPU catalogue (built-in
 * entries and $JOULESIM_GPU_PATH's), or every parameter of one GPU with
 * its value, unit and source, and what its power model rests on
 * (run/trust.h). */
#include "cli/commands.h"
#include "cli/options.h"
#include "run/trust.h"

#include <stdio.h>
#include <string.h>

static const char usage_gpus[] =
  "usage: joulesim gpus [NAME]\n"
  "\n"
  "Without NAME, lists the catalogue.  With NAME, prints every parameter of\n"
  "that GPU model with its value, unit and source, then what its power\n"
  "model rests on: its trust level (validated, calibrated, estimated), what\n"
  "each power term was fitted on or estimated from, and the power limits\n"
  "the fidelity record checks.\n";

/* Where the figures behind the sources come from (written after one
 * GPU's parameters). */
static const char sources_line[] =
  "sources: docs/sources.md (the catalogue's published figures and fits)\n";

int cmd_gpus(int argc, char **argv)
{
  if (argc > 0 && cli_is_help(argv[0])) {
    fputs(usage_gpus, stdout);
    return 0;
  }
  if (argc > 1) {
    fputs(usage_gpus, stderr);
    return EXIT_USAGE;
  }
  g_autoptr(GpuCatalogue) cat = cli_catalogue_new();
  GError *err = NULL;
  if (argc == 1) {
    const GpuSpec *g = gpu_catalogue_lookup(cat, argv[0], &err);
    if (g == NULL)
      return cli_fail(err);
    GString *out = g_string_new(NULL);
    gpu_spec_describe(g, out);
    js_trust_describe_gpu(g, out);
    g_string_append(out, sources_line);
    fputs(out->str, stdout);
    g_string_free(out, TRUE);
    return 0;
  }
  g_autoptr(GPtrArray) names = gpu_catalogue_names(cat);
  /* TFLOP/s: the datasheet's dense BF16 peak, the one MFU divides by
   * (the SM clock's top can be above the clock it is quoted at: 1071 at
   * 1980 MHz on the H100, 989 quoted). */
  printf("%-18s %6s %12s %10s %9s %8s\n", "name", "SMs", "SM MHz",
         "mem MHz", "limit W", "TFLOP/s");
  for (guint k = 0; k < names->len; k++) {
    const GpuSpec *g = gpu_catalogue_lookup(cat, g_ptr_array_index(names, k),
                                            NULL);
    char clocks[32];
    g_snprintf(clocks, sizeof clocks, "%.0f-%.0f", g->sm_min_mhz.v,
               g->sm_max_mhz.v);
    printf("%-18s %6.0f %12s %10.0f %9.0f %8.0f\n", g->name, g->n_sm.v,
           clocks, g->mem_mhz[g->n_mem_clocks - 1].v, g->power_limit_w.v,
           gpu_mfu_peak_flops(g, NULL) * 1e-12);
  }
  return 0;
}
