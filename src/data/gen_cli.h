// `pstrain gen`: writes synthetic data sets.
//
//   pstrain gen criteo --rows N --out DIR [--shards K] [--test-rows M]
//                      [--seed S] [--zipf Z]
//   pstrain gen libsvm --rows N --out DIR [--shards K] [--test-rows M]
//                      [--seed S] [--features F] [--zipf Z]
//
// each prints one JSON line on stdout, e.g.
//   {"gen":"criteo","rows":N,"shards":K,"test_rows":M,"out":"DIR","planted_auc":0.7712}
#pragma once

#include <string>
#include <vector>

namespace pstrain {

// `args` excludes "gen". Returns the exit status: 0 done, 1 writing failed,
// 2 bad command line (one line on stderr).
int RunGen(const std::vector<std::string>& args);

}  // namespace pstrain
