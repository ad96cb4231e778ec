// Formatting shared by arbiterctl's commands (client/ctl*.cc): enum names,
// problems, numbers, tables and --json fields. Internal to arbiterctl.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/struct.pb.h>

#include "arbiter/v1/arbiter.pb.h"
#include "client/table.h"

namespace arbiter::client {

// "VERDICT_SOURCE_MEASURED" -> "measured".
std::string EnumSuffix(const std::string& name, const std::string& prefix);
std::string Upper(std::string text);
std::string SourceName(v1::VerdictSource s);
std::string DeterminismShort(v1::Determinism d);
// "bf16 64x32x128".
std::string ProblemText(const v1::Problem& p);
std::string Fixed(double value, int digits);
std::string Sci(double value);
// `table`, or the line `none` when it has no rows.
void PrintTableOr(std::ostream& os, const Table& table, const char* none);
// Key/value lines with the values aligned.
void PrintFields(std::ostream& os, const std::vector<std::pair<std::string, std::string>>& fields);
void AddField(google::protobuf::Struct* s, const std::string& key, const std::string& value);
void AddField(google::protobuf::Struct* s, const std::string& key, double value);
void AddBool(google::protobuf::Struct* s, const std::string& key, bool value);

}  // namespace arbiter::client
