// End-to-end tests of `memtide run` (scripts/memtide): options, exit statuses, where traces go,
// the leak gate. Real programs under the real wrapper; traces read back through the reader.
// (Programs it cannot wholly reach: reach_e2e_test.cpp.)
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/recorder/e2e_run.h"

namespace fs = std::filesystem;
using memtide::test::live;
using memtide::test::Replay;
using memtide::test::replay_trace;
using memtide::test::run;
using memtide::test::RunResult;
using memtide::test::TempDir;

TEST(Wrapper, RunPassesExitStatusAndWritesPrivateFile) {
  TempDir dir;
  const fs::path out = dir.path() / "w.mtide";
  RunResult r = run({MT_WRAPPER, "run", "--quiet", "-o", out.string(), "--", MT_LIFECYCLE, "quick-exit"}, {}, dir.path());
  EXPECT_EQ(r.status, 3) << r.err;
  ASSERT_TRUE(fs::exists(out)) << r.err;
  struct stat st;
  ASSERT_EQ(stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const Replay t = replay_trace(out.string());
  EXPECT_EQ(live(t, 9999), 3u);
}

// A program that exits with a status above 128 (python's sys.exit(130), _exit, quick_exit) is
// not said to have been killed by a signal; one that is killed is. The trace's End agrees.
TEST(Wrapper, ExitStatusAbove128IsNotASignal) {
  for (const char* way : {"exit", "return", "_exit", "quick_exit"}) {
    for (const char* where : {"main", "thread"}) {
      if (!std::strcmp(way, "return") && !std::strcmp(where, "thread")) continue;
      SCOPED_TRACE(std::string(way) + " from " + where);
      TempDir dir;
      const fs::path out = dir.path() / "t.mtide";
      RunResult r = run({MT_WRAPPER, "run", "--quiet", "-o", out.string(), "--", MT_EXIT_WAYS, way, where, "130"}, {},
                        dir.path());
      EXPECT_EQ(r.status, 130) << r.err;
      EXPECT_EQ(r.err.find("signal"), std::string::npos) << r.err;
      RunResult end = run({MT_WRAPPER, "info", "--end", out.string()}, {}, dir.path());
      const std::string expected = std::string(!std::strcmp(way, "return") ? "exit" : way) + " 130\n";
      EXPECT_EQ(end.out, expected);
    }
  }
  TempDir dir;
  RunResult k = run({MT_WRAPPER, "run", "--quiet", "-o", (dir.path() / "t.mtide").string(), "--", MT_EXIT_WAYS, "signal",
                     "main", std::to_string(SIGINT)},
                    {}, dir.path());
  EXPECT_EQ(k.status, 128 + SIGINT);
  EXPECT_NE(k.err.find("(signal 2, INT)"), std::string::npos) << k.err;
}

// Every flag of memtide run takes no value, or =1/=0/=true/=false, with one meaning.
TEST(Wrapper, FlagsTakeOneOrZero) {
  TempDir dir;
  const std::string out = (dir.path() / "t.mtide").string();
  auto summary = [&](std::vector<std::string> flags) {
    std::vector<std::string> argv{MT_WRAPPER, "run", "-o", out};
    argv.insert(argv.end(), flags.begin(), flags.end());
    for (const char* a : {"--", MT_EXIT_WAYS, "return", "main", "0"}) argv.push_back(a);
    RunResult r = run(argv, {}, dir.path());
    EXPECT_EQ(r.status, 0) << r.err;
    return r.err.find("allocations, peak heap") != std::string::npos;
  };
  EXPECT_TRUE(summary({}));
  EXPECT_FALSE(summary({"--quiet"}));
  EXPECT_FALSE(summary({"--quiet=1"}));
  EXPECT_FALSE(summary({"--quiet=true"}));
  EXPECT_TRUE(summary({"--quiet=0"}));
  EXPECT_TRUE(summary({"--quiet", "--quiet=false"}));
  EXPECT_FALSE(summary({"--no-follow=1", "--quiet"}));
  EXPECT_FALSE(summary({"--no-follow=0", "--leak-scan=1", "--no-symbolize=true", "--check=0", "--quiet"}));
  RunResult bad = run({MT_WRAPPER, "run", "--quiet=maybe", "--", MT_EXIT_WAYS, "return", "main", "0"}, {}, dir.path());
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--quiet takes no value, or =1, =0, =true or =false"), std::string::npos) << bad.err;
}

// The trace of an image exec'd by a process that has one keeps the extension: t.1.mtide.
TEST(Wrapper, ExecdImageTraceKeepsTheExtension) {
  TempDir dir;
  RunResult r = run({MT_WRAPPER, "run", "--quiet", "-o", (dir.path() / "t.mtide").string(), "--", MT_EXIT_WAYS, "exec",
                     "main", "0"},
                    {}, dir.path());
  EXPECT_EQ(r.status, 0) << r.err;
  std::vector<std::string> traces;
  for (const auto& e : fs::directory_iterator(dir.path()))
    if (e.path().filename().string().find(".mtide") != std::string::npos) traces.push_back(e.path().filename().string());
  std::sort(traces.begin(), traces.end());
  EXPECT_EQ(traces, (std::vector<std::string>{"t.1.mtide", "t.mtide"}));
}

// -o naming a directory (the traces would go to DIR.1, DIR.2, ...) or a device is refused
// before the program runs, and nothing there is touched.
TEST(Wrapper, OutputThatIsNotAFileIsRefusedBeforeTheRun) {
  TempDir dir;
  const fs::path marker = dir.path() / "ran", sub = dir.path() / "traces";
  fs::create_directory(sub);
  for (const std::string& out : {sub.string(), std::string("/dev/null")}) {
    SCOPED_TRACE(out);
    RunResult r = run({MT_WRAPPER, "run", "-o", out, "--", "sh", "-c", "touch " + marker.string()}, {}, dir.path());
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find(out.find("/dev/") == 0 ? "is not a regular file" : "it is a directory"), std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(marker)) << "the program must not run";
  }
  EXPECT_TRUE(fs::is_directory(sub));
  EXPECT_TRUE(fs::is_empty(sub));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_FALSE(fs::exists(sub.string() + ".1"));
}

