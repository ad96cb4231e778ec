// The candidates a daemon binary adds to those its backend registers: none for
// arbiterd (server/no_test_candidates.cc), planted faulting ones for the test
// daemon arbiterd_faults (tests/integration/faults). Which definition a binary
// gets is decided when it is linked, so the production arbiterd contains no
// planted candidate and no switch that could register one.
#pragma once

#include "server/daemon.h"

namespace arbiter::server {

ExtraCandidates TestCandidates();

}  // namespace arbiter::server
