# siphon_layer(<target> PATHS <path>... [DEPS <layer-target>...]
#              [SOURCES <file>...] [LIBS <external>...])
#
# Declares one layer of the architecture as a library target. The source tree
# is never on the include path: each layer publishes only its own PATHS
# (directories or single headers, relative to the source root) through a
# private tree of symbolic links under the build directory. A target sees the
# headers of the layers it links and nothing else, so an #include against the
# direction of the layering is a compile error ("No such file or directory"),
# and tests/layering checks the same rule over the sources and the link graph.
set(SIPHON_LAYER_ROOT "${CMAKE_BINARY_DIR}/layers")
set_property(GLOBAL PROPERTY SIPHON_LAYERS "")

function(siphon_layer target)
  cmake_parse_arguments(L "" "" "PATHS;DEPS;SOURCES;LIBS" ${ARGN})
  set(inc "${SIPHON_LAYER_ROOT}/${target}")
  foreach(p IN LISTS L_PATHS)
    get_filename_component(parent "${inc}/${p}" DIRECTORY)
    file(MAKE_DIRECTORY "${parent}")
    if(NOT EXISTS "${inc}/${p}")
      file(CREATE_LINK "${CMAKE_SOURCE_DIR}/${p}" "${inc}/${p}" SYMBOLIC)
    endif()
  endforeach()
  if(L_SOURCES)
    add_library(${target} STATIC ${L_SOURCES})
    target_include_directories(${target} PUBLIC "${inc}")
    target_link_libraries(${target} PUBLIC ${L_DEPS} ${L_LIBS} PRIVATE siphon_warnings)
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE "${inc}")
    target_link_libraries(${target} INTERFACE ${L_DEPS} ${L_LIBS})
  endif()
  set_property(GLOBAL APPEND PROPERTY SIPHON_LAYERS "${target}")
endfunction()

# siphon_executable(<target> SOURCES ... DEPS ...): a binary built from layers.
function(siphon_executable target)
  cmake_parse_arguments(E "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${target} ${E_SOURCES})
  target_link_libraries(${target} PRIVATE ${E_DEPS} siphon_warnings)
endfunction()
