// Typed indices of the analysis model: a StackId cannot be passed where a ModuleId is meant.
// Each wraps the raw number the trace uses (stack ids are trie node ids of the recorder,
// module ids those of ModuleLoad records); 0 is "none" for stacks (the empty stack).
#pragma once

#include <cstdint>
#include <functional>

namespace memtide::analysis {

template <class Tag, class T = uint64_t>
struct TypedId {
  T value = 0;
  constexpr TypedId() = default;
  constexpr explicit TypedId(T v) : value(v) {}
  constexpr bool operator==(const TypedId&) const = default;
  constexpr auto operator<=>(const TypedId&) const = default;
};

using StackId = TypedId<struct StackTag>;    // trie node: the stack from the root to it
using ModuleId = TypedId<struct ModuleTag>;  // ModuleLoad::module_id
using ThreadId = TypedId<struct ThreadTag, uint32_t>;  // stream / thread index of the trace

}  // namespace memtide::analysis

template <class Tag, class T>
struct std::hash<memtide::analysis::TypedId<Tag, T>> {
  std::size_t operator()(const memtide::analysis::TypedId<Tag, T>& id) const noexcept {
    return std::hash<T>{}(id.value);
  }
};
