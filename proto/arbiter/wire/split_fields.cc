#include "arbiter/wire/split_fields.h"

#include <algorithm>
#include <climits>

#include <google/protobuf/io/coded_stream.h>

namespace arbiter::wire {
namespace {

// The protobuf wire format's field types (the low 3 bits of a tag).
enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

// Reads a message spread over slices, in order, without copying what it sets aside.
class Reader {
 public:
  explicit Reader(const std::vector<grpc::Slice>& slices) : slices_(slices) {
    for (const grpc::Slice& s : slices_) left_ += s.size();
  }

  bool done() const { return left_ == 0; }
  size_t position() const { return position_; }

  bool ReadByte(uint8_t* out) {
    if (left_ == 0) return false;
    while (offset_ == slices_[slice_].size()) Next();
    *out = slices_[slice_].begin()[offset_];
    Advance(1);
    return true;
  }

  // A varint of at most 10 bytes (bits past the 64th are dropped, as protobuf does).
  bool ReadVarint(uint64_t* out) {
    uint64_t value = 0;
    for (int i = 0; i < 10; ++i) {
      uint8_t byte = 0;
      if (!ReadByte(&byte)) return false;
      value |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if ((byte & 0x80) == 0) {
        *out = value;
        return true;
      }
    }
    return false;
  }

  // The next `n` bytes, as pieces of the slices (appended to `pieces`) or
  // copied to the end of `copy`. False when fewer than `n` are left.
  bool Take(size_t n, std::vector<Piece>* pieces, std::string* copy) {
    if (n > left_) return false;
    while (n > 0) {
      while (offset_ == slices_[slice_].size()) Next();
      const grpc::Slice& s = slices_[slice_];
      const size_t chunk = std::min(n, s.size() - offset_);
      const uint8_t* at = s.begin() + offset_;
      if (pieces != nullptr) pieces->push_back(Piece{at, chunk});
      if (copy != nullptr) copy->append(reinterpret_cast<const char*>(at), chunk);
      Advance(chunk);
      n -= chunk;
    }
    return true;
  }

 private:
  void Next() {
    ++slice_;
    offset_ = 0;
  }
  void Advance(size_t n) {
    offset_ += n;
    position_ += n;
    left_ -= n;
  }

  const std::vector<grpc::Slice>& slices_;
  size_t slice_ = 0;
  size_t offset_ = 0;    // within slices_[slice_]
  size_t position_ = 0;  // bytes read so far
  size_t left_ = 0;      // bytes not yet read
};

void AppendVarint(uint64_t value, std::string* out) {
  uint8_t bytes[10];
  const uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(value, bytes);
  out->append(reinterpret_cast<const char*>(bytes), static_cast<size_t>(end - bytes));
}

// Reads a tag into `tag`; false at the end of the message (`error` empty) or
// on a bad tag (`error` says why).
bool ReadTag(Reader& in, uint32_t* tag, std::string* error) {
  if (in.done()) return false;
  const size_t at = in.position();
  uint64_t value = 0;
  if (!in.ReadVarint(&value)) {
    *error = "a field's tag is cut short at byte " + std::to_string(at);
    return false;
  }
  if (value > UINT32_MAX || (value >> 3) == 0) {
    *error = "a field's tag (" + std::to_string(value) + ") names no valid field number at byte " +
             std::to_string(at);
    return false;
  }
  *tag = static_cast<uint32_t>(value);
  return true;
}

// The length of a length-delimited field, at most what protobuf reads (INT_MAX).
bool ReadLength(Reader& in, uint32_t tag, size_t* length, std::string* error) {
  const size_t at = in.position();
  uint64_t value = 0;
  if (!in.ReadVarint(&value) || value > static_cast<uint64_t>(INT_MAX)) {
    *error = "field " + std::to_string(tag >> 3) + ": a length cut short or past 2^31 at byte " +
             std::to_string(at);
    return false;
  }
  *length = static_cast<size_t>(value);
  return true;
}

// Copies the field whose tag was just read - a group with everything up to its
// end - to `out`.
bool CopyField(Reader& in, uint32_t tag, std::string* out, std::string* error) {
  std::vector<uint32_t> groups;  // field numbers of the groups not yet ended
  while (true) {
    const size_t at = in.position();
    const std::string field = "field " + std::to_string(tag >> 3);
    AppendVarint(tag, out);
    bool ok = true;
    switch (tag & 7) {
      case kVarint: {
        uint64_t value = 0;
        ok = in.ReadVarint(&value);
        if (ok) AppendVarint(value, out);
        break;
      }
      case kFixed64:
        ok = in.Take(8, nullptr, out);
        break;
      case kFixed32:
        ok = in.Take(4, nullptr, out);
        break;
      case kLengthDelimited: {
        size_t length = 0;
        if (!ReadLength(in, tag, &length, error)) return false;
        AppendVarint(length, out);
        ok = in.Take(length, nullptr, out);
        break;
      }
      case kStartGroup:
        groups.push_back(tag >> 3);
        break;
      case kEndGroup:
        if (groups.empty() || groups.back() != (tag >> 3)) {
          *error = field + ": a group ends that did not start, at byte " + std::to_string(at);
          return false;
        }
        groups.pop_back();
        break;
      default:
        *error = field + ": wire type " + std::to_string(tag & 7) + " does not exist, at byte " +
                 std::to_string(at);
        return false;
    }
    if (!ok) {
      *error = field + ": its value runs past the end of the message (at byte " + std::to_string(at) + ")";
      return false;
    }
    if (groups.empty()) return true;
    if (!ReadTag(in, &tag, error)) {
      if (error->empty()) *error = "field " + std::to_string(groups.back()) + ": a group the message ends inside";
      return false;
    }
  }
}

}  // namespace

size_t TotalBytes(const std::vector<Piece>& pieces) {
  size_t total = 0;
  for (const Piece& p : pieces) total += p.bytes;
  return total;
}

bool SplitFields(const std::vector<grpc::Slice>& slices, const std::vector<uint32_t>& set_aside,
                 SplitMessage* out, std::string* error) {
  out->rest.clear();
  out->fields.assign(set_aside.size(), {});
  error->clear();
  Reader in(slices);
  uint32_t tag = 0;
  while (ReadTag(in, &tag, error)) {
    const auto which = std::find(set_aside.begin(), set_aside.end(), tag >> 3);
    if (which == set_aside.end() || (tag & 7) != kLengthDelimited) {
      if (!CopyField(in, tag, &out->rest, error)) return false;
      continue;
    }
    size_t length = 0;
    if (!ReadLength(in, tag, &length, error)) return false;
    std::vector<Piece>& pieces = out->fields[static_cast<size_t>(which - set_aside.begin())];
    pieces.clear();  // the last occurrence wins
    const size_t at = in.position();
    if (!in.Take(length, &pieces, nullptr)) {
      *error = "field " + std::to_string(tag >> 3) + ": " + std::to_string(length) +
               " bytes announced at byte " + std::to_string(at) + " run past the end of the message";
      return false;
    }
  }
  return error->empty();
}

}  // namespace arbiter::wire
