#include "tests/engine/postgres_server.h"

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace arbiter::testing {
namespace {

// Whom the server runs as: PostgreSQL refuses to run as root.
struct ServerUser {
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

absl::StatusOr<ServerUser> ChooseUser() {
  if (geteuid() != 0) return ServerUser{};
  const passwd* pw = getpwnam("postgres");
  if (pw == nullptr) {
    return absl::FailedPreconditionError(
        "running as root, and there is no `postgres` user to run the server as "
        "(Debian's postgresql package creates it)");
  }
  return ServerUser{true, pw->pw_uid, pw->pw_gid};
}

// Starts argv[0] with stdout and stderr appended to `log`, as `user`. With `tie`, the
// child gets SIGQUIT when this process dies. Only async-signal-safe calls after fork.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& args, const std::string& log,
                            const ServerUser& user, bool tie) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return absl::InternalError(absl::StrCat("open ", log, ": ", strerror(errno)));
  if (user.switch_user && fchown(log_fd, user.uid, user.gid) != 0) {
    close(log_fd);
    return absl::InternalError(absl::StrCat("chown ", log, ": ", strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    if (user.switch_user &&
        (setgroups(0, nullptr) != 0 || setgid(user.gid) != 0 || setuid(user.uid) != 0)) {
      _exit(126);
    }
    // After setuid, which clears it; and the parent may already have gone.
    if (tie && (prctl(PR_SET_PDEATHSIG, SIGQUIT) != 0 || getppid() != parent)) _exit(125);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(log_fd);
  return pid;
}

// Waits for `pid` at most `timeout`; its exit code, or -1 when it is still running.
int WaitFor(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (done < 0) return -2;
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

absl::StatusOr<int> FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return absl::InternalError(absl::StrCat("bind: ", strerror(errno)));
  }
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

std::string PostgresServer::BinDir() {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string bin = (entry.path() / "bin").string();
    if (access((bin + "/postgres").c_str(), X_OK) == 0 &&
        access((bin + "/initdb").c_str(), X_OK) == 0) {
      found.push_back(bin);
    }
  }
  if (found.empty()) return "";
  // Version directories are numbers ("13", "15"): the newest by value.
  return *std::max_element(
      found.begin(), found.end(), [](const std::string& a, const std::string& b) {
        return std::atoi(std::filesystem::path(a).parent_path().filename().c_str()) <
               std::atoi(std::filesystem::path(b).parent_path().filename().c_str());
      });
}

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start() {
  std::unique_ptr<PostgresServer> server(new PostgresServer());
  server->bin_ = BinDir();
  if (server->bin_.empty()) {
    return absl::NotFoundError(
        "PostgreSQL server not installed (/usr/lib/postgresql/*/bin/postgres): "
        "apt-get install postgresql");
  }
  ASSIGN_OR_RETURN(const ServerUser user, ChooseUser());
  std::string dir = (std::filesystem::temp_directory_path() / "arbiter-pg-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp: ", strerror(errno)));
  }
  server->dir_ = dir;
  if (user.switch_user && chown(dir.c_str(), user.uid, user.gid) != 0) {
    return absl::InternalError(absl::StrCat("chown ", dir, ": ", strerror(errno)));
  }
  server->password_ = absl::StrCat("test-password-", getpid());
  server->password_file_ = dir + "/password";
  { std::ofstream(server->password_file_) << server->password_ << "\n"; }
  if (user.switch_user && chown(server->password_file_.c_str(), user.uid, user.gid) != 0) {
    return absl::InternalError(
        absl::StrCat("chown ", server->password_file_, ": ", strerror(errno)));
  }
  // Local (socket) connections trusted, for the fixture; TCP ones - the stores' - need
  // the password.
  ASSIGN_OR_RETURN(pid_t initdb, Spawn({server->bin_ + "/initdb", "-D", dir + "/data", "-U", kUser,
                                        "--auth-local=trust", "--auth-host=scram-sha-256",
                                        "--pwfile=" + server->password_file_, "-E", "UTF8",
                                        "--locale=C", "--no-sync", "--no-instructions"},
                                       dir + "/initdb.log", user, /*tie=*/true));
  const int initdb_exit = WaitFor(initdb, std::chrono::seconds(120));
  if (initdb_exit != 0) {
    std::ifstream log(dir + "/initdb.log");
    std::stringstream text;
    text << log.rdbuf();
    return absl::InternalError(absl::StrCat("initdb exited ", initdb_exit, ": ", text.str()));
  }
  // A port taken between choosing and binding makes the server exit: choose again.
  absl::Status launched;
  for (int attempt = 0; attempt < 3; ++attempt) {
    ASSIGN_OR_RETURN(server->port_, FreePort());
    launched = server->Launch();
    if (launched.ok()) return server;
  }
  return launched;
}

absl::Status PostgresServer::Launch() {
  ASSIGN_OR_RETURN(const ServerUser user, ChooseUser());
  // Durability settings off: the tests restart the server cleanly, and never the machine.
  ASSIGN_OR_RETURN(pid_, Spawn({bin_ + "/postgres", "-D", dir_ + "/data", "-p", absl::StrCat(port_),
                                "-k", dir_, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
                                "-c", "full_page_writes=off", "-c", "shared_buffers=16MB", "-c",
                                "max_connections=200"},
                               dir_ + "/server.log", user, /*tie=*/true));
  const std::string conninfo =
      absl::StrCat("host=", dir_, " port=", port_, " user=", kUser, " dbname=postgres");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (PQping(conninfo.c_str()) != PQPING_OK) {
    const int exited = WaitFor(pid_, std::chrono::milliseconds(0));
    if (exited >= 0 || std::chrono::steady_clock::now() > deadline) {
      if (exited < 0) {
        kill(pid_, SIGQUIT);
        WaitFor(pid_, std::chrono::seconds(10));
      }
      pid_ = -1;
      return absl::UnavailableError(
          absl::StrCat("postgres on port ", port_, " did not come up; its log:\n", Log()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::OkStatus();
}

PostgresServer::~PostgresServer() {
  if (running()) (void)Stop();
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

std::string PostgresServer::Log() const {
  std::ifstream in(dir_ + "/server.log");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string PostgresServer::Uri(const std::string& database, const std::string& query) const {
  return absl::StrCat("postgresql://", kUser, "@127.0.0.1:", port_, "/", database,
                      query.empty() ? "" : "?", query);
}

absl::StatusOr<std::string> PostgresServer::CreateDatabase() {
  const std::string name = absl::StrCat("test_", ++databases_);
  RETURN_IF_ERROR(Query("postgres", absl::StrCat("CREATE DATABASE ", name)).status());
  return name;
}

absl::StatusOr<std::string> PostgresServer::EmptyStoreDatabase() {
  if (reused_.empty()) {
    ASSIGN_OR_RETURN(reused_, CreateDatabase());
  }
  RETURN_IF_ERROR(Query(reused_, "DROP SCHEMA IF EXISTS arbiter CASCADE").status());
  return reused_;
}

absl::StatusOr<std::string> PostgresServer::Query(const std::string& database,
                                                  const std::string& sql) {
  const std::string conninfo =
      absl::StrCat("host=", dir_, " port=", port_, " user=", kUser, " dbname=", database);
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    const std::string error = PQerrorMessage(conn);
    PQfinish(conn);
    return absl::UnavailableError(absl::StrCat("connect to ", database, ": ", error));
  }
  PGresult* result = PQexec(conn, sql.c_str());
  const ExecStatusType status = PQresultStatus(result);
  std::string value;
  absl::Status error;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    error = absl::InternalError(absl::StrCat(sql, ": ", PQresultErrorMessage(result)));
  } else if (PQntuples(result) > 0 && PQnfields(result) > 0) {
    value = PQgetvalue(result, 0, 0);
  }
  PQclear(result);
  PQfinish(conn);
  if (!error.ok()) return error;
  return value;
}

absl::Status PostgresServer::Stop() {
  if (!running()) return absl::OkStatus();
  kill(pid_, SIGINT);  // fast shutdown: disconnect clients, checkpoint, exit
  int exited = WaitFor(pid_, std::chrono::seconds(60));
  if (exited < 0) {
    kill(pid_, SIGQUIT);
    exited = WaitFor(pid_, std::chrono::seconds(10));
  }
  pid_ = -1;
  if (exited != 0) {
    return absl::InternalError(
        absl::StrCat("postgres exited ", exited, " on stop; its log:\n", Log()));
  }
  return absl::OkStatus();
}

absl::Status PostgresServer::Restart() {
  if (running()) return absl::FailedPreconditionError("postgres is already running");
  return Launch();
}

PostgresServer* SharedPostgresServer(std::string* why) {
  static absl::StatusOr<std::unique_ptr<PostgresServer>>* server =
      new absl::StatusOr<std::unique_ptr<PostgresServer>>(PostgresServer::Start());
  // Stopped at exit (the server would stop anyway when this process dies: SIGQUIT).
  static const int registered = std::atexit([] { delete server; });
  (void)registered;
  if (!server->ok()) {
    *why = server->status().ToString();
    return nullptr;
  }
  return server->value().get();
}

}  // namespace arbiter::testing
