#include "data/mnist.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "data/idx.h"

namespace minidl::data {
namespace {

namespace fs = std::filesystem;

// dir/name or dir/name.gz, whichever exists; "" when neither does.
std::string find_file(const std::string& dir, const std::string& name) {
  for (const char* suffix : {"", ".gz"}) {
    fs::path p = fs::path(dir) / (name + suffix);
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

// One split's images [N, 1, H, W] float32 and labels [N] int64.
struct Split {
  Tensor images, labels;
};

Split read_split(const std::string& images_path, const std::string& labels_path) {
  Tensor images = read_idx(images_path, kFloat32);
  Tensor labels = read_idx(labels_path, kInt64);
  MINIDL_CHECK(images.dim() == 3, "MnistDataset: '", images_path,
               "' should hold images [N, H, W], but holds ", images.shape());
  MINIDL_CHECK(labels.dim() == 1, "MnistDataset: '", labels_path,
               "' should hold labels [N], but holds ", labels.shape());
  MINIDL_CHECK(images.size(0) == labels.size(0), "MnistDataset: image and label counts differ: '",
               images_path, "' holds ", images.size(0), " images but '", labels_path, "' holds ",
               labels.size(0), " labels");
  return {images.reshape({images.size(0), 1, images.size(1), images.size(2)}), labels};
}

// a then b along dim 0 (same trailing shape and dtype).
Tensor join(const Tensor& a, const Tensor& b, const char* what) {
  Shape sa = a.shape(), sb = b.shape();
  sa[0] = sb[0] = 0;
  MINIDL_CHECK(sa == sb, "MnistDataset: Usage::All needs train and test ", what,
               " of the same shape, got ", a.shape(), " and ", b.shape());
  Shape shape = a.shape();
  shape[0] += b.size(0);
  Tensor out = Tensor::empty(shape, a.dtype());
  std::memcpy(out.raw_data(), a.raw_data(), a.nbytes());
  std::memcpy(static_cast<char*>(out.raw_data()) + a.nbytes(), b.raw_data(), b.nbytes());
  return out;
}

Dataset load(const std::string& dir, Usage usage) {
  std::vector<const char*> prefixes;
  if (usage != Usage::Test) prefixes.push_back("train");
  if (usage != Usage::Train) prefixes.push_back("t10k");

  std::vector<std::string> paths, missing;
  for (const char* prefix : prefixes)
    for (const char* kind : {"-images-idx3-ubyte", "-labels-idx1-ubyte"}) {
      std::string name = std::string(prefix) + kind;
      paths.push_back(find_file(dir, name));
      if (paths.back().empty()) missing.push_back(name + "[.gz]");
    }
  if (!missing.empty()) {
    std::string names;
    for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
    std::error_code ec;
    throw Error(
        cat("MnistDataset: ",
            fs::is_directory(dir, ec) ? "missing files in directory '" : "no such directory '", dir,
            "': looked for ", names, ". Run scripts/get_mnist.sh to fetch MNIST into ",
            default_mnist_dir(),
            ", or use /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist)"));
  }

  Split first = read_split(paths[0], paths[1]);
  if (prefixes.size() == 1) return Dataset(first.images, first.labels);
  Split second = read_split(paths[2], paths[3]);
  return Dataset(join(first.images, second.images, "images"),
                 join(first.labels, second.labels, "labels"));
}

}  // namespace

MnistDataset::MnistDataset(const std::string& dir, Usage usage) : Dataset(load(dir, usage)) {}

std::string default_mnist_dir() {
  if (const char* root = std::getenv("MINIDL_DATA"); root && *root)
    return (fs::path(root) / "mnist").string();
  const char* home = std::getenv("HOME");
  return (fs::path(home && *home ? home : ".") / ".cache" / "minidl" / "mnist").string();
}

}  // namespace minidl::data
