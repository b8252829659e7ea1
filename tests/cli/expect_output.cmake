# Runs COMMAND (a ;-list) and fails unless it exits EXPECT_EXIT and its standard output
# matches EXPECT_STDOUT. Used as `cmake -DCOMMAND=... -P expect_output.cmake`, because
# CTest's PASS_REGULAR_EXPRESSION alone would ignore the exit status.
execute_process(
  COMMAND ${COMMAND}
  RESULT_VARIABLE exit_status
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
if(NOT exit_status STREQUAL "${EXPECT_EXIT}")
  message(FATAL_ERROR "'${COMMAND}' exited ${exit_status}, expected ${EXPECT_EXIT}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(NOT out MATCHES "${EXPECT_STDOUT}")
  message(FATAL_ERROR "'${COMMAND}' printed:\n${out}\nwhich does not match: ${EXPECT_STDOUT}")
endif()
