// PNG copies of `pstrain plot`'s SVG, made by rsvg-convert (Debian package
// librsvg2-bin) when it is installed: a rasteriser is too big a dependency
// for one optional output, and the SVG is the plot's real form.
#pragma once

#include <string>

#include "src/common/status.h"

namespace pstrain {

// Renders the SVG file at `svg_path` into a PNG at `png_path` (written to a
// temp file, then renamed). Gives up after `timeout_s` seconds.
// FailedPrecondition when rsvg-convert is not installed.
Status ConvertSvgToPng(const std::string& svg_path, const std::string& png_path,
                       int timeout_s = 60);

}  // namespace pstrain
