// Sections: [1] helpers  [2] layout and frames  [3] the embedded script
#include "analysis/flamegraph_svg.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "analysis/format.h"
#include "analysis/xml.h"

namespace memtide::analysis {
namespace {

// ---------------------------------------------------------------------------------------
// [1] Helpers
// ---------------------------------------------------------------------------------------

std::string xml(std::string_view s) { return xml_escape(s); }

std::string amount(uint64_t v, bool bytes, const std::string& unit) {
  char buf[64];
  if (!bytes) {
    std::snprintf(buf, sizeof buf, "%llu %s", static_cast<unsigned long long>(v), unit.c_str());
    return buf;
  }
  return format_bytes(v, BytesStyle::Fixed2);
}

// Deterministic colour from the label, within the palette's hue range.
std::string colour(std::string_view label, const std::string& palette) {
  const uint64_t h = std::hash<std::string_view>{}(label);
  const int a = static_cast<int>(h % 55), b = static_cast<int>((h >> 8) % 80);
  int r, g, bl;
  if (palette == "red") r = 200 + a, g = 50 + b / 2, bl = 50 + b / 2;
  else if (palette == "blue") r = 60 + b / 2, g = 110 + b, bl = 200 + a;
  else if (palette == "green") r = 60 + b / 2, g = 180 + a, bl = 60 + b / 2;
  else r = 205 + a, g = 80 + b + a, bl = 40 + a / 2;
  char buf[32];
  std::snprintf(buf, sizeof buf, "rgb(%d,%d,%d)", std::min(r, 255), std::min(g, 255), std::min(bl, 255));
  return buf;
}

// ---------------------------------------------------------------------------------------
// [3] Script (kept as one raw string; it reads the geometry from data-* attributes)
// ---------------------------------------------------------------------------------------

const char* kScript = R"JS(
"use strict";
var svg = document.documentElement, W = +svg.getAttribute("data-width"), FH = +svg.getAttribute("data-fh");
var frames = [], details, matchedText, resetBtn, zoomed = null, searchTerm = null;
function fit(g) {
  var r = g.querySelector("rect"), t = g.querySelector("text"), w = +r.getAttribute("width");
  var name = g.getAttribute("data-short") || g.getAttribute("data-name"), x = +r.getAttribute("x");
  t.setAttribute("x", x + 3);
  var chars = Math.floor((w - 6) / 7);
  if (chars < 3) { t.textContent = ""; return; }
  t.textContent = name.length <= chars ? name : name.substring(0, chars - 2) + "..";
}
function place(g, x, w) {
  var r = g.querySelector("rect");
  r.setAttribute("x", x); r.setAttribute("width", Math.max(w, 0));
  fit(g);
}
function zoom(g) {
  zoomed = g;
  var zx = +g.getAttribute("data-x"), zw = +g.getAttribute("data-w"), zd = +g.getAttribute("data-d");
  frames.forEach(function (f) {
    var x = +f.getAttribute("data-x"), w = +f.getAttribute("data-w"), d = +f.getAttribute("data-d");
    var inside = x >= zx - 1e-12 && x + w <= zx + zw + 1e-12 && d >= zd;
    var ancestor = d < zd && x <= zx + 1e-12 && x + w >= zx + zw - 1e-12;
    if (inside) { f.style.display = ""; place(f, 10 + (x - zx) / zw * (W - 20), w / zw * (W - 20)); }
    else if (ancestor) { f.style.display = ""; f.classList.add("parent"); place(f, 10, W - 20); }
    else f.style.display = "none";
    if (!ancestor) f.classList.remove("parent");
  });
  resetBtn.style.opacity = zoomed === frames[0] ? "0" : "1";
}
function unzoom() { if (frames.length) zoom(frames[0]); }
function search(term) {
  searchTerm = term || null;
  var total = +svg.getAttribute("data-total"), matched = 0, spans = [];
  frames.forEach(function (f) {
    var r = f.querySelector("rect");
    if (searchTerm && f.getAttribute("data-name").indexOf(searchTerm) >= 0) {
      r.setAttribute("fill", "rgb(230,0,230)");
      var x = +f.getAttribute("data-x"), w = +f.getAttribute("data-w");
      // Count each matched range once (a match under a matched ancestor is already in it).
      if (!spans.some(function (s) { return x >= s[0] && x + w <= s[1]; })) { spans.push([x, x + w]); matched += w; }
    } else r.setAttribute("fill", f.getAttribute("data-fill"));
  });
  matchedText.textContent = searchTerm ? "Matched: " + (100 * matched).toFixed(1) + "% of " + svg.getAttribute("data-total-text") : "";
  return matched * total;
}
function init() {
  frames = Array.prototype.slice.call(document.querySelectorAll("g.f"));
  details = document.getElementById("details");
  matchedText = document.getElementById("matched");
  resetBtn = document.getElementById("unzoom");
  frames.forEach(function (f) {
    f.addEventListener("click", function (e) { zoom(f); e.stopPropagation(); });
    f.addEventListener("mouseover", function () { details.textContent = f.getAttribute("data-info"); });
    f.addEventListener("mouseout", function () { details.textContent = " "; });
    fit(f);
  });
  resetBtn.addEventListener("click", unzoom);
  document.getElementById("search").addEventListener("click", function () {
    var term = window.prompt("Search for a function (substring):", searchTerm || "");
    if (term !== null) search(term);
  });
  window.addEventListener("keydown", function (e) {
    if ((e.ctrlKey || e.metaKey) && e.key === "f") {
      e.preventDefault();
      var term = window.prompt("Search for a function (substring):", searchTerm || "");
      if (term !== null) search(term);
    } else if (e.key === "Escape") { search(null); unzoom(); }
  });
  resetBtn.style.opacity = "0";
  // "#zoom=NAME" zooms to the widest frame whose name contains NAME; "#search=TERM" highlights.
  var hash = decodeURIComponent((window.location && window.location.hash) || "").substring(1);
  hash.split("&").forEach(function (kv) {
    var i = kv.indexOf("="), k = kv.substring(0, i), v = kv.substring(i + 1);
    if (k === "search" && v) search(v);
    if (k === "zoom" && v) {
      var best = null;
      frames.forEach(function (f) {
        if (f.getAttribute("data-name").indexOf(v) >= 0 && (!best || +f.getAttribute("data-w") > +best.getAttribute("data-w"))) best = f;
      });
      if (best) zoom(best);
    }
  });
  svg.setAttribute("data-memtide-ready", String(frames.length));
}
window.memtide = { zoom: zoom, unzoom: unzoom, search: search };
init();
)JS";

}  // namespace

