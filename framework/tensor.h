// Tensor: an n-dimensional, strided, reference-counted array on a device
// (the CPU, or a CUDA GPU when minidl is built with CUDA; see device.h).
//
// A Tensor is a handle: copies share the same impl (like torch::Tensor).
// Views share storage, as PyTorch's do: transpose, permute, expand, narrow,
// slice, split, chunk, squeeze, unsqueeze, and reshape/view/flatten where the
// strides allow (else reshape copies). A write through a view (copy_, fill_,
// set) lands in the base; an expanded view (stride 0) cannot be written.
// Factories and ops return contiguous (row-major) tensors; ops accept views
// and read them through a contiguous copy where their kernel needs one.
// data<T>() and data_ptr<T>() hand out row-major memory only: on a
// non-contiguous view they throw (call .contiguous() first).
// Autograd state (requires_grad, grad, the node that produced the tensor)
// lives in the impl; see autograd.h.
// Device: factories take one (the CPU by default); .to(device), .cuda() and
// .cpu() copy (with autograd). data<T>() is for host code and throws on a
// CUDA tensor; item(), at(), to_vector() and printing copy to the host first.
// An op on tensors of two devices throws naming both.
#pragma once
#include <functional>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <vector>

#include "framework/device.h"
#include "framework/dtype.h"
#include "framework/error.h"

