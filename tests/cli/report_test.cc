// `lockstep report` end to end: the report of a short real run (and of a copy of it killed
// mid-line, overlaid) rendered by a real browser, headless Chromium: the screenshot is not
// blank, and in the DOM the browser built every chart has drawn primitives and parsed points
// (the page's own script counts them into data-drawn and data-points). Skipped, with the
// reason, where Chromium is not installed; CI installs it (scripts/setup.sh).
#include <zlib.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "cli/cli_test_util.h"
#include "test_env.h"

namespace lockstep::testing {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    const std::string probe = std::string("command -v ") + name + " >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return name;
  }
  return "";
}

// Runs headless Chromium on `html` with `mode` (--dump-dom or --screenshot=FILE); returns
// its standard output. A profile directory of its own, so parallel tests do not share one.
std::string RunChromium(const std::string& browser, const std::string& html, const std::string& mode,
                        const std::string& work) {
  const std::string cmd = "timeout 120 " + browser + " --headless --disable-gpu --no-sandbox --hide-scrollbars " +
                          "--user-data-dir=" + work + "/profile --window-size=1280,2600 " + mode + " file://" + html +
                          " >" + work + "/stdout 2>" + work + "/stderr";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd << "\n" << Slurp(work + "/stderr");
  return Slurp(work + "/stdout");
}

uint32_t BigEndian(const std::string& s, size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) | (uint32_t(uint8_t(s[at + 2])) << 8) |
         uint32_t(uint8_t(s[at + 3]));
}

struct Image {
  uint32_t width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;  // rows of width x channels bytes
};