// A file that is there but cannot be run: what a shell says (Permission denied, 126).
TEST(Wrapper, ProgramThatCannotBeRunIsPermissionDenied) {
  TempDir dir;
  const fs::path script = dir.path() / "not-executable";
  std::ofstream(script) << "#!/bin/sh\necho ran\n";
  fs::permissions(script, fs::perms::owner_read | fs::perms::owner_write);
  RunResult r = run({MT_WRAPPER, "run", "--", script.string()}, {}, dir.path());
  EXPECT_EQ(r.status, 126);
  EXPECT_NE(r.err.find("not-executable: Permission denied"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  RunResult d = run({MT_WRAPPER, "run", "--", dir.path().string()}, {}, dir.path());
  EXPECT_EQ(d.status, 126);
  EXPECT_NE(d.err.find("Is a directory"), std::string::npos) << d.err;
}

// Counts in the report's text have thousands separators, as in the run's summary; the JSON
// keeps plain numbers.
TEST(Wrapper, ReportCountsHaveThousandsSeparators) {
  TempDir dir;
  const std::string out = (dir.path() / "t.mtide").string();
  RunResult r = run({MT_WRAPPER, "run", "-o", out, "--", MT_LIFECYCLE, "callers", "3000"}, {}, dir.path());
  ASSERT_EQ(r.status, 0) << r.err;
  RunResult rep = run({MT_WRAPPER, "report", out}, {}, dir.path());
  ASSERT_EQ(rep.status, 0) << rep.err;
  const std::size_t heap = rep.out.find("\nheap ");
  ASSERT_NE(heap, std::string::npos) << rep.out;
  const std::string line = rep.out.substr(heap + 1, rep.out.find('\n', heap + 1) - heap - 1);
  EXPECT_NE(line.find(",0"), std::string::npos) << line;  // "3,0xx allocations"
  EXPECT_EQ(line.find(" 1 frees"), std::string::npos) << line;
  EXPECT_NE(r.err.find(line.substr(line.find_first_not_of(' ', 4), line.find(" allocations") - line.find_first_not_of(' ', 4))),
            std::string::npos)
      << "the summary and the report print the same count\n" << r.err << line;
}

// memtide run --check judges every process of the run, each on its trace: a script that runs
// (or execs) a leaking program fails the gate on the program's leak, and the summary names the
// processes judged. The shell's own blocks (reachable at its exit, or gone with an exec) pass.
TEST(Wrapper, CheckJudgesEveryProcessOfTheRun) {
  for (const std::string& how : {std::string(MT_LIFECYCLE " exec-image; true"), std::string("exec " MT_LIFECYCLE " exec-image")}) {
    SCOPED_TRACE(how);
    TempDir dir;
    RunResult r = run({MT_WRAPPER, "run", "--check", "-o", (dir.path() / "t.mtide").string(), "--", "sh", "-c", how}, {},
                      dir.path());
    EXPECT_EQ(r.status, 1) << r.out << r.err;
    // (The verdict on stderr, as LeakSanitizer's: stdout is the program's.)
    EXPECT_EQ(r.out.find("memtide check"), std::string::npos) << r.out;
    const std::size_t summary = r.err.find("processes judged:");
    ASSERT_NE(summary, std::string::npos) << r.out << r.err;
    EXPECT_NE(r.err.find("FAILED lifecycle", summary), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("passed sh", summary), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("FAILED sh", summary), std::string::npos) << r.err;
  }
}

// A memtide run inside a program recorded with --no-follow is a run of its own: nothing of
// the outer run reaches it (its trace is named as usual, where it runs).
TEST(Wrapper, NestedRunUnderNoFollowIsItsOwn) {
  TempDir dir;
  const fs::path inner = dir.path() / "inner";
  fs::create_directory(inner);
  RunResult r = run({MT_WRAPPER, "run", "--quiet", "--no-follow", "-o", (dir.path() / "outer.mtide").string(), "--",
                     "sh", "-c", "cd " + inner.string() + " && exec " MT_WRAPPER " run --quiet -- " MT_LIFECYCLE " quick-exit"},
                    {}, dir.path());
  EXPECT_EQ(r.status, 3) << r.err;
  std::vector<std::string> inner_files, outer_files;
  for (const auto& e : fs::directory_iterator(inner)) inner_files.push_back(e.path().filename().string());
  for (const auto& e : fs::directory_iterator(dir.path()))
    if (e.path().extension() == ".mtide" || e.path().filename().string().find(".mtide.") != std::string::npos)
      outer_files.push_back(e.path().filename().string());
  ASSERT_EQ(inner_files.size(), 1u) << r.err;
  EXPECT_EQ(inner_files[0].rfind("memtide.lifecycle.", 0), 0u) << inner_files[0];
  EXPECT_EQ(outer_files, std::vector<std::string>{"outer.mtide"});
  EXPECT_EQ(live(replay_trace((inner / inner_files[0]).string()), 9999), 3u);
}

// The run's temporary files (the manifest naming the traces) are the user's alone, as the
// traces are; the program keeps the user's umask.
TEST(Wrapper, TemporaryFilesArePrivate) {
  TempDir dir;
  const mode_t old_mask = umask(022);
  RunResult r = run({MT_WRAPPER, "run", "--quiet", "-o", (dir.path() / "t.mtide").string(), "--", "sh", "-c",
                     "stat -c %a \"$MEMTIDE_MANIFEST\"; umask"},
                    {{"TMPDIR", dir.path().string()}}, dir.path());
  umask(old_mask);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "600\n0022\n");
}

TEST(Wrapper, BadOptionValueIsAnErrorBeforeTheProgramRuns) {
  TempDir dir;
  RunResult r = run({MT_WRAPPER, "run", "--max-depth", "zero", "--", MT_LIFECYCLE, "quick-exit"}, {}, dir.path());
  EXPECT_EQ(r.status, 2);
  // (The flag as typed, not the variable the wrapper set from it.)
  EXPECT_NE(r.err.find("bad value --max-depth zero"), std::string::npos) << r.err;
  RunResult u = run({MT_WRAPPER, "run", "--no-such-option", "--", MT_LIFECYCLE, "quick-exit"}, {}, dir.path());
  EXPECT_EQ(u.status, 2);
  EXPECT_NE(u.err.find("unknown option"), std::string::npos) << u.err;
  // Bad values that come from the environment, also of the variables the wrapper itself sets.
  for (auto [var, value] : {std::pair{"MEMTIDE_FOLLOW", "maybe"}, std::pair{"MEMTIDE_QUIET", "2"},
                            std::pair{"MEMTIDE_OUTPUT", ""}, std::pair{"MEMTIDE_UNWIND", "slow"}}) {
    RunResult e = run({MT_WRAPPER, "run", "--", MT_LIFECYCLE, "quick-exit"}, {{var, value}}, dir.path());
    EXPECT_EQ(e.status, 2) << var << "=" << value << "\n" << e.err;
    EXPECT_NE(e.err.find(var), std::string::npos) << e.err;
  }
}

// What a shell would do with a program that is not there (127), and a trace that cannot be
// created is an error before the program runs (it would otherwise run unrecorded).
TEST(Wrapper, MissingProgramOrUnwritableOutputIsSaidBeforeTheRun) {
  TempDir dir;
  RunResult r = run({MT_WRAPPER, "run", "--", (dir.path() / "no-such-program").string()}, {}, dir.path());
  EXPECT_EQ(r.status, 127);
  EXPECT_NE(r.err.find("no-such-program: command not found"), std::string::npos) << r.err;
  const fs::path marker = dir.path() / "ran";
  RunResult o = run({MT_WRAPPER, "run", "-o", (dir.path() / "missing" / "t.mtide").string(), "--", "sh", "-c",
                     "touch " + marker.string()},
                    {}, dir.path());
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("is not a writable directory"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(marker)) << "the program must not run";
}

// A misspelled MEMTIDE_* variable is not ignored without a word: memtide run warns, naming
// the closest known one, and runs the program.
TEST(Wrapper, UnknownVariableIsWarnedOf) {
  TempDir dir;
  RunResult r = run({MT_WRAPPER, "run", "--quiet", "-o", (dir.path() / "t.mtide").string(), "--", MT_LIFECYCLE, "quick-exit"},
                    {{"MEMTIDE_MAX_DEPHT", "8"}}, dir.path());
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.err.find("MEMTIDE_MAX_DEPHT is not a memtide variable (ignored); did you mean MEMTIDE_MAX_DEPTH?"),
            std::string::npos)
      << r.err;
  // The readers' variables are memtide's too.
  RunResult known = run({MT_WRAPPER, "run", "--quiet", "-o", (dir.path() / "k.mtide").string(), "--", MT_LIFECYCLE, "quick-exit"},
                        {{"MEMTIDE_FULL_REPLAY", "1"}, {"MEMTIDE_CACHE_DIR", dir.path().string()}}, dir.path());
  EXPECT_EQ(known.err.find("not a memtide variable"), std::string::npos) << known.err;
}

