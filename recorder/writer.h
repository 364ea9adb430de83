// The writer thread (writer.cpp): drains the threads' chunks into blocks of the trace file.
#pragma once

#include <cstdint>

#include "formats/records.h"
#include "recorder/stream.h"

namespace memtide::rec {

void writer_start();
// Asks the writer for a last flush with an End record and waits (at most `timeout_ms`).
void writer_finish(fmt::EndReason reason, uint64_t status, int timeout_ms);
// Hands a sealed chunk to the writer. With `may_wait`, waits while the writer is far behind
// (only callers that hold no lock the writer takes: not the process stream's).
void enqueue_chunk(Chunk* c, bool may_wait);
// Compresses [p, p + n) as one block of `stream` and appends it (the writer thread only).
void writer_write_block(uint32_t stream, uint64_t base_time, uint64_t base_addr, const uint8_t* p, size_t n,
                        uint16_t flags);
// Waits (a few seconds at most) while much is queued for the writer: for long runs of records
// into the process stream, whose appends never wait themselves.
void wait_for_writer();

}  // namespace memtide::rec
