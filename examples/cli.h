// What every example's main shares: flags checked with messages a person
// reads, and errors that end the program with one line and status 1.
//
//   void program(int argc, char** argv) {
//     int steps = 10;
//     CLI::App app{"..."};
//     app.add_option("--steps", steps, "steps")->check(example::in_range(1, 1000));
//     example::parse(app, argc, argv);
//     ...
//   }
//   int main(int argc, char** argv) { return example::run_main([&] { program(argc, argv); }); }
#pragma once
#include <minidl/minidl.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <string>
#include <type_traits>

namespace example {

// A CLI11 check that a flag's value is a T from lo to hi (NaN and infinities
// never are), described as `what` (default "an integer from 1 to 1024").
// A bad value reads "--threads: expected an integer from 1 to 1024, got '0'".
// --help shows the range as "INT:1 to 1024" (or `what`).
template <class T>
CLI::Validator in_range(T lo, T hi, std::string what = "") {
  const std::string shown = what.empty() ? minidl::cat(lo, " to ", hi) : what;
  if (what.empty())
    what = minidl::cat(std::is_integral_v<T> ? "an integer" : "a number", " from ", lo, " to ", hi);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        T value{};
        const char *begin = text.data(), *end = begin + text.size();
        const auto [stop, ec] = std::from_chars(begin, end, value);
        if (ec == std::errc() && stop == end && lo <= value && value <= hi) return "";
        return minidl::cat("expected ", what, ", got '", text, "'");
      },
      shown);
}

// Parses the flags: --help prints the help and exits 0; a bad flag throws
// minidl::Error with CLI11's message, e.g. "--batch: expected ..., got 'abc'".
inline void parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) std::exit(app.exit(e));  // --help
    throw minidl::Error(e.what());
  }
}

// The device a --device flag (cpu, cuda or auto) names; "cuda" without a GPU
// is an error, "auto" is CUDA when a GPU is present.
inline minidl::Device pick_device(const std::string& flag) {
  using minidl::Device;
  const bool gpu = minidl::device_available(Device::CUDA);
  MINIDL_CHECK(flag != "cuda" || gpu, "--device cuda: no CUDA device here (use --device cpu or "
               "auto)");
  return flag == "cpu" || !gpu ? Device::CPU : Device::CUDA;
}

// Runs a program's body and returns main's exit status: 0, or 1 after an
// exception, printed on one line as "error: ..." ("error: rank R: ..." on a
// job of several ranks, which then ends at once: the other ranks would wait
// for this one forever).
template <class Body>
int run_main(Body&& body) {
  try {
    body();
    return 0;
  } catch (const std::exception& e) {
    namespace parallel = minidl::parallel;
    const bool job = parallel::is_initialized() && parallel::world_size() > 1;
    if (job)
      std::fprintf(stderr, "error: rank %d: %s\n", parallel::rank(), e.what());
    else
      std::fprintf(stderr, "error: %s\n", e.what());
    if (job) parallel::abort_job(1);
    return 1;
  }
}

}  // namespace example