// An 8-bit RGB or RGBA PNG (what Chromium writes): chunks, zlib, then the scanline filters.
Image DecodePng(const std::string& png) {
  Image img;
  if (png.size() < 8 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return img;
  std::string idat;
  uint32_t depth = 0, color = 0;
  for (size_t at = 8; at + 12 <= png.size();) {
    const uint32_t len = BigEndian(png, at);
    const std::string type = png.substr(at + 4, 4);
    if (type == "IHDR") {
      img.width = BigEndian(png, at + 8);
      img.height = BigEndian(png, at + 12);
      depth = uint8_t(png[at + 16]);
      color = uint8_t(png[at + 17]);
    } else if (type == "IDAT") {
      idat += png.substr(at + 8, len);
    }
    at += 12 + len;
  }
  if (depth != 8 || (color != 2 && color != 6)) return img;
  img.channels = color == 6 ? 4 : 3;
  const size_t stride = size_t(img.width) * img.channels;
  std::vector<uint8_t> raw((stride + 1) * img.height);
  uLongf raw_size = raw.size();
  if (uncompress(raw.data(), &raw_size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK) return {};
  img.pixels.assign(stride * img.height, 0);
  const size_t bpp = img.channels;
  for (size_t y = 0; y < img.height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* in = &raw[y * (stride + 1) + 1];
    uint8_t* out = &img.pixels[y * stride];
    const uint8_t* up = y > 0 ? &img.pixels[(y - 1) * stride] : nullptr;
    for (size_t x = 0; x < stride; ++x) {
      const int a = x >= bpp ? out[x - bpp] : 0, b = up ? up[x] : 0, c = up && x >= bpp ? up[x - bpp] : 0;
      int pred = 0;
      if (filter == 1) pred = a;
      if (filter == 2) pred = b;
      if (filter == 3) pred = (a + b) / 2;
      if (filter == 4) {
        const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
        pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      out[x] = uint8_t(in[x] + pred);
    }
  }
  return img;
}

TEST(Report, BadRunDirectoryIsExitTwoWithOneLine) {
  CommandResult r = RunLockstep({"report", "/nonexistent/run"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "lockstep: error: /nonexistent/run is not a run directory (no readable metrics.jsonl in it)\n");
}

TEST(Report, RealRunRendersInHeadlessChromium) {
  // A real run with checkpoints, validations and a straggler to draw.
  const std::string run = TrainTiny("report-run", 16, 4,
                                    {"--nproc", "2", "--set", "eval.every=4", "--set", "train.straggler_steps=5",
                                     "--inject-fault", "slow:rank=1:factor=3"});
  // The same run as a killed one leaves it: cut in the middle of its last training row.
  const std::string killed = MakeTempDir("report-killed");
  std::string metrics = Slurp(run + "/metrics.jsonl");
  const size_t last_step = metrics.rfind("{\"comm_bytes\"");
  ASSERT_NE(last_step, std::string::npos);
  std::ofstream(killed + "/metrics.jsonl") << metrics.substr(0, last_step + 40);

  const std::string html = run + "/overlay.html";
  CommandResult r = RunLockstep({"report", run, killed, "--out", html});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("1 torn line(s) ignored"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("report written to " + html + " (12 charts)"), std::string::npos) << r.out;
  const std::string page = Slurp(html);
  EXPECT_NE(page.find("straggler rank 1"), std::string::npos);

  const std::string browser = Chromium();
  if (browser.empty())
    LOCKSTEP_SKIP_OUTSIDE_CI("chromium is not installed (apt-get install chromium): browser check skipped");
  const std::string work = MakeTempDir("report-browser");

  // The DOM as the browser built it: every chart drew something, and line charts' points
  // were parsed by the browser's SVG engine.
  const std::string dom = RunChromium(browser, html, "--dump-dom", work);
  const std::regex svg_tag("<svg[^>]*data-chart=\"([a-z_]+)\"[^>]*>");
  std::set<std::string> seen;
  int charts = 0;
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), svg_tag); it != std::sregex_iterator(); ++it, ++charts) {
    const std::string tag = (*it)[0], chart = (*it)[1];
    seen.insert(chart);
    std::smatch drawn, points;
    ASSERT_TRUE(std::regex_search(tag, drawn, std::regex("data-drawn=\"([0-9]+)\"")))
        << "no count from the browser: " << tag;
    ASSERT_TRUE(std::regex_search(tag, points, std::regex("data-points=\"([0-9]+)\""))) << tag;
    EXPECT_GT(std::stoi(drawn[1]), 0) << chart << " drew nothing";
    if (chart != "step_split" && chart != "memory") {
      EXPECT_GE(std::stoi(points[1]), 2) << chart;
    }
  }
  EXPECT_EQ(charts, 12) << dom.substr(0, 2000);
  for (const char* c :
       {"loss", "loss_by_units", "lr", "grad_norm", "throughput", "comm_bytes", "rank_compute", "rank_wait", "step_split",
        "memory"})
    EXPECT_TRUE(seen.count(c)) << c;

  // The picture: a PNG of the requested size, mostly white but with a real share of drawn
  // pixels in many colours (a blank or failed page is one colour).
  const std::string png = work + "/report.png";
  RunChromium(browser, html, "--screenshot=" + png, work);
  const Image img = DecodePng(Slurp(png));
  ASSERT_EQ(img.width, 1280u);
  ASSERT_EQ(img.height, 2600u);
  size_t inked = 0;
  std::set<uint32_t> colours;
  for (size_t i = 0; i + img.channels <= img.pixels.size(); i += img.channels) {
    const uint8_t r8 = img.pixels[i], g8 = img.pixels[i + 1], b8 = img.pixels[i + 2];
    if (r8 < 200 || g8 < 200 || b8 < 200) ++inked;
    colours.insert((uint32_t(r8) << 16) | (uint32_t(g8) << 8) | b8);
  }
  const double share = double(inked) / (double(img.width) * img.height);
  EXPECT_GT(share, 0.01) << inked << " inked pixels";
  EXPECT_GT(colours.size(), 20u);
  std::system(("rm -rf " + work + " " + killed + " " + run).c_str());
}

}  // namespace
}  // namespace lockstep::testing
