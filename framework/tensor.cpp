#include "framework/tensor.h"

#include <cmath>
#include <cstring>
#include <iomanip>

#include "framework/backend/backend.h"
#include "framework/backend/float_to_int.h"
#include "framework/ops.h"
#include "framework/ops/util.h"
#include "framework/random.h"

namespace minidl {

std::string to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    MINIDL_CHECK(d >= 0, "shape ", shape, " has a negative dimension");
    MINIDL_CHECK(!__builtin_mul_overflow(n, d, &n), "shape ", shape,
                 " has more elements than an int64 can count");
  }
  return n;
}

int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t d = dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;  // a 0-d tensor takes 0 and -1
  MINIDL_CHECK(d >= 0 && d < std::max<int64_t>(ndim, 1), op, ": dim ", dim,
               " out of range for a tensor of ", ndim, " dims");
  return d;
}

// ---- storage ----
MemoryStats memory_stats(Device d) {
  const Allocator& a = allocator(d);
  const GraphOps* g = graph_ops(d);
  return {a.current_bytes(), a.peak_bytes(), g && g->pool_bytes ? g->pool_bytes() : 0};
}
void reset_peak_memory(Device d) { allocator(d).reset_peak(); }

Storage::Storage(size_t n, Device d) : data(allocator(d).allocate(n)), nbytes(n), device(d) {}
Storage::Storage(void* external, size_t n) : data(external), nbytes(n), owned(false) {}
std::shared_ptr<Storage> Storage::pinned(size_t n, Device for_device) {
  if (for_device == Device::CPU) return std::make_shared<Storage>(n, Device::CPU);
  auto s = std::make_shared<Storage>(allocator(for_device).allocate_pinned(n), n);
  s->owned = true;
  s->pinned_for = for_device;
  return s;
}
Storage::~Storage() {
  if (!owned) return;
  if (pinned_for != Device::CPU) {
    allocator(pinned_for).deallocate_pinned(data, nbytes);
    return;
  }
  allocator(device).deallocate(data, nbytes);
}

namespace {

// Copies n bytes between any two devices.
void copy_bytes(void* dst, Device dd, const void* src, Device sd, size_t n) {
  if (n == 0) return;
  if (dd == sd) return allocator(dd).copy(dst, src, n, CopyKind::DeviceToDevice);
  MINIDL_CHECK(!capturing(sd == Device::CPU ? dd : sd), "copy from ", device_name(sd), " to ",
               device_name(dd), " inside a CUDA graph capture: ",
               sd == Device::CPU ? "every replay would read that host memory again; copy inputs "
                                   "into the graph's tensors before replay()"
                                 : "the host cannot read the GPU while its work is recorded, not "
                                   "run (item(), cpu(), to_vector(), printing)");
  if (sd == Device::CPU) return allocator(dd).copy(dst, src, n, CopyKind::HostToDevice);
  MINIDL_CHECK(dd == Device::CPU, "copy: from ", device_name(sd), " to ", device_name(dd),
               " is not supported");
  allocator(sd).copy(dst, src, n, CopyKind::DeviceToHost);
}

// t itself on the CPU, else a host copy; contiguous either way.
Tensor on_host(const Tensor& t) {
  const Tensor c = t.contiguous();
  return c.device() == Device::CPU ? c : c.detach().cpu();
}

}  // namespace

// ---- metadata ----
TensorImpl& Tensor::impl() const {
  MINIDL_CHECK(impl_, "use of an undefined tensor");
  return *impl_;
}

int64_t Tensor::size(int64_t d) const {
  MINIDL_CHECK(dim() > 0, "size: dim ", d, " out of range for a tensor of 0 dims");
  return shape()[normalize_dim(d, dim(), "size")];
}
int64_t Tensor::numel() const { return numel_of(shape()); }

std::vector<int64_t> Tensor::strides() const {
  if (!impl().strides.empty()) return impl().strides;
  const Shape& s = shape();
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t d = static_cast<int64_t>(s.size()) - 2; d >= 0; --d)  // past int64 only when
    if (__builtin_mul_overflow(st[d + 1], s[d + 1], &st[d])) st[d] = 0;  // empty: unused then
  return st;
}
bool Tensor::is_contiguous() const {
  const std::vector<int64_t>& st = impl().strides;
  if (st.empty() || numel() == 0) return true;
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (shape()[d] == 1) continue;
    if (st[d] != expected) return false;
    expected *= shape()[d];
  }
  return true;
}

