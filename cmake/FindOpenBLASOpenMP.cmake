# Finds OpenBLAS's OpenMP build (Debian: libopenblas-openmp-dev), so BLAS
# shares minidl's OpenMP thread pool. Defines OpenBLAS::OpenBLAS and
# OpenBLAS_LIBRARY_DIR.
find_path(OpenBLAS_INCLUDE_DIR cblas.h
  PATHS /usr/include/x86_64-linux-gnu/openblas-openmp /usr/include/openblas-openmp NO_DEFAULT_PATH)
find_library(OpenBLAS_LIBRARY NAMES openblas
  PATHS /usr/lib/x86_64-linux-gnu/openblas-openmp /usr/lib/openblas-openmp NO_DEFAULT_PATH)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OpenBLASOpenMP REQUIRED_VARS OpenBLAS_LIBRARY OpenBLAS_INCLUDE_DIR)
if(OpenBLASOpenMP_FOUND AND NOT TARGET OpenBLAS::OpenBLAS)
  get_filename_component(OpenBLAS_LIBRARY_DIR ${OpenBLAS_LIBRARY} DIRECTORY)
  add_library(OpenBLAS::OpenBLAS UNKNOWN IMPORTED)
  set_target_properties(OpenBLAS::OpenBLAS PROPERTIES IMPORTED_LOCATION ${OpenBLAS_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${OpenBLAS_INCLUDE_DIR})
endif()