// The gate's options are checked before the program starts: a missing suppressions file, a
// JUnit report that could not be written (or would replace the trace), a bad limit are exit
// status 2 with the program not run.
TEST(Wrapper, CheckOptionsAreCheckedBeforeTheProgramRuns) {
  TempDir dir;
  const fs::path marker = dir.path() / "ran", out = dir.path() / "t.mtide";
  const std::vector<std::vector<std::string>> cases = {
      {"--suppressions", (dir.path() / "missing.supp").string()},
      {"--junit", (dir.path() / "missing" / "j.xml").string()},
      {"--junit", out.string()},
      {"--max-leaked-bytes", "lots"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c[0] + " " + c[1]);
    std::vector<std::string> argv = {MT_WRAPPER, "run", "--quiet", "--check", "-o", out.string()};
    argv.insert(argv.end(), c.begin(), c.end());
    for (const char* a : {"--", "sh", "-c"}) argv.emplace_back(a);
    argv.push_back("touch " + marker.string());
    RunResult r = run(argv, {}, dir.path());
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_FALSE(fs::exists(marker)) << "the program must not run\n" << r.err;
  }
}

// Every trace of a run lands where memtide run was started, with the default name and with a
// relative -o, also that of a program which changes directory before its trace is opened (here
// exec'd after a cd): a name relative to its own working directory would put it elsewhere,
// and the follower and the summary, reading the manifest from the start directory, would not
// find it.
TEST(Wrapper, TracesOfProgramsThatChangeDirectoryStayInTheStartDirectory) {
  for (const bool named : {true, false}) {
    TempDir dir;
    fs::create_directory(dir.path() / "sub");
    // memtide run started in the test's directory; the program moves to sub/, then execs.
    const std::string cmd = "cd '" + dir.path().string() + "' && exec " MT_WRAPPER " run " +
                            (named ? "-o t.mtide " : "") + "-- sh -c 'cd sub && exec " MT_LIFECYCLE " exec-image'";
    RunResult r = run({"sh", "-c", cmd}, {}, dir.path());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err.find("no such file"), std::string::npos) << r.err;
    EXPECT_TRUE(fs::is_empty(dir.path() / "sub")) << "a trace was written in the directory the program moved to";
    std::vector<fs::path> traces;
    for (const auto& e : fs::directory_iterator(dir.path()))
      if (e.path().filename().string().find(".mtide") != std::string::npos) traces.push_back(e.path());
    ASSERT_EQ(traces.size(), 2u) << r.err;  // the shell's and the exec'd image's
    bool image = false;
    for (const fs::path& t : traces) {
      const Replay rep = replay_trace(t.string());
      ASSERT_TRUE(rep.read_ok) << t << ": " << rep.error;
      image |= live(rep, 8888) == 2;
    }
    EXPECT_TRUE(image) << "the exec'd image's trace (8888 x2 not freed) is among them";
    if (!named) {
      for (const fs::path& t : traces) EXPECT_EQ(t.filename().string().rfind("memtide.", 0), 0u) << t;
    }
  }
}

