# Run by `cmake --install` after the headers are copied: in the source tree
# they include each other as "nn/cell.h" (the source root is on the include
# path); installed, they say "minidl/nn/cell.h", so a user's include path is
# <prefix>/include alone and names such as <nn/cell.h> stay the user's.
# MINIDL_INSTALLED_HEADERS: the headers' folder under the prefix (include/minidl).
file(GLOB_RECURSE headers "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${MINIDL_INSTALLED_HEADERS}/*.h")
foreach(header IN LISTS headers)
  file(READ "${header}" text)
  string(REGEX REPLACE "#include \"(framework|nn|optim|data|parallel)/" "#include \"minidl/\\1/"
         installed "${text}")
  if(NOT installed STREQUAL text)
    file(WRITE "${header}" "${installed}")
  endif()
endforeach()