void* Tensor::raw_data_ptr() const {
  MINIDL_CHECK(is_contiguous(), "data: tensor ", shape(), " with strides ", Shape(strides()),
               " is a non-contiguous view; call .contiguous() first");
  return view_ptr(*this);
}
void* Tensor::raw_data() const {
  MINIDL_CHECK(device() == Device::CPU, "raw_data: tensor ", shape(), " is on ",
               device_name(device()), "; copy it to the host with .cpu() first");
  return raw_data_ptr();
}

template <class T>
T* Tensor::data_ptr() const {
  MINIDL_CHECK(dtype() == dtype_of<T>::value, "data<", dtype_name(dtype_of<T>::value),
               ">: tensor ", shape(), " has dtype ", dtype_name(dtype()));
  return static_cast<T*>(raw_data_ptr());
}
template <class T>
T* Tensor::data() const {
  MINIDL_CHECK(device() == Device::CPU, "data<", dtype_name(dtype_of<T>::value), ">: tensor ",
               shape(), " is on ", device_name(device()), "; copy it to the host with .cpu() first");
  return data_ptr<T>();
}
#define MINIDL_DATA(T)                    \
  template T* Tensor::data<T>() const; \
  template T* Tensor::data_ptr<T>() const;
MINIDL_DATA(float)
MINIDL_DATA(Half)
MINIDL_DATA(int32_t)
MINIDL_DATA(int64_t)
#undef MINIDL_DATA

// ---- factories ----
namespace {

// A tensor of `shape` over storage made by make(bytes), on `device`.
template <class Make>
Tensor make_empty(const char* op, const Shape& shape, DType dtype, Device device, Make make) {
  for (int64_t d : shape) MINIDL_CHECK(d >= 0, op, ": negative dimension in shape ", shape);
  int64_t bytes = 0;
  MINIDL_CHECK(!__builtin_mul_overflow(numel_of(shape), int64_t(dtype_size(dtype)), &bytes),
               op, ": shape ", shape, " of ", dtype_name(dtype), " needs more bytes than fit int64");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = make(static_cast<size_t>(bytes));
  impl->shape = shape;
  impl->dtype = dtype;
  impl->device = device;
  return Tensor(std::move(impl));
}

}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  return make_empty("empty", shape, dtype, device,
                    [device](size_t n) { return std::make_shared<Storage>(n, device); });
}

Tensor Tensor::empty_pinned(const Shape& shape, DType dtype, Device for_device) {
  return make_empty("empty_pinned", shape, dtype, Device::CPU,
                    [for_device](size_t n) { return Storage::pinned(n, for_device); });
}

bool Tensor::is_pinned() const { return impl().storage->pinned_for != Device::CPU; }

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}
Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}
Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

Tensor Tensor::arange(int64_t n, DType dtype, Device device) {
  return arange(0, static_cast<double>(n), 1, dtype, device);
}
Tensor Tensor::arange(double start, double end, double step, DType dtype, Device device) {
  MINIDL_CHECK(step != 0, "arange: step must be non-zero");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((end - start) / step)));
  Tensor t = empty({n}, dtype, device);
  kernels(device).fill(dtype, n, start, step, t.raw_data_ptr());  // on the device: no host copy
  return t;
}

template <class T>
static Tensor from_values(const std::vector<T>& values, const Shape& shape) {
  Shape s = shape.empty() ? Shape{static_cast<int64_t>(values.size())} : shape;
  MINIDL_CHECK(numel_of(s) == static_cast<int64_t>(values.size()), "from_vector: shape ", s,
               " holds ", numel_of(s), " elements but ", values.size(), " values were given");
  Tensor t = Tensor::empty(s, dtype_of<T>::value);
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  return t;
}
Tensor Tensor::from_vector(const std::vector<float>& v, const Shape& s) { return from_values(v, s); }
Tensor Tensor::from_vector(const std::vector<int64_t>& v, const Shape& s) { return from_values(v, s); }
Tensor Tensor::from_vector(const std::vector<int32_t>& v, const Shape& s) { return from_values(v, s); }

