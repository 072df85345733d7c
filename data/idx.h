// IDX files: the format MNIST and Fashion-MNIST ship in, plain or gzip-compressed.
//
// Layout (all integers big-endian): two zero bytes, a type code (0x08 ubyte,
// 0x09 signed byte, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64), the
// number of dimensions D, then D uint32 sizes, then the values in row-major
// order. MNIST's images are ubyte [N, 28, 28], its labels ubyte [N].
#pragma once
#include <string>

#include "framework/tensor.h"

namespace minidl::data {

// Reads an IDX file (gzip is detected from the content, whatever the name) into
// a tensor of `dtype` whose shape is the file's dimensions: MNIST images come
// back as float32 [N, 28, 28] holding 0..255, labels read with kInt64 as [N].
// Float files (0x0D, 0x0E) can only be read as float32 or float16.
// Throws minidl::Error naming the file and what was wrong: missing file, wrong
// magic number, unknown type code, sizes whose product (or that of the nonzero
// ones) passes 2^40 values, a header or data cut short (with the byte offset,
// counted in decompressed bytes for .gz), bytes after the data, or a corrupt
// gzip stream. Nothing of the header's claimed size is allocated before the
// file has shown it holds that much.
Tensor read_idx(const std::string& path, DType dtype = kFloat32);

// Writes `values` (any shape of 1 to 255 dims, any dtype, whole numbers in
// 0..255) as a ubyte IDX file, gzip-compressed when `path` ends in ".gz".
// Throws minidl::Error for values out of range or a file that cannot be written.
void write_idx(const std::string& path, const Tensor& values);

}  // namespace minidl::data
