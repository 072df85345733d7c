// CUDA graphs (PyTorch's torch.cuda.CUDAGraph): record the kernels a piece of
// host code queues on the GPU once, then run them all again with one launch.
//
//   Tensor x = Tensor::zeros({64, 784}, kFloat32, Device::CUDA);  // static input
//   Tensor y = Tensor::zeros({64, 10}, kFloat32, Device::CUDA);   // static output
//   cuda::Graph graph;
//   graph.capture([&] { y.copy_(net(x)); });  // recorded, not run
//   for (const Tensor& batch : batches) { x.copy_(batch); graph.replay(); use(y); }
//
// A replay runs the same kernels on the same memory: it reads what the
// tensors made before the capture hold by then, and writes the same tensors.
// Host values given to the kernels (shapes, scalars) are the capture's, with
// one exception: an optimizer step recorded in the graph takes its learning
// rate and step counts from feed([&] { optimizer.step(); }) before a replay.
// Inside capture():
// - nothing reads the GPU from the host (item(), cpu(), to_vector(),
//   printing) and nothing is copied from host memory to it: both throw;
// - dropout throws (its seed would be the same at every replay);
// - every tensor made inside must die inside (keep results by copying them
//   into tensors made before), and no tensor made before may die inside:
//   capture() throws otherwise, naming how many, and leaves nothing captured.
// Model (ModelOptions::cuda_graph) and parallel::GraphedStep use it for a
// whole training step.
#pragma once
#include <cstdint>
#include <functional>

namespace minidl::cuda {

class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Records what `work` queues on the GPU, replacing any earlier capture.
  // Throws minidl::Error without a CUDA device (a CPU-only build included).
  void capture(const std::function<void()>& work);
  // Queues the recorded kernels on the GPU's stream; throws when nothing is captured.
  void replay();
  // Runs `host`, whose optimizer steps refresh the recorded ones' learning
  // rates and step counts (in order, same parameters) instead of running.
  void feed(const std::function<void()>& host);
  bool captured() const { return graph_ != nullptr; }
  void reset();  // drops the capture (after its replays have finished)
  int64_t kernel_launches() const;  // the kernel launches a replay makes (0: nothing captured)

 private:
  void* graph_ = nullptr;
};

// True while a capture is in progress (inside Graph::capture).
bool is_capturing();

}  // namespace minidl::cuda