Tensor Tensor::of(std::initializer_list<float> v, const Shape& s) {
  return from_values(std::vector<float>(v), s);
}
Tensor Tensor::of_ints(std::initializer_list<int64_t> v, const Shape& s, DType dtype) {
  return from_values(std::vector<int64_t>(v), s).to(dtype);
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, bool copy) {
  MINIDL_CHECK(data || numel_of(shape) == 0, "from_blob: null data for shape ", shape);
  if (copy) {
    Tensor t = empty(shape, dtype);
    std::memcpy(t.raw_data(), data, t.nbytes());
    return t;
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(data, numel_of(shape) * dtype_size(dtype));
  impl->shape = shape;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::randn(const Shape& shape, double mean, double std) {
  Tensor t = empty(shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = static_cast<float>(mean + std * default_generator().normal());
  return t;
}
Tensor Tensor::rand(const Shape& shape, double low, double high) {
  Tensor t = empty(shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = static_cast<float>(low + (high - low) * default_generator().uniform());
  return t;
}
Tensor Tensor::randint(int64_t low, int64_t high, const Shape& shape, DType dtype) {
  MINIDL_CHECK(high > low, "randint: empty range [", low, ", ", high, ")");
  Tensor t = empty(shape, kInt64);
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = default_generator().randint(low, high);
  return t.to(dtype);
}

// ---- element access ----
// Element i of host memory p holding dtype t, as double.
static double read_as_double(DType t, const void* p, int64_t i) {
  switch (t) {
    case kFloat32: return static_cast<const float*>(p)[i];
    case kFloat16: return half_to_float(static_cast<const Half*>(p)[i]);
    case kInt32: return static_cast<const int32_t*>(p)[i];
    case kInt64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
  }
  return 0;
}

// Element 0 of host memory p holding dtype t <- v, converted as cast does.
static void write_double(DType t, void* p, double v) {
  switch (t) {
    case kFloat32: *static_cast<float*>(p) = static_cast<float>(v); break;
    case kFloat16: *static_cast<Half*>(p) = float_to_half(static_cast<float>(v)); break;
    case kInt32: *static_cast<int32_t*>(p) = float_to_int<int32_t>(v); break;
    case kInt64: *static_cast<int64_t*>(p) = float_to_int<int64_t>(v); break;
  }
}

// Byte address (on t's device) of t[index], through t's strides.
static char* element_ptr(const Tensor& t, std::initializer_list<int64_t> index, const char* op) {
  MINIDL_CHECK(static_cast<int64_t>(index.size()) == t.dim(), op, ": ", index.size(),
               " indices for a tensor of shape ", t.shape());
  const std::vector<int64_t>& st = t.impl().strides;  // empty: row-major (no copy: at() runs in loops)
  int64_t at = 0, d = 0;
  for (int64_t i : index) {
    MINIDL_CHECK(i >= 0 && i < t.shape()[d], op, ": index ", i, " out of range for dim ", d,
                 " of size ", t.shape()[d], " (shape ", t.shape(), ")");
    at = st.empty() ? at * t.shape()[d] + i : at + i * st[d];
    ++d;
  }
  return view_ptr(t) + at * dtype_size(t.dtype());
}

double Tensor::item() const {
  MINIDL_CHECK(numel() == 1, "item: expected a tensor with one element, got shape ", shape());
  const Tensor h = on_host(*this);
  return read_as_double(h.dtype(), h.raw_data(), 0);
}
double Tensor::at(std::initializer_list<int64_t> index) const {
  const char* p = element_ptr(*this, index, "at");
  if (device() == Device::CPU) return read_as_double(dtype(), p, 0);
  alignas(8) char one[8];  // one element through the host
  copy_bytes(one, Device::CPU, p, device(), dtype_size(dtype()));
  return read_as_double(dtype(), one, 0);
}
void Tensor::set(std::initializer_list<int64_t> index, double value) {
  char* p = element_ptr(*this, index, "set");
  if (device() == Device::CPU) return write_double(dtype(), p, value);
  alignas(8) char one[8];  // one element through the host
  write_double(dtype(), one, value);
  copy_bytes(p, device(), one, Device::CPU, dtype_size(dtype()));
}
std::vector<float> Tensor::to_float_vector() const {
  Tensor h = on_host(*this);
  std::vector<float> v(numel());
  const void* p = h.raw_data();
  for (int64_t i = 0; i < numel(); ++i) v[i] = static_cast<float>(read_as_double(h.dtype(), p, i));
  return v;
}
template <class T>
std::vector<T> Tensor::to_vector() const {
  const Tensor h = on_host(*this);  // alive while p is read
  const T* p = h.data<T>();
  return std::vector<T>(p, p + numel());
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;

void Tensor::fill_(double value) {
  if (is_contiguous()) return kernels(device()).fill(dtype(), numel(), value, /*step=*/0, raw_data_ptr());
  copy_(Tensor::full(shape(), value, dtype(), device()));
}

void Tensor::increment_() {
  MINIDL_CHECK(dtype() == kInt64, "increment_: expected an int64 tensor, got ",
               dtype_name(dtype()));
  if (is_contiguous())
    return kernels(device()).increment(numel(), static_cast<int64_t*>(raw_data_ptr()));
  Tensor c = contiguous();
  c.increment_();
  copy_(c);
}

void Tensor::copy_(const Tensor& src) {
  MINIDL_CHECK(src.numel() == numel(), "copy_: source ", src.shape(), " and destination ",
               shape(), " differ in size");
  Tensor c = src.dtype() == dtype() ? src.detach() : src.detach().to(dtype());
  if (is_contiguous() && c.is_contiguous())
    return copy_bytes(raw_data_ptr(), device(), c.raw_data_ptr(), c.device(), nbytes());
  if (c.device() != device() || c.shape() != shape()) c = c.contiguous().to(device()).reshape(shape());
  copy_view(c, *this);
}

// ---- views ----
Tensor Tensor::reshape(const Shape& s) const { return minidl::reshape(*this, s); }
Tensor Tensor::flatten(int64_t start) const { return minidl::flatten(*this, start); }
Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return minidl::transpose(*this, d0, d1); }
Tensor Tensor::slice(int64_t start, int64_t end) const { return minidl::slice(*this, start, end); }
Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  return minidl::permute(*this, dims);
}
Tensor Tensor::unsqueeze(int64_t d) const { return minidl::unsqueeze(*this, d); }
Tensor Tensor::squeeze(int64_t d) const { return minidl::squeeze(*this, d); }
Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  return minidl::narrow(*this, d, start, length);
}
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t d) const {
  return minidl::chunk(*this, chunks, d);
}
Tensor Tensor::expand(const Shape& shape) const { return minidl::expand(*this, shape); }
Tensor Tensor::contiguous() const { return minidl::contiguous(*this); }
Tensor Tensor::clone() const {
  if (is_floating(dtype())) return *this * 1.0;
  Tensor t = empty(shape(), dtype(), device());  // integers: no autograd, a plain copy
  t.copy_(*this);
  return t;
}
Tensor Tensor::to(DType t) const { return cast(*this, t); }

// x -> the same values on `d`; the gradient goes back to x's device
Tensor Tensor::to(Device d) const {
  if (device() == d) return *this;
  if (!is_contiguous()) return contiguous().to(d);
  Tensor out;
  const Allocator& a = allocator(d);
  if (impl().storage->pinned_for == d && a.upload && !capturing(d)) {
    // a batch pinned for d goes up on d's copy stream, overlapping its compute
    out = make_empty("to", shape(), dtype(), d, [&](size_t n) {
      auto s = std::make_shared<Storage>(a.upload(raw_data_ptr(), n), n);
      s->device = d, s->owned = true;
      return s;
    });
  } else {
    out = empty(shape(), dtype(), d);
    copy_bytes(out.raw_data_ptr(), d, raw_data_ptr(), device(), nbytes());
  }
  if (!is_floating(dtype())) return out;
  const Device from = device();
  return record(out, "to", {*this}, [from](const Tensor& g) {
    return std::vector<Tensor>{g.to(from)};
  });
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = this->impl().storage;
  impl->offset = this->impl().offset;
  impl->shape = shape();
  impl->strides = this->impl().strides;
  impl->dtype = dtype();
  impl->device = device();
  return Tensor(std::move(impl));
}

// ---- math forwards ----
Tensor Tensor::sum(const std::vector<int64_t>& d, bool k) const { return minidl::sum(*this, d, k); }
Tensor Tensor::mean(const std::vector<int64_t>& d, bool k) const { return minidl::mean(*this, d, k); }
Tensor Tensor::max(const std::vector<int64_t>& d, bool k) const { return minidl::max(*this, d, k); }
Tensor Tensor::matmul(const Tensor& o) const { return minidl::matmul(*this, o); }
Tensor Tensor::pow(double e) const { return minidl::pow(*this, e); }
Tensor Tensor::exp() const { return minidl::exp(*this); }
Tensor Tensor::log() const { return minidl::log(*this); }
Tensor Tensor::sqrt() const { return minidl::sqrt(*this); }
Tensor Tensor::relu() const { return minidl::relu(*this); }
Tensor Tensor::sigmoid() const { return minidl::sigmoid(*this); }
Tensor Tensor::tanh() const { return minidl::tanh(*this); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
// t (op) v, or v (op) t with scalar_left. A float16 t is computed in float32,
// so v is not rounded to float16 first (1e5 would become inf).
template <class Op>
static Tensor scalar_op(const Tensor& t, double v, bool scalar_left, Op op) {
  if (t.dtype() == kFloat16) return cast(scalar_op(cast(t, kFloat32), v, scalar_left, op), kFloat16);
  Tensor s = scalar_like(v, t);
  return scalar_left ? op(s, t) : op(t, s);
}
Tensor operator+(const Tensor& a, double b) { return scalar_op(a, b, false, add); }
Tensor operator-(const Tensor& a, double b) { return scalar_op(a, b, false, sub); }
Tensor operator*(const Tensor& a, double b) { return scalar_op(a, b, false, mul); }
Tensor operator/(const Tensor& a, double b) { return scalar_op(a, b, false, div); }
Tensor operator+(double a, const Tensor& b) { return scalar_op(b, a, true, add); }
Tensor operator-(double a, const Tensor& b) { return scalar_op(b, a, true, sub); }
Tensor operator*(double a, const Tensor& b) { return scalar_op(b, a, true, mul); }
Tensor operator/(double a, const Tensor& b) { return scalar_op(b, a, true, div); }

// ---- autograd accessors ----
Tensor& Tensor::requires_grad_(bool on) {
  MINIDL_CHECK(is_leaf(), "requires_grad_: only leaf tensors can change requires_grad");
  MINIDL_CHECK(!on || is_floating(dtype()), "requires_grad_: only float tensors can require "
               "grad, got ", dtype_name(dtype()));
  impl().requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const { return Tensor(impl().grad); }

void Tensor::set_grad(const Tensor& g) const {
  MINIDL_CHECK(!g.defined() || g.shape() == shape(), "set_grad: gradient ", g.shape(),
               " does not match tensor ", shape());
  impl().grad = g.defined() ? g.impl_ptr() : nullptr;
}

void Tensor::zero_grad() { impl().grad = nullptr; }

void Tensor::backward(const Tensor& grad_output) const { run_backward(*this, grad_output); }

void Tensor::register_grad_ready_hook(GradHook hook) {
  MINIDL_CHECK(is_leaf(), "register_grad_ready_hook: only leaf tensors have grad-ready hooks");
  impl().ready_hooks.push_back(std::move(hook));
}

// ---- printing ----
std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(undefined)";
  os << "Tensor(shape=" << to_string(t.shape()) << ", dtype=" << dtype_name(t.dtype());
  if (t.device() != Device::CPU) os << ", device=" << device_name(t.device());
  os << ", [";
  const Tensor h = on_host(t);
  int64_t n = t.numel(), shown = std::min<int64_t>(n, 20);
  for (int64_t i = 0; i < shown; ++i) os << (i ? ", " : "") << read_as_double(h.dtype(), h.raw_data(), i);
  if (shown < n) os << ", ...";
  return os << "])";
}

}  // namespace minidl
