#include "engine/pg_schema.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace arbiter::pg_schema {
namespace {

// The migration's transaction-scoped advisory lock, in the two-int key space (which
// leases, in the one-bigint space, never share): "arbi", 1.
constexpr char kLockMigration[] = "SELECT pg_advisory_xact_lock(1634890345, 1)";

// Version 1, as statements (PQexecParams runs one at a time). Mirrors the SQLite
// schema: enums by their engine names, results in their own table keyed by the
// verdict, cascaded on delete.
constexpr const char* kSchemaV1[] = {
    "CREATE SCHEMA IF NOT EXISTS arbiter",
    R"sql(CREATE TABLE arbiter.meta (
  key text PRIMARY KEY,
  value text NOT NULL
))sql",
    R"sql(CREATE TABLE arbiter.verdicts (
  fingerprint text NOT NULL,
  op text NOT NULL,
  dtype text NOT NULL,
  bucket text NOT NULL,
  candidates text NOT NULL,
  winner text NOT NULL,
  winner_version integer NOT NULL,
  source text NOT NULL,
  reason text NOT NULL,
  measured_dtype text NOT NULL,
  measured_m bigint NOT NULL,
  measured_n bigint NOT NULL,
  measured_k bigint NOT NULL,
  created_unix bigint NOT NULL,
  PRIMARY KEY (fingerprint, op, dtype, bucket)
))sql",
    R"sql(CREATE TABLE arbiter.verdict_results (
  fingerprint text NOT NULL,
  op text NOT NULL,
  dtype text NOT NULL,
  bucket text NOT NULL,
  ordinal integer NOT NULL,
  name text NOT NULL,
  version integer NOT NULL,
  tier integer NOT NULL,
  determinism text NOT NULL,
  state text NOT NULL,
  reason text NOT NULL,
  median_seconds double precision NOT NULL,
  spread double precision NOT NULL,
  samples integer NOT NULL,
  max_abs_error double precision NOT NULL,
  max_rel_error double precision NOT NULL,
  PRIMARY KEY (fingerprint, op, dtype, bucket, ordinal),
  FOREIGN KEY (fingerprint, op, dtype, bucket)
    REFERENCES arbiter.verdicts (fingerprint, op, dtype, bucket) ON DELETE CASCADE
))sql",
    "CREATE INDEX verdict_results_by_candidate ON arbiter.verdict_results (fingerprint, name)",
    R"sql(CREATE TABLE arbiter.forces (
  fingerprint text NOT NULL,
  dtype text NOT NULL,
  bucket text NOT NULL,
  candidate text NOT NULL,
  reason text NOT NULL,
  created_unix bigint NOT NULL,
  PRIMARY KEY (fingerprint, dtype, bucket)
))sql",
    R"sql(CREATE TABLE arbiter.quarantine (
  candidate text NOT NULL,
  version integer NOT NULL,
  scope text NOT NULL,
  fingerprint text NOT NULL,
  reason text NOT NULL,
  created_unix bigint NOT NULL,
  PRIMARY KEY (candidate, scope, fingerprint)
))sql",
};

}  // namespace

absl::Status Migrate(PgConnection& conn) {
  PgTransaction txn(conn);
  RETURN_IF_ERROR(txn.Begin("migrate"));
  // Daemons starting together wait here for the first one's migration to commit.
  RETURN_IF_ERROR(conn.Exec("migrate: lock", kLockMigration).status());
  ASSIGN_OR_RETURN(PgResult exists, conn.Exec("migrate: find meta",
                                              "SELECT to_regclass('arbiter.meta') IS NOT NULL"));
  if (exists.Text(0, 0) != "t") {
    for (const char* statement : kSchemaV1) {
      RETURN_IF_ERROR(conn.Exec("migrate: create schema", statement).status());
    }
    RETURN_IF_ERROR(conn.Exec("migrate: record schema_version",
                              "INSERT INTO arbiter.meta (key, value) VALUES ('schema_version', $1)",
                              {PgInt(kVersion)})
                        .status());
  } else {
    ASSIGN_OR_RETURN(PgResult found,
                     conn.Exec("migrate: read schema_version",
                               "SELECT value FROM arbiter.meta WHERE key = 'schema_version'"));
    if (found.rows() != 1) {
      return absl::DataLossError("arbiter.meta holds no schema_version");
    }
    ASSIGN_OR_RETURN(const int64_t version, found.Int(0, 0));
    if (version > kVersion) {
      // A newer arbiterd wrote it; reading it with this schema could misread or destroy
      // what that version knows.
      return absl::FailedPreconditionError(absl::StrCat("the store has schema_version ", version,
                                                        ", newer than this build's schema_version ",
                                                        kVersion, "; refusing to open it"));
    }
    if (version < kVersion) {
      // Migrations from older versions go here, one step per version; version 1 is the first.
      return absl::FailedPreconditionError(absl::StrCat(
          "the store has schema_version ", version, ", older than any this build (schema_version ",
          kVersion, ") migrates from"));
    }
  }
  return txn.Commit("migrate");
}

int Version(PgConnection& conn) {
  absl::StatusOr<PgResult> found = conn.Exec(
      "read schema_version", "SELECT value FROM arbiter.meta WHERE key = 'schema_version'");
  if (!found.ok() || found->rows() != 1) return 0;
  absl::StatusOr<int64_t> version = found->Int(0, 0);
  return version.ok() ? static_cast<int>(*version) : 0;
}

}  // namespace arbiter::pg_schema
