/* traces/kineto_synth.c -- synthetic single-rank Kineto traces for the
 * import benchmarks (trace_kineto_write_synthetic, traces/import.h).
 */
#include "traces/import.h"
#include "io/fault.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Kernel names as real traces spell them (templates and all). */
static const char *const synth_kernels[] = {
  "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn",
  "void at::native::vectorized_elementwise_kernel<4, at::native::"
  "GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::"
  "{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::"
  "{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native"
  "::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::"
  "{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::"
  "{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)",
  "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel"
  "<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 "
  "const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
  "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, "
  "false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, "
  "cutlass::bfloat16_t> >, false, true, false, false, true, true, false>"
  "(Flash_fwd_params)",
};

gboolean trace_kineto_write_synthetic(const char *path, guint64 target_bytes,
                                      guint64 *n_gpu_events, GError **error)
{
  FILE *f = fopen(path, "wb");
  if (f == NULL) {
    int e = errno;
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_IO, "%s: %s", path,
                g_strerror(e));
    return FALSE;
  }
  setvbuf(f, NULL, _IOFBF, 1 << 20);
  fprintf(f, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{\"id\": 0, "
          "\"name\": \"NVIDIA A100-SXM4-80GB\", \"totalGlobalMem\": "
          "85899345920, \"numSms\": 108}],\n  \"distributedInfo\": "
          "{\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 1},\n"
          "  \"traceEvents\": [\n");
  guint64 n = 0;
  double ts = 1682725898000000.0; /* microseconds, as profilers write */
  long pos = ftell(f);
  while (pos >= 0 && (guint64)pos < target_bytes) {
    const char *k = synth_kernels[n % G_N_ELEMENTS(synth_kernels)];
    guint64 corr = 1000000 + n;
    double dur = 3.0 + (double)(n % 97) * 0.731;
    fprintf(f,
            "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::linear\","
            " \"pid\": 4037, \"tid\": 4037, \"ts\": %.3f, \"dur\": 9.125, "
            "\"args\": {\"External id\": %" G_GUINT64_FORMAT ", \"Input Dims\":"
            " [[8, 2048, 4096], [4096, 4096], [4096]], \"Input type\": "
            "[\"c10::BFloat16\", \"c10::BFloat16\", \"c10::BFloat16\"]}},\n"
            "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": "
            "\"cudaLaunchKernel\", \"pid\": 4037, \"tid\": 4037, \"ts\": %.3f,"
            " \"dur\": 4.5, \"args\": {\"External id\": %" G_GUINT64_FORMAT
            ", \"cbid\": 211, \"correlation\": %" G_GUINT64_FORMAT "}},\n"
            "  {\"ph\": \"s\", \"id\": %" G_GUINT64_FORMAT ", \"pid\": 4037, "
            "\"tid\": 4037, \"ts\": %.3f, \"cat\": \"ac2g\", \"name\": "
            "\"ac2g\"},\n"
            "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": "
            "0, \"tid\": 7, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"External"
            " id\": %" G_GUINT64_FORMAT ", \"queued\": 0, \"device\": 0, "
            "\"context\": 1, \"stream\": 7, \"correlation\": %"
            G_GUINT64_FORMAT ", \"registers per thread\": 96, \"shared "
            "memory\": 41744, \"blocks per SM\": 0.148148, \"warps per SM\": "
            "2.962963, \"grid\": [16, 1, 1], \"block\": [640, 1, 1], \"est. "
            "achieved occupancy %%\": 5}},\n"
            "  {\"ph\": \"f\", \"id\": %" G_GUINT64_FORMAT ", \"pid\": 0, "
            "\"tid\": 7, \"ts\": %.3f, \"cat\": \"ac2g\", \"name\": \"ac2g\", "
            "\"bp\": \"e\"},\n",
            ts, corr, ts + 1.0, corr, corr, corr, ts + 1.0, k, ts + 20.0, dur,
            corr, corr, corr, ts + 20.0);
    ts += dur + 0.5;
    n++;
    if (n % 4096 == 0)
      pos = ftell(f);
  }
  fprintf(f, "  {\"ph\": \"X\", \"cat\": \"Trace\", \"name\": \"PyTorch "
          "Profiler (0)\", \"pid\": \"Spans\", \"tid\": \"PyTorch "
          "Profiler\", \"ts\": 1682725898000000.000, \"dur\": %.3f, \"args\":"
          " {\"Op count\": 0}}\n  ]\n}\n", ts - 1682725898000000.0);
  gboolean ok = !ferror(f);
  if (fclose(f) != 0)
    ok = FALSE;
  if (!ok) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_IO, "%s: write error", path);
    return FALSE;
  }
  if (n_gpu_events != NULL)
    *n_gpu_events = n;
  return TRUE;
}
