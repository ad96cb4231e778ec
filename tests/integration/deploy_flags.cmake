# The arbiterd command lines in deploy/ (DaemonSet, image CMD, systemd unit) are
# accepted by this arbiterd, and deploy/README.md documents exactly its flags.
# Included by CMakeLists.txt here.
add_test(NAME deploy.arbiterd_flags
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/deploy_flags_test.py $<TARGET_FILE:arbiterd>)
set_tests_properties(deploy.arbiterd_flags PROPERTIES LABELS deploy TIMEOUT 120)