// ---------------------------------------------------------------------------------------
// [2] Layout and frames
// ---------------------------------------------------------------------------------------

void write_flamegraph_svg(const CallTree& tree, const SvgOptions& o, std::ostream& out) {
  const auto& nodes = tree.nodes();
  const uint64_t total = tree.total();
  const double usable = o.width - 20;
  struct Item {
    uint32_t id;
    double x;  // fraction of the total
    int depth;
  };
  // Visible frames, depth-first; children ordered by label so the layout is stable.
  std::vector<Item> items;
  int max_depth = 0;
  if (total > 0) {
    std::vector<Item> todo{{0, 0.0, 0}};
    while (!todo.empty()) {
      const Item it = todo.back();
      todo.pop_back();
      items.push_back(it);
      max_depth = std::max(max_depth, it.depth);
      std::vector<uint32_t> kids = nodes[it.id].children;
      std::sort(kids.begin(), kids.end(), [&](uint32_t a, uint32_t b) { return nodes[a].label < nodes[b].label; });
      double x = it.x;
      std::vector<Item> next;
      for (uint32_t k : kids) {
        const double w = static_cast<double>(nodes[k].total) / static_cast<double>(total);
        if (w >= o.min_width_fraction) next.push_back({k, x, it.depth + 1});
        x += w;
      }
      for (auto r = next.rbegin(); r != next.rend(); ++r) todo.push_back(*r);
    }
  }
  const int top = 60, bottom = 40;
  const int height = top + (max_depth + 1) * o.frame_height + bottom;
  const std::string total_text = amount(total, o.bytes, o.unit);

  out << "<?xml version=\"1.0\" standalone=\"no\"?>\n"
      << "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << o.width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << o.width << ' ' << height << "\" data-width=\"" << o.width << "\" data-fh=\""
      << o.frame_height << "\" data-total=\"" << total << "\" data-total-text=\"" << xml(total_text) << "\">\n"
      << "<style>\n"
      << "  text { font-family: monospace; font-size: 12px; fill: #000; }\n"
      << "  g.f { cursor: pointer; } g.f:hover rect { stroke: #000; stroke-width: 0.5; }\n"
      << "  g.parent rect { opacity: 0.6; }\n"
      << "  .title { font-size: 17px; text-anchor: middle; } .sub { fill: #555; text-anchor: middle; }\n"
      << "  .button { fill: #06c; cursor: pointer; } .button:hover { text-decoration: underline; }\n"
      << "</style>\n"
      << "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#fafaf5\"/>\n"
      << "<text class=\"title\" x=\"" << o.width / 2 << "\" y=\"22\">" << xml(o.title) << "</text>\n"
      << "<text class=\"sub\" x=\"" << o.width / 2 << "\" y=\"40\">" << xml(o.subtitle) << "</text>\n"
      << "<text id=\"unzoom\" class=\"button\" x=\"10\" y=\"22\">Reset zoom</text>\n"
      << "<text id=\"search\" class=\"button\" x=\"" << o.width - 70 << "\" y=\"22\">Search</text>\n"
      << "<text id=\"matched\" x=\"" << o.width - 250 << "\" y=\"" << height - 12 << "\"> </text>\n"
      << "<text id=\"details\" x=\"10\" y=\"" << height - 12 << "\"> </text>\n";
  if (total == 0)
    out << "<text class=\"sub\" x=\"" << o.width / 2 << "\" y=\"" << top + 20 << "\">(nothing to show: the metric is 0 everywhere)</text>\n";

  for (const Item& it : items) {
    const TreeNode& n = nodes[it.id];
    const bool root = it.id == 0;
    const std::string name = root ? "all" : std::string(n.label);
    const double wf = static_cast<double>(n.total) / static_cast<double>(total);
    const double px = 10 + it.x * usable, pw = wf * usable;
    const double py = top + (max_depth - it.depth) * o.frame_height;
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.2f%%", 100 * wf);
    std::string info = name + " — " + amount(n.total, o.bytes, o.unit) + " (" + pct + ")";
    if (!o.bytes || n.blocks != n.total) info += ", " + std::to_string(n.blocks) + (n.blocks == 1 ? " block" : " blocks");
    if (!n.file.empty()) {
      info += " — " + std::string(n.file);
      if (n.line) info += ":" + std::to_string(n.line);
    }
    if (!n.module.empty()) info += " [" + std::string(n.module) + "]";
    const std::string fill = root ? std::string("rgb(220,220,210)") : colour(n.label, o.palette);
    // The label in the box drops "(anonymous namespace)::" (the tooltip keeps the full name);
    // the same fitting rule as the script (7 px per character).
    std::string short_name = name;
    for (std::size_t p; (p = short_name.find("(anonymous namespace)::")) != std::string::npos;)
      short_name.erase(p, 23);
    const int chars = static_cast<int>((pw - 6) / 7);
    std::string label;
    if (chars >= 3)
      label = static_cast<int>(short_name.size()) <= chars ? short_name
                                                            : short_name.substr(0, static_cast<std::size_t>(chars - 2)) + "..";
    char geo[160];
    std::snprintf(geo, sizeof geo, "x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\"", px, py, pw, o.frame_height - 1);
    char data[96];
    std::snprintf(data, sizeof data, "data-x=\"%.9f\" data-w=\"%.9f\" data-d=\"%d\"", it.x, wf, it.depth);
    out << "<g class=\"f\" " << data << " data-name=\"" << xml(name) << "\"";
    if (short_name != name) out << " data-short=\"" << xml(short_name) << "\"";
    out << " data-fill=\"" << fill << "\" data-info=\""
        << xml(info) << "\"><title>" << xml(info) << "</title><rect " << geo << " rx=\"2\" fill=\"" << fill
        << "\"/><text x=\"" << px + 3 << "\" y=\"" << py + o.frame_height - 4 << "\">" << xml(label) << "</text></g>\n";
  }
  out << "<script type=\"text/ecmascript\"><![CDATA[" << kScript << "]]></script>\n</svg>\n";
}

}  // namespace memtide::analysis
