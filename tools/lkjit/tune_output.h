// Printers of `lkjit tune`: the ranked table, CSV, JSON (SI units) and the plot's input, all from one
// TuneReport; and temp-then-rename file output.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "lkjit/tuning.h"
#include "tools/lkjit/svg_plot.h"

namespace lkjit::tool {

std::string kernel_label(const KernelTuneResult& k);  // "wtconv_fwd_level l=2"

void print_device(std::ostream& os, const DeviceInfo& d);
// Ranked candidates of one kernel: config, median ms, noise, GB/s (layer traffic model), % of best,
// registers, spills, shared memory; then failures with their reasons (first line).
void print_ranked(std::ostream& os, const KernelTuneResult& k, double traffic_bytes);
void print_summary(std::ostream& os, const TuneReport& r);

std::string tune_csv(const TuneReport& r);
std::string tune_json(const TuneReport& r, const TuneOptions& o, const std::vector<std::string>& argv,
                      const std::string& reproduce);
std::vector<PlotKernel> plot_input(const TuneReport& r);

}  // namespace lkjit::tool
