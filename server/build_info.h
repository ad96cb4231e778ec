// What this arbiterd was built from: the project's version and the git commit
// the tree was configured at (empty when built outside a git checkout). Shown
// by arbiter_build_info{version,commit} and the start-up log line.
#pragma once

namespace arbiter::server {

extern const char kBuildVersion[];
extern const char kBuildCommit[];

}  // namespace arbiter::server
