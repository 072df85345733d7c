// Where output element i of a broadcast binary op reads a and b under the
// coalesced index map (kernels.h's Broadcast); shared by the CPU and CUDA
// kernels (a host-and-device function, host_device.h).
#pragma once
#include <cstdint>

#include "framework/backend/host_device.h"
#include "framework/backend/kernels.h"

namespace minidl {

struct BroadcastOffsets {
  int64_t a, b;
};

// i in [0, bc.n) -> the element offsets of a and b (i itself when nd == 0)
MINIDL_HOST_DEVICE inline BroadcastOffsets broadcast_offsets(const Broadcast& bc, int64_t i) {
  if (bc.nd == 0) return {i, i};
  BroadcastOffsets o{0, 0};
  for (int d = bc.nd - 1; d >= 0; --d) {
    const int64_t idx = i % bc.size[d];
    i /= bc.size[d];
    o.a += idx * bc.stride_a[d];
    o.b += idx * bc.stride_b[d];
  }
  return o;
}

}  // namespace minidl
