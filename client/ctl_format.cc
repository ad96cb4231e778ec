#include "client/ctl_format.h"

#include <cstdio>

#include "client/ctl.h"
#include "client/dtype_codec.h"

namespace arbiter::client {

// "VERDICT_SOURCE_MEASURED" -> "measured".
std::string EnumSuffix(const std::string& name, const std::string& prefix) {
  std::string out = name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

std::string Upper(std::string text) {
  for (char& ch : text) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return text;
}

std::string SourceName(v1::VerdictSource s) {
  return EnumSuffix(v1::VerdictSource_Name(s), "VERDICT_SOURCE_");
}

std::string DeterminismShort(v1::Determinism d) {
  return EnumSuffix(v1::Determinism_Name(d), "DETERMINISM_");
}

std::string ProblemText(const v1::Problem& p) {
  return DTypeShortName(p.dtype()) + " " + std::to_string(p.m()) + "x" + std::to_string(p.n()) +
         "x" + std::to_string(p.k());
}

std::string Fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

std::string Sci(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2e", value);
  return buf;
}

// `table`, or the line `none` when it has no rows.
void PrintTableOr(std::ostream& os, const Table& table, const char* none) {
  if (table.empty()) {
    os << none << "\n";
  } else {
    table.Print(os);
  }
}

// Key/value lines with the values aligned.
void PrintFields(std::ostream& os, const std::vector<std::pair<std::string, std::string>>& fields) {
  size_t width = 0;
  for (const auto& [key, value] : fields) width = std::max(width, key.size());
  for (const auto& [key, value] : fields) {
    os << key << std::string(width - key.size() + 2, ' ') << value << "\n";
  }
}

void AddField(google::protobuf::Struct* s, const std::string& key, const std::string& value) {
  (*s->mutable_fields())[key].set_string_value(value);
}
void AddField(google::protobuf::Struct* s, const std::string& key, double value) {
  (*s->mutable_fields())[key].set_number_value(value);
}
void AddBool(google::protobuf::Struct* s, const std::string& key, bool value) {
  (*s->mutable_fields())[key].set_bool_value(value);
}

std::string FormatSeconds(double seconds) {
  if (seconds <= 0) return "-";
  if (seconds < 1e-3) return Fixed(seconds * 1e6, 1) + " us";
  if (seconds < 1) return Fixed(seconds * 1e3, 3) + " ms";
  return Fixed(seconds, 3) + " s";
}

bool ParseShape(const std::string& text, v1::DType dtype, v1::Problem* p, std::string* error) {
  std::string dims = text;
  if (const size_t colon = text.find(':'); colon != std::string::npos) {
    const auto parsed = ParseDTypeName(text.substr(0, colon));
    if (!parsed) {
      *error = "shape \"" + text + "\": unknown dtype; expected f32, f64, f16 or bf16";
      return false;
    }
    dtype = *parsed;
    dims = text.substr(colon + 1);
  }
  long long m = 0, n = 0, k = 0;
  char tail = 0;
  if (std::sscanf(dims.c_str(), "%lldx%lldx%lld%c", &m, &n, &k, &tail) != 3) {
    *error = "shape \"" + text + "\": expected MxNxK, e.g. 64x64x64 or bf16:128x64x256";
    return false;
  }
  p->set_dtype(dtype);
  p->set_m(m);
  p->set_n(n);
  p->set_k(k);
  return true;
}

}  // namespace arbiter::client