// A script that starts many short programs (as pyenv's shims do) gets a trace per process; the
// summary names the program's own last trace and the busiest others, at most eight, and counts
// the rest in one line. Every trace stays on disk.
TEST(Wrapper, TheSummaryOfManyProcessesNamesTheProgramAndCountsTheRest) {
  TempDir dir;
  const std::string script = "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do /bin/true; done; exec " MT_LIFECYCLE " exec-image";
  RunResult r = run({"sh", "-c", "cd '" + dir.path().string() + "' && exec " MT_WRAPPER " run --no-symbolize -- sh -c '" +
                                    script + "'"},
                    {}, dir.path());
  ASSERT_EQ(r.status, 0) << r.err;
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) files += e.path().extension() == ".mtide";
  EXPECT_GE(files, 13u) << "twelve true and the exec'd program";
  std::size_t named = 0;
  bool program = false;
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > 6 && line.compare(line.size() - 6, 6, ".mtide") == 0) {
      ++named;
      program |= line.find("memtide.lifecycle.") != std::string::npos;
    }
  }
  EXPECT_TRUE(program) << "the program's own trace is named\n" << r.err;
  EXPECT_EQ(named, 8u) << r.err;
  const std::string more = "and " + std::to_string(files - named) + " more traces in " + dir.path().string() + " (";
  EXPECT_NE(r.err.find(more), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" true"), std::string::npos) << "the others counted by program\n" << r.err;
}

