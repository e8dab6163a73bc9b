// Runs gnuplot (Debian's gnuplot-nox, on $PATH) on a script file: the PNGs
// of `gaptrain simulate` and the pictures of the monitoring dashboards.

#ifndef GAPTRAIN_SERVICES_PLOT_GNUPLOT_H_
#define GAPTRAIN_SERVICES_PLOT_GNUPLOT_H_

#include <string>

#include "services/base/status.h"

namespace gaptrain {

// Runs `gnuplot SCRIPT` to its end. FAILED_PRECONDITION when gnuplot is not
// installed (the message says how to install it); INTERNAL with gnuplot's
// output when the script fails.
Status RunGnuplot(const std::string& script_path);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_PLOT_GNUPLOT_H_
