// arbiterd serves only its backend's own candidates.
#include "server/test_candidates.h"

namespace arbiter::server {

ExtraCandidates TestCandidates() { return nullptr; }

}  // namespace arbiter::server
