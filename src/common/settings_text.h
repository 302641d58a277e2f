// Settings as text: "key: value" lines in key order, as a config's identity
// texts are written (src/common/config/identity.h), and the one line that
// names how two such texts differ. Here, below the config, so that a
// checkpoint's MANIFEST (src/common/checkpoint_file.h) can name how the job
// that wrote it differs from this one.
#pragma once

#include <string>

namespace pstrain {

// The first `max_keys` keys whose values differ between two such texts, as
// "train.optimizer.lr is 0.5 <a_name>, 0.05 <b_name>; ..." (a key one text
// lacks shows as "not set"), plus "and N more" when there are. Empty when
// the texts hold the same settings.
std::string DescribeConfigDifference(const std::string& a, const std::string& a_name,
                                     const std::string& b, const std::string& b_name,
                                     int max_keys = 3);

}  // namespace pstrain
