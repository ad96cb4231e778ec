// The PostgreSQL store's schema (everything in schema "arbiter", so a database
// shared with other applications keeps its own names): its version, recorded in
// arbiter.meta, and the migration that creates it or checks it on open.
#pragma once

#include "engine/pg_connection.h"
#include "engine/status.h"

namespace arbiter::pg_schema {

inline constexpr int kVersion = 1;

// Creates the schema on a fresh database or checks the one there, in one transaction
// under a transaction-scoped advisory lock, so daemons starting together migrate once.
// FAILED_PRECONDITION for a version this build cannot read (newer, or older than any it
// migrates from).
absl::Status Migrate(PgConnection& conn);

// The version arbiter.meta records; 0 when it cannot be read.
int Version(PgConnection& conn);

}  // namespace arbiter::pg_schema