// memtide run of `lifecycle spin` (allocates until killed) in a process group of its own, as a
// terminal's foreground job; once the program has recorded for a while, `sig` goes to the group
// (`group`: as the terminal sends Ctrl-C) or to memtide run alone (as a supervisor or `docker
// stop` does). The run must end within 30 s: its exit status, its stderr.
std::pair<int, std::string> run_then_signal(const fs::path& out, const fs::path& dir, int sig, bool group) {
  const fs::path err = dir / "stderr.txt";
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();
    signal(SIGINT, SIG_DFL);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(e, 2);
    execl(MT_WRAPPER, MT_WRAPPER, "run", "-o", out.c_str(), "--", MT_LIFECYCLE, "spin", nullptr);
    _exit(127);
  }
  for (int i = 0; i < 500 && !(fs::exists(out) && fs::file_size(out) > 100000); ++i) usleep(10000);
  usleep(200000);
  EXPECT_EQ(kill(group ? -pid : pid, sig), 0);
  int status = 0;
  for (int i = 0; i < 3000 && waitpid(pid, &status, WNOHANG) == 0; ++i) usleep(10000);
  const bool ended = WIFEXITED(status) || WIFSIGNALED(status);
  kill(-pid, SIGKILL);  // whatever of the group is left (a program memtide run left behind)
  if (!ended) {
    waitpid(pid, &status, 0);
    ADD_FAILURE() << "memtide run did not end within 30 s of the signal";
  }
  const std::string e = memtide::test::slurp(err);
  if (!WIFEXITED(status)) {
    ADD_FAILURE() << "memtide run died of signal " << WTERMSIG(status) << "\n" << e;
    return {128 + WTERMSIG(status), e};
  }
  return {WEXITSTATUS(status), e};
}

// What a run ended by `sig` must leave: the program's status (128 + sig) passed through with
// memtide's note, the summary, and a whole trace with its End record and the names.
void expect_finished_after(int sig, const char* note, const fs::path& out, const std::pair<int, std::string>& run) {
  const auto& [status, err] = run;
  EXPECT_EQ(status, 128 + sig) << err;
  EXPECT_NE(err.find(std::string("ended with status ") + std::to_string(128 + sig) + " " + note), std::string::npos)
      << err;
  EXPECT_NE(err.find(out.string() + "\n  "), std::string::npos) << "the summary names the trace\n" << err;
  const Replay t = replay_trace(out.string());
  ASSERT_TRUE(t.read_ok) << t.error;
  EXPECT_TRUE(t.ended);
  EXPECT_EQ(t.end_reason, memtide::fmt::EndReason::Signal);
  EXPECT_EQ(t.end_status, static_cast<uint64_t>(sig));
  EXPECT_GT(t.symbols, 0u) << "the follower appended the names";
}

// Ctrl-C: the terminal's SIGINT reaches the program, memtide run and its follower alike (one
// process group). The program ends by it, as it would untraced, and the run still finishes.
// (memtide run and its follower died with the program, leaving the trace without names and
// the terminal without a word.)
TEST(Wrapper, CtrlCEndsTheProgramAndTheRunStillFinishes) {
  TempDir dir;
  const fs::path out = dir.path() / "c.mtide";
  expect_finished_after(SIGINT, "(signal 2, INT)", out, run_then_signal(out, dir.path(), SIGINT, /*group=*/true));
}

