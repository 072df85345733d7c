# ctest driver: install minidl into a fresh prefix, then against it
# - build and run a project whose CMakeLists.txt is the README's cmake snippet,
#   verbatim (a C++-only project), with main.cpp from this folder;
# - build the README's model-writer program (the ```cpp block after the
#   marker <!-- consumer: main.cpp -->, verbatim) with the same snippet, and
#   run it on a tiny data set made by tests/tiny_mnist.py, alone and on 2 ranks;
# - configure probe/, which checks the include names the package exports.
# BUILD: minidl's build folder; SOURCE: this folder; README: README.md; WORK: scratch;
# MPIEXEC: mpiexec.
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

# The ```cpp block after the README's marker: the "Your own model" program.
string(FIND "${readme}" "<!-- consumer: main.cpp -->\n```cpp\n" begin)
if(begin LESS 0)
  message(FATAL_ERROR "no '<!-- consumer: main.cpp -->' marker followed by a ```cpp block in ${README}")
endif()
math(EXPR begin "${begin} + 35")
string(SUBSTRING "${readme}" ${begin} -1 rest)
string(FIND "${rest}" "```" end)
string(SUBSTRING "${rest}" 0 ${end} program)
file(WRITE ${WORK}/model/CMakeLists.txt "${snippet}")
file(WRITE ${WORK}/model/main.cpp "${program}")

foreach(step "configure;-S;${WORK}/app;-B;${WORK}/app/build;-DCMAKE_PREFIX_PATH=${WORK}/prefix"
             "build;--build;${WORK}/app/build"
             "configure model;-S;${WORK}/model;-B;${WORK}/model/build;-DCMAKE_PREFIX_PATH=${WORK}/prefix"
             "build model;--build;${WORK}/model/build"
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

# The README's model program on a tiny set: it trains 3 epochs, saves, reloads,
# and exits 0 only when the reloaded network evaluates the same; then on 2 ranks.
execute_process(COMMAND python3 ${SOURCE}/../tiny_mnist.py ${WORK}/tiny 128 32 0 --learnable
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "tiny_mnist.py failed: ${rc}")
endif()
foreach(run "1;${WORK}/model/build/app;${WORK}/tiny;3"
            "2;${MPIEXEC};--oversubscribe;-np;2;${WORK}/model/build/app;${WORK}/tiny;3")
  list(POP_FRONT run ranks)
  execute_process(COMMAND ${run} WORKING_DIRECTORY ${WORK}/model RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  message(STATUS "the README's model program on ${ranks} rank(s):\n${out}${err}")
  if(rc OR NOT out MATCHES "after reloading")
    message(FATAL_ERROR "the README's model program on ${ranks} rank(s) failed: ${rc}")
  endif()
endforeach()
