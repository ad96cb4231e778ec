# Operations pieces of the daemon, apart from the gRPC services: Prometheus
# metrics, admin authorization, listener TLS and log setup (text or JSON).
# server/CMakeLists.txt does include(ops.cmake) and links arbiter_ops into
# arbiterd; the guard lets the ops tests include it too without defining the
# target twice.
include_guard(GLOBAL)

add_library(arbiter_ops STATIC
  ${CMAKE_CURRENT_LIST_DIR}/admin_auth.cc
  ${CMAKE_CURRENT_LIST_DIR}/logging.cc
  ${CMAKE_CURRENT_LIST_DIR}/metrics.cc
  ${CMAKE_CURRENT_LIST_DIR}/tls.cc
)
target_include_directories(arbiter_ops PUBLIC ${PROJECT_SOURCE_DIR})
target_compile_features(arbiter_ops PUBLIC cxx_std_20)
target_link_libraries(arbiter_ops
  PUBLIC arbiter_engine arbiter_proto gRPC::grpc++ prometheus-cpp::core prometheus-cpp::pull
         absl::status absl::statusor spdlog::spdlog
  PRIVATE arbiter_warnings)
