#include "viewer/compare_model.h"

namespace memtide::viewer {

BaselineView make_baseline_view(std::shared_ptr<const analysis::Model> model, analysis::Symbolizer& sym,
                                TimeRange window, const std::function<void()>& check) {
  BaselineView b;
  b.window = window;
  b.model = std::move(model);
  for (unsigned dom = 0; dom < analysis::kDomainCount; ++dom)
    for (unsigned m = 0; m < kMetricCount; ++m)
      for (unsigned d = 0; d < 2; ++d) {
        auto t = std::make_shared<analysis::CallTree>();
        t->build(*b.model, sym, static_cast<analysis::Domain>(dom), static_cast<analysis::Metric>(m), d == 1);
        b.trees[dom][m][d] = std::move(t);
        if (check) check();
      }
  return b;
}

CompareData make_compare(const std::string& path, const BaselineView& before, const ViewData& after) {
  CompareData c;
  c.path = path;
  c.window = after.window;
  c.model = before.model;
  c.after = after.model;
  for (unsigned dom = 0; dom < analysis::kDomainCount; ++dom)
    for (unsigned m = 0; m < kMetricCount; ++m) {
      const auto& b = before.trees[dom][m];
      const auto domain = static_cast<analysis::Domain>(dom);
      const auto metric = static_cast<analysis::Metric>(m);
      const auto top = after.tree(domain, metric, Direction::TopDown), bottom = after.tree(domain, metric, Direction::BottomUp);
      if (!b[0] || !b[1] || !top || !bottom) continue;
      c.flames[dom][m][0] = std::make_shared<FlameTree>(make_diff_flame(b[0], top, false));
      c.flames[dom][m][1] = std::make_shared<FlameTree>(make_diff_flame(b[0], top, true));
      c.sites[dom][m] = std::make_shared<std::vector<DiffRow>>(diff_sites(*b[1], *bottom));
    }
  c.complete = true;
  return c;
}

}  // namespace memtide::viewer
