# The real arbiterd's logs: JSON lines that parse, the level from --log-level or
# ARBITER_LOG_LEVEL, bad values refused at start. Included by CMakeLists.txt here.
add_executable(logging_integration_tests arbiterd_logging_integration_test.cc)
target_link_libraries(logging_integration_tests PRIVATE
  arbiter_test_daemon arbiter_client GTest::gtest_main arbiter_warnings)
target_compile_definitions(logging_integration_tests PRIVATE ARBITERD_PATH="$<TARGET_FILE:arbiterd>")
add_dependencies(logging_integration_tests arbiterd)
gtest_discover_tests(logging_integration_tests DISCOVERY_TIMEOUT 60
  PROPERTIES LABELS integration TIMEOUT 300)
