// `memtide-cli segment-helper --name NAME --dir DIR --parent PID`, started by `memtide run`
// (as root, with --keep) beside the program: creates and removes the program's kept-trace
// segments in DIR when the program, having dropped its privileges, no longer may
// (recorder/segment_helper.h). It listens on the abstract SOCK_SEQPACKET socket NAME and serves
// the processes descended from PID (memtide run) only, and only names of segments
// (NAME.NNNN.mtide) in DIR: a creation is exclusive (never an existing file), a removal is of a
// regular file. It ends when PID has ended.
#include <CLI/CLI.hpp>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"

namespace memtide::cli {

namespace {

struct HelperOptions {
  std::string name, dir;
  long parent = 0;
};

// Whether `pid` is `ancestor` or descends from it.
bool descends(pid_t pid, pid_t ancestor) {
  for (int depth = 0; pid > 1 && depth < 64; ++depth) {
    if (pid == ancestor) return true;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return false;
    const auto close = line.rfind(')');
    if (close == std::string::npos) return false;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) != 2) return false;
    pid = ppid;
  }
  return pid == ancestor;
}

// 0, or why `path` is not a segment name in `dir`.
int check_path(const std::string& path, const std::string& dir) {
  static const std::regex segment(R"(^[^/]+\.[0-9]{4,}\.mtide$)");
  const std::filesystem::path p(path);
  if (!p.is_absolute() || !std::regex_match(p.filename().string(), segment)) return EINVAL;
  std::error_code ec;
  const auto where = std::filesystem::canonical(p.parent_path(), ec);
  if (ec || where != std::filesystem::canonical(dir, ec) || ec) return EACCES;
  return 0;
}

// Serves one connection: one request, one reply.
void serve(int c, const HelperOptions& o) {
  ucred peer{};
  socklen_t len = sizeof peer;
  char msg[1 + 4096];
  const ssize_t n = recv(c, msg, sizeof msg - 1, 0);
  unsigned char status = 0;
  int fd = -1;
  if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || !descends(peer.pid, static_cast<pid_t>(o.parent))) {
    status = EPERM;
  } else if (n < 2 || (msg[0] != 'C' && msg[0] != 'U')) {
    status = EINVAL;
  } else {
    const std::string path(msg + 1, static_cast<size_t>(n - 1));
    if (const int bad = check_path(path, o.dir)) {
      status = static_cast<unsigned char>(bad);
    } else if (msg[0] == 'C') {
      fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (fd < 0) status = static_cast<unsigned char>(errno);
    } else {
      struct stat st;
      if (lstat(path.c_str(), &st) != 0) status = static_cast<unsigned char>(errno);
      else if (!S_ISREG(st.st_mode)) status = EINVAL;
      else if (unlink(path.c_str()) != 0) status = static_cast<unsigned char>(errno);
    }
  }
  iovec io{&status, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  if (fd >= 0) {
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    cmsghdr* h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(h), &fd, sizeof fd);
  }
  if (sendmsg(c, &m, MSG_NOSIGNAL) != 1) std::fprintf(stderr, "memtide: segment helper: cannot reply: %s\n", std::strerror(errno));
  if (fd >= 0) close(fd);
}

int run_helper(const HelperOptions& o) {
  const int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (s < 0 || o.name.empty() || o.name.size() >= sizeof a.sun_path - 1) {
    std::fprintf(stderr, "memtide: segment helper: bad socket name\n");
    return kExitError;
  }
  std::memcpy(a.sun_path + 1, o.name.data(), o.name.size());
  if (bind(s, reinterpret_cast<sockaddr*>(&a), static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + o.name.size())) != 0 ||
      listen(s, 16) != 0) {
    std::fprintf(stderr, "memtide: segment helper: cannot listen: %s\n", std::strerror(errno));
    return kExitError;
  }
  signal(SIGPIPE, SIG_IGN);
  while (kill(static_cast<pid_t>(o.parent), 0) == 0 || errno == EPERM) {
    pollfd p{s, POLLIN, 0};
    if (poll(&p, 1, 500) <= 0) continue;
    const int c = accept4(s, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    const timeval wait{2, 0};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    serve(c, o);
    close(c);
  }
  return kExitOk;
}

}  // namespace

Command segment_helper_command() {
  return {"segment-helper",
          "(Started by memtide run as root with --keep.) Create and remove a kept trace's segments for a program "
          "of the run that dropped its privileges",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<HelperOptions>();
            sub.add_option("--name", o->name, "Abstract socket name to listen on")->required();
            sub.add_option("--dir", o->dir, "The directory of the run's traces")->required();
            sub.add_option("--parent", o->parent, "memtide run's pid: only its descendants are served")->required();
            return [o] { return run_helper(*o); };
          }};
}

}  // namespace memtide::cli
