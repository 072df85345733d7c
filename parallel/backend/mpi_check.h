// MINIDL_MPI_CHECK(call): run an MPI call and turn a failure into a
// minidl::Error naming the call, file:line, this process's world rank and
// MPI's own error string. Only backend files include this (it includes <mpi.h>).
#pragma once
// C API only: keep Open MPI's deprecated C++ bindings (libmpi_cxx) out.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

namespace minidl::parallel::backend {
[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);
}  // namespace minidl::parallel::backend

#define MINIDL_MPI_CHECK(call)                                                              \
  do {                                                                                      \
    int minidl_mpi_rc_ = (call);                                                            \
    if (minidl_mpi_rc_ != MPI_SUCCESS)                                                      \
      ::minidl::parallel::backend::throw_mpi_error(minidl_mpi_rc_, #call, __FILE__, __LINE__); \
  } while (0)
