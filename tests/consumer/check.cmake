# ctest driver: install minidl into a fresh prefix, then against it
# - build and run a project whose CMakeLists.txt is the README's cmake snippet,
#   verbatim (a C++-only project), with main.cpp from this folder;
# - configure probe/, which checks the include names the package exports.
# BUILD: minidl's build folder; SOURCE: this folder; README: README.md; WORK: scratch.
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${WORK}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "install failed: ${rc}")
endif()

# The first ```cmake block of the README.
file(READ ${README} readme)
string(FIND "${readme}" "```cmake\n" begin)
if(begin LESS 0)
  message(FATAL_ERROR "no ```cmake block in ${README}")
endif()
math(EXPR begin "${begin} + 9")
string(SUBSTRING "${readme}" ${begin} -1 rest)
string(FIND "${rest}" "```" end)
string(SUBSTRING "${rest}" 0 ${end} snippet)
if(NOT snippet MATCHES "find_package\\(minidl")
  message(FATAL_ERROR "the README's first cmake block is not the find_package(minidl) snippet:\n${snippet}")
endif()
file(WRITE ${WORK}/app/CMakeLists.txt "${snippet}")
configure_file(${SOURCE}/main.cpp ${WORK}/app/main.cpp COPYONLY)

foreach(step "configure;-S;${WORK}/app;-B;${WORK}/app/build;-DCMAKE_PREFIX_PATH=${WORK}/prefix"
             "build;--build;${WORK}/app/build"
             "probe;-S;${SOURCE}/probe;-B;${WORK}/probe;-DCMAKE_PREFIX_PATH=${WORK}/prefix")
  list(POP_FRONT step what)
  execute_process(COMMAND ${CMAKE_COMMAND} ${step} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "${what} failed: ${rc}")
  endif()
endforeach()
execute_process(COMMAND ${WORK}/app/build/app RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the README's app failed: ${rc}")
endif()
