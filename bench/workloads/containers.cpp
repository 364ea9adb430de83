// Compiled (not run) by the g++ benchmark workload (bench/run): a translation unit that
// instantiates the standard containers and algorithms over five element types, so that the
// compiler allocates the way it does on real template-heavy C++ code.
#include <algorithm>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

namespace bench {

template <int N>
struct Pod {
  int a[N];
  bool operator<(const Pod& o) const { return a[0] < o.a[0]; }
  bool operator==(const Pod& o) const { return a[0] == o.a[0]; }
};

template <typename T>
struct Hash {
  size_t operator()(const T& v) const { return std::hash<std::string>{}(key(v)); }
  static std::string key(const T& v) {
    if constexpr (requires { v.a[0]; }) return std::to_string(v.a[0]);
    else if constexpr (requires { std::to_string(v); }) return std::to_string(v);
    else return std::string(v.begin(), v.end());
  }
};

template <typename T>
T make(int i) {
  if constexpr (requires { T{}.a[0]; }) {
    T v{};
    v.a[0] = i;
    return v;
  } else if constexpr (std::is_arithmetic_v<T>) {
    return static_cast<T>(i);
  } else {
    return T(static_cast<size_t>(i % 50 + 1), 'x');
  }
}

template <typename T>
size_t exercise(int n) {
  std::vector<T> vec;
  std::deque<T> dq;
  std::list<T> lst;
  std::set<T> st;
  std::multiset<T> mst;
  std::map<T, std::vector<T>> mp;
  std::unordered_map<T, std::list<T>, Hash<T>> ump;
  std::unordered_set<T, Hash<T>> ust;
  for (int i = 0; i < n; ++i) {
    T v = make<T>(i);
    vec.push_back(v);
    dq.push_front(v);
    lst.push_back(v);
    st.insert(v);
    mst.insert(v);
    mp[v].push_back(v);
    ump[v].push_front(v);
    ust.insert(v);
  }
  std::sort(vec.begin(), vec.end());
  std::stable_sort(dq.begin(), dq.end());
  lst.sort();
  lst.unique();
  auto it = std::lower_bound(vec.begin(), vec.end(), make<T>(n / 2));
  std::vector<std::pair<T, size_t>> pairs;
  for (auto& [k, v] : mp) pairs.emplace_back(k, v.size());
  std::optional<T> first = vec.empty() ? std::nullopt : std::optional<T>(vec.front());
  std::variant<T, int, std::string> var(std::in_place_index<0>, make<T>(3));
  auto up = std::make_unique<std::vector<T>>(vec.begin(), it);
  auto sp = std::make_shared<std::map<T, int>>();
  for (auto& v : st) (*sp)[v] = 1;
  return vec.size() + dq.size() + lst.size() + mst.size() + ump.size() + ust.size() +
         pairs.size() + (first ? 1 : 0) + var.index() + up->size() + sp->size();
}

template <typename... Ts>
size_t exercise_all(int n) {
  return (exercise<Ts>(n) + ...);
}

// BENCH_SMALL (the harness's --short mode) instantiates for two types instead of five.
size_t run(int n) {
#ifdef BENCH_SMALL
  return exercise_all<int, std::string>(n);
#else
  return exercise_all<int, double, std::string, std::wstring, Pod<3>>(n);
#endif
}

}  // namespace bench

int main(int argc, char**) { return static_cast<int>(bench::run(argc * 100) & 1); }
