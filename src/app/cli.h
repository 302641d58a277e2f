// The command line of the pstrain executable: its subcommands, parsed with
// CLI11, and the version line. main.cc dispatches on the first word; each
// subcommand parses the rest (with --help of its own).
#pragma once

#include <string>
#include <vector>

namespace pstrain {

// One subcommand: `pstrain <name> ...`; `run` gets the arguments after the
// name and returns the exit status.
struct Subcommand {
  const char* name;
  const char* synopsis;  // its arguments, for the usage
  const char* summary;   // what it does, one line
  int (*run)(const std::vector<std::string>& args);
};

// `pstrain export|eval|check|plot ...`: the command line into the options
// of src/app/commands.h, then the command.
int RunExportCli(const std::vector<std::string>& args);
int RunEvalCli(const std::vector<std::string>& args);
int RunScaleCli(const std::vector<std::string>& args);
int RunCheckCli(const std::vector<std::string>& args);
int RunPlotCli(const std::vector<std::string>& args);
// `pstrain launch --hostfile FILE | --hosts H1,H2 ...`: a job over ssh
// (src/app/launch_cmd.cc).
int RunLaunchCli(const std::vector<std::string>& args);

// "pstrain 0.2.0 (CUDA: yes, NCCL: yes, native: yes, Release)", from the
// generated build_info.h.
std::string VersionLine();

}  // namespace pstrain
