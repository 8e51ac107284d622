//===- Svg.cpp - SVG timelines of simulated schedules ---------------------===//

#include "braid/Schedule/Render.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir::braid::sched;

namespace {
struct Style {
  const char *fill;
  const char *text;
};

/// Colours per pass; chunk 1 and later get the lighter shade so that the two
/// halves of a V or the rounds of an interleaved schedule stay apart.
Style getStyle(ActionKind kind, int chunk) {
  bool light = chunk % 2 == 1;
  switch (kind) {
  case ActionKind::Forward:
    return light ? Style{"#a0cbe8", "#1b1b1b"} : Style{"#4e79a7", "#ffffff"};
  case ActionKind::Backward:
    return light ? Style{"#8cd17d", "#1b1b1b"} : Style{"#3d8b37", "#ffffff"};
  case ActionKind::Weight:
    return light ? Style{"#ffbe7d", "#1b1b1b"} : Style{"#e8762b", "#ffffff"};
  case ActionKind::FullBackward:
    return light ? Style{"#d4a6c8", "#1b1b1b"} : Style{"#8e5b84", "#ffffff"};
  default:
    return {"#999999", "#000000"};
  }
}

/// A tick spacing of 1, 2 or 5 times a power of ten giving about `target`
/// ticks over `range`.
double getTickStep(double range, int target) {
  if (range <= 0)
    return 1;
  double raw = range / target;
  double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double mult : {1.0, 2.0, 5.0, 10.0})
    if (raw <= mult * power)
      return mult * power;
  return 10 * power;
}
} // namespace

void mlir::braid::sched::writeSvgTimeline(llvm::raw_ostream &os,
                                          const Schedule &schedule,
                                          const SimulationResult &result) {
  const double left = 64, top = 44, rowHeight = 26, rowGap = 6,
               plotWidth = 1100, axisHeight = 34, legendHeight = 30;
  int p = schedule.numRanks;
  double origin = std::numeric_limits<double>::infinity(), last = 0;
  for (int r = 0; r < p; ++r) {
    origin = std::min(origin, result.rankStart[r]);
    last = std::max(last, result.rankEnd[r]);
  }
  if (!std::isfinite(origin))
    origin = 0;
  double span = std::max(last - origin, 1e-12);
  double scale = plotWidth / span;
  double plotBottom = top + p * (rowHeight + rowGap);
  double width = left + plotWidth + 20;
  double height = plotBottom + axisHeight + legendHeight;

  os << llvm::formatv("<svg xmlns=\"http://www.w3.org/2000/svg\" "
                      "width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
                      "font-family=\"Helvetica, Arial, sans-serif\">\n",
                      width, height);
  os << llvm::formatv("<rect width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n",
                      width, height);
  std::string title = llvm::formatv(
      "{0} &#183; p = {1}, m = {2}{3} &#183; makespan {4} &#183; bubble "
      "rate {5:f3} &#183; peak memory {6} M_B",
      schedule.name, p, schedule.numMicrobatches,
      schedule.numChunks > 1
          ? llvm::formatv(", v = {0}", schedule.numChunks).str()
          : std::string(),
      formatNumber(result.makespan), result.bubbleRate,
      formatNumber(result.getMaxPeakMemory(), 4));
  os << llvm::formatv("<text x=\"{0}\" y=\"24\" font-size=\"15\" "
                      "font-weight=\"bold\">{1}</text>\n",
                      left, title);

  for (int r = 0; r < p; ++r) {
    double y = top + r * (rowHeight + rowGap);
    os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" font-size=\"12\" "
                        "text-anchor=\"end\">rank {2}</text>\n",
                        left - 8, y + rowHeight / 2 + 4, r);
    os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" "
                        "height=\"{3}\" fill=\"#f3f3f3\"/>\n",
                        left, y, plotWidth, rowHeight);
    for (auto [i, a] : llvm::enumerate(schedule.ranks[r])) {
      if (!a.isCompute())
        continue;
      const TimedAction &t = result.timeline[r][i];
      double x = left + (t.start - origin) * scale;
      double w = (t.end - t.start) * scale;
      Style style = getStyle(a.kind, a.chunk);
      os << llvm::formatv("<rect x=\"{0:f2}\" y=\"{1}\" width=\"{2:f2}\" "
                          "height=\"{3}\" fill=\"{4}\" stroke=\"#ffffff\" "
                          "stroke-width=\"0.6\"><title>{5} start {6} end "
                          "{7}</title></rect>\n",
                          x, y, w, rowHeight, style.fill, formatAction(a),
                          formatNumber(t.start), formatNumber(t.end));
      // The micro-batch number, if it fits.
      std::string label = std::to_string(a.microbatch);
      double fontSize = std::min(12.0, w / (0.62 * label.size() + 0.4));
      if (fontSize >= 5)
        os << llvm::formatv("<text x=\"{0:f2}\" y=\"{1:f2}\" "
                            "font-size=\"{2:f1}\" fill=\"{3}\" "
                            "text-anchor=\"middle\">{4}</text>\n",
                            x + w / 2, y + rowHeight / 2 + fontSize * 0.35,
                            fontSize, style.text, label);
    }
  }

  // Time axis.
  double axisY = plotBottom + 2;
  os << llvm::formatv("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" "
                      "stroke=\"#333333\"/>\n",
                      left, axisY, left + plotWidth);
  double step = getTickStep(span, 10);
  for (double t = 0; t <= span * (1 + 1e-9); t += step) {
    double x = left + t * scale;
    os << llvm::formatv("<line x1=\"{0:f2}\" y1=\"{1}\" x2=\"{0:f2}\" "
                        "y2=\"{2}\" stroke=\"#333333\"/>\n",
                        x, axisY, axisY + 5);
    os << llvm::formatv("<text x=\"{0:f2}\" y=\"{1}\" font-size=\"11\" "
                        "text-anchor=\"middle\">{2}</text>\n",
                        x, axisY + 17, formatNumber(t, 4));
  }
  os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" font-size=\"11\" "
                      "text-anchor=\"end\">time</text>\n",
                      left - 8, axisY + 17);

  // Legend: only the passes this schedule uses.
  bool used[4] = {false, false, false, false};
  for (const std::vector<Action> &actions : schedule.ranks)
    for (const Action &a : actions)
      if (a.isCompute())
        used[static_cast<int>(a.kind)] = true;
  const char *names[4] = {"F forward", "B input gradient", "W weight gradient",
                          "BW full backward"};
  double x = left, legendY = plotBottom + axisHeight;
  for (int k = 0; k < 4; ++k) {
    if (!used[k])
      continue;
    Style style = getStyle(static_cast<ActionKind>(k), 0);
    os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"14\" "
                        "height=\"14\" fill=\"{2}\"/>\n",
                        x, legendY, style.fill);
    os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" font-size=\"12\">{2}"
                        "</text>\n",
                        x + 19, legendY + 12, names[k]);
    x += 160;
  }
  if (schedule.numChunks > 1)
    os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" font-size=\"12\">(lighter: "
                        "odd chunks; numbers: micro-batches)</text>\n",
                        x, legendY + 12);
  else
    os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" font-size=\"12\">(numbers: "
                        "micro-batches)</text>\n",
                        x, legendY + 12);
  os << "</svg>\n";
}
