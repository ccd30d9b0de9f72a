/* traces/classify.h -- what imported names mean: kernel classes, NCCL
 * collective types, element sizes, phase and iteration annotations, and
 * profiler device names to catalogue GPUs.
 *
 * All the knowledge lives in small tables in traces/classify.c, matched in
 * order, first match wins; extending a table is adding a line.  Matching is
 * case-insensitive and on substrings unless a table says otherwise, so C++
 * templates, "void " prefixes and argument lists in names do not matter.
 */
#ifndef TRACES_CLASSIFY_H
#define TRACES_CLASSIFY_H

#include <glib.h>
#include "sim/workload.h"
#include "models/gpu.h"

G_BEGIN_DECLS

/* How an NCCL kernel communicates. */
typedef enum {
  TRACE_COMM_NONE = 0,  /* not communication */
  TRACE_COMM_COLL,      /* a collective (type in SimCollType) */
  TRACE_COMM_SEND,      /* point-to-point send */
  TRACE_COMM_RECV,      /* point-to-point receive */
  TRACE_COMM_SENDRECV   /* batched p2p (all-to-all, pipelines) without peers */
} TraceCommKind;

/* Class of a kernel from its (possibly demangled, templated) name.  NCCL
 * kernels are SIM_CLASS_COMM; memcpy/memset activity names SIM_CLASS_MEMCPY;
 * unknown names SIM_CLASS_OTHER. */
SimOpClass trace_classify_kernel(const char *name);

/* TRUE for NCCL kernels ("ncclKernel_*", "ncclDevKernel_*", any "nccl"). */
gboolean trace_is_nccl_kernel(const char *name);

/* Communication kind and collective type from a profiler's collective name
 * ("allreduce", "_allgather_base", "reduce_scatter_tensor_coalesced",
 * "send", ...).  Returns FALSE (outputs untouched) when not recognised. */
gboolean trace_comm_from_collective_name(const char *name,
                                         TraceCommKind *kind,
                                         SimCollType *coll);
/* The same from an NCCL kernel name ("ncclKernel_AllReduce_RING_LL_Sum_float",
 * "ncclDevKernel_SendRecv(...)").  Unknown NCCL kernels give a collective of
 * type all-reduce and FALSE. */
gboolean trace_comm_from_kernel_name(const char *name, TraceCommKind *kind,
                                     SimCollType *coll);

/* Bytes per element of a PyTorch dtype name ("Float", "BFloat16", "c10::Half",
 * "float16", ...); 0 when unknown. */
guint trace_dtype_bytes(const char *dtype);

/* Phase marked by a CPU-side annotation or op name
 * ("autograd::engine::evaluate_function: ...", "Optimizer.step#Adam.step",
 * "## forward ##", ...); -1 when the name marks no phase. */
gint trace_phase_of_annotation(const char *name);

/* Iteration ranges: "ProfilerStep#12" (Kineto) and NVTX texts such as
 * "iteration 3", "step_7", "ProfilerStep#2".  Returns TRUE and the number. */
gboolean trace_parse_step(const char *name, gint64 *number);

/* What a CUDA runtime (or driver) call does to the host-device order
 * (traces/import.c, "host streams").  Names as Kineto records them
 * ("cudaLaunchKernel", "cudaMemcpyAsync") or with Nsight Systems' version
 * suffix ("cudaLaunchKernel_v7000", "cuLaunchKernel"). */
typedef enum {
  TRACE_CALL_OTHER = 0,     /* host time only (cudaEventRecord, queries...) */
  TRACE_CALL_LAUNCH,        /* enqueues a kernel */
  TRACE_CALL_MEMCPY,        /* enqueues a copy; synchronous when the copy
                               ends before the call returns */
  TRACE_CALL_MEMSET,        /* enqueues a memset */
  TRACE_CALL_SYNC_STREAM,   /* cudaStreamSynchronize: waits for a stream */
  TRACE_CALL_SYNC_DEVICE,   /* cudaDeviceSynchronize: waits for every stream */
  TRACE_CALL_SYNC_EVENT,    /* cudaEventSynchronize: waits for one op */
  TRACE_CALL_WAIT_EVENT     /* cudaStreamWaitEvent: a GPU-side wait, host
                               time only on the CPU */
} TraceCall;

TraceCall trace_runtime_call(const char *name);

/* Catalogue GPU for a profiler device name ("NVIDIA A100-SXM4-80GB",
 * "NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 3080 Ti"): a borrowed
 * catalogue name, or NULL when none matches. */
const char *trace_gpu_for_device(const GpuCatalogue *cat, const char *device);

G_END_DECLS

#endif
