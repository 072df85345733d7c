#include "nn/container.h"

#include <string>

namespace minidl::nn {

SequentialCell::SequentialCell(std::initializer_list<std::shared_ptr<Cell>> cells) {
  for (const auto& c : cells) push_back(c);
}

void SequentialCell::push_back(std::shared_ptr<Cell> cell) {
  MINIDL_CHECK(cell, "SequentialCell::push_back: cell ", cells_.size(), " is null");
  register_cell(std::to_string(cells_.size()), cell);
  cells_.push_back(std::move(cell));
}

Cell& SequentialCell::operator[](size_t i) const {
  MINIDL_CHECK(i < cells_.size(), "SequentialCell: index ", i, " out of range for ", cells_.size(),
               " cells");
  return *cells_[i];
}

Tensor SequentialCell::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& c : cells_) h = (*c)(h);
  return h;
}

WithLossCell::WithLossCell(Cell& network, Cell& loss) : network_(&network), loss_(&loss) {
  register_cells({{"network", network}, {"loss", loss}});
}

WithLossCell::WithLossCell(std::shared_ptr<Cell> network, std::shared_ptr<Cell> loss)
    : network_(network.get()), loss_(loss.get()) {
  MINIDL_CHECK(network && loss, "WithLossCell: network and loss must not be null");
  register_cell("network", std::move(network));
  register_cell("loss", std::move(loss));
}

Tensor WithLossCell::forward(const Tensor& data, const Tensor& label) {
  return (*loss_)((*network_)(data), label);
}

}  // namespace minidl::nn
