# check_run.cmake: runs `lithium run EXPR INPUTS...` (inputs relative to DIR) on 2 local
# servers and in the sequential evaluator (--local), and requires that both print EXPECTED
# on stdout (the results in input order, a failed task printing nothing) and the same
# messages on stderr. Used by the example tests of examples/CMakeLists.txt.
set(ENV{LITHIUM_MODULES} "${MODULES}")
set(ENV{LITHIUM_SERVER} "${SERVER}")
set(files "")
foreach(in ${INPUTS})
  list(APPEND files "${DIR}/${in}")
endforeach()
file(READ "${EXPECTED}" expected)
set(first_err "")
foreach(where "--servers;2" "--local")
  execute_process(COMMAND "${LITHIUM}" run "${EXPR}" ${files} ${where}
    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 100)
  if(NOT out STREQUAL expected)
    message(FATAL_ERROR "lithium run ${where}: stdout differs from ${EXPECTED}:\n${out}\n"
      "stderr:\n${err}")
  endif()
  # Servers may log to stderr; the task errors are the lines `lithium: FILE: ...`.
  string(REGEX MATCHALL "lithium: [^\n]*\n" task_errs "${err}")
  if(where STREQUAL "--local")
    if(NOT task_errs STREQUAL first_err)
      message(FATAL_ERROR "task errors differ: servers\n${first_err}\nlocal\n${task_errs}")
    endif()
  else()
    set(first_err "${task_errs}")
  endif()
  message(STATUS "${where}: exit ${rc}, ${task_errs}")
endforeach()