// A SIGTERM or SIGHUP sent to memtide run alone (a supervisor; `docker stop` signals a
// container's first process only) is passed on to the program, which ends by it as it would
// untraced; the run finishes. (The program ran on, untouched, and memtide run died; as a
// container's first process it ignored SIGTERM, until the SIGKILL that took everything.) The
// same signal sent to the whole group ends the run the same way.
TEST(Wrapper, ATermOrHupSentToTheRunIsPassedOnToTheProgram) {
  for (const auto& [sig, note, group] : {std::tuple{SIGTERM, "(signal 15, TERM)", false},
                                         std::tuple{SIGHUP, "(signal 1, HUP)", false},
                                         std::tuple{SIGTERM, "(signal 15, TERM)", true}}) {
    SCOPED_TRACE(std::string(note) + (group ? " to the group" : " to memtide run"));
    TempDir dir;
    const fs::path out = dir.path() / "t.mtide";
    expect_finished_after(sig, note, out, run_then_signal(out, dir.path(), sig, group));
  }
}

// memtide run itself killed (SIGKILL: no trap runs) while the program goes on: its follower
// keeps naming the program's trace until the program ends, then removes the run's manifest and
// ends. (It polled the manifest for ever, and the manifest stayed behind.)
TEST(Wrapper, TheFollowerOfAKilledRunNamesTheTraceAndCleansUp) {
  TempDir dir;
  const fs::path out = dir.path() / "k.mtide";
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();
    setenv("TMPDIR", dir.path().c_str(), 1);  // where memtide run puts its manifest
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    execl(MT_WRAPPER, MT_WRAPPER, "run", "-o", out.c_str(), "--", MT_LIFECYCLE, "spin", nullptr);
    _exit(127);
  }
  auto manifests = [&] {
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(dir.path()))
      if (e.path().filename().string().rfind("memtide-run.", 0) == 0) found.push_back(e.path());
    return found;
  };
  for (int i = 0; i < 500 && !(fs::exists(out) && fs::file_size(out) > 100000); ++i) usleep(10000);
  const std::vector<fs::path> before = manifests();
  ASSERT_EQ(before.size(), 1u);
  pid_t program = 0;
  {
    std::ifstream m(before[0]);
    m >> program;  // the first line: the program's pid
  }
  ASSERT_GT(program, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  waitpid(pid, &status, 0);
  usleep(300000);  // the program runs on, recorded and followed
  ASSERT_EQ(kill(program, SIGTERM), 0);
  for (int i = 0; i < 1000 && !manifests().empty(); ++i) usleep(10000);
  EXPECT_TRUE(manifests().empty()) << "the follower removed the manifest";
  for (int i = 0; i < 200 && kill(-pid, 0) == 0; ++i) usleep(10000);
  EXPECT_NE(kill(-pid, 0), 0) << "a process of the run is left (the follower?)";
  kill(-pid, SIGKILL);
  const Replay t = replay_trace(out.string());
  ASSERT_TRUE(t.read_ok) << t.error;
  EXPECT_TRUE(t.ended);
  EXPECT_EQ(t.end_reason, memtide::fmt::EndReason::Signal);
  EXPECT_GT(t.symbols, 0u) << "the follower appended the names";
}

