// The replay as the session driver (session.cpp) sees it. The Replayer (replay.cpp) is the
// visitor that turns merged records into a Model; its handlers inline into the loop that plays
// a batch, so the class stays inside replay.cpp and the driver holds it by pointer.
#pragma once

#include <memory>

#include "analysis/batches.h"
#include "analysis/model.h"
#include "analysis/replay.h"
#include "formats/checkpoint.h"

namespace memtide::analysis::detail {

class Replayer;
struct ReplayerDelete {
  void operator()(Replayer* r) const;
};
using ReplayerPtr = std::unique_ptr<Replayer, ReplayerDelete>;

// A replay into `m` with the options `o` (both outlive it).
ReplayerPtr make_replayer(Model& m, const ReplayOptions& o);
// Replays a batch of merged events in order.
void replay_batch(Replayer& rp, const Batch& b, fmt::DecodeScratch& scratch);
// Replays what `merger` still holds (no more blocks will come).
void replay_rest(Replayer& rp, fmt::EventMerger& merger);
// Finishes `out`, a copy of the model being built, as if the trace ended here: leaks, peaks by
// stack, threads, warnings. The replay's own state is not changed, so it can go on.
void finish_into(const Replayer& rp, Model& out);
// Whether a window's replay went past its stop (its end, or `at` when later): nothing further
// in the file changes the model.
bool passed(const Replayer& rp);

// A windowed replay from a checkpoint: each of its live blocks (not counted: made before the
// window), then its head, after which the events timed before it are skipped (they are in it).
void seed(Replayer& rp, fmt::CheckpointDomain d, const fmt::CheckpointEntry& e);
void seed_done(Replayer& rp, const fmt::CheckpointHead& h);
// A kept trace read from its first checkpoint, without a window asked for (before seed()): the
// blocks of the checkpoint never freed are leaks by their stacks (StackMetrics::before_range_*).
void count_before_range(Replayer& rp);
// A Marker of a thread's stream timed before the checkpoint (in the heads up to it).
void seed_marker(Replayer& rp, const fmt::CheckpointHead::MarkerCopy& m);
// Replays one block's records in file order, outside the merge (the blocks before a
// checkpoint's replay_from: their events, all before it, are skipped).
fmt::ReadResult replay_block(Replayer& rp, const fmt::Block& b, fmt::DecodeScratch& scratch);

}  // namespace memtide::analysis::detail
