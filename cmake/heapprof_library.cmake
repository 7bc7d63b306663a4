# heapprof_library(NAME SOURCES src... [DEPS heapprof-lib...] [LIBS external...])
#
# A static library of ours in three flavours, so that tests and benchmarks
# link libraries instead of listing source files:
#   NAME       the plain build (in a HEAPPROF_SANITIZE tree it is already
#              sanitized, like everything else);
#   NAME_asan  the same sources under ASan+UBSan, for the sanitized builds of
#              the unit tests; built only when a test links it (none in a
#              HEAPPROF_TSAN tree: TSan and ASan do not combine);
#   NAME_fuzz  under libFuzzer's coverage and ASan+UBSan, for the fuzz
#              targets (HEAPPROF_FUZZ trees only).
# DEPS are other heapprof_library names; each flavour links the same flavour
# of them, so a sanitized test never mixes in an unsanitized object of ours.
# The folder of NAME is its public include directory: its headers are its
# contract (see daemon/README.md).
function(heapprof_library name)
  cmake_parse_arguments(L "" "" "SOURCES;DEPS;LIBS" ${ARGN})
  set(flavours plain)
  if(NOT HEAPPROF_SANITIZE AND NOT HEAPPROF_TSAN)
    list(APPEND flavours asan)
  endif()
  if(HEAPPROF_FUZZ)
    list(APPEND flavours fuzz)
  endif()
  foreach(flavour ${flavours})
    if(flavour STREQUAL plain)
      set(target ${name})
      set(deps ${L_DEPS})
      add_library(${target} STATIC ${L_SOURCES})
    else()
      set(target ${name}_${flavour})
      list(TRANSFORM L_DEPS APPEND _${flavour} OUTPUT_VARIABLE deps)
      add_library(${target} STATIC EXCLUDE_FROM_ALL ${L_SOURCES})
      if(flavour STREQUAL asan)
        target_compile_options(${target} PRIVATE ${HEAPPROF_SANITIZE_FLAGS})
      else()
        target_compile_options(${target} PRIVATE ${HEAPPROF_FUZZ_LIB_FLAGS})
      endif()
    endif()
    target_include_directories(${target} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
    target_link_libraries(${target} PUBLIC ${deps} ${L_LIBS})
  endforeach()
endfunction()