namespace minidl {

// A block of bytes from a device's allocator (64-byte aligned), or a view of
// a caller's host buffer, or a host block pinned for copies to a device.
struct Storage {
  Storage(size_t nbytes, Device device);
  Storage(void* external, size_t nbytes);  // host memory, not owned
  // Host memory from `for_device`'s pinned allocator (backend/kernels.h,
  // allocate_pinned): copies from it to that device run asynchronously.
  static std::shared_ptr<Storage> pinned(size_t nbytes, Device for_device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data = nullptr;
  size_t nbytes = 0;
  Device device = Device::CPU;
  bool owned = true;
  Device pinned_for = Device::CPU;  // not the CPU: a pinned host block for that device
};

// Bytes held by live tensor storages (owned ones) on a device, and the peak
// since the last reset: a measure of activation memory for tests and benchmarks.
// Live tensors' bytes now and at their peak. graph_bytes: the most memory
// CUDA graph replays have held at once (their own pool, apart from the
// tensors' bytes; 0 elsewhere).
struct MemoryStats {
  int64_t current_bytes = 0, peak_bytes = 0, graph_bytes = 0;
};
MemoryStats memory_stats(Device device = Device::CPU);
void reset_peak_memory(Device device = Device::CPU);  // peak := current

class Tensor;
struct Node;
using GradHook = std::function<void(Tensor& grad)>;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  size_t offset = 0;  // in bytes
  Shape shape;
  // Element strides, one per dim; empty means row-major contiguous (what
  // every factory and op output has). Never negative.
  std::vector<int64_t> strides;
  DType dtype = kFloat32;
  Device device = Device::CPU;
  // autograd
  bool requires_grad = false;
  bool graph_freed = false;           // a non-leaf whose graph backward() released
  std::shared_ptr<TensorImpl> grad;   // leaves: accumulated gradient
  std::shared_ptr<Node> grad_fn;      // non-leaves: the op that made it
  std::vector<GradHook> ready_hooks;  // leaves: fire once grad is final in a backward
};

class Tensor {
 public:
  Tensor() = default;  // undefined tensor
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories (float32 on the CPU unless a dtype and device are given) ----
  // Throws when the shape has a negative dim or more elements than fit int64.
  static Tensor empty(const Shape& shape, DType dtype = kFloat32, Device device = Device::CPU);
  static Tensor zeros(const Shape& shape, DType dtype = kFloat32, Device device = Device::CPU);
  static Tensor ones(const Shape& shape, DType dtype = kFloat32, Device device = Device::CPU);
  static Tensor full(const Shape& shape, double value, DType dtype = kFloat32,
                     Device device = Device::CPU);
  // A CPU tensor in host memory pinned for copies to `for_device` (page-locked
  // for CUDA: .to(for_device) then queues the copy and returns at once); for
  // the CPU, an ordinary empty tensor.
  static Tensor empty_pinned(const Shape& shape, DType dtype, Device for_device);
  // 0, 1, ..., n-1; start, start + step, ... (< end), each start + i * step
  // computed in double, then converted; made on `device` (no host copy)
  static Tensor arange(int64_t n, DType dtype = kFloat32, Device device = Device::CPU);
  static Tensor arange(double start, double end, double step = 1, DType dtype = kFloat32,
                       Device device = Device::CPU);
  // The rest make CPU tensors (move them with .to(device)).
  // Copies values; the shape defaults to [values.size()].
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape = {});
  static Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape = {});
  static Tensor from_vector(const std::vector<int32_t>& values, const Shape& shape = {});
  // Literals: Tensor::of({1, 2, 3, 4}, {2, 2}); Tensor::of_ints({3, 1}) is int64.
  static Tensor of(std::initializer_list<float> values, const Shape& shape = {});
  static Tensor of_ints(std::initializer_list<int64_t> values, const Shape& shape = {},
                        DType dtype = kInt64);
  // Copies (or, with copy = false, wraps without owning) a raw buffer.
  static Tensor from_blob(void* data, const Shape& shape, DType dtype, bool copy = true);
  // Random numbers from the global generator (random.h); same seed, same numbers.
  static Tensor randn(const Shape& shape, double mean = 0, double std = 1);
  static Tensor rand(const Shape& shape, double low = 0, double high = 1);
  static Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = kInt64);

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const;
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().device; }
  bool is_pinned() const;  // in a host block from empty_pinned for a device other than the CPU
  size_t nbytes() const { return numel() * dtype_size(dtype()); }
  std::vector<int64_t> strides() const;  // in elements; row-major ones when contiguous
  bool is_contiguous() const;  // row-major (dims of size 1 may have any stride)
  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- raw data (checked dtype) ----
  // Host code: throws for a tensor that is not on the CPU. Both throw for a
  // non-contiguous view.
  template <class T> T* data() const;
  void* raw_data() const;
  // Kernels: a pointer on the tensor's own device.
  template <class T> T* data_ptr() const;
  void* raw_data_ptr() const;

  // ---- element access for tests and printing (copies to the host) ----
  double item() const;                     // one-element tensors only
  double at(std::initializer_list<int64_t> index) const;  // any dtype, read as double
  void set(std::initializer_list<int64_t> index, double value);  // no autograd
  std::vector<float> to_float_vector() const;  // any dtype, converted
  template <class T> std::vector<T> to_vector() const;  // exact dtype

  // ---- views and copies ----
  Tensor reshape(const Shape& shape) const;  // one dim may be -1; shares storage
  Tensor view(const Shape& shape) const { return reshape(shape); }
  Tensor flatten(int64_t start_dim = 0) const;  // dims start_dim.. merged
  Tensor transpose(int64_t d0, int64_t d1) const;  // a view
  Tensor t() const { return transpose(0, 1); }
  Tensor slice(int64_t start, int64_t end) const;  // rows [start, end) of dim 0; a view
  // ---- shape ops of issue 22 (ops.h has the contracts), all views ----
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor unsqueeze(int64_t d) const;
  Tensor squeeze(int64_t d) const;
  Tensor narrow(int64_t d, int64_t start, int64_t length) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t d = 0) const;
  Tensor expand(const Shape& shape) const;
  Tensor contiguous() const;  // itself when contiguous, else a row-major copy (in the graph)
  Tensor clone() const;                            // a contiguous copy, in the graph
  Tensor detach() const;                           // same storage, out of the graph
  Tensor to(DType dtype) const;                    // cast (ops.h: float to int saturates)
  Tensor to(Device device) const;                  // copy (autograd through float types)
  Tensor cuda() const { return to(Device::CUDA); }
  Tensor cpu() const { return to(Device::CPU); }
  // In-place, no autograd; same numel (elements in row-major order); any
  // dtypes and devices; through a view into its base.
  void copy_(const Tensor& src);
  void fill_(double value);                        // in-place, no autograd
  void increment_();  // += 1 in place, no autograd, int64 only (a counter: exact past 2^24)

  // ---- math (see ops.h for the full list) ----
  Tensor sum(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor mean(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor max(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor matmul(const Tensor& o) const;
  Tensor pow(double e) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;

  // ---- autograd ----
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& requires_grad_(bool on = true);  // leaves only
  bool is_leaf() const { return impl().grad_fn == nullptr && !impl().graph_freed; }
  Tensor grad() const;          // undefined until a backward reaches this leaf
  void set_grad(const Tensor& g) const;  // replace the gradient (a handle method)
  void zero_grad();             // drops the gradient (PyTorch's set_to_none)
  // Backpropagates from this scalar (or with an explicit output gradient).
  void backward(const Tensor& grad_output = Tensor()) const;
  // Calls hook(grad) each time backward() has finished accumulating this leaf's
  // gradient for the pass: the data-parallel reducer starts allreduce from it.
  void register_grad_ready_hook(GradHook hook);

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

// Shape helpers shared by ops. numel_of throws when a dim is negative or the
// product overflows int64.
int64_t numel_of(const Shape& shape);
int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op);

}  // namespace minidl
