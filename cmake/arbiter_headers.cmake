# arbiter_headers(TARGET [FOLDER folder]): the headers of FOLDER (default: the
# folder of the calling CMakeLists.txt, relative to the project root) become
# includable as "folder/x.h" by TARGET and by whatever links TARGET - and only
# by them.
#
# Each target gets an include root of its own under the build tree, holding one
# link to its source folder. A file may then include a header of another layer
# only when its target links that layer's target, so the build itself enforces
# that arrows point one way (engine <- runtime <- kernels <- registry <- server),
# which a shared PUBLIC ${PROJECT_SOURCE_DIR} could not.
function(arbiter_headers target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "FOLDER" "")
  if(NOT arg_FOLDER)
    file(RELATIVE_PATH arg_FOLDER ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
  set(root ${PROJECT_BINARY_DIR}/include/${target})
  get_filename_component(parent ${root}/${arg_FOLDER} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  if(NOT EXISTS ${root}/${arg_FOLDER})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${arg_FOLDER} ${root}/${arg_FOLDER} SYMBOLIC)
  endif()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE $<BUILD_INTERFACE:${root}>)
  else()
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${root}>)
  endif()
endfunction()
