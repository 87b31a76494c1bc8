# cmake -DSIPHON_CONF=<siphon-conf> -DDOC=<docs/configuration.md> -DMODE=check|update
#       [-DGENERATED=<where to leave the generated text when stale>] -P doc_sync.cmake
execute_process(COMMAND ${SIPHON_CONF} --dump-schema-markdown
                OUTPUT_VARIABLE generated RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "siphon-conf --dump-schema-markdown failed (${rc})")
endif()
if(MODE STREQUAL "update")
  file(WRITE "${DOC}" "${generated}")
  message(STATUS "wrote ${DOC}")
  return()
endif()
if(NOT EXISTS "${DOC}")
  message(FATAL_ERROR "${DOC} is missing: run `cmake --build <build> --target update-configuration-doc`")
endif()
file(READ "${DOC}" committed)
if(NOT committed STREQUAL generated)
  if(NOT GENERATED)
    set(GENERATED "${DOC}.generated")
  endif()
  file(WRITE "${GENERATED}" "${generated}")
  message(FATAL_ERROR "${DOC} is out of date with compat/options.def: run "
          "`cmake --build <build> --target update-configuration-doc` and commit it "
          "(the generated text is in ${GENERATED}; diff them to see what changed)")
endif()
message(STATUS "${DOC} is in sync with the option schema")
