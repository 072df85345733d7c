// Cell (alias Layer): the base of every layer, loss and model.
//
// A Cell owns named parameters (tensors that require grad), named buffers
// (state that is saved but not trained) and named child cells. Names compose
// into dotted paths in registration order, depth first: a LeNet's
// named_parameters() are conv1.weight, conv1.bias, ..., fc3.bias, and those
// paths key state_dict() and the safetensors checkpoints of save()/load().
//
//   struct Net : nn::Cell {
//     nn::Dense fc1{4, 8}, fc2{8, 2};
//     Net() { register_cells({{"fc1", fc1}, {"fc2", fc2}}); }
//     Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
//   };
//
// Cells are neither copyable nor movable: parameters are shared handles and
// a parent keeps pointers to member children, so a copy would silently alias
// (or dangle). Hold cells by value as members, or by std::shared_ptr.
#pragma once
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/autograd.h"
#include "framework/safetensors.h"
#include "framework/tensor.h"

namespace minidl::nn {

class Cell {
 public:
  Cell() = default;
  virtual ~Cell() = default;
  Cell(const Cell&) = delete;
  Cell& operator=(const Cell&) = delete;
  Cell(Cell&&) = delete;
  Cell& operator=(Cell&&) = delete;

  // One-input cells override this; the default throws minidl::Error.
  virtual Tensor forward(const Tensor& x);
  // Two-input cells (MatMul, losses, WithLossCell) override this one.
  virtual Tensor forward(const Tensor& a, const Tensor& b);
  // Calls forward. While scope tracking is on (framework/autograd.h), the
  // autograd nodes it records carry this cell's registration path as scope.
  Tensor operator()(const Tensor& x) {
    if (!scope_tracking()) return forward(x);
    CallScope scope(*this);
    return forward(x);
  }
  Tensor operator()(const Tensor& a, const Tensor& b) {
    if (!scope_tracking()) return forward(a, b);
    CallScope scope(*this);
    return forward(a, b);
  }

  // ---- registration (names: non-empty, no '.', unique within this cell) ----
  // Registers `value` (a defined float leaf) as a parameter and makes it
  // require grad; returns the same handle.
  Tensor register_parameter(const std::string& name, Tensor value);
  // Saved in state_dict() but not returned by parameters().
  Tensor register_buffer(const std::string& name, Tensor value);
  // A member child: not owned, must outlive this cell (members do).
  Cell& register_cell(const std::string& name, Cell& child);
  // An owned child.
  template <class C>
  std::shared_ptr<C> register_cell(const std::string& name, std::shared_ptr<C> child) {
    add_child(name, child.get(), child);
    return child;
  }
  struct NamedCell {
    std::string name;
    Cell& cell;
  };
  // register_cells({{"conv1", conv1}, {"fc1", fc1}}): member children, in order.
  void register_cells(std::initializer_list<NamedCell> cells);

  // ---- traversal (registration order; own entries before children's) ----
  std::vector<Tensor> parameters() const;
  std::vector<Tensor> trainable_params() const;  // those requiring grad
  TensorDict named_parameters() const;           // "conv1.weight", ...
  TensorDict named_buffers() const;
  const std::vector<std::pair<std::string, Cell*>>& children() const { return children_; }

  // ---- mode (recursive); Dropout is active only in training mode ----
  void train(bool on = true);
  void set_train(bool on = true) { train(on); }  // MindSpore's spelling
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Drops every parameter's gradient (PyTorch's set_to_none).
  void zero_grad();
  // Moves every parameter and buffer to `device` in place (the handles stay,
  // so named_parameters() and held copies see the move; gradients are
  // dropped). Create the optimizer after the move, as in PyTorch: its state
  // lives on the device its parameters were on when it first updated them.
  void to(Device device);

  // ---- checkpoints ----
  // Parameters then buffers, by dotted name. Values share storage with the
  // cell's tensors (detached from autograd).
  TensorDict state_dict() const;
  // Copies values in place into the existing tensors (dtype converted), so
  // optimizers holding the parameters see the new values. Validates first:
  // names missing from `dict` and unexpected names (only when strict), and
  // shape mismatches (always) are reported together in one minidl::Error,
  // and nothing is copied.
  void load_state_dict(const TensorDict& dict, bool strict = true);
  // state_dict() to / from a safetensors file (framework/safetensors.h).
  void save(const std::string& path) const;
  void load(const std::string& path, bool strict = true);

  // The dynamic type's name ("minidl::nn::Dense"), for error messages.
  std::string type_name() const;

 protected:
  // The scope of one call: the caller's path plus the name under which the
  // caller registered this cell; a cell called from no cell gets its short
  // type name ("LeNet5"), a child of such a root just its own name ("conv1").
  // operator() opens one around forward; a cell's other entry points (such as
  // Conv2d::relu_max_pool) open their own.
  class CallScope {
   public:
    explicit CallScope(const Cell& cell);
    ~CallScope();
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;

   private:
    static const char* enter(const Cell& cell);  // pushes the call; returns its scope
    ScopeGuard guard_;
  };

 private:
  void check_name(const std::string& name, const char* what) const;
  void add_child(const std::string& name, Cell* child, std::shared_ptr<Cell> owned);
  void collect(const std::string& prefix, bool buffers, TensorDict& out) const;

  std::vector<std::pair<std::string, Tensor>> params_, buffers_;
  std::vector<std::pair<std::string, Cell*>> children_;
  std::vector<std::shared_ptr<Cell>> owned_;
  bool training_ = true;
};

using Layer = Cell;

}  // namespace minidl::nn
