// SequentialCell (a chain of owned cells) and WithLossCell (network + loss).
#pragma once
#include <initializer_list>
#include <memory>

#include "nn/cell.h"

namespace minidl::nn {

// forward(x) = cells[n-1](...cells[1](cells[0](x))). Children are owned and
// named "0", "1", ... (parameters "0.weight", "2.bias", ...).
//   nn::SequentialCell mlp{std::make_shared<nn::Dense>(784, 128),
//                          std::make_shared<nn::ReLU>(),
//                          std::make_shared<nn::Dense>(128, 10)};
class SequentialCell : public Cell {
 public:
  SequentialCell() = default;
  SequentialCell(std::initializer_list<std::shared_ptr<Cell>> cells);
  void push_back(std::shared_ptr<Cell> cell);  // null throws minidl::Error
  size_t size() const { return cells_.size(); }
  Cell& operator[](size_t i) const;  // out of range throws minidl::Error
  using Cell::forward;
  Tensor forward(const Tensor& x) override;

 private:
  std::vector<std::shared_ptr<Cell>> cells_;
};

// forward(data, label) = loss(network(data), label), the scalar to call
// backward() on. Its parameters are the network's ("network.<name>") and the
// loss's ("loss.<name>", usually none). The references form keeps pointers:
// the network and loss must outlive this cell.
class WithLossCell : public Cell {
 public:
  WithLossCell(Cell& network, Cell& loss);
  WithLossCell(std::shared_ptr<Cell> network, std::shared_ptr<Cell> loss);
  using Cell::forward;
  Tensor forward(const Tensor& data, const Tensor& label) override;
  Cell& network() const { return *network_; }
  Cell& loss() const { return *loss_; }

 private:
  Cell *network_, *loss_;
};

}  // namespace minidl::nn
