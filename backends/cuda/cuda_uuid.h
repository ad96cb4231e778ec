// How Arbiter writes a GPU's UUID ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
// nvidia-smi's spelling): the daemon reports it in ServerInfo and matches
// --device against it, and arbiterctl finds the daemon's GPU among its own by it.
// Header-only, so that arbiterctl can share it without linking the runtime.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

namespace arbiter::cuda {

inline std::string UuidText(const cudaUUID_t& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  char text[64];
  std::snprintf(text, sizeof(text),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return text;
}

}  // namespace arbiter::cuda
