// Writes images as one PNG grid (libpng, Debian's libpng-dev): what
// dcgan_mnist shows of its generator after each epoch.
//
//   example::write_png_grid("epoch-1.png", fake, /*columns=*/8);  // fake [N, 1, H, W] in [-1, 1]
#pragma once
#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <minidl/minidl.h>

namespace example {

// images [N, 1, H, W] float (any device) with values in [-1, 1] -> a grayscale
// PNG of ceil(N / columns) rows of `columns` images, 2-pixel black borders.
inline void write_png_grid(const std::string& path, const minidl::Tensor& images, int64_t columns) {
  MINIDL_CHECK(images.dim() == 4 && images.size(1) == 1, "write_png_grid: expected images [N, 1, H, W], got ",
               images.shape());
  const int64_t n = images.size(0), h = images.size(2), w = images.size(3), pad = 2;
  const int64_t cols = std::min(columns, n), rows = (n + cols - 1) / cols;
  const int64_t width = cols * (w + pad) + pad, height = rows * (h + pad) + pad;
  const std::vector<float> v = images.to(minidl::kFloat32).to_float_vector();
  std::vector<png_byte> pixels(width * height, 0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        const float value = std::clamp((v[(i * h + y) * w + x] + 1.f) * 127.5f, 0.f, 255.f);
        pixels[(pad + (i / cols) * (h + pad) + y) * width + pad + (i % cols) * (w + pad) + x] =
            static_cast<png_byte>(std::lround(value));
      }
  FILE* f = std::fopen(path.c_str(), "wb");
  MINIDL_CHECK(f, "write_png_grid: cannot open '", path, "' for writing");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(f);
    throw minidl::Error(minidl::cat("write_png_grid: libpng failed writing '", path, "'"));
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, width, height, 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int64_t y = 0; y < height; ++y) png_write_row(png, &pixels[y * width]);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  MINIDL_CHECK(std::fclose(f) == 0, "write_png_grid: writing '", path, "' failed");
}

}  // namespace example
