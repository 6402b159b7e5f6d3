# policy_view.cmake: builds each target of LT_TARGETS (comma-separated) in the build tree
# LT_BUILD. LT_EXPECT=pass: each must build. LT_EXPECT=fail: each must fail, and for the
# reason meant: the compiler names the matching call of LT_CALLS as undeclared (gcc: "implicit
# declaration of function", clang: "undeclared function"), so that a build broken for another
# reason does not pass.
string(REPLACE "," ";" targets "${LT_TARGETS}")
string(REPLACE "," ";" calls "${LT_CALLS}")
set(i 0)
foreach(t IN LISTS targets)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${LT_BUILD} --target ${t}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 240)
  if(LT_EXPECT STREQUAL "pass")
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${t}: a policy using only the view failed to build:\n${out}")
    endif()
    message(STATUS "${t}: built")
  else()
    list(GET calls ${i} call)
    if(rc EQUAL 0)
      message(FATAL_ERROR "${t}: a policy calling ${call} built: the view declares it")
    endif()
    if(NOT out MATCHES "(implicit declaration of function|undeclared function)[^\n]*${call}")
      message(FATAL_ERROR "${t}: failed, but not for ${call} being undeclared:\n${out}")
    endif()
    message(STATUS "${t}: refused, ${call} undeclared")
  endif()
  math(EXPR i "${i} + 1")
endforeach()
