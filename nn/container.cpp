#include "nn/container.h"

#include <string>

namespace minidl::nn {

Tensor SequentialCell::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& c : *this) h = (*c)(h);
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

// ---- ModuleList, ModuleDict (issue 22) ----

ModuleList::ModuleList(const char* name, std::initializer_list<std::shared_ptr<Cell>> cells)
    : name_(name) {
  for (const auto& c : cells) push_back(c);
}

void ModuleList::push_back(std::shared_ptr<Cell> cell) {
  MINIDL_CHECK(cell, name_, "::push_back: cell ", cells_.size(), " is null");
  register_cell(std::to_string(cells_.size()), cell);
  cells_.push_back(std::move(cell));
}

Cell& ModuleList::operator[](size_t i) const {
  MINIDL_CHECK(i < cells_.size(), name_, ": index ", i, " out of range for ", cells_.size(),
               " cells");
  return *cells_[i];
}

ModuleDict::ModuleDict(std::initializer_list<std::pair<std::string, std::shared_ptr<Cell>>> cells) {
  for (const auto& [name, c] : cells) insert(name, c);
}

void ModuleDict::insert(const std::string& name, std::shared_ptr<Cell> cell) {
  MINIDL_CHECK(cell, "ModuleDict::insert: cell '", name, "' is null");
  register_cell(name, cell);  // checks the name
  cells_.emplace_back(name, std::move(cell));
}

bool ModuleDict::contains(const std::string& name) const {
  for (const auto& [n, c] : cells_)
    if (n == name) return true;
  return false;
}

Cell& ModuleDict::operator[](const std::string& name) const {
  for (const auto& [n, c] : cells_)
    if (n == name) return *c;
  std::string names;
  for (const auto& [n, c] : cells_) names += (names.empty() ? "" : ", ") + n;
  throw Error(
      cat("ModuleDict: no cell named '", name, "' (it holds ", cells_.size(), ": ", names, ")"));
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& [n, c] : cells_) out.push_back(n);
  return out;
}

}  // namespace minidl::nn
