// bench kv's security: what its in-process cluster runs with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/common/config/options.h"
#include "src/common/status.h"

namespace pstrain {

// TLS files and the cluster token, from PSTRAIN_TLS_* and MS_CLUSTER_TOKEN
// (as a node reads them); none set: plaintext, no token.
struct KvSecurity {
  TlsFiles tls;
  std::string token;
  std::string name() const;  // "plain", "tls", "token" or "tls+token"
};

// Every case once with `security`; with rounds > 0, each case `rounds` times
// plain and `rounds` times with `security`, alternated, and a line with the
// median goodputs and their ratio.
Status RunKvBench(const std::vector<int64_t>& sizes, const std::vector<int>& servers,
                  const std::vector<int>& workers, const KvSecurity& security, int rounds);

}  // namespace pstrain
