// arbiterctl: the operator's command line for arbiterd (see Ctl::PrintUsage).
#include <fstream>
#include <iostream>
#include <sstream>

#include "client/arbiter_client.h"
#include "client/args.h"
#include "client/ctl.h"

namespace {

// The token without surrounding whitespace; false when unreadable or empty.
bool ReadToken(const std::string& path, std::string* token) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return false;
  const size_t end = text.find_last_not_of(" \t\r\n");
  *token = text.substr(begin, end - begin + 1);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using arbiter::client::Ctl;
  arbiter::client::Args args;
  std::string error;
  if (!args.Parse(std::vector<std::string>(argv + 1, argv + argc), Ctl::Switches(), Ctl::Options(),
                  &error)) {
    std::cerr << "arbiterctl: " << error << " (see arbiterctl --help)\n";
    return arbiter::client::kExitUsage;
  }
  if (args.Has("help") || args.positional().empty()) {
    Ctl::PrintUsage(args.Has("help") ? std::cout : std::cerr);
    return args.Has("help") ? arbiter::client::kExitOk : arbiter::client::kExitUsage;
  }

  arbiter::client::ClientOptions options;
  options.server = args.Get("server", options.server);
  // --operands inline means the bytes in the messages: one call gains nothing from a staging buffer.
  options.host_staging = false;
  if (args.Has("token-file") && !ReadToken(args.Get("token-file"), &options.token)) {
    std::cerr << "arbiterctl: --token-file " << args.Get("token-file")
              << ": cannot read a token from it\n";
    return arbiter::client::kExitUsage;
  }
  if (args.Has("timeout")) {
    try {
      options.deadline_seconds = std::stod(args.Get("timeout"));
    } catch (const std::exception&) {
      std::cerr << "arbiterctl: --timeout: expected seconds, got \"" << args.Get("timeout") << "\"\n";
      return arbiter::client::kExitUsage;
    }
  }
  arbiter::client::ArbiterClient client(options);
  Ctl ctl(client, args, std::cout, std::cerr);
  return ctl.Run(args.positional()[0]);
}
