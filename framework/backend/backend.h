// A device = one kernel table + one allocator (+ graphs, optional), and the
// registry that maps each Device to its backend.
//
// Op front ends (framework/ops/*.cpp) check arguments, compute shapes, call
// kernels(d).<entry> and record a backward composed of ops; Storage and the
// copies between devices call allocator(d). Neither knows which device runs.
// The CPU's backend is always present (backend/cpu); CUDA's when minidl is
// built with it and a GPU is found (backend/cuda; backend/no_cuda otherwise).
#pragma once
#include <vector>

#include "framework/backend/allocator.h"
#include "framework/backend/graphs.h"
#include "framework/backend/kernels.h"
#include "framework/device.h"

namespace minidl {

struct Backend {
  const char* name;  // "cpu", "cuda", ...
  const Allocator* allocator;
  const Kernels* kernels;
  const GraphOps* graphs;  // null: the device cannot capture graphs
};

// The backend of `d`; throws minidl::Error naming why when it is not present.
const Backend& backend(Device d);
inline const Kernels& kernels(Device d) { return *backend(d).kernels; }
inline const Allocator& allocator(Device d) { return *backend(d).allocator; }
// Null when `d` cannot capture graphs (or is not present).
const GraphOps* graph_ops(Device d);
// True while `d` is capturing a graph (kernels recorded, not run).
bool capturing(Device d);
// The devices present in this process, CPU first.
std::vector<Device> present_devices();
// Installs (or, with null, removes) the backend of a non-CPU device,
// replacing the one minidl found; tests use it to run an emulated device.
void register_backend(Device d, const Backend* b);

namespace cuda {
// For the registry, from backend/cuda (or the stub in backend/no_cuda): the
// CUDA backend when a GPU is present, else null (never throws, prints
// nothing), and why there is none.
const Backend* backend_if_present();
const char* absent_reason();
}  // namespace cuda

}  // namespace minidl
