# arbiter_git_commit(VAR): sets VAR to the abbreviated commit the source tree is
# checked out at (12 hex digits), or to "" outside a git checkout or without git.
#
# Read at configure time, so the build would keep an old commit after the next
# one; instead the files git rewrites whenever HEAD moves (a commit, checkout,
# merge or reset: HEAD, its reflog, the branch's ref) become configure
# dependencies, and CMake configures again on the next build after they change.
function(arbiter_git_commit var)
  set(commit "")
  find_package(Git QUIET)
  if(Git_FOUND)
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0)
      set(commit ${out})
      execute_process(COMMAND ${GIT_EXECUTABLE} symbolic-ref -q HEAD
        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
        OUTPUT_VARIABLE branch ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
      foreach(name HEAD logs/HEAD packed-refs ${branch})
        execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --git-path ${name}
          WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
          OUTPUT_VARIABLE path ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
        get_filename_component(path "${path}" ABSOLUTE BASE_DIR ${PROJECT_SOURCE_DIR})
        if(EXISTS "${path}")
          set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${path}")
        endif()
      endforeach()
    endif()
  endif()
  if(commit STREQUAL "")
    message(STATUS "arbiter: commit unknown (not a git checkout, or git unavailable)")
  else()
    message(STATUS "arbiter: commit ${commit}")
  endif()
  set(${var} ${commit} PARENT_SCOPE)
endfunction()
