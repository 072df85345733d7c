// Graph capture and replay (CUDA graphs): the optional part of a device. A
// device without it leaves Backend::graphs null; the front end is
// framework/cuda_graph.h.
//
// Between capture_begin and capture_end the device's kernel and allocator
// entries are recorded, not run: the same kernels on the same pointers, host
// arguments as given (baked in), memory allocated in between the graph's own
// (the same addresses at each replay). An update's per-step arguments (args,
// the slices' steps) are the exception: they sit in the graph's feed, which
// holds the capture's values until feed_begin/feed_end replaces them. The
// front end keeps host reads and copies from host memory out of a capture.
#pragma once
#include <cstdint>

namespace minidl {

// What the allocator saw during a capture: blocks it made that are still
// live at the end (tensors that outlive the capture: their memory is the
// graph's) and blocks made before it that it freed (the graph would free
// them at every replay). The front end refuses a capture where either is > 0.
struct CaptureCounts {
  int64_t outliving = 0, freed_older = 0;
};

struct GraphOps {
  void (*capture_begin)();
  // The recorded graph, ready to replay, and the allocator's counts; throws
  // minidl::Error naming the library's error when the capture failed (then
  // nothing is left recording).
  void* (*capture_end)(CaptureCounts* counts);
  bool (*capturing)();  // a capture is in progress
  void (*replay)(void* graph);  // queues the graph on the device's stream
  // Until feed_end: each update call writes its arguments into the graph's
  // next update in capture order (same rule, slices and sizes, or it throws
  // minidl::Error) instead of running; the next replay uses them. Waits for
  // the previous replay to have read the feed.
  void (*feed_begin)(void* graph);
  void (*feed_end)(void* graph);
  void (*destroy)(void* graph);  // waits for its replays to finish
  int64_t (*kernel_launches)(void* graph);  // the kernel launches one replay makes
  // Optional: the most device memory the graphs' replays have held at once
  // (CUDA's graph memory pool), apart from the allocator's bytes.
  int64_t (*pool_bytes)();
};

}  // namespace minidl
