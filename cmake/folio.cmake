# Helpers shared by every folder.

# Our own code compiles warning-free.
function(folio_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror>)
endfunction()

# folio_module(<name> [DEPS targets...] [SOURCES files...])
# Creates the static library folio_<name> from the folder's *.cc files (or SOURCES), with src/ as
# the include root. A folder with no sources yet becomes an INTERFACE library.
function(folio_module name)
  cmake_parse_arguments(ARG "" "" "DEPS;SOURCES" ${ARGN})
  if(NOT ARG_SOURCES)
    file(GLOB ARG_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  endif()
  if(ARG_SOURCES)
    add_library(folio_${name} STATIC ${ARG_SOURCES})
    target_include_directories(folio_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(folio_${name} PUBLIC ${ARG_DEPS})
    folio_warnings(folio_${name})
  else()
    add_library(folio_${name} INTERFACE)
    target_include_directories(folio_${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(folio_${name} INTERFACE ${ARG_DEPS})
  endif()
endfunction()

# folio_test_folder(<name> DEPS libs...): one gtest binary folio_<name>_tests from the folder's
# *_test.cc files, each test registered with CTest.
function(folio_test_folder name)
  cmake_parse_arguments(ARG "" "" "DEPS;LABELS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cc)
  if(NOT srcs)
    return()
  endif()
  add_executable(folio_${name}_tests ${srcs})
  target_link_libraries(folio_${name}_tests PRIVATE ${ARG_DEPS} folio_testing GTest::gtest_main GTest::gmock)
  folio_warnings(folio_${name}_tests)
  if(NOT ARG_LABELS)
    set(ARG_LABELS cpu)
  endif()
  # DISCOVERY_TIMEOUT: listing a freshly linked binary's tests took 9 s here once, its pages cold
  # while the other ctest job loaded the disk (CMake's default limit is 5 s, and a timeout there
  # fails the whole run); it takes 0.1 s warm.
  gtest_discover_tests(folio_${name}_tests DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 120
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT 900)
endfunction()
