# locality.cmake: the locality policy keeps work on the holder of its inputs, in counts (the
# simulator runs in simulated time, so the counts are the same on any machine): the same seeds
# with locality off and at 3, each with 0 violations; with it on, some placements are kept on
# the holder (locality_kept) and the servers fetch fewer bytes from each other (peer_bytes).
# -DSIM=<lithium-sim> -DSEEDS=<n>
foreach(factor 0 3)
  execute_process(COMMAND ${SIM} --seeds ${SEEDS} --set locality=${factor}
    OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "violations=0\n")
    message(FATAL_ERROR "locality=${factor}: ${out}")
  endif()
  string(REGEX MATCH "peer_bytes=([0-9]+) locality_kept=([0-9]+)" _ "${out}")
  set(bytes_${factor} ${CMAKE_MATCH_1})
  set(kept_${factor} ${CMAKE_MATCH_2})
endforeach()
message(STATUS "peer_bytes ${bytes_0} -> ${bytes_3}, locality_kept ${kept_0} -> ${kept_3}")
if(NOT kept_0 EQUAL 0 OR NOT kept_3 GREATER 0)
  message(FATAL_ERROR "locality_kept: ${kept_0} off, ${kept_3} on")
endif()
if(NOT bytes_3 LESS bytes_0)
  message(FATAL_ERROR "peer_bytes: ${bytes_3} with locality=3, not fewer than ${bytes_0}")
endif()