// A program killed by a signal: its status passes through (128 + signal), its own stderr is
// kept, and the note is memtide's, without the shell's line-numbered job report.
TEST(Wrapper, AProgramKilledByASignalIsReportedOnce) {
  TempDir dir;
  const fs::path out = dir.path() / "k.mtide";
  RunResult r = run({MT_WRAPPER, "run", "-q", "-o", out.string(), "--", "sh", "-c", "echo own-stderr >&2; kill -KILL $$"},
                    {}, dir.path());
  EXPECT_EQ(r.status, 137);
  EXPECT_NE(r.err.find("own-stderr"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("memtide: sh ended with status 137 (signal 9, KILL)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("line "), std::string::npos) << r.err;
}

// A status of 128 + N is a signal's only when the program did not exit with it: the trace's End
// record tells the two apart, also after an exec.
TEST(Wrapper, AnExitStatusAbove128IsNotTakenForASignal) {
  TempDir dir;
  const fs::path out = dir.path() / "s.mtide";
  struct Case {
    const char* script;
    int status;
    const char* note;  // nullptr: no note
  };
  for (const Case& c : {Case{"exit 130", 130, nullptr}, Case{"kill -TERM $$", 143, "(signal 15, TERM)"},
                        Case{"exec sh -c 'exit 131'", 131, nullptr},
                        Case{"exec sh -c 'kill -TERM $$'", 143, "(signal 15, TERM)"}}) {
    RunResult r = run({MT_WRAPPER, "run", "-q", "-o", out.string(), "--", "sh", "-c", c.script}, {}, dir.path());
    EXPECT_EQ(r.status, c.status) << c.script << "\n" << r.err;
    if (c.note)
      EXPECT_NE(r.err.find(std::string("memtide: sh ended with status ") + std::to_string(c.status) + " " + c.note),
                std::string::npos)
          << c.script << "\n" << r.err;
    else
      EXPECT_EQ(r.err.find("ended with status"), std::string::npos) << c.script << "\n" << r.err;
  }
}

TEST(Wrapper, HelpListsEveryOptionWithItsDefault) {
  TempDir dir;
  RunResult r = run({MT_WRAPPER, "run", "--help"}, {}, dir.path());
  EXPECT_EQ(r.status, 0);
  for (const char* s : {"--max-depth", "--no-follow", "--allocator", "-o, --output", "default: 64", "MEMTIDE_ALLOCATOR"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << " missing from:\n" << r.out;
}

// `memtide run --check`: the gate's verdict is the exit status, unless the program failed.
TEST(Wrapper, RunCheckGatesAndTheProgramsFailureWins) {
  TempDir dir;
  const std::string out = (dir.path() / "c.mtide").string();
  RunResult leaky = run({MT_WRAPPER, "run", "--quiet", "--check", "-o", out, "--", MT_LIFECYCLE, "pause"}, {}, dir.path());
  EXPECT_EQ(leaky.status, 1) << leaky.out << leaky.err;
  RunResult allowed = run({MT_WRAPPER, "run", "--quiet", "--check", "--max-leaked-bytes", "100000", "-o", out, "--",
                           MT_LIFECYCLE, "pause"},
                          {}, dir.path());
  EXPECT_EQ(allowed.status, 0) << allowed.out << allowed.err;
  RunResult failing = run({MT_WRAPPER, "run", "--quiet", "--check", "-o", out, "--", MT_LIFECYCLE, "quick-exit"}, {}, dir.path());
  EXPECT_EQ(failing.status, 3) << "the program's own exit status wins over the gate";
}

// The lines after the program's end come from the follower, which replayed each trace's totals
// while it was written (so that `memtide run` ends when the program does, whatever the trace's
// size): they are the lines a replay of the finished trace gives (`memtide summary`), here for
// 8 threads with cross-thread frees, a known peak and known leaks.
TEST(Wrapper, SummaryKeptByTheFollowerIsTheReplaysSummary) {
  TempDir dir;
  const fs::path out = dir.path() / "s.mtide";
  const std::string cli = (fs::path(MT_WRAPPER).parent_path() / "memtide-cli").string();
  RunResult r = run({MT_WRAPPER, "run", "-o", out.string(), "--", MT_EXACT}, {}, dir.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto from = r.err.find(out.string() + "\n  ");
  ASSERT_NE(from, std::string::npos) << r.err;
  const std::string printed = r.err.substr(from);

  // The follower's own output, on the finished trace: a manifest that names it, the program
  // said to have ended.
  const fs::path manifest = dir.path() / "manifest";
  std::ofstream(manifest) << "1\t0\t" << out.string() << "\n";
  std::ofstream(manifest.string() + ".ended");
  const fs::path kept = dir.path() / "summary.txt";
  RunResult f = run({cli, "symbolize", "--quiet", "--manifest", manifest.string(), "--summary", kept.string()}, {},
                    dir.path());
  ASSERT_EQ(f.status, 0) << f.err;
  std::ifstream in(kept);
  const std::string followed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  struct stat st;
  ASSERT_EQ(stat(kept.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  RunResult s = run({cli, "summary", "--manifest", manifest.string()}, {}, dir.path());
  ASSERT_EQ(s.status, 0) << s.err;
  EXPECT_NE(s.out.find("blocks not freed"), std::string::npos) << s.out;
  EXPECT_EQ(followed, s.out);
  EXPECT_EQ(printed, s.out);
}

// A program started by a symlink's name (redis-server is a link to redis-check-rdb) is named as
// it was started, with the executable's path beside it: in the report, the flamegraph and the
// summary of the run.
TEST(Wrapper, AProgramIsNamedAsItWasStarted) {
  TempDir dir;
  const fs::path link = dir.path() / "my-server";
  fs::create_symlink(fs::canonical(MT_LIFECYCLE), link);
  const fs::path out = dir.path() / "n.mtide";
  RunResult r = run({MT_WRAPPER, "run", "-o", out.string(), "--", link.string(), "quick-exit"}, {}, dir.path());
  ASSERT_EQ(r.status, 3) << r.err;
  const std::string cli = (fs::path(MT_WRAPPER).parent_path() / "memtide-cli").string();
  RunResult rep = run({cli, "report", out.string()}, {}, dir.path());
  ASSERT_EQ(rep.status, 0) << rep.err;
  const std::string expected = "my-server (" + fs::canonical(MT_LIFECYCLE).string() + "), pid ";
  EXPECT_NE(rep.out.find("program     " + expected), std::string::npos) << rep.out;
  const fs::path svg = dir.path() / "n.svg";
  RunResult fg = run({cli, "flamegraph", out.string(), "-o", svg.string()}, {}, dir.path());
  ASSERT_EQ(fg.status, 0) << fg.err;
  std::ifstream in(svg);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("my-server ("), std::string::npos);
}

// A stripped program (as distributions ship them) is named through debuginfod when
// DEBUGINFOD_URLS is set, as libdw's client does it: Debian's debuginfod serves a directory
// holding the program's separate debug file on 127.0.0.1, memtide run's follower resolves the
// frames with it and appends the names, and a report made without the server shows them.
TEST(Wrapper, AStrippedProgramIsNamedThroughDebuginfod) {
  TempDir dir;
  const fs::path src = dir.path() / "stripped.c", prog = dir.path() / "stripped", srv = dir.path() / "srv";
  fs::create_directories(srv);
  std::ofstream(src) << "#include <stdlib.h>\n"
                        "__attribute__((noinline)) void *make_widget(int n) { return malloc(n * 16); }\n"
                        "__attribute__((noinline)) void leak_widgets(void) {\n"
                        "  for (int i = 0; i < 3; i++) { void *volatile p = make_widget(i + 1); (void)p; }\n"
                        "}\n"
                        "int main(void) { leak_widgets(); return 0; }\n";
  auto sh = [&](const std::string& cmd) { return run({"/bin/sh", "-c", cmd}, {}, dir.path()); };
  ASSERT_EQ(sh("cc -g -O1 -Wl,--build-id -o " + prog.string() + " " + src.string()).status, 0);
  ASSERT_EQ(sh("objcopy --only-keep-debug " + prog.string() + " " + (srv / "stripped.debug").string() +
               " && strip -s " + prog.string()).status, 0);
  RunResult id = sh("readelf -n " + prog.string() + " | awk '/Build ID/ { print $3 }'");
  ASSERT_FALSE(id.out.empty());
  const std::string build_id = id.out.substr(0, id.out.find('\n'));

  // The server, on a port of this test's own; ready once it serves the debug file.
  const int port = 20000 + ::getpid() % 20000;
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  const pid_t server = fork();
  if (server == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execlp("debuginfod", "debuginfod", "-p", std::to_string(port).c_str(), "-F", srv.c_str(), "-d",
           (dir.path() / "db.sqlite").c_str(), "-t", "1", nullptr);
    _exit(127);
  }
  const std::vector<std::pair<std::string, std::string>> env = {
      {"DEBUGINFOD_URLS", url}, {"DEBUGINFOD_CACHE_PATH", (dir.path() / "dcache").string()},
      {"MEMTIDE_CACHE_DIR", (dir.path() / "mcache").string()}};
  bool served = false;
  for (int i = 0; i < 120 && !served; ++i) {
    // (a cache of its own for each try: the client remembers a miss for ten minutes)
    served = run({"debuginfod-find", "debuginfo", build_id},
                 {{"DEBUGINFOD_URLS", url}, {"DEBUGINFOD_CACHE_PATH", (dir.path() / ("probe" + std::to_string(i))).string()}},
                 dir.path(), 10)
                 .status == 0;
    if (!served) usleep(250000);
  }
  const fs::path out = dir.path() / "s.mtide";
  RunResult r = run({MT_WRAPPER, "run", "-q", "-o", out.string(), "--", prog.string()}, env, dir.path());
  kill(server, SIGTERM);
  waitpid(server, nullptr, 0);
  ASSERT_TRUE(served) << "debuginfod did not serve the debug file (is the debuginfod package installed?)";
  ASSERT_EQ(r.status, 0) << r.err;

  const std::string cli = (fs::path(MT_WRAPPER).parent_path() / "memtide-cli").string();
  RunResult rep = run({cli, "report", out.string()}, {{"MEMTIDE_CACHE_DIR", ""}}, dir.path());
  ASSERT_EQ(rep.status, 0) << rep.err;
  EXPECT_NE(rep.out.find("make_widget (stripped.c:2)"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("leak_widgets (stripped.c:4)"), std::string::npos) << rep.out;
}

// The trace name's %e (as in the default name) is the program as started too (a symlink's name, not its target's).
TEST(Wrapper, TheDefaultTraceNameUsesTheNameTheProgramWasStartedBy) {
  TempDir dir;
  const fs::path link = dir.path() / "my-server";
  fs::create_symlink(fs::canonical(MT_LIFECYCLE), link);
  RunResult r = run({MT_WRAPPER, "run", "-q", "-o", (dir.path() / "memtide.%e.%p.mtide").string(), "--", link.string(),
                     "quick-exit"},
                    {}, dir.path());
  ASSERT_EQ(r.status, 3) << r.err;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path()))
    if (e.path().extension() == ".mtide") names.push_back(e.path().filename().string());
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0].rfind("memtide.my-server.", 0), 0u) << names[0];
}
