// ModuleList and ModuleDict (owned cells in order, by name), SequentialCell
// (a chain of owned cells) and WithLossCell (network + loss).
#pragma once
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/cell.h"

namespace minidl::nn {

// Owned cells held in order, for a forward that calls them itself (a stack of
// transformer blocks). Children are named "0", "1", ..., so parameters read
// "blocks.0.attn.in_proj_weight" from a parent that registers it as "blocks".
// It has no forward of its own (calling it throws minidl::Error).
//   nn::ModuleList blocks;
//   for (int i = 0; i < 4; ++i) blocks.push_back(std::make_shared<Block>());
//   for (auto& b : blocks) x = (*b)(x);
class ModuleList : public Cell {
 public:
  ModuleList() = default;
  ModuleList(std::initializer_list<std::shared_ptr<Cell>> cells)
      : ModuleList("ModuleList", cells) {}
  void push_back(std::shared_ptr<Cell> cell);  // null throws minidl::Error
  size_t size() const { return cells_.size(); }
  bool empty() const { return cells_.empty(); }
  Cell& operator[](size_t i) const;  // out of range throws minidl::Error
  // The i-th cell as its own type; throws when out of range or of another type.
  template <class C>
  C& at(size_t i) const {
    C* c = dynamic_cast<C*>(&(*this)[i]);
    MINIDL_CHECK(c, name_, ": cell ", i, " is a ", (*this)[i].type_name(),
                 ", not the type asked for");
    return *c;
  }
  auto begin() const { return cells_.begin(); }  // std::shared_ptr<Cell> in order
  auto end() const { return cells_.end(); }

 protected:
  // name: the container's, for errors ("SequentialCell")
  ModuleList(const char* name, std::initializer_list<std::shared_ptr<Cell>> cells);

 private:
  const char* name_ = "ModuleList";
  std::vector<std::shared_ptr<Cell>> cells_;
};

// forward(x) = cells[n-1](...cells[1](cells[0](x))). Children are owned and
// named "0", "1", ... (parameters "0.weight", "2.bias", ...); push_back, size,
// operator[] and iteration are ModuleList's.
//   nn::SequentialCell mlp{std::make_shared<nn::Dense>(784, 128),
//                          std::make_shared<nn::ReLU>(),
//                          std::make_shared<nn::Dense>(128, 10)};
class SequentialCell : public ModuleList {
 public:
  SequentialCell() : ModuleList("SequentialCell", {}) {}
  SequentialCell(std::initializer_list<std::shared_ptr<Cell>> cells)
      : ModuleList("SequentialCell", cells) {}
  using Cell::forward;
  Tensor forward(const Tensor& x) override;
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

// ---- ModuleDict (issue 22; ModuleList, above, is the base of SequentialCell) ----

// Owned cells by name, in insertion order (the order of parameters() and
// state_dict()); each is registered under its name ("heads.cls.weight").
//   nn::ModuleDict heads;
//   heads.insert("cls", std::make_shared<nn::Dense>(64, 10));
//   Tensor logits = heads["cls"](h);
class ModuleDict : public Cell {
 public:
  ModuleDict() = default;
  ModuleDict(std::initializer_list<std::pair<std::string, std::shared_ptr<Cell>>> cells);
  // A null cell, or a name that is empty, holds '.' or is taken, throws minidl::Error.
  void insert(const std::string& name, std::shared_ptr<Cell> cell);
  size_t size() const { return cells_.size(); }
  bool empty() const { return cells_.empty(); }
  bool contains(const std::string& name) const;
  Cell& operator[](const std::string& name) const;  // an unknown name throws minidl::Error
  template <class C>
  C& at(const std::string& name) const {
    C* c = dynamic_cast<C*>(&(*this)[name]);
    MINIDL_CHECK(c, "ModuleDict: cell '", name, "' is a ", (*this)[name].type_name(),
                 ", not the type asked for");
    return *c;
  }
  std::vector<std::string> keys() const;
  auto begin() const { return cells_.begin(); }  // (name, std::shared_ptr<Cell>) in order
  auto end() const { return cells_.end(); }

 private:
  std::vector<std::pair<std::string, std::shared_ptr<Cell>>> cells_;
};

// MindSpore's spellings.
using CellList = ModuleList;
using CellDict = ModuleDict;

}  // namespace minidl::nn
