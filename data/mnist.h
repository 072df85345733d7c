// MNIST and Fashion-MNIST from a directory of the four standard IDX files:
//   train-images-idx3-ubyte  train-labels-idx1-ubyte   (Usage::Train)
//   t10k-images-idx3-ubyte   t10k-labels-idx1-ubyte    (Usage::Test)
// each plain or with ".gz". scripts/get_mnist.sh writes real MNIST digits to
// default_mnist_dir(); Debian's dataset-fashion-mnist installs Fashion-MNIST
// in /usr/share/datasets/fashion-mnist.
#pragma once
#include <string>

#include "data/dataset.h"

namespace minidl::data {

enum class Usage { Train, Test, All };  // All: train then test, in one dataset

// data float32 [N, 1, H, W] holding the raw pixels 0..255 (map Rescale to
// scale them), labels int64 [N]. Throws minidl::Error naming the directory and
// the file names looked for when files are missing, and naming both files when
// image and label counts differ; read_idx's errors for broken files.
class MnistDataset : public Dataset {
 public:
  explicit MnistDataset(const std::string& dir, Usage usage = Usage::Train);
};

// Where scripts/get_mnist.sh puts MNIST: $MINIDL_DATA/mnist when MINIDL_DATA is
// set, else $HOME/.cache/minidl/mnist.
std::string default_mnist_dir();

}  // namespace minidl::data
